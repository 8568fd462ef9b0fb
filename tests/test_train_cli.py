"""The training command of the appendix: --help, bad arguments, and 2-process DDP parity (gloo on CPU)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ENV = {**os.environ, "OMP_NUM_THREADS": "1"}
for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
    ENV.pop(var, None)
MODULE = [sys.executable, "-m", "transformer_lib.train"]
TORCHRUN_2 = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
              "-m", "transformer_lib.train"]
SHORT = ["--task", "reversal", "--steps", "30", "--global-batch-size", "24", "--lr", "3e-3", "--warmup", "5",
         "--size", "tiny", "--train-size", "500", "--valid-size", "50", "--seed", "1", "--log-every", "10",
         "--device", "cpu"]


def run(command: list[str], env: dict | None = None, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run(command, env=env or ENV, capture_output=True, text=True, timeout=timeout)


def test_help():
    done = run(MODULE + ["--help"])
    assert done.returncode == 0, done.stderr
    for option in ("--task", "--steps", "--global-batch-size", "--lr", "--warmup", "--seed", "--size",
                   "--d-model", "--layers", "--out", "--log-every", "--device", "torchrun"):
        assert option in done.stdout


@pytest.mark.parametrize("argv, world_size, option", [
    (["--task", "poetry"], 1, "--task"),
    (["--steps", "0"], 1, "--steps"),
    (["--steps", "-3"], 1, "--steps"),
    (["--global-batch-size", "15"], 2, "--global-batch-size"),
    (["--lr", "0"], 1, "--lr"),
    (["--d-model", "30"], 1, "--d-model"),
])
def test_bad_arguments_exit_with_a_message_naming_the_option(argv, world_size, option):
    env = dict(ENV)
    if world_size > 1:                  # what torchrun would set for rank 0: parse_args fails before joining a group
        env.update(RANK="0", WORLD_SIZE=str(world_size), LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT="1")
    done = run(MODULE + argv, env=env, timeout=60)
    assert done.returncode != 0
    error = done.stderr.strip().splitlines()[-1]
    assert "error" in error and option in error, done.stderr


def test_two_processes_follow_the_single_process_loss(tmp_path: Path):
    one = run(MODULE + SHORT + ["--out", str(tmp_path / "one")])
    assert one.returncode == 0, one.stderr[-3000:]
    two = run(TORCHRUN_2 + SHORT + ["--out", str(tmp_path / "two")], timeout=180)
    assert two.returncode == 0, two.stderr[-3000:]
    logs = [json.loads((tmp_path / name / "log.json").read_text()) for name in ("one", "two")]
    assert [log["world_size"] for log in logs] == [1, 2]
    a, b = (torch.tensor(log["loss"]) for log in logs)
    assert len(a) == len(b) == 30
    assert a[-1] < a[0]
    assert torch.allclose(a, b, rtol=1e-4, atol=1e-5), (a - b).abs().max()
    assert logs[0]["lr"] == logs[1]["lr"]
    # rank 0 alone logs and writes: one header line, one checkpoint and one log
    assert two.stdout.count("2 process(es)") == 1
    assert sorted(p.name for p in (tmp_path / "two").iterdir()) == ["checkpoint.pt", "log.json"]
    from transformer_lib.training import load_checkpoint
    model, extra = load_checkpoint(tmp_path / "two" / "checkpoint.pt", with_extra=True)
    assert extra["world_size"] == 2 and extra["step"] == 30 and model.config.d_model == 32
