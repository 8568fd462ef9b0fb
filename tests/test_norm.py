"""transformer_lib.norm: LayerNorm parity, the closed-form backward, the residual sublayer."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from transformer_lib.norm import LayerNorm, LayerNormFunction, ResidualSublayer, layer_norm_backward


@settings(max_examples=25, deadline=None)
@given(shape=st.lists(st.integers(1, 5), min_size=0, max_size=2), d=st.integers(2, 24), seed=st.integers(0, 999))
def test_layer_norm_matches_torch_float64(shape, d, seed):
    g = torch.Generator().manual_seed(seed)
    ours, theirs = LayerNorm(d).double(), nn.LayerNorm(d).double()
    ours.fused = False  # the written-out computation (the fused path is F.layer_norm itself)
    with torch.no_grad():
        ours.weight.copy_(torch.randn(d, generator=g)), ours.bias.copy_(torch.randn(d, generator=g))
        theirs.load_state_dict(ours.state_dict())
    z = torch.randn(*shape, d, generator=g, dtype=torch.float64, requires_grad=True)
    up = torch.randn(*shape, d, generator=g, dtype=torch.float64)
    a = (ours(z), *torch.autograd.grad(ours(z), (z, ours.weight, ours.bias), up))
    b = (theirs(z), *torch.autograd.grad(theirs(z), (z, theirs.weight, theirs.bias), up))
    assert max((x - y).abs().max().item() for x, y in zip(a, b)) <= 1e-9


@settings(max_examples=25, deadline=None)
@given(batch=st.integers(1, 4), length=st.integers(1, 6), d=st.integers(2, 32), seed=st.integers(0, 999))
def test_closed_form_backward_matches_autograd(batch, length, d, seed):
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(batch, length, d, generator=g, dtype=torch.float64, requires_grad=True)
    w = torch.randn(d, generator=g, dtype=torch.float64, requires_grad=True)
    b = torch.randn(d, generator=g, dtype=torch.float64, requires_grad=True)
    up = torch.randn(batch, length, d, generator=g, dtype=torch.float64)
    out = torch.nn.functional.layer_norm(z, (d,), w, b, 1e-5)
    auto = torch.autograd.grad(out, (z, w, b), up)
    manual = layer_norm_backward(up, z.detach(), w.detach(), 1e-5)
    for x, y in zip(auto, manual):
        assert (x - y).abs().max().item() <= 1e-10


@pytest.mark.parametrize("dtype, tol", [(torch.float64, 1e-12), (torch.float32, 1e-5)])
def test_fused_and_plain_paths_agree(dtype, tol):
    fused, plain = LayerNorm(12).to(dtype), LayerNorm(12).to(dtype)
    plain.fused = False
    with torch.no_grad():
        fused.weight.normal_(), fused.bias.normal_()
        plain.load_state_dict(fused.state_dict())
    z = torch.randn(3, 4, 12, dtype=dtype, requires_grad=True)
    a, b = fused(z), plain(z)
    assert (a - b).abs().max() <= tol
    ga, gb = torch.autograd.grad(a.sum(), z), torch.autograd.grad(b.sum(), z)
    assert (ga[0] - gb[0]).abs().max() <= 10 * tol


def test_layer_norm_function_gradcheck():
    inputs = (torch.randn(2, 3, 6, dtype=torch.float64, requires_grad=True),
              torch.randn(6, dtype=torch.float64, requires_grad=True),
              torch.randn(6, dtype=torch.float64, requires_grad=True))
    assert torch.autograd.gradcheck(lambda z, w, b: LayerNormFunction.apply(z, w, b, 1e-5), inputs)


def test_tokens_do_not_influence_each_other():
    norm = LayerNorm(8)
    z = torch.randn(2, 3, 8, requires_grad=True)
    out = norm(z)
    (grad,) = torch.autograd.grad(out[1, 2].sum(), z)
    grad[1, 2] = 0
    assert torch.all(grad == 0)


@pytest.mark.parametrize("norm_first", [False, True])
def test_residual_sublayer_formula(norm_first):
    block = ResidualSublayer(8, dropout=0.0, norm_first=norm_first)
    f = nn.Linear(8, 8)
    x = torch.randn(2, 3, 8)
    expected = x + f(block.norm(x)) if norm_first else block.norm(x + f(x))
    torch.testing.assert_close(block(x, f), expected)


def test_layer_norm_bad_width():
    with pytest.raises(ValueError, match=r"d_model=8.*got \[2, 3, 4\]"):
        LayerNorm(8)(torch.randn(2, 3, 4))


@pytest.mark.parametrize("p", [1.0, -0.2])
def test_residual_bad_dropout(p):
    with pytest.raises(ValueError, match="dropout"):
        ResidualSublayer(8, dropout=p)


def test_layer_norm_bad_eps():
    with pytest.raises(ValueError, match="eps"):
        LayerNorm(8, eps=0.0)
