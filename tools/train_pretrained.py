"""Train the capstone's date model (chapter 9's recipe) and write the checkpoint the library ships.

    OMP_NUM_THREADS=1 .venv/bin/python tools/train_pretrained.py [--out transformer_lib/pretrained/dates.pt]

The same data, seed and steps as `notebooks/09_dates.ipynb`, in the same order of random draws:
290,000 training pairs (seed 0) drawn without the 2,000 test dates (seed 1) and the 500 validation
dates (seed 2); d = 64, 2 + 2 layers; `TrainingConfig(steps=1000, lr=4e-3, warmup=100,
schedule="linear", weight_decay=0.01, label_smoothing=0.1, clip=1.0, eval_every=100, seed=0)`,
bucketed batches of 128. On one thread it gives, on the same machine, the weights the chapter
trains. The checkpoint (`transformer_lib.checkpoint.save_checkpoint`, float32 weights) holds, with
the weights, the source vocabulary and the greedy exact match on the 2,000 test dates, which
`transformer_lib.dates.pretrained()` reports and chapter 9 checks.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path

import torch

from transformer_lib.checkpoint import save_checkpoint
from transformer_lib.data import bucket_batches
from transformer_lib.dates import (TARGET_VOCAB, encode_pairs, make_date_pairs, source_vocab,
                                   translate)
from transformer_lib.model import Transformer, TransformerConfig
from transformer_lib.recipe import TrainingConfig
from transformer_lib.training import train
from transformer_lib.utils import get_device, seed_everything

ROOT = Path(__file__).resolve().parents[1]
COMMAND = "OMP_NUM_THREADS=1 python tools/train_pretrained.py"
BATCH_SIZE = 128
RECIPE = TrainingConfig(steps=1000, lr=4e-3, warmup=100, schedule="linear", weight_decay=0.01,
                        label_smoothing=0.1, clip=1.0, eval_every=100, seed=0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "transformer_lib" / "pretrained" / "dates.pt")
    args = parser.parse_args(argv)
    device = get_device()
    seed_everything(0)
    test_pairs = make_date_pairs(2_000, seed=1)
    valid_pairs = make_date_pairs(500, seed=2, exclude={p.target for p in test_pairs})
    held_out = {p.target for p in test_pairs + valid_pairs}
    train_pairs = make_date_pairs(290_000, seed=0, exclude=held_out)
    src_vocab = source_vocab()
    train_ids, valid_ids = (encode_pairs(ps, src_vocab) for ps in (train_pairs, valid_pairs))
    config = TransformerConfig(src_vocab_size=len(src_vocab), tgt_vocab_size=len(TARGET_VOCAB),
                               d_model=64, nhead=4, num_encoder_layers=2, num_decoder_layers=2,
                               dim_feedforward=256, dropout=0.0, max_len=64)

    seed_everything(0)                                       # as the chapter's training cell
    model = Transformer(config).to(device)
    shuffle = torch.Generator().manual_seed(0)
    valid_batches = list(bucket_batches(valid_ids, 500))
    start = time.perf_counter()
    pairs_iter = bucket_batches(train_ids, BATCH_SIZE, generator=shuffle)
    history = train(model, lambda epoch: pairs_iter, valid_batches, RECIPE)
    seconds = time.perf_counter() - start

    answers = translate(model, [p.source for p in test_pairs], src_vocab)
    correct = sum(a == p.target for a, p in zip(answers, test_pairs))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    save_checkpoint(args.out, model.cpu(), step=history.best_step, src_chars="".join(src_vocab.itos[3:]),
                    test_correct=correct, test_size=len(test_pairs), test_seed=1,
                    recipe=dataclasses.asdict(RECIPE), batch_size=BATCH_SIZE, command=COMMAND,
                    torch_version=str(torch.__version__))
    print(f"{args.out}: {args.out.stat().st_size:,} bytes; {RECIPE.steps} steps in {seconds:.0f} s on "
          f"{torch.get_num_threads()} thread(s) (OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}); "
          f"greedy exact match {correct}/{len(test_pairs)} on the held-out test dates")
    return 0


if __name__ == "__main__":
    sys.exit(main())
