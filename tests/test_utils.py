"""transformer_lib.utils: device choice, seeding and argument checks."""
import pytest
import torch

from transformer_lib.utils import (check_positive_int, check_probability, check_shape, get_device,
                                   seed_everything)


def test_device_env_override(monkeypatch):
    monkeypatch.setenv("TT_DEVICE", "cpu")
    assert get_device() == torch.device("cpu")


def test_device_default_follows_cuda(monkeypatch):
    monkeypatch.delenv("TT_DEVICE", raising=False)
    assert get_device().type == ("cuda" if torch.cuda.is_available() else "cpu")


def test_device_bad_name(monkeypatch):
    monkeypatch.setenv("TT_DEVICE", "tpu-ish")
    with pytest.raises(ValueError, match="tpu-ish"):
        get_device()


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_device_cuda_requested_without_cuda():
    with pytest.raises(ValueError, match="CUDA is not available"):
        get_device("cuda")


def test_seed_everything_repeats():
    seed_everything(123)
    a = torch.rand(4)
    g = seed_everything(123)
    assert torch.equal(a, torch.rand(4))
    assert isinstance(g, torch.Generator)


@pytest.mark.parametrize("value, exc", [(0, ValueError), (-3, ValueError), (2.0, TypeError), (True, TypeError)])
def test_check_positive_int_rejects(value, exc):
    with pytest.raises(exc, match="nhead"):
        check_positive_int(value, "nhead")


@pytest.mark.parametrize("value, exc", [(1.0, ValueError), (-0.1, ValueError), ("0.1", TypeError)])
def test_check_probability_rejects(value, exc):
    with pytest.raises(exc, match="dropout"):
        check_probability(value, "dropout")


def test_check_shape_message_names_both_shapes():
    with pytest.raises(ValueError, match=r"x must have shape \[2, \*\], got \[2, 3, 4\]"):
        check_shape(torch.zeros(2, 3, 4), (2, None), "x")
    assert check_shape(torch.zeros(2, 3), (2, None), "x").shape == (2, 3)
