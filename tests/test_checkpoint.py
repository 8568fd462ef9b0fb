"""transformer_lib.checkpoint: round trips and bad files (resuming: test_resume.py)."""
import pytest
import torch

from transformer_lib.checkpoint import load_checkpoint, save_checkpoint
from transformer_lib.model import Transformer, TransformerConfig

SMALL = dict(src_vocab_size=20, tgt_vocab_size=20, d_model=16, nhead=2, num_encoder_layers=1,
             num_decoder_layers=1, dim_feedforward=32, dropout=0.0, max_len=16)


def _model(seed=0):
    torch.manual_seed(seed)
    return Transformer(TransformerConfig(**SMALL)).eval()


def test_checkpoint_round_trip(tmp_path):
    model = _model()
    src = torch.tensor([[5, 6, 7, 2], [8, 9, 2, 0]])
    tgt = torch.tensor([[1, 7, 6, 5], [1, 9, 8, 0]])
    path = save_checkpoint(tmp_path / "m.pt", model, step=3)
    restored, extra = load_checkpoint(path, with_extra=True)
    with torch.no_grad():
        assert torch.equal(model(src, tgt), restored(src, tgt))
    assert extra == {"step": 3} and restored.config == model.config


def test_bad_checkpoints_raise_value_error_with_path(tmp_path):
    model = _model()
    good = save_checkpoint(tmp_path / "good.pt", model)
    corrupt = tmp_path / "corrupt.pt"
    corrupt.write_bytes(good.read_bytes()[:500])
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"not a checkpoint at all")
    mismatched = save_checkpoint(tmp_path / "mismatched.pt", model,
                                 config=TransformerConfig(**{**SMALL, "d_model": 32}))
    no_config = tmp_path / "no_config.pt"
    torch.save({"format": "transformer_lib.checkpoint/1", "state_dict": model.state_dict()}, no_config)
    plain = tmp_path / "plain.pt"
    torch.save(model.state_dict(), plain)
    for bad, what in ((corrupt, "readable"), (garbage, "readable"), (mismatched, "match"),
                      (no_config, "config"), (plain, "checkpoint")):
        with pytest.raises(ValueError, match=what) as info:
            load_checkpoint(bad)
        assert str(bad) in str(info.value)
