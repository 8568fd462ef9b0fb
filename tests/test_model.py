"""transformer_lib.model: configuration, invariances, counts, greedy decoding, bad input."""
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer_lib.masks import Padding
from transformer_lib.cost import set_fused
from transformer_lib.model import Transformer, TransformerConfig, greedy_decode_simple


def small(**overrides):
    base = dict(src_vocab_size=20, tgt_vocab_size=24, d_model=16, nhead=2, num_encoder_layers=2,
                num_decoder_layers=2, dim_feedforward=32, dropout=0.0, max_len=32)
    base.update(overrides)
    return Transformer(TransformerConfig(**base)).eval()


def batch():
    src = torch.tensor([[5, 6, 7, 2, 0], [8, 9, 10, 11, 2]])
    tgt = torch.tensor([[1, 7, 6, 5], [1, 11, 10, 0]])
    return src, tgt


@settings(max_examples=15, deadline=None)
@given(norm_first=st.booleans(), tie=st.booleans(), cut=st.integers(1, 3), seed=st.integers(0, 99))
def test_causal_and_padding_invariance(norm_first, tie, cut, seed):
    torch.manual_seed(seed)
    model = small(norm_first=norm_first, tie_embeddings=tie)
    src, tgt = batch()
    changed = tgt.clone()
    changed[:, cut:] = torch.randint(3, 24, changed[:, cut:].shape)
    with torch.no_grad():
        a, b = model(src, tgt), model(src, changed)
        c = model(F.pad(src, (0, 4)), tgt)
    torch.testing.assert_close(a[:, :cut], b[:, :cut])
    torch.testing.assert_close(a, c, atol=1e-5, rtol=1e-5)


def test_logits_shape_and_final_norms():
    src, tgt = batch()
    assert small()(src, tgt).shape == (2, 4, 24)
    assert small(norm_first=True).encoder.norm is not None and small().encoder.norm is None


def test_tying_shares_one_matrix_and_counts_once():
    untied, tied = small(tgt_vocab_size=20), small(tgt_vocab_size=20, tie_embeddings=True)
    assert tied.output.weight is tied.tgt_embed.token.weight
    assert untied.num_parameters() - tied.num_parameters() == 20 * 16


def test_base_output_projection_count():
    model = Transformer(TransformerConfig(src_vocab_size=32000, tgt_vocab_size=32000, num_encoder_layers=1,
                                          num_decoder_layers=1))
    assert model.output.weight.numel() == 16_384_000


def test_greedy_decode_simple_stops_and_pads():
    torch.manual_seed(0)
    model = small()
    src, _ = batch()
    out = greedy_decode_simple(model, src, max_new_tokens=6)
    assert out.shape[0] == 2 and out.shape[1] <= 7 and torch.all(out[:, 0] == 1)
    assert not torch.any(out[:, 1:] == 1)


# --- bad input -------------------------------------------------------------------------------

def test_all_padding_source_row():
    src, tgt = batch()
    src[1] = 0
    with pytest.raises(ValueError, match=r"src rows \[1\] are all padding"):
        small()(src, tgt)


def test_tgt_in_must_start_with_a_token():
    src, tgt = batch()
    tgt[0, 0] = 0
    with pytest.raises(ValueError, match="tgt_in must start with a valid token"):
        small()(src, tgt)


def test_sequences_beyond_max_len():
    src, tgt = batch()
    with pytest.raises(ValueError, match="src has length 40, more than max_len=32"):
        small()(torch.full((1, 40), 5), tgt[:1])
    with pytest.raises(ValueError, match="tgt_in would take positions 0 to 32, but max_len=32"):
        small()(src, torch.ones(2, 33, dtype=torch.long))


def test_ids_out_of_range():
    src, tgt = batch()
    with pytest.raises(ValueError, match=r"src contains id \d+, outside \[0, vocab_size=20\)"):
        small()(src + 15, tgt)
    with pytest.raises(ValueError, match="tgt_in contains id"):
        small()(src, tgt - 5)


def test_validate_false_skips_the_id_checks_and_changes_nothing_else(monkeypatch):
    import transformer_lib.embedding as embedding
    import transformer_lib.config as config_module

    model, (src, tgt) = small(), batch()
    checked = model(src, tgt)

    def refuse(*args, **kwargs):
        raise AssertionError("an id check ran with validate=False")

    monkeypatch.setattr(config_module, "check_token_ids", refuse)
    monkeypatch.setattr(embedding, "check_token_ids", refuse)
    assert torch.equal(model(src, tgt, validate=False), checked)
    with pytest.raises(AssertionError, match="id check"):
        model(src, tgt)                                    # the default checks, once, in the model


def test_the_plain_compiled_call_is_one_graph():
    """`model(src, tgt)` under torch.compile (train mode, dropout on, padded rows): one graph and no
    break, since the id check, which reads ids back to the host, is skipped while compiling;
    eager, the same call still checks (a bad id gets the clear error)."""
    torch._dynamo.reset()
    model, (src, tgt) = small(dropout=0.1), batch()
    model.train()
    for options in ({}, {"validate": False}):
        explained = torch._dynamo.explain(model)(src, tgt, **options)
        assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons
    bad = src.clone()
    bad[0, 0] = model.config.src_vocab_size                      # one past the vocabulary
    with pytest.raises(ValueError, match="src"):
        model(bad, tgt)


@pytest.mark.parametrize("padded", [Padding(True, True), Padding(False, True), Padding(True, False),
                                    Padding(False, False)])
def test_forward_finds_the_padding_and_compiles_for_each_kind(padded):
    """The batch check finds where PAD is; each kind of batch compiles to one graph, no break."""
    torch._dynamo.reset()
    model, (src, tgt) = small(dropout=0.1), batch()
    src = src if padded.src else src.clamp(min=3)
    tgt = tgt if padded.tgt else tgt.clamp(min=1)
    padding = model.check_inputs(src, tgt)
    assert padding == padded
    model.train()
    explained = torch._dynamo.explain(model)(src, tgt, validate=False, padding=padding)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons


def test_dropping_unneeded_masks_changes_nothing():
    """Without PAD, no padding mask and a causal flag: the written-out attention gives exactly the
    logits of the masked path (adding 0 changes no float); the fused one the same up to rounding."""
    torch.manual_seed(0)
    model, (src, tgt) = small(), batch()
    src, tgt = src.clamp(min=3), tgt.clamp(min=1)                   # no PAD anywhere
    assert model.check_inputs(src, tgt) == Padding(False, False)
    for fused in (False, True):
        set_fused(model, fused)
        found = model(src, tgt)                                      # validate: finds no padding
        masked = model(src, tgt, validate=False)                     # no padding given: all masks
        assert torch.equal(found, masked) if not fused else torch.allclose(found, masked, atol=1e-5)


def test_a_wrong_promise_of_no_padding_is_refused():
    model, (src, tgt) = small(), batch()
    with pytest.raises(ValueError, match="padding.src is False, but src holds PAD"):
        model.encode(src, padding=Padding(False, True))
    memory, pad = model.encode(src)
    with pytest.raises(ValueError, match="padding.tgt is False, but tgt_in holds PAD"):
        model.decode(tgt, memory, pad, padding=Padding(True, False))
    with pytest.raises(ValueError, match="padding.src is False, but src_key_padding_mask marks PAD"):
        model.decode(tgt, memory, pad, padding=Padding(False, True))


def test_memory_and_target_batch_sizes_differ():
    model = small()
    src, tgt = batch()
    memory, pad = model.encode(src)
    with pytest.raises(ValueError, match="same batch size"):
        model.decode(tgt, memory[:1], pad[:1])


def test_max_new_tokens_must_be_positive():
    src, _ = batch()
    with pytest.raises(ValueError, match="max_new_tokens"):
        greedy_decode_simple(small(), src, 0)


@pytest.mark.parametrize("overrides, match", [
    (dict(d_model=10, nhead=3), "d_model must be divisible by nhead"),
    (dict(dropout=1.0), "dropout"),
    (dict(pad_id=30), "pad_id must be < both vocabulary sizes"),
    (dict(bos_id=0), "must differ"),
    (dict(num_encoder_layers=0), "num_encoder_layers"),
])
def test_bad_config(overrides, match):
    with pytest.raises(ValueError, match=match):
        small(**overrides)


def test_config_type_checked():
    with pytest.raises(TypeError, match="config must be a TransformerConfig"):
        Transformer({"d_model": 8})


def test_one_call_checks_its_inputs_once_at_the_boundary(monkeypatch):
    """The model checks a batch once; the layers inside it check nothing again."""
    import transformer_lib.config as config_module
    from transformer_lib.decoder import DecoderLayer
    from transformer_lib.embedding import TransformerEmbedding
    from transformer_lib.encoder import EncoderLayer
    from transformer_lib.multihead import MultiHeadAttention
    from transformer_lib.norm import LayerNorm

    model, (src, tgt) = small(), batch()
    inner = [m for m in model.modules() if hasattr(m, "validate")]
    assert len(inner) > 10 and not any(m.validate for m in inner)
    layer_checks, id_checks = [], []
    for cls in (MultiHeadAttention, EncoderLayer, DecoderLayer, TransformerEmbedding, LayerNorm):
        monkeypatch.setattr(cls, "check_inputs", lambda self, *a, **k: layer_checks.append(self))
    check_ids = config_module.check_token_ids
    monkeypatch.setattr(config_module, "check_token_ids", lambda *a: id_checks.append(a[-1]) or check_ids(*a))
    with torch.no_grad():
        model(src, tgt)
    assert layer_checks == [] and id_checks == ["src", "tgt_in"]


def test_a_layer_used_alone_still_checks_its_input():
    from transformer_lib.decoder import DecoderLayer
    from transformer_lib.encoder import EncoderLayer
    from transformer_lib.multihead import MultiHeadAttention
    from transformer_lib.norm import LayerNorm

    x = torch.zeros(2, 3, 8)                                   # d = 8, where 16 is expected
    for layer in (MultiHeadAttention(16, 2), EncoderLayer(16, 2, 32), LayerNorm(16)):
        with pytest.raises(ValueError, match=r"must have shape \[.*16\], got \[2, 3, 8\]"):
            layer(x, x, x) if isinstance(layer, MultiHeadAttention) else layer(x)
    with pytest.raises(ValueError, match="memory must have shape"):
        DecoderLayer(16, 2, 32)(torch.zeros(2, 3, 16), torch.zeros(3, 4, 16))


def test_the_layers_of_a_model_are_built_not_to_check():
    """The model tells its layers at construction (validate=False); a layer made alone checks."""
    from transformer_lib.decoder import Decoder, DecoderLayer
    from transformer_lib.encoder import Encoder, EncoderLayer
    from transformer_lib.multihead import MultiHeadAttention

    kinds = (MultiHeadAttention, EncoderLayer, DecoderLayer, Encoder, Decoder)
    inner = [m for m in small().modules() if isinstance(m, kinds)]
    assert len(inner) == 6 + 2 + 2 + 2 and not any(m.validate for m in inner)   # 6 attentions, 4 layers, 2 stacks
    assert all(not m._forward_pre_hooks for m in inner)               # no hook runs a check
    alone = [MultiHeadAttention(16, 2), EncoderLayer(16, 2, 32), DecoderLayer(16, 2, 32)]
    assert all(m.validate for m in alone)


@pytest.mark.parametrize("src_rows, tgt_rows", [(1, 2), (3, 2), (2, 1)])
def test_a_batch_size_mismatch_is_refused_at_the_boundary(src_rows, tgt_rows):
    model, (src, tgt) = small(), batch()
    src, tgt = src[:1].repeat(src_rows, 1), tgt[:1].repeat(tgt_rows, 1)
    with pytest.raises(ValueError, match=rf"same batch size, got src \[{src_rows}, .*tgt_in \[{tgt_rows}, "):
        model(src, tgt)


def test_the_masks_are_made_once_per_call(monkeypatch):
    """A 3 + 3-layer forward hands SDPA one mask per kind of attention, the same tensor to every
    layer of that kind, and scans no mask for fully masked rows."""
    import transformer_lib.attention as attention_module

    model, (src, tgt) = small(num_encoder_layers=3, num_decoder_layers=3), batch()
    assert padding_of(src, tgt) == Padding(src=True, tgt=True)
    handed, sdpa = [], F.scaled_dot_product_attention
    scans = []
    monkeypatch.setattr(F, "scaled_dot_product_attention",
                        lambda *a, attn_mask=None, **k: handed.append(attn_mask) or sdpa(*a, attn_mask=attn_mask, **k))
    monkeypatch.setattr(attention_module, "fully_masked_rows", lambda m: scans.append(m) or m.all(-1, keepdim=True))
    with torch.no_grad():
        model.eval()(src, tgt)
    encoder, decoder, cross = handed[:3], handed[3::2], handed[4::2]
    assert len(handed) == 9 and len({id(m) for m in handed}) == 3
    assert all(m is encoder[0] for m in encoder) and all(m is decoder[0] for m in decoder)
    assert all(m is cross[0] for m in cross) and scans == []
    assert decoder[0].shape == (2, 1, tgt.shape[1], tgt.shape[1]) and encoder[0].shape == (2, 1, 1, src.shape[1])


def padding_of(src, tgt):
    from transformer_lib.masks import find_padding
    return find_padding(src, tgt, 0)


def test_the_config_is_frozen_and_built_with_keywords():
    import dataclasses

    config = small().config
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.d_model = 32
    assert dataclasses.replace(config, d_model=32).d_model == 32 and config.d_model == 16


def test_greedy_decode_simple_refuses_more_tokens_than_max_len_holds():
    model, (src, _) = small(), batch()                                 # max_len = 32
    assert greedy_decode_simple(model, src, 31).shape[1] <= 32
    with pytest.raises(ValueError, match=r"max_new_tokens must be at most max_len - 1 = 31 .*got 32"):
        greedy_decode_simple(model, src, 32)


def test_a_layer_used_alone_gives_an_empty_row_zero_heads_not_nan():
    """Argument checks and the fully-masked-row handling are separate: a layer built to validate
    (used alone) keeps the handling; the model's layers, whose ids were checked, skip it."""
    from transformer_lib.cost import set_fused
    from transformer_lib.decoder import DecoderLayer
    from transformer_lib.encoder import EncoderLayer

    torch.manual_seed(0)
    x = torch.randn(2, 3, 16, requires_grad=True)
    empty = torch.tensor([[True] * 3, [False] * 3])                   # row 0: no key to read
    for layer in (EncoderLayer(16, 2, 32, dropout=0.0), DecoderLayer(16, 2, 32, dropout=0.0)):
        set_fused(layer, False)                                       # the written-out path
        assert not layer.self_attn.rows_checked
        out = layer(x, src_key_padding_mask=empty) if isinstance(layer, EncoderLayer) else \
            layer(x, x, memory_key_padding_mask=empty)
        out.sum().backward()
        assert torch.isfinite(out).all() and torch.isfinite(x.grad).all()
    model = small()
    assert all(layer.self_attn.rows_checked and layer.cross_attn.rows_checked for layer in model.decoder.layers)
