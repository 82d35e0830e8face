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
each pay the launch's fixed costs that the joint launch pays once. :func:`measure` times the passes
on an sm_90 GPU (``sagelib study quant-breakdown`` prints and records them, notebook 04 charts them);
:func:`ceilings` is the arithmetic (tested on the CPU). The passes are timed as GPU time (CUDA-graph
replay), the calls as calls: what a fusion saves is the pass's GPU time.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path

from sagelib.contract.quantize import n_q_groups
from sagelib.errors import InputError
from sagelib.records import documents

SCHEMA = documents.QUANT_BREAKDOWN.id
STEM = "quant-breakdown"  #: recordings are data/results/<date>-<gpu>-quant-breakdown.json
#: the timed calls, in the order of the printed table
PASSES = ("cudnn", "call", "kernel", "q", "k", "v", "kv")
#: the passes timed as GPU time (CUDA-graph replay). At head_dim 64 a pass's host time per call is
#: ~85% of its GPU time (Q 0.047 against 0.055 ms), so timed as calls it read up to 2x slow in some
#: processes (EXPERIMENT_LOG seq 115 and 117).
GPU_TIMED = ("q", "k", "v", "kv")


@dataclass(frozen=True)
class PassTimes:
    """Medians in ms of one shape's calls, timed in one process. The calls (cudnn, call, kernel) are timed as
    Python calls; the passes (q, k, v, kv) as GPU time, each captured once in a CUDA graph and replayed
    (:data:`GPU_TIMED`, :func:`sagelib.measure.bench.replay_of`): a short pass timed as a call measured its host time in
    some processes instead."""

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
                raise InputError(f"PassTimes: {name} must be a positive time in ms, got {value!r}")


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


def target_ms(shape: str, cudnn_ms: float) -> float:
    """Issue 6's end-to-end target for the cuda-sm90 call at ``shape`` (a label such as 'B2 H32 N16384 D128') as a
    time, from :data:`sagelib.measure.targets.TARGETS`: its TOPS goal over the non-causal operations where it names one,
    else cuDNN's time (the N=1024 target, and shapes no target names)."""
    from sagelib import inputs
    from sagelib.measure import targets, timing

    for t in targets.TARGETS:
        spec = inputs.parse_shape(t.shape)
        if (t.backend, t.mode, t.causal, t.kind, spec.label) == ("cuda-sm90", "end_to_end", False, "tops", shape):
            return timing.attention_ops(spec, False) / (t.goal * 1e9)
    return cudnn_ms


def unavailable_reason() -> str | None:
    """None where :func:`measure` can run (the cuda-sm90 backend: an sm_90 GPU with CuPy and NVRTC; and
    cuDNN for the peer); otherwise why not."""
    from sagelib import backends

    return (backends.get("cuda-sm90", require_available=False).unavailable_reason()
            or backends.get("sdpa-cudnn", require_available=False).unavailable_reason())


def pass_calls(q, k, v) -> dict:
    """One closure per call of :data:`PASSES` on one fp16 HND input set (sm90 preset, per_thread)."""
    from sagelib import backends
    from sagelib.backends.kernels import operands, quantizers

    gran, preset = "per_thread", "sm90"
    flavour = operands.resolve_flavour(None, preset, gran)
    width = operands.kernel_head_dim(q.shape[-1])
    qh, kh, vh = (operands.kernel_operand(x, width) for x in (q, k, v))
    n_groups = n_q_groups(q.shape[2], preset, gran)

    def kv(do_k, do_v):
        return lambda: quantizers.quantize_kv(kh, vh, preset=preset, granularity=gran, flavour=flavour,
                                        pv_accum="fp32+fp32", layout="HND", do_k=do_k, do_v=do_v, permute_v=True)

    cudnn, sm90 = backends.get("sdpa-cudnn"), backends.get("cuda-sm90")
    return {"cudnn": lambda: cudnn.attention(q, k, v), "call": lambda: sm90.attention(q, k, v),
            "kernel": sm90.kernel_only(q, k, v),
            "q": lambda: quantizers.quantize_int8(qh, operands.q_geometry(preset, gran), n_groups, flavour, "HND"),
            "k": kv(True, False), "v": kv(False, True), "kv": kv(True, True)}


def measure(shape, rounds: int = 5, seed: int = 0) -> dict:
    """Time every call of :data:`PASSES` at ``shape`` (a :class:`sagelib.measure.bench.Shape`) on this sm_90 GPU, rounds in
    rotated order in this process; the row a recording holds: shape, median times, round medians, ceilings."""
    import torch

    from sagelib import inputs
    from sagelib.measure import timing

    if rounds < 1:
        raise InputError(f"rounds: expected a whole number of 1 or more, got {rounds!r}")
    dev = torch.device("cuda")
    calls = pass_calls(*inputs.random_qkv(shape, torch.float16, dev, "HND", seed))
    for name in GPU_TIMED:
        calls[name] = timing.replay_of(calls[name])
    config = timing.TimingConfig(warmup=3, reps=20, min_reps=5, budget_s=1.0)
    round_ms = {name: [] for name in PASSES}
    for r in range(rounds):
        for i in range(len(PASSES)):
            name = PASSES[(i + r) % len(PASSES)]
            round_ms[name].append(statistics.median(timing.time_calls([calls[name]], dev, config)))
    times = PassTimes(**{name: statistics.median(ms) for name, ms in round_ms.items()})
    return {"shape": shape.label, "times_ms": asdict(times), "round_ms": round_ms,
            "ceilings": [asdict(c) for c in ceilings(times)]}


def latest_recording(directory: str | Path | None = None) -> tuple[list[dict], Path | None]:
    """The rows of the newest ``*-quant-breakdown.json`` in ``directory`` (default data/results) and its path, or
    ([], None); a file of another schema is refused."""
    from sagelib.records.documents import RESULTS_DIR, newest_file

    path = newest_file(STEM, ".json", RESULTS_DIR if directory is None else directory)
    if path is None:
        return [], None
    document = json.loads(path.read_text())
    if document.get("schema") != SCHEMA:
        raise InputError(f"{path}: expected schema {SCHEMA!r}, got {document.get('schema')!r}")
    return document["rows"], path


def document(rows: list[dict], command: str) -> dict:
    """The recorded document (:data:`SCHEMA`) of :func:`measure`'s rows on this GPU, as :func:`latest_recording`
    reads it back."""
    import torch

    from sagelib.measure import bench
    from sagelib.records.datafile import utc_stamp

    return {"schema": SCHEMA, "created_utc": utc_stamp(), "device": bench.device_summary(torch.device("cuda")),
            "command": command, "rows": rows}
