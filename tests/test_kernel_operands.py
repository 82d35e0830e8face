"""The kernels' scale-group geometry (sagelib.backends.kernels.operands) against the contract's group index.

The contract (sagelib.contract.quantize) is the one source of the geometry; the quantizer kernels take a
GroupGeometry as four shift/mask arguments and evaluate the same formula, so the Python parameterisation is
checked here, row by row, against the contract rather than copied from it. No GPU needed.
"""

import pytest
import torch

from sagelib.backends.kernels import operands
from sagelib.contract.quantize import (
    k_group_index,
    n_k_groups,
    n_q_groups,
    q_group_index,
)


def _groups(geometry: operands.GroupGeometry, n: int) -> torch.Tensor:
    rows = torch.arange(n)
    return (rows // geometry.tile) * geometry.per_tile + (rows % geometry.mod) // geometry.div


@pytest.mark.parametrize("preset", ["sm90", "sm89"])
@pytest.mark.parametrize("granularity", ["per_thread", "per_warp"])
@pytest.mark.parametrize("n", [1, 63, 200, 1000])
def test_group_geometry_is_the_contracts_group_index(preset, granularity, n):
    q, k = operands.q_geometry(preset, granularity), operands.k_geometry(preset, granularity)
    assert torch.equal(_groups(q, n), q_group_index(n, preset, granularity))
    assert torch.equal(_groups(k, n), k_group_index(n, preset, granularity))
    assert int(_groups(q, n).max()) < n_q_groups(n, preset, granularity)
    assert int(_groups(k, n).max()) < n_k_groups(n, preset, granularity)


def test_the_kernel_arguments_are_shifts_and_a_mask():
    members = operands.GroupGeometry(tile=32, per_tile=8, mod=8, div=2).members()
    assert members == {"tile_shift": 5, "per_tile_shift": 3, "mod_mask": 7, "div_shift": 1}
    with pytest.raises(ValueError, match="power of two"):
        operands.GroupGeometry(tile=24, per_tile=8, mod=8, div=1)
