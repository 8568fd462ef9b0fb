"""The ONNX export of chapter 9a: onnxruntime decodes exactly like `generation.greedy`; bad input; the demo files.

Skipped where onnxruntime is not installed (it is the optional extra `onnx`: `pip install ".[onnx]"` in a clone).
"""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

pytest.importorskip("onnxruntime")

from transformer_lib.dates import make_date_pairs, pretrained  # noqa: E402
from transformer_lib.data import collate  # noqa: E402
from transformer_lib.deploy import DEMO_MAX_NEW_TOKENS, OnnxGreedy, export_demo, export_onnx  # noqa: E402
from transformer_lib.generation import cross_attention_weights, greedy  # noqa: E402
from transformer_lib.model import Transformer, TransformerConfig  # noqa: E402


def tiny(norm_first: bool = False) -> Transformer:
    torch.manual_seed(0)
    config = TransformerConfig(src_vocab_size=11, tgt_vocab_size=9, d_model=16, nhead=2, num_encoder_layers=1, num_decoder_layers=2,
                               dim_feedforward=32, dropout=0.0, max_len=16, norm_first=norm_first)
    return Transformer(config).eval()


def sources(rows: int = 6, length: int = 7, vocab: int = 11) -> torch.Tensor:
    g = torch.Generator().manual_seed(1)
    src = torch.randint(3, vocab, (rows, length), generator=g)
    for i in range(rows):                                    # lengths 2..length, EOS last, then PAD
        n = 2 + i % (length - 1)
        src[i, n - 1], src[i, n:] = 2, 0
    return src


@pytest.mark.parametrize("norm_first", [False, True])
def test_onnxruntime_decodes_like_greedy(tmp_path, norm_first):
    model = tiny(norm_first)
    paths = export_onnx(model, tmp_path / "graphs")
    assert sorted(p.name for p in paths.values()) == ["config.json", "decoder_step.onnx", "encoder.onnx"]
    src = sources()
    tokens, cross = OnnxGreedy(tmp_path / "graphs")(src, 10)
    expected = greedy(model, src, 10)
    assert tokens.dtype == np.int64 and np.array_equal(tokens, expected.numpy())
    assert cross.shape == (6, 2, tokens.shape[1] - 1, 7)                    # (B, L, n, S)
    maps = cross_attention_weights(model, src, expected[:, :-1])
    # a finished row's steps after its EOS read cached PAD as tokens and are discarded: compare
    # each row up to the step that wrote its EOS
    written = (expected[:, 1:] == 2).int().cumsum(1).sub((expected[:, 1:] == 2).int()).eq(0)  # (B, n)
    for layer, w in enumerate(maps):
        np.testing.assert_allclose(cross[:, layer][written.numpy()], w[written].numpy(), atol=1e-5)
    assert np.all(cross[src.eq(0).numpy()[:, None, None, :].repeat(2, 1).repeat(cross.shape[2], 2)] == 0)
    again, _ = OnnxGreedy(tmp_path / "graphs")(src[:1, :2].numpy(), 3)      # another batch, length, budget
    assert np.array_equal(again, greedy(model, src[:1, :2], 3).numpy())


def test_export_leaves_the_model_alone(tmp_path):
    model = tiny().train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    export_onnx(model, tmp_path)
    assert model.training and all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_the_shipped_model_in_onnxruntime(tmp_path):
    translator = pretrained("cpu")
    paths = export_demo(translator, tmp_path)
    vocab = json.loads(paths["vocab"].read_text(encoding="utf-8"))
    assert vocab == {"source": translator.src_vocab.itos, "target": list("<pad> <bos> <eos>".split()) +
                     list("-0123456789"), "max_new_tokens": DEMO_MAX_NEW_TOKENS}
    texts = [p.source for p in make_date_pairs(40, seed=1)]
    src = collate([(translator.src_vocab.encode(t), (2,)) for t in texts]).src
    tokens, _ = OnnxGreedy(tmp_path)(src, DEMO_MAX_NEW_TOKENS)
    assert np.array_equal(tokens, greedy(translator.model, src, DEMO_MAX_NEW_TOKENS).numpy())
    answers = ["".join(vocab["target"][i] for i in row[1:] if i > 2) for row in tokens]
    assert answers == translator(texts)


def test_bad_input_names_the_argument(tmp_path):
    model = tiny()
    with pytest.raises(TypeError, match="model must be a transformer_lib Transformer"):
        export_onnx(torch.nn.Linear(2, 2), tmp_path)
    with pytest.raises(ValueError, match="opset must be >= 17"):
        export_onnx(model, tmp_path, opset=13)
    (tmp_path / "a_file").write_text("")
    with pytest.raises(ValueError, match="folder .* is a file"):
        export_onnx(model, tmp_path / "a_file")
    with pytest.raises(FileNotFoundError, match="write them with export_onnx"):
        OnnxGreedy(tmp_path / "empty")
    with pytest.raises(TypeError, match="translator must be a dates.DateTranslator"):
        export_demo(model, tmp_path)
    export_onnx(model, tmp_path / "graphs")
    run = OnnxGreedy(tmp_path / "graphs")
    with pytest.raises(TypeError, match="threads"):
        OnnxGreedy(tmp_path / "graphs", threads=1.5)
    with pytest.raises(ValueError, match="src must be integer ids of shape"):
        run(np.zeros(4, np.int64), 3)
    with pytest.raises(ValueError, match="src must be integer ids of shape"):
        run(np.zeros((2, 3), np.float32), 3)
    with pytest.raises(ValueError, match=r"src must hold ids in \[0, 11\), got 2..99"):
        run(np.array([[99, 2]]), 3)
    with pytest.raises(ValueError, match="more than max_len=16"):
        run(np.full((1, 17), 5), 3)
    with pytest.raises(ValueError, match="max_new_tokens must be >= 1"):
        run(sources(), 0)
