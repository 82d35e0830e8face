"""Constants and geometry presets of the numerical contract.

Every number a kernel must agree on lives here, once. ``NUMERICAL_CONTRACT.md``
quotes them and ``tests/test_contract_doc.py`` keeps the two in agreement.
"""

from __future__ import annotations

from dataclasses import dataclass

#: log2(e) as the kernels spell it; scores live in the log2 domain.
LOG2E = 1.44269504
#: The running max is stored as (max - FP8_OFFSET) so that P = exp2(s - m) <= 2**8.807 ~ 448.
FP8_OFFSET = 8.807
#: Value given to masked and out-of-range scores: -inf, so a hidden key's P is exactly 0 whatever the
#: magnitude of the real scores (a finite sentinel such as -5e6 is overtaken by real scores below it).
MASK_SCORE = float("-inf")
#: Initial running max of every row: the lowest finite float32, below every real score, so that
#: exp2(m - m_new) stays finite (1 while a row has seen only hidden keys, 0 once it sees one).
INITIAL_ROW_MAX = -3.4028234663852886e38
#: Largest score magnitude (log2 domain) the contract and the kernels accept: beyond it a score's fp32 ulp
#: passes 64 and the kernels' one-FMA exp2 argument can overflow (validate.check_score_range).
SCORE_LIMIT = 2.0 ** 30
#: Largest finite e4m3 value; P and V saturate here.
E4M3_MAX = 448.0
#: Tokens per k-step of the fp8 mma (m16n8k32 / wgmma k32); the FP22 emulation truncates after each.
MMA_K_FP8 = 32
#: Mantissa bits the fp8 tensor-core accumulator drops from fp32 (FP22 = 1 + 8 + 13 bits).
FP22_DROPPED_MANTISSA_BITS = 10

#: What the fp8 MMA's accumulator keeps of each k32 step's running sum: "fp22" (fp32 with the low 10
#: mantissa bits truncated) or "fp32". A property of the instruction *and the GPU it runs on*.
MMA_ACCUMULATORS = ("fp22", "fp32")
#: GPU architectures a kernel family may run on (the ``target`` option).
TARGETS = ("sm89", "sm90", "sm120", "sm121")
#: The accumulator of each (preset, target) that runs, with why (NUMERICAL_CONTRACT.md quotes the sources).
MMA_ACCUMULATOR_BY_TARGET = {
    ("sm89", "sm89"): "fp22",    # e4m3 mma.sync on Ada: FP22 (SageAttention2 paper)
    ("sm89", "sm90"): "fp32",    # e4m3 mma.sync on Hopper: ptxas widens it to f16 HMMA with fp32 accumulation
    ("sm89", "sm120"): "fp32",   # consumer Blackwell: fp32 (SageAttention's sm120/sm121 dispatch)
    ("sm89", "sm121"): "fp32",
    ("sm90", "sm90"): "fp22",    # e4m3 wgmma on Hopper: FP22
}
#: The target a preset assumes when none is given: the architecture its kernel family was written for.
NATIVE_TARGET = {"sm89": "sm89", "sm90": "sm90"}


def mma_accumulator_for(preset: str, target: str | None) -> str:
    """The fp8 MMA accumulator of ``preset``'s kernels on ``target`` (None: the preset's native target)."""
    target = target or NATIVE_TARGET[preset]
    try:
        return MMA_ACCUMULATOR_BY_TARGET[(preset, target)]
    except KeyError:
        runs_on = sorted(t for p, t in MMA_ACCUMULATOR_BY_TARGET if p == preset)
        raise ValueError(f"target: the {preset} preset's kernels run on {runs_on}, got {target!r}; "
                         f"use preset='sm89' (mma.sync) on {target}") from None

#: `triton` flavour: scale = fma(amax, fl32(1/127), TRITON_SCALE_EPS), rounded once.
TRITON_SCALE_EPS = 1e-7
#: `cuda` flavour: amax starts at CUDA_AMAX_INIT (so an empty group has this amax).
CUDA_AMAX_INIT = 1e-7
#: V channels whose amax is below this are treated as having this amax (all-zero channels stay zero).
V_AMAX_FLOOR = 1e-7
INT8_MAX = 127.0

#: scale_max of the V quantizer per PV accumulation mode (2.25 keeps the fp16 partial finite).
V_SCALE_MAX = {"fp32": 448.0, "fp32+fp32": 448.0, "fp32+fp16": 2.25}
PV_ACCUM_MODES = tuple(V_SCALE_MAX)
#: Largest finite fp16 value: the ceiling of the fp32+fp16 mode's inner accumulator.
FP16_MAX = 65504.0
#: Keys one fp16 inner partial spans at most before it joins the fp32 O: the most k32 steps whose worst
#: case, every P at 448 and every V at +2.25, stays finite (448 x 2.25 x 64 = 64,512 <= 65,504; 128 keys
#: would reach 129,024). A 128-key block of the sm90 preset is two partials.
FP16_PARTIAL_KEYS = 64


def fp16_partial_worst_case(keys: int, p_max: float = E4M3_MAX) -> float:
    """The largest |sum| an fp16 partial of ``keys`` products can reach exactly: keys x max|P| x max|V|."""
    return keys * p_max * V_SCALE_MAX["fp32+fp16"]


def fp16_partial_limit(p_max: float = E4M3_MAX) -> int:
    """The most keys, in whole k32 steps, an fp16 partial can span with ``p_max`` and V at its scale."""
    steps = 0
    while fp16_partial_worst_case((steps + 1) * MMA_K_FP8, p_max) <= FP16_MAX:
        steps += 1
    return steps * MMA_K_FP8


GRANULARITIES = ("per_block", "per_warp", "per_thread")
FLAVOURS = ("triton", "cuda")
LAYOUTS = ("HND", "NHD")
CAUSAL_ALIGNMENTS = ("bottom_right", "top_left")
LSE_CORRECTIONS = ("fp32", "input_dtype")
#: Head dims the kernels are built for; others are zero-padded up to the next one.
SUPPORTED_HEAD_DIMS = (64, 128, 256)
#: Token order inside every 16 V tokens for the sm89 (mma.sync) kernels.
SM89_V_PERMUTATION = (0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15)


@dataclass(frozen=True)
class Preset:
    """Quantization geometry and key-traversal block of one kernel family."""

    name: str
    blkq: int  #: query tokens per CTA (per_block q groups)
    warpq: int  #: query tokens per warp (per_warp q groups; per_thread tiles)
    blkk: int  #: key tokens per block (per_block / per_warp k groups)
    warpk: int  #: key tokens per per_thread tile
    cta_k: int  #: key tokens per traversal block (online-softmax step, inner accumulator span)
    permute_v: bool  #: V tokens permuted in 16s (mma.sync register reuse)

    def default_flavour(self, granularity: str) -> str:
        """The quantizer flavour the preset's real kernels use for ``granularity``."""
        return "triton" if granularity == "per_thread" else "cuda"


PRESETS = {
    "sm90": Preset("sm90", blkq=64, warpq=16, blkk=128, warpk=128, cta_k=128, permute_v=False),
    "sm89": Preset("sm89", blkq=128, warpq=32, blkk=64, warpk=64, cta_k=64, permute_v=True),
}


def padded_head_dim(head_dim: int) -> int:
    """The supported width ``head_dim`` is zero-padded to."""
    for width in SUPPORTED_HEAD_DIMS:
        if head_dim <= width:
            return width
    raise ValueError(
        f"head_dim: expected at most {SUPPORTED_HEAD_DIMS[-1]}, got {head_dim}; "
        "split the heads or project to a smaller head dimension"
    )
