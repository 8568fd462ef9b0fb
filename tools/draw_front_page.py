"""Draw the front page's architecture diagram from the library's model (`make book` runs it).

    .venv/bin/python tools/draw_front_page.py [out_dir]

Writes ``architecture.svg`` into ``_build/demo/figures/`` (default), which Sphinx copies to
``_static/figures/`` (``html_static_path`` in _config.yml). The diagram is
``transformer_lib.figures.architecture_diagram`` of the paper's base model, the function chapter
5b draws the same picture with, so the front page cannot drift from the code.
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch

from transformer_lib.figures import architecture_diagram
from transformer_lib.model import Transformer, TransformerConfig

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "_build" / "demo" / "figures"
    out.mkdir(parents=True, exist_ok=True)
    with torch.device("meta"):  # the base model's structure, without allocating its weights
        model = Transformer(TransformerConfig(src_vocab_size=32000, tgt_vocab_size=32000))
    diagram = architecture_diagram(model, title="The Transformer (base model: 6 + 6 layers)")
    (out / "architecture.svg").write_bytes(diagram.pipe(format="svg"))
    print(f"front page: {out / 'architecture.svg'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
