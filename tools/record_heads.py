"""Record the attention heads of the shipped date translator, for chapter 2a to draw and check.

    OMP_NUM_THREADS=1 .venv/bin/python tools/record_heads.py

Chapter 2a may import only the modules of earlier chapters, so it cannot load chapter 9's trained
model (`transformer_lib.dates.pretrained()`). This script loads it on the CPU and writes
bench/results/heads-cpu.json, which the chapter reads. For the cross-attention of the last decoder
layer, with the correct ISO date fed to the decoder (teacher forcing; the model's own greedy answer
for the recorded dates, which the script checks), it records:

- `rows`: the weights of every head, rounded to 3 decimals, on the first test date written in
  English and the first written in German, with the source characters the heads read (columns)
  and the characters the queries write (rows);
- `summary`: over the first 500 test dates, per head, the mean entropy of a row (nats), the mean
  weight on the source's end (EOS) in the rows that write a hyphen or the end and in the rows that
  write a digit, and, per pair of heads, the mean weight they share (sum over the source of the
  smaller of the two weights), rounded to 3 decimals.

`settings` names the model by the SHA-256 of its checkpoint file. tests/test_heads_record.py
recomputes the record and holds the file to it (within 1e-3), so the file cannot drift from the
model: after retraining the model, run this script again.
"""
from __future__ import annotations

import datetime
import hashlib
import importlib.resources
import json
import sys
from pathlib import Path

import torch

from transformer_lib.data import collate
from transformer_lib.dates import PRETRAINED_PATH, DatePair, encode_pairs, make_date_pairs, pretrained

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from _record import device_name, result_path  # noqa: E402

DEVICE = torch.device("cpu")
RECORD = result_path("heads", DEVICE)  # bench/results/heads-cpu.json
LAYER = 1  # model.decoder.layers[LAYER].cross_attn: the last decoder layer
LOCALES = ("en", "de")  # the first test date written in each is recorded in full
SUMMARY_DATES = 500  # the first test dates, summarized per head
DECIMALS = 3
MACHINE_KEYS = ("device", "device_type", "threads", "torch", "date")  # where it was run


def checkpoint_identity() -> dict:
    """The shipped checkpoint's file: its SHA-256 and size in bytes."""
    resource = importlib.resources.files("transformer_lib") / PRETRAINED_PATH
    data = resource.read_bytes()
    return {"checkpoint": f"transformer_lib/{PRETRAINED_PATH}",
            "checkpoint_sha256": hashlib.sha256(data).hexdigest(), "checkpoint_bytes": len(data)}


@torch.no_grad()
def head_weights(model: torch.nn.Module, pairs: list[DatePair], src_vocab) -> tuple[torch.Tensor, list[int]]:
    """Per-head weights (B, H, T, S) of the layer's cross-attention, teacher-forced, and the
    position of each source's EOS (its length, EOS excluded)."""
    caught = []

    def ask(module, args, kwargs):
        return args, {**kwargs, "need_weights": True, "average_attn_weights": False}

    attn = model.decoder.layers[LAYER].cross_attn
    handles = [attn.register_forward_pre_hook(ask, with_kwargs=True),
               attn.register_forward_hook(lambda module, args, out: caught.append(out[1]))]
    try:
        batch = collate(encode_pairs(pairs, src_vocab))
        model.eval()(batch.src, batch.tgt_in)
    finally:
        for handle in handles:
            handle.remove()
    assert len(caught) == 1, "one teacher-forced pass calls the layer's cross-attention once"
    return caught[0], [len(p.source) for p in pairs]


def rounded(t: torch.Tensor):
    """Nested lists of floats rounded to DECIMALS."""
    return [rounded(x) for x in t] if t.dim() else round(t.item(), DECIMALS)


def record() -> dict:
    """The record, without the machine it was computed on (MACHINE_KEYS)."""
    translator = pretrained(DEVICE)
    model, vocab, info = translator.model, translator.src_vocab, translator.info
    test_pairs = make_date_pairs(info["test_size"], seed=info["test_seed"])
    rows = []
    for locale in LOCALES:
        pair = next(p for p in test_pairs if p.locale == locale)
        answer = translator(pair.source)
        assert answer == pair.target, (pair, answer)  # teacher forcing = its own decoding
        w, _ = head_weights(model, [pair], vocab)  # (1, H, T, S), no padding
        rows.append({"source": pair.source, "target": pair.target, "locale": pair.locale,
                     "format": pair.format, "answer": answer,
                     "read": list(pair.source) + ["<eos>"],  # columns: the keys
                     "written": list(pair.target) + ["<eos>"],  # rows: what each query writes
                     "weights": rounded(w[0])})  # (H, T, S)
    pairs = test_pairs[:SUMMARY_DATES]
    w, ends = head_weights(model, pairs, vocab)  # (B, H, T, S); padding keys weigh 0
    written = list(pairs[0].target) + ["<eos>"]  # every ISO date has the same layout
    separators = [t for t, c in enumerate(written) if not c.isdigit()]  # "-", "-", end
    digits = [t for t, c in enumerate(written) if c.isdigit()]
    on_end = w[torch.arange(len(pairs)), :, :, ends]  # (B, H, T): weight on the source's EOS
    summary = {
        "dates": len(pairs),
        "separator_rows": separators,
        "digit_rows": digits,
        "mean_entropy_nats": rounded(-torch.xlogy(w, w).sum(-1).mean((0, 2))),
        "end_weight_separator_rows": rounded(on_end[:, :, separators].mean((0, 2))),
        "end_weight_digit_rows": rounded(on_end[:, :, digits].mean((0, 2))),
        "shared_weight": rounded(torch.minimum(w[:, :, None], w[:, None]).sum(-1).mean((0, 3))),
    }
    config = model.config
    settings = {
        "model": "transformer_lib.dates.pretrained()", **checkpoint_identity(),
        "trained_steps": info["recipe"]["steps"],
        "test_correct": f"{info['test_correct']}/{info['test_size']}",
        "layer": f"decoder.layers[{LAYER}].cross_attn",
        "d_model": config.d_model, "nhead": config.nhead,
        "inputs": "teacher forcing: the source, and <bos> + the correct ISO date",
        "test_dates": f"make_date_pairs({info['test_size']}, seed={info['test_seed']})",
        "recorded": f"the first test date in each of {list(LOCALES)}",
        "decimals": DECIMALS,
    }
    return {"benchmark": "heads", "settings": settings, "rows": rows, "summary": summary}


def dumps(value, indent: int = 0) -> str:
    """JSON with one line per list that holds no list or dict (a row of weights, the
    characters of a date), indented one space per level."""
    pad, inner = " " * indent, " " * (indent + 1)
    if isinstance(value, dict):
        items = [f"{inner}{json.dumps(k)}: {dumps(v, indent + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + f"\n{pad}}}"
    if isinstance(value, list) and any(isinstance(v, (list, dict)) for v in value):
        items = [f"{inner}{dumps(v, indent + 1)}" for v in value]
        return "[\n" + ",\n".join(items) + f"\n{pad}]"
    return json.dumps(value, ensure_ascii=False)


def main() -> int:
    rec = record()
    machine = {"device": device_name(DEVICE), "device_type": DEVICE.type,
               "threads": torch.get_num_threads(), "torch": torch.__version__,
               "date": datetime.date.today().isoformat()}
    rec = {"benchmark": rec.pop("benchmark"), **machine, **rec}
    RECORD.parent.mkdir(exist_ok=True)
    RECORD.write_text(dumps(rec) + "\n", encoding="utf-8")
    print(f"wrote {RECORD.relative_to(ROOT)}: {RECORD.stat().st_size:,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
