"""transformer_lib.training: the optimizer and scheduler of a recipe, evaluation, the loop and a short training run
(the loss, the schedules and the config checks: test_recipe.py)."""
import math

import pytest
import torch

from transformer_lib.data import PAD_ID, batches, collate, make_reversal_data
from transformer_lib.model import Transformer, TransformerConfig
from transformer_lib.recipe import (TrainingConfig, autocast, inverse_sqrt_factor, linear_decay_factor,
                                    sequence_loss)
from transformer_lib.training import (StepResult, evaluate, exact_match, make_optimizer, make_scheduler, run_steps,
                                      train, train_step)

SMALL = dict(src_vocab_size=20, tgt_vocab_size=20, d_model=16, nhead=2, num_encoder_layers=1,
             num_decoder_layers=1, dim_feedforward=32, dropout=0.0, max_len=16)


def test_scheduler_follows_factor():
    cfg = TrainingConfig(lr=1e-3, warmup=5)
    opt = make_optimizer(torch.nn.Linear(2, 2), cfg)
    sched = make_scheduler(opt, cfg)
    for k in range(20):
        assert math.isclose(sched.get_last_lr()[0], 1e-3 * inverse_sqrt_factor(k + 1, 5))
        opt.step()
        sched.step()


def test_linear_schedule_rises_to_the_peak_then_falls_to_the_last_step():
    cfg = TrainingConfig(lr=1e-3, warmup=4, steps=10, schedule="linear")
    opt = make_optimizer(torch.nn.Linear(2, 2), cfg)
    sched = make_scheduler(opt, cfg)
    used = []
    for _ in range(cfg.steps):
        used.append(sched.get_last_lr()[0])
        opt.step()
        sched.step()
    assert used == [1e-3 * linear_decay_factor(k + 1, 4, 10) for k in range(10)]
    assert used[3] == 1e-3 and math.isclose(used[-1], 1e-3 / 7)           # g(w) = 1, g(n) = 1/(n+1-w)
    assert all(a < b for a, b in zip(used[:3], used[1:4]))
    assert all(a > b for a, b in zip(used[3:], used[4:]))
    with pytest.raises(ValueError, match="warmup"):
        TrainingConfig(warmup=20, steps=10, schedule="linear")
    with pytest.raises(ValueError, match="warmup must be <= total"):
        linear_decay_factor(1, 5, 3)


def _model(seed=0):
    torch.manual_seed(seed)
    return Transformer(TransformerConfig(**SMALL)).eval()


def test_short_training_decreases_loss():
    pairs = make_reversal_data(256, seed=0)
    valid = list(batches(pairs[:64], 64))
    model = _model()
    before = evaluate(model, valid)["loss"]
    gen = torch.Generator().manual_seed(0)
    history = train(model, lambda e: batches(pairs, 32, shuffle=True, generator=gen), valid,
                    TrainingConfig(steps=30, lr=3e-3, warmup=5, eval_every=10))
    assert len(history.train_loss) == 30 and history.eval_step == [10, 20, 30]
    assert history.best_valid_loss == min(history.valid_loss) < before
    assert math.isclose(evaluate(model, valid)["loss"], history.best_valid_loss, rel_tol=1e-5)
    assert len(history.grad_norm) == 30 and all(g > 0 for g in history.grad_norm)


def _recipe(**kw):
    return TrainingConfig(**{**dict(steps=10, lr=3e-3, warmup=3, label_smoothing=0.1, clip=0.5), **kw})


def _epochs(pairs, batch_size=16):
    """train_batches(epoch): a shuffle that depends on the epoch only, as a resumed run needs."""
    return lambda epoch: batches(pairs, batch_size, shuffle=True, generator=torch.Generator().manual_seed(epoch))


def _dropping_model(seed=0):
    torch.manual_seed(seed)
    return Transformer(TransformerConfig(**{**SMALL, "dropout": 0.1}))


def test_run_steps_reports_every_step_and_stops_when_asked():
    pairs = make_reversal_data(96, seed=1)                         # 6 batches of 16 per epoch
    model = _model()
    optimizer = make_optimizer(model, _recipe())
    scheduler = make_scheduler(optimizer, _recipe())
    seen = []
    taken = run_steps(model, optimizer, scheduler, _epochs(pairs), _recipe(steps=20),
                      lambda r: seen.append(r) or r.step == 8)
    assert taken == 8 and [r.step for r in seen] == list(range(1, 9)) and model.training
    assert all(isinstance(r, StepResult) and r.grad_norm > 0 and r.lr > 0 for r in seen)
    assert seen[0].lr == 3e-3 * inverse_sqrt_factor(1, 3)               # the lr the step used
    assert run_steps(model, optimizer, scheduler, _epochs(pairs), _recipe(steps=8), step=8) == 8


def test_run_steps_continues_a_run_bit_for_bit():
    """Stopped after 9 steps (inside epoch 1), then continued from step 9, epoch 1, 3 batches used:
    the same losses and weights as one uninterrupted run (dropout on: the generators are kept)."""
    pairs, recipe = make_reversal_data(96, seed=1), _recipe(steps=14)      # 6 batches per epoch

    def start():
        model = _dropping_model()
        optimizer = make_optimizer(model, recipe)
        return model, optimizer, make_scheduler(optimizer, recipe)

    whole, losses = start(), []
    torch.manual_seed(5)
    run_steps(*whole, _epochs(pairs), recipe, lambda r: losses.append(r.loss))
    parts, resumed = start(), []
    torch.manual_seed(5)
    assert run_steps(*parts, _epochs(pairs), recipe, lambda r: resumed.append(r.loss) or r.step == 9) == 9
    assert run_steps(*parts, _epochs(pairs), recipe, lambda r: resumed.append(r.loss),
                     step=9, epoch=1, skip=3) == 14
    assert resumed == losses
    assert all(torch.equal(a, b) for a, b in zip(whole[0].parameters(), parts[0].parameters()))


def test_train_step_loss_hook_and_measuring_the_norm_without_clipping():
    batch = collate(make_reversal_data(8, seed=2))
    model = _model()
    optimizer = make_optimizer(model, _recipe(clip=None))
    calls = []

    def doubled(logits, labels):
        calls.append(logits.shape)
        loss = sequence_loss(logits, labels, PAD_ID)
        return 2 * loss, loss.detach()

    logged, norm = train_step(model, optimizer, batch, _recipe(clip=None), doubled)
    assert calls == [(8, batch.labels.shape[1], 20)]
    # the gradients were those of 2 * loss, unclipped: clip_grad_norm_ with max_norm inf scales by 1
    twin = _model()
    sequence_loss(twin(*batch[:2]), batch.labels, PAD_ID).mul(2).backward()
    grads = torch.cat([p.grad.flatten() for p in twin.parameters()])
    assert math.isclose(norm, grads.norm().item(), rel_tol=1e-5)
    with torch.no_grad():
        assert math.isclose(logged, sequence_loss(twin(*batch[:2]), batch.labels, PAD_ID).item(), rel_tol=1e-6)


def test_evaluate_loss_and_exact_match():
    batch = collate(make_reversal_data(40, seed=3))
    bos = torch.ones(len(batch.labels), 1, dtype=torch.long)

    def perfect(model, src, max_new_tokens):             # "generates" the labels, BOS first
        assert max_new_tokens == batch.labels.shape[1] + 1
        return torch.cat([bos, batch.labels], dim=1)

    def never_ends(model, src, max_new_tokens):          # BOS, BOS: no EOS anywhere
        return torch.ones(len(src), 2, dtype=torch.long)

    model = _model().train()
    result = evaluate(model, [batch], PAD_ID, decode=perfect)
    assert result["exact_match"] == 1.0 and model.training               # its mode is restored
    assert result["loss"] == evaluate(model, [batch])["loss"] and set(evaluate(model, [batch])) == {"loss"}
    assert evaluate(model, [batch], decode=never_ends)["exact_match"] == 0.0
    assert exact_match(perfect(model, batch.src, batch.labels.shape[1] + 1), batch.labels).all()
    only_padding = (batch.src, batch.tgt_in, torch.zeros_like(batch.labels))
    with pytest.raises(ValueError, match="non-PAD"):
        evaluate(model, [only_padding])


def _losses(pairs, **recipe):
    model = _model()
    config = TrainingConfig(steps=6, lr=3e-3, warmup=2, **recipe)
    optimizer = make_optimizer(model, config)
    losses = []
    run_steps(model, optimizer, make_scheduler(optimizer, config), lambda e: batches(pairs, 32), config,
              lambda r: losses.append(r.loss))
    return losses


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_the_forward_pass_and_loss_of_a_step_compile_as_one_graph(precision):
    """What `train_step` runs between its batch check and `backward`, in both precisions: one
    graph, no break (AOTAutograd derives the backward graph from it)."""
    torch._dynamo.reset()
    model = _model().train()
    src, tgt_in, labels = next(iter(batches(make_reversal_data(64, seed=1), 16)))
    padding = model.check_inputs(src, tgt_in)

    def forward_and_loss(src, tgt_in, labels):
        with autocast(precision, src.device.type):
            logits = model(src, tgt_in, validate=False, padding=padding)
        return sequence_loss(logits, labels, PAD_ID, 0.1)

    explained = torch._dynamo.explain(forward_and_loss)(src, tgt_in, labels)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons


@pytest.mark.skipif(not hasattr(torch.nn.Module, "compile"), reason="nn.Module.compile: torch >= 2.2")
def test_compiled_training_takes_the_eager_steps(monkeypatch):
    """`compile=True`: the same losses as eager, with no graph break. The aot_eager backend traces
    forward and backward as inductor does, without the minute of C++ compilation on a CPU."""
    from torch._dynamo.utils import counters
    monkeypatch.setattr(Transformer, "compile",
                        lambda self: torch.nn.Module.compile(self, backend="aot_eager"))
    pairs = make_reversal_data(256, seed=0)
    eager = _losses(pairs)
    torch._dynamo.reset()
    counters.clear()
    compiled = _losses(pairs, compile=True)
    assert not counters["graph_break"], dict(counters["graph_break"])
    assert compiled == pytest.approx(eager, rel=1e-4)


def test_bf16_training_follows_fp32_and_fp64_needs_float64_weights():
    """bf16 autocast: float32 weights, the same losses up to bfloat16's rounding (8 bits of mantissa:
    a relative 2**-8 per product, far below 0.05 on a loss near 3)."""
    pairs = make_reversal_data(256, seed=0)
    fp32, bf16 = _losses(pairs), _losses(pairs, precision="bf16")
    assert fp32 != bf16 and max(abs(a - b) for a, b in zip(fp32, bf16)) < 0.05
    with pytest.raises(TypeError, match="precision 'fp64' trains torch.float64 weights"):
        _losses(pairs, precision="fp64")
    with pytest.raises(ValueError, match="precision must be one of"):
        TrainingConfig(precision="fp16")


def test_training_ignores_the_models_pad_id():
    """A model whose pad id is 3: the step's loss, train's validation and evaluate ignore the labels 3,
    and would differ if they ignored 0 (the data's PAD_ID) instead."""
    config = TransformerConfig(**{**SMALL, "pad_id": 3})
    torch.manual_seed(0)
    model = Transformer(config)
    reference = Transformer(config)
    reference.load_state_dict(model.state_dict())
    src = torch.tensor([[4, 5, 6, 3], [7, 8, 9, 10]])
    tgt_in = torch.tensor([[1, 6, 5, 3], [1, 10, 9, 8]])
    labels = torch.tensor([[6, 5, 2, 3], [10, 9, 8, 2]])                   # one label 3: padding
    recipe = _recipe(clip=None)
    logged, _ = train_step(model, make_optimizer(model, recipe), (src, tgt_in, labels), recipe)
    logits = reference(src, tgt_in)
    assert math.isclose(logged, sequence_loss(logits, labels, 3, 0.1).item(), rel_tol=1e-6)
    assert not math.isclose(logged, sequence_loss(logits, labels, 0, 0.1).item(), rel_tol=1e-3)
    batch = [(src, tgt_in, labels)]
    expected = sequence_loss(model.eval()(src, tgt_in), labels, 3).item()
    assert math.isclose(evaluate(model, batch)["loss"], expected, rel_tol=1e-6)
    history = train(model, lambda epoch: batch, batch, _recipe(steps=1, eval_every=1))
    assert math.isclose(history.valid_loss[0], evaluate(model, batch)["loss"], rel_tol=1e-6)
    with pytest.raises(ValueError, match="pad_id must be the model's 3"):
        evaluate(model, batch, pad_id=0)
