"""The alt text of every Graphviz diagram is generated from the drawing the page shows (tools/alt_text.py)."""
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
from alt_text import describe, diagram_cells  # noqa: E402

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_each_diagrams_alt_text_is_the_one_its_drawing_gives(path):
    for cell, svg in diagram_cells(path):
        alt = cell["metadata"].get("mystnb", {}).get("image", {}).get("alt", "")
        assert alt == describe(svg), (
            f"{path.name}, cell {cell.get('id')}: its alt text is not the drawing's; "
            "run .venv/bin/python tools/alt_text.py --write after executing the notebook")


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
def test_the_description_names_every_shape_frame_and_arrow_that_is_drawn():
    import graphviz

    dot = graphviz.Digraph(graph_attr=dict(label="Tiny", labelloc="t", rankdir="BT"))
    with dot.subgraph(name="cluster_block") as frame:
        frame.attr(label="block", style="dashed")
        frame.node("f", "f\nLinear", shape="box", style="rounded")
        frame.node("add", "+", shape="circle")
    dot.node("x", "x (B, d)", shape="ellipse")
    dot.node("soft", "softmax", shape="box", style="dashed")
    dot.node("ok", "ok?", shape="diamond")
    dot.edge("x", "f", label="(B, d)")
    dot.edge("f", "add")
    dot.edge("add", "soft")
    dot.edge("soft", "ok")
    text = describe(dot.pipe(format="svg").decode())
    assert text.startswith('A diagram titled "Tiny". It reads from bottom to top.')
    for part in ["A rounded box: f (Linear).", "A circle: +.", "An ellipse: x (B, d).",
                 "A dashed box: softmax.", "A diamond: ok?.", "A dashed frame labelled block holds",
                 "An arrow from x (B, d) to f (Linear) (labelled (B, d)).",
                 "An arrow from f (Linear) to +.", "An arrow from + to softmax."]:
        assert part in text, (part, text)
    assert "ellipse: +" not in text and "circle: x" not in text and "box: ok?" not in text
