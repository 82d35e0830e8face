"""Phase 1: the bounds each ownership structure implies from the units that can limit attention.

For a call of B x H x N x N at a head dim, the time each unit needs: the tensor cores
(wgmma, or mma.sync with Q.K^T and P.V at their own rates), the special-function unit
(one exp2 per score, and the int32-to-float conversion unless it runs as an integer add),
and device memory. From those, the **floor** (everything hidden under the busiest unit)
and the **serial** time (tensor work and softmax one after the other).

Everything here is arithmetic on a card's per-SM rates (:class:`sagelib.measure.hardware.Hardware`),
stated or measured: the bounds are **projections** and are shown as such, never as results.
The structures and their register budgets are in :mod:`sagelib.studies.ownership`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sagelib.measure.hardware import H200, Hardware
from sagelib.studies.ownership import CANDIDATES, Architecture


@dataclass(frozen=True)
class Bounds:
    """Time one attention call needs from each unit (seconds). Projections, not results."""

    architecture: str
    head_dim: int
    ops: float
    tensor_s: float
    exp2_s: float
    convert_s: float
    memory_s: float
    overlap: str
    convert_shares_exp2_unit: bool = True

    @property
    def special_function_s(self) -> float:
        """exp2 and the int32 -> float conversion: added when they share a unit, else the slower of the two."""
        if self.convert_shares_exp2_unit:
            return self.exp2_s + self.convert_s
        return max(self.exp2_s, self.convert_s)

    @property
    def floor_s(self) -> float:
        """No structure beats this: the busiest unit, everything else hidden under it."""
        return max(self.tensor_s, self.special_function_s, self.memory_s)

    @property
    def serial_s(self) -> float:
        """Tensor work and softmax one after the other, nothing overlapped."""
        return max(self.tensor_s + self.special_function_s, self.memory_s)

    @property
    def floor_tops(self) -> float:
        return self.ops / self.floor_s / 1e12

    @property
    def serial_tops(self) -> float:
        return self.ops / self.serial_s / 1e12

    @property
    def approaches(self) -> str:
        """Which of the two the structure can get near: ping-pong overlaps by construction."""
        return {"pingpong": "floor", "across_ctas": "between (other CTAs may overlap)"}.get(self.overlap, "serial")


def bounds(arch: Architecture, head_dim: int, batch: int, heads: int, n_q: int, n_kv: int, hw: Hardware = H200,
           causal: bool = False, magic_convert: bool = False) -> Bounds:
    """Unit times for one call (ops counted 4*B*H*Nq*Nkv*D, half when causal).

    ``magic_convert``: convert int32 scores by the float-bias trick (an integer add
    on the integer pipe) instead of cvt.rn.f32.s32, taking conversion off the special unit.
    """
    fraction = 0.5 if causal else 1.0
    ops = 4.0 * batch * heads * n_q * n_kv * head_dim * fraction
    scores = batch * heads * n_q * n_kv * fraction
    if arch.mma == "wgmma":
        tensor = ops / hw.per_second(hw.wgmma_8bit_ops_per_clk)
    else:  # half the ops are Q.K^T (int8), half P.V (e4m3, or f16 on sm_90)
        tensor = (ops / 2 / hw.per_second(hw.mma_sync_8bit_ops_per_clk)
                  + ops / 2 / hw.per_second(hw.mma_sync_pv_ops_per_clk))
    exp2 = scores / hw.per_second(hw.mufu_per_clk)
    convert = 0.0 if magic_convert else scores / hw.per_second(hw.cvt_i2f_per_clk)
    # fp16 q, k, v read once and the fp16 output written once (quantization fused or not, the floor)
    bytes_moved = 2 * batch * head_dim * (2 * heads * n_q + 2 * heads * n_kv)
    return Bounds(arch.key, head_dim, ops, tensor, exp2, convert, bytes_moved / hw.memory_bytes_per_s, arch.overlap,
                  hw.convert_shares_exp2_unit)


FLOOR, SERIAL = "floor TOPS (projection)", "serial TOPS (projection)"


def bound_table(hw: Hardware, label: str, head_dims, batch: int, heads: int, n_tokens: int,
                architectures=CANDIDATES) -> list[dict]:
    """One row per structure, head dim and conversion: unit times and the two projected TOPS."""
    rows = []
    for arch in architectures:
        for d in head_dims:
            for magic in (False, True):
                b = bounds(arch, d, batch, heads, n_tokens, n_tokens, hw=hw, magic_convert=magic)
                rows.append({"rates": label, "structure": arch.key, "head_dim": d,
                             "conversion": "float-bias" if magic else "cvt",
                             "tensor ms": b.tensor_s * 1e3, "exp2 ms": b.exp2_s * 1e3,
                             "convert ms": b.convert_s * 1e3, "memory ms": b.memory_s * 1e3,
                             FLOOR: b.floor_tops, SERIAL: b.serial_tops, "approaches": b.approaches})
    return rows


def projected_bounds(rows: list[dict], structure: str) -> dict[tuple[int, str], dict]:
    """The rows of :func:`bound_table` for ``structure``, keyed by (head_dim, conversion)."""
    return {(row["head_dim"], row["conversion"]): row for row in rows if row["structure"] == structure}


@dataclass
class UnitRates:
    """The unit rates a projection takes: measured now, else the newest recording, else none."""

    rates: list  #: sagelib.measure.microbench.Rate, measured now or recorded
    hardware: Hardware  #: the card with the measured figures in place (H200 itself when there are none)
    note: str  #: "measured now", "recorded <date> on <card>" or "nothing measured or recorded"
    recording: dict | None = None
    recording_path: Path | None = None
    reason: str | None = None  #: why nothing was measured now (None when it was)

    @property
    def measured(self) -> bool:
        """Whether any stated figure was replaced by a measured one."""
        return self.hardware is not H200


def unit_rates(measure: bool) -> UnitRates:
    """Run the unit microbenchmarks when ``measure`` (needs a GPU); without a measured rate, the recorded ones."""
    from sagelib.measure import microbench

    rates = microbench.run() if measure else []
    if any(r.value for r in rates):
        return UnitRates(rates, microbench.measured_hardware([r for r in rates if r.value]), "measured now")
    reason = rates[0].reason if rates else "measure=False"
    recorded, recording, path = microbench.latest_recording()
    if recording is None:
        return UnitRates([], H200, "nothing measured or recorded", reason=reason)
    note = f"recorded {recording['created_utc'][:10]} on {recording['device']['name']}"
    return UnitRates(recorded, microbench.measured_hardware([r for r in recorded if r.value]), note, recording, path,
                     reason)
