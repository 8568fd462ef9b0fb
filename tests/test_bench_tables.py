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
