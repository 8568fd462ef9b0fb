"""transformer_lib.cost: parameter and FLOP counters against the model and FlopCounterMode, the timer, bad input."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.flop_counter import FlopCounterMode

from transformer_lib.cost import (benchmark, count_parameters, decode_step_flops, forward_flops, median_time,
                                  set_fused, training_step_flops)
from transformer_lib.model import Transformer, TransformerConfig


@st.composite
def configs(draw):
    nhead = draw(st.sampled_from([1, 2, 4]))
    d_model = nhead * draw(st.sampled_from([2, 4, 8]))
    src_vocab = draw(st.integers(3, 40))
    tie = draw(st.booleans())
    return TransformerConfig(
        src_vocab_size=src_vocab, tgt_vocab_size=draw(st.integers(3, 40)) if not tie else src_vocab,
        d_model=d_model, nhead=nhead, num_encoder_layers=draw(st.integers(1, 3)),
        num_decoder_layers=draw(st.integers(1, 3)), dim_feedforward=draw(st.integers(1, 48)), dropout=0.0,
        norm_first=draw(st.booleans()), tie_embeddings=tie, max_len=16)


def batch(config, B, S, T, seed):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, config.src_vocab_size, (B, S), generator=g) if config.src_vocab_size > 3 else \
        torch.full((B, S), 1)
    tgt = torch.randint(0, config.tgt_vocab_size, (B, T), generator=g)
    tgt[:, 0] = config.bos_id
    return src, tgt


@settings(max_examples=15, deadline=None)
@given(config=configs())
def test_parameter_counter_equals_module(config):
    assert sum(count_parameters(config).values()) == Transformer(config).num_parameters()


@settings(max_examples=15, deadline=None)
@given(config=configs(), B=st.integers(1, 3), S=st.integers(1, 9), T=st.integers(1, 9), seed=st.integers(0, 99))
def test_flop_counter_equals_flopcountermode(config, B, S, T, seed):
    torch.manual_seed(seed)
    model = Transformer(config)
    set_fused(model, False)                        # the written-out path: bmm, which the counter sees
    src, tgt = batch(config, B, S, T, seed)
    with FlopCounterMode(display=False) as counter:
        model(src, tgt)
    assert counter.get_total_flops() == sum(forward_flops(config, B, S, T).values())


def test_training_step_is_three_forwards():
    config = TransformerConfig(src_vocab_size=30, tgt_vocab_size=30, d_model=16, nhead=2, num_encoder_layers=2,
                               num_decoder_layers=2, dim_feedforward=24, dropout=0.0, max_len=16)
    model = Transformer(config)
    set_fused(model, False)
    src, tgt = batch(config, 2, 7, 5, 0)
    with FlopCounterMode(display=False) as counter:
        model(src, tgt).sum().backward()
    assert counter.get_total_flops() == training_step_flops(config, 2, 7, 5)


def test_cached_step_is_cheaper():
    config = TransformerConfig(src_vocab_size=30, tgt_vocab_size=30, d_model=16, nhead=2, dropout=0.0)
    assert decode_step_flops(config, 1, 8, 10, use_cache=True) < decode_step_flops(config, 1, 8, 10, use_cache=False)


def test_benchmark_returns_one_median_per_function():
    times = benchmark([lambda: None, lambda: sum(range(100))], repeats=3, warmup=0)
    assert len(times) == 2 and all(t >= 0 for t in times)
    assert median_time(lambda: None, repeats=1, warmup=0) >= 0


@pytest.mark.parametrize("call, message", [
    (lambda c: forward_flops(c, 1, 0, 4), "src_len"),
    (lambda c: forward_flops(c, 1, 4, -2), "tgt_len"),
    (lambda c: training_step_flops(c, 0, 4, 4), "batch"),
    (lambda c: decode_step_flops(c, 1, 4, 0, use_cache=True), "prefix_len"),
    (lambda c: median_time(lambda: None, repeats=0), "repeats"),
])
def test_bad_lengths_raise_value_error_naming_the_argument(call, message):
    config = TransformerConfig(src_vocab_size=30, tgt_vocab_size=30, d_model=16, nhead=2)
    with pytest.raises(ValueError, match=message):
        call(config)


def test_bad_types():
    with pytest.raises(TypeError, match="config"):
        count_parameters({"d_model": 512})
    with pytest.raises(TypeError, match="src_len"):
        forward_flops(TransformerConfig(src_vocab_size=30, tgt_vocab_size=30), 1, 2.5, 3)
    with pytest.raises(TypeError, match="fused"):
        set_fused(torch.nn.Linear(2, 2), "yes")
