"""Where an end-to-end call's quantization time goes, pass by pass, and what each fusion could save at most.

The Hopper backend's call is: validate, quantize Q (kernels/quant_qk.cu), smooth and quantize K
and quantize V (one launch of kernels/quant_kv.cu), then the attention kernel. Issue 6 asks for
the entry fusion (Q and K quantized in the kernel's prologue) and the direct V preparation (V
quantized inside the pipeline) to be measured. Before building either, this measures the
ceiling of each: the call's time with that pass taken away entirely, as if the fusion cost
nothing. A fusion whose ceiling does not reach a target cannot reach it built.

The ceilings are upper bounds in three ways: a fused pass is never free in the kernel (seq 51 and
76 measured Q's cost there); K's smoothing mean and V's channel amax need every token before any
tile, so a statistics pass over K and V stays; and the K-only and V-only launches of quant_kv.cu
each pay the launch's fixed costs that the joint launch pays once. ``scripts/quant_breakdown.py``
times the passes on a GPU; :func:`ceilings` is the arithmetic (tested on the CPU).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

SCHEMA = "sagelib.quant_breakdown/1"
#: the timed calls, in the order of the printed table
PASSES = ("cudnn", "call", "kernel", "q", "k", "v", "kv")


@dataclass(frozen=True)
class PassTimes:
    """Medians in ms of one shape's calls, timed in one process."""

    cudnn: float   #: PyTorch SDPA's cuDNN backend, fp16 (the peer the issue's N=1024 target names)
    call: float    #: the cuda-sm90 backend end to end (validation, the three quantizations, the kernel)
    kernel: float  #: the attention kernel alone on inputs quantized ahead
    q: float       #: Q to INT8 (quant_qk.cu)
    k: float       #: K smoothed and to INT8 alone (quant_kv.cu, do_v off)
    v: float       #: V to e4m3, transposed and permuted alone (quant_kv.cu, do_k off)
    kv: float      #: K and V in one launch, as the call runs them

    def __post_init__(self):
        for name, value in asdict(self).items():
            if not value > 0:
                raise ValueError(f"PassTimes: {name} must be a positive time in ms, got {value!r}")


@dataclass(frozen=True)
class Ceiling:
    """The call with some quantization work taken away (ms), and its ratio to cuDNN (>1: faster)."""

    what: str
    ms: float
    vs_cudnn: float


def rest_ms(t: PassTimes) -> float:
    """``call - q - kv - kernel``: the call's host-side costs. Timed apart, the passes need not add up to the call
    exactly; a value of a few hundredths of a ms either way, negative included, is that noise."""
    return t.call - t.q - t.kv - t.kernel


def ceilings(t: PassTimes) -> list[Ceiling]:
    """The call as measured, then without Q's pass, without K's share of the K/V launch (``kv - v``), without V's
    share (``kv - k``: the direct V preparation's ceiling), without both K and V, and without all three (the
    kernel plus :func:`rest_ms`); last the kernel alone."""
    rows = [("the call as it is", t.call),
            ("Q fused into the kernel, free (entry fusion of Q)", t.call - t.q),
            ("K prepared in the pipeline, free (entry fusion of K)", t.call - (t.kv - t.v)),
            ("V prepared in the pipeline, free (direct V preparation)", t.call - (t.kv - t.k)),
            ("K and V both free", t.call - t.kv),
            ("all three free: the kernel plus host costs", t.call - t.q - t.kv),
            ("the kernel alone", t.kernel)]
    return [Ceiling(what, ms, t.cudnn / ms) for what, ms in rows]


def format_table(shape: str, t: PassTimes) -> str:
    """One shape's passes and ceilings as aligned text."""
    lines = [f"{shape}: cuDNN {t.cudnn:.3f} ms; call {t.call:.3f} = Q {t.q:.3f} + K/V {t.kv:.3f} "
             f"(K alone {t.k:.3f}, V alone {t.v:.3f}) + kernel {t.kernel:.3f} + rest {rest_ms(t):+.3f}"]
    for c in ceilings(t):
        lines.append(f"  {c.what:<58} {c.ms:8.3f} ms  {c.vs_cudnn:6.3f}x cuDNN")
    return "\n".join(lines)
