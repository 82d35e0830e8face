"""Phase 1: who owns which state, and what each ownership structure costs.

The research log closed its micro-optimisations with one conclusion: the next
speed needs a change in *who owns which state, and when*. This module writes the
candidate structures down as data and derives, for each and for a head dim:

* the registers a consumer thread needs for each piece of state (the O
  accumulator, the inner P.V accumulator, S and P fragments, Q, the row state);
* the shared-memory stages and the CTAs an SM can hold (occupancy);
* which closed experiments of the prior work a structure would let reopen.

The bounds on time each structure implies from the units that can limit attention
are in :mod:`sagelib.studies.unit_bounds`; the card's figures both take are
:class:`sagelib.measure.hardware.Hardware`, stated or measured by ``sagelib.measure.microbench``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from sagelib.errors import InputError
from sagelib.measure.hardware import H200, Hardware

#: P is produced from S fragment by fragment and reuses its registers; it is listed but not added.
P_ALIASES_S = "P fragment (e4m3, packed; reuses S)"
FOLD_CHUNK = 16  #: registers of O a thread holds at a time when O lives in shared memory (one 16-channel chunk)


@dataclass(frozen=True)
class Architecture:
    """One way to split attention's state among threads.

    ``rows`` query rows are owned by one MMA group of ``group_threads`` threads
    (a warp for mma.sync, a warpgroup for wgmma). ``groups`` such groups make a
    CTA, plus ``producer_threads`` that only move data.
    """

    key: str
    name: str
    mma: str  #: "mma.sync" or "wgmma"
    group_threads: int
    rows: int
    groups: int
    block_n: int  #: keys per online-softmax step (the inner accumulator's span)
    producer_threads: int = 0
    q_in_registers: bool = False
    s_buffers: int = 1  #: 2 when the next block's Q.K^T overlaps this block's softmax
    #: channels one P.V pass covers (None: all of them): P.V in head_dim / inner_channels passes, one
    #: inner accumulator of that many channels reused by each
    inner_channels: int | None = None
    kv_stages: int = 1
    #: O (fp32) kept in shared memory and folded through it in chunks of FOLD_CHUNK registers, freeing
    #: its registers for a second S buffer (proposed from the softmax-beside measurements; built, slower)
    o_in_shared_memory: bool = False
    consumer_reg_cap: int | None = None  #: setmaxnreg for consumers (None: no register split)
    producer_reg_cap: int | None = None
    overlap: str = "none"  #: how tensor and softmax work overlap: none, across_ctas, pingpong
    owners: dict = field(default_factory=dict)
    note: str = ""
    #: reopening conditions of the prior work (sagelib.records.prior_work.CONDITIONS) this structure
    #: would satisfy, each with the evidence a proposal would declare
    conditions: dict = field(default_factory=dict)

    def registers(self, head_dim: int, inner_accumulator: str = "fp32") -> dict[str, float]:
        """32-bit registers one consumer thread holds for each piece of state."""
        per_thread = self.rows / self.group_threads
        inner_words = 1.0 if inner_accumulator == "fp32" else 0.5
        regs = {
            "O accumulator (fp32)": FOLD_CHUNK if self.o_in_shared_memory else per_thread * head_dim,
            f"inner P.V accumulator ({inner_accumulator})": per_thread * min(head_dim, self.inner_channels or head_dim)
                                                             * inner_words,
            "S fragment (int32 -> fp32)": per_thread * self.block_n * self.s_buffers,
            P_ALIASES_S: per_thread * self.block_n / 4,
            "Q fragment (int8, packed)": per_thread * head_dim / 4 if self.q_in_registers else 0.0,
            "row state (m, l, q scale)": 3 * _rows_per_thread(self),
            "addresses, loop, k scales": 24.0,
        }
        return regs

    def total_registers(self, head_dim: int, inner_accumulator: str = "fp32") -> float:
        """Peak live registers: everything at once, except P, which is written over S as S is consumed."""
        regs = self.registers(head_dim, inner_accumulator)
        return sum(v for k, v in regs.items() if k != P_ALIASES_S)

    def cta_threads(self) -> int:
        return self.groups * self.group_threads + self.producer_threads

    def smem_bytes(self, head_dim: int) -> int:
        """Q tile + K and V stages (8-bit) + scales (+ O in fp32 when it lives in shared memory)."""
        q = self.groups * self.rows * head_dim
        kv = self.kv_stages * 2 * self.block_n * head_dim
        scales = 4 * (self.groups * self.rows + self.kv_stages * self.block_n)
        o = 4 * self.groups * self.rows * head_dim if self.o_in_shared_memory else 0
        return q + kv + scales + o


def _rows_per_thread(arch: Architecture) -> float:
    """Query rows whose softmax state a thread keeps (2 per m16 fragment row pair)."""
    if arch.mma == "wgmma":
        return 2.0  # a warpgroup's m64 tile: each thread holds 2 rows
    return 2.0 * arch.rows / 16  # mma.sync: rows r and r + 8 of each m16 tile


@dataclass(frozen=True)
class Fit:
    """What an architecture costs on a card for one head dim."""

    architecture: str
    head_dim: int
    inner_accumulator: str
    registers_needed: float
    register_limit: int
    spills: bool
    smem_bytes: int
    ctas_per_sm: int
    consumer_warps_per_sm: int
    registers: dict


def fit(arch: Architecture, head_dim: int, hw: Hardware = H200, inner_accumulator: str = "fp32") -> Fit:
    needed = arch.total_registers(head_dim, inner_accumulator)
    limit = arch.consumer_reg_cap or hw.max_regs_per_thread
    threads = arch.cta_threads()
    if arch.consumer_reg_cap:
        regs_per_cta = arch.groups * arch.group_threads * arch.consumer_reg_cap + arch.producer_threads * (
            arch.producer_reg_cap or 24)
    else:
        regs_per_cta = threads * min(_round_up(needed, 8), hw.max_regs_per_thread)
    by_regs = hw.regs_per_sm // max(1, regs_per_cta)
    smem = arch.smem_bytes(head_dim)
    by_smem = hw.smem_per_sm_bytes // smem if smem <= hw.max_smem_per_cta_bytes else 0
    by_threads = hw.max_threads_per_sm // threads
    ctas = max(0, min(by_regs, by_smem, by_threads))
    return Fit(arch.key, head_dim, inner_accumulator, needed, limit, needed > limit, smem, ctas,
               ctas * arch.groups * arch.group_threads // 32, arch.registers(head_dim, inner_accumulator))


def _round_up(x: float, to: int) -> int:
    return int(math.ceil(x / to) * to)


_NEW_WGMMA_KERNEL = "a new wgmma kernel, not the mma.sync kernel the closed variants patched"
_PINGPONG_CONDITIONS = {
    "implementation_changed": _NEW_WGMMA_KERNEL,
    "ownership_structure_changed": "a producer warp owns every load; each consumer warpgroup owns its O, S/P and "
                                   "row state; Q, K and V stay in shared memory as wgmma operands",
    "producer_consumer_pipeline_changed": "a TMA producer fills a multi-stage K/V ring on mbarriers that the "
                                          "consumers release",
    "staging_dataflow_changed": "TMA bulk tensor copies into swizzled stages that wgmma reads directly",
    "inside_owned_attention_pipeline": "quantization would run inside this kernel's own pipeline (to be measured)",
}

CANDIDATES = (
    Architecture(
        key="mma_sync_4warp",
        name="Monolithic 4-warp mma.sync CTA (the portable kernel)",
        mma="mma.sync", group_threads=32, rows=32, groups=4, block_n=64, q_in_registers=True, kv_stages=2,
        overlap="across_ctas",
        owners={"Q": "each warp, registers (32 rows)", "S, P": "each warp, registers", "O": "each warp, registers",
                "row state": "each warp", "K/V stages": "the whole CTA, cp.async double buffer"},
        note="Every warp does everything in turn; overlap of tensor work and softmax comes only from other "
             "warps and CTAs on the SM.",
    ),
    Architecture(
        key="wgmma_1wg",
        name="One wgmma warpgroup (the SageAttention2 sm90 shape)",
        mma="wgmma", group_threads=128, rows=64, groups=1, block_n=128, kv_stages=1, overlap="across_ctas",
        owners={"Q": "shared memory (wgmma operand)", "S": "the warpgroup, registers", "P": "registers (wgmma A)",
                "O": "the warpgroup, registers", "row state": "the warpgroup", "K/V stages": "single-buffered TMA"},
        note="The warpgroup waits for its own Q.K^T before softmax and for softmax before P.V.",
        conditions={"implementation_changed": _NEW_WGMMA_KERNEL,
                    "staging_dataflow_changed": "TMA loads into shared memory read by wgmma"},
    ),
    Architecture(
        key="fa3_pingpong",
        name="Producer warp + two consumer warpgroups in ping-pong (the FlashAttention-3 shape)",
        mma="wgmma", group_threads=128, rows=64, groups=2, block_n=128, producer_threads=128, kv_stages=2,
        consumer_reg_cap=240, producer_reg_cap=24, overlap="pingpong",
        owners={"Q": "shared memory", "S, P": "each consumer warpgroup, registers", "O": "each consumer warpgroup",
                "row state": "each consumer warpgroup", "K/V stages": "the producer (TMA, mbarriers)"},
        note="While one consumer runs softmax the other holds the tensor cores; the producer owns all loads and "
             "gives its registers away with setmaxnreg.",
        conditions=_PINGPONG_CONDITIONS,
    ),
    Architecture(
        key="fa3_pingpong_overlap",
        name="Ping-pong plus intra-warpgroup overlap (next Q.K^T during this softmax)",
        mma="wgmma", group_threads=128, rows=64, groups=2, block_n=128, producer_threads=128, kv_stages=2,
        s_buffers=2, consumer_reg_cap=240, producer_reg_cap=24, overlap="pingpong",
        owners={"Q": "shared memory", "S": "two buffers per consumer (this block, next block)",
                "P": "registers", "O": "each consumer warpgroup", "K/V stages": "the producer"},
        note="Needs a second S buffer: the register budget decides whether it fits beside two-level accumulation.",
        conditions=_PINGPONG_CONDITIONS,
    ),
    Architecture(
        key="o_in_smem_overlap",
        name="Two consumers with O in shared memory and the next Q.K^T under each softmax (built: 0.64-0.67x)",
        mma="wgmma", group_threads=128, rows=64, groups=2, block_n=128, producer_threads=128, kv_stages=2,
        s_buffers=2, o_in_shared_memory=True, consumer_reg_cap=240, producer_reg_cap=24, overlap="pingpong",
        owners={"Q": "shared memory", "S": "two buffers per consumer (this block, next block)", "P": "registers",
                "O": "shared memory (fp32), folded in 16-register chunks", "row state": "each consumer warpgroup",
                "K/V stages": "the producer (TMA, mbarriers)"},
        note="The structure the softmax-beside measurements point to: both consumers' softmaxes side by side (1,794 cycles for both "
             "beside a D128 batch stream, against ~2 x 1,250 in turns) with each consumer's next Q.K^T in flight "
             "during its own softmax. The second S buffer needs the 64 registers O holds; kept in shared memory "
             "(64 KB for two consumers), O is read, scaled, added to and written back once per key block. "
             "Built and measured: 0.64-0.67x of ping-pong at every D128 shape, bits identical; the "
             "same walk with O in registers and P.V in halves ran as slowly. Without turns each "
             "consumer's P.V round trip and fold follow its softmax on its own chain.",
        conditions=_PINGPONG_CONDITIONS,
    ),
    Architecture(
        key="three_consumer_rotation",
        name="Producer warp + three consumer warpgroups taking turns (built: cuda-sm90-k64)",
        mma="wgmma", group_threads=128, rows=64, groups=3, block_n=64, producer_threads=128, kv_stages=3,
        consumer_reg_cap=160, producer_reg_cap=24, overlap="pingpong", inner_channels=64,
        owners={"Q": "shared memory", "S, P": "each consumer warpgroup, registers (64-key steps)",
                "O": "each consumer warpgroup", "row state": "each consumer warpgroup",
                "K/V stages": "the producer (TMA, mbarriers)"},
        note="Three softmax warps per scheduler instead of the preset kernel's two: its softmax phase is bound "
             "by instruction latency at two (the microbenchmark reaches the exp2 floor only at four). "
             "At 160 registers a consumer it needs 64-key steps, and at head_dim 128 P.V in two 64-channel "
             "passes through one inner accumulator. The sm90 preset steps by 128 keys; the traversal-step study "
             "below finds a 64-key step costs no accuracy, so the kernel computes the preset with cta_k 64. "
             "Built as the kernel's second geometry (backend cuda-sm90-k64); on the H200 it trailed the "
             "two-consumer kernel except at causal head_dim 64 (the section 'The three-consumer rotation, built').",
        conditions=_PINGPONG_CONDITIONS,
    ),
    Architecture(
        key="three_consumer_preset",
        name="Producer warp + three consumer warpgroups stepping the preset's 128 keys (built: cuda-sm90 at D=64)",
        mma="wgmma", group_threads=128, rows=64, groups=3, block_n=128, producer_threads=128, kv_stages=3,
        consumer_reg_cap=160, producer_reg_cap=24, overlap="pingpong",
        owners={"Q": "shared memory", "S, P": "each consumer warpgroup, registers (128-key steps)",
                "O": "each consumer warpgroup", "row state": "each consumer warpgroup",
                "K/V stages": "the producer (TMA, mbarriers)"},
        note="Three softmax warps per scheduler with the sm90 preset's own 128-key step, so no extra steps "
             "and no change of contract configuration. It fits 160 registers at head_dim 64 only (S 64 + O 32 "
             "+ inner 32 + P 16); at 128 it would need 222. Built as the head_dim-64 geometry of cuda-sm90: "
             "1.14-1.23x the two-consumer kernel at N 4096-16384, bit for bit the same output.",
        conditions=_PINGPONG_CONDITIONS,
    ),
    Architecture(
        key="temporal_pairing",
        name="Temporal pairing of the research log (two query tiles interleaved in one CTA)",
        mma="mma.sync", group_threads=32, rows=64, groups=4, block_n=64, q_in_registers=True, kv_stages=2,
        overlap="across_ctas",
        owners={"Q": "each warp, two tiles", "S, P": "each warp, one per paired tile", "O": "each warp, both tiles"},
        note="Modelled as each warp keeping both tiles' private state live, our reading of the log's finding "
             "(about 0.10%, private state remained live): pairing in time frees nothing, so ownership, not "
             "scheduling, has to change.",
    ),
)


def candidate(key: str) -> Architecture:
    for arch in CANDIDATES:
        if arch.key == key:
            return arch
    raise InputError(f"key: expected one of {[a.key for a in CANDIDATES]}, got {key!r}")


def reopening_review(arch: Architecture, prior=None) -> list[dict]:
    """Each closed experiment against ``arch``: which of its reopening conditions the structure meets."""
    from sagelib.records import prior_work

    prior = prior or prior_work.load()
    rows = []
    for entry in prior.entries:
        needed = list(entry.rule.conditions)
        met = [c for c in needed if c in arch.conditions]
        rows.append({
            "closed experiment": entry.id, "technique": entry.technique, "rule": entry.rule.kind,
            "conditions": ", ".join(needed), "met by this structure": ", ".join(met) or "none",
            "verdict": "may be reopened (declare with evidence)" if needed and len(met) == len(needed)
            else "stays closed",
            "evidence": "; ".join(arch.conditions[c] for c in met),
        })
    return rows
