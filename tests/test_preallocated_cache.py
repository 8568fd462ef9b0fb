"""transformer_lib.preallocated_cache: the fixed-shape decoding step against the growing cache."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch._dynamo.utils import counters

import transformer_lib.preallocated_cache as preallocated
from test_generation import SRC, make_model       # the same tiny model and sources as chapter 7's tests
from transformer_lib.kv_cache import DecoderCache
from transformer_lib.generation import beam_search, greedy, sample
from transformer_lib.kv_cache import CachedDecoding, NoCacheDecoding, decode_step
from transformer_lib.model import Transformer
from transformer_lib.preallocated_cache import CompiledDecoding, PreallocatedCache, PreallocatedDecoding


@pytest.fixture
def fast_compile(monkeypatch):
    """Compile with aot_eager (inductor's tracing without its code generation), from a clean
    slate: dynamo compiles a function at most `recompile_limit` (8) times per process."""
    monkeypatch.setattr(preallocated, "COMPILE_BACKEND", "aot_eager")
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@settings(max_examples=10, deadline=None)
@given(norm_first=st.booleans(), seed=st.integers(0, 99), capacity=st.integers(7, 40))
def test_step_logits_match_the_growing_cache_and_keep_every_address(norm_first, seed, capacity):
    model = make_model(norm_first, seed)
    prefix = torch.randint(3, 16, (2, 7))
    prefix[:, 0] = 1
    prefix[1, 4], prefix[1, 5:] = 2, 0                                # EOS, then PAD
    memory, pad = model.encode(SRC)
    growing, fixed = DecoderCache.start(model.decoder, memory, pad), PreallocatedCache(model, memory, pad, capacity)
    layout = [(t.shape, t.data_ptr()) for t in fixed.tensors()]
    for t in range(prefix.shape[1]):
        expected = decode_step(model, prefix[:, t:t + 1], growing)
        fixed.position.fill_(t)
        logits = model.decode(prefix[:, t:t + 1], cache=fixed, validate=False)[:, -1]   # the one decoder
        torch.testing.assert_close(logits, expected, atol=1e-5, rtol=1e-5)
        assert [(t.shape, t.data_ptr()) for t in fixed.tensors()] == layout
    assert fixed.blocked[:, :7].equal(prefix.eq(0)) and fixed.blocked[:, 7:].all()


def test_the_step_traces_to_one_graph_without_breaks():
    model = make_model()
    memory, pad = model.encode(SRC)
    report = torch._dynamo.explain(Transformer.decode)(model, torch.ones(2, 1, dtype=torch.long),
                                                       cache=PreallocatedCache(model, memory, pad, 8),
                                                       validate=False)
    assert (report.graph_count, report.graph_break_count) == (1, 0), report.break_reasons


def assert_identical_tokens(model, kinds, width, seed=0):
    reference = greedy(model, SRC, 12, state=NoCacheDecoding)
    assert all(torch.equal(greedy(model, SRC, 12, state=kind), reference) for kind in kinds)
    beams = beam_search(model, SRC, width, 12, state=NoCacheDecoding)
    assert all(torch.equal(beam_search(model, SRC, width, 12, state=kind), beams) for kind in kinds)
    draws = [sample(model, SRC, 12, top_k=5, generator=torch.Generator().manual_seed(seed), state=kind)
             for kind in [NoCacheDecoding, *kinds]]
    assert all(torch.equal(d, draws[0]) for d in draws)


@settings(max_examples=10, deadline=None)
@given(norm_first=st.booleans(), seed=st.integers(0, 99), width=st.integers(1, 4), tie=st.booleans())
def test_the_preallocated_cache_gives_identical_tokens(norm_first, seed, width, tie):
    assert_identical_tokens(make_model(norm_first, seed, tie), [CachedDecoding, PreallocatedDecoding], width, seed)


@pytest.mark.parametrize("norm_first, tie", [(False, False), (True, True)])
def test_the_compiled_step_gives_identical_tokens(fast_compile, norm_first, tie):
    assert_identical_tokens(make_model(norm_first, 7, tie), [CompiledDecoding], width=3)


def test_compiled_decoding_reuses_its_graph_and_its_cache(fast_compile):
    model = make_model(seed=5)
    first = greedy(model, SRC, 10, state=CompiledDecoding, ignore_eos=True)
    cache, graphs = preallocated._reusable[model], counters["stats"]["unique_graphs"]
    second = greedy(model, SRC.flip(0), 10, state=CompiledDecoding, ignore_eos=True)   # other ids, same shapes
    assert preallocated._reusable[model] is cache and counters["stats"]["unique_graphs"] == graphs
    assert torch.equal(first, greedy(model, SRC, 10, state=NoCacheDecoding, ignore_eos=True))
    assert torch.equal(second, greedy(model, SRC.flip(0), 10, state=NoCacheDecoding, ignore_eos=True))


def test_select_reorders_rows_in_place():
    model = make_model()
    memory, pad = model.encode(SRC)
    cache = PreallocatedCache(model, memory, pad, 6)
    layout = [t.data_ptr() for t in cache.tensors()]
    before = [t.clone() for t in cache.tensors()]
    assert cache.select(torch.tensor([1, 0])) is None                # in place, as every cache's
    assert [t.data_ptr() for t in cache.tensors()] == layout
    for old, new in zip(before[:-1], cache.tensors()[:-1]):
        assert torch.equal(new, old.flip(0))


def test_tensor_start_equals_int_start():
    model = make_model()
    tokens = torch.tensor([[7], [9]])
    for t in (0, 5, 39):
        assert torch.equal(model.tgt_embed(tokens, start=torch.tensor([t])), model.tgt_embed(tokens, start=t))


@pytest.mark.parametrize("capacity, message", [(0, "capacity must be >= 1"), (41, "at most max_len=40")])
def test_capacity_out_of_range(capacity, message):
    model = make_model()
    memory, pad = model.encode(SRC)
    with pytest.raises(ValueError, match=message):
        PreallocatedCache(model, memory, pad, capacity)


def test_fill_refuses_memory_of_another_shape():
    model = make_model()
    memory, pad = model.encode(SRC)
    cache = PreallocatedCache(model, memory, pad, 6)
    with pytest.raises(ValueError, match=r"memory must be \[2, 6, 16\]"):
        cache.fill(model, memory[:1], pad[:1])


@pytest.mark.parametrize("kind", ["static", 1, None, True])
def test_unknown_decoding_state_is_refused(kind):
    with pytest.raises(TypeError, match="state must be a decoding state class"):
        greedy(make_model(), SRC, 4, state=kind)


def test_one_method_projects_the_memory_for_every_cache():
    """The growing cache, the preallocated one and the ONNX encoder hold the same cross-attention
    keys and values, filled up front: each comes from `Decoder.project_memory`."""
    from transformer_lib.deploy import OnnxEncoder

    model = make_model(seed=4)
    memory, pad = model.encode(SRC)
    grown = DecoderCache.start(model.decoder, memory, pad)                # no step decoded yet
    fixed = PreallocatedCache(model, memory, pad, 8)
    cross_k, cross_v, _ = OnnxEncoder(model)(SRC)
    for i, layer in enumerate(model.decoder.layers):
        key, value = layer.cross_attn.project_keys_values(memory, memory)
        for k, v in (grown.memory_kv[i], fixed.memory_kv[i]):
            assert torch.equal(k, key) and torch.equal(v, value)
        assert torch.equal(cross_k[i], key) and torch.equal(cross_v[i], value)
