"""transformer_lib.training: loss, schedule, config checks, checkpoints and a short training run."""
import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer_lib.data import batches, make_reversal_data
from transformer_lib.model import Transformer, TransformerConfig
from transformer_lib.training import (TrainingConfig, evaluate_loss, inverse_sqrt_factor, load_checkpoint,
                                      make_optimizer, make_scheduler, noam_lr, save_checkpoint, sequence_loss, train)

SMALL = dict(src_vocab_size=20, tgt_vocab_size=20, d_model=16, nhead=2, num_encoder_layers=1,
             num_decoder_layers=1, dim_feedforward=32, dropout=0.0, max_len=16)


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


def test_scheduler_follows_factor():
    cfg = TrainingConfig(lr=1e-3, warmup=5)
    opt = make_optimizer(torch.nn.Linear(2, 2), cfg)
    sched = make_scheduler(opt, cfg)
    for k in range(20):
        assert math.isclose(sched.get_last_lr()[0], 1e-3 * inverse_sqrt_factor(k + 1, 5))
        opt.step()
        sched.step()


def test_config_bad_values_name_the_argument():
    with pytest.raises(ValueError, match="warmup"):
        TrainingConfig(warmup=-3)
    with pytest.raises(ValueError, match="label_smoothing"):
        TrainingConfig(label_smoothing=1.0)
    with pytest.raises(ValueError, match="lr"):
        TrainingConfig(lr=-1.0)
    with pytest.raises(ValueError, match="schedule"):
        TrainingConfig(schedule="cosine")
    with pytest.raises(ValueError, match="warmup"):
        noam_lr(1, 512, -1)


def _model(seed=0):
    torch.manual_seed(seed)
    return Transformer(TransformerConfig(**SMALL)).eval()


def test_checkpoint_round_trip(tmp_path):
    model = _model()
    src = torch.tensor([[5, 6, 7, 2], [8, 9, 2, 0]])
    tgt = torch.tensor([[1, 7, 6, 5], [1, 9, 8, 0]])
    path = save_checkpoint(tmp_path / "m.pt", model, step=3)
    restored, extra = load_checkpoint(path, with_extra=True)
    with torch.no_grad():
        assert torch.equal(model(src, tgt), restored(src, tgt))
    assert extra == {"step": 3} and restored.config == model.config


def test_bad_checkpoints_raise_value_error_with_path(tmp_path):
    model = _model()
    good = save_checkpoint(tmp_path / "good.pt", model)
    corrupt = tmp_path / "corrupt.pt"
    corrupt.write_bytes(good.read_bytes()[:500])
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"not a checkpoint at all")
    mismatched = save_checkpoint(tmp_path / "mismatched.pt", model,
                                 config=TransformerConfig(**{**SMALL, "d_model": 32}))
    no_config = tmp_path / "no_config.pt"
    torch.save({"format": "transformer_lib.checkpoint/1", "state_dict": model.state_dict()}, no_config)
    plain = tmp_path / "plain.pt"
    torch.save(model.state_dict(), plain)
    for bad, what in ((corrupt, "readable"), (garbage, "readable"), (mismatched, "match"),
                      (no_config, "config"), (plain, "checkpoint")):
        with pytest.raises(ValueError, match=what) as info:
            load_checkpoint(bad)
        assert str(bad) in str(info.value)


def test_short_training_decreases_loss():
    pairs = make_reversal_data(256, seed=0)
    valid = list(batches(pairs[:64], 64))
    model = _model()
    before = evaluate_loss(model, valid)
    gen = torch.Generator().manual_seed(0)
    history = train(model, lambda e: batches(pairs, 32, shuffle=True, generator=gen), valid,
                    TrainingConfig(steps=30, lr=3e-3, warmup=5, eval_every=10))
    assert len(history.train_loss) == 30 and history.eval_step == [10, 20, 30]
    assert history.best_valid_loss == min(history.valid_loss) < before
    assert math.isclose(evaluate_loss(model, valid), history.best_valid_loss, rel_tol=1e-5)
