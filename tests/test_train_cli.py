"""The training command of the appendix: the script entry, --help, bad arguments, and 2-process DDP parity (gloo on CPU)."""

import json
import sys
from pathlib import Path

import pytest
import torch
from training_command import ENV, MODULE, TORCHRUN_2, run

ROOT = Path(__file__).resolve().parents[1]
SHORT = ["--task", "reversal", "--steps", "30", "--global-batch-size", "24", "--lr", "3e-3", "--warmup", "5",
         "--size", "tiny", "--train-size", "500", "--valid-size", "50", "--seed", "1", "--log-every", "10",
         "--device", "cpu"]


def test_the_command_is_declared_as_a_script(monkeypatch):
    tomllib = pytest.importorskip("tomllib")                       # Python 3.11+
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"tt-train": "transformer_lib.cli:main"}
    from transformer_lib import cli

    assert callable(cli.main)
    monkeypatch.setattr(sys, "argv", ["/somewhere/bin/tt-train"])  # how the installed script starts
    assert cli.make_parser().prog == "tt-train"


def test_importing_the_module_runs_nothing():
    done = run([sys.executable, "-c", "import transformer_lib.cli, transformer_lib.distributed, transformer_lib.job"])
    assert done.returncode == 0 and done.stdout == "" and done.stderr == "", done.stderr


def test_help():
    done = run(MODULE + ["--help"])
    assert done.returncode == 0, done.stderr
    for option in ("--task", "--steps", "--global-batch-size", "--lr", "--warmup", "--seed", "--size",
                   "--d-model", "--layers", "--out", "--log-every", "--device", "--precision", "--compile", "--resume",
                   "--checkpoint-every", "torchrun"):
        assert option in done.stdout


@pytest.mark.parametrize("argv, world_size, option", [
    (["--task", "poetry"], 1, "--task"),
    (["--steps", "0"], 1, "--steps"),
    (["--steps", "-3"], 1, "--steps"),
    (["--global-batch-size", "15"], 2, "--global-batch-size"),
    (["--lr", "0"], 1, "--lr"),
    (["--d-model", "30"], 1, "--d-model"),
    (["--dropout", "1"], 1, "--dropout"),
    (["--label-smoothing", "1.5"], 1, "--label-smoothing"),
    (["--checkpoint-every", "5"], 1, "--checkpoint-every"),
    (["--device", "tpu9"], 1, "--device"),
    (["--schedule", "linear", "--steps", "50", "--warmup", "60"], 1, "--warmup"),
])
def test_bad_arguments_exit_with_a_message_naming_the_option(argv, world_size, option, capsys):
    from transformer_lib.cli import parse_args

    with pytest.raises(SystemExit) as exit_info:      # in-process: a subprocess each costs a torch import
        parse_args(argv, world_size=world_size)
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"error: argument {option}" in error, error


def test_a_bad_argument_of_the_command_exits_with_a_message_naming_it():
    env = {**ENV, "RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": "1"}       # what torchrun sets for rank 0: the check fails before joining a group
    done = run(MODULE + ["--global-batch-size", "15"], env=env)
    assert done.returncode == 2
    error = done.stderr.strip().splitlines()[-1]
    assert error.startswith("python -m transformer_lib.cli: error: argument --global-batch-size"), error


def test_two_processes_follow_the_single_process_loss(tmp_path: Path):
    """In float64 two processes take the single process's steps, to rounding (float32 adds the
    same sums in another order, and later steps amplify it: chapter 10b compares both)."""
    logs = {}
    for name, command in (("one", MODULE), ("two", TORCHRUN_2)):
        out = tmp_path / name
        done = run(command + SHORT + ["--precision", "fp64", "--out", str(out)])
        assert done.returncode == 0, done.stderr[-3000:]
        logs[name] = json.loads((out / "log.json").read_text())
        if name == "two":      # rank 0 alone logs and writes: one header line, one checkpoint and one log
            assert done.stdout.count("2 process(es)") == 1
            assert sorted(p.name for p in out.iterdir()) == ["checkpoint.pt", "log.json"]
    assert [logs[n]["world_size"] for n in ("one", "two")] == [1, 2]
    assert logs["one"]["lr"] == logs["two"]["lr"]
    for quantity in ("loss", "grad_norm"):
        x, y = (torch.tensor(logs[n][quantity], dtype=torch.float64) for n in ("one", "two"))
        assert len(x) == len(y) == 30 and (quantity != "loss" or x[-1] < x[0])
        assert torch.allclose(x, y, rtol=1e-10, atol=0), (x - y).abs().max()
    from transformer_lib.checkpoint import load_checkpoint
    model, extra = load_checkpoint(tmp_path / "two" / "checkpoint.pt", with_extra=True)
    assert extra["world_size"] == 2 and extra["step"] == 30 and model.config.d_model == 32
