"""transformer_lib.feedforward: parity with nn.TransformerEncoderLayer, properties and bad input."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from transformer_lib.feedforward import (FeedForward, SwiGLU, feedforward_num_params, swiglu_hidden_dim,
                                         swiglu_num_params)

SETTINGS = settings(max_examples=25, deadline=None)


def _reference_and_ours(activation: str, d_model: int = 16, d_ff: int = 48, dropout: float = 0.0):
    torch.manual_seed(0)
    ref = nn.TransformerEncoderLayer(d_model, nhead=2, dim_feedforward=d_ff, dropout=dropout,
                                     activation=activation, batch_first=True, dtype=torch.float64)
    ours = FeedForward(d_model, d_ff, dropout=dropout, activation=activation).double()
    state = {k: v for k, v in ref.state_dict().items() if k.startswith(("linear1.", "linear2."))}
    ours.load_state_dict(state)  # strict: the parameter names must match PyTorch's
    return ref, ours


def _reference_ffn(ref: nn.TransformerEncoderLayer, x: torch.Tensor) -> torch.Tensor:
    return ref.linear2(ref.dropout(ref.activation(ref.linear1(x))))


@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_parity_with_encoder_layer_outputs_and_gradients(activation):
    ref, ours = _reference_and_ours(activation)
    x = torch.randn(3, 5, 16, dtype=torch.float64)
    grad_out = torch.randn(3, 5, 16, dtype=torch.float64)
    x_ref, x_ours = x.clone().requires_grad_(), x.clone().requires_grad_()
    y_ref, y_ours = _reference_ffn(ref, x_ref), ours(x_ours)
    assert (y_ours - y_ref).abs().max().item() <= 1e-9
    y_ref.backward(grad_out)
    y_ours.backward(grad_out)
    assert (x_ours.grad - x_ref.grad).abs().max().item() <= 1e-9
    for name in ("linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias"):
        g_ref = ref.get_parameter(name).grad
        g_ours = ours.get_parameter(name).grad
        assert (g_ours - g_ref).abs().max().item() <= 1e-9, name


def test_parity_with_dropout_in_training_mode():
    ref, ours = _reference_and_ours("relu", dropout=0.25)
    ref.train(), ours.train()
    x = torch.randn(2, 4, 16, dtype=torch.float64)
    torch.manual_seed(7)
    y_ref = _reference_ffn(ref, x)
    torch.manual_seed(7)
    y_ours = ours(x)
    assert (y_ours - y_ref).abs().max().item() <= 1e-9
    ours.eval()
    assert not torch.equal(ours(x), y_ours)  # dropout was active in training mode


@SETTINGS
@given(batch=st.integers(1, 3), length=st.integers(1, 8), d_model=st.integers(1, 12),
       d_ff=st.integers(1, 24), seed=st.integers(0, 2**16), gated=st.booleans())
def test_position_wise_permutation_equivariance(batch, length, d_model, d_ff, seed, gated):
    torch.manual_seed(seed)
    layer = (SwiGLU(d_model, d_ff) if gated else FeedForward(d_model, d_ff, activation="gelu")).double()
    x = torch.randn(batch, length, d_model, dtype=torch.float64)
    perm = torch.randperm(length)
    with torch.no_grad():
        y = layer(x)
        torch.testing.assert_close(layer(x[:, perm]), y[:, perm], rtol=0.0, atol=1e-12)
        torch.testing.assert_close(layer(x[:, -1]), y[:, -1], rtol=0.0, atol=1e-12)
    assert y.shape == x.shape


@SETTINGS
@given(d_model=st.integers(1, 64), d_ff=st.integers(1, 256))
def test_feedforward_parameter_count(d_model, d_ff):
    n = sum(p.numel() for p in FeedForward(d_model, d_ff).parameters())
    assert n == 2 * d_model * d_ff + d_ff + d_model == feedforward_num_params(d_model, d_ff)


@SETTINGS
@given(d_model=st.integers(1, 64), hidden=st.integers(1, 256))
def test_swiglu_parameter_count(d_model, hidden):
    n = sum(p.numel() for p in SwiGLU(d_model, hidden).parameters())
    assert n == 3 * d_model * hidden == swiglu_num_params(d_model, hidden)


@SETTINGS
@given(d_model=st.integers(1, 4096), d_ff=st.integers(1, 100_000))
def test_swiglu_hidden_dim_matches_budget_within_one_row(d_model, d_ff):
    d_g = swiglu_hidden_dim(d_ff)
    assert d_g == round(2 * d_ff / 3)
    assert abs(3 * d_model * d_g - 2 * d_model * d_ff) <= d_model


def test_base_configuration_counts():
    assert feedforward_num_params(512, 2048) == 2_099_712
    assert swiglu_hidden_dim(2048) == 1365


def test_swiglu_matches_formula():
    torch.manual_seed(0)
    layer = SwiGLU(8, 12).double()
    x = torch.randn(2, 3, 8, dtype=torch.float64)
    value = x @ layer.w_value.weight.T
    gate = torch.nn.functional.silu(x @ layer.w_gate.weight.T)
    expected = (value * gate) @ layer.w_out.weight.T
    torch.testing.assert_close(layer(x), expected, rtol=0.0, atol=1e-12)


# Bad input: one test per argument, each message names it.

def test_unknown_activation_name():
    with pytest.raises(ValueError, match=r"activation .*'tanh'"):
        FeedForward(8, 16, activation="tanh")


def test_activation_not_a_name():
    with pytest.raises(TypeError, match="activation must be a str"):
        FeedForward(8, 16, activation=torch.relu)


@pytest.mark.parametrize("dropout", [-0.1, 1.0, 1.5])
def test_dropout_out_of_range(dropout):
    with pytest.raises(ValueError, match=r"dropout must be in \[0, 1\)"):
        FeedForward(8, 16, dropout=dropout)
    with pytest.raises(ValueError, match=r"dropout must be in \[0, 1\)"):
        SwiGLU(8, 16, dropout=dropout)


def test_dropout_not_a_number():
    with pytest.raises(TypeError, match="dropout"):
        FeedForward(8, 16, dropout="0.1")


@pytest.mark.parametrize("d_model", [0, -4])
def test_non_positive_d_model(d_model):
    with pytest.raises(ValueError, match="d_model must be >= 1"):
        FeedForward(d_model, 16)
    with pytest.raises(ValueError, match="d_model must be >= 1"):
        SwiGLU(d_model, 16)


def test_d_model_not_an_int():
    with pytest.raises(TypeError, match="d_model must be an int"):
        FeedForward(8.0, 16)


@pytest.mark.parametrize("d_ff", [0, -1])
def test_non_positive_dim_feedforward(d_ff):
    with pytest.raises(ValueError, match="dim_feedforward must be >= 1"):
        FeedForward(8, d_ff)
    with pytest.raises(ValueError, match="dim_feedforward must be >= 1"):
        swiglu_hidden_dim(d_ff)


def test_non_positive_hidden_dim():
    with pytest.raises(ValueError, match="hidden_dim must be >= 1"):
        SwiGLU(8, 0)


@pytest.mark.parametrize("make", [lambda: FeedForward(8, 16), lambda: SwiGLU(8, 16)])
@pytest.mark.parametrize("shape", [(2, 3, 7), (8, 2), ()])
def test_input_with_wrong_width(make, shape):
    with pytest.raises(ValueError, match=r"x \(last dimension d_model=8\) must have shape"):
        make()(torch.randn(shape))


def test_input_not_a_tensor():
    with pytest.raises(TypeError, match="x .*must be a torch.Tensor"):
        FeedForward(8, 16)([[0.0] * 8])
