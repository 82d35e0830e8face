"""How evenly a persistent grid shares attention tiles: a model of the Hopper kernel's scheduler.

The sm_90a kernel (kernels/include/attn_sm90/scheduler.cuh) runs one CTA per SM over
(batch, head, query block) tiles: 128-key blocks and 128-row tiles in the preset's geometry at
head_dim 128 (192 rows at 64: three consumers), 192 rows and 64 keys in the three-consumer
cta_k-64 one (``Problem.cta_q`` and ``block_keys``). A tile's
cost is modelled as its number of visible key blocks (all of them without a mask; those up to
its last row with a causal mask and square attention) plus a fixed per-tile overhead in the
same unit. Two ways of handing out tiles:

* ``static``: CTA c takes tiles c, c + grid, c + 2 grid, ... of the numbering;
* ``greedy``: each tile, in numbering order, goes to the CTA that becomes free first
  (a global counter, as the kernel does now).

The balance is the mean CTA load over the largest: 1.0 means no CTA waits at the end.
This is a projection, not a measurement; the measured effect is in the experiment log
(record sm90-tile-scheduler) and data/results/*-sm90-sweep-tile-scheduler.json.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from sagelib.errors import InputError

CTA_Q = 128
BLOCK_KEYS = 128
#: scheduler.cuh's SM90_L2_WINDOW_BYTES: causal tiles are ordered heaviest first across the
#: (batch, head) pairs whose K and V fit in this many bytes.
L2_WINDOW_BYTES = 24 << 20


@dataclass(frozen=True)
class Problem:
    batch: int
    heads: int
    seq: int
    head_dim: int
    causal: bool
    cta_q: int = CTA_Q  #: query rows per tile (sm90.Geometry.cta_q)
    block_keys: int = BLOCK_KEYS  #: keys per block (sm90.Geometry.block_keys)

    @property
    def q_blocks(self) -> int:
        return -(-self.seq // self.cta_q)

    @property
    def key_blocks(self) -> int:
        return -(-self.seq // self.block_keys)

    @property
    def pairs(self) -> int:
        return self.batch * self.heads

    def window(self) -> int:
        """(batch, head) pairs per causal window, as scheduler.cuh computes it."""
        return max(1, min(self.pairs, L2_WINDOW_BYTES // (2 * self.seq * self.head_dim + 1)))


def tile_order(p: Problem, windowed: bool = True) -> list[tuple[int, int]]:
    """(pair, q_block) of every tile in the kernel's numbering (head-major; causal heaviest first)."""
    order = []
    window = p.window() if windowed else 1
    for tile in range(p.q_blocks * p.pairs):
        if p.causal:
            span = window * p.q_blocks
            w, in_window = divmod(tile, span)
            here = min(window, p.pairs - w * window)
            order.append((w * window + in_window % here, p.q_blocks - 1 - in_window // here))
        else:
            order.append(divmod(tile, p.q_blocks))
    return order


def tile_cost(p: Problem, q_block: int, overhead: float) -> float:
    """Key blocks the tile visits plus ``overhead`` (in blocks); causal: up to its last row's key."""
    if not p.causal:
        return p.key_blocks + overhead
    return min(-(-(q_block + 1) * p.cta_q // p.block_keys), p.key_blocks) + overhead


def balance(p: Problem, grid: int, schedule: str = "greedy", windowed: bool = True, overhead: float = 0.5) -> float:
    """Mean CTA load / largest CTA load for ``schedule`` ('static' or 'greedy') over ``grid`` CTAs."""
    costs = [tile_cost(p, q_block, overhead) for _, q_block in tile_order(p, windowed)]
    grid = min(grid, len(costs))
    if schedule == "static":
        loads = [sum(costs[c::grid]) for c in range(grid)]
    elif schedule == "greedy":
        heap = [(0.0, c) for c in range(grid)]
        for cost in costs:
            load, c = heapq.heappop(heap)
            heapq.heappush(heap, (load + cost, c))
        loads = [load for load, _ in heap]
    else:
        raise InputError(f"schedule: expected 'static' or 'greedy', got {schedule!r}")
    return sum(loads) / len(loads) / max(loads)


def balance_table(problems: list[Problem], grid: int = 132, overhead: float = 0.5) -> list[dict]:
    """One row per problem: the former scheduler, the counter in head-major order, the counter with the window."""
    rows = []
    for p in problems:
        geometry = "" if (p.cta_q, p.block_keys) == (CTA_Q, BLOCK_KEYS) else f" ({p.cta_q} rows, {p.block_keys} keys)"
        rows.append({"shape": f"B{p.batch} H{p.heads} N{p.seq} D{p.head_dim}{' causal' if p.causal else ''}{geometry}",
                     "static head-major": balance(p, grid, "static", windowed=False, overhead=overhead),
                     "counter, head-major": balance(p, grid, "greedy", windowed=False, overhead=overhead),
                     "counter, L2 window (kernel)": balance(p, grid, "greedy", windowed=True, overhead=overhead)})
    return rows


def causal_problem(batch: int, heads: int, seq: int, head_dim: int, geometry) -> Problem:
    """A causal problem tiled as ``geometry`` (a sagelib.backends.kernels.sm90.Geometry: its ``cta_q`` and ``block_keys``).

    Causal only: non-causal tiles are all the same length, so every schedule ties.
    """
    return Problem(batch, heads, seq, head_dim, True, cta_q=geometry.cta_q, block_keys=geometry.block_keys)
