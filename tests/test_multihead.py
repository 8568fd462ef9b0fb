"""MultiHeadAttention used on its own: the checks at its boundary."""
import pytest
import torch

from transformer_lib.multihead import MultiHeadAttention


def test_the_causal_flag_needs_as_many_queries_as_keys():
    """The flag's mask is square; with Lq != Lk, the fused and written-out paths would disagree."""
    mha = MultiHeadAttention(8, 2)
    q, kv = torch.randn(1, 2, 8), torch.randn(1, 5, 8)
    with pytest.raises(ValueError, match="is_causal=True needs no attn_mask and as many queries as keys .*Lq=2 and Lk=5"):
        mha(q, kv, kv, is_causal=True)
