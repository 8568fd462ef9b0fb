"""transformer_lib.memory: activation bytes against autograd's saved tensors, the KV cache's bytes, bad input."""
import pytest
import torch

from transformer_lib.cost import set_fused
from transformer_lib.memory import (activation_bytes, attention_matrix_bytes, kv_cache_bytes, peak_memory,
                                    saved_tensor_bytes)
from transformer_lib.model import Transformer, TransformerConfig


def batch(config, B, S, T, seed):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, config.src_vocab_size, (B, S), generator=g)
    tgt = torch.randint(0, config.tgt_vocab_size, (B, T), generator=g)
    tgt[:, 0] = config.bos_id
    src[0, -1] = tgt[1, -1] = config.pad_id       # PAD in both: the masks activation_bytes counts
    return src, tgt


def test_activations_match_autograd():
    config = TransformerConfig(src_vocab_size=30, tgt_vocab_size=30, d_model=16, nhead=2, num_encoder_layers=2,
                               num_decoder_layers=2, dim_feedforward=24, dropout=0.0, max_len=16)
    model = Transformer(config)
    set_fused(model, False)
    src, tgt = batch(config, 2, 7, 5, 0)
    saved = saved_tensor_bytes(lambda: model(src, tgt), exclude=model.parameters())
    assert saved == sum(activation_bytes(config, 2, 7, 5).values())


def test_cache_grows_linearly():
    config = TransformerConfig(src_vocab_size=30, tgt_vocab_size=30, d_model=16, nhead=2, dropout=0.0)
    grow = kv_cache_bytes(config, 2, 8, 11)["self"] - kv_cache_bytes(config, 2, 8, 10)["self"]
    assert grow == 2 * config.num_decoder_layers * 2 * config.d_model * 4
    assert attention_matrix_bytes(2, 8, 10, 12, 2) == 2 * 8 * 10 * 12 * 2


@pytest.mark.parametrize("call, message", [
    (lambda c: activation_bytes(c, 1, 4, 4, bytes_per_element=0), "bytes_per_element"),
    (lambda c: kv_cache_bytes(c, 1, 4, 0), "generated"),
    (lambda c: attention_matrix_bytes(1, 0, 4, 4), "nhead"),
    (lambda c: peak_memory(lambda: None, "meta"), "device"),
])
def test_bad_values_raise_value_error_naming_the_argument(call, message):
    config = TransformerConfig(src_vocab_size=30, tgt_vocab_size=30, d_model=16, nhead=2)
    with pytest.raises(ValueError, match=message):
        call(config)


def test_bad_types():
    with pytest.raises(TypeError, match="config"):
        activation_bytes({"d_model": 512}, 1, 4, 4)
    with pytest.raises(TypeError, match="config"):
        kv_cache_bytes({"d_model": 512}, 1, 4, 4)
