"""Forward + backward time of our Transformer against the baseline on torch.nn layers, same configuration.

Usage: python bench/train_step.py [--quick]
Prints medians and the ratio ours / baseline (goal: <= 1.0, ours no slower), and writes them to
bench/results/train_step-<device>.json (not with --quick).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _record import write_result  # noqa: E402

from transformer_lib.cost import benchmark  # noqa: E402
from transformer_lib.model import Transformer  # noqa: E402
from transformer_lib.torch_layers import TorchLayersTransformer  # noqa: E402
from transformer_lib.utils import get_device, seed_everything  # noqa: E402


def step(model, src, tgt_in, labels, vocab) -> None:
    model.zero_grad(set_to_none=True)
    logits = model(src, tgt_in)
    F.cross_entropy(logits.reshape(-1, vocab), labels.reshape(-1), ignore_index=0).backward()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repeats (for the book)")
    args = parser.parse_args()
    device = get_device()
    seed_everything(0)
    vocab, dim, heads, depth, B, S, T = 1000, 256, 8, 3, 32, 48, 48
    baseline = TorchLayersTransformer(vocab, dim, heads, depth, dropout=0.1, max_length=64)
    baseline = baseline.to(device).train()
    ours = Transformer.from_torch_layers(baseline).train()
    src = torch.randint(3, vocab, (B, S), device=device)
    tgt = torch.randint(3, vocab, (B, T + 1), device=device)
    tgt[:, 0] = 1
    tgt_in, labels = tgt[:, :-1], tgt[:, 1:]
    repeats = 5 if args.quick else 15
    # alternating runs, CUDA synchronized around each: the noise hits both alike
    mine, theirs = benchmark([lambda: step(ours, src, tgt_in, labels, vocab),
                              lambda: step(baseline, src, tgt_in, labels, vocab)],
                             repeats=repeats, warmup=2, device=device)
    t = {"ours": mine, "baseline": theirs}
    print(f"device={device.type} threads={torch.get_num_threads()} d={dim}, {depth}+{depth} layers, d_ff={2 * dim}, "
          f"B={B}, S=T={S}, dropout 0.1, forward+backward, median of {repeats}")
    print(f"ours {t['ours'] * 1e3:.1f} ms   baseline (nn layers) {t['baseline'] * 1e3:.1f} ms   "
          f"ratio ours/baseline {t['ours'] / t['baseline']:.2f}")
    if not args.quick:
        settings = {"d_model": dim, "layers": f"{depth}+{depth}", "d_ff": 2 * dim, "batch": B, "S": S, "T": T,
                    "dropout": 0.1, "repeats": repeats}
        rows = [{"ours_s": t["ours"], "baseline_s": t["baseline"], "ratio": t["ours"] / t["baseline"]}]
        print(f"wrote {write_result('train_step', device, settings, rows)}")


if __name__ == "__main__":
    main()
