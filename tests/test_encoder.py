"""transformer_lib.encoder: parity with nn.TransformerEncoderLayer, stacking, padding, bad input."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from transformer_lib.encoder import Encoder, EncoderLayer


def _compare(norm_first, activation, dtype, train, B, S, H, d_k, n_pad, seed):
    torch.manual_seed(seed)
    d = H * d_k
    theirs = nn.TransformerEncoderLayer(d, H, 2 * d, dropout=0.0, activation=activation, batch_first=True,
                                        norm_first=norm_first).to(dtype)
    ours = EncoderLayer.from_torch(theirs)
    ours.train(train), theirs.train(train)
    x = torch.randn(B, S, d, dtype=dtype, requires_grad=True)
    pad = torch.zeros(B, S, dtype=torch.bool)
    pad[0, S - n_pad:] = True
    valid = (~pad)[..., None]
    up = torch.randn(B, S, d, dtype=dtype) * valid
    out_a, out_b = ours(x, src_key_padding_mask=pad), theirs(x, src_key_padding_mask=pad)
    ga = torch.autograd.grad(out_a, (x, ours.feed_forward.linear2.weight, ours.attn_sublayer.norm.weight), up)
    gb = torch.autograd.grad(out_b, (x, theirs.linear2.weight, theirs.norm1.weight), up)
    errs = [((out_a - out_b) * valid).abs().max().item()] + [(a - b).abs().max().item() for a, b in zip(ga, gb)]
    return max(errs)


@settings(max_examples=20, deadline=None)
@given(norm_first=st.booleans(), activation=st.sampled_from(["relu", "gelu"]), train=st.booleans(),
       B=st.integers(1, 3), S=st.integers(2, 7), H=st.integers(1, 4), d_k=st.integers(1, 8),
       n_pad=st.integers(0, 1), seed=st.integers(0, 999))
def test_encoder_layer_parity_float64(norm_first, activation, train, B, S, H, d_k, n_pad, seed):
    assert _compare(norm_first, activation, torch.float64, train, B, S, H, d_k, n_pad, seed) <= 1e-9


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_encoder_layer_parity_float32(norm_first, activation):
    assert _compare(norm_first, activation, torch.float32, False, 2, 6, 4, 8, 2, 0) <= 1e-5


def test_stack_has_independent_layers():
    enc = Encoder(EncoderLayer(16, 2, 32), 4)
    ptrs = [p.data_ptr() for p in enc.parameters()]
    assert len(ptrs) == len(set(ptrs))
    w = [layer.self_attn.q_proj.weight for layer in enc.layers]
    assert all(not torch.equal(w[0], other) for other in w[1:])


def test_appending_padding_leaves_valid_positions_unchanged():
    torch.manual_seed(0)
    enc = Encoder(EncoderLayer(16, 2, 32, dropout=0.0), 2).eval()
    x = torch.randn(2, 5, 16)
    pad = torch.tensor([[False] * 5, [False, False, False, True, True]])
    x_long = torch.cat([x, torch.randn(2, 3, 16)], dim=1)
    pad_long = torch.cat([pad, torch.ones(2, 3, dtype=torch.bool)], dim=1)
    with torch.no_grad():
        a, b = enc(x, src_key_padding_mask=pad), enc(x_long, src_key_padding_mask=pad_long)[:, :5]
    assert (a - b)[~pad].abs().max() <= 1e-5


def test_from_torch_rejects_other_modules_and_layouts():
    with pytest.raises(TypeError, match="module must be an nn.TransformerEncoderLayer"):
        EncoderLayer.from_torch(nn.Linear(2, 2))
    with pytest.raises(ValueError, match="batch_first=True"):
        EncoderLayer.from_torch(nn.TransformerEncoderLayer(8, 2))


def test_bad_configuration():
    with pytest.raises(ValueError, match="d_model must be divisible by nhead"):
        EncoderLayer(10, 3)
    with pytest.raises(ValueError, match="activation"):
        EncoderLayer(8, 2, activation="swish")
    with pytest.raises(ValueError, match="num_layers"):
        Encoder(EncoderLayer(8, 2), 0)


def test_bad_padding_mask_shape():
    layer = EncoderLayer(8, 2)
    with pytest.raises(ValueError, match="key_padding_mask"):
        layer(torch.randn(2, 5, 8), src_key_padding_mask=torch.zeros(2, 4, dtype=torch.bool))


@pytest.mark.parametrize("norm_first", [False, True])
def test_every_attention_starts_as_nn_multiheadattention_does(norm_first):
    """In every layer of both stacks: Xavier-uniform over the stacked (3d, d) in-projection,
    zero biases, as nn.MultiheadAttention; each layer drawn on its own."""
    import itertools
    import math

    from transformer_lib.model import Transformer, TransformerConfig
    from transformer_lib.multihead import MultiHeadAttention

    torch.manual_seed(0)
    d = 64
    model = Transformer(TransformerConfig(src_vocab_size=50, tgt_vocab_size=50, d_model=d, nhead=4, num_encoder_layers=3,
                                          num_decoder_layers=3, dim_feedforward=128, norm_first=norm_first))
    bound = math.sqrt(6 / (d + 3 * d))                           # 0.153; nn.Linear's is 1/sqrt(d) = 0.125
    attentions = [m for m in model.modules() if isinstance(m, MultiHeadAttention)]
    assert len(attentions) == 3 + 2 * 3
    for attention in attentions:
        for proj in (attention.q_proj, attention.k_proj, attention.v_proj):
            assert 0.95 * bound < proj.weight.abs().max() <= bound   # the whole Xavier range is drawn
            assert torch.count_nonzero(proj.bias) == 0
        assert torch.count_nonzero(attention.out_proj.bias) == 0
    weights = [a.q_proj.weight for a in attentions]
    assert not any(torch.equal(a, b) for a, b in itertools.combinations(weights, 2))
