"""Draw the front page's figure and compute what it shows of the date model (`make book` runs it).

    .venv/bin/python tools/draw_front_page.py [out_dir]

Writes into ``_build/demo/figures/`` (default), which Sphinx copies to ``_static/figures/``
(``html_static_path`` in _config.yml); ``book/intro.md`` includes the three ``.md`` files:

* ``architecture.svg``: the paper's base model, built as the library's ``Transformer`` (on the meta
  device: no weights), with one encoder layer and one decoder layer opened into their sublayers,
  labelled with the paper's words and, smaller, the submodules' names. Each name is read from the
  model: a submodule that is missing, or one that the drawing does not know, stops the script, so
  the figure cannot drift from the code.
* ``architecture.md``: the figure's HTML, its alt text and caption generated from the same lists.
* ``dates.md``: three test dates of chapter 9 (the test set that the shipped model's record names),
  in three languages, with what ``transformer_lib.dates.pretrained()`` answers; the script stops
  if an answer is not the true date.
* ``install.md``: the ``pip install`` commands: from a clone, and from ``repository.url`` in
  _config.yml (the URL that the chapters' Colab cells install from, once the repository is
  published there), and a call of the shipped model with its answer.
"""
from __future__ import annotations

import html
import json
import re
import sys
from pathlib import Path

import babel
import torch
import yaml
from torch import nn

from transformer_lib.dates import make_date_pairs, pretrained
from transformer_lib.figures import COLORS, FONT, new_diagram
from transformer_lib.model import Transformer, TransformerConfig

ROOT = Path(__file__).resolve().parents[1]
MONO = "Courier"

# The book's one colour scheme (`transformer_lib.figures.COLORS`: Okabe and Ito's colour-blind-safe
# palette, lightened so that black text reads on every fill). In greyscale, attention is darker than
# feed-forward, and the other boxes are white. The frames' colours tell the encoder from the
# decoder, and so do their titles.
FILL = {"attention": COLORS["attention"], "feed-forward": COLORS["feed-forward"],
        "add-norm": "white", "other": "white"}
FILL_WORDS = {"attention": "orange", "feed-forward": "light blue"}
FRAME = {"encoder": (*COLORS["encoder"], "green"), "decoder": (*COLORS["decoder"], "pink")}

# One column per stack: (child of the layer, the paper's words, kind), bottom to top, as the
# layer's forward runs them; an Add & Norm follows each sublayer.
COLUMNS = {
    "encoder": {
        "side": "left",
        "embed": "src_embed",
        "tensor": ("Inputs: source ids", "(B, S)"),
        "embedding": "Input embedding",
        "sublayers": [
            ("self_attn", "Multi-head attention", "attention"),
            ("attn_sublayer", "Add & Norm", "add-norm"),
            ("feed_forward", "Feed forward", "feed-forward"),
            ("ff_sublayer", "Add & Norm", "add-norm"),
        ],
    },
    "decoder": {
        "side": "right",
        "embed": "tgt_embed",
        "tensor": ("Outputs, shifted right", "(B, T)"),
        "embedding": "Output embedding",
        "sublayers": [
            ("self_attn", "Masked multi-head\nattention", "attention"),
            ("self_attn_sublayer", "Add & Norm", "add-norm"),
            ("cross_attn", "Multi-head attention", "attention"),
            ("cross_attn_sublayer", "Add & Norm", "add-norm"),
            ("feed_forward", "Feed forward", "feed-forward"),
            ("ff_sublayer", "Add & Norm", "add-norm"),
        ],
    },
}
WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 8: "eight", 12: "twelve"}
# The front page's three dates: chapter 9's first test date in each of these locales and formats.
DATES = [("en", "full"), ("de", "long"), ("ru", "full")]


def base_model() -> Transformer:
    """The paper's base sizes, separate 32,000-token vocabularies; no weights allocated."""
    with torch.device("meta"):
        return Transformer(TransformerConfig(src_vocab_size=32000, tgt_vocab_size=32000))


def _check(model: Transformer) -> None:
    """The model has every submodule the figure names, no other in its layers, and is post-norm."""
    modules = dict(model.named_modules())
    children = sorted(n for n, _ in model.named_children())
    drawn = ["decoder", "encoder", "output", "src_embed", "tgt_embed"]
    if children != drawn:
        raise ValueError(f"the model's children are {children}; the front page draws {drawn}")
    for stack_name, column in COLUMNS.items():
        if [name for name, _ in getattr(model, stack_name).named_children()] != ["layers"]:
            raise ValueError(f"{stack_name} holds more than its layers; the front page draws only them")
        stack = getattr(model, stack_name)
        layers = stack.layers
        children = sorted(name for name, _ in layers[0].named_children())
        drawn = sorted(child for child, _, _ in column["sublayers"])
        if children != drawn:
            raise ValueError(f"{stack_name}.layers[0] has {children}; the front page draws {drawn}")
        if any(type(layer) is not type(layers[0]) for layer in layers):
            raise ValueError(f"the layers of {stack_name} are not all {type(layers[0]).__name__}")
        if getattr(stack, "norm", None) is not None or any(
            getattr(m, "norm_first", False) for m in layers.modules()
        ):
            raise ValueError(f"{stack_name} is pre-norm; the front page draws Add & Norm (post-norm)")
        for part in ("token", "position"):
            if f"{column['embed']}.{part}" not in modules:
                raise ValueError(f"the model has no submodule {column['embed']}.{part}")
    if not isinstance(model.output, nn.Linear):
        raise TypeError(f"model.output is a {type(model.output).__name__}; the front page draws a Linear")


def _label(words: str, code: str) -> str:
    """A Graphviz HTML label: the paper's words, then the code's name, smaller, in monospace."""
    lines = "<BR/>".join(html.escape(line) for line in words.split("\n"))
    return f'<{lines}<BR/><FONT FACE="{MONO}" POINT-SIZE="12" COLOR="#333333">{html.escape(code)}</FONT>>'


def architecture(model: Transformer):
    """The diagram of `model` (a graphviz.Digraph), and its alt text, from the same lists."""
    _check(model)
    c = model.config
    sizes = f"d_model = {c.d_model}, {c.nhead} heads, d_ff = {c.dim_feedforward}"
    dot = new_diagram(f"The Transformer, base model\n{sizes}")
    dot.attr(nodesep="0.12", ranksep="0.2", fontsize="15")
    dot.attr("node", fontsize="14", width="1.9", style="rounded,filled", fillcolor="white")
    dot.attr("edge", fontsize="12")
    said = []  # the alt text's sentences, written as each part is drawn

    for stack_name, column in COLUMNS.items():
        embed, subs = column["embed"], column["sublayers"]
        n = len(getattr(model, stack_name).layers)
        border, fill, colour = FRAME[stack_name]
        words, shape = column["tensor"]
        dot.node(f"{stack_name}_in", _label(words, shape), shape="plaintext", style="", width="0", height="0")
        dot.node(f"{embed}.token", _label(column["embedding"], f"{embed}.token"))
        dot.node(f"{embed}.position", _label("+ Positional encoding", f"{embed}.position"))
        dot.edges([(f"{stack_name}_in", f"{embed}.token"), (f"{embed}.token", f"{embed}.position")])
        with dot.subgraph(name=f"cluster_{stack_name}") as frame:
            frame.attr(label="", style="rounded,filled", color=border, fillcolor=fill, penwidth="2", margin="6")
            for child, text, kind in subs:
                frame.node(f"{stack_name}.{child}", _label(text, child), fillcolor=FILL[kind])
            # The frame's title is a node above its top sublayer, so that an edge leaving the
            # frame passes beside the title, not through it.
            frame.node(
                f"{stack_name}_title",
                f'<<FONT POINT-SIZE="16"><B>{stack_name.capitalize()} layer × {n}</B></FONT><BR/>'
                f'<FONT FACE="{MONO}" POINT-SIZE="12">{stack_name}.layers</FONT>>',
                shape="plaintext", style="", width="0", height="0", margin="0.02", fontname=FONT,
            )
        dot.edge(f"{stack_name}.{subs[-1][0]}", f"{stack_name}_title", style="invis")
        below = f"{embed}.position"  # each sublayer's input, which its Add & Norm adds back
        for (sub, _, _), (norm, _, _) in zip(subs[::2], subs[1::2]):
            queries = stack_name == "decoder" and sub == "cross_attn"
            # Heavy main edges keep each column straight; the residual (dashed) weighs nothing, so
            # that it does not pull the embeddings sideways and widen the drawing.
            dot.edge(below, f"{stack_name}.{sub}", weight="10", **({"label": " queries"} if queries else {}))
            dot.edge(f"{stack_name}.{sub}", f"{stack_name}.{norm}", weight="10")
            dot.edge(below, f"{stack_name}.{norm}", style="dashed", arrowhead="none", weight="0")  # the residual
            below = f"{stack_name}.{norm}"
        inside = "; ".join(f"{text.replace(chr(10), ' ')} ({child})" for child, text, _ in subs)
        said.append(
            f"{column['side'].capitalize()} column, the {stack_name}: {words} {shape}, then "
            f"{column['embedding']} ({embed}.token), then + Positional encoding ({embed}.position), "
            f"then a {colour} frame titled {stack_name.capitalize()} layer × {n} ({stack_name}.layers) "
            f"that holds one layer's sublayers, bottom to top: {inside}."
        )

    # The memory rises from the encoder's last Add & Norm to its name, above the encoder's frame
    # (where the drawing has room: a label between the frames would widen it), and enters the
    # cross-attention from the side. Both stacks start on the same rank.
    with dot.subgraph() as inputs:
        inputs.attr(rank="same")
        inputs.node("encoder_in")
        inputs.node("decoder_in")
    top = f"encoder.{COLUMNS['encoder']['sublayers'][-1][0]}"
    dot.node("memory", _label("memory", "(B, S, d)"), shape="plaintext", style="", width="0", height="0")
    dot.edge("encoder_title", "memory", style="invis", weight="10")
    dot.edge(top, "memory", weight="0", headport="s")
    dot.edge("decoder.cross_attn", "memory", dir="back", weight="0", tailport="w", headport="e")
    dot.node("output", _label("Linear", "output"))
    dot.node("softmax", "Softmax", style="dashed,rounded", width="1.4")
    dot.node("probs", _label("Output probabilities", "(B, T, V)"), shape="plaintext", style="", width="0",
             height="0")
    top = f"decoder.{COLUMNS['decoder']['sublayers'][-1][0]}"
    dot.edge(top, "output", weight="0")
    dot.edges([("output", "softmax"), ("softmax", "probs")])
    dot.edge("decoder_title", "output", style="invis", weight="10")  # Linear above the frame and its title
    alt = " ".join([
        f"A diagram, read from bottom to top, titled The Transformer, base model, {sizes}.",
        *said,
        "Above the decoder's frame: Linear (output), then a dashed box Softmax, then Output probabilities (B, T, V).",
        "A dashed line joins each sublayer's input to its Add & Norm.",
        (
            "An arrow goes from the encoder's last Add & Norm up to memory (B, S, d), written above the "
            "encoder's frame, and from there an arrow goes into the decoder's second multi-head attention "
            "(cross_attn), whose input from below is labelled queries."
        ),
        (
            f"Attention boxes are {FILL_WORDS['attention']}, feed-forward boxes "
            f"{FILL_WORDS['feed-forward']}, the other boxes white."
        ),
    ])
    return dot, alt


def centred_svg(diagram) -> bytes:
    """The diagram's SVG, with each line of a box's label centred on the box.

    Graphviz places the lines of an HTML label from its own estimate of each font's widths; a
    browser's fonts differ, and the lines of a box would start at the estimate's left edge. Here
    every line is anchored at its box's centre, read from Graphviz's layout (in the SVG's units).
    """
    layout = json.loads(diagram.pipe(format="json"))
    centre = {o["name"]: o["pos"].split(",")[0] for o in layout["objects"] if "pos" in o}
    svg = diagram.pipe(format="svg", encoding="utf-8")

    def centre_node(match: re.Match) -> str:
        x = centre[html.unescape(match.group(1))]
        return re.sub(r'text-anchor="start" x="[-0-9.]+"', f'text-anchor="middle" x="{x}"', match.group(0))

    svg = re.sub(r'<g id="node\d+" class="node">\n<title>(.*?)</title>.*?</g>', centre_node, svg, flags=re.DOTALL)
    if 'text-anchor="start"' in svg:
        raise ValueError("a label outside a node is anchored at its start: centre it too")
    return svg.encode()


def figure_html(model: Transformer, alt: str, svg: bytes) -> str:
    """The figure's HTML: shown at its natural size, a point being 4/3 px (at most the column's
    width above 720 px; on a phone it keeps its size and scrolls sideways, book/_static/wide-code.css)."""
    width = round(float(re.search(rb'<svg width="([0-9.]+)pt"', svg).group(1)) * 4 / 3)  # pt -> CSS px
    layers = {len(model.encoder.layers), len(model.decoder.layers)}
    if len(layers) != 1:
        raise ValueError(f"the caption says that both stacks have as many layers; they have {layers}")
    caption = (
        "The model you will build, drawn from the library's <code>Transformer</code> with the paper's "
        "base sizes. Each box is a submodule, labelled with the paper's words and, smaller, its name "
        "in the code. One encoder layer and one decoder layer are opened into their sublayers; each "
        f"stack repeats its layer {WORDS[layers.pop()]} times. {FILL_WORDS['attention'].capitalize()}: "
        f"attention; {FILL_WORDS['feed-forward']}: feed-forward; {FRAME['encoder'][2]} frame: the "
        f"encoder; {FRAME['decoder'][2]} frame: the decoder. Dropout is not drawn, and the dashed "
        "Softmax is an operation, not a module."
    )
    return (
        '<figure id="fig-front-architecture">\n'
        f'<img src="../_static/figures/architecture.svg" width="{width}" style="height: auto"\n'
        f' alt="{html.escape(alt)}">\n'
        f"<figcaption>{caption}</figcaption>\n"
        "</figure>\n"
    )


def dates_md(translator) -> tuple[str, tuple[str, str]]:
    """A Markdown table of three of chapter 9's test dates and the shipped model's answers, and a
    sentence on the whole test set; and one (date, answer) for the install example."""
    info = translator.info
    test = make_date_pairs(info["test_size"], seed=info["test_seed"])  # chapter 9's test set
    chosen = [next(p for p in test if (p.locale, p.format) == wanted) for wanted in DATES]
    answers = translator([p.source for p in chosen])
    for pair, answer in zip(chosen, answers):
        if answer != pair.target:
            raise ValueError(f"the shipped model answers {answer!r} for {pair.source!r}, not {pair.target!r}")
    rows = "".join(f"| {p.source} | {a} |\n" for p, a in zip(chosen, answers))
    languages = [babel.Locale.parse(p.locale).get_display_name("en") for p in chosen]
    text = (
        "| written | the model's answer |\n|---|---|\n" + rows + "\n"
        f"These are {WORDS[len(chosen)]} of the model's {info['test_size']:,} test dates, in "
        f"{', '.join(languages[:-1])} and {languages[-1]}: days that appear nowhere in its training "
        f"data. It answers {info['test_correct']:,} of the {info['test_size']:,} exactly right "
        "(recorded when it was trained).\n"
    )
    return text, (chosen[1].source, answers[1])


def install_md(example: tuple[str, str]) -> str:
    url = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))["repository"]["url"].rstrip("/")
    call = f"translate({json.dumps(example[0], ensure_ascii=False)})"
    return (
        "In a clone of the book's repository:\n\n"
        "```bash\n"
        "pip install .           # the library\n"
        'pip install ".[onnx]"   # with onnx and onnxruntime, for chapter 9a\n'
        "```\n\n"
        f"Once the repository is published at <{url}>, this will install it without a clone:\n\n"
        "```bash\n"
        f'pip install "transformer_lib @ git+{url}"\n'
        "```\n\n"
        "```python\n"
        "from transformer_lib.dates import pretrained\n\n"
        "translate = pretrained()  # the date model, shipped with the library\n"
        f"{call:<24}  # {example[1]!r}\n"
        "```\n"
    )


def main() -> int:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "_build" / "demo" / "figures"
    out.mkdir(parents=True, exist_ok=True)
    model = base_model()
    diagram, alt = architecture(model)
    svg = centred_svg(diagram)
    (out / "architecture.svg").write_bytes(svg)
    (out / "architecture.md").write_text(figure_html(model, alt, svg), encoding="utf-8")
    dates, example = dates_md(pretrained("cpu"))
    (out / "dates.md").write_text(dates, encoding="utf-8")
    (out / "install.md").write_text(install_md(example), encoding="utf-8")
    names = ("architecture.svg", "architecture.md", "dates.md", "install.md")
    print(f"front page: {', '.join(names)} in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
