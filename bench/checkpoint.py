"""What checkpointing costs: the size and write time of a base-model training checkpoint, and the
overhead of `--checkpoint-every 100` on the reversal task of the training command.

Usage: python bench/checkpoint.py
Writes bench/results/checkpoint-<device>.json.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _record import write_result  # noqa: E402

from transformer_lib.cost import benchmark  # noqa: E402
from transformer_lib.model import Transformer, TransformerConfig  # noqa: E402
from transformer_lib.checkpoint import save_checkpoint  # noqa: E402
from transformer_lib.utils import get_device, seed_everything  # noqa: E402

TRAIN = [sys.executable, "-m", "transformer_lib.cli", "--task", "reversal", "--steps", "1000",
         "--global-batch-size", "64", "--size", "tiny", "--train-size", "20000", "--valid-size", "100",
         "--log-every", "1000", "--device", "cpu"]


def base_checkpoint(folder: Path, device: torch.device) -> dict:
    """Size and median write time (3 writes) of the base model with its Adam state."""
    seed_everything(0)
    model = Transformer(TransformerConfig(src_vocab_size=32000, tgt_vocab_size=32000)).to(device)
    optimizer = torch.optim.AdamW(model.parameters())
    src = torch.randint(3, 32000, (2, 16), device=device)
    F.cross_entropy(model(src, src).flatten(0, 1), src.flatten()).backward()
    optimizer.step()                                     # Adam's moments now exist
    path = folder / "base.pt"
    seconds = benchmark([lambda: save_checkpoint(path, model, optimizer=optimizer, step=1)],
                        repeats=3, warmup=1, device=device)[0]
    return {"parameters": model.num_parameters(), "bytes": path.stat().st_size, "write_s": seconds}


def training_seconds(folder: Path, every: int) -> float:
    """The training loop's own time (log.json 'seconds') of the reversal run, 1,000 steps."""
    out = folder / f"every-{every}"
    extra = ["--checkpoint-every", str(every)] if every else []
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    subprocess.run([*TRAIN, *extra, "--out", str(out)], check=True, capture_output=True, env=env)
    return json.loads((out / "log.json").read_text())["seconds"]


def main() -> None:
    device = get_device()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        base = base_checkpoint(folder, device)
        print(f"base model: {base['parameters']:,} parameters; checkpoint with Adam state "
              f"{base['bytes'] / 2**20:.0f} MiB, written in {base['write_s']:.2f} s (median of 3)")
        runs = {every: [training_seconds(folder, every) for _ in range(3)] for every in (0, 100)}
    plain, checkpointed = (sorted(runs[e])[1] for e in (0, 100))
    overhead = checkpointed / plain - 1
    print(f"reversal, 1,000 steps: {plain:.1f} s without checkpoints, {checkpointed:.1f} s with one every "
          f"100 steps (medians of 3): overhead {overhead:+.1%}")
    rows = [{"what": "base checkpoint", **base},
            {"what": "reversal 1000 steps", "seconds_no_checkpoints": plain,
             "seconds_every_100": checkpointed, "overhead": overhead}]
    print(f"wrote {write_result('checkpoint', device, {'reversal_steps': 1000, 'batch': 64}, rows)}")


if __name__ == "__main__":
    main()
