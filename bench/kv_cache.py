"""Greedy decoding without a cache and with each kind of KV cache, same model, side by side.

Usage: python bench/kv_cache.py [--quick] [--configs NAME ...]
Prints the median time of greedy decoding without a cache, with the growing cache (chapter 7),
the preallocated step and the compiled one (chapter 7a; CUDA graphs on a GPU) for 32, 128 and 256
new tokens, and the speed-up of each cache over no cache, and writes them to
bench/results/kv_cache-<device>.json (not with --quick), rewritten after every row, so that a run
stopped by a time limit keeps the rows it measured. Goals: >= 3x at 128 tokens for `small`
on a CPU; >= 3x at 256 tokens for `base` on a GPU (the best cache). The compiled step is compiled
during the warm-up run, which is not timed.

Configurations (vocabulary, d_model, heads, layers per stack, d_ff, batch, source tokens):
`small` (1000, 256, 8, 2, 1024, 4, 32), the CPU default; `base` (32000, 512, 8, 6, 2048, 32,
64), the GPU default.
"""
from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _record import config_parser, result_path, result_writer  # noqa: E402

from transformer_lib.cost import benchmark  # noqa: E402
from transformer_lib.generation import greedy  # noqa: E402
from transformer_lib.kv_cache import CachedDecoding, NoCacheDecoding  # noqa: E402
from transformer_lib.model import Transformer, TransformerConfig  # noqa: E402
from transformer_lib.preallocated_cache import CompiledDecoding, PreallocatedDecoding  # noqa: E402
from transformer_lib.utils import get_device, seed_everything  # noqa: E402

KINDS = [NoCacheDecoding, CachedDecoding, PreallocatedDecoding, CompiledDecoding]   # greedy's state=
COLUMNS = [("no_cache", "no cache"), ("kv_cache", "growing"), ("preallocated", "prealloc."),
           ("compiled", "compiled")]
CONFIGS = {  # vocab, d_model, heads, layers per stack, d_ff, batch, source tokens
    "small": (1000, 256, 8, 2, 1024, 4, 32),
    "base": (32000, 512, 8, 6, 2048, 32, 64),
}


def run_config(name: str, device: torch.device, lengths: list[int], repeats: int, rows: list[dict],
               save: Callable[[], object]) -> None:
    """Append one row per length to `rows`, calling `save()` after each."""
    vocab, dim, heads, depth, ff, B, S = CONFIGS[name]
    seed_everything(0)
    config = TransformerConfig(src_vocab_size=vocab, tgt_vocab_size=vocab, d_model=dim, nhead=heads,
                               num_encoder_layers=depth, num_decoder_layers=depth, dim_feedforward=ff,
                               dropout=0.0, max_len=512)
    model = Transformer(config).to(device).eval()
    src = torch.randint(3, vocab, (B, S), device=device)
    for n in lengths:
        # alternating runs, CUDA synchronized before every clock reading: the noise hits all alike
        plain, *cached = benchmark([lambda kind=kind: greedy(model, src, n, state=kind, ignore_eos=True)
                                    for kind in KINDS], repeats=repeats, warmup=1, device=device)
        row = {"config": name, "new_tokens": n, "no_cache_s": plain}
        for (key, _), seconds in zip(COLUMNS[1:], cached):
            row |= {f"{key}_s": seconds, f"{key}_speedup": plain / seconds}
        rows.append(row)
        save()
        print(f"{name:>6} {n:>6} {plain:>9.3f} " + " ".join(f"{s:>8.3f} {plain / s:>5.1f}x" for s in cached))


def main() -> None:
    args = config_parser(__doc__, CONFIGS, "fewer repeats and lengths, nothing written",
                         "small on the CPU, base on a GPU").parse_args()
    device = get_device()
    configs = args.configs or (["base"] if device.type == "cuda" else ["small"])
    lengths = [32, 128] if args.quick else [32, 128, 256]
    repeats = 3 if args.quick else 5
    print(f"device={device.type} threads={torch.get_num_threads()} torch={torch.__version__}; median of {repeats}")
    print(f"{'config':>6} {'tokens':>6} {'no cache':>9} " + " ".join(f"{label:>15}" for _, label in COLUMNS[1:]))
    settings = {"configs": {name: dict(zip(("vocab", "d_model", "heads", "layers_per_stack", "d_ff",
                                            "batch", "source_tokens"), CONFIGS[name])) for name in configs},
                "repeats": repeats}
    rows: list[dict] = []
    save = result_writer("kv_cache", device, settings, rows, enabled=not args.quick)
    for name in configs:
        run_config(name, device, lengths, repeats, rows, save)
    if not args.quick:
        print(f"wrote {result_path('kv_cache', device)}")


if __name__ == "__main__":
    main()
