"""Greedy decoding with and without the KV cache, same model, side by side.

Usage: python bench/kv_cache.py [--quick]
Prints the median time of each and the speed-up for 32, 128 and 256 new tokens (goal: >= 3x at 128 on CPU),
and writes them to bench/results/kv_cache-<device>.json (not with --quick).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _record import write_result  # noqa: E402

from transformer_lib.cost import benchmark  # noqa: E402
from transformer_lib.generation import greedy  # noqa: E402
from transformer_lib.model import Transformer, TransformerConfig  # noqa: E402
from transformer_lib.utils import get_device, seed_everything  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repeats and lengths (for the book)")
    args = parser.parse_args()
    device = get_device()
    seed_everything(0)
    config = TransformerConfig(src_vocab_size=1000, tgt_vocab_size=1000, d_model=256, nhead=8, num_encoder_layers=2,
                               num_decoder_layers=2, dim_feedforward=1024, dropout=0.0, max_len=512)
    model = Transformer(config).to(device).eval()
    src = torch.randint(3, 1000, (4, 32), device=device)
    lengths = [32, 128] if args.quick else [32, 128, 256]
    repeats = 3 if args.quick else 5
    print(f"device={device.type} threads={torch.get_num_threads()} model: d=256, 2+2 layers, batch 4, source 32 tokens")
    print(f"{'new tokens':>10} {'no cache (s)':>13} {'KV cache (s)':>13} {'speed-up':>9}")
    rows = []
    for n in lengths:
        # alternating runs, CUDA synchronized around each: the noise hits both alike
        plain, cached = benchmark([lambda: greedy(model, src, n, use_cache=False, ignore_eos=True),
                                   lambda: greedy(model, src, n, use_cache=True, ignore_eos=True)],
                                  repeats=repeats, warmup=1, device=device)
        rows.append({"new_tokens": n, "no_cache_s": plain, "kv_cache_s": cached, "speedup": plain / cached})
        print(f"{n:>10} {plain:>13.3f} {cached:>13.3f} {plain / cached:>8.1f}x")
    if not args.quick:
        settings = {"d_model": 256, "layers": "2+2", "batch": 4, "source_tokens": 32, "repeats": repeats}
        print(f"wrote {write_result('kv_cache', device, settings, rows)}")


if __name__ == "__main__":
    main()
