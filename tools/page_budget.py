"""Visible code lines and words per page: what a reader scrolls past before they open a fold.

    .venv/bin/python tools/page_budget.py [notebooks/NN_x.ipynb ...]

A code line is visible when its cell is neither removed (`remove-cell`, `remove-input`) nor
folded (`hide-input`, `hide-cell`), counted as the page shows it: without the build machinery
that tools/sphinx_hide_machinery.py hides (directives, glue calls, pragmas) and without blank
lines. The learner's path (chapters 1 to 7 and 9) teaches in at most `BUDGET` visible lines a
page; tests/test_contract.py holds it. Words of prose are counted outside dropdowns, code
blocks and math blocks, an estimate of what the browser test measures on the built page.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sphinx_hide_machinery import hide_machinery  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BUDGET = 160
HIDDEN = {"remove-cell", "remove-input", "hide-input", "hide-cell"}


def visible_code_lines(path: Path) -> int:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    total = 0
    for cell in cells:
        if cell["cell_type"] != "code" or HIDDEN & set(cell["metadata"].get("tags", [])):
            continue
        shown = hide_machinery("".join(cell["source"]))
        total += sum(1 for line in shown.splitlines() if line.strip())
    return total


FENCE = re.compile(r"^(`{3,}|:{3,})(.*)$")


def visible_words(path: Path) -> int:
    """Words of Markdown outside folds (dropdowns), code blocks and display math."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    total = 0
    for cell in cells:
        if cell["cell_type"] != "markdown" or HIDDEN & set(cell["metadata"].get("tags", [])):
            continue
        stack: list[tuple[str, bool]] = []  # open fences: (marker, hides its content)
        in_math = False
        for line in "".join(cell["source"]).splitlines():
            m = FENCE.match(line.strip())
            if m and stack and m.group(1) == stack[-1][0] and not m.group(2).strip():
                stack.pop()
                continue
            if m and m.group(2).strip():
                info = m.group(2).strip()
                hides = not info.startswith("{") or "dropdown" in info or "toggle" in info
                stack.append((m.group(1), hides or (stack and stack[-1][1])))
                continue
            if line.strip() == "$$":
                in_math = not in_math
                continue
            if in_math or (stack and stack[-1][1]):
                continue
            total += sum(1 for w in line.split() if re.search(r"\w", w))
    return total


def main(paths: list[str]) -> int:
    chosen = [Path(p) for p in paths] or sorted((ROOT / "notebooks").glob("*.ipynb"))
    for path in chosen:
        lines = visible_code_lines(path)
        flag = "" if lines <= BUDGET else f"  over {BUDGET}"
        print(f"{path.name:34s} {lines:4d} code lines {visible_words(path):6d} words{flag}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
