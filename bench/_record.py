"""Where the benchmarks write what they measured: bench/results/<name>-<device type>.json.

Each file records the machine (device name, CPU threads, torch version), the date and every
figure, so that the book can show measured numbers without measuring them again.
"""
from __future__ import annotations

import argparse
import datetime
import json
import platform
from collections.abc import Callable
from pathlib import Path

import torch

RESULTS = Path(__file__).resolve().parent / "results"


def device_name(device: torch.device) -> str:
    """A GPU's marketing name, or the CPU's model name (Linux) or architecture."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    cpuinfo = Path("/proc/cpuinfo")
    models = [line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines()
              if line.startswith("model name")] if cpuinfo.exists() else []
    return models[0] if models else f"{platform.machine()} CPU"


def result_path(name: str, device: torch.device) -> Path:
    """bench/results/<name>-<device type>.json."""
    return RESULTS / f"{name}-{device.type}.json"


def write_result(name: str, device: torch.device, settings: dict, rows: list[dict]) -> Path:
    """Write one benchmark's figures (`rows`) and what they were measured with (`settings`)."""
    RESULTS.mkdir(exist_ok=True)
    path = result_path(name, device)
    record = {"benchmark": name, "device": device_name(device), "device_type": device.type,
              "threads": torch.get_num_threads(), "torch": torch.__version__,
              "date": datetime.date.today().isoformat(), "settings": settings, "rows": rows}
    path.write_text(json.dumps(record, indent=1) + "\n")
    return path


def config_parser(doc: str, configs: dict, quick: str, defaults: str) -> argparse.ArgumentParser:
    """The options every benchmark takes: --quick (what it does: `quick`), and --configs, a subset
    of `configs` (`defaults` says which run without it)."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help=quick)
    parser.add_argument("--configs", nargs="+", choices=sorted(configs), help=f"default: {defaults}")
    return parser


def result_writer(name: str, device: torch.device, settings: dict, rows: list[dict],
                  enabled: bool = True) -> Callable[[], None]:
    """A function to call after every row: it rewrites the results file with `rows` so far, so that
    a run stopped by a time limit keeps what it measured. It does nothing when not `enabled`."""
    def save() -> None:
        if enabled:
            write_result(name, device, settings, rows)
    return save
