#!/usr/bin/env bash
# The whole workbook on a GPU host, in one call: the notebook stack from a carried
# wheelhouse (.whl/, see scripts/build_wheelhouse.sh), then `sagelib run --profile gpu`,
# then the run folder packed as one archive.
# Usage, from the repository root:  bash scripts/gpu_run.sh [OUT_DIR]   (default /tmp/sagelib-gpu-run)
set -uo pipefail
OUT=${1:-${OUT:-/tmp/sagelib-gpu-run}}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
export SAGELIB_KERNEL_CACHE=${SAGELIB_KERNEL_CACHE:-$PWD/build/kernel_cache}
if [ -d .whl ] && ! python3 -c 'import papermill, nbconvert, jupytext, ipykernel' 2>/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
run_dir=/tmp/sagelib-run-gpu
rm -rf "$run_dir"
start=$SECONDS
python3 -m sagelib run --profile gpu --out "$run_dir" 2>&1 | tee "$OUT/run.log"
status=${PIPESTATUS[0]}
echo "sagelib run --profile gpu: exit $status in $((SECONDS - start)) s" | tee -a "$OUT/gpu.txt"
# the wgmma microbenchmark must really issue wgmma (GMMA in the machine code); say so when it cannot be checked
cuobjdump=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2>/dev/null | head -1)
wgmma_cubins=$(grep -l bench_wgmma "$SAGELIB_KERNEL_CACHE"/*.cubin 2>/dev/null)
if [ -z "$cuobjdump" ]; then
    echo "wgmma microbenchmark SASS: not checked (no cuobjdump on PATH or in /usr/local/cuda*/bin)" | tee -a "$OUT/gpu.txt"
elif [ -z "$wgmma_cubins" ]; then
    echo "wgmma microbenchmark SASS: not checked (no cubin with bench_wgmma in $SAGELIB_KERNEL_CACHE)" | tee -a "$OUT/gpu.txt"
fi
for f in ${cuobjdump:+$wgmma_cubins}; do
    echo "wgmma microbenchmark SASS ($(basename "$f")): $("$cuobjdump" -sass "$f" | grep -cE 'GMMA') GMMA instructions" \
        | tee -a "$OUT/gpu.txt"
done
tar czf "$OUT/run.tgz" -C "$(dirname "$run_dir")" "$(basename "$run_dir")"
exit "$status"
