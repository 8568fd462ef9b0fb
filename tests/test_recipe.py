"""transformer_lib.recipe: the loss (with label smoothing), the learning-rate schedules and the config checks."""
import dataclasses
import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer_lib.data import PAD_ID, collate, make_reversal_data, token_nll_simple
from transformer_lib.recipe import (TrainingConfig, inverse_sqrt_factor, noam_lr, pad_id_of, sequence_loss,
                                    smoothed_loss)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 1000), eps=st.floats(0.0, 0.9), B=st.integers(1, 3), T=st.integers(1, 6),
       V=st.integers(3, 30))
def test_sequence_loss_equals_cross_entropy(seed, eps, B, T, V):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(B, T, V, generator=g) * 4
    labels = torch.randint(0, V, (B, T), generator=g)
    labels[0, 0] = 1                                              # at least one real label
    expected = F.cross_entropy(logits.reshape(-1, V), labels.reshape(-1), ignore_index=0, label_smoothing=eps)
    assert torch.allclose(sequence_loss(logits, labels, 0, eps), expected, atol=1e-5)


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.5])
def test_sequence_loss_finite_with_extreme_logits(eps):
    logits = torch.full((2, 3, 10), -1e4)
    logits[..., 4] = 1e4
    for target in (4, 6):
        assert torch.isfinite(sequence_loss(logits, torch.full((2, 3), target), 0, eps))


def test_sequence_loss_all_padding_is_zero():
    logits = torch.randn(2, 3, 10, requires_grad=True)
    loss = sequence_loss(logits, torch.zeros(2, 3, dtype=torch.long), 0)
    assert loss.item() == 0.0
    loss.backward()


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 1000), extra=st.integers(1, 4), eps=st.sampled_from([0.0, 0.1]))
def test_loss_ignores_padding(seed, extra, eps):
    """Moved from test_data.py (chapter 6's written-out loss): now on the one loss the library trains with."""
    torch.manual_seed(seed)
    batch = collate(make_reversal_data(4, seed=seed))
    logits = torch.randn(*batch.labels.shape, 20)
    wider = F.pad(logits, (0, 0, 0, extra), value=5.0)          # garbage logits at new padded positions
    loss = sequence_loss(logits, batch.labels, PAD_ID, eps)
    padded = F.pad(batch.labels, (0, extra), value=PAD_ID)
    assert torch.allclose(loss, sequence_loss(wider, padded, PAD_ID, eps))
    ref = F.cross_entropy(logits.reshape(-1, 20), batch.labels.reshape(-1), ignore_index=PAD_ID,
                          label_smoothing=eps)
    assert torch.allclose(loss, ref, atol=1e-6)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 1000), extra=st.integers(0, 3))
def test_sequence_loss_without_smoothing_is_chapter_6s_written_out_loss(seed, extra):
    torch.manual_seed(seed)
    labels = F.pad(collate(make_reversal_data(4, seed=seed)).labels, (0, extra), value=PAD_ID)
    logits = torch.randn(*labels.shape, 20) * 3
    expected = token_nll_simple(logits, labels, PAD_ID)
    assert torch.allclose(sequence_loss(logits, labels, PAD_ID, label_smoothing=0.0), expected, atol=1e-6)


def test_sequence_loss_bad_input():
    with pytest.raises(ValueError, match="labels"):
        sequence_loss(torch.zeros(2, 3, 10), torch.zeros(2, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="label_smoothing"):
        sequence_loss(torch.zeros(2, 3, 10), torch.ones(2, 3, dtype=torch.long), label_smoothing=1.0)
    with pytest.raises(ValueError, match="label_smoothing"):
        sequence_loss(torch.zeros(2, 3, 10), torch.ones(2, 3, dtype=torch.long), label_smoothing=-0.1)


@pytest.mark.parametrize("warmup", [1, 10, 4000])
def test_schedule_shape(warmup):
    values = [noam_lr(s, 512, warmup) for s in range(1, 3 * warmup + 2)]
    peak = max(range(len(values)), key=values.__getitem__) + 1
    assert peak == warmup
    assert all(a < b for a, b in zip(values[:warmup - 1], values[1:warmup]))
    assert all(a > b for a, b in zip(values[warmup - 1:], values[warmup:]))
    assert math.isclose(inverse_sqrt_factor(warmup, warmup), 1.0)


def test_config_bad_values_name_the_argument():
    with pytest.raises(ValueError, match="warmup"):
        TrainingConfig(warmup=-3)
    with pytest.raises(ValueError, match="label_smoothing"):
        TrainingConfig(label_smoothing=1.0)
    with pytest.raises(ValueError, match="lr"):
        TrainingConfig(lr=-1.0)
    for name in ("lr", "eps", "weight_decay", "clip"):  # NaN and inf pass `< 0`
        for bad in (float("nan"), float("inf")):
            with pytest.raises(ValueError, match=name):
                TrainingConfig(**{name: bad})
    with pytest.raises(ValueError, match="schedule"):
        TrainingConfig(schedule="cosine")
    with pytest.raises(ValueError, match="warmup"):
        noam_lr(1, 512, -1)


def test_config_is_frozen_and_built_with_keywords():
    config = TrainingConfig(steps=10, warmup=2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.steps = 20
    with pytest.raises(TypeError, match="positional"):
        TrainingConfig(10)
    longer = dataclasses.replace(config, steps=20)
    assert (config.steps, longer.steps, longer.warmup) == (10, 20, 2)
    assert "pad_id" not in {f.name for f in dataclasses.fields(TrainingConfig)}
    with pytest.raises(TypeError, match="pad_id"):
        TrainingConfig(pad_id=0)


def test_pad_id_comes_from_the_model():
    from transformer_lib.model import Transformer, TransformerConfig
    model = Transformer(TransformerConfig(src_vocab_size=20, tgt_vocab_size=20, d_model=16, nhead=2,
                                          num_encoder_layers=1, num_decoder_layers=1, pad_id=5))
    wrapper = torch.nn.Module()
    wrapper.module = model                                        # as DistributedDataParallel holds it
    assert pad_id_of(model) == pad_id_of(wrapper) == pad_id_of(model, 5) == 5
    with pytest.raises(ValueError, match="pad_id must be the model's 5"):
        pad_id_of(model, 0)
    with pytest.raises(TypeError, match="pad_id"):
        pad_id_of(torch.nn.Linear(2, 2))
    assert pad_id_of(torch.nn.Linear(2, 2), 0) == 0
    logits, labels = torch.randn(2, 3, 20), torch.tensor([[6, 5, 5], [7, 8, 5]])
    loss, logged = smoothed_loss(5, 0.1)(logits, labels)
    assert loss is logged and torch.equal(loss, sequence_loss(logits, labels, 5, 0.1))
