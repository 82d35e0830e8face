#!/usr/bin/env bash
# One device call for the CUDA kernels: environment, parity tests, sanitizer, benchmark.
# Usage on a GPU host, from the repository root:
#     bash scripts/gpu_session.sh [env] [debug] [parity] [sanitize] [quant] [bench] [quick]   (default: env parity sanitize bench)
# Full logs go under $OUT (default /tmp/sagelib-gpu); a short summary prints last.
set -u
OUT=${OUT:-/tmp/sagelib-gpu}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export SAGELIB_KERNEL_CACHE=${SAGELIB_KERNEL_CACHE:-$PWD/build/kernel_cache}
steps=${*:-env parity sanitize bench}
summary="$OUT/summary.txt"
: >"$summary"
run() {  # run NAME SECONDS CMD...: log to $OUT/NAME.log, record exit code and time
    local name=$1 limit=$2 t0=$SECONDS
    shift 2
    echo "=== $name" >&2
    timeout "$limit" "$@" >"$OUT/$name.log" 2>&1
    local rc=$?
    echo "$name: exit $rc, $((SECONDS - t0)) s" | tee -a "$summary"
}
has() { [[ " $steps " == *" $1 "* ]]; }

if has env; then
    run env 120 bash -c 'nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv;
        python3 -c "import torch, cupy; from cupy_backends.cuda.libs import nvrtc; print(\"torch\", torch.__version__, \"cupy\", cupy.__version__, \"nvrtc\", nvrtc.getVersion())";
        python3 -m sagelib kernels build --arch sm_90 | tail -3;
        python3 -c "
import torch; from sagelib.cuda import ops; from sagelib import contract
q,k,v=(torch.randn(1,2,200,128,device=\"cuda\",dtype=torch.float16) for _ in range(3))
o=mma.attention(q,k,v); r=contract.attention(q,k,v,preset=\"sm89\")
print(\"smoke rel_l1\", float((o.double()-r.double()).abs().sum()/r.double().abs().sum()))"'
fi
if has debug; then
    run debug 120 python3 scripts/debug_cuda.py
fi
if has parity; then
    run parity 300 python3 -m pytest -q -s -p no:cacheprovider -m gpu tests/test_cuda_parity.py tests/test_cuda_sm90.py \
        tests/test_hopper_smoke.py
    grep -E "passed|failed" "$OUT/parity.log" | tail -1 | sed 's/^/  parity: /' | tee -a "$summary"
fi
if has sanitize; then
    run sanitize 300 bash scripts/sanitize.sh python3
    grep -E "ERROR SUMMARY|exit code" "$OUT/sanitize.log" | sed 's/^/  /' | tee -a "$summary"
fi
if has quant; then
    run quant 120 python3 scripts/bench_cuda.py --out "$OUT" --quant-only
    tail -8 "$OUT/quant.log" | tee -a "$summary"
fi
if has bench; then
    quick=""; has quick && quick="--quick"
    run bench 400 python3 scripts/bench_cuda.py --out "$OUT" $quick
fi
echo
echo "---- summary"; cat "$summary"
if has debug; then echo "---- debug"; cat "$OUT/debug.log"; fi
if has bench; then echo "---- bench (tail)"; tail -32 "$OUT/bench.log"; fi
