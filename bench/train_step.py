"""Forward + backward time of our Transformer against the baseline on torch.nn layers, same weights.

Usage: python bench/train_step.py [--quick] [--configs NAME ...] [--compile | --no-compile]

For each configuration, precision (fp32; bf16 autocast with the loss in fp32) and, where asked,
`torch.compile`, it prints the median step time of ours and of the baseline (runs interleaved,
CUDA synchronized before every clock reading, by `transformer_lib.cost.benchmark`), the ratio
ours / baseline (goal: <= 1.0) and the model FLOP utilization (MFU): the counted matmul FLOPs of
the step (`training_step_flops`) per second, over the matmul peak measured on the same device in
the same precision. Results go to bench/results/train_step-<device>.json (not with --quick),
rewritten after every row, so that a run stopped by a time limit keeps the rows it measured.

Configurations: `small` (d=256, 3+3 layers, V=1000, B=32, S=T=48; the CPU default) and, the GPU
defaults, `base128` / `base256` (d=512, 6+6 layers, d_ff=1024, V=32000, B=64, S=T=128 / 256).
Half of the sources are padded to half their length in every configuration.
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _record import config_parser, result_path, result_writer  # noqa: E402

from transformer_lib.cost import benchmark, matmul_peak, training_step_flops  # noqa: E402
from transformer_lib.model import Transformer  # noqa: E402
from transformer_lib.torch_layers import TorchLayersTransformer  # noqa: E402
from transformer_lib.utils import get_device, seed_everything  # noqa: E402

CONFIGS = {  # vocab, d_model, heads, layers per stack, batch, S = T
    "small": (1000, 256, 8, 3, 32, 48),
    "base128": (32000, 512, 8, 6, 64, 128),
    "base256": (32000, 512, 8, 6, 64, 256),
}
PRECISIONS = {"fp32": torch.float32, "bf16": torch.bfloat16}


def make_step(model, src, tgt_in, labels, vocab, dtype, **forward_kwargs):
    """One training step's work: zero_grad, forward (autocast unless fp32), loss in fp32, backward."""
    device_type = src.device.type

    def step() -> None:
        model.zero_grad(set_to_none=True)
        with torch.autocast(device_type, dtype=dtype, enabled=dtype != torch.float32):
            logits = model(src, tgt_in, **forward_kwargs)                       # (B, T, V)
        F.cross_entropy(logits.float().reshape(-1, vocab), labels.reshape(-1), ignore_index=0).backward()
    return step


def run_config(name: str, device: torch.device, compiles: list[bool], repeats: int, peaks: dict,
               rows: list[dict], save: Callable[[], object]) -> None:
    """Append one row per precision and compile setting to `rows`, calling `save()` after each."""
    vocab, dim, heads, depth, B, S = CONFIGS[name]
    seed_everything(0)
    baseline = TorchLayersTransformer(vocab, dim, heads, depth, dropout=0.1, max_length=S + 1).to(device).train()
    ours = Transformer.from_torch_layers(baseline).train()
    src = torch.randint(3, vocab, (B, S), device=device)
    src[::2, S // 2:] = 0                                                          # half the sources padded
    tgt = torch.randint(3, vocab, (B, S + 1), device=device)
    tgt[:, 0] = 1
    tgt_in, labels = tgt[:, :-1], tgt[:, 1:]
    flops = training_step_flops(ours.config, B, S, S)
    for precision, dtype in PRECISIONS.items():
        if dtype == torch.bfloat16 and device.type == "cuda" and not torch.cuda.is_bf16_supported():
            continue
        for compiled in compiles:
            # as in `train_step`: the batch checked on the host once, then no sync in the step
            options = {"validate": False, "padding": ours.check_inputs(src.cpu(), tgt_in.cpu())}
            mine = (torch.compile(ours) if compiled else ours, options)
            theirs = torch.compile(baseline) if compiled else baseline
            steps = [make_step(mine[0], src, tgt_in, labels, vocab, dtype, **mine[1]),
                     make_step(theirs, src, tgt_in, labels, vocab, dtype)]
            t_ours, t_base = benchmark(steps, repeats=repeats, warmup=3 if compiled else 2, device=device)
            peak = peaks[precision]
            row = {"config": name, "precision": precision, "compile": compiled, "ours_s": t_ours,
                   "baseline_s": t_base, "ratio": t_ours / t_base, "step_flops": flops,
                   "peak_flops_per_s": peak, "mfu_ours": flops / t_ours / peak, "mfu_baseline": flops / t_base / peak}
            rows.append(row)
            save()
            print(f"{name:>8} {precision:>5} {'yes' if compiled else 'no':>7} "
                  f"{t_ours * 1e3:>9.1f} {t_base * 1e3:>9.1f} "
                  f"{row['ratio']:>6.2f} {row['mfu_ours']:>6.1%} {row['mfu_baseline']:>6.1%}")


def main() -> None:
    parser = config_parser(__doc__, CONFIGS, "fewer repeats, nothing written",
                           "small on the CPU, base128 and base256 on a GPU")
    parser.add_argument("--compile", action=argparse.BooleanOptionalAction, default=None,
                        help="also time torch.compile'd models (default: on a GPU only)")
    args = parser.parse_args()
    device = get_device()
    configs = args.configs or (["base128", "base256"] if device.type == "cuda" else ["small"])
    with_compile = args.compile if args.compile is not None else device.type == "cuda"
    compiles = [False, True] if with_compile else [False]
    repeats = 3 if args.quick else 11                 # odd: the median is one run; 5 left CPU ratios +-5 %
    peak_n = 8192 if device.type == "cuda" else 1024
    peaks = {p: matmul_peak(peak_n, device=device, dtype=d) for p, d in PRECISIONS.items()}
    print(f"device={device.type} threads={torch.get_num_threads()} torch={torch.__version__}; matmul peak "
          + ", ".join(f"{p} {v / 1e12:.2f} TFLOP/s" for p, v in peaks.items()) + f"; median of {repeats}")
    print(f"{'config':>8} {'prec':>5} {'compile':>7} {'ours ms':>9} {'nn ms':>9} {'ratio':>6} {'MFU':>6} {'MFU nn':>6}")
    settings = {"configs": {name: dict(zip(("vocab", "d_model", "heads", "layers_per_stack", "batch", "S_T"),
                                           CONFIGS[name])) for name in configs},
                "d_ff": "2 d_model", "dropout": 0.1, "padding": "half the sources padded to half length",
                "repeats": repeats, "peak_matmul_n": peak_n}
    rows: list[dict] = []
    save = result_writer("train_step", device, settings, rows, enabled=not args.quick)
    for name in configs:
        run_config(name, device, compiles, repeats, peaks, rows, save)
    if not args.quick:
        print(f"wrote {result_path('train_step', device)}")


if __name__ == "__main__":
    main()
