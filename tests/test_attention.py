"""transformer_lib.attention and transformer_lib.multihead: parity with nn.MultiheadAttention, masks, all-masked rows, bad input."""
from __future__ import annotations

import math
import warnings

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from transformer_lib.attention import (attention, causal_mask, fully_masked_rows, padding_mask,
                                       to_additive_mask, to_sdpa_mask)
from transformer_lib.masks import TransformerMasks, build_masks
from transformer_lib.multihead import MultiHeadAttention

TOL = {torch.float64: 1e-9, torch.float32: 1e-5}


def make_masks(g: torch.Generator, B: int, H: int, Lq: int, Lk: int, dtype: torch.dtype,
               kpm_kind: str, am_kind: str) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """Random masks that leave key 0 readable for every query (torch returns NaN on all-masked rows)."""
    kpm = am = None
    if kpm_kind != "none":
        kpm = torch.rand(B, Lk, generator=g) < 0.4
        kpm[:, 0] = False
        if kpm_kind == "float":
            kpm = to_additive_mask(kpm, dtype) + torch.randn(B, Lk, generator=g, dtype=dtype)
    if am_kind != "none":
        shape = (Lq, Lk) if am_kind.endswith("2d") else (B * H, Lq, Lk)
        am = torch.rand(*shape, generator=g) < 0.4
        am[..., 0] = False
        if am_kind.startswith("float"):
            am = to_additive_mask(am, dtype) + torch.randn(*shape, generator=g, dtype=dtype)
    return kpm, am


def run_pair(ours: nn.Module, theirs: nn.Module, x: torch.Tensor, ctx: torch.Tensor | None, kpm, am,
             need_weights: bool, average: bool) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(ours, torch) pairs: output, weights, input gradients, parameter gradients."""
    results = []
    for module in (ours, theirs):
        xi = x.clone().requires_grad_()
        ci = ctx.clone().requires_grad_() if ctx is not None else xi
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch warns on mixed bool/float masks
            out, w = module(xi, ci, ci, key_padding_mask=kpm, attn_mask=am, need_weights=need_weights,
                            average_attn_weights=average)
        loss = out.square().sum() + (w.square().sum() if need_weights else 0)
        loss.backward()
        results.append({"out": out, "w": w, "gx": xi.grad, "gc": ci.grad if ctx is not None else None})
    mine, ref = dict(ours.named_parameters()), dict(theirs.named_parameters())
    pairs = [(results[0][k], results[1][k]) for k in ("out", "w", "gx", "gc") if results[0][k] is not None]
    pairs.append((torch.cat([mine[f"{p}_proj.weight"].grad for p in "qkv"]), ref["in_proj_weight"].grad))
    pairs.append((mine["out_proj.weight"].grad, ref["out_proj.weight"].grad))
    if "in_proj_bias" in ref:
        pairs.append((torch.cat([mine[f"{p}_proj.bias"].grad for p in "qkv"]), ref["in_proj_bias"].grad))
        pairs.append((mine["out_proj.bias"].grad, ref["out_proj.bias"].grad))
    return pairs


mask_kinds = st.sampled_from(["none", "bool", "float"])
attn_kinds = st.sampled_from(["none", "bool2d", "float2d", "bool3d", "float3d"])


@settings(max_examples=25, deadline=None)
@given(B=st.integers(1, 3), Lq=st.integers(1, 5), Lk=st.integers(1, 5), H=st.sampled_from([1, 2, 4]),
       d_k=st.integers(1, 4), cross=st.booleans(), bias=st.booleans(), kpm_kind=mask_kinds, am_kind=attn_kinds,
       need_weights=st.booleans(), average=st.booleans(), train=st.booleans(), fused=st.booleans(),
       seed=st.integers(0, 2**16))
def test_parity_with_torch_float64(B, Lq, Lk, H, d_k, cross, bias, kpm_kind, am_kind, need_weights, average,
                                   train, fused, seed):
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    d, dtype = H * d_k, torch.float64
    Lk = Lk if cross else Lq
    theirs = nn.MultiheadAttention(d, H, bias=bias, batch_first=True, dtype=dtype).train(train)
    ours = MultiHeadAttention.from_torch(theirs)
    ours.fused = fused
    assert ours.training == train
    x = torch.randn(B, Lq, d, generator=g, dtype=dtype)
    ctx = torch.randn(B, Lk, d, generator=g, dtype=dtype) if cross else None
    kpm, am = make_masks(g, B, H, Lq, Lk, dtype, kpm_kind, am_kind)
    for a, b in run_pair(ours, theirs, x, ctx, kpm, am, need_weights, average):
        assert a.shape == b.shape
        assert (a - b).abs().max().item() <= TOL[dtype]


@pytest.mark.parametrize("cross", [False, True])
@pytest.mark.parametrize("train", [False, True])
def test_parity_with_torch_float32(cross, train):
    g = torch.Generator().manual_seed(0)
    B, Lq, Lk, d, H = 2, 5, (7 if cross else 5), 32, 4
    theirs = nn.MultiheadAttention(d, H, batch_first=True).train(train)
    ours = MultiHeadAttention.from_torch(theirs)
    x = torch.randn(B, Lq, d, generator=g)
    ctx = torch.randn(B, Lk, d, generator=g) if cross else None
    for kinds in (("bool", "bool2d"), ("float", "float2d"), ("bool", "float3d")):
        kpm, am = make_masks(g, B, H, Lq, Lk, torch.float32, *kinds)
        for need_weights in (False, True):
            for module in (ours, theirs):
                module.zero_grad()
            for a, b in run_pair(ours, theirs, x, ctx, kpm, am, need_weights, True):
                assert (a - b).abs().max().item() <= TOL[torch.float32]


def test_eval_no_grad_matches_torch_fast_path():
    """Under no_grad in eval mode torch may take its fused native path; the numbers still agree."""
    theirs = nn.MultiheadAttention(16, 4, batch_first=True).eval()
    ours = MultiHeadAttention.from_torch(theirs)
    x = torch.randn(3, 6, 16)
    kpm = torch.zeros(3, 6, dtype=torch.bool)
    kpm[1, 4:] = True
    with torch.no_grad():
        a = ours(x, x, x, key_padding_mask=kpm)[0]
        b = theirs(x, x, x, key_padding_mask=kpm, need_weights=False)[0]
    valid = ~kpm[:, :, None]  # torch's nested fast path may zero padded query rows
    assert ((a - b).abs() * valid).max().item() <= 1e-5


@settings(max_examples=25, deadline=None)
@given(shape=st.tuples(st.integers(1, 3), st.integers(1, 5), st.integers(1, 5), st.integers(1, 6)),
       kind=st.sampled_from(["none", "bool", "float"]), seed=st.integers(0, 2**16))
def test_fused_and_plain_paths_agree(shape, kind, seed):
    g = torch.Generator().manual_seed(seed)
    B, Lq, Lk, dk = shape
    q = torch.randn(B, 2, Lq, dk, generator=g, dtype=torch.float64)
    k = torch.randn(B, 2, Lk, dk, generator=g, dtype=torch.float64)
    v = torch.randn(B, 2, Lk, dk + 1, generator=g, dtype=torch.float64)
    mask = None
    if kind != "none":
        mask = torch.rand(B, 1, Lq, Lk, generator=g) < 0.5  # all-masked rows allowed here
        if kind == "float":
            mask = to_additive_mask(mask, torch.float64)
    plain, w = attention(q, k, v, mask)
    fused, none = attention(q, k, v, mask, fused=True)
    assert none is None and w.shape == (B, 2, Lq, Lk)
    assert torch.allclose(plain, fused, atol=1e-12)
    assert torch.isfinite(plain).all()
    if mask is not None:
        dead = fully_masked_rows(mask)
        sums = w.sum(-1, keepdim=True)  # (B, 2, Lq, 1): 1 on live rows, 0 on dead rows
        assert torch.allclose(sums, (~dead).to(sums.dtype).expand_as(sums), atol=1e-12)
        assert (plain * dead).abs().max() == 0 and (w * dead).abs().max() == 0


def test_attention_matches_formula():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, n, 8, generator=g, dtype=torch.float64) for n in (3, 5, 5))
    mask = causal_mask(5)[:3]
    out, w = attention(q, k, v, mask)
    ref = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(8) + to_additive_mask(mask, torch.float64), -1)
    assert torch.allclose(w, ref) and torch.allclose(out, ref @ v)
    assert out.shape == (2, 3, 8)


def test_attention_dropout_breaks_row_sums():
    torch.manual_seed(0)
    q = torch.randn(32, 8, 16)
    _, w = attention(q, q, q, dropout_p=0.2)
    assert not torch.allclose(w.sum(-1), torch.ones(32, 8))


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("kind", ["bool", "float"])
def test_all_masked_row_is_zero_with_finite_gradients(fused, kind):
    torch.manual_seed(0)
    mha = MultiHeadAttention(8, 2, bias=False)
    mha.fused = fused
    x = torch.randn(2, 4, 8, requires_grad=True)
    kpm = torch.tensor([[True] * 4, [False, False, True, True]])
    if kind == "float":
        kpm = to_additive_mask(kpm)
    out, w = mha(x, x, x, key_padding_mask=kpm, need_weights=not fused)
    assert (out[0] == 0).all() and torch.isfinite(out).all()
    if w is not None:
        assert (w[0] == 0).all() and torch.allclose(w[1].sum(-1), torch.ones(4))
    out.sum().backward()
    assert torch.isfinite(x.grad).all()
    assert all(torch.isfinite(p.grad).all() for p in mha.parameters())


def test_torch_returns_nan_on_all_masked_row():
    """The behaviour our zeros replace (if torch ever changes it, the book's claim must change too)."""
    mha = nn.MultiheadAttention(8, 2, batch_first=True)
    x = torch.randn(1, 3, 8)
    out, _ = mha(x, x, x, key_padding_mask=torch.ones(1, 3, dtype=torch.bool))
    assert torch.isnan(out).all()


def test_sdpa_boolean_convention_is_opposite():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 4, 4, generator=g) for _ in range(3))
    m = causal_mask(4)
    ours, _ = attention(q, k, v, m)
    assert torch.allclose(F.scaled_dot_product_attention(q, k, v, attn_mask=to_sdpa_mask(m)), ours, atol=1e-6)
    assert torch.allclose(F.scaled_dot_product_attention(q, k, v, is_causal=True), ours, atol=1e-6)
    assert torch.equal(to_sdpa_mask(m), ~m)
    float_m = to_additive_mask(m)
    assert to_sdpa_mask(float_m) is float_m


@settings(max_examples=25, deadline=None)
@given(size=st.integers(1, 12))
def test_causal_mask_properties(size):
    m = causal_mask(size)
    assert m.dtype == torch.bool and m.shape == (size, size)
    i, j = torch.meshgrid(torch.arange(size), torch.arange(size), indexing="ij")
    assert torch.equal(m, j > i)
    assert torch.equal(to_additive_mask(m), nn.Transformer.generate_square_subsequent_mask(size))


@settings(max_examples=25, deadline=None)
@given(B=st.integers(1, 4), S=st.integers(1, 7), T=st.integers(1, 7), pad_id=st.integers(0, 3),
       seed=st.integers(0, 2**16))
def test_padding_and_build_masks_properties(B, S, T, pad_id, seed):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(0, 5, (B, S), generator=g)
    tgt = torch.randint(0, 5, (B, T), generator=g)
    pm = padding_mask(src, pad_id)
    assert pm.dtype == torch.bool and pm.shape == (B, S)
    assert torch.equal(pm, src == pad_id)
    masks = build_masks(src, tgt, pad_id)
    assert isinstance(masks, TransformerMasks)
    assert torch.equal(masks.src_key_padding_mask, src == pad_id)
    assert torch.equal(masks.memory_key_padding_mask, src == pad_id)
    assert torch.equal(masks.tgt_key_padding_mask, tgt == pad_id)
    assert torch.equal(masks.tgt_mask, causal_mask(T))
    dense = masks.dense()
    assert dense["encoder_self"].shape == (B, S, S)
    assert dense["decoder_self"].shape == (B, T, T)
    assert dense["cross"].shape == (B, T, S)
    i, j = torch.meshgrid(torch.arange(T), torch.arange(T), indexing="ij")
    for b in range(B):
        assert torch.equal(dense["encoder_self"][b], (src[b] == pad_id).expand(S, S))
        assert torch.equal(dense["decoder_self"][b], (j > i) | (tgt[b] == pad_id))
        assert torch.equal(dense["cross"][b], (src[b] == pad_id).expand(T, S))
    assert set(masks.as_kwargs()) == {"src_key_padding_mask", "tgt_mask", "tgt_key_padding_mask",
                                      "memory_key_padding_mask", "tgt_is_causal"}


def test_param_count_independent_of_heads():
    for H in (1, 2, 4, 8):
        mha = MultiHeadAttention(512, H, bias=False)
        assert sum(p.numel() for p in mha.parameters()) == 4 * 512**2
        assert mha.d_k == 512 // H


def test_weights_shapes_and_score_count():
    mha = MultiHeadAttention(16, 4)
    q, kv = torch.randn(2, 3, 16), torch.randn(2, 5, 16)
    out, w = mha(q, kv, kv, need_weights=True, average_attn_weights=False)
    assert out.shape == (2, 3, 16) and w.shape == (2, 4, 3, 5) and w.numel() == 2 * 4 * 3 * 5
    _, w_avg = mha(q, kv, kv, need_weights=True)
    assert torch.allclose(w_avg, w.mean(1))
    assert mha(q, kv, kv)[1] is None


# --- bad input -----------------------------------------------------------------------------------

def test_bad_d_model_not_divisible():
    with pytest.raises(ValueError, match="d_model"):
        MultiHeadAttention(10, 3)


@pytest.mark.parametrize("dropout", [1.0, -0.1, 1.5])
def test_bad_dropout(dropout):
    with pytest.raises(ValueError, match="dropout"):
        MultiHeadAttention(8, 2, dropout=dropout)


@pytest.mark.parametrize("which", ["query", "key", "value"])
def test_bad_input_width(which):
    mha = MultiHeadAttention(8, 2)
    args = {"query": torch.randn(2, 3, 8), "key": torch.randn(2, 4, 8), "value": torch.randn(2, 4, 8)}
    args[which] = torch.randn(*args[which].shape[:2], 6)
    with pytest.raises(ValueError, match=which):
        mha(**args)


def test_bad_key_padding_mask_shape():
    mha = MultiHeadAttention(8, 2)
    x = torch.randn(2, 3, 8)
    with pytest.raises(ValueError, match="key_padding_mask"):
        mha(x, x, x, key_padding_mask=torch.zeros(2, 4, dtype=torch.bool))


def test_bad_key_padding_mask_dtype():
    mha = MultiHeadAttention(8, 2)
    x = torch.randn(2, 3, 8)
    with pytest.raises(TypeError, match="key_padding_mask"):
        mha(x, x, x, key_padding_mask=torch.zeros(2, 3, dtype=torch.long))


@pytest.mark.parametrize("shape", [(3, 4), (2, 3, 3), (1, 3, 3, 3)])
def test_bad_attn_mask_shape(shape):
    mha = MultiHeadAttention(8, 2)
    x = torch.randn(2, 3, 8)
    with pytest.raises(ValueError, match="attn_mask"):
        mha(x, x, x, attn_mask=torch.zeros(*shape, dtype=torch.bool))


def test_bad_mask_helpers():
    with pytest.raises(ValueError, match="size"):
        causal_mask(0)
    with pytest.raises(TypeError, match="tokens"):
        padding_mask(torch.zeros(2, 3), 0)
    with pytest.raises(ValueError, match="tokens"):
        padding_mask(torch.zeros(3, dtype=torch.long), 0)
    with pytest.raises(ValueError, match="tgt_in"):
        build_masks(torch.zeros(2, 3, dtype=torch.long), torch.zeros(3, 3, dtype=torch.long), 0)
    with pytest.raises(ValueError, match="mask"):
        attention(torch.randn(3, 4), torch.randn(5, 4), torch.randn(5, 4), mask=torch.zeros(3, 4, dtype=torch.bool))


def test_from_torch_rejects_unsupported():
    with pytest.raises(TypeError, match="module"):
        MultiHeadAttention.from_torch(nn.Linear(4, 4))
    with pytest.raises(ValueError, match="kdim"):
        MultiHeadAttention.from_torch(nn.MultiheadAttention(8, 2, kdim=4, vdim=4))
