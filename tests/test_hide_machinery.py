"""The rendered page shows each code cell without its build machinery (tools/sphinx_hide_machinery.py)."""
import ast
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
from sphinx_hide_machinery import hide_machinery  # noqa: E402

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_directives_glue_and_pragmas_go_and_the_code_stays():
    source = "\n".join([
        "#| export",
        "x = torch.ones(3)  # (3,)",
        "# the numbers the prose quotes",
        "_ = glue(\"ch_x\",",
        "         round(float(x.sum()), 2))",
        "for k in (1, 2):",
        "    _ = glue(f\"ch_{k}\", k)",
        "",
        "",
        "y = x * 2  # noqa: E731",
        "glue(\"ch_y\", 2)",
        "print(y.sum())",
    ])
    assert hide_machinery(source) == "x = torch.ones(3)  # (3,)\n\ny = x * 2\nprint(y.sum())"


def test_a_glue_call_whose_value_is_used_stays():
    source = "peak = glue(\"p\", 3)\nassert glue(\"q\", 2) == 2\nprint(peak)"
    assert hide_machinery(source) == source
    assert hide_machinery("%timeit f()\nglue('a', 1)") == "%timeit f()\nglue('a', 1)"  # not Python


def test_a_cell_of_machinery_only_shows_nothing():
    assert hide_machinery("#| export\n_ = glue(\"a\", 1)\n") == ""


def shown_cells(path):
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        tags = cell["metadata"].get("tags", [])
        if cell["cell_type"] == "code" and not {"remove-cell", "remove-input"} & set(tags):
            yield "".join(cell["source"])


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_shown_cell_stays_python_without_machinery(path):
    for source in shown_cells(path):
        shown = hide_machinery(source)
        try:
            ast.parse(source)
        except SyntaxError:
            continue
        ast.parse(shown)  # nothing the reader sees is broken by what was hidden
        assert "#|" not in shown and "noqa" not in shown and "# fmt:" not in shown, shown


def test_recorders_inside_blocks_go_and_no_block_is_left_empty():
    source = "\n".join([
        "if ok:",
        "    best = max(runs)",
        "    _ = glue(\"best\", best), glue(\"n\", len(runs))",
        "try:",
        "    glue(\"x\", 1)",
        "except ImportError:",
        "    pass",
    ])
    shown = hide_machinery(source)
    assert shown == "if ok:\n    best = max(runs)\ntry:\n    glue(\"x\", 1)\nexcept ImportError:\n    pass"

