"""transformer_lib.torch_layers, the reference on PyTorch's layers, and from_torch_layers."""
import ast
from pathlib import Path

import pytest
import torch
from torch import nn

import transformer_lib.model
import transformer_lib.torch_layers
from transformer_lib.embedding import sinusoidal_table
from transformer_lib.model import Transformer
from transformer_lib.torch_layers import TorchLayersTransformer

SRC = torch.tensor([[5, 9, 12, 7, 2, 0, 0, 0], [11, 4, 8, 15, 19, 6, 13, 2]])
TGT = torch.tensor([[1, 7, 12, 9, 5, 2, 0, 0, 0], [1, 13, 6, 19, 15, 8, 4, 11, 2]])


@pytest.mark.parametrize("dim, heads, depth", [(32, 4, 2), (16, 2, 1), (24, 3, 3)])
def test_from_torch_layers_gives_equal_logits(dim, heads, depth):
    torch.manual_seed(0)
    reference = TorchLayersTransformer(vocab_size=20, dim=dim, heads=heads, depth=depth).eval()
    ours = Transformer.from_torch_layers(reference).eval()
    assert ours.num_parameters() == sum(p.numel() for p in reference.parameters())
    c = ours.config
    assert (c.d_model, c.nhead, c.num_encoder_layers, c.dim_feedforward, c.max_len) == (
        dim, heads, depth, 2 * dim, 64)
    with torch.no_grad():
        error = ((ours(SRC, TGT) - reference(SRC, TGT)) * TGT.ne(0)[..., None]).abs().max()
    assert error <= 1e-5


def test_reference_is_post_norm_relu_untied_with_no_final_norm():
    reference = TorchLayersTransformer(vocab_size=20, dim=32, heads=4, depth=2)
    assert reference(SRC, TGT).shape == (2, 9, 20)
    for layer in [*reference.encoder, *reference.decoder]:
        assert not layer.norm_first and layer.linear1.out_features == 64
    assert sum(isinstance(m, nn.LayerNorm) for m in reference.modules()) == 2 * 2 + 3 * 2
    tables = [reference.source_embedding, reference.target_embedding]
    for embedding in tables:
        torch.testing.assert_close(embedding.table, sinusoidal_table(64, 32), atol=1e-5, rtol=0)
        assert torch.all(embedding.embedding.weight[0] == 0)
    weights = [e.embedding.weight for e in tables] + [reference.output.weight]
    assert len({w.data_ptr() for w in weights}) == 3


@pytest.mark.parametrize("module, other", [(transformer_lib.model, "torch_layers"),
                                           (transformer_lib.torch_layers, "model")])
def test_model_and_torch_layers_do_not_import_each_other(module, other):
    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                 for alias in node.names}
    assert not any(name and name.split(".")[-1] == other for name in imported), imported
