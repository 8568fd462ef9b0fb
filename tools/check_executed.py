"""Gate: every code cell of every notebook was executed, in order, in one fresh kernel.

nbval passes a notebook that was saved without outputs, so this check runs first.
Usage: python tools/check_executed.py notebooks
"""
from __future__ import annotations

import json
import sys
from pathlib import Path


def problems(path: Path) -> list[str]:
    nb = json.loads(path.read_text(encoding="utf-8"))
    counts = [c.get("execution_count") for c in nb["cells"]
              if c["cell_type"] == "code" and "".join(c["source"]).strip()]
    if not counts:
        return [f"{path}: no code cells"]
    if any(n is None for n in counts):
        return [f"{path}: {counts.count(None)} code cell(s) were never executed"]
    if counts != list(range(1, len(counts) + 1)):
        return [f"{path}: execution counts {counts[:8]}... are not 1, 2, 3, ... "
                "(Restart & Run All, then save)"]
    return []


def main(folder: str) -> int:
    paths = sorted(Path(folder).glob("*.ipynb"))
    found = [p for path in paths for p in problems(path)]
    for line in found:
        print(line)
    if not paths:
        print(f"no notebooks under {folder}")
        return 1
    print(f"executed gate: {len(paths) - len(set(f.split(':')[0] for f in found))}/{len(paths)} notebooks executed top to bottom")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "notebooks"))
