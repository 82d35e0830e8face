"""kernels/hopper_smoke.cu through sagelib.cuda.hopper_smoke: the Hopper building blocks, bit for bit.

GPU tests (sm_90a, i.e. an H100/H200) compare every kernel output with torch:
the TMA tile and its 128-byte swizzle, int8 wgmma scores (descriptors, accumulator
fragment, zero-filled tails, the producer/consumer split with setmaxnreg), and e4m3
wgmma with P from registers (register A fragment, accumulate == false on the first
step). The expected values here come from torch arithmetic, never from the kernels.
CPU tests: bad input, and that the hopper/ headers refuse every target but sm_90a.
"""

import subprocess

import pytest
import torch

from sagelib.cuda import check, hopper_smoke
from sagelib.cuda.build import INCLUDE_DIR

needs_nvcc = pytest.mark.skipif(check.nvcc_path() is None, reason="needs nvcc (the CUDA toolkit)")


def _needs_sm90():
    major, _ = torch.cuda.get_device_capability()
    if major != 9:
        pytest.skip(f"needs an sm_90a GPU (H100/H200), this one is compute capability {major}.x")


def _padded_rows(t: torch.Tensor, start: int, count: int) -> torch.Tensor:
    """Rows start..start+count-1 of the last-but-one dimension, zeros past the end (what TMA reads)."""
    rows = t[..., start:start + count, :]
    pad = count - rows.shape[-2]
    return torch.nn.functional.pad(rows, (0, 0, 0, pad)) if pad else rows


def _swizzle_128b(plain: torch.Tensor) -> torch.Tensor:
    """Bytes as the 128-byte swizzle lays them: chunk c of row r at chunk c ^ (r % 8)."""
    rows = torch.arange(plain.shape[0]).view(-1, 1)
    slots = torch.arange(128).view(1, -1) // 16
    logical = ((slots ^ (rows % 8)) * 16 + torch.arange(128).view(1, -1) % 16)
    return plain.view(torch.uint8).gather(1, logical.expand(plain.shape[0], 128))


@pytest.mark.gpu
@pytest.mark.parametrize("row0", [0, 256])
def test_tma_tile_lands_swizzled_and_reads_back_exactly(row0):
    _needs_sm90()
    gen = torch.Generator().manual_seed(row0)
    matrix = torch.randint(-128, 128, (300, 128), generator=gen, dtype=torch.int8)
    raw, plain = hopper_smoke.tma_swizzle_roundtrip(matrix.cuda(), row0)
    expected = _padded_rows(matrix, row0, 128)
    assert torch.equal(plain.cpu(), expected)
    assert torch.equal(raw.cpu(), _swizzle_128b(expected))
    assert not torch.equal(raw.cpu(), expected.view(torch.uint8))  # the swizzle really moved bytes


@pytest.mark.gpu
@pytest.mark.parametrize("q0, k0", [(0, 0), (160, 128)])
def test_int8_wgmma_scores_equal_torch(q0, k0):
    _needs_sm90()
    gen = torch.Generator().manual_seed(q0 + k0)
    q = torch.randint(-127, 128, (2, 3, 200, 128), generator=gen, dtype=torch.int8)
    k = torch.randint(-127, 128, (2, 3, 200, 128), generator=gen, dtype=torch.int8)
    scores = hopper_smoke.qk_scores(q.cuda(), k.cuda(), batch=1, head=2, q0=q0, k0=k0).cpu()
    q_tile = _padded_rows(q[1, 2], q0, 64).long()
    k_tile = _padded_rows(k[1, 2], k0, 128).long()
    assert torch.equal(scores, (q_tile @ k_tile.T).to(torch.int32))


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim", [64, 128])
def test_e4m3_wgmma_with_p_in_registers_equals_torch(head_dim):
    _needs_sm90()
    gen = torch.Generator().manual_seed(head_dim)
    # small integers: every product and partial sum is exact in fp32 whatever the summation order
    p = torch.randint(-3, 4, (64, 128), generator=gen).float().to(torch.float8_e4m3fn)
    vt = torch.randint(-3, 4, (2, 2, head_dim, 256), generator=gen).float().to(torch.float8_e4m3fn)
    out = hopper_smoke.pv_block(p.cuda(), vt.cuda(), batch=1, head=1, k0=128).cpu()
    expected = (p.double() @ vt[1, 1, :, 128:256].double().T).float()
    assert torch.equal(out, expected)


def test_bad_input_names_the_argument():
    with pytest.raises(ValueError, match="matrix: expected an int8"):
        hopper_smoke.tma_swizzle_roundtrip(torch.zeros(4, 128, dtype=torch.float16), 0)
    with pytest.raises(ValueError, match="q: expected a CUDA tensor"):
        hopper_smoke.qk_scores(torch.zeros(1, 1, 64, 128, dtype=torch.int8),
                               torch.zeros(1, 1, 64, 128, dtype=torch.int8), 0, 0, 0, 0)
    with pytest.raises(ValueError, match="p: expected a float8_e4m3fn"):
        hopper_smoke.pv_block(torch.zeros(64, 128), torch.zeros(1, 1, 64, 128), 0, 0, 0)


@needs_nvcc
@pytest.mark.parametrize("arch, compiles", [("sm_90a", True), ("sm_90", False), ("sm_89", False)])
def test_hopper_headers_compile_for_sm_90a_only(tmp_path, arch, compiles):
    unit = tmp_path / "unit.cu"
    unit.write_text('#include "hopper/wgmma.cuh"\n#include "hopper/tma.cuh"\n#include "hopper/warpgroup_regs.cuh"\n'
                    "__global__ void k() {}\n")
    number = arch.removeprefix("sm_")
    proc = subprocess.run([check.nvcc_path(), "-std=c++17", f"-gencode=arch=compute_{number},code=sm_{number}",
                           "-cubin", "-o", str(tmp_path / "unit.cubin"), f"-I{INCLUDE_DIR}", str(unit)],
                          capture_output=True, text=True)
    assert (proc.returncode == 0) == compiles, proc.stderr[-2000:]
    if not compiles:
        assert "for sm_90a only" in proc.stderr
