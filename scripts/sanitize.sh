#!/usr/bin/env bash
# compute-sanitizer memcheck and racecheck over every CUDA kernel on small shapes.
# Run on a GPU host from the repository root:  bash scripts/sanitize.sh [python]
# Kernels are built once outside the sanitizer (cached), then each tool runs the
# same small cases (scripts/sanitize_cases.py). Exit status: non-zero on any error.
# Failed driver API calls are not reported (--report-api-errors no): cuda-bindings probes
# entry points with cuGetProcAddress when it builds a TMA descriptor, and each probe that
# finds nothing would count as an error; a failed call our code makes raises in Python.
set -u
PY=${1:-python3}
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$PWD
export SAGELIB_KERNEL_LINEINFO=1
"$PY" scripts/sanitize_cases.py || exit 1
status=0
for tool in memcheck racecheck; do
    echo "=== compute-sanitizer --tool $tool"
    compute-sanitizer --tool "$tool" --error-exitcode 9 --report-api-errors no --target-processes all "$PY" scripts/sanitize_cases.py
    rc=$?
    echo "=== $tool exit code $rc"
    [ $rc -eq 0 ] || status=1
done
exit $status
