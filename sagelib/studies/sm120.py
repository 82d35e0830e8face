"""Phase 1 for sm_120/sm_121 (GB10, RTX 50xx): which structure the mma.sync kernel should take next.

There is no wgmma on these cards, so every candidate issues mma.sync from warps that own their rows; what differs is
who loads K and V, how the warps take turns, and how P.V accumulates. For each candidate and head dim this module
derives the register need against what the structure allows a thread, the shared memory per block against the
card's 99 KB, the CTAs and math warps an SM holds, and the time each unit needs for one call: the tensor pipe
(Q.K^T int8, P.V e4m3 at the rate its accumulator runs), the exp2 unit, device memory, and the K/V bytes the L2 must
serve at the tensor floor. Everything is arithmetic on stated figures (:data:`sagelib.measure.hardware.GB10`):
**projections**, never results. Where a candidate is built (the portable kernel, ``kernels/attn_mma.cu``), its
registers and spills are ptxas' for sm_121a; the others keep the same per-warp state (32 query rows, 64-key steps),
so the built kernel's figure is their projection.
"""

from __future__ import annotations

from dataclasses import dataclass

from sagelib.errors import InputError
from sagelib.measure.hardware import GB10, Hardware

CTA_K = 64  #: keys per step in every candidate (the sm89 preset's block)
ROWS_PER_WARP = 32  #: query rows a math warp owns (two m16 tiles), as in the built kernel
RESERVED_SMEM_PER_BLOCK = 1024  #: shared memory the system reserves per resident block (cc 8.x and later)
#: e4m3 mma.sync with an f16 accumulator against fp32 accumulation on consumer Blackwell (issue 36; SageAttention2++)
F16_ACCUMULATE_SPEEDUP = 2.0
ACCUMULATORS = ("fp32+fp32", "fp32+fp16")


@dataclass(frozen=True)
class Candidate:
    """One structure for an sm_120/sm_121 mma.sync kernel."""

    key: str
    name: str
    math_warps: int  #: warps that compute (each owns ROWS_PER_WARP query rows)
    producer_warps: int  #: warps that only load (TMA or cp.async), giving registers away with setmaxnreg
    kv_stages: int
    loads: str
    turns: str  #: how tensor work and softmax overlap
    built: str | None  #: the backend that runs it, when built
    note: str

    @property
    def rows(self) -> int:
        return self.math_warps * ROWS_PER_WARP

    @property
    def threads(self) -> int:
        return 32 * (self.math_warps + self.producer_warps)

    def smem_bytes(self, head_dim: int) -> int:
        """The Q tile and the K and V^T stages (one byte per element), plus the producer's mbarriers."""
        barriers = 16 * self.kv_stages if self.producer_warps else 0
        return self.rows * head_dim + self.kv_stages * 2 * CTA_K * head_dim + barriers


CANDIDATES = (
    Candidate("monolithic", "Monolithic 4-warp CTA (the portable kernel, built)", 4, 0, 2,
              "cp.async by all 128 threads, two stages", "across warps and CTAs (the schedulers interleave)",
              "cuda / cuda-per-warp-fp16",
              "Every warp loads, computes Q.K^T, the softmax and P.V in turn; two CTAs per SM give each scheduler "
              "two math warps, and a warp's mma.sync issue while another's softmax runs."),
    Candidate("producer", "Producer warp (TMA) feeding 4 consumer warps", 4, 1, 2,
              "TMA (cp.async.bulk.tensor) by one producer warp on mbarriers", "across warps and CTAs",
              None,
              "Takes the copies and their address arithmetic off the math warps. Without wgmma the consumers still "
              "wait for their own mma.sync results; setmaxnreg (which ptxas accepts for sm_121a) must hand the "
              "producer's registers to them to keep two CTAs per SM."),
    Candidate("pingpong", "Two consumer warp groups in ping-pong (8 math warps, 256 rows)", 8, 0, 2,
              "cp.async by all 256 threads, two stages", "explicit: one group's mma.sync beside the other's softmax "
              "(named barriers)", None,
              "The FlashAttention-3 order on mma.sync. Each K/V tile now serves 256 rows, halving what the L2 "
              "serves; the register file holds one such CTA, so an SM keeps the same 8 math warps as two "
              "monolithic CTAs."),
)


def candidate(key: str) -> Candidate:
    for c in CANDIDATES:
        if c.key == key:
            return c
    raise InputError(f"candidate: expected one of {[c.key for c in CANDIDATES]}, got {key!r}")


def _round_down(x: int, to: int) -> int:
    return x // to * to


def _round_up(x: int, to: int) -> int:
    return -(-x // to) * to


def register_cap(c: Candidate, ctas_per_sm: int, hw: Hardware = GB10, producer_registers: int = 24) -> int:
    """The registers a math thread may hold with ``ctas_per_sm`` CTAs on an SM: the launch's even share, or with a
    producer warp the pool setmaxnreg redistributes (the producer keeps ``producer_registers``; steps of 8)."""
    share = min(hw.max_regs_per_thread, _round_down(hw.regs_per_sm // (ctas_per_sm * c.threads), 8))
    if not c.producer_warps:
        return share
    pool = share * c.threads - 32 * c.producer_warps * producer_registers
    return min(255, _round_down(pool // (32 * c.math_warps), 8))


def ptxas_need(ptxas: dict, head_dim: int, pv_accum: str) -> tuple[int, int] | None:
    """(registers, spill-store bytes) of the built kernel for ``head_dim`` and ``pv_accum`` in a ptxas table
    (instance name -> {"registers", "spill_stores"}), or None when the table lacks it."""
    from sagelib.cuda.instances import attn_mma

    row = ptxas.get(attn_mma(head_dim, pv_accum == "fp32+fp16"))
    return None if row is None else (int(row["registers"]), int(row["spill_stores"]))


def fit(c: Candidate, head_dim: int, pv_accum: str, ptxas: dict, hw: Hardware = GB10) -> dict:
    """Registers, shared memory and occupancy of ``c`` at ``head_dim`` on ``hw``: the most CTAs per SM at which a
    math thread keeps the registers the built kernel needs (or, when none does, the most that fit at all)."""
    if pv_accum not in ACCUMULATORS:
        raise InputError(f"pv_accum: expected one of {list(ACCUMULATORS)}, got {pv_accum!r}")
    need = ptxas_need(ptxas, head_dim, pv_accum)
    smem = c.smem_bytes(head_dim)
    by_smem = hw.smem_per_sm_bytes // (smem + RESERVED_SMEM_PER_BLOCK) if smem <= hw.max_smem_per_cta_bytes else 0
    by_threads = hw.max_threads_per_sm // c.threads
    options = [n for n in range(1, min(by_smem, by_threads) + 1) if register_cap(c, n, hw) >= 32]
    ctas = max(options, default=0)
    if need is not None:  # prefer the most CTAs at which nothing more spills than in the built kernel
        keeping = [n for n in options if register_cap(c, n, hw) >= need[0]]
        ctas = max(keeping, default=ctas)
    cap = register_cap(c, ctas, hw) if ctas else 0
    regs, spill = need if need is not None else (None, None)
    short = max(0, (regs or 0) - cap)
    return {"candidate": c.key, "head_dim": head_dim, "pv_accum": pv_accum,
            "registers needed (ptxas sm_121a)": regs, "spill bytes (ptxas)": spill, "register cap": cap,
            "spills": "no" if spill == 0 and short == 0 else ("yes" if regs is not None else "unknown"),
            "registers short": short,
            "register cap at 8 math warps per SM": register_cap(c, max(1, 8 // c.math_warps), hw),
            "smem per block": smem, "smem limit": hw.max_smem_per_cta_bytes,
            "smem fits": smem <= hw.max_smem_per_cta_bytes, "CTAs per SM": ctas,
            "math warps per scheduler": ctas * c.math_warps / 4, "built": c.built or "no"}


def unit_times(c: Candidate, head_dim: int, pv_accum: str, batch: int, heads: int, n_tokens: int,
               hw: Hardware = GB10) -> dict:
    """Seconds each unit needs for one non-causal call of B x H x N x N, and the K/V rate the L2 must serve when
    the tensor pipe runs at its floor. The scores convert by the float-bias trick (an integer add), so the exp2
    unit carries only exp2. Projections."""
    ops = 4.0 * batch * heads * n_tokens * n_tokens * head_dim
    scores = batch * heads * n_tokens * n_tokens
    pv_rate = hw.mma_sync_pv_ops_per_clk * (F16_ACCUMULATE_SPEEDUP if pv_accum == "fp32+fp16" else 1.0)
    qk_s = ops / 2 / hw.per_second(hw.mma_sync_8bit_ops_per_clk)
    pv_s = ops / 2 / hw.per_second(pv_rate)
    exp2_s = scores / hw.per_second(hw.mufu_per_clk)
    elements = batch * heads * n_tokens * head_dim
    kernel_bytes = elements * (1 + 1 + 1 + 2)  # int8 Q and K, e4m3 V read once; fp16 O written
    quant_bytes = elements * (3 * 2 + 3)  # the quantizers read fp16 Q, K, V and write 8-bit copies
    ctas = batch * heads * -(-n_tokens // c.rows)
    kv_tile_bytes = ctas * n_tokens * head_dim * 2  # every CTA reads its head's whole K and V
    tensor_s = qk_s + pv_s
    return {"ops": ops, "tensor_s": tensor_s, "qk_s": qk_s, "pv_s": pv_s, "exp2_s": exp2_s,
            "memory_s": kernel_bytes / hw.memory_bytes_per_s, "quantize_s": quant_bytes / hw.memory_bytes_per_s,
            "l2_kv_gb_s_at_floor": kv_tile_bytes / tensor_s / 1e9}


def bound_rows(head_dims, batch: int, heads: int, n_tokens: int, ptxas: dict, hw: Hardware = GB10,
               candidates=CANDIDATES) -> list[dict]:
    """One row per candidate, head dim and accumulator: fit and projected bounds (TOPS = 4·B·H·N²·D / time)."""
    rows = []
    for c in candidates:
        for d in head_dims:
            for accum in ACCUMULATORS:
                t = unit_times(c, d, accum, batch, heads, n_tokens, hw)
                floor = max(t["tensor_s"], t["exp2_s"], t["memory_s"])
                serial = max(t["tensor_s"] + t["exp2_s"], t["memory_s"])
                f = fit(c, d, accum, ptxas, hw)
                rows.append({**f, "tensor ms": t["tensor_s"] * 1e3, "exp2 ms": t["exp2_s"] * 1e3,
                             "memory ms": t["memory_s"] * 1e3, "quantizers ms": t["quantize_s"] * 1e3,
                             "floor TOPS (projection)": t["ops"] / floor / 1e12,
                             "serial TOPS (projection)": t["ops"] / serial / 1e12,
                             "end to end at the floor TOPS (projection)": t["ops"] / (floor + t["quantize_s"]) / 1e12,
                             "L2 K/V GB/s at the floor": t["l2_kv_gb_s_at_floor"]})
    return rows
