"""Alt text for the book's Graphviz diagrams, generated from the drawing itself.

    .venv/bin/python tools/alt_text.py            # report the cells whose alt text differs
    .venv/bin/python tools/alt_text.py --write    # write the generated alt text into them
    .venv/bin/python tools/alt_text.py --write notebooks/02_attention.ipynb   # only these

A diagram cell's stored output is the SVG that Graphviz drew and that the page shows. `describe`
reads that SVG back: its title, its frames (clusters), its nodes with their shapes (box, rounded
box, dashed box, diamond, ellipse, circle) and labels, and its arrows with their labels, and
writes them as sentences. The cell's `mystnb.image.alt` must be that text (tests/test_alt_text.py), so the
alt text cannot describe a shape or an arrow the figure does not have. Matplotlib figures keep
hand-written alt text.
"""
from __future__ import annotations

import json
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SVG = "{http://www.w3.org/2000/svg}"


def _texts(group: ET.Element) -> list[str]:
    return [" ".join("".join(t.itertext()).split()) for t in group.iter(f"{SVG}text")
            if "".join(t.itertext()).strip()]


def _label(lines: list[str]) -> str:
    """A label of several lines as one phrase: "linear1 (Linear)", "x (B, L, 512)"."""
    if not lines:
        return "(no label)"
    rest = " ".join(lines[1:])
    if not rest:
        return lines[0]
    return f"{lines[0]} {rest}" if rest.startswith("(") else f"{lines[0]} ({rest})"


def _points(shape: ET.Element) -> list[tuple[float, float]]:
    if shape.tag == f"{SVG}ellipse":
        return [(float(shape.get("cx")), float(shape.get("cy")))]
    numbers = [float(n) for n in re.findall(r"-?\d+(?:\.\d+)?", shape.get("points") or shape.get("d") or "")]
    return list(zip(numbers[::2], numbers[1::2]))


def _shape(group: ET.Element) -> tuple[str, tuple[float, float]]:
    """The node's shape in words and its centre."""
    shapes = (f"{SVG}ellipse", f"{SVG}polygon", f"{SVG}path")
    outline = next((e for e in group.iter() if e.tag in shapes), None)
    if outline is None:  # shape=plaintext: a label without an outline
        where = [(float(t.get("x")), float(t.get("y"))) for t in group.iter(f"{SVG}text")]
        return "label", (sum(x for x, _ in where) / len(where), sum(y for _, y in where) / len(where))
    dashed = bool(outline.get("stroke-dasharray"))
    points = _points(outline)
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    centre = ((min(xs) + max(xs)) / 2, (min(ys) + max(ys)) / 2)
    if outline.tag == f"{SVG}ellipse":
        round_ = abs(float(outline.get("rx")) - float(outline.get("ry"))) < 0.5
        kind = "circle" if round_ else "ellipse"
    elif outline.tag == f"{SVG}path":
        kind = "rounded box"
    else:
        corners = points[:-1] if len(points) > 1 and points[0] == points[-1] else points
        sides = zip(corners, corners[1:] + corners[:1])
        tilted = len(corners) == 4 and all(abs(a[0] - b[0]) > 0.5 and abs(a[1] - b[1]) > 0.5 for a, b in sides)
        kind = "diamond" if tilted else "box"
    return ("dashed " if dashed else "") + kind, centre


def _join(items: list[str]) -> str:
    """"a, b and c"; a label that repeats is said once with its count: "+ (3 times)"."""
    counts = {item: items.count(item) for item in items}
    said = [item if n == 1 else f"{item} ({n} times)" for item, n in counts.items()]
    return said[0] if len(said) == 1 else ", ".join(said[:-1]) + " and " + said[-1]


def describe(svg: str) -> str:
    """Sentences that say what the Graphviz drawing `svg` shows."""
    root = ET.fromstring(svg)
    graph = next(g for g in root.iter(f"{SVG}g") if g.get("class") == "graph")
    title = next((" ".join("".join(t.itertext()).split()) for t in graph.findall(f"{SVG}text")), None)
    nodes, names, clusters, edges = [], {}, [], []
    for g in graph.iter(f"{SVG}g"):
        kind = g.get("class")
        if kind == "node":
            shape, centre = _shape(g)
            label = _label(_texts(g))
            names[g.findtext(f"{SVG}title")] = label
            nodes.append((label, shape, centre))
        elif kind == "cluster":
            outline = g.find(f"{SVG}polygon")
            points = _points(outline)
            xs, ys = [p[0] for p in points], [p[1] for p in points]
            clusters.append((_label(_texts(g)), bool(outline.get("stroke-dasharray")),
                             (min(xs), max(xs), min(ys), max(ys))))
        elif kind == "edge":
            tail, head = g.findtext(f"{SVG}title").split("->")
            edges.append((tail, head, " ".join(_texts(g))))
    centres = {name: c for (label, shape, c), name in zip(nodes, names)}
    steps = [(centres[h][0] - centres[t][0], centres[h][1] - centres[t][1])
             for t, h, _ in edges if t in centres and h in centres]
    vertical = [(dx, dy) for dx, dy in steps if abs(dy) >= abs(dx)]  # each arrow's main axis
    across = [(dx, dy) for dx, dy in steps if abs(dy) < abs(dx)]
    directions = {"from bottom to top": sum(dy < 0 for _, dy in vertical),
                  "from top to bottom": sum(dy > 0 for _, dy in vertical),
                  "from left to right": sum(dx > 0 for dx, _ in across),
                  "from right to left": sum(dx < 0 for dx, _ in across)}
    sentences = [f'A diagram titled "{title}".' if title else "A diagram."]
    if steps:
        sentences.append(f"It reads {max(directions, key=directions.get)}.")
    for shape in dict.fromkeys(s for _, s, _ in nodes):
        labels = [label for label, s, _ in nodes if s == shape]
        plural = shape + ("es" if shape.endswith("x") else "s")
        if shape == "label":
            sentences.append(f"Text without a frame: {_join(labels)}.")
            continue
        article = "An " if shape[0] in "aeiou" else "A "
        head = plural[0].upper() + plural[1:] if len(labels) > 1 else article + shape
        sentences.append(f"{head}: {_join(labels)}.")
    for label, dashed, (x0, x1, y0, y1) in clusters:
        inside = [lab for lab, _, (x, y) in nodes if x0 <= x <= x1 and y0 <= y <= y1]
        frame = "A dashed frame" if dashed else "A frame"
        sentences.append(f"{frame} labelled {label} holds {_join(inside) if inside else 'nothing'}.")
    for tail, head, label in edges:
        said = f" (labelled {label})" if label else ""
        sentences.append(f"An arrow from {names.get(tail, tail)} to {names.get(head, head)}{said}.")
    return " ".join(sentences)


def diagram_cells(path: Path):
    """(cell, svg) for each code cell whose output is a Graphviz drawing."""
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        for output in cell.get("outputs", []):
            svg = output.get("data", {}).get("image/svg+xml")
            svg = "".join(svg) if isinstance(svg, list) else svg
            if svg and "Generated by graphviz" in svg:
                yield cell, svg


def main(write: bool, paths: list[str]) -> int:
    stale = 0
    chosen = [Path(p).resolve() for p in paths] or sorted((ROOT / "notebooks").glob("*.ipynb"))
    for path in chosen:
        notebook = json.loads(path.read_text(encoding="utf-8"))
        changed = False
        for cell in notebook["cells"]:
            svgs = [o["data"]["image/svg+xml"] for o in cell.get("outputs", [])
                    if "Generated by graphviz" in "".join(o.get("data", {}).get("image/svg+xml", ""))]
            if not svgs:
                continue
            svg = "".join(svgs[0]) if isinstance(svgs[0], list) else svgs[0]
            alt = describe(svg)
            image = cell["metadata"].setdefault("mystnb", {}).setdefault("image", {})
            if image.get("alt") != alt:
                stale += 1
                print(f"{path.name} {cell.get('id')}: {'written' if write else 'differs'}")
                image["alt"] = alt
                changed = True
        if write and changed:
            path.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0 if write or not stale else 1


if __name__ == "__main__":
    args = sys.argv[1:]
    sys.exit(main("--write" in args, [a for a in args if a != "--write"]))
