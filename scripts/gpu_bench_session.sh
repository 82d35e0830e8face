#!/usr/bin/env bash
# One GPU-host session of the benchmark harness, for a device call that must count:
#   - installs the notebook stack from the wheelhouse (.whl/, built by scripts/build_wheelhouse.sh),
#   - lists the profiling tools and backends,
#   - runs notebooks 04_performance and 05_profile with the `gpu` profile (the peers' sweep on the
#     issue's shapes plus N=32768, the ceilings, and ncu --clock-control none on one call of each
#     backend), timing each,
#   - falls back to `sagelib bench` / `sagelib profile ncu` directly if a notebook fails,
#   - times the reference backend on a small shape, runs the GPU-marked harness tests,
#   - leaves everything under $OUT (at most 8 files; the run folder as one archive).
# Usage on the device, from the repository root:  bash scripts/gpu_bench_session.sh
set -u
OUT=${OUT:-/tmp/sagelib-out}
mkdir -p "$OUT"
log="$OUT/session.log"
export PYTHONUNBUFFERED=1
step() { echo "=== $1 ($(date -u +%T), ${SECONDS}s)" | tee -a "$log"; }

step "wheelhouse"
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >>"$log" 2>&1 \
        && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
python3 -c 'import papermill, nbconvert, jupytext, ipykernel; print("notebook stack imports: papermill", papermill.__version__)' 2>&1 | tee -a "$log"

step "tools and backends"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv 2>&1 | tee -a "$log"
python3 -m sagelib profile tools 2>&1 | tee -a "$log"
python3 -m sagelib bench --list 2>&1 | tee -a "$log"

step "notebooks 04 and 05, gpu profile"
timeout 250 python3 -m sagelib run --profile gpu --only 04_performance --only 05_profile --out /tmp/gpurun --no-progress 2>&1 | tee -a "$log"
tar czf "$OUT/gpurun.tgz" -C /tmp gpurun 2>>"$log"

shapes=32:32:1024:128,8:32:4096:128,2:32:16384:128,32:32:1024:64,8:32:4096:64,2:32:16384:64
if [ ! -s /tmp/gpurun/04_performance/bench.json ]; then
    step "fallback: sagelib bench on the peers"
    timeout 150 python3 -m sagelib bench --backends sdpa-flash,sdpa-cudnn,sage --shapes "$shapes" --causal no,yes \
        --dtype fp16 --no-progress --out "$OUT/bench-peers.json" 2>&1 | tee -a "$log"
fi
if ! ls /tmp/gpurun/05_profile/ncu/*.csv >/dev/null 2>&1; then
    step "fallback: ncu smoke on one SDPA call"
    timeout 120 python3 -m sagelib profile ncu --backend sdpa-cudnn --shape 1:32:4096:128 --out "$OUT/ncu-sdpa-cudnn.json" 2>&1 | tee -a "$log"
fi

step "reference backend on the GPU (small: it is the contract, not a kernel)"
timeout 60 python3 -m sagelib bench --backends reference,sdpa-flash --shapes 1:8:1024:128 --causal no --ceilings skip \
    --reps 5 --warmup 1 --no-progress --out "$OUT/bench-reference.json" 2>&1 | tee -a "$log"

step "GPU-marked harness tests"
timeout 90 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_bench.py tests/test_profiling.py 2>&1 | tail -15 | tee -a "$log"
step "done"
