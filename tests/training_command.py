"""How the tests start the training command: one process or torchrun, one thread each, no torchrun variables."""

from __future__ import annotations

import os
import subprocess
import sys

ENV = {**os.environ, "OMP_NUM_THREADS": "1"}
for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
    ENV.pop(var, None)
MODULE = [sys.executable, "-m", "transformer_lib.cli"]
TIMEOUT = 600   # seconds: a guard against a hang, not a speed limit (make test may run them at idle priority)
TORCHRUN_2 = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
              "-m", "transformer_lib.cli"]


def run(command: list[str], env: dict | None = None, timeout: int = TIMEOUT) -> subprocess.CompletedProcess:
    """Run `command` to the end, capturing its output."""
    return subprocess.run(command, env=env or ENV, capture_output=True, text=True, timeout=timeout)
