"""Train the recipes whose trained scores chapters 6b, 7 and 9 assert, for one seed, and
record the scores with the kernels, thread count and torch version that computed them.

    OMP_NUM_THREADS=1 python bench/accuracy_spread.py --seed 0 [--chapters 06b 07 09]
    ATEN_CPU_CAPABILITY=default OMP_NUM_THREADS=2 \
        python bench/accuracy_spread.py --seed 1

A trained model's exact match depends on the rounding of the CPU's kernels and on the
thread count, as much as on the seed. The chapters assert bounds below the worst score
recorded here, and show the spread. The chapters, each trained as its notebook trains it
(`--seed s` replaces the notebook's seed for the weights, the batch order and
`TrainingConfig.seed`; the data is fixed):

- `06b-seed`: chapter 6b's seed recipe (its seed is 42 + s), 40 test sequences;
- `06b`: chapter 6b's recipe, 1,000 steps, 2,000 held-out sequences;
- `06b-precision`: chapter 6b's 250-step runs in float32 and in bfloat16 (mixed precision);
- `07`: chapter 7's reverser, 400 steps, greedy and beam search (4) on 2,000 sequences;
- `09`: chapter 9's date model (the recipe of tools/train_pretrained.py), 2,000 test
  dates.

Rows are merged into bench/results/accuracy_spread-cpu.json, one per (chapter, seed,
kernel set, threads): a row measured again replaces the old one, rows of other settings
are kept. Two runs may write at once (the folder is locked while the file is rewritten).
`seconds` says what one run cost, on a machine that may have been busy; nothing here is
timed for the book.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import fcntl
import importlib.util
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _record import device_name, result_path  # noqa: E402

from transformer_lib import dates  # noqa: E402
from transformer_lib.data import (PAD_ID, batches, bucket_batches,  # noqa: E402
                                  collate, make_reversal_data, split)
from transformer_lib.generation import (beam_search,  # noqa: E402
                                        cross_attention_weights, greedy)
from transformer_lib.model import (Transformer, TransformerConfig,  # noqa: E402
                                   greedy_decode_simple)
from transformer_lib.recipe import TrainingConfig, sequence_loss  # noqa: E402
from transformer_lib.torch_layers import TorchLayersTransformer  # noqa: E402
from transformer_lib.training import exact_match, train  # noqa: E402
from transformer_lib.utils import seed_everything  # noqa: E402

NAME = "accuracy_spread"
ROOT = Path(__file__).resolve().parents[1]
REVERSAL = TransformerConfig(src_vocab_size=20, tgt_vocab_size=20, d_model=32, nhead=4,
                             num_encoder_layers=2, num_decoder_layers=2,
                             dim_feedforward=64, dropout=0.0, max_len=16)
RECIPE_06B = TrainingConfig(steps=1000, lr=2e-3, warmup=300, weight_decay=0.01,
                            label_smoothing=0.1, clip=1.0, eval_every=100)
RECIPE_06B_SEED = TrainingConfig(steps=250, lr=1e-3, schedule="constant",
                                 betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                                 label_smoothing=0.0, clip=None, eval_every=5)
RECIPE_07 = TrainingConfig(steps=400, lr=3e-3, warmup=50, schedule="linear",
                           weight_decay=0.01, label_smoothing=0.1, clip=1.0,
                           eval_every=100)


def report(model: torch.nn.Module, pairs: list,
           decoder: Transformer | None = None) -> dict:
    """Chapter 6b's `report`: teacher-forced loss and token accuracy, greedy match."""
    src, tgt_in, labels = collate(pairs)
    model.eval()
    with torch.no_grad():
        logits = model(src, tgt_in)
    valid = labels.ne(PAD_ID)
    token_acc = (logits.argmax(-1).eq(labels) & valid).sum().item() / valid.sum().item()
    generated = greedy_decode_simple(decoder or model, src, labels.shape[1] + 2)
    correct = int(exact_match(generated, labels).sum())
    return {"test_loss": sequence_loss(logits, labels, PAD_ID).item(),
            "token_accuracy": token_acc, "correct": correct, "n": len(pairs),
            "exact_match": correct / len(pairs)}


def reversal_splits() -> list[list]:
    """Chapters 6b and 7: 30,000 training, 500 validation and 2,000 test sequences."""
    data = make_reversal_data(32_500, seed=2024, distinct=True)
    return split(data, [30_000, 500, 2_000])


def train_on(model: torch.nn.Module, train_pairs: list, valid_pairs: list, batch: int,
             recipe: TrainingConfig, seed: int):
    """The chapters' training cell; a generator seeded with `seed` shuffles batches."""
    shuffle = torch.Generator().manual_seed(seed)
    return train(model,
                 lambda epoch: batches(train_pairs, batch, True, generator=shuffle),
                 list(batches(valid_pairs, len(valid_pairs))),
                 dataclasses.replace(recipe, seed=seed), pad_id=PAD_ID)    # the reference model has no config


def train_reverser(recipe: TrainingConfig, seed: int, splits: list[list]) -> tuple:
    """Chapters 6b and 7: `seed` for the weights, the batch order and the recipe."""
    seed_everything(seed)
    model = Transformer(REVERSAL)
    return model, train_on(model, splits[0], splits[1], 128, recipe, seed)


def chapter_06b_seed(seed: int) -> dict:
    data = make_reversal_data(200, seed=42)
    seed_train, seed_valid, seed_test = split(data, [120, 40, 40])
    seed_everything(42 + seed)
    baseline = TorchLayersTransformer()
    history = train_on(baseline, seed_train, seed_valid, 24, RECIPE_06B_SEED, 42 + seed)
    result = report(baseline, seed_test, Transformer.from_torch_layers(baseline))
    best = min(history.valid_loss)
    return result | {"best_step": history.best_step, "best_valid_loss": best,
                     "worse_at_end": history.valid_loss[-1] > best}


def chapter_06b(seed: int) -> dict:
    splits = reversal_splits()
    model, history = train_reverser(RECIPE_06B, seed, splits)
    return report(model, splits[2]) | {"best_step": history.best_step,
                                       "best_valid_loss": history.best_valid_loss}


def chapter_06b_precision(seed: int) -> dict:
    splits = reversal_splits()
    short = dataclasses.replace(RECIPE_06B, steps=250, warmup=100)
    out = {"n": len(splits[2])}
    for precision in ("fp32", "bf16"):
        recipe = dataclasses.replace(short, precision=precision)
        model, _ = train_reverser(recipe, seed, splits)
        out[f"{precision}_correct"] = report(model, splits[2])["correct"]
    return out


def length_errors(generated: torch.Tensor, labels: torch.Tensor) -> int:
    """Chapter 7: outputs whose length up to EOS differs from the reference's."""
    return int(((generated[:, 1:] != 0).sum(-1) != (labels != 0).sum(-1)).sum())


def chapter_07(seed: int) -> dict:
    splits = reversal_splits()
    model, history = train_reverser(RECIPE_07, seed, splits)
    src, tgt_in, labels = collate(splits[2])
    out = {"greedy": greedy(model, src, 10), "beam": beam_search(model, src, 4, 10)}
    row = {"n": len(labels), "best_valid_loss": history.best_valid_loss}
    for name, ids in out.items():
        row[f"{name}_correct"] = int(exact_match(ids, labels).sum())
        row[f"{name}_length_errors"] = length_errors(ids, labels)
    words = ((src != 0).sum(-1) - 1).tolist()
    for layer, w in enumerate(cross_attention_weights(model, src, tgt_in)):
        hits = [w[b, t].argmax().item() == n - 1 - t
                for b, n in enumerate(words) for t in range(n)]
        row[f"mirrored_layer_{layer + 1}"] = sum(hits) / len(hits)
    return row


def load_train_pretrained():
    """tools/train_pretrained.py: it holds chapter 9's recipe (RECIPE, BATCH_SIZE)."""
    path = ROOT / "tools" / "train_pretrained.py"
    spec = importlib.util.spec_from_file_location("train_pretrained", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def attention_mass(model: Transformer, src_vocab: dates.CharVocab, pairs: list,
                   rows: slice,
                   columns: Callable[[dates.DatePair], list[int]]) -> list[float]:
    """Chapter 9, per decoder layer: mean attention of queries `rows` on columns(p)."""
    b = collate(dates.encode_pairs(pairs, src_vocab))
    maps = cross_attention_weights(model, b.src, b.tgt_in)
    return [sum(w[i, rows][:, columns(p)].sum(-1).mean().item()
                for i, p in enumerate(pairs)) / len(pairs) for w in maps]


def year_columns(p: dates.DatePair) -> list[int]:
    """Chapter 9: source positions of the four year digits."""
    start = p.source.index(p.target[:4])
    return list(range(start, start + 4))


def month_name_columns(p: dates.DatePair) -> list[int]:
    """Chapter 9: source positions of the month name (MMM or MMMM formats), else []."""
    from babel.dates import get_month_names
    pattern = dates.date_pattern(p.format, p.locale)
    if "MMM" not in pattern:
        return []
    width = "wide" if "MMMM" in pattern else "abbreviated"
    name = get_month_names(width, "format", p.locale)[int(p.target[5:7])]
    start = p.source.find(name)
    return list(range(start, start + len(name))) if start >= 0 else []


def mine() -> list[tuple[str, str]]:
    """Chapter 9's eight dates of its own, with their ISO forms."""
    def written(y, m, d, locale, fmt):
        day = datetime.date(y, m, d)
        return dates.render_date(day, locale, fmt), day.isoformat()
    return [("sexta-feira, 15 de fevereiro de 2019", "2019-02-15"),
            ("15. Februar 2019", "2019-02-15"), ("2019年2月15日", "2019-02-15"),
            ("Feb 15, 2019", "2019-02-15"), written(1969, 7, 20, "ru", "full"),
            written(2000, 1, 1, "ja", "full"),
            written(2038, 1, 19, "fr", "EEE, d MMM y"),
            written(1989, 11, 9, "de", "full")]


def date_splits() -> tuple[list, list, list]:
    """Chapter 9's test (seed 1), validation (seed 2) and training (seed 0) pairs."""
    test = dates.make_date_pairs(2_000, seed=1)
    valid = dates.make_date_pairs(500, seed=2, exclude={p.target for p in test})
    held_out = {p.target for p in test + valid}
    return test, valid, dates.make_date_pairs(290_000, seed=0, exclude=held_out)


def chapter_09(seed: int) -> dict:
    recipe = load_train_pretrained()
    test_pairs, valid_pairs, train_pairs = date_splits()
    src_vocab = dates.source_vocab()
    train_ids, valid_ids = (dates.encode_pairs(ps, src_vocab)
                            for ps in (train_pairs, valid_pairs))
    config = TransformerConfig(src_vocab_size=len(src_vocab),
                               tgt_vocab_size=len(dates.TARGET_VOCAB), d_model=64,
                               nhead=4, num_encoder_layers=2, num_decoder_layers=2,
                               dim_feedforward=256, dropout=0.0, max_len=64)
    seed_everything(seed)                            # as the chapter's training cell
    model = Transformer(config)
    shuffle = torch.Generator().manual_seed(seed)
    valid_batches = list(bucket_batches(valid_ids, 500))
    pairs_iter = bucket_batches(train_ids, recipe.BATCH_SIZE, generator=shuffle)
    history = train(model, lambda epoch: pairs_iter, valid_batches,
                    dataclasses.replace(recipe.RECIPE, seed=seed))
    sources, targets = [p.source for p in test_pairs], [p.target for p in test_pairs]
    greedy_out = dates.translate(model, sources, src_vocab)
    beam_out = dates.translate(model, sources, src_vocab,
                               decode=lambda m, src, n: beam_search(m, src, 4, n))
    ok = [g == t for g, t in zip(greedy_out, targets)]
    row = {"n": len(targets), "best_step": history.best_step,
           "best_valid_loss": history.best_valid_loss, "greedy_correct": sum(ok),
           "beam_correct": sum(b == t for b, t in zip(beam_out, targets)),
           "disagreements": sum(g != b for g, b in zip(greedy_out, beam_out))}
    for key in ("locale", "format"):
        right, total = Counter(), Counter()
        for p, good in zip(test_pairs, ok):
            total[getattr(p, key)] += 1
            right[getattr(p, key)] += good
        row[f"min_{key}"] = min(right[k] / total[k] for k in total)
    probe = test_pairs[:500]
    named = [p for p in probe if month_name_columns(p)]
    year = attention_mass(model, src_vocab, probe, slice(0, 4), year_columns)
    month = attention_mass(model, src_vocab, named, slice(5, 7), month_name_columns)
    texts, answers = zip(*mine())
    translated = dates.translate(model, list(texts), src_vocab)
    return row | {"year_mass_max": max(year), "month_mass_max": max(month),
                  "mine_correct": sum(a == t for a, t in zip(translated, answers))}


CHAPTERS = {"06b-seed": chapter_06b_seed, "06b": chapter_06b,
            "06b-precision": chapter_06b_precision, "07": chapter_07, "09": chapter_09}
KEY = ("chapter", "seed", "capability", "threads")


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on the folder of `path` while the block rewrites it."""
    path.parent.mkdir(exist_ok=True)
    fd = os.open(path.parent, os.O_RDONLY)           # the folder: no lock file is left
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)                                 # closing releases the lock


def merge_row(row: dict) -> Path:
    """Put `row` into the record, replacing the row with the same KEY; keep the rest."""
    path = result_path(NAME, torch.device("cpu"))
    key = tuple(row[k] for k in KEY)
    with locked(path):
        rows = json.loads(path.read_text())["rows"] if path.exists() else []
        rows = [r for r in rows if tuple(r[k] for k in KEY) != key] + [row]
        rows.sort(key=lambda r: (r["chapter"], r["capability"], r["threads"],
                                 r["seed"]))
        record = {"benchmark": NAME, "device": device_name(torch.device("cpu")),
                  "device_type": "cpu", "date": datetime.date.today().isoformat(),
                  "settings": {"key": list(KEY), "command": "bench/accuracy_spread.py",
                               "chapters": {k: f.__name__
                                            for k, f in CHAPTERS.items()}},
                  "rows": rows}
        path.write_text(json.dumps(record, indent=1) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--chapters", nargs="+", choices=list(CHAPTERS),
                        default=["06b-seed", "06b", "06b-precision", "07", "09"])
    parser.add_argument("--no-record", action="store_true",
                        help="print the rows, do not write the file")
    args = parser.parse_args(argv)
    setting = {"seed": args.seed, "capability": torch.backends.cpu.get_cpu_capability(),
               "threads": torch.get_num_threads(), "torch": str(torch.__version__)}
    for chapter in args.chapters:
        start = time.perf_counter()
        scores = CHAPTERS[chapter](args.seed)
        seconds = round(time.perf_counter() - start, 1)
        row = {"chapter": chapter} | setting | {"seconds": seconds, "scores": scores}
        print(json.dumps(row), flush=True)
        if not args.no_record:
            merge_row(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
