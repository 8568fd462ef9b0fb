"""Chapter 8's benchmark tables: every number equals its bench/results file, and only measured devices appear."""
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
# table column -> (key in the results row, scale); speed-ups end in "x", percentages in "%"
TRAIN = {"config": "config", "precision": "precision", "compiled": "compile", "ours (ms)": ("ours_s", 1e3),
         "nn (ms)": ("baseline_s", 1e3), "ours/nn": ("ratio", 1), "MFU ours": ("mfu_ours", 100),
         "MFU nn": ("mfu_baseline", 100)}
KV = {"config": "config", "new tokens": "new_tokens", "no cache (s)": ("no_cache_s", 1),
      "growing (s)": ("kv_cache_s", 1), "prealloc. (s)": ("preallocated_s", 1), "compiled (s)": ("compiled_s", 1),
      "growing speed-up": ("kv_cache_speedup", 1)}


def stored_tables() -> list[list[dict]]:
    """The Markdown tables in chapter 8's stored outputs, as rows of {column: cell}."""
    nb = json.loads((ROOT / "notebooks" / "08_cost.ipynb").read_text())   # plain JSON: no nbformat needed
    tables = []
    for cell in nb["cells"]:
        for output in cell.get("outputs", []):
            text = "".join(output.get("data", {}).get("text/markdown", []))
            if text.startswith("| device |"):
                lines = [[c.strip() for c in line.strip().strip("|").split("|")] for line in text.splitlines()]
                tables.append([dict(zip(lines[0], cells)) for cells in lines[2:]])
    return tables


def matches(cell: str, value, scale: float) -> bool:
    """`cell` shows `value * scale`, rounded to the decimals it prints."""
    number = cell.rstrip("x%")
    decimals = len(number.split(".")[1]) if "." in number else 0
    return abs(float(number) - value * scale) <= 0.5 * 10 ** -decimals + 1e-12


@pytest.mark.parametrize("benchmark, columns, index", [("train_step", TRAIN, 0), ("kv_cache", KV, 1)])
def test_table_equals_its_results_files(benchmark, columns, index):
    rows = stored_tables()[index]
    for kind in ("cpu", "cuda"):
        path = RESULTS / f"{benchmark}-{kind}.json"
        shown = [row for row in rows if row["device"].startswith(f"{kind}:")]
        if not path.exists():
            assert [row["device"] for row in shown] == [f"{kind}: not measured yet"]
            continue
        record = json.loads(path.read_text())
        assert len(shown) == len(record["rows"]), (kind, len(shown), len(record["rows"]))
        for row, measured in zip(shown, record["rows"]):
            assert record["device"] in row["device"] and record["torch"] in row["device"]
            for column, key in columns.items():
                if isinstance(key, str):
                    assert row[column] == str(measured[key]), (column, row[column], measured[key])
                else:
                    assert matches(row[column], measured[key[0]], key[1]), (column, row[column], measured[key[0]])
            if benchmark == "kv_cache":
                best = max(measured[k] for k in ("kv_cache_speedup", "preallocated_speedup", "compiled_speedup"))
                assert matches(row["best speed-up"], best, 1)


def test_the_tables_are_there():
    assert len(stored_tables()) == 2


@pytest.mark.parametrize("path", sorted(RESULTS.glob("train_step-*.json")), ids=lambda p: p.name)
def test_model_flop_utilization_is_below_the_peak(path):
    """A step's matmuls cannot run faster than the device's matmul peak: every MFU in (0, 1.1]
    (10 % for the noise of measuring the peak), else the peak was not the device's ceiling."""
    for row in json.loads(path.read_text())["rows"]:
        for key in ("mfu_ours", "mfu_baseline"):
            assert 0 < row[key] <= 1.1, (path.name, row["config"], row["precision"], row["compile"], key, row[key])


# bench/scaling.py's record: chapters 8 and 8a read it (scaling-<device>.json, else the CPU's) and
# assert their claims about time on it. Each section's rows, and the fields the chapters read.
SCALING = {
    "peak": {"when", "n", "flops_per_s"},
    "encoder_layer": {"length", "layer_s", "core_s", "share", "layer_runs_s", "core_runs_s"},
    "attention": {"length", "plain_s", "fused_s"},
    "decoding": {"use_cache", "new_tokens", "total_s"},
    "mfu": {"name", "config", "batch", "length", "step_flops", "step_s", "peak_flops_per_s", "mfu"},
}
SCALING_RECORDS = sorted(RESULTS.glob("scaling-*.json"))


def scaling_sections(path: Path) -> dict[str, list[dict]]:
    sections: dict[str, list[dict]] = {}
    for row in json.loads(path.read_text())["rows"]:
        sections.setdefault(row["section"], []).append(row)
    return sections


def test_the_scaling_record_of_the_cpu_is_committed():
    """The chapters fall back to it on a device without a record of its own."""
    assert RESULTS / "scaling-cpu.json" in SCALING_RECORDS


@pytest.mark.parametrize("path", SCALING_RECORDS, ids=lambda p: p.name)
def test_scaling_record_holds_what_the_chapters_read(path):
    record = json.loads(path.read_text())
    assert {"device", "device_type", "threads", "torch", "date", "settings"} <= record.keys()
    assert path.name == f"scaling-{record['device_type']}.json"
    sections, settings = scaling_sections(path), record["settings"]
    assert sections.keys() == SCALING.keys()
    for section, fields in SCALING.items():
        for row in sections[section]:
            assert fields <= row.keys(), (section, fields - row.keys())
    assert [row["when"] for row in sections["peak"]] == ["first", "last"]
    encoder = settings["encoder_layer"]                      # chapter 8's sizes
    assert (encoder["d_model"], encoder["nhead"], encoder["dim_feedforward"], encoder["batch"]) == (64, 1, 256, 8)
    assert [row["length"] for row in sections["encoder_layer"]] == encoder["lengths"]
    assert [row["length"] for row in sections["attention"]] == [256, 512, 1024, 2048, 4096]  # chapter 8a's
    counts = settings["decoding"]["new_tokens"]
    for use_cache in (True, False):                          # in the order of the settings, each n once
        assert [row["new_tokens"] for row in sections["decoding"] if row["use_cache"] is use_cache] == counts
    assert len(sections["mfu"]) == 3
    for row in sections["encoder_layer"]:
        assert row["layer_s"] == min(row["layer_runs_s"]) > 0 and row["core_s"] == min(row["core_runs_s"]) > 0
        assert 0 < row["share"] < 1
    assert all(row[key] > 0 for row in sections["attention"] for key in ("plain_s", "fused_s"))
    assert all(row["total_s"] > 0 for row in sections["decoding"])


@pytest.mark.parametrize("path", SCALING_RECORDS, ids=lambda p: p.name)
def test_scaling_model_flop_utilization_is_below_the_peak(path):
    """As for train_step: every MFU in (0, 1.1], against the larger of the two recorded peaks."""
    sections = scaling_sections(path)
    peak = max(row["flops_per_s"] for row in sections["peak"])
    for row in sections["mfu"]:
        assert row["peak_flops_per_s"] == peak
        assert row["mfu"] == pytest.approx(row["step_flops"] / row["step_s"] / peak, rel=1e-12)
        assert 0 < row["mfu"] <= 1.1, (path.name, row["name"], row["mfu"])
