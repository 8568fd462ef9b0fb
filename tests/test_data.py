"""transformer_lib.data: reversal data, splits, padding and the shift (the loss: test_recipe.py)."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer_lib.data import (BOS_ID, EOS_ID, PAD_ID, batches, make_reversal_data, pad_batch, shift_right,
                                  split)


def test_shift_right_seed_example():
    tgt_in, labels = shift_right(torch.tensor([[7, 9, EOS_ID]]))
    assert tgt_in.tolist() == [[BOS_ID, 7, 9]] and labels.tolist() == [[7, 9, EOS_ID]]


def test_shift_right_padded_rows():
    tgt_in, labels = shift_right(torch.tensor([[5, 2, 0, 0], [6, 7, 8, 2]]))
    assert tgt_in.tolist() == [[1, 5, 0, 0], [1, 6, 7, 8]]
    assert torch.equal(tgt_in.ne(PAD_ID), labels.ne(PAD_ID))


@settings(max_examples=20, deadline=None)
@given(st.lists(st.lists(st.integers(3, 19), min_size=1, max_size=9), min_size=1, max_size=6))
def test_pad_batch_right_pads(seqs):
    out = pad_batch(seqs)
    assert out.shape == (len(seqs), max(map(len, seqs)))
    for row, seq in zip(out.tolist(), seqs):
        assert row[:len(seq)] == seq and all(v == PAD_ID for v in row[len(seq):])


def test_pad_batch_empty():
    with pytest.raises(ValueError, match="sequences"):
        pad_batch([])


@settings(max_examples=20, deadline=None)
@given(num=st.integers(1, 60), seed=st.integers(0, 10_000), vocab=st.integers(6, 30))
def test_data_deterministic_and_reversed(num, seed, vocab):
    pairs = make_reversal_data(num, vocab_size=vocab, seed=seed)
    assert pairs == make_reversal_data(num, vocab_size=vocab, seed=seed)
    for src, tgt in pairs:
        assert src[-1] == tgt[-1] == EOS_ID and tgt[:-1] == src[:-1][::-1]
        assert 3 <= len(src) - 1 <= 7 and all(4 <= w < vocab for w in src[:-1])


def test_seed_42_is_the_seeds_data():
    torch.manual_seed(42)
    expected = []
    for _ in range(20):
        length = int(torch.randint(3, 8, ()).item())
        words = torch.randint(4, 20, (length,)).tolist()
        expected.append((tuple(words) + (2,), tuple(words[::-1]) + (2,)))
    assert make_reversal_data(20, seed=42) == expected


def test_splits_disjoint():
    train, valid, test = split(make_reversal_data(3000, seed=3, distinct=True), [2000, 500, 500])
    parts = [{s for s, _ in p} for p in (train, valid, test)]
    assert len(parts[0]) == 2000 and not parts[0] & parts[1] and not parts[0] & parts[2] and not parts[1] & parts[2]


def test_bad_arguments():
    with pytest.raises(ValueError, match="min_len"):
        make_reversal_data(5, min_len=5, max_len=3)
    with pytest.raises(ValueError, match="vocab_size"):
        make_reversal_data(5, vocab_size=4)
    with pytest.raises(ValueError, match="distinct"):
        make_reversal_data(20, vocab_size=5, min_len=1, max_len=1, distinct=True)
    with pytest.raises(ValueError, match="sizes"):
        split(make_reversal_data(10), [8, 5])


def test_batches_cover_all_pairs():
    pairs = make_reversal_data(50, seed=1)
    got = [b for b in batches(pairs, 16, shuffle=True, generator=torch.Generator().manual_seed(0))]
    assert [len(b.src) for b in got] == [16, 16, 16, 2]
    assert sum(int(b.labels.ne(PAD_ID).sum()) for b in got) == sum(len(t) for _, t in pairs)

