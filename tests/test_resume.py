"""Training survives a kill: periodic atomic checkpoints, bit-identical resume, refusals that touch nothing."""

from __future__ import annotations

import contextlib
import io
import json
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest
import torch
from training_command import ENV, MODULE, TIMEOUT, TORCHRUN_2, run

from transformer_lib.cli import main
# dropout 0.1: every step draws random masks, so a resume that lost the generators would show
RUN = ["--task", "reversal", "--steps", "30", "--global-batch-size", "24", "--lr", "3e-3", "--warmup", "5",
       "--size", "tiny", "--train-size", "300", "--valid-size", "40", "--seed", "1", "--log-every", "1",
       "--dropout", "0.1", "--checkpoint-every", "4", "--device", "cpu"]


def run_until(command: list[str], step: int, sig: int) -> subprocess.Popen:
    """Start `command`; once it has logged `step`, send `sig` to it and to every process it started."""
    process = subprocess.Popen(command, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen = []
    for line in process.stdout:
        seen.append(line)
        if line.startswith("step") and int(line.split()[1]) >= step:
            job = psutil.Process(process.pid)
            for member in job.children(recursive=True) + [job]:     # torchrun's workers too
                member.send_signal(sig)
            break
    rest, _ = process.communicate(timeout=TIMEOUT)
    process.seen = "".join(seen) + rest
    return process


def outcome(out: Path) -> tuple[list[float], dict]:
    log = json.loads((out / "log.json").read_text())
    weights = torch.load(out / "checkpoint.pt", weights_only=True)["state_dict"]
    return log["loss"], weights


def assert_same_run(a: Path, b: Path) -> None:
    (loss_a, weights_a), (loss_b, weights_b) = outcome(a), outcome(b)
    assert len(loss_a) == len(loss_b) == 30
    assert loss_a == loss_b                                       # every step's loss, bit for bit
    assert weights_a.keys() == weights_b.keys()
    assert all(torch.equal(weights_a[k], weights_b[k]) for k in weights_a)


def saved_step(out: Path) -> int:
    return torch.load(out / "checkpoint.pt", weights_only=True)["extra"]["step"]


LAUNCHERS = {"1 process": MODULE, "torchrun 2 processes": TORCHRUN_2}


@pytest.fixture(scope="module")
def whole(tmp_path_factory) -> Callable[[str], Path]:
    """The uninterrupted run of each launcher, made once for the module's tests."""
    made = {}

    def get(launcher: str) -> Path:
        if launcher not in made:
            out = tmp_path_factory.mktemp("whole")
            done = run(LAUNCHERS[launcher] + RUN + ["--out", str(out)])
            assert done.returncode == 0, done.stderr[-3000:]
            made[launcher] = out
        return made[launcher]
    return get


@pytest.mark.parametrize("launcher", list(LAUNCHERS))
def test_sigkill_then_resume_is_bit_identical(whole, tmp_path: Path, launcher: str):
    command = LAUNCHERS[launcher]
    killed = run_until(command + RUN + ["--out", str(tmp_path / "killed")], step=10, sig=signal.SIGKILL)
    assert killed.returncode != 0, killed.seen[-2000:]           # it did not finish
    assert not (tmp_path / "killed" / "log.json").exists()
    k = saved_step(tmp_path / "killed")                            # the last complete checkpoint
    assert 8 <= k < 30 and k % 4 == 0, k
    resumed = run(command + RUN + ["--out", str(tmp_path / "killed"), "--resume"])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"resumed after step {k}" in resumed.stdout
    assert_same_run(whole(launcher), tmp_path / "killed")


def test_sigterm_writes_a_checkpoint_then_resume_is_bit_identical(whole, tmp_path: Path):
    stopped = run_until(MODULE + RUN + ["--out", str(tmp_path / "stopped")], step=9, sig=signal.SIGTERM)
    assert stopped.returncode == 128 + signal.SIGTERM, stopped.seen[-2000:]
    last_logged = max(int(line.split()[1]) for line in stopped.seen.splitlines() if line.startswith("step"))
    assert saved_step(tmp_path / "stopped") == last_logged          # at most the current step is lost
    assert "continue with --resume" in stopped.seen
    resumed = run(MODULE + RUN + ["--out", str(tmp_path / "stopped"), "--resume"])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert_same_run(whole("1 process"), tmp_path / "stopped")


def in_process(argv: list[str]) -> tuple[int, str]:
    """`python -m transformer_lib.cli argv`, in this process: (exit status, stderr)."""
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            status = main(argv)
        except SystemExit as exit:                                   # argparse's refusals
            status = exit.code
    return status, err.getvalue()


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A folder with the checkpoint of a short finished run, to be copied and tampered with."""
    out = tmp_path_factory.mktemp("finished")
    status, err = in_process(RUN[:2] + ["--steps", "8"] + RUN[4:] + ["--out", str(out)])
    assert status == 0, err[-3000:]
    return out


def refused(argv: list[str], out: Path) -> str:
    """Run the command (in this process: refusals start no training); it must exit with
    status 2 and leave every file in `out` as it was. The subprocess path is the same `main`
    (the kill tests above run it)."""
    before = {p.name: p.read_bytes() for p in out.iterdir()} if out.is_dir() else None
    status, err = in_process(argv)
    assert status == 2, (status, err[-2000:])
    after = {p.name: p.read_bytes() for p in out.iterdir()} if out.is_dir() else None
    assert before == after                                           # nothing touched
    return err.strip().splitlines()[-1]


def copy_of(finished: Path, tmp_path: Path) -> Path:
    out = tmp_path / "run"
    out.mkdir()
    for p in finished.iterdir():
        (out / p.name).write_bytes(p.read_bytes())
    return out


def test_truncated_checkpoint_is_refused(finished: Path, tmp_path: Path):
    out = copy_of(finished, tmp_path)
    path = out / "checkpoint.pt"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    error = refused(RUN + ["--out", str(out), "--resume"], out)
    assert "--resume" in error and "not a readable checkpoint" in error


def test_checkpoint_of_another_config_is_refused(finished: Path, tmp_path: Path):
    out = copy_of(finished, tmp_path)
    error = refused(RUN + ["--d-model", "64", "--out", str(out), "--resume"], out)
    assert "model.d_model: checkpoint 32, this run 64" in error


def test_checkpoint_of_another_task_is_refused(finished: Path, tmp_path: Path):
    out = copy_of(finished, tmp_path)
    error = refused(RUN + ["--task", "dates", "--out", str(out), "--resume"], out)
    assert "task.name: checkpoint 'reversal', this run 'dates'" in error


def test_checkpoint_of_another_world_size_is_refused(finished: Path, tmp_path: Path):
    out = copy_of(finished, tmp_path)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    done = run(TORCHRUN_2 + RUN + ["--out", str(out), "--resume"])
    assert done.returncode != 0                                      # torchrun reports the failed ranks
    assert "world_size: checkpoint 1, this run 2" in done.stderr
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_resume_without_a_checkpoint_is_refused(tmp_path: Path):
    (tmp_path / "empty").mkdir()
    error = refused(RUN + ["--out", str(tmp_path / "empty"), "--resume"], tmp_path / "empty")
    assert "--resume" in error and "no checkpoint.pt" in error


def test_out_that_is_a_file_is_refused(tmp_path: Path):
    (tmp_path / "a_file").write_text("not a folder")
    error = refused(RUN + ["--out", str(tmp_path / "a_file")], tmp_path)
    assert "--out" in error and "is a file" in error


def test_checkpoints_are_written_atomically(tmp_path: Path, monkeypatch):
    """A failure during the write leaves the previous checkpoint intact and no temporary file."""
    from transformer_lib.model import Transformer, TransformerConfig
    from transformer_lib.checkpoint import load_checkpoint, save_checkpoint

    config = TransformerConfig(src_vocab_size=10, tgt_vocab_size=10, d_model=16, nhead=2,
                               num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=32)
    first, second = Transformer(config), Transformer(config)
    path = save_checkpoint(tmp_path / "checkpoint.pt", first, step=1)
    real_save = torch.save

    def dies_halfway(obj, file):
        file.write(b"half a checkpoint")
        raise KeyboardInterrupt                                      # like a kill during the write

    monkeypatch.setattr(torch, "save", dies_halfway)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(path, second, step=2)
    monkeypatch.setattr(torch, "save", real_save)
    restored, extra = load_checkpoint(path, with_extra=True)
    assert extra == {"step": 1}
    assert all(torch.equal(a, b) for a, b in zip(restored.parameters(), first.parameters()))
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint.pt"]
