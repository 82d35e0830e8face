"""The configuration object a kernel and its contract twin share."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace

from sagelib.contract import presets as P
from sagelib.contract.arguments import (
    check_flag,
    check_integer,
    check_number,
    check_sm_scale,
)


@dataclass(frozen=True)
class Exact:
    """Which stages run in exact arithmetic instead of the kernel's.

    All False is the kernel's arithmetic; all True is float64 softmax attention
    (the ground truth). Switching one stage at a time measures what it adds.
    """

    qk_int8: bool = False  #: Q and K unquantized (float64 scores) instead of INT8
    p_fp8: bool = False  #: P kept unrounded instead of e4m3
    #: V kept unquantized instead of e4m3 with a channel scale (with an fp16 inner accumulator still scaled
    #: to +-2.25 per channel, unrounded, so the fp16 partials see the magnitudes they see in a kernel)
    v_fp8: bool = False
    pv_accum: bool = False  #: exact P.V accumulation instead of FP22 / fp16 inner accumulators
    float64_state: bool = False  #: scores, softmax state and O in float64 instead of fp32
    output_rounding: bool = False  #: return float64 instead of rounding to the input dtype

    def __post_init__(self):
        for name in self.stage_names():
            check_flag(f"exact.{name}", getattr(self, name))

    @classmethod
    def everything(cls) -> "Exact":
        return cls(**{f.name: True for f in fields(cls)})

    @classmethod
    def stage_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    @classmethod
    def all_but(cls, stage: str) -> "Exact":
        """Everything exact except ``stage``."""
        if stage not in cls.stage_names():
            raise ValueError(f"stage: expected one of {cls.stage_names()}, got {stage!r}")
        return replace(cls.everything(), **{stage: False})

    @property
    def is_everything(self) -> bool:
        return all(getattr(self, name) for name in self.stage_names())


@dataclass(frozen=True)
class ContractConfig:
    """Everything that decides what a kernel computes, beyond the tensors themselves."""

    preset: str = "sm90"
    granularity: str = "per_thread"
    flavour: str | None = None  #: None = the preset's choice for the granularity
    pv_accum: str = "fp32+fp32"
    smooth_k: bool = True
    smooth_v: bool = False
    causal: bool = False
    causal_alignment: str = "bottom_right"
    sm_scale: float | None = None  #: None = head_dim ** -0.5 of the unpadded head_dim
    lse_correction: str = "fp32"
    #: The GPU the kernel runs on (one of presets.TARGETS); None = the preset's own (sm89 / sm90). It decides
    #: the default ``mma_accumulator``: e4m3 mma.sync accumulates in FP22 on Ada but in fp32 on Hopper.
    target: str | None = None
    #: What the fp8 MMA's accumulator keeps of each k32 step: "fp22" or "fp32"; None = the target's.
    mma_accumulator: str | None = None
    #: The running max is stored as (max - fp8_offset); any value cancels, 8.807 makes max(P) ~ 448.
    fp8_offset: float = P.FP8_OFFSET
    #: Keys per online-softmax step and inner-accumulator span; None = the preset's cta_k. For
    #: studies of other kernel structures (notebook 01); no kernel of ours takes it.
    cta_k: int | None = None
    #: fp32+fp16 only: keys one fp16 inner partial spans before it joins O (a whole number of k32 steps);
    #: None = the preset's block, in partials of at most FP16_PARTIAL_KEYS (64). Spans that can overflow
    #: fp16 are refused.
    fp16_partial_keys: int | None = None
    exact: Exact = field(default_factory=Exact)
    check_finite: bool = True

    def __post_init__(self):
        for name in ("smooth_k", "smooth_v", "causal", "check_finite"):  # types first: no truthiness below
            check_flag(name, getattr(self, name))
        check_sm_scale(self.sm_scale)
        check_number("fp8_offset", self.fp8_offset)
        check_integer("cta_k", self.cta_k, allow_none=True)
        check_integer("fp16_partial_keys", self.fp16_partial_keys, allow_none=True)
        _check_choice("preset", self.preset, tuple(P.PRESETS))
        _check_choice("granularity", self.granularity, P.GRANULARITIES)
        if self.flavour is not None:
            _check_choice("flavour", self.flavour, P.FLAVOURS)
        _check_choice("pv_accum", self.pv_accum, P.PV_ACCUM_MODES)
        _check_choice("causal_alignment", self.causal_alignment, P.CAUSAL_ALIGNMENTS)
        _check_choice("lse_correction", self.lse_correction, P.LSE_CORRECTIONS)
        if self.target is not None:
            _check_choice("target", self.target, P.TARGETS)
            P.mma_accumulator_for(self.preset, self.target)  # a preset that cannot run there is refused
        if self.mma_accumulator is not None:
            _check_choice("mma_accumulator", self.mma_accumulator, P.MMA_ACCUMULATORS)
        if self.smooth_v and self.pv_accum != "fp32+fp32" and self.pv_accum != "fp32":
            raise ValueError(
                f"smooth_v: only defined for the fp32 accumulation modes, got pv_accum={self.pv_accum!r}; "
                "use pv_accum='fp32+fp32' or smooth_v=False"
            )
        if self.cta_k is not None and not (self.cta_k >= 16 and self.cta_k % 16 == 0):
            raise ValueError(f"cta_k: expected None (the preset's {P.PRESETS[self.preset].cta_k}) or a positive "
                             f"multiple of 16 keys, got {self.cta_k!r}")
        if not isinstance(self.exact, Exact):
            raise ValueError(f"exact: expected a sagelib.contract.Exact, got {type(self.exact).__name__}")
        self._check_fp16_partial()

    def _check_fp16_partial(self) -> None:
        """Refuse an fp16 inner partial whose worst case (every P and V at its largest) overflows fp16."""
        keys = self.fp16_partial_keys
        if keys is not None and self.pv_accum != "fp32+fp16":
            raise ValueError(f"fp16_partial_keys: only defined for pv_accum='fp32+fp16', got pv_accum="
                             f"{self.pv_accum!r}; leave it None")
        if keys is not None and not (keys >= P.MMA_K_FP8 and keys % P.MMA_K_FP8 == 0):
            raise ValueError(f"fp16_partial_keys: expected None or a positive multiple of {P.MMA_K_FP8} keys "
                             f"(whole k32 steps of the fp8 MMA), got {keys!r}")
        if self.pv_accum != "fp32+fp16" or self.exact.pv_accum:
            return
        p_max = 2.0 ** self.fp8_offset if self.exact.p_fp8 else P.E4M3_MAX
        span = self.fp16_partial
        worst = P.fp16_partial_worst_case(span, p_max)
        if worst > P.FP16_MAX:
            p_text = f"2^{self.fp8_offset:g} (exact P)" if self.exact.p_fp8 else f"{P.E4M3_MAX:g}"
            limit = P.fp16_partial_limit(p_max)
            fix = (f"use at most {limit} keys (None picks {P.FP16_PARTIAL_KEYS})" if limit else
                   f"lower fp8_offset to at most {math.log2(P.E4M3_MAX):.3f}")
            raise ValueError(
                f"fp16_partial_keys: an fp16 inner partial of {span} keys can reach {p_text} x "
                f"{P.V_SCALE_MAX['fp32+fp16']:g} x {span} = {worst:.0f}, past fp16's {P.FP16_MAX:g}; "
                f"{fix}, or use pv_accum='fp32+fp32'")

    @property
    def geometry(self) -> P.Preset:
        preset = P.PRESETS[self.preset]
        return preset if self.cta_k is None else replace(preset, cta_k=self.cta_k)

    @property
    def fp16_partial(self) -> int:
        """Keys one fp16 inner partial spans (fp32+fp16): ``fp16_partial_keys`` or FP16_PARTIAL_KEYS,
        never more than the traversal block (a partial never crosses a block: O is rescaled between)."""
        return min(self.geometry.cta_k, self.fp16_partial_keys or P.FP16_PARTIAL_KEYS)

    @property
    def accumulator(self) -> str:
        """The fp8 MMA accumulator in force: ``mma_accumulator``, else the target's (presets table)."""
        return self.mma_accumulator or P.mma_accumulator_for(self.preset, self.target)

    @property
    def quantizer_flavour(self) -> str:
        return self.flavour or self.geometry.default_flavour(self.granularity)

    def with_options(self, **options) -> "ContractConfig":
        known = {f.name for f in fields(self)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise ValueError(
                f"options: unknown option(s) {unknown}; expected some of {sorted(known)}"
            )
        return replace(self, **options)


def _check_choice(name: str, value, choices: tuple) -> None:
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name}: expected one of {list(choices)}, got {value!r}")
