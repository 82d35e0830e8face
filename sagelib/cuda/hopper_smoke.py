"""Launchers for ``kernels/hopper_smoke.cu``: the Hopper building blocks, one small launch each.

Each function runs one smoke kernel (sm_90a only, one CTA) on torch tensors and
returns what the kernel wrote; ``tests/test_hopper_smoke.py`` compares the results
with torch bit for bit. They exist to pin down, before the attention kernel is
written, that the tensor maps (:mod:`sagelib.cuda.tma`), the 128-byte swizzle,
the mbarrier handshake, setmaxnreg, the wgmma descriptors and both fragment
layouts are what ``kernels/include/hopper/`` says they are.
"""

from __future__ import annotations

import torch

from sagelib.cuda.build import load_function
from sagelib.cuda.launch import I32, launch
from sagelib.cuda.tma import tensor_map
from sagelib.errors import InputError

KERNEL = "hopper_smoke.cu"
ARCH = "sm_90a"
ROW_BYTES = 128  #: every smoke tile has rows of 128 one-byte values (one 128-byte swizzle row)
Q_ROWS, K_ROWS = 64, 128  #: one consumer warpgroup's query rows; one key block
HEAD_DIMS_PV = (64, 128)


def _check(name: str, tensor, dtypes, dims: int, what: str) -> None:
    if not isinstance(tensor, torch.Tensor) or tensor.dtype not in dtypes or tensor.dim() != dims:
        got = f"{tensor.dtype} of shape {tuple(tensor.shape)}" if isinstance(tensor, torch.Tensor) else type(tensor)
        raise InputError(f"{name}: expected {what}, got {got}")
    if not tensor.is_cuda:
        raise InputError(f"{name}: expected a CUDA tensor, got one on {tensor.device}; move it with .cuda()")


def _in_range(name: str, value: int, stop: int) -> None:
    if not 0 <= value < stop:
        raise InputError(f"{name}: expected 0 <= {name} < {stop}, got {value}")


def tma_swizzle_roundtrip(matrix: torch.Tensor, row0: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows row0..row0+127 of an int8 [rows, 128] matrix through TMA (128-byte swizzle).

    Returns (the 16 KB of shared memory as they lie, uint8 [128, 128]; the tile read
    back through the swizzle, int8 [128, 128]). Rows past the matrix arrive as zeros.
    """
    _check("matrix", matrix, (torch.int8,), 2, f"an int8 [rows, {ROW_BYTES}] tensor")
    if matrix.shape[1] != ROW_BYTES:
        raise InputError(f"matrix: expected {ROW_BYTES} columns, got {matrix.shape[1]}")
    _in_range("row0", row0, matrix.shape[0])
    raw = torch.empty(K_ROWS, ROW_BYTES, dtype=torch.uint8, device=matrix.device)
    plain = torch.empty(K_ROWS, ROW_BYTES, dtype=torch.int8, device=matrix.device)
    tile_map = tensor_map(matrix, (K_ROWS, ROW_BYTES))
    launch(load_function(KERNEL, "hopper_tma_swizzle_2d", ARCH), (1,), (128,), (tile_map, I32(row0), raw, plain),
           name="hopper_tma_swizzle_2d")
    return raw, plain


def qk_scores(q: torch.Tensor, k: torch.Tensor, batch: int, head: int, q0: int, k0: int) -> torch.Tensor:
    """int32 [64, 128] = q[batch, head, q0:q0+64] . k[batch, head, k0:k0+128]^T by int8 wgmma.

    q and k are int8 [B, H, N, 128] (HND); Q goes through a 3D map ([B*H, N, D]), K
    through a 4D one. Query and key rows past N arrive as zeros (scores 0).
    """
    for name, t in (("q", q), ("k", k)):
        _check(name, t, (torch.int8,), 4, f"an int8 [B, H, N, {ROW_BYTES}] tensor")
        if t.shape[3] != ROW_BYTES:
            raise InputError(f"{name}: expected head_dim {ROW_BYTES} (one 128-byte row), got {t.shape[3]}")
    if q.shape[:2] != k.shape[:2]:
        raise InputError(f"k: expected the batch and heads of q {tuple(q.shape[:2])}, got {tuple(k.shape[:2])}")
    _in_range("batch", batch, q.shape[0])
    _in_range("head", head, q.shape[1])
    _in_range("q0", q0, q.shape[2])
    _in_range("k0", k0, k.shape[2])
    b, h, n, d = q.shape
    q_map = tensor_map(q.reshape(b * h, n, d), (1, Q_ROWS, ROW_BYTES))
    k_map = tensor_map(k, (1, 1, K_ROWS, ROW_BYTES))
    scores = torch.empty(Q_ROWS, K_ROWS, dtype=torch.int32, device=q.device)
    launch(load_function(KERNEL, "hopper_qk_s8", ARCH), (1,), (256,),
           (q_map, k_map, I32(batch), I32(head), I32(h), I32(q0), I32(k0), scores), name="hopper_qk_s8")
    return scores


def pv_block(p: torch.Tensor, vt: torch.Tensor, batch: int, head: int, k0: int) -> torch.Tensor:
    """fp32 [64, D] = p . vt[batch, head, :, k0:k0+128]^T by e4m3 wgmma, P from registers.

    p is e4m3 [64, 128] (the probabilities of 64 query rows over one 128-key block);
    vt is e4m3 [B, H, D, N_pad] (the contract's transposed V), D 64 or 128.
    """
    _check("p", p, (torch.float8_e4m3fn,), 2, f"a float8_e4m3fn [{Q_ROWS}, {K_ROWS}] tensor")
    if tuple(p.shape) != (Q_ROWS, K_ROWS) or not p.is_contiguous():
        raise InputError(f"p: expected a contiguous [{Q_ROWS}, {K_ROWS}] tensor, got shape {tuple(p.shape)}")
    _check("vt", vt, (torch.float8_e4m3fn,), 4, "a float8_e4m3fn [B, H, D, N_pad] tensor")
    d = vt.shape[2]
    if d not in HEAD_DIMS_PV:
        raise InputError(f"vt: expected head_dim (dimension 2) in {HEAD_DIMS_PV}, got {d}")
    _in_range("batch", batch, vt.shape[0])
    _in_range("head", head, vt.shape[1])
    _in_range("k0", k0, vt.shape[3])
    vt_map = tensor_map(vt, (1, 1, d, K_ROWS))
    out = torch.empty(Q_ROWS, d, dtype=torch.float32, device=vt.device)
    name = f"hopper_pv_e4m3_d{d}"
    launch(load_function(KERNEL, name, ARCH), (1,), (128,), (vt_map, I32(batch), I32(head), I32(k0), p, out),
           name=name)
    return out
