"""The parity sweep of our CUDA kernels against the contract, for notebook 03 and the tests.

A :class:`ParityCase` is one configuration (lengths, head_dim, dtype, layout,
GQA, causal alignment, granularity, accumulation). :func:`run_case` draws fresh
inputs, runs the contract and float64 attention everywhere, and our kernels
where a GPU and the ``cuda`` backend are available, and says whether the case
passes: quantized tensors bit-exact, output within :data:`ATTN_REL_L1` of the
contract, and an error against float64 no larger than the contract's (times
:data:`ERROR_SLACK`). On a machine without a GPU the kernel columns say why they
are empty. :func:`score_error_blocks` and :func:`output_error_blocks` give the
error maps the notebook draws.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, replace

import torch

from sagelib import contract
from sagelib.backends.kernels.operands import device_target
from sagelib.errors import InputError

#: Relative L1 allowed between kernel and contract outputs of one configuration. The two
#: differ by ex2.approx against exact exp2, fp32 summation order, and the rare P element
#: that then rounds to the neighbouring e4m3 value; the largest seen on the H200 was 3.7e-4.
ATTN_REL_L1 = 2e-3
#: The kernel's relative-L1 error against float64 may exceed the contract's by this factor.
ERROR_SLACK = 1.05
#: Largest |lse difference| allowed (natural log units).
LSE_ABS = 2e-3
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


@dataclass(frozen=True)
class ParityCase:
    n_q: int
    n_kv: int
    head_dim: int = 128
    dtype: str = "fp16"
    layout: str = "HND"
    heads_q: int = 4
    heads_kv: int = 4
    causal: bool = False
    alignment: str = "bottom_right"
    granularity: str = "per_thread"
    pv_accum: str = "fp32+fp32"

    @property
    def label(self) -> str:
        causal = f"causal/{self.alignment.replace('_', '-')}" if self.causal else "full"
        return (f"{self.n_q}x{self.n_kv} d{self.head_dim} {self.dtype} {self.layout} "
                f"{self.heads_q}/{self.heads_kv} {causal} {self.granularity} {self.pv_accum}")


def default_sweep(n_values=(1, 17, 1000, 4099), head_dims=(64, 128)) -> list[ParityCase]:
    """Every N in ``n_values`` (square, and against a longer / shorter partner), with the
    other factors varied round-robin so that each value of each factor appears."""
    cases = []
    i = 0
    for n in n_values:
        for n_q, n_kv in ((n, n), (n, 3 * n + 5), (2 * n + 7, n)):
            cases.append(ParityCase(
                n_q=n_q, n_kv=n_kv, head_dim=head_dims[i % len(head_dims)], dtype=("fp16", "bf16")[i % 2],
                layout=("HND", "NHD")[(i // 2) % 2], heads_q=(4, 8, 4)[i % 3], heads_kv=(4, 2, 1)[i % 3],
                causal=bool(i % 3), alignment=("bottom_right", "top_left")[(i // 3) % 2],
                granularity=("per_thread", "per_warp")[(i // 4) % 2],
                pv_accum=("fp32+fp32", "fp32+fp16")[(i // 5) % 2]))
            i += 1
    return cases


def relative_l1(out: torch.Tensor, ref: torch.Tensor) -> float:
    out, ref = out.double(), ref.double()
    return float((out - ref).abs().sum() / ref.abs().sum().clamp_min(1e-30))


def fresh_seed() -> int:
    """A new random seed (each test and sweep row records the one it drew)."""
    return int.from_bytes(os.urandom(4), "little")


def random_qkv(batch, heads_q, heads_kv, n_q, n_kv, head_dim, dtype, layout, seed: int, k_bias: float = 4.0,
               device="cuda"):
    """q, k, v (randn, in ``layout``), k with a per-channel bias of ``k_bias`` (what smoothing removes)."""
    g = torch.Generator(device=device).manual_seed(seed)

    def draw(heads, n, bias=0.0):
        x = torch.randn(batch, heads, n, head_dim, generator=g, device=device)
        if bias:
            x = x + bias * torch.randn(1, 1, 1, head_dim, generator=g, device=device)
        x = x.to(dtype)
        return x if layout == "HND" else x.transpose(1, 2).contiguous()

    return draw(heads_q, n_q), draw(heads_kv, n_kv, k_bias), draw(heads_kv, n_kv)


def make_inputs(case: ParityCase, device, seed: int, batch: int = 1, k_bias: float = 4.0):
    """The inputs of one case (see :func:`random_qkv`)."""
    return random_qkv(batch, case.heads_q, case.heads_kv, case.n_q, case.n_kv, case.head_dim, DTYPES[case.dtype],
                      case.layout, seed, k_bias, device)


#: The kernels the sweep can check: backend name -> the contract preset it implements.
KERNEL_PRESETS = {"cuda": "sm89", "cuda-sm90": "sm90", "cuda-sm90-k64": "sm90"}
#: ... and the contract's cta_k where a kernel steps by other than the preset's block.
KERNEL_CTA_K = {"cuda-sm90-k64": 64}
#: The Hopper kernels (the sm90 preset's): fp32+fp32 accumulation only, V in the sm89 token order.
SM90_BACKENDS = tuple(name for name, preset in KERNEL_PRESETS.items() if preset == "sm90")


def kernel_unavailable_reason(device, backend: str = "cuda") -> str | None:
    if torch.device(device).type != "cuda":
        return f"no GPU here (device {device}): kernel columns not run"
    from sagelib import backends

    return backends.availability().get(backend, f"unknown backend {backend!r}")


def _qk_bit_exact(q, k, layout, preset, granularity) -> bool:
    from sagelib.backends.kernels import quantizers

    ours = quantizers.quantize_qk(q, k, layout=layout, preset=preset, granularity=granularity)
    ref = contract.quantize_qk(q, k, layout=layout, preset=preset, granularity=granularity)
    return all(torch.equal(getattr(ours, n), getattr(ref, n)) for n in ("q_int8", "q_scale", "k_int8", "k_scale", "km"))


def sm89_permuted(v_fp8: torch.Tensor) -> torch.Tensor:
    """The bytes of a [..., N_pad] e4m3 tensor with every 16 tokens in the sm89 order (contract section 5)."""
    from sagelib.contract import presets as P

    n_pad = v_fp8.shape[-1]
    order = torch.tensor(P.SM89_V_PERMUTATION, device=v_fp8.device)
    index = (torch.arange(n_pad, device=v_fp8.device) // 16) * 16 + order.repeat(n_pad // 16)
    return v_fp8.view(torch.uint8)[..., index]


def _v_bit_exact(q, k, v, case: ParityCase, backend: str, pv_accum: str) -> bool:
    from sagelib.backends.kernels import quantizers, sm90

    if backend in SM90_BACKENDS:  # the operand the Hopper kernel reads: sm90 V, permuted like sm89
        ours = sm90.prepare(q, k, v, layout=case.layout, granularity=case.granularity)
        ref = contract.quantize_v(v, layout=case.layout, preset="sm90", pv_accum=pv_accum)
        d = case.head_dim
        return torch.equal(ours.v_scale[..., :d], ref.v_scale) and torch.equal(
            ours.v_fp8[:, :, :d].view(torch.uint8), sm89_permuted(ref.v_fp8))
    ours = quantizers.quantize_v(v, layout=case.layout, preset="sm89", pv_accum=pv_accum)
    ref = contract.quantize_v(v, layout=case.layout, preset="sm89", pv_accum=pv_accum)
    return torch.equal(ours.v_scale, ref.v_scale) and torch.equal(ours.v_fp8.view(torch.uint8),
                                                                 ref.v_fp8.view(torch.uint8))


def _kernel_attention(backend: str):
    from sagelib.backends.kernels import mma, sm90

    return sm90.attention if backend in SM90_BACKENDS else mma.attention


def run_case(case: ParityCase, device="cpu", seed: int | None = None, backend: str = "cuda") -> dict:
    """One row of the sweep (JSON-able). ``seed`` None draws a fresh one (recorded in the row).

    ``backend`` picks the kernel: ``cuda`` (the mma.sync kernel, contract preset sm89),
    ``cuda-sm90`` (the Hopper kernel, preset sm90, which implements fp32+fp32 only: the
    case's pv_accum is replaced by it and the row says so) or ``cuda-sm90-k64`` (its
    three-consumer geometry, checked against the sm90 preset with cta_k 64).
    """
    if backend not in KERNEL_PRESETS:
        raise InputError(f"backend: expected one of {list(KERNEL_PRESETS)}, got {backend!r}")
    seed = fresh_seed() if seed is None else seed
    preset = KERNEL_PRESETS[backend]
    pv_accum = "fp32+fp32" if backend in SM90_BACKENDS else case.pv_accum
    q, k, v = make_inputs(case, device, seed)
    kw = dict(causal=case.causal, layout=case.layout, preset=preset, granularity=case.granularity,
              pv_accum=pv_accum, causal_alignment=case.alignment)
    if device_target(device):  # the contract twin of a kernel on this GPU uses this GPU's fp8 accumulator
        kw["target"] = device_target(device)
    if backend in KERNEL_CTA_K:
        kw["cta_k"] = KERNEL_CTA_K[backend]
    ref, ref_lse = contract.attention(q, k, v, return_lse=True, **kw)
    exact = contract.reference_attention(q, k, v, causal=case.causal, layout=case.layout,
                                         causal_alignment=case.alignment)
    row = {**asdict(case), "pv_accum": pv_accum, "label": replace(case, pv_accum=pv_accum).label, "seed": seed,
           "backend": backend, "preset": preset, "cta_k": kw.get("cta_k"), "contract_err": relative_l1(ref, exact)}
    reason = kernel_unavailable_reason(device, backend)
    if reason:
        row.update(kernel="not run", reason=reason, passed=None)
        return row
    qk_exact = _qk_bit_exact(q, k, case.layout, preset, case.granularity)
    v_exact = _v_bit_exact(q, k, v, case, backend, pv_accum)
    out, lse = _kernel_attention(backend)(q, k, v, return_lse=True, **kw)
    row.update(kernel="run", qk_bit_exact=qk_exact, v_bit_exact=v_exact,
               **against_contract(out, lse, ref, ref_lse, exact))
    row["passed"] = bool(qk_exact and v_exact and row["output_passed"])
    return row


def against_contract(out, lse, ref, ref_lse, exact) -> dict:
    """How a kernel's output and lse compare with the contract's (same configuration) and float64.

    ``output_passed``: finite, shape and dtype equal, within ATTN_REL_L1 of the contract, an error
    against float64 no larger than the contract's times ERROR_SLACK, lse within LSE_ABS with the
    same rows at -inf.
    """
    blind = torch.isinf(ref_lse)
    lse_err = float((lse[~blind] - ref_lse[~blind]).abs().max()) if bool((~blind).any()) else 0.0
    result = {"to_contract": relative_l1(out, ref), "kernel_err": relative_l1(out, exact),
              "contract_err": relative_l1(ref, exact), "lse_err": lse_err,
              "lse_blind_rows_match": bool(torch.equal(torch.isinf(lse), blind)),
              "finite": bool(torch.isfinite(out).all()),
              "same_shape_dtype": out.shape == ref.shape and out.dtype == ref.dtype}
    result["output_passed"] = bool(result["finite"] and result["same_shape_dtype"]
                                   and result["to_contract"] <= ATTN_REL_L1
                                   and result["kernel_err"] <= result["contract_err"] * ERROR_SLACK + 1e-5
                                   and lse_err <= LSE_ABS and result["lse_blind_rows_match"])
    return result


def check_attention(attention, q, k, v, **options) -> dict:
    """A kernel's ``attention`` call against the contract's, with the same ``options`` (the contract's
    keywords, return_lse is set here), and both against float64: :func:`against_contract`'s verdict."""
    if device_target(q.device):
        options = {"target": device_target(q.device), **options}
    out, lse = attention(q, k, v, return_lse=True, **options)
    ref, ref_lse = contract.attention(q, k, v, return_lse=True, **options)
    exact = contract.reference_attention(q, k, v, causal=options["causal"], layout=options["layout"],
                                         causal_alignment=options["causal_alignment"])
    return against_contract(out, lse, ref, ref_lse, exact)


def score_error_blocks(q, k, *, layout="HND", granularity="per_thread", use_kernel=False,
                       block_q: int = 128, block_k: int = 64) -> torch.Tensor:
    """Relative error of the INT8 scores over (query block, key block), head 0 of batch 0.

    Dequantized q_int8 . k_int8 (smoothed K, as the kernel multiplies them) against the
    exact smoothed product in float64, |error| summed per block over |exact| summed per block.
    ``use_kernel`` takes Q/K from our quantizers (bit-exact to the contract's, so the map is
    the same; it shows the kernel path ran), else from the contract.
    """
    quantize = contract.quantize_qk
    if use_kernel:
        from sagelib.backends.kernels import quantizers

        quantize = quantizers.quantize_qk
    qk = quantize(q, k, layout=layout, preset="sm89", granularity=granularity)
    to_hnd = (lambda x: x) if layout == "HND" else (lambda x: x.transpose(1, 2))
    qh, kh, km = to_hnd(q)[0, 0].double(), to_hnd(k)[0, 0].double(), to_hnd(qk.km)[0, 0].double()
    n_q, n_kv = qh.shape[0], kh.shape[0]
    g = contract.PRESETS["sm89"]
    qs = qk.q_scale[0, 0][contract.q_group_index(n_q, g, granularity, q.device)].double()
    ks = qk.k_scale[0, 0][contract.k_group_index(n_kv, g, granularity, q.device)].double()
    approx = (to_hnd(qk.q_int8)[0, 0].double() * qs[:, None]) @ (to_hnd(qk.k_int8)[0, 0].double() * ks[:, None]).T
    exact = qh @ (kh - km).T
    err, mag = (approx - exact).abs(), exact.abs()
    nb_q, nb_k = -(-n_q // block_q), -(-n_kv // block_k)
    pad = (0, nb_k * block_k - n_kv, 0, nb_q * block_q - n_q)
    err = torch.nn.functional.pad(err, pad).reshape(nb_q, block_q, nb_k, block_k).sum(dim=(1, 3))
    mag = torch.nn.functional.pad(mag, pad).reshape(nb_q, block_q, nb_k, block_k).sum(dim=(1, 3))
    return (err / mag.clamp_min(1e-30)).float().cpu()


def output_error_blocks(out, ref, *, layout="HND", block_q: int = 128) -> torch.Tensor:
    """Relative L1 of ``out`` against ``ref`` per (head, query block), batch 0."""
    to_hnd = (lambda x: x) if layout == "HND" else (lambda x: x.transpose(1, 2))
    o, r = to_hnd(out)[0].double(), to_hnd(ref)[0].double()
    h, n, _ = o.shape
    nb = -(-n // block_q)
    pad = (0, 0, 0, nb * block_q - n)
    err = torch.nn.functional.pad((o - r).abs(), pad).reshape(h, nb, -1).sum(-1)
    mag = torch.nn.functional.pad(r.abs(), pad).reshape(h, nb, -1).sum(-1)
    return (err / mag.clamp_min(1e-30)).float().cpu()


#: The checks of one sweep row, as the pass/fail grid shows them.
GRID_CHECKS = ("qk_bit_exact", "v_bit_exact", "to_contract", "error_vs_float64", "lse")


def pass_grid(rows: list[dict]) -> tuple[torch.Tensor, list[str], list[str]]:
    """cases x checks: 1 pass, 0 fail, NaN not run; with the row and column labels."""
    grid = torch.full((len(rows), len(GRID_CHECKS)), float("nan"))
    for i, r in enumerate(rows):
        if r.get("kernel") != "run":
            continue
        grid[i] = torch.tensor([
            float(r["qk_bit_exact"]), float(r["v_bit_exact"]), float(r["to_contract"] <= ATTN_REL_L1),
            float(r["kernel_err"] <= r["contract_err"] * ERROR_SLACK + 1e-5),
            float(r["lse_err"] <= LSE_ABS and r["lse_blind_rows_match"])])
    return grid, [r["label"] for r in rows], list(GRID_CHECKS)


def error_report(case: ParityCase, device, seed: int = 0, block_q: int = 128, block_k: int = 64) -> dict:
    """The error maps of one configuration: INT8 score error over (query block, key block) and
    output error over (head, query block) for the contract and, where it runs, the kernel."""
    q, k, v = make_inputs(case, device, seed)
    kw = dict(causal=case.causal, layout=case.layout, preset="sm89", granularity=case.granularity,
              pv_accum=case.pv_accum, causal_alignment=case.alignment)
    exact = contract.reference_attention(q, k, v, causal=case.causal, layout=case.layout,
                                         causal_alignment=case.alignment)
    ref = contract.attention(q, k, v, **kw)
    kernel_runs = kernel_unavailable_reason(device) is None
    report = {"scores": score_error_blocks(q, k, layout=case.layout, granularity=case.granularity,
                                           use_kernel=kernel_runs, block_q=block_q, block_k=block_k),
              "contract_vs_float64": output_error_blocks(ref, exact, layout=case.layout, block_q=block_q),
              "kernel_runs": kernel_runs}
    if kernel_runs:
        from sagelib.backends.kernels import mma

        out = mma.attention(q, k, v, **kw)
        report["kernel_vs_float64"] = output_error_blocks(out, exact, layout=case.layout, block_q=block_q)
        report["kernel_vs_contract"] = output_error_blocks(out, ref, layout=case.layout, block_q=block_q)
    return report


def grid_cases(backends, n_values=(1, 17, 1000, 4099), head_dims=(64, 128), seed: int = 0) -> list[tuple]:
    """The parity grid of ``sagelib parity-grid``: (case, seed, backend) for every backend x :func:`default_sweep` case,
    each case's seed ``seed`` plus its place in the sweep, so a grid run twice (or spread over GPUs) draws the same."""
    return [(case, seed + i, backend) for backend in backends
            for i, case in enumerate(default_sweep(n_values, head_dims))]


def grid_row(task: tuple, device: str = "cuda") -> dict:
    """One (case, seed, backend) of :func:`grid_cases` on ``device``: :func:`run_case`'s row."""
    case, seed, backend = task
    return run_case(case, device, seed=seed, backend=backend)
