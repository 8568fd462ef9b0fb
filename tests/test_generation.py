"""transformer_lib.generation: cache equivalence, strategy properties, bad input."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer_lib.kv_cache import DecoderCache
from transformer_lib.generation import beam_search, filter_logits, greedy, sample
from transformer_lib.kv_cache import CachedDecoding, NoCacheDecoding, decode_step
from transformer_lib.model import Transformer, TransformerConfig, greedy_decode_simple


def make_model(norm_first=False, seed=0, tie=False):
    torch.manual_seed(seed)
    cfg = TransformerConfig(src_vocab_size=16, tgt_vocab_size=16, d_model=16, nhead=2, num_encoder_layers=2,
                            num_decoder_layers=2, dim_feedforward=32, dropout=0.0, max_len=40,
                            norm_first=norm_first, tie_embeddings=tie)
    return Transformer(cfg).eval()


SRC = torch.tensor([[5, 9, 12, 7, 2, 0], [11, 4, 8, 15, 6, 2]])


@settings(max_examples=10, deadline=None)
@given(norm_first=st.booleans(), seed=st.integers(0, 99))
def test_cached_step_logits_match_full_decode(norm_first, seed):
    model = make_model(norm_first, seed)
    prefix = torch.randint(3, 16, (2, 7))
    prefix[:, 0] = 1
    memory, pad = model.encode(SRC)
    with torch.no_grad():
        full = model.decode(prefix, memory, pad)
    cache = DecoderCache.start(model.decoder, memory, pad)
    for t in range(prefix.shape[1]):
        logits = decode_step(model, prefix[:, t:t + 1], cache)
        torch.testing.assert_close(logits, full[:, t], atol=1e-5, rtol=1e-5)


@settings(max_examples=10, deadline=None)
@given(norm_first=st.booleans(), seed=st.integers(0, 99), width=st.integers(1, 4))
def test_cached_and_uncached_give_identical_tokens(norm_first, seed, width):
    model = make_model(norm_first, seed)
    assert torch.equal(greedy(model, SRC, 12, state=CachedDecoding), greedy(model, SRC, 12, state=NoCacheDecoding))
    assert torch.equal(beam_search(model, SRC, width, 12, state=CachedDecoding),
                       beam_search(model, SRC, width, 12, state=NoCacheDecoding))
    g1, g2 = torch.Generator().manual_seed(seed), torch.Generator().manual_seed(seed)
    assert torch.equal(sample(model, SRC, 12, top_k=5, generator=g1, state=CachedDecoding),
                       sample(model, SRC, 12, top_k=5, generator=g2, state=NoCacheDecoding))


@pytest.mark.parametrize("seed", range(3))
def test_greedy_equals_plain_reference_and_beam_width_one(seed):
    model = make_model(seed=seed)
    ref = greedy_decode_simple(model, SRC, 12)
    assert torch.equal(greedy(model, SRC, 12), ref)
    assert torch.equal(beam_search(model, SRC, 1, 12), ref)


def test_low_temperature_approaches_greedy():
    model = make_model(seed=3)
    ref = greedy(model, SRC, 12)
    assert torch.equal(sample(model, SRC, 12, temperature=1e-4, generator=torch.Generator().manual_seed(0)), ref)


@pytest.mark.parametrize("k", [1, 2, 4])
def test_top_k_never_leaves_the_k_best(k):
    model = make_model(seed=4)
    out = sample(model, SRC, 12, top_k=k, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        logits = model(SRC, out[:, :-1])
    logits[..., [0, 1]] = float("-inf")
    chosen = logits.gather(-1, out[:, 1:, None])
    rank = (logits > chosen).sum(-1)
    assert torch.all(rank[out[:, 1:] != 0] < k)


def test_top_p_keeps_the_nucleus():
    logits = torch.tensor([[0.5, 0.3, 0.15, 0.05]]).log()
    assert torch.isfinite(filter_logits(logits, top_p=0.8)).tolist() == [[True, True, False, False]]
    assert torch.equal(filter_logits(logits, top_p=1.0), logits)


def test_sampling_is_seeded():
    model = make_model(seed=5)
    a = sample(model, SRC, 12, generator=torch.Generator().manual_seed(9))
    b = sample(model, SRC, 12, generator=torch.Generator().manual_seed(9))
    assert torch.equal(a, b)


def test_rows_are_padded_after_eos_and_ignore_eos_runs_full_length():
    model = make_model(seed=6)
    out = greedy(model, SRC, 20, ignore_eos=True)
    assert out.shape == (2, 21)


# --- bad input -------------------------------------------------------------------------------

def test_beam_width_below_one():
    with pytest.raises(ValueError, match="beam_width must be >= 1"):
        beam_search(make_model(), SRC, 0, 5)


@pytest.mark.parametrize("top_p", [0.0, 1.5, -0.1])
def test_top_p_outside_range(top_p):
    with pytest.raises(ValueError, match=r"top_p must be in \(0, 1\]"):
        sample(make_model(), SRC, 5, top_p=top_p)


@pytest.mark.parametrize("temperature", [0.0, -1.0])
def test_temperature_not_positive(temperature):
    with pytest.raises(ValueError, match="temperature must be > 0"):
        sample(make_model(), SRC, 5, temperature=temperature)


@pytest.mark.parametrize("fn", [greedy, sample, lambda m, s, n: beam_search(m, s, 2, n)])
def test_max_new_tokens_below_one(fn):
    with pytest.raises(ValueError, match="max_new_tokens must be >= 1"):
        fn(make_model(), SRC, 0)


def test_all_padding_source_row_is_rejected():
    src = SRC.clone()
    src[0] = 0
    with pytest.raises(ValueError, match="all padding"):
        greedy(make_model(), src, 5)


def test_cross_attention_weights_shapes_rows_and_restore():
    from transformer_lib.generation import cross_attention_weights

    model = make_model(seed=7)
    tgt_in = torch.tensor([[1, 5, 6], [1, 7, 8]])
    weights = cross_attention_weights(model, SRC, tgt_in)
    assert len(weights) == 2 and all(w.shape == (2, 3, 6) for w in weights)
    assert all(torch.allclose(w.sum(-1), torch.ones(2, 3)) for w in weights)
    assert torch.all(weights[0][0, :, 5] == 0)                      # source padding gets no weight
    assert all("forward" not in layer.cross_attn.__dict__ for layer in model.decoder.layers)  # restored


@pytest.mark.parametrize("decode", [
    lambda m, src: greedy(m, src, 12),
    lambda m, src: greedy(m, src, 12, state=NoCacheDecoding),
    lambda m, src: sample(m, src, 12, top_k=1, generator=torch.Generator().manual_seed(0)),  # no early EOS draw
    lambda m, src: beam_search(m, src, 3, 12),
])
def test_ids_are_checked_once_per_call_not_once_per_step(decode, monkeypatch):
    import transformer_lib.embedding as embedding
    import transformer_lib.config as config_module

    calls = []

    def counting(tokens, vocab_size, name="tokens"):
        calls.append(name)
        return tokens

    monkeypatch.setattr(config_module, "check_token_ids", counting)
    monkeypatch.setattr(embedding, "check_token_ids", counting)
    out = decode(make_model(), SRC)
    assert out.shape[1] > 2                      # several steps were decoded
    assert calls == ["src"]                      # the source, at the boundary; no per-step host sync


def test_bad_source_ids_are_still_refused_by_the_decoders():
    bad = SRC.clone()
    bad[0, 0] = 99
    for decode in (greedy, sample):
        with pytest.raises(ValueError, match=r"src contains id 99, outside \[0, vocab_size=16\)"):
            decode(make_model(), bad, 5)


def test_each_decoding_state_is_a_class_with_the_same_methods():
    from transformer_lib.preallocated_cache import CompiledDecoding, PreallocatedDecoding

    model = make_model(seed=3)
    for kind in (NoCacheDecoding, CachedDecoding, PreallocatedDecoding, CompiledDecoding):
        assert all(callable(getattr(kind, name, None)) for name in ("__init__", "__call__", "select"))
    reference = greedy(model, SRC, 8, state=NoCacheDecoding)
    for kind in (NoCacheDecoding, CachedDecoding, PreallocatedDecoding):
        assert torch.equal(greedy(model, SRC, 8, state=kind), reference)


def test_decoding_leaves_the_model_in_the_mode_it_found():
    """Train a few steps, decode in the middle (as a sample printed during training does), train
    on: the model is still in training mode and dropout still acts."""
    from transformer_lib.generation import cross_attention_weights

    torch.manual_seed(0)
    cfg = TransformerConfig(src_vocab_size=16, tgt_vocab_size=16, d_model=16, nhead=2, num_encoder_layers=1,
                            num_decoder_layers=1, dim_feedforward=32, dropout=0.3, max_len=40)
    model = Transformer(cfg)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    tgt = torch.tensor([[1, 5, 6, 7], [1, 8, 9, 10]])

    def train_step():
        loss = model(SRC, tgt).logsumexp(-1).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    decoders = [lambda: greedy(model, SRC, 5), lambda: sample(model, SRC, 5, generator=torch.Generator()),
                lambda: beam_search(model, SRC, 2, 5), lambda: greedy(model, SRC, 5, state=NoCacheDecoding),
                lambda: cross_attention_weights(model, SRC, tgt)]
    for decode in decoders:
        train_step()
        decode()
        assert model.training and all(m.training for m in model.modules())
        with torch.no_grad():
            assert not torch.equal(model(SRC, tgt), model(SRC, tgt))    # dropout still acts
        train_step()
    model.eval()
    greedy(model, SRC, 5)
    assert not model.training                                          # and eval stays eval


def test_a_failing_decode_still_restores_the_mode():
    model = make_model().train()
    with pytest.raises(ValueError):
        beam_search(model, SRC, 2, 5, length_penalty=float("inf"))
    with pytest.raises(TypeError):
        greedy(model, SRC, 5, state=object)
    assert model.training


@pytest.mark.parametrize("penalty", [float("nan"), float("inf"), -float("inf"), "0.6", None])
def test_length_penalty_must_be_a_finite_number(penalty):
    with pytest.raises(ValueError, match="length_penalty must be a finite number"):
        beam_search(make_model(), SRC, 2, 5, length_penalty=penalty)


@pytest.mark.parametrize("decode", [greedy, sample, lambda m, s, n: beam_search(m, s, 2, n)])
def test_a_request_beyond_max_len_raises(decode):
    model = make_model()                                               # max_len = 40: BOS + 39 tokens
    assert decode(model, SRC, 39).shape[1] <= 40
    with pytest.raises(ValueError, match=r"max_new_tokens must be at most max_len - 1 = 39 .*got 40"):
        decode(model, SRC, 40)


def test_every_cache_has_one_interface():
    """DecoderCache and PreallocatedCache: a tensor position, an in-place select, the memory's keys
    and values projected up front, no state that is never read."""
    from transformer_lib.decoder import DecodingCache
    from transformer_lib.preallocated_cache import PreallocatedCache

    model = make_model()
    memory, pad = model.encode(SRC)
    caches = [DecoderCache.start(model.decoder, memory, pad), PreallocatedCache(model, memory, pad, 8)]
    for cache in caches:
        for name in ("self_attn", "memory_kv", "memory_pad", "position", "record_padding", "select"):
            assert hasattr(cache, name), name
        assert not hasattr(cache, "memory") and not hasattr(cache, "cross_attn")
        assert isinstance(cache.position, torch.Tensor) and cache.position.dtype == torch.long
        assert len(cache.memory_kv) == len(model.decoder.layers)
        decode_step(model, torch.ones(2, 1, dtype=torch.long), cache)
        before = [k.clone() for k, _ in cache.memory_kv]
        assert cache.select(torch.tensor([1, 0])) is None
        assert all(torch.equal(k, b.flip(0)) for (k, _), b in zip(cache.memory_kv, before))
    assert DecodingCache.__annotations__.keys() >= {"self_attn", "memory_kv", "memory_pad"}


def test_recording_cross_attention_uses_hooks_and_removes_them():
    from transformer_lib.generation import recording_cross_attention

    model = make_model()
    tgt_in = torch.tensor([[1, 5, 6], [1, 7, 8]])
    with recording_cross_attention(model) as captured:
        assert all(layer.cross_attn._forward_hooks for layer in model.decoder.layers)
        model(SRC, tgt_in)
    assert [w.shape for w in captured] == [(2, 3, 6)] * 2
    assert not any(layer.cross_attn._forward_hooks or layer.cross_attn._forward_pre_hooks
                   for layer in model.decoder.layers)
    assert not any(hasattr(layer, "cross_attention_record") for layer in model.decoder.layers)
