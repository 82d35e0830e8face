"""Small runs of every CUDA kernel under compute-sanitizer (``sagelib profile sanitize --cases``).

Each case is small (ragged N, GQA, both head dims, causal in both alignments, both layouts) so memcheck
and racecheck finish in seconds; on an sm_90 GPU the Hopper kernel runs the same cases in both
geometries, plus a persistent walk and fully blind tiles. The kernels are built once outside the
sanitizer (cached), then each tool runs the cases; a case whose output is not finite fails too.
"""

from __future__ import annotations

from sagelib.measure import profiling, sanitizer

#: (n_q, n_kv, d, layout, h_q, h_kv, causal, alignment, granularity, pv_accum, dtype name)
CASES = [
    (17, 17, 64, "HND", 2, 1, True, "bottom_right", "per_thread", "fp32+fp32", "float16"),
    (130, 70, 128, "NHD", 2, 2, True, "bottom_right", "per_warp", "fp32+fp16", "bfloat16"),
    (70, 130, 128, "HND", 4, 2, True, "top_left", "per_thread", "fp32+fp16", "float16"),
    (200, 200, 128, "HND", 2, 2, False, "bottom_right", "per_thread", "fp32+fp32", "bfloat16"),
]
#: ... and for the Hopper kernel (both geometries) besides CASES: a persistent walk and fully blind tiles.
SM90_CASES = [
    (500, 500, 64, "HND", 40, 8, True, "bottom_right", "per_thread", "", "float16"),
    (400, 100, 64, "HND", 40, 8, True, "bottom_right", "per_thread", "", "float16"),
]
#: The tools run by default (memcheck finds bad accesses, racecheck shared-memory races).
DEFAULT_TOOLS = ("memcheck", "racecheck")
#: Failed driver API calls are not reported: cuda-bindings probes entry points with cuGetProcAddress when it builds
#: a TMA descriptor, and each probe that finds nothing would count as an error; a failed call our code makes raises.
SANITIZER_OPTIONS = ("--report-api-errors", "no", "--target-processes", "all")
#: Line numbers in the sanitizer's reports.
ENVIRONMENT = {"SAGELIB_KERNEL_LINEINFO": "1"}


def program() -> list[str]:
    """The argv of the program that runs every case (the hidden ``sagelib profile launch-cases``)."""
    import sys

    return [sys.executable, "-m", "sagelib", "profile", "launch-cases"]


def run_cases(report=print) -> int:
    """Run every case on the current GPU; how many gave a non-finite output."""
    import torch

    from sagelib.backends.kernels import mma, quantizers, sm90

    def inputs(layout, d, dtype, hq, nq, hkv, nkv):
        shape = (lambda h, n: (1, h, n, d)) if layout == "HND" else (lambda h, n: (1, n, h, d))
        return (torch.randn(shape(h, n), device="cuda", dtype=getattr(torch, dtype))
                for h, n in ((hq, nq), (hkv, nkv), (hkv, nkv)))

    bad = 0
    for nq, nkv, d, layout, hq, hkv, causal, align, gran, accum, dtype in CASES:
        q, k, v = inputs(layout, d, dtype, hq, nq, hkv, nkv)
        out, _ = mma.attention(q, k, v, causal=causal, layout=layout, granularity=gran, pv_accum=accum,
                               causal_alignment=align, return_lse=True)
        quantizers.quantize_qk(q, k, layout=layout, preset="sm90", granularity=gran)
        quantizers.quantize_v(v, layout=layout, preset="sm90", pv_accum=accum)
        torch.cuda.synchronize()
        finite = bool(torch.isfinite(out).all())
        bad += not finite
        report(f"case {nq}x{nkv} d{d} {layout} causal={causal}/{align}: {'ok' if finite else 'NON-FINITE'}")
    reason = sm90.unavailable_reason()
    if reason is not None:
        report(f"sm90 cases not run: {reason}")
        return bad
    for cta_k in (None, 64):
        for nq, nkv, d, layout, hq, hkv, causal, align, gran, _, dtype in CASES + SM90_CASES:
            q, k, v = inputs(layout, d, dtype, hq, nq, hkv, nkv)
            out, _ = sm90.attention(q, k, v, causal=causal, layout=layout, granularity=gran,
                                        causal_alignment=align, return_lse=True, cta_k=cta_k)
            torch.cuda.synchronize()
            finite = bool(torch.isfinite(out).all())
            bad += not finite
            report(f"sm90 case {nq}x{nkv} d{d} {layout} h{hq}/{hkv} causal={causal}/{align} cta_k={cta_k}: "
                   f"{'ok' if finite else 'NON-FINITE'}")
    return bad


def sanitize_all(tools=DEFAULT_TOOLS, report=print) -> tuple[bool, list]:
    """Build the kernels by running the cases once outside the sanitizer, then each tool over them: (the plain run
    passed, one SanitizerReport per tool; none when the plain run failed)."""
    import subprocess

    env = {**profiling.program_environment(), **ENVIRONMENT}
    done = subprocess.run(program(), capture_output=True, text=True, cwd=profiling.REPO_ROOT, env=env,
                          timeout=profiling.TIMEOUT_S)
    report((done.stdout + done.stderr).rstrip())
    if done.returncode != 0:
        return False, []
    return True, [sanitizer.sanitize(program(), tool, extra_args=SANITIZER_OPTIONS, environment=ENVIRONMENT)
                  for tool in tools]
