"""The timings behind chapters 8 and 8a, measured once and recorded for the book.

Usage: python bench/scaling.py [--quick]

The chapters' claims about time (how it grows with the length, what the KV cache saves per token,
how close a training step comes to the matmul peak) are asserted on the figures this script
records, so that no test reads a clock. It measures what the chapters measured live before, with
their sizes, repeats, statistics and interleaving (`transformer_lib.cost.benchmark`, CUDA
synchronized before every clock reading), on one thread on a CPU (`torch.set_num_threads(1)`:
with several, a core taken by another process for a moment stalls every parallel loop), and
writes its figures, with every timed run behind them (for the matmul peak, its median only), to
bench/results/scaling-<device>.json (not with --quick), rewritten after every section, so that a
run stopped by a time limit keeps the sections it measured. Sections (rows tagged `section`):

- peak: the float32 matmul peak (`matmul_peak`, n = 2048 on a CPU, 4096 on a GPU, median
  of 5 after 2 warm-ups), measured first and again last; the MFU divides by the larger.
- encoder_layer (chapter 8): one `EncoderLayer(64, nhead=1, dim_feedforward=256)` on a batch of 8,
  and its attention core softmax(QK^T / sqrt(d_k)) V (fused) on the same shapes, S = 32 ... 2048
  (... 16384 on a GPU): 11 runs of layer, core pairs for all lengths, interleaved, after 2
  warm-ups. Per length every run's times, the fastest, and the share: the median over the runs
  of core time / layer time.
- attention (chapter 8a): one attention call, B = 1, H = 4, d_k = 64, S = 256 ... 4096, written
  out and fused, interleaved: 5 runs after 1 warm-up, and the fastest.
- decoding (chapter 8a): greedy decoding of n = 16 ... 256 new tokens (32 ... 512 on a GPU) from
  one source of 32 tokens, d = 128, 4 heads, 2 + 2 layers, d_ff = 512, V = 1000, with the KV cache
  (7 runs) and without (3 runs), each after one untimed run: the fastest total per n.
- mfu (chapter 8a): the median of 3 full training steps (forward, cross-entropy, backward, Adam)
  after 1 warm-up, for three model sizes (batches x8 on a GPU), their counted matmul FLOPs
  (`training_step_flops`) and the model FLOP utilization.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _record import result_path, result_writer  # noqa: E402

from transformer_lib.attention import attention  # noqa: E402
from transformer_lib.cost import benchmark, matmul_peak, training_step_flops  # noqa: E402
from transformer_lib.encoder import EncoderLayer  # noqa: E402
from transformer_lib.generation import greedy  # noqa: E402
from transformer_lib.kv_cache import CachedDecoding, NoCacheDecoding  # noqa: E402
from transformer_lib.model import Transformer, TransformerConfig  # noqa: E402
from transformer_lib.utils import get_device, seed_everything  # noqa: E402

ENCODER = {"d_model": 64, "nhead": 1, "dim_feedforward": 256, "batch": 8, "repeats": 11, "warmup": 2}
ATTENTION = {"batch": 1, "nhead": 4, "d_k": 64, "repeats": 5, "warmup": 1}
DECODING = {"config": dict(src_vocab_size=1000, tgt_vocab_size=1000, d_model=128, nhead=4,
                           num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=512,
                           dropout=0.0, max_len=600),
            "src_len": 32, "repeats": {"cached": 7, "uncached": 3}}
MFU_SIZES = {  # name: TransformerConfig arguments, batch on a CPU (x8 on a GPU), S = T
    "d=128, 2+2 layers, V=1000": (dict(src_vocab_size=1000, tgt_vocab_size=1000, d_model=128, nhead=4,
                                       num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=512), 8, 64),
    "d=256, 3+3 layers, V=8000": (dict(src_vocab_size=8000, tgt_vocab_size=8000, d_model=256, nhead=4,
                                       num_encoder_layers=3, num_decoder_layers=3, dim_feedforward=1024), 4, 64),
    "base (d=512, 6+6, V=32000)": (dict(src_vocab_size=32000, tgt_vocab_size=32000), 1, 64),
}


def peak_row(when: str, n: int, repeats: int, device: torch.device) -> dict:
    """The float32 matmul peak, as a row."""
    peak = matmul_peak(n, repeats=repeats, warmup=2, device=device)
    print(f"matmul peak ({when}), {n}x{n} float32, median of {repeats}: {peak / 1e9:,.1f} GFLOP/s")
    return {"section": "peak", "when": when, "n": n, "dtype": "float32", "repeats": repeats,
            "flops_per_s": peak}


def encoder_rows(lengths: list[int], repeats: int, device: torch.device) -> list[dict]:
    """Chapter 8: one encoder layer and its attention core, pairs of runs interleaved."""
    d, dff, batch = ENCODER["d_model"], ENCODER["dim_feedforward"], ENCODER["batch"]
    seed_everything(0)
    layer = EncoderLayer(d, nhead=1, dim_feedforward=dff, dropout=0.0).to(device).eval()
    inputs = [torch.randn(batch, L, d, device=device) for L in lengths]
    heads = [x.view(batch, L, 1, d).transpose(1, 2) for x, L in zip(inputs, lengths)]  # (B, 1, S, d_k)
    calls = []                                        # layer, core, layer, core, ...: pairs back to back
    for x, h in zip(inputs, heads):
        calls += [lambda x=x: layer(x), lambda h=h: attention(h, h, h, fused=True)]
    with torch.no_grad():
        runs = benchmark(calls, repeats=repeats, warmup=ENCODER["warmup"], device=device, statistic=list)
    rows = []
    for L, layer_runs, core_runs in zip(lengths, runs[0::2], runs[1::2]):
        share = statistics.median(c / t for c, t in zip(core_runs, layer_runs))
        rows.append({"section": "encoder_layer", "length": L, "layer_s": min(layer_runs),
                     "core_s": min(core_runs), "share": share, "layer_runs_s": layer_runs,
                     "core_runs_s": core_runs})
        print(f"S = {L:5d}: layer {min(layer_runs) * 1e3:8.2f} ms, core {min(core_runs) * 1e3:8.2f} ms, "
              f"share {share:.2f}")
    return rows


def attention_rows(lengths: list[int], repeats: int, device: torch.device) -> list[dict]:
    """Chapter 8a: one attention call, written out and fused, interleaved; the fastest run."""
    B, H, dk = ATTENTION["batch"], ATTENTION["nhead"], ATTENTION["d_k"]
    seed_everything(0)
    rows = []
    with torch.no_grad():
        for L in lengths:
            q, k, v = (torch.randn(B, H, L, dk, device=device) for _ in range(3))
            calls = [lambda: attention(q, k, v, fused=False), lambda: attention(q, k, v, fused=True)]
            plain, fused = benchmark(calls, repeats=repeats, warmup=ATTENTION["warmup"], device=device,
                                     statistic=list)
            rows.append({"section": "attention", "length": L, "plain_s": min(plain), "fused_s": min(fused),
                         "plain_runs_s": plain, "fused_runs_s": fused})
            print(f"S = {L:5d}: plain {min(plain) * 1e3:8.1f} ms, fused {min(fused) * 1e3:8.1f} ms")
            del q, k, v, calls
    return rows


def decoding_rows(counts: list[int], repeats: dict[str, int], device: torch.device) -> list[dict]:
    """Chapter 8a: total time of greedy decoding of n tokens with and without the KV cache."""
    seed_everything(0)
    config = TransformerConfig(**DECODING["config"])
    model = Transformer(config).to(device).eval()
    src = torch.randint(3, config.src_vocab_size, (1, DECODING["src_len"]), device=device)
    rows = []
    for use_cache, kind in ((True, "cached"), (False, "uncached")):   # cached runs are cheap: more
        state = CachedDecoding if use_cache else NoCacheDecoding
        runs = [lambda n=n: greedy(model, src, n, state=state, ignore_eos=True) for n in counts]
        assert [run().shape[1] for run in runs] == [n + 1 for n in counts]   # n tokens each; a warm-up
        totals = benchmark(runs, repeats=repeats[kind], warmup=0, device=device, statistic=list)
        for n, total in zip(counts, totals):
            rows.append({"section": "decoding", "use_cache": use_cache, "new_tokens": n,
                         "total_s": min(total), "runs_s": total})
            print(f"{kind:>8} n = {n:4d}: {min(total) * 1e3:9.1f} ms")
    return rows


def train_step_runs(config: TransformerConfig, batch: int, length: int, repeats: int,
                    device: torch.device) -> list[float]:
    """Every timed run of one full training step (forward, cross-entropy, backward, Adam)."""
    seed_everything(0)
    model = Transformer(config).to(device).train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    src = torch.randint(3, config.src_vocab_size, (batch, length), device=device)
    tgt = torch.randint(3, config.tgt_vocab_size, (batch, length + 1), device=device)
    tgt[:, 0] = config.bos_id

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        logits = model(src, tgt[:, :-1])
        F.cross_entropy(logits.flatten(0, 1), tgt[:, 1:].flatten()).backward()
        opt.step()

    return benchmark([step], repeats=repeats, warmup=1, device=device, statistic=list)[0]


def mfu_rows(sizes: dict, scale: int, repeats: int, peak: float, step_runs: dict) -> list[dict]:
    """Chapter 8a: counted FLOPs of each training step over its median time, over the peak."""
    rows = []
    for name, (arguments, batch, length) in sizes.items():
        config = TransformerConfig(**arguments)
        flops = training_step_flops(config, batch * scale, length, length)
        seconds = statistics.median(step_runs[name])
        rows.append({"section": "mfu", "name": name, "config": config.to_dict(), "batch": batch * scale,
                     "length": length, "step_flops": flops, "step_s": seconds, "runs_s": step_runs[name],
                     "peak_flops_per_s": peak, "mfu": flops / seconds / peak})
        print(f"{name:28s} {flops / 1e9:7.2f} GFLOP/step {seconds * 1e3:8.1f} ms  MFU {rows[-1]['mfu']:.0%}")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny sizes and few repeats, nothing written")
    args = parser.parse_args()
    device = get_device()
    gpu = device.type == "cuda"
    if not gpu:
        torch.set_num_threads(1)              # as the chapters timed: see the docstring
    quick = args.quick
    peak_n = 256 if quick else 4096 if gpu else 2048
    lengths = [32, 64] if quick else [32 * 2**i for i in range(10 if gpu else 7)]
    attn_lengths = [256, 512] if quick else [256, 512, 1024, 2048, 4096]
    counts = [16, 32, 64] if quick else [32, 64, 128, 256, 512] if gpu else [16, 32, 64, 128, 256]
    sizes = dict(list(MFU_SIZES.items())[:1]) if quick else MFU_SIZES
    scale = 8 if gpu else 1
    repeats = {"peak": 2 if quick else 5, "encoder": 3 if quick else ENCODER["repeats"],
               "attention": 2 if quick else ATTENTION["repeats"],
               "decoding": {"cached": 2, "uncached": 1} if quick else DECODING["repeats"],
               "mfu": 1 if quick else 3}
    print(f"device={device.type} threads={torch.get_num_threads()} torch={torch.__version__}")
    settings = {"matmul_peak_n": peak_n, "encoder_layer": ENCODER | {"lengths": lengths},
                "attention": ATTENTION | {"lengths": attn_lengths},
                "decoding": DECODING | {"new_tokens": counts},
                "mfu": {"batch_scale": scale, "repeats": repeats["mfu"], "warmup": 1,
                        "statistic": "median"},
                "statistics": "encoder_layer: fastest run, share the median of per-run ratios; "
                              "attention, decoding: fastest run; mfu, peak: median"}
    rows: list[dict] = []
    save = result_writer("scaling", device, settings, rows, enabled=not quick)
    start = time.perf_counter()
    sections: list[tuple[str, Callable[[], list[dict]]]] = [
        ("peak", lambda: [peak_row("first", peak_n, repeats["peak"], device)]),
        ("encoder_layer", lambda: encoder_rows(lengths, repeats["encoder"], device)),
        ("attention", lambda: attention_rows(attn_lengths, repeats["attention"], device)),
        ("decoding", lambda: decoding_rows(counts, repeats["decoding"], device)),
    ]
    for name, measure in sections:
        print(f"-- {name}")
        rows += measure()
        save()
    print("-- mfu")
    step_runs = {name: train_step_runs(TransformerConfig(**arguments), batch * scale, length,
                                       repeats["mfu"], device)
                 for name, (arguments, batch, length) in sizes.items()}
    rows.append(peak_row("last", peak_n, repeats["peak"], device))  # after the steps: the larger counts
    peak = max(row["flops_per_s"] for row in rows if row["section"] == "peak")
    rows += mfu_rows(sizes, scale, repeats["mfu"], peak, step_runs)
    save()
    print(f"{time.perf_counter() - start:.0f} s")
    if not quick:
        print(f"wrote {result_path('scaling', device)}")


if __name__ == "__main__":
    main()
