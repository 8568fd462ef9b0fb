"""Run notebooks top to bottom in a fresh kernel and save them with their outputs, in place.

Usage: python tools/execute_notebooks.py notebooks/07_generation.ipynb [...]

The same as Restart & Run All, then Save: cells run in the notebook's own folder, execution
counts read 1, 2, 3, ..., and no timing metadata is written (it would change every run).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient


def execute(path: Path, timeout: int) -> float:
    """Execute the notebook at `path` in place; returns the seconds it took."""
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(nb, timeout=timeout, kernel_name="python3", record_timing=False,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    nbformat.write(nb, path)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--timeout", type=int, default=1800, help="seconds one cell may take")
    args = parser.parse_args(argv)
    for path in args.notebooks:
        print(f"{path}: {execute(path, args.timeout):.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
