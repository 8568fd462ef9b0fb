"""Chapter 9's recipe search, rerunnable: train each recipe and record what it reached.

    OMP_NUM_THREADS=1 python bench/dates_recipes.py [--runs B K] [--jobs 2] [--quick]
    OMP_NUM_THREADS=1 python bench/dates_recipes.py --timing 5 10 --runs K C A E plain

Every run trains chapter 9's date model (2 + 2 layers, 4 heads, batch 128, dropout 0,
AdamW with weight decay 0.01, gradient clipping at 1) on chapter 9's data (290,000
training pairs, 500 validation and 2,000 test dates) with one recipe and one seed, on one
thread, and records:

- `curve`: the greedy exact match on the 500 validation dates every `EM_EVERY` steps,
  with the seconds of training steps taken so far (evaluation not counted);
- the weights with the best validation loss (evaluated every 100 steps, as `train`
  does): their greedy exact match on the 2,000 test dates, that of the weakest of the
  eight formats and of the ten locales, and their wrong answers, by field.

A run of two phases trains the second with a new AdamW at a constant learning rate,
starting from the first phase's best weights, on the batches that follow. Runs go in
parallel (`--jobs`, each on one thread), in the order given; their times are therefore those
of a machine with `--jobs` runs at once. Rows are merged into
bench/results/dates_recipes-cpu.json (or `--out`), one per (run, seed): a row measured
again replaces the old one. `--timing ROUNDS STEPS` trains nothing: it times a
training step of each run named (`step_ms`, milliseconds): the runs take turns, STEPS steps
each per round, and each keeps its fastest round, so that a busy machine slows no run more
than another (runs B, D, G and J share K's model and batches). `--quick` trains each phase 1/20 of its steps and writes
nothing unless `--out` is given (a smoke test).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import os
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _record import device_name, result_path  # noqa: E402
from accuracy_spread import date_splits  # noqa: E402

from transformer_lib import dates  # noqa: E402
from transformer_lib.data import batches, bucket_batches  # noqa: E402
from transformer_lib.generation import greedy  # noqa: E402
from transformer_lib.model import Transformer, TransformerConfig  # noqa: E402
from transformer_lib.recipe import TrainingConfig  # noqa: E402
from transformer_lib.training import (evaluate, make_optimizer,  # noqa: E402
                                      make_scheduler, run_steps, train_step)
from transformer_lib.utils import seed_everything  # noqa: E402

NAME, BATCH_SIZE, EM_EVERY = "dates_recipes", 128, 100
FIELDS = {"year": slice(0, 4), "month": slice(5, 7), "day": slice(8, 10)}
COMMON = {"weight_decay": 0.01, "clip": 1.0, "eval_every": 100}


def phase(steps: int, lr: float, **kw) -> TrainingConfig:
    return TrainingConfig(steps=steps, lr=lr, **(COMMON | kw))


def settle(steps: int, lr: float) -> TrainingConfig:
    """A second phase: a constant, low learning rate."""
    return phase(steps, lr, schedule="constant", label_smoothing=0.1)


@dataclasses.dataclass(frozen=True)
class Run:
    note: str
    d_model: int = 64
    d_ff: int = 256
    buckets: bool = True
    phases: tuple[TrainingConfig, ...] = ()
    seeds: tuple[int, ...] = (0,)


B1 = phase(1600, 3e-3, warmup=200)                 # inverse square root decay
SHORT = {"warmup": 100, "label_smoothing": 0.1}
RUNS = {
    "plain": Run("first attempt: d=128, random batches, peak lr 1e-3, no smoothing", 128, 512,
                 False, (phase(1000, 1e-3, warmup=200, label_smoothing=0.0),)),
    "A": Run("d=128", 128, 256, phases=(phase(800, 2e-3, warmup=200),)),
    "B": Run("d=64", phases=(B1,)),
    "C": Run("as B, random batches", buckets=False, phases=(phase(800, 3e-3),)),
    "D": Run("as B, no label smoothing",
             phases=(dataclasses.replace(B1, label_smoothing=0.0),)),
    "E": Run("d=96", 96, 384, phases=(B1,)),
    "G": Run("B, then 600 steps at 1.5e-4", phases=(B1, settle(600, 1.5e-4))),
    "J": Run("linear decay to the last step",
             phases=(phase(1400, 4e-3, schedule="linear", **SHORT),)),
    "K": Run("as J, 1,000 steps: chapter 9's recipe",
             phases=(phase(1000, 4e-3, schedule="linear", **SHORT),)),
}
DATA: dict = {}                                     # filled before the workers fork


def load_data() -> None:
    test, valid, train = date_splits()
    vocab = dates.source_vocab()
    DATA.update(test=test, vocab=vocab, train_ids=dates.encode_pairs(train, vocab),
                valid=list(bucket_batches(dates.encode_pairs(valid, vocab), 500)))


def train_phase(model, pairs, config: TrainingConfig, clock: dict, curve: list) -> dict:
    """`train`'s loop, with the validation exact match every EM_EVERY steps on the side."""
    seed_everything(config.seed)
    optimizer = make_optimizer(model, config)
    scheduler = make_scheduler(optimizer, config)
    best = {"loss": float("inf"), "step": 0, "state": None}

    def on_step(result) -> None:
        if result.step % config.eval_every and result.step != config.steps:
            return
        clock["train"] += time.perf_counter() - clock["since"]
        decode = None if result.step % EM_EVERY else (lambda m, s, n: greedy(m, s, n))
        scores = evaluate(model, DATA["valid"], decode=decode)
        if decode is not None:
            curve.append([clock["steps"] + result.step, round(clock["train"], 1),
                          scores["exact_match"]])
        if scores["loss"] < best["loss"]:
            best.update(loss=scores["loss"], step=result.step,
                        state={k: v.clone() for k, v in model.state_dict().items()})
        clock["since"] = time.perf_counter()

    clock["since"] = time.perf_counter()
    run_steps(model, optimizer, scheduler, lambda epoch: pairs, config, on_step)
    model.load_state_dict(best["state"])
    clock["steps"] += config.steps
    return {"best_step": best["step"], "best_valid_loss": round(best["loss"], 4)}


def test_scores(model: Transformer) -> dict:
    pairs = DATA["test"]
    answers = dates.translate(model, [p.source for p in pairs], DATA["vocab"])
    ok = [a == p.target for a, p in zip(answers, pairs)]
    row = {"n": len(pairs), "test_correct": sum(ok)}
    for key in ("format", "locale"):
        right, total = Counter(), Counter()
        for p, good in zip(pairs, ok):
            total[getattr(p, key)] += 1
            right[getattr(p, key)] += good
        weakest = min(total, key=lambda k: right[k] / total[k])
        row[f"min_{key}"] = [weakest, right[weakest], total[weakest]]
    wrong = [(p, a) for p, a, good in zip(pairs, answers, ok) if not good]
    row["errors"] = {f: sum(a[s] != p.target[s] for p, a in wrong)
                     for f, s in FIELDS.items()}
    row["wrong"] = [[p.source, p.target, a, p.locale, p.format] for p, a in wrong]
    return row


def model_and_batches(run: Run, seed: int) -> tuple[Transformer, Iterator]:
    vocab = DATA["vocab"]
    config = TransformerConfig(src_vocab_size=len(vocab), tgt_vocab_size=len(dates.TARGET_VOCAB), d_model=run.d_model,
                               nhead=4, num_encoder_layers=2, num_decoder_layers=2,
                               dim_feedforward=run.d_ff, dropout=0.0, max_len=64)
    seed_everything(seed)                           # as chapter 9's training cell
    model = Transformer(config)
    shuffle = torch.Generator().manual_seed(seed)
    make = bucket_batches if run.buckets else batches
    extra = {} if run.buckets else {"shuffle": True}
    return model, iter(make(DATA["train_ids"], BATCH_SIZE, generator=shuffle, **extra))


def train_run(job: tuple[str, int, int]) -> dict:
    name, seed, divide = job
    torch.set_num_threads(1)
    run, start = RUNS[name], time.perf_counter()
    model, pairs = model_and_batches(run, seed)
    clock, curve, phases = {"train": 0.0, "steps": 0}, [], []
    for p in run.phases:
        p = dataclasses.replace(p, seed=seed, steps=max(p.steps // divide, 2),
                                warmup=max(min(p.warmup, p.steps // divide), 1))
        phases.append(train_phase(model, pairs, p, clock, curve))
    steps = clock["steps"]
    return {"run": name, "seed": seed, "note": run.note, "d_model": run.d_model,
            "d_ff": run.d_ff, "batches": "buckets" if run.buckets else "random",
            "num_parameters": model.num_parameters(),
            "phases": [{k: v for k, v in dataclasses.asdict(p).items()
                        if k in ("steps", "lr", "warmup", "schedule", "label_smoothing")}
                       for p in run.phases],
            "steps": steps, "train_seconds": round(clock["train"], 1),
            "ms_per_step": round(1000 * clock["train"] / steps, 1), "curve": curve,
            "phase_results": phases,
            } | test_scores(model) | {"seconds": round(time.perf_counter() - start, 1),
                                  "load_average": round(os.getloadavg()[0], 1)}


def step_times(names: list[str], rounds: int, steps: int) -> dict:
    """Milliseconds per training step of each run's model and batches, on one thread:
    the runs take turns, `steps` steps each per round, and each keeps its fastest round
    (a busy machine slows some rounds, not the fastest)."""
    torch.set_num_threads(1)
    setups = {n: model_and_batches(RUNS[n], 0) for n in names}
    optimizers = {n: make_optimizer(m, RUNS[n].phases[0]) for n, (m, _) in setups.items()}
    best = {n: float("inf") for n in names}
    for r in range(rounds + 1):                     # round 0 warms up
        for n, (model, pairs) in setups.items():
            start = time.perf_counter()
            for _ in range(steps):
                train_step(model, optimizers[n], next(pairs), RUNS[n].phases[0])
            if r:
                best[n] = min(best[n], (time.perf_counter() - start) / steps)
    return {n: round(1000 * t, 1) for n, t in best.items()}


def merge(path: Path, new: list[dict], settings: dict, timing: dict | None = None) -> None:
    old_record = json.loads(path.read_text()) if path.exists() else {}
    old = old_record.get("rows", [])
    timing = timing or old_record.get("step_ms")
    settings = old_record.get("settings", {}) | settings
    keys = {(r["run"], r["seed"]) for r in new}
    rows = [r for r in old if (r["run"], r["seed"]) not in keys] + new
    rows.sort(key=lambda r: (list(RUNS).index(r["run"]), r["seed"]))
    record = {"benchmark": NAME, "device": device_name(torch.device("cpu")),
              "device_type": "cpu", "torch": str(torch.__version__),
              "date": time.strftime("%Y-%m-%d"), "settings": settings,
              "step_ms": timing, "rows": rows}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", nargs="+", choices=list(RUNS), default=list(RUNS))
    parser.add_argument("--jobs", type=int, default=1, help="runs at once, 1 thread each")
    parser.add_argument("--quick", action="store_true", help="1/20 of the steps")
    parser.add_argument("--timing", type=int, nargs=2, metavar=("ROUNDS", "STEPS"),
                        help="only time the steps of --runs (step_ms), e.g. 5 10")
    parser.add_argument("--out", type=Path, help="default: " + str(
        result_path(NAME, torch.device("cpu"))))
    args = parser.parse_args(argv)
    divide = 20 if args.quick else 1
    jobs = [(n, s, divide) for n in args.runs for s in RUNS[n].seeds]
    load_data()
    settings = {"command": "OMP_NUM_THREADS=1 python bench/dates_recipes.py --jobs "
                f"{args.jobs}", "jobs_at_once": args.jobs, "threads_per_run": 1,
                "cpu_count": multiprocessing.cpu_count(), "batch_size": BATCH_SIZE,
                "em_every": EM_EVERY, "capability":
                torch.backends.cpu.get_cpu_capability(), "quick": args.quick,
                "runs": {n: r.note for n, r in RUNS.items()}}
    path = args.out or (None if args.quick else result_path(NAME, torch.device("cpu")))
    if args.timing:
        timing = step_times(args.runs, *args.timing)
        print(json.dumps(timing))
        if path is not None:
            command = "OMP_NUM_THREADS=1 python bench/dates_recipes.py --timing "
            merge(path, [], {"timing": {"rounds": args.timing[0], "steps": args.timing[1],
                                        "command": command + " ".join(map(str, args.timing))}},
                  timing)
        return 0
    rows = []
    with multiprocessing.get_context("fork").Pool(args.jobs) as pool:
        for row in pool.imap_unordered(train_run, jobs):
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items()
                              if k not in ("curve", "wrong", "phases")}), flush=True)
            if path is not None:
                merge(path, rows, settings)          # a stopped run keeps what it did
    return 0


if __name__ == "__main__":
    sys.exit(main())
