"""transformer_lib.decoder: parity with nn.TransformerDecoderLayer, masks, bad input."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from transformer_lib.attention import causal_mask
from transformer_lib.decoder import Decoder, DecoderLayer


@settings(max_examples=20, deadline=None)
@given(norm_first=st.booleans(), activation=st.sampled_from(["relu", "gelu"]), train=st.booleans(),
       B=st.integers(1, 3), S=st.integers(1, 7), T=st.integers(1, 6), H=st.integers(1, 4), d_k=st.integers(1, 6),
       seed=st.integers(0, 999))
def test_decoder_layer_parity_float64(norm_first, activation, train, B, S, T, H, d_k, seed):
    torch.manual_seed(seed)
    d = H * d_k
    theirs = nn.TransformerDecoderLayer(d, H, 2 * d, dropout=0.0, activation=activation, batch_first=True,
                                        norm_first=norm_first).double()
    ours = DecoderLayer.from_torch(theirs)
    ours.train(train), theirs.train(train)
    tgt = torch.randn(B, T, d, dtype=torch.float64, requires_grad=True)
    mem = torch.randn(B, S, d, dtype=torch.float64, requires_grad=True)
    mem_pad = torch.zeros(B, S, dtype=torch.bool)
    mem_pad[0, 1:] = torch.rand(S - 1) < 0.5            # never a whole row: keep key 0
    kwargs = dict(tgt_mask=causal_mask(T), memory_key_padding_mask=mem_pad)
    up = torch.randn(B, T, d, dtype=torch.float64)
    a, b = ours(tgt, mem, **kwargs), theirs(tgt, mem, **kwargs)
    ga = torch.autograd.grad(a, (tgt, mem, ours.cross_attn.q_proj.weight), up)
    gb = torch.autograd.grad(b, (tgt, mem, theirs.multihead_attn.in_proj_weight), up)
    errs = [(a - b).abs().max()] + [(x - y[: x.shape[0]]).abs().max() for x, y in zip(ga, gb)]
    assert max(e.item() for e in errs) <= 1e-9


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_parity_float32(norm_first):
    torch.manual_seed(0)
    theirs = nn.TransformerDecoderLayer(16, 4, 32, dropout=0.0, batch_first=True, norm_first=norm_first)
    ours = DecoderLayer.from_torch(theirs).eval()
    theirs.eval()
    tgt, mem = torch.randn(2, 5, 16), torch.randn(2, 7, 16)
    with torch.no_grad():
        assert (ours(tgt, mem, tgt_mask=causal_mask(5)) - theirs(tgt, mem, tgt_mask=causal_mask(5))).abs().max() <= 1e-5


def test_future_targets_do_not_change_earlier_outputs():
    torch.manual_seed(0)
    dec = Decoder(DecoderLayer(16, 2, 32, dropout=0.0), 2).eval()
    tgt, mem = torch.randn(1, 6, 16), torch.randn(1, 4, 16)
    changed = tgt.clone()
    changed[:, 3:] = torch.randn(1, 3, 16)
    with torch.no_grad():
        a, b = dec(tgt, mem, tgt_mask=causal_mask(6)), dec(changed, mem, tgt_mask=causal_mask(6))
    torch.testing.assert_close(a[:, :3], b[:, :3])


def test_memory_batch_mismatch():
    with pytest.raises(ValueError, match="memory must have shape"):
        DecoderLayer(8, 2)(torch.randn(2, 3, 8), torch.randn(1, 4, 8))


def test_from_torch_type_and_layout():
    with pytest.raises(TypeError, match="nn.TransformerDecoderLayer"):
        DecoderLayer.from_torch(nn.TransformerEncoderLayer(8, 2, batch_first=True))
    with pytest.raises(ValueError, match="batch_first=True"):
        DecoderLayer.from_torch(nn.TransformerDecoderLayer(8, 2))


def test_wrong_tgt_mask_shape():
    with pytest.raises(ValueError, match="attn_mask"):
        DecoderLayer(8, 2)(torch.randn(2, 3, 8), torch.randn(2, 4, 8), tgt_mask=causal_mask(4))
