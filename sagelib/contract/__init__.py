"""The executable numerical contract (SageAttention2's numerics, explained in NUMERICAL_CONTRACT.md).

Pure torch, CPU or GPU. The single source of truth for what an 8-bit attention
kernel must compute, stage by stage:

1. K smoothing                     :mod:`~sagelib.contract.smoothing`
2. INT8 quantization of Q and K    :mod:`~sagelib.contract.quantize`
3-4. QK traversal, online softmax  :mod:`~sagelib.contract.pipeline`
5. P and V to e4m3                 :mod:`~sagelib.contract.fp8`
6. one- or two-level P.V accumulation  :mod:`~sagelib.contract.pipeline`
7. final conversion and lse        :mod:`~sagelib.contract.pipeline`

:func:`reference_attention` is the float64 ground truth; :func:`error_budget`
measures what each stage adds.
"""

from sagelib.contract.budget import STAGE_LABELS, StageError, error_budget
from sagelib.contract.config import ContractConfig, Exact
from sagelib.contract.fp8 import (
    QuantizedV,
    quantize_v,
    round_e4m3,
    token_permutation,
    truncate_fp22,
)
from sagelib.contract.pipeline import attention, run
from sagelib.contract.presets import PRESETS, Preset, padded_head_dim
from sagelib.contract.quantize import (
    QuantizedQK,
    k_group_index,
    n_k_groups,
    n_q_groups,
    q_group_index,
    quantize_qk,
)
from sagelib.contract.reference import reference_attention

__all__ = [
    "attention", "run", "quantize_qk", "quantize_v", "reference_attention", "error_budget",
    "ContractConfig", "Exact", "Preset", "PRESETS", "QuantizedQK", "QuantizedV", "StageError", "STAGE_LABELS",
    "q_group_index", "k_group_index", "n_q_groups", "n_k_groups", "round_e4m3", "truncate_fp22",
    "token_permutation", "padded_head_dim",
]
