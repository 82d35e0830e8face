"""Does a short case measure slower right after sustained load? (sm_90 GPU with cuDNN)

Usage (repository root):  python3 scripts/after_load_probe.py [--load-s 20] [--idle-s 10]
                          python3 scripts/after_load_probe.py --clock-trace [--load-s 10]

Times the B32 H32 N1024 D128 call of the cuda-sm90 backend, its kernel alone and cuDNN's call:
cold, then after --load-s seconds of back-to-back B2 H32 N16384 D128 calls (of cuda-sm90, then of
cuDNN), and again after --idle-s seconds idle. After each probe it prints nvidia-smi's SM and memory
clocks, temperatures, power and active clock-throttle reasons (0x4: the software power cap). It
measured why one full bench's N1024 case ran 0.15 ms slow (EXPERIMENT_LOG seq 103-104), and is
the check for TimingConfig.cooldown_s.

With --clock-trace it instead runs back-to-back B2 H32 N16384 D128 calls (cuda-sm90's kernel alone,
then cuDNN's call) for --load-s seconds each, from idle, while nvidia-smi samples the SM clock, power
and throttle reasons every 100 ms (sagelib.measure.power): how soon a bench-length measurement meets the
power cap, and the clock, power and time per call after the first second.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

import torch

from sagelib import backends, inputs
from sagelib.measure import power, timing
from sagelib.studies import quant_breakdown

SMALL, BIG = inputs.Shape(32, 32, 1024, 128), inputs.Shape(2, 32, 16384, 128)
SMI_FIELDS = "clocks.sm,clocks.mem,temperature.gpu,temperature.memory,power.draw,clocks_throttle_reasons.active"


def smi() -> str:
    result = subprocess.run(["nvidia-smi", f"--query-gpu={SMI_FIELDS}", "--format=csv,noheader"],
                            capture_output=True, text=True)
    return result.stdout.strip() or f"nvidia-smi failed: {result.stderr.strip()}"


def clock_trace(load_s: float, idle_s: float) -> None:
    """The SM clock and power (sagelib.measure.power, every 100 ms) while each heavy call runs back to back from idle."""
    dev = torch.device("cuda")
    sm90, cudnn = backends.get("cuda-sm90"), backends.get("sdpa-cudnn")
    big = inputs.random_qkv(BIG, torch.float16, dev, "HND", seed=1)
    loads = (("cuda-sm90 kernel only", sm90.kernel_only(*big)), ("sdpa-cudnn", lambda: cudnn.attention(*big)))
    ops = timing.attention_ops(BIG, causal=False)
    for name, fn in loads:
        summary, samples = power.sustain(fn, load_s, idle_s=idle_s)
        print(f"== {name}, after the first second: {power.HEADER}\n   {summary.row(ops)}\n"
              f"   nvidia-smi every {power.SAMPLE_MS} ms (seconds since midnight, sm MHz, W, throttle):")
        for s in samples:
            print(f"  {s.t_s:10.3f} {s.sm_mhz:6.0f} {s.power_w:7.1f} {s.reasons:#x}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--load-s", type=float, default=20.0, help="seconds of back-to-back heavy calls")
    parser.add_argument("--idle-s", type=float, default=10.0, help="seconds idle before the next probe")
    parser.add_argument("--clock-trace", action="store_true",
                        help="sample the SM clock and power while heavy calls run from idle, instead of the probe")
    args = parser.parse_args(argv)
    if args.load_s <= 0 or args.idle_s < 0:
        parser.error(f"--load-s/--idle-s: expected load > 0 and idle >= 0 seconds, got {args.load_s}, {args.idle_s}")
    reason = quant_breakdown.unavailable_reason()  # the same two backends this probe times
    if reason:
        print(f"nothing measured: {reason}", file=sys.stderr)
        return 2
    if args.clock_trace:
        clock_trace(args.load_s, args.idle_s)
        return 0
    dev = torch.device("cuda")
    sm90, cudnn = backends.get("cuda-sm90"), backends.get("sdpa-cudnn")
    small = inputs.random_qkv(SMALL, torch.float16, dev, "HND", seed=0)
    big = inputs.random_qkv(BIG, torch.float16, dev, "HND", seed=1)
    config = timing.TimingConfig(warmup=3, reps=30, min_reps=5, budget_s=2.0)
    kernel = sm90.kernel_only(*small)

    def ms(fn):
        return statistics.median(timing.time_calls([fn], dev, config))

    def probe(tag):
        call, alone, peer = ms(lambda: sm90.attention(*small)), ms(kernel), ms(lambda: cudnn.attention(*small))
        print(f"{tag:<30} call {call:.3f} ms  kernel {alone:.3f}  call - kernel {call - alone:.3f}  cuDNN {peer:.3f}")
        print(f"  nvidia-smi (sm MHz, mem MHz, gpu C, mem C, W, throttle): {smi()}", flush=True)

    probe("cold")
    for name, backend in (("cuda-sm90", sm90), ("sdpa-cudnn", cudnn)):
        start = time.time()
        while time.time() - start < args.load_s:
            backend.attention(*big)
        torch.cuda.synchronize()
        probe(f"after {args.load_s:g} s of {name} N16384")
        time.sleep(args.idle_s)
        probe(f"after {args.idle_s:g} s idle")
    return 0


if __name__ == "__main__":
    sys.exit(main())
