#!/usr/bin/env bash
# One session on a CUDA machine without a package registry, as one prepared command:
#   1. install the wheels that ../shared/gpu/fetch-wheels.sh put in .whl/ (nbval, ipykernel, ...);
#   2. `make test-gpu`: every test, and every notebook with its CUDA branches (--nbval-lax);
#   3. the benchmarks on the GPU, which write bench/results/<benchmark>-cuda.json.
# Each stage has its own time limit (seconds, from the environment), so that a slow stage leaves
# the others their turn; logs and results are copied to $OUT (the device tool brings them back).
# Usage: OUT=/some/dir tools/gpu_session.sh     (TEST_S, TRAIN_S, KV_S: the stage limits)
set -uo pipefail
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl \
	> "$OUT/install.log" 2>&1 || echo "wheel install failed (see install.log)"
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
stage() {   # name, limit in seconds, command...
	local name=$1 limit=$2; shift 2
	local start=$SECONDS
	timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
	echo "$name: exit $? after $((SECONDS - start)) s (limit $limit s)" | tee -a "$OUT/stages.log"
}
stage test-gpu "${TEST_S:-240}" make test-gpu
stage kv_cache "${KV_S:-150}" python3 bench/kv_cache.py
stage train_step "${TRAIN_S:-240}" python3 bench/train_step.py
cp bench/results/*-cuda.json "$OUT/" 2>/dev/null || echo "no results file written"
tail -n 5 "$OUT"/*.log
