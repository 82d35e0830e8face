"""Phase 1 projections for an fp16 inner P.V accumulator in the Hopper kernel (issue 37).

The built kernel (`cuda-sm90`, two consumer warpgroups of 240 registers at head_dim 128) holds O (fp32),
the inner P.V accumulator (fp32) and one score buffer: 64 + 64 + 64 registers a thread, 192 KB of the
SM's 256 KB, so a second score buffer (the next block's Q.K^T in flight during this block's softmax)
does not fit. The contract's ``fp32+fp16`` mode halves the inner accumulator. :func:`register_budget`
says, per thread and per SM, what each candidate then needs, from the same per-state arithmetic
as :mod:`sagelib.studies.ownership` (including its estimate of row state and addresses); the contract
side of the mode (V at 2.25, fp16 partials of at most 64 keys) is ``NUMERICAL_CONTRACT.md``, stage 6.

One fp16 accumulator serves a 128-key block only if the kernel joins it into O after the block's first
64 keys (a wait between the two halves of P.V); two fp16 partials in flight at once take the registers
of one fp32 accumulator, which is the fp32 rows' budget.
"""

from __future__ import annotations

from sagelib.studies import ownership

#: The structures compared: (label, ownership candidate, inner accumulator, keys of a second score buffer).
STRUCTURES = (
    ("one score buffer, fp32 inner (the built kernel)", "fa3_pingpong", "fp32", 0),
    ("one score buffer, fp16 inner", "fa3_pingpong", "fp16", 0),
    ("two score buffers, fp32 inner", "fa3_pingpong", "fp32", 128),
    ("two score buffers, fp16 inner", "fa3_pingpong", "fp16", 128),
    ("a 64-key second buffer (next block's first half), fp16 inner", "fa3_pingpong", "fp16", 64),
)
BYTES_PER_REGISTER = 4
GROUPS = ("O", "inner", "scores", "rest")


def _group(part: str) -> str:
    if part.startswith("O "):
        return "O"
    if part.startswith("inner"):
        return "inner"
    if part.startswith("S ") or part == "second score buffer":
        return "scores"
    return "rest"


def register_budget(head_dim: int = 128) -> list[dict]:
    """One row per structure of :data:`STRUCTURES`: registers a consumer thread needs, against its cap.

    Per-SM kilobytes count every consumer thread of the CTA (one CTA per SM); the producer warpgroup's
    128 x 24 registers come on top of the consumers' cap (they are what setmaxnreg leaves).
    """
    rows = []
    for label, key, inner, second_keys in STRUCTURES:
        arch = ownership.candidate(key)
        regs = dict(arch.registers(head_dim, inner))
        regs.pop(ownership.P_ALIASES_S)  # P is written over S as S is consumed
        per_row_thread = arch.rows / arch.group_threads
        regs["second score buffer"] = per_row_thread * second_keys
        needed = sum(regs.values())
        cap = arch.consumer_reg_cap
        threads = arch.groups * arch.group_threads
        kib = {g: 0.0 for g in GROUPS}
        for part, count in regs.items():
            kib[_group(part)] += count * threads * BYTES_PER_REGISTER / 1024
        producer_kib = arch.producer_threads * arch.producer_reg_cap * BYTES_PER_REGISTER / 1024
        rows.append({
            "structure": label, "head_dim": head_dim, "inner accumulator": inner,
            "registers needed": needed, "consumer cap": cap, "fits": needed <= cap,
            "spare (+) or short (-)": cap - needed,
            **{f"{g} (KB per SM)": kib[g] for g in GROUPS},
            "producer (KB per SM)": producer_kib,
            "total (KB per SM)": sum(kib.values()) + producer_kib,
        })
    return rows

