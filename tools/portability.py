"""The portability table: every notebook under three kernel sets, with 1 and with 2 threads.

For each setting it runs every notebook with nbval, strictly (stored outputs compared, with the
sanitizer), and reports per notebook whether every assert held and whether every stored output
that is not marked `nbval-ignore-output` was reproduced:

    .venv/bin/python tools/portability.py                 # all six settings, all notebooks
    .venv/bin/python tools/portability.py --settings default-1 native-2 notebooks/09_dates.ipynb

Kernel sets: `native` (what PyTorch picks on this CPU), `avx2` (ATEN_CPU_CAPABILITY=avx2 and
MKL_ENABLE_INSTRUCTIONS=AVX2: on an AVX-512 CPU, what most laptops run; on an AVX2 CPU the same
kernels as native) and `default` (ATEN_CPU_CAPABILITY=default: the non-vectorized kernels).
With 1 thread two notebooks run at a time (OMP_NUM_THREADS=1 each); with 2 threads one at a time.
Writes a Markdown table to stdout and to _build/portability.md (each setting's pytest log beside
it, _build/portability-<setting>.log), and exits non-zero if any cell is red.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KERNELS = {
    "native": {},
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"},
    "default": {"ATEN_CPU_CAPABILITY": "default"},
}
SETTINGS = [f"{k}-{t}" for k in KERNELS for t in (1, 2)]


def run_setting(setting: str, notebooks: list[str]) -> tuple[dict[str, dict[str, int]], float]:
    """Run `notebooks` strictly under one setting; per notebook: cells passed, assert or other
    errors (an exception in a cell), and output mismatches (a stored output not reproduced)."""
    kernels, threads = setting.rsplit("-", 1)
    env = {k: v for k, v in os.environ.items() if k not in ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS")}
    env.update(KERNELS[kernels], OMP_NUM_THREADS=threads, MKL_NUM_THREADS=threads,
               OMP_WAIT_POLICY="PASSIVE")
    workers = ["-n", "2", "--dist", "loadfile"] if threads == "1" else []
    with tempfile.TemporaryDirectory() as tmp:
        xml = Path(tmp) / "junit.xml"
        start = time.perf_counter()
        log = ROOT / "_build" / f"portability-{setting}.log"
        log.parent.mkdir(exist_ok=True)
        with log.open("w") as out:
            subprocess.run([sys.executable, "-m", "pytest", "--nbval", "--nbval-current-env",
                            "--nbval-sanitize-with", "notebooks/nbval_sanitize.cfg", "-q", "-p",
                            "no:cacheprovider", f"--junitxml={xml}", *workers, *notebooks],
                           cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        seconds = time.perf_counter() - start
        results = {nb: {"passed": 0, "errors": 0, "mismatches": 0} for nb in notebooks}
        for case in ET.parse(xml).getroot().iter("testcase"):
            nb = next((n for n in notebooks if Path(n).name in (case.get("file") or case.get("classname", ""))), None)
            if nb is None:
                continue
            failure = case.find("failure")
            if failure is None:
                failure = case.find("error")
            if failure is None:
                results[nb]["passed"] += 1
            elif "Cell outputs differ" in (failure.get("message", "") + (failure.text or "")):
                results[nb]["mismatches"] += 1
            else:
                results[nb]["errors"] += 1
    return results, seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--settings", nargs="+", choices=SETTINGS, default=SETTINGS)
    parser.add_argument("notebooks", nargs="*")
    args = parser.parse_args()
    notebooks = args.notebooks or sorted(str(p.relative_to(ROOT)) for p in (ROOT / "notebooks").glob("*.ipynb"))
    import torch
    lines = [f"CPU capability (native): {torch.backends.cpu.get_cpu_capability()}; "
             f"torch {torch.__version__}; {os.cpu_count()} logical cores", ""]
    table = {}
    for setting in args.settings:
        table[setting], seconds = run_setting(setting, notebooks)
        print(f"{setting}: {seconds / 60:.1f} min", file=sys.stderr, flush=True)
        lines.append(f"- {setting}: {seconds / 60:.1f} min")
    lines += ["", "| notebook | " + " | ".join(args.settings) + " |", "|---|" + "---|" * len(args.settings)]
    red = False
    for nb in notebooks:
        cells = []
        for setting in args.settings:
            r = table[setting][nb]
            ok = r["errors"] == 0 and r["mismatches"] == 0 and r["passed"] > 0
            red |= not ok
            cells.append(f"ok ({r['passed']})" if ok else
                         f"**{r['errors']} assert/error, {r['mismatches']} output** of {sum(r.values())}")
        lines.append(f"| {Path(nb).stem} | " + " | ".join(cells) + " |")
    lines += ["", "ok (N): all N cells ran, every assert held and every unmarked stored output was reproduced."]
    text = "\n".join(lines) + "\n"
    out = ROOT / "_build" / "portability.md"
    out.parent.mkdir(exist_ok=True)
    out.write_text(text)
    print(text)
    return 1 if red else 0


if __name__ == "__main__":
    sys.exit(main())
