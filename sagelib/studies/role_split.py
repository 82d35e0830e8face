"""A structural step for the Hopper kernel at head_dim 128, as a model: softmax and P.V in separate
warpgroups (EXPERIMENT_LOG, experiment sm90-role-split: proposed as seq 65, built and closed as seq 66,
0.61-0.75x; the model's two assumptions, a cheap P hand-off and an unchanged softmax, both failed).

Today every consumer warpgroup owns a whole chain per 128-key block: Q.K^T, the softmax, P.V and
the fold into O. The trace at D=128 (docs/design/sm90-kernel.md, How to look inside) puts ~1090 of its ~2240 cycles in the softmax
and most of the rest in waiting for its own wgmma and folding, while the other consumer's softmax
runs. A third consumer does not fit at D=128 (``ownership``'s ``three_consumer_preset`` needs 222
registers of 160), so the lever left is to take P.V and the fold off the softmax's chain:

* **softmax warpgroups** own Q.K^T, S, the softmax and the row state, and write P (e4m3, already
  in the wgmma A layout) and alpha to a double-buffered shared tile;
* **P.V warpgroups** own O: P.V with P from shared memory, the fold, and the epilogue.

This module works out whether the registers fit (setmaxnreg per role, multiples of 8, within what
the launch gives the CTA) and projects the softmax warpgroup's period from the measured phase costs. The
projection is arithmetic, not a result. Built, the roles got 112 registers each (the P.V
warpgroups spilled); the trace put the hand-off at
~900-1700 cycles per block and the softmax at ~1600-2200.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass

from sagelib.errors import InputError

SM_REGISTERS = 65536
WARPGROUP = 128


def _cap(registers: float) -> int:
    """The setmaxnreg value that holds ``registers`` (a multiple of 8, at least 24)."""
    return max(24, -(-int(round(registers)) // 8) * 8)


@dataclass(frozen=True)
class RoleSplit:
    """One CTA: a producer warpgroup, softmax warpgroups (64 rows each) and as many P.V warpgroups."""

    head_dim: int = 128
    softmax_groups: int = 2
    block_keys: int = 128
    pv_channels: int = 64     #: channels one P.V pass covers: the inner accumulator's width (passes in turn)
    producer_regs: int = 24
    overhead_regs: int = 24   #: addresses, loop, scales: ``ownership.Architecture``'s figure
    p_slots: int = 2          #: P tiles in shared memory per softmax warpgroup

    def softmax_registers(self) -> dict[str, float]:
        """Per thread of a softmax warpgroup (P is written over S as the exp pass consumes it)."""
        return {"S fragment (int32)": self.block_keys / 2, "row state (m, l, q scale, alpha)": 8.0,
                "addresses, loop, k scales": float(self.overhead_regs)}

    def pv_registers(self) -> dict[str, float]:
        """Per thread of a P.V warpgroup: the outer O and one inner accumulator pass."""
        return {"O accumulator (fp32)": self.head_dim / 2, "inner P.V accumulator (fp32)": self.pv_channels / 2,
                "alpha, l, m of its rows": 6.0, "addresses, loop": float(self.overhead_regs)}

    @property
    def softmax_cap(self) -> int:
        return _cap(sum(self.softmax_registers().values()))

    @property
    def pv_cap(self) -> int:
        return _cap(sum(self.pv_registers().values()))

    @property
    def cta_registers(self) -> int:
        return WARPGROUP * (self.producer_regs + self.softmax_groups * (self.softmax_cap + self.pv_cap))

    @property
    def launch_pool(self) -> int:
        """What setmaxnreg can share out: the registers the launch gives the CTA (threads x the per-thread
        count a one-CTA-per-SM launch gets, a multiple of 8), not the SM's 65,536 (the built kernel
        hung when its claims exceeded it)."""
        threads = WARPGROUP * (1 + 2 * self.softmax_groups)
        return threads * (SM_REGISTERS // threads // 8 * 8)

    @property
    def fits(self) -> bool:
        return self.cta_registers <= self.launch_pool and max(self.softmax_cap, self.pv_cap) <= 256

    @property
    def p_smem_bytes(self) -> int:
        """The P tiles (e4m3, 64 rows x block_keys per softmax warpgroup and slot) plus alpha (fp32 per row)."""
        return self.softmax_groups * self.p_slots * 64 * (self.block_keys + 4)

    def table(self) -> list[dict]:
        rows = [{"role": "producer (TMA)", "warpgroups": 1, "state": "-", "registers needed": "-",
                 "setmaxnreg": self.producer_regs}]
        for role, regs, cap in (("softmax (S, P, row state)", self.softmax_registers(), self.softmax_cap),
                                ("P.V (O, inner, fold, epilogue)", self.pv_registers(), self.pv_cap)):
            rows.append({"role": role, "warpgroups": self.softmax_groups,
                         "state": ", ".join(f"{k} {v:g}" for k, v in regs.items()),
                         "registers needed": sum(regs.values()), "setmaxnreg": cap})
        return rows


@dataclass(frozen=True)
class PhaseCosts:
    """Cycles per 128-key block of one consumer warpgroup, from the kernel's clock64 trace."""

    softmax: float          #: the softmax phase (max and exp passes)
    turn: float
    issue: float            #: issuing P.V of j and Q.K^T of j+1
    wait: float             #: waiting for both
    fold: float
    tensor_per_gemm: float  #: tensor cycles of one 64 x 128 x D product at the wgmma rate

    @property
    def period(self) -> float:
        return self.softmax + self.turn + self.issue + self.wait + self.fold


def projected_period(costs: PhaseCosts, p_store: float = 60.0, softmax_slowdown: float = 1.0) -> dict:
    """The softmax warpgroup's period per block when P.V and the fold move to their own warpgroup.

    Its chain keeps the softmax (times ``softmax_slowdown``, for the P.V warpgroups' instructions on
    the same schedulers), storing P and alpha (``p_store``), and Q.K^T of the next block: its tensor
    time plus the fixed issue-and-wait latency today's batch shows beyond its two products. Two
    softmax warpgroups alternate, so the SM finishes two blocks per period unless the tensor cores,
    busy 4 x tensor_per_gemm per two blocks, take longer.
    """
    latency = costs.issue + costs.wait - 2 * costs.tensor_per_gemm
    chain = costs.softmax * softmax_slowdown + p_store + costs.tensor_per_gemm + latency
    per_two_blocks = max(chain, 4 * costs.tensor_per_gemm)
    return {"today (cycles per block and warpgroup)": costs.period, "Q.K^T latency beyond its product": latency,
            "softmax warpgroup chain (projection)": chain, "speedup (projection)": costs.period / per_two_blocks}


_BLOCK = re.compile(r"block\s+\d+ start\s+\d+\s+softmax\s+(\d+) \| turn\s+(\d+) \| issue\s+(\d+) \| wait\s+(\d+)"
                    r" \| fold\s+(\d+)")


def traced_costs(text: str, section: str, tensor_per_gemm: float) -> PhaseCosts:
    """The median phase costs of one section of printed traces (``sagelib profile sm90 --trace``
    output, sections headed ``== <section>``, as kept in the sweep recordings' ``traces`` field)."""
    parts = re.split(r"^== ", text, flags=re.M)
    body = next((p for p in parts if p.split("\n", 1)[0].strip() == section.strip()), None)
    if body is None:
        titles = [p.split("\n", 1)[0].strip() for p in parts if p.strip()]
        raise InputError(f"section: expected one of {titles}, got {section!r}")
    blocks = [tuple(map(int, m.groups())) for m in _BLOCK.finditer(body)]
    if not blocks:
        raise InputError(f"section {section!r}: no traced blocks in it")
    medians = [statistics.median(column) for column in zip(*blocks)]
    return PhaseCosts(*medians, tensor_per_gemm=tensor_per_gemm)
