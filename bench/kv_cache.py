"""Greedy decoding with and without the KV cache, same model, side by side.

Usage: python bench/kv_cache.py [--quick] [--configs NAME ...]
Prints the median time of each and the speed-up for 32, 128 and 256 new tokens, and writes them
to bench/results/kv_cache-<device>.json (not with --quick). Goals: >= 3x at 128 tokens for
`small` on a CPU; >= 3x at 256 tokens for `base` on a GPU.

Configurations (vocabulary, d_model, heads, layers per stack, d_ff, batch, source tokens):
`small` (1000, 256, 8, 2, 1024, 4, 32), the CPU default; `base` (32000, 512, 8, 6, 2048, 32,
64), the GPU default.
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _record import config_parser, write_result  # noqa: E402

from transformer_lib.cost import benchmark  # noqa: E402
from transformer_lib.generation import greedy  # noqa: E402
from transformer_lib.model import Transformer, TransformerConfig  # noqa: E402
from transformer_lib.utils import get_device, seed_everything  # noqa: E402

CONFIGS = {  # vocab, d_model, heads, layers per stack, d_ff, batch, source tokens
    "small": (1000, 256, 8, 2, 1024, 4, 32),
    "base": (32000, 512, 8, 6, 2048, 32, 64),
}


def run_config(name: str, device: torch.device, lengths: list[int], repeats: int) -> list[dict]:
    vocab, dim, heads, depth, ff, B, S = CONFIGS[name]
    seed_everything(0)
    config = TransformerConfig(src_vocab_size=vocab, tgt_vocab_size=vocab, d_model=dim, nhead=heads,
                               num_encoder_layers=depth, num_decoder_layers=depth, dim_feedforward=ff,
                               dropout=0.0, max_len=512)
    model = Transformer(config).to(device).eval()
    src = torch.randint(3, vocab, (B, S), device=device)
    rows = []
    for n in lengths:
        # alternating runs, CUDA synchronized before every clock reading: the noise hits both alike
        plain, cached = benchmark([lambda: greedy(model, src, n, use_cache=False, ignore_eos=True),
                                   lambda: greedy(model, src, n, use_cache=True, ignore_eos=True)],
                                  repeats=repeats, warmup=1, device=device)
        rows.append({"config": name, "new_tokens": n, "no_cache_s": plain, "kv_cache_s": cached,
                     "speedup": plain / cached})
        print(f"{name:>6} {n:>10} {plain:>13.3f} {cached:>13.3f} {plain / cached:>8.1f}x")
    return rows


def main() -> None:
    args = config_parser(__doc__, CONFIGS, "fewer repeats and lengths, nothing written",
                         "small on the CPU, base on a GPU").parse_args()
    device = get_device()
    configs = args.configs or (["base"] if device.type == "cuda" else ["small"])
    lengths = [32, 128] if args.quick else [32, 128, 256]
    repeats = 3 if args.quick else 5
    print(f"device={device.type} threads={torch.get_num_threads()} torch={torch.__version__}; median of {repeats}")
    print(f"{'config':>6} {'new tokens':>10} {'no cache (s)':>13} {'KV cache (s)':>13} {'speed-up':>9}")
    rows = [row for name in configs for row in run_config(name, device, lengths, repeats)]
    if not args.quick:
        settings = {"configs": {name: dict(zip(("vocab", "d_model", "heads", "layers_per_stack", "d_ff",
                                                "batch", "source_tokens"), CONFIGS[name])) for name in configs},
                    "repeats": repeats}
        print(f"wrote {write_result('kv_cache', device, settings, rows)}")


if __name__ == "__main__":
    main()
