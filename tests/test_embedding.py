"""transformer_lib.embedding: shapes, properties and bad input."""
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer_lib.embedding import (LearnedPositionalEmbedding, RotaryEmbedding, SinusoidalPositionalEncoding,
                                       TokenEmbedding, TransformerEmbedding, sinusoidal_table)


def ids(batch=2, length=5, vocab=20, pad_tail=0):
    x = torch.randint(1, vocab, (batch, length))
    if pad_tail:
        x[:, -pad_tail:] = 0
    return x


# --- shapes and formulas ---------------------------------------------------------------------

@settings(max_examples=25, deadline=None)
@given(batch=st.integers(1, 4), length=st.integers(1, 12), half_d=st.integers(1, 16),
       positional=st.sampled_from(["sinusoidal", "learned"]))
def test_transformer_embedding_shape(batch, length, half_d, positional):
    d = 2 * half_d
    embed = TransformerEmbedding(30, d, max_len=12, dropout=0.0, positional=positional)
    assert embed(ids(batch, length, 30)).shape == (batch, length, d)


def test_eval_output_is_the_formula():
    torch.manual_seed(0)
    embed = TransformerEmbedding(20, 8, max_len=16).eval()
    x = ids(3, 6)
    expected = math.sqrt(8) * embed.token.weight[x] + sinusoidal_table(16, 8)[:6]
    torch.testing.assert_close(embed(x), expected)


def test_sinusoidal_table_entries():
    table = sinusoidal_table(50, 10)
    pos, i = 37, 3
    assert table[pos, 2 * i].item() == pytest.approx(math.sin(pos / 10000 ** (2 * i / 10)), abs=1e-6)
    assert table[pos, 2 * i + 1].item() == pytest.approx(math.cos(pos / 10000 ** (2 * i / 10)), abs=1e-6)


def test_padding_row_zero_and_no_gradient():
    emb = TokenEmbedding(10, 4, padding_idx=0)
    x = torch.tensor([[3, 0, 0]])
    out = emb(x)
    assert torch.equal(out[0, 1:], torch.zeros(2, 4))
    out.sum().backward()
    assert torch.equal(emb.weight.grad[0], torch.zeros(4))


def test_start_offsets_positions():
    pe = SinusoidalPositionalEncoding(8, max_len=20)
    x = torch.zeros(1, 3, 8)
    torch.testing.assert_close(pe(x, start=5)[0], sinusoidal_table(20, 8)[5:8])
    learned = LearnedPositionalEmbedding(20, 8)
    torch.testing.assert_close(learned(x, start=5)[0], learned.embedding.weight[5:8])


@settings(max_examples=25, deadline=None)
@given(m=st.integers(0, 60), n=st.integers(0, 60), shift=st.integers(0, 60))
def test_rope_scores_depend_only_on_offset(m, n, shift):
    rope = RotaryEmbedding(16, max_len=128)
    g = torch.Generator().manual_seed(m * 1000 + n)
    q, k = torch.randn(1, 1, 16, generator=g), torch.randn(1, 1, 16, generator=g)
    a = (rope(q, start=m) * rope(k, start=n)).sum()
    b = (rope(q, start=m + shift) * rope(k, start=n + shift)).sum()
    assert abs(a.item() - b.item()) < 1e-4


def test_rope_position_zero_is_identity():
    rope = RotaryEmbedding(8)
    x = torch.randn(2, 3, 1, 8)
    torch.testing.assert_close(rope(x), x)


def test_dropout_only_in_train_mode():
    embed = TransformerEmbedding(20, 8, max_len=16, dropout=0.5)
    x = ids()
    embed.eval()
    assert torch.equal(embed(x), embed(x))
    embed.train()
    torch.manual_seed(0)
    a = embed(x)
    torch.manual_seed(1)
    assert not torch.equal(a, embed(x))


def test_positions_are_not_saved_in_state_dict():
    embed = TransformerEmbedding(20, 8, max_len=16)
    assert set(embed.state_dict()) == {"token.embedding.weight"}


# --- bad input: one test each ----------------------------------------------------------------

def test_odd_d_model_sinusoidal():
    with pytest.raises(ValueError, match="d_model must be even.*got 7"):
        SinusoidalPositionalEncoding(7)
    with pytest.raises(ValueError, match="d_model must be even"):
        TransformerEmbedding(20, 7)


def test_odd_head_dim_rotary():
    with pytest.raises(ValueError, match="head_dim must be even.*got 5"):
        RotaryEmbedding(5)


def test_sequence_longer_than_max_len():
    embed = TransformerEmbedding(20, 8, max_len=4)
    with pytest.raises(ValueError, match="5.*exceeds max_len=4"):
        embed(ids(1, 5))
    with pytest.raises(ValueError, match="exceeds max_len=4"):
        LearnedPositionalEmbedding(4, 8)(torch.zeros(1, 5, 8))
    with pytest.raises(ValueError, match="exceeds max_len=4"):
        RotaryEmbedding(8, max_len=4)(torch.zeros(1, 5, 8))


def test_float_token_ids():
    with pytest.raises(TypeError, match="tokens must be an integer tensor.*float32"):
        TransformerEmbedding(20, 8)(ids().float())


@pytest.mark.parametrize("bad_id", [20, 25, -1])
def test_ids_out_of_vocabulary(bad_id):
    x = ids()
    x[0, 1] = bad_id
    with pytest.raises(ValueError, match=rf"tokens contains id {bad_id}, outside \[0, vocab_size=20\)"):
        TransformerEmbedding(20, 8)(x)


def test_one_dimensional_tokens():
    with pytest.raises(ValueError, match=r"tokens must have shape \[B, S\].*got shape \[5\]"):
        TransformerEmbedding(20, 8)(ids()[0])


@pytest.mark.parametrize("padding_idx", [20, -1, 100])
def test_padding_idx_outside_vocabulary(padding_idx):
    with pytest.raises(ValueError, match=rf"padding_idx must be an id in \[0, vocab_size=20\).*got {padding_idx}"):
        TokenEmbedding(20, 8, padding_idx=padding_idx)


def test_unknown_positional_kind_and_bad_dropout():
    with pytest.raises(ValueError, match="positional must be"):
        TransformerEmbedding(20, 8, positional="rotary")
    with pytest.raises(ValueError, match="dropout"):
        TransformerEmbedding(20, 8, dropout=1.5)


def test_wrong_width_to_positional_modules():
    with pytest.raises(ValueError, match=r"x must have shape \[B, S, d_model=8\]"):
        SinusoidalPositionalEncoding(8)(torch.zeros(1, 3, 6))
