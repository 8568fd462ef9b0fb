"""The book's diagrams come from the modules: a box that is not a submodule, or a submodule
left out, is an error (transformer_lib.figures, chapter 0a)."""
import pytest
import torch

from transformer_lib.decoder import DecoderLayer
from transformer_lib.feedforward import FeedForward
from transformer_lib.figures import box_label, module_diagram, plot_mask

EDGES = [("x", "linear1"), ("linear1", "activation"), ("activation", "dropout"),
         ("dropout", "linear2"), ("linear2", "y")]


def test_a_diagram_names_each_submodule_and_its_class():
    ffn = FeedForward(d_model=8, dim_feedforward=16)
    source = module_diagram(ffn, EDGES, title="ffn", tensors={"x": "x", "y": "y"}).source
    for name, child in ffn.named_children():
        assert f"{name}\n{type(child).__name__}" in source


def test_an_unknown_box_or_a_missing_child_raises():
    ffn = FeedForward(d_model=8, dim_feedforward=16)
    with pytest.raises(ValueError, match=r"\['gate'\]"):
        module_diagram(ffn, EDGES + [("y", "gate")], title="t", tensors={"x": "x", "y": "y"})
    with pytest.raises(ValueError, match="leaves out"):
        module_diagram(ffn, [("x", "linear1"), ("linear1", "y")], title="t",
                       tensors={"x": "x", "y": "y"})
    with pytest.raises(ValueError, match="groups"):
        module_diagram(ffn, EDGES, title="t", tensors={"x": "x", "y": "y"}, groups={"no": []})


def test_nested_paths_and_module_lists():
    layer = DecoderLayer(d_model=8, nhead=2, dim_feedforward=16)
    paths = [n for n, _ in layer.named_modules() if n]
    assert all(box_label(p, layer.get_submodule(p)) for p in paths)
    stack = torch.nn.ModuleList([FeedForward(8, 16) for _ in range(3)])
    assert box_label("layers", stack) == "layers\n3 × FeedForward"


def test_plot_mask_rejects_a_non_boolean_mask():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots()
    with pytest.raises(ValueError, match="bool"):
        plot_mask(ax, torch.ones(3, 3), "t")
    plot_mask(ax, torch.ones(3, 3, dtype=torch.bool).triu(1), "t")
    plt.close(fig)
