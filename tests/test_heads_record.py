"""bench/results/heads-cpu.json, which chapter 2a draws and checks, is what the shipped date model gives."""
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import record_heads  # noqa: E402

TOLERANCE = 1e-3  # both sides are rounded to 3 decimals: one last digit apart at most


def mismatches(stored, fresh, where: str = "record") -> list[str]:
    """Where `stored` and `fresh` differ: structure, strings and ints exactly, floats by more
    than TOLERANCE."""
    if isinstance(stored, dict) and isinstance(fresh, dict):
        if list(stored) != list(fresh):
            return [f"{where}: keys {list(stored)} != {list(fresh)}"]
        return [m for k in stored for m in mismatches(stored[k], fresh[k], f"{where}[{k!r}]")]
    if isinstance(stored, list) and isinstance(fresh, list):
        if len(stored) != len(fresh):
            return [f"{where}: {len(stored)} items != {len(fresh)}"]
        return [m for i, (s, f) in enumerate(zip(stored, fresh)) for m in mismatches(s, f, f"{where}[{i}]")]
    if isinstance(stored, float) or isinstance(fresh, float):
        if isinstance(stored, (int, float)) and isinstance(fresh, (int, float)) \
                and math.isclose(stored, fresh, rel_tol=0, abs_tol=TOLERANCE + 1e-9):
            return []
        return [f"{where}: stored {stored!r}, the model gives {fresh!r}"]
    return [] if stored == fresh and type(stored) is type(fresh) else \
        [f"{where}: stored {stored!r}, the model gives {fresh!r}"]


def test_the_record_is_what_the_shipped_model_gives():
    stored = json.loads(record_heads.RECORD.read_text(encoding="utf-8"))
    for key in record_heads.MACHINE_KEYS:   # where it was recorded: not recomputed
        assert key in stored, f"{record_heads.RECORD.name} lacks {key!r}"
        del stored[key]
    fresh = record_heads.record()
    assert stored["settings"]["checkpoint_sha256"] == fresh["settings"]["checkpoint_sha256"], (
        "the shipped checkpoint changed: run OMP_NUM_THREADS=1 .venv/bin/python tools/record_heads.py")
    found = mismatches(stored, fresh)
    assert not found, f"{len(found)} differences, e.g. {found[:3]}; run tools/record_heads.py again"


def test_the_comparison_fails_on_a_changed_weight():
    stored = json.loads(record_heads.RECORD.read_text(encoding="utf-8"))
    changed = json.loads(json.dumps(stored))
    changed["rows"][0]["weights"][1][4][-1] += 2.5 * TOLERANCE
    assert mismatches(stored, stored) == []
    assert len(mismatches(stored, changed)) == 1


def test_the_record_is_small_and_as_the_script_writes_it():
    text = record_heads.RECORD.read_text(encoding="utf-8")
    assert len(text.encode()) < 12_000
    assert text == record_heads.dumps(json.loads(text)) + "\n"


def test_the_recorded_layer_is_the_last_decoder_layer():
    """Chapters 2 and 2a say the heads drawn are those of the model's last layer."""
    from transformer_lib.dates import pretrained

    layers = len(pretrained("cpu").model.decoder.layers)
    stored = json.loads(record_heads.RECORD.read_text(encoding="utf-8"))
    assert stored["settings"]["layer"] == f"decoder.layers[{layers - 1}].cross_attn"
