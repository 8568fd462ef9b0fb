"""Say which packages `make test-gpu` needs and the current Python environment lacks.

`make test-gpu` runs in the environment it is started from, because a CUDA machine brings its
own CUDA build of torch: it creates no venv and installs nothing. This check runs first and
names every missing package (with its pip name and the version requirements.txt pins), instead
of letting pytest fail on the first missing import.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys
from pathlib import Path

# import name -> pip name, for what the tests and the notebooks import
REQUIRED = {
    "torch": "torch", "babel": "babel", "pytest": "pytest", "xdist": "pytest-xdist", "hypothesis": "hypothesis",
    "nbval": "nbval", "nbformat": "nbformat", "nbclient": "nbclient", "ipykernel": "ipykernel",
    "jupyter_client": "jupyter_client", "matplotlib": "matplotlib", "numpy": "numpy", "yaml": "PyYAML",
    "tqdm": "tqdm", "psutil": "psutil", "onnx": "onnx", "onnxruntime": "onnxruntime",
}


def pinned(pip_name: str, requirements: Path) -> str:
    """`name==version` as requirements.txt pins it, else the bare name."""
    pattern = re.compile(rf"^{re.escape(pip_name)}==\S+", re.IGNORECASE | re.MULTILINE)
    found = pattern.search(requirements.read_text()) if requirements.exists() else None
    return found.group(0) if found else pip_name


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", action="store_true", help="also report whether CUDA is available")
    args = parser.parse_args(argv)
    root = Path(__file__).resolve().parent.parent
    missing = [pip for module, pip in REQUIRED.items() if importlib.util.find_spec(module) is None]
    if missing:
        wanted = " ".join(f'"{pinned(name, root / "requirements.txt")}"' for name in missing)
        print(f"{sys.executable} lacks {len(missing)} required package(s): {', '.join(missing)}\n"
              f"install them into this environment (not torch: keep the CUDA build it has), e.g.\n"
              f"  {sys.executable} -m pip install {wanted}", file=sys.stderr)
        return 1
    import torch

    cuda = torch.cuda.is_available()
    print(f"environment: Python {sys.version.split()[0]}, torch {torch.__version__}, "
          f"CUDA {'available: ' + torch.cuda.get_device_name() if cuda else 'not available'}")
    if args.gpu and not cuda:
        print("note: no CUDA device is visible; the GPU gate runs on the CPU", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
