"""Parity against the real SageAttention2: the contract and our kernels, each beside the peer's kernels.

For every case of a seeded grid (K-biased and plain inputs, head dims 64 and 128 and the padded ones,
N of 1, 17 and values that are multiples of no tile, GQA, fp16 and bf16, HND and NHD, causal and not)
and every peer configuration (:data:`sagelib.backends.sage2.CONFIGS`), one row holds:

* the stages the peer exposes, through its own quantizers: Q and K int8 codes and scales (bit-exact or
  not, how many codes differ, and how many differ when the contract divides as the GPU does,
  :mod:`sagelib.measure.gpu_division`, in each of its forms), V's e4m3 bytes (how many differ from the
  contract's, and from two other forms of the V multiplier: the correctly rounded division the contract used before, and the division compiled with fast math as
  the peer compiles it: what the last differing bytes need);
* the output: relative L1 of the contract and of our kernel against the real one (and to each other),
  the contract's also with the peer's divisions in its quantizers (:data:`PEER_DIVISIONS`), and the lse's
  largest absolute difference.

:data:`BARS` are the agreement each configuration must reach. ``sagelib parity --against sage2`` runs
the grid on a GPU where the peer is built and records the document (:data:`SCHEMA`); notebook 03 draws it.
"""

from __future__ import annotations

import importlib
from dataclasses import asdict, dataclass

import torch

from sagelib import contract
from sagelib.backends import sage2
from sagelib.backends.kernels.operands import device_target
from sagelib.contract.fp8 import round_e4m3, token_permutation
from sagelib.contract.quantize import constant_over, division
from sagelib.measure import mask_probe
from sagelib.measure.gpu_division import divider
from sagelib.measure.parity import DTYPES, random_qkv, relative_l1
from sagelib.records import documents
from sagelib.records.datafile import utc_stamp

SCHEMA = documents.PEER_PARITY.id

#: Output agreement with the real kernels (rel L1) per configuration, and the lse's max abs per dtype.
BARS = {"sage2-sm90": 3e-4, "sage2-sm89": 1e-4, "sage2-sm89-per-warp-fp16": 1e-3}
LSE_BARS = {"fp16": 5e-3, "bf16": 8e-2}
#: how the peer's quantizers divide at each of the contract's division sites: its CUDA quantizer (per_warp) is
#: built with --use_fast_math; its per_thread quantizer is a Triton kernel, whose fp32 ``/`` is ``div.full.f32``
#: in its PTX (the qk columns of every form say whether the data agree)
PEER_DIVISIONS = {"cuda_multiplier": "fast_math", "triton_ratio": "div_full"}
#: the divisions tried in the contract's place at every site (``ieee``: a true division everywhere)
APPROXIMATE_FORMS = ("ieee", "fast_math", "div_full", "div_approx")


def peer_division(a, b, site):
    return divider(PEER_DIVISIONS[site])(a, b)


@dataclass(frozen=True)
class PeerCase:
    n_q: int
    n_kv: int
    head_dim: int
    dtype: str
    layout: str
    heads_q: int
    heads_kv: int
    causal: bool
    k_bias: float  #: per-channel bias added to K (3.0: the K-biased inputs smoothing exists for; 0: plain randn)

    @property
    def label(self) -> str:
        return (f"N{self.n_q}" + (f"/{self.n_kv}" if self.n_kv != self.n_q else "") + f" D{self.head_dim} "
                f"{self.dtype} {self.layout} {self.heads_q}/{self.heads_kv}" + (" causal" if self.causal else "")
                + (" kbias" if self.k_bias else ""))


def default_grid(quick: bool = False) -> list[PeerCase]:
    """Each factor's every value appears (round robin); ``quick`` keeps the first eight cases."""
    sizes = [(1, 1), (17, 17), (777, 777), (1000, 1000), (200, 777), (4096, 4096), (333, 333), (777, 777)]
    head_dims = (128, 64, 96, 32, 80, 112)
    cases = []
    for i in range(24):
        n_q, n_kv = sizes[i % len(sizes)]
        cases.append(PeerCase(
            n_q=n_q, n_kv=n_kv, head_dim=head_dims[i % len(head_dims)], dtype=("fp16", "bf16")[(i // 2) % 2],
            layout=("HND", "NHD")[(i // 3) % 2], heads_q=(8, 4)[(i // 4) % 2], heads_kv=(2, 4)[(i // 4) % 2],
            causal=bool(i % 2), k_bias=(3.0, 0.0)[(i // 6) % 2]))
    return cases[:8] if quick else cases


def make_inputs(case: PeerCase, seed: int, device="cuda"):
    """The case's q, k, v: the parity sweep's inputs (:func:`sagelib.measure.parity.random_qkv`), batch 1."""
    return random_qkv(1, case.heads_q, case.heads_kv, case.n_q, case.n_kv, case.head_dim, DTYPES[case.dtype],
                      case.layout, seed, case.k_bias, device)


def _hnd(x, layout):
    return x if layout == "HND" else x.transpose(1, 2)


def qk_stage(q, k, case: PeerCase, config: sage2.PeerConfig) -> dict:
    """The peer's Q/K quantizer (HND, its K mean, its block sizes) against the contract's."""
    from sagelib.contract import presets as P

    sage2.package()  # puts the peer build on the path
    g = P.PRESETS[config.preset]
    qh, kh = _hnd(q, case.layout).contiguous(), _hnd(k, case.layout).contiguous()
    width = P.padded_head_dim(case.head_dim)
    qp, kp = (torch.nn.functional.pad(x, (0, width - case.head_dim)) for x in (qh, kh))
    km = kp.mean(dim=2, keepdim=True)
    if config.granularity == "per_thread":
        quant = importlib.import_module("sageattention.triton.quant_per_thread").per_thread_int8
        qi, qs, ki, ks = quant(qp, kp, km, tensor_layout="HND", BLKQ=g.blkq, WARPQ=g.warpq, BLKK=g.blkk,
                               WARPK=g.warpk)
    else:
        quant = importlib.import_module("sageattention.quant").per_warp_int8
        qi, qs, ki, ks = quant(qp, kp, km, tensor_layout="HND", BLKQ=g.blkq, WARPQ=g.warpq, BLKK=g.blkk)
    def quantized():
        return contract.quantize_qk(qh, kh, layout="HND", preset=config.preset, granularity=config.granularity)

    ref = quantized()
    d = case.head_dim

    def same(a, b):
        return a.shape == b.shape and bool(torch.equal(a, b))

    def differ(theirs, mine):
        return int((theirs[..., :d] != mine).sum()) if theirs[..., :d].shape == mine.shape else -1

    row = {"q_int8_exact": same(qi[..., :d], ref.q_int8), "k_int8_exact": same(ki[..., :d], ref.k_int8),
           "q_scale_exact": same(qs, ref.q_scale), "k_scale_exact": same(ks, ref.k_scale),
           "q_int8_differ": differ(qi, ref.q_int8), "k_int8_differ": differ(ki, ref.k_int8),
           "qk_codes": int(ref.q_int8.numel() + ref.k_int8.numel())}
    for form in APPROXIMATE_FORMS:
        with division(lambda a, b, site, form=form: divider(form)(a, b)):
            alt = quantized()
        row[f"qk_int8_differ_{form}"] = differ(qi, alt.q_int8) + differ(ki, alt.k_int8)
        row[f"qk_scale_exact_{form}"] = same(qs, alt.q_scale) and same(ks, alt.k_scale)
    with division(peer_division):
        alt = quantized()
    row["qk_int8_differ_peer_division"] = differ(qi, alt.q_int8) + differ(ki, alt.k_int8)
    row["qk_scale_exact_peer_division"] = same(qs, alt.q_scale) and same(ks, alt.k_scale)
    return row


def qk_exact_with_gpu_division(row: dict) -> bool:
    """The contract's Q/K codes and scales equal the real quantizers' bit for bit once it divides where they divide
    as the GPU does (:data:`PEER_DIVISIONS`): the bar of the Q/K stage. The codes of the exact division are
    ``q_int8_differ`` / ``k_int8_differ``: the GPU's reciprocal unit, which no CPU reproduces, moves a few."""
    return bool(row["q_scale_exact"] and row["k_scale_exact"] and row.get("qk_scale_exact_peer_division")
                and row.get("qk_int8_differ_peer_division") == 0)


def _fast_math_multiplier(amax: torch.Tensor, scale_max: float) -> torch.Tensor:
    """scale_max / amax as CUDA computes it under --use_fast_math (the peer's build flags)."""
    return divider("fast_math")(torch.full_like(amax, scale_max), amax)


def v_stage(v, case: PeerCase, config: sage2.PeerConfig) -> dict:
    """The peer's V quantizer against the contract's bytes, and against two other multiplier forms."""
    from sagelib.contract import presets as P

    sage2.package()
    quant = importlib.import_module("sageattention.quant").per_channel_fp8
    vh = _hnd(v, case.layout).contiguous()
    width = P.padded_head_dim(case.head_dim)
    vp = torch.nn.functional.pad(vh, (0, width - case.head_dim))
    scale_max = P.V_SCALE_MAX[config.pv_accum]
    v8, v_scale, _ = quant(vp, tensor_layout="HND", scale_max=scale_max, smooth_v=False)
    n, d = vh.shape[2], case.head_dim
    theirs = v8.float()[..., token_permutation(v8.shape[-1], v8.device).argsort()][..., :n].transpose(-1, -2)[..., :d]
    ref = contract.quantize_v(vh, layout="HND", preset=config.preset, pv_accum=config.pv_accum)
    ours_form = ref.tokens_hnd()
    v32 = vh.float()
    amax = v32.abs().amax(dim=2, keepdim=True).clamp(min=P.V_AMAX_FLOOR)
    divided = round_e4m3(v32 * constant_over(scale_max, amax))  # the correctly rounded division
    fast = round_e4m3(v32 * _fast_math_multiplier(amax, scale_max))
    return {"v_bytes": int(theirs.numel()), "v_bytes_differ": int((theirs != ours_form).sum()),
            "v_bytes_differ_division": int((theirs != divided).sum()),
            "v_bytes_differ_fast_math": int((theirs != fast).sum()),
            "v_scale_exact": bool(torch.equal(v_scale[..., :d], ref.v_scale))}


def _ours(config: sage2.PeerConfig):
    from sagelib.backends.kernels import mma, sm90

    return sm90.attention if config.preset == "sm90" else mma.attention


def _lse_err(lse, ref_lse) -> float:
    finite = torch.isfinite(ref_lse)
    return float((lse[finite] - ref_lse[finite]).abs().max()) if bool(finite.any()) else 0.0


def run_case(case: PeerCase, name: str, seed: int) -> dict:
    """One row: ``case`` under the peer configuration ``name`` on the current GPU."""
    config = sage2.CONFIGS[name]
    peer = sage2.Sage2Backend(name)
    q, k, v = make_inputs(case, seed)
    real, real_lse = peer.attention(q, k, v, causal=case.causal, layout=case.layout, return_lse=True)
    options = {**sage2.contract_options(config), "target": device_target(q.device)}
    ref, ref_lse = contract.attention(q, k, v, causal=case.causal, layout=case.layout, return_lse=True, **options)
    with division(peer_division):
        ref_peer_division = contract.attention(q, k, v, causal=case.causal, layout=case.layout, **options)
    ours, ours_lse = _ours(config)(q, k, v, causal=case.causal, layout=case.layout, return_lse=True,
                                   preset=config.preset, granularity=config.granularity, pv_accum=config.pv_accum,
                                   causal_alignment="top_left")
    real_lse = real_lse.reshape(ref_lse.shape)
    row = {**asdict(case), "label": case.label, "config": name, "seed": seed,
           "contract_to_real": relative_l1(ref, real), "ours_to_real": relative_l1(ours, real),
           "contract_peer_division_to_real": relative_l1(ref_peer_division, real),
           "ours_to_contract": relative_l1(ours, ref), "contract_lse_to_real": _lse_err(ref_lse, real_lse),
           "ours_lse_to_real": _lse_err(ours_lse, real_lse), "real_finite": bool(torch.isfinite(real).all())}
    row.update(qk_stage(q, k, case, config))
    row.update(v_stage(v, case, config))
    bar, lse_bar = BARS[name], LSE_BARS[case.dtype]
    row["contract_passed"] = bool(row["contract_to_real"] <= bar and row["contract_lse_to_real"] <= lse_bar
                                  and qk_exact_with_gpu_division(row))
    row["ours_passed"] = bool(row["ours_to_real"] <= bar and row["ours_lse_to_real"] <= lse_bar)
    return row


def mask_rows(name: str) -> list[dict]:
    """The hidden-key probe (:mod:`sagelib.measure.mask_probe`) on the real kernels of ``name``."""
    peer = sage2.Sage2Backend(name)
    rows = mask_probe.probe(lambda q, k, v: peer.attention(q, k, v, causal=True), n=256, device="cuda")
    return [{**asdict(r), "config": name} for r in rows]


def run_grid(cases: list[PeerCase], configs: list[str], seed: int = 0, progress=print) -> dict:
    """Every case under every configuration that runs here, plus the mask probe; the document to record."""
    from sagelib.measure.bench import device_summary
    from sagelib.records.provenance import environment_or_reason

    rows, probes = [], []
    for name in configs:
        for i, case in enumerate(cases):
            row = run_case(case, name, seed + i)
            rows.append(row)
            progress(f"{name:<26} {case.label:<40} contract {row['contract_to_real']:.2e}  ours "
                     f"{row['ours_to_real']:.2e}  V bytes differ {row['v_bytes_differ']}")
        probes += mask_rows(name)
    return {"schema": SCHEMA, "created_utc": utc_stamp(), "device": device_summary(torch.device("cuda")),
            "environment": environment_or_reason(), "peer": {"dir": sage2.peer_dir()},
            "bars": {"output_rel_l1": BARS, "lse_abs": LSE_BARS}, "rows": rows, "mask_probe": probes,
            "summary": summary(rows)}


def summary(rows: list[dict]) -> dict:
    """Per configuration: the worst agreement of the contract and of ours, and how many rows passed."""
    out = {}
    for name in dict.fromkeys(r["config"] for r in rows):
        mine = [r for r in rows if r["config"] == name]
        out[name] = {"cases": len(mine),
                     "contract_to_real_max": max(r["contract_to_real"] for r in mine),
                     "ours_to_real_max": max(r["ours_to_real"] for r in mine),
                     "contract_lse_max": max(r["contract_lse_to_real"] for r in mine),
                     "ours_lse_max": max(r["ours_lse_to_real"] for r in mine),
                     "qk_exact": all(r["q_int8_exact"] and r["k_int8_exact"] for r in mine),
                     "qk_exact_gpu_division": all(qk_exact_with_gpu_division(r) for r in mine),
                     "qk_differ_max": max(r["q_int8_differ"] + r["k_int8_differ"] for r in mine),
                     **{f"qk_differ_{form}_max": max(r[f"qk_int8_differ_{form}"] for r in mine)
                        for form in (*APPROXIMATE_FORMS, "peer_division")},
                     **{f"qk_scales_exact_{form}": sum(bool(r.get(f"qk_scale_exact_{form}")) for r in mine)
                        for form in (*APPROXIMATE_FORMS, "peer_division")},
                     "contract_peer_division_to_real_max": max(r["contract_peer_division_to_real"] for r in mine),
                     "v_bytes_differ_max": max(r["v_bytes_differ"] for r in mine),
                     "contract_passed": sum(r["contract_passed"] for r in mine),
                     "ours_passed": sum(r["ours_passed"] for r in mine)}
    return out


def _yes_no(flag) -> str:
    return "?" if flag is None else ("yes" if flag else "no")  # "?": a document older than the column


def format_summary(document: dict) -> str:
    lines = [f"{'config':<26} {'cases':>5} {'contract':>10} {'ours':>10} {'lse c/o':>17} {'QK exact e/g':>12} "
             f"{'V bytes':>7} {'passed c/o':>11}"]
    for name, s in document["summary"].items():
        exact = f"{'yes' if s['qk_exact'] else 'no'}/{_yes_no(s.get('qk_exact_gpu_division'))}"
        lines.append(f"{name:<26} {s['cases']:>5} {s['contract_to_real_max']:>10.2e} {s['ours_to_real_max']:>10.2e} "
                     f"{s['contract_lse_max']:>8.1e}/{s['ours_lse_max']:.1e} {exact:>12} "
                     f"{s['v_bytes_differ_max']:>7} {s['contract_passed']:>5}/{s['ours_passed']}")
    lines.append("(QK exact e/g: the contract's Q/K codes and scales equal the real ones dividing exactly / dividing "
                 "as the GPU does; a pass needs the second)")
    lines.append("Q/K int8 codes differing from the real quantizers' (worst case), by the contract's division:")
    for name, s in document["summary"].items():
        if "qk_differ_max" in s:
            forms = [f for f in (*APPROXIMATE_FORMS, "peer_division") if f"qk_differ_{f}_max" in s]
            lines.append(f"  {name:<26} contract {s['qk_differ_max']}  " + "  ".join(
                f"{form} {s[f'qk_differ_{form}_max']}" + (f" ({s[f'qk_scales_exact_{form}']} scales exact)"
                                                          if f"qk_scales_exact_{form}" in s else "")
                for form in forms)
                + f"  (contract with the peer's divisions to real: {s['contract_peer_division_to_real_max']:.2e})")
    leaks = [p for p in document.get("mask_probe", []) if p["leak"] != 0.0 or not p["finite"]]
    lines.append(f"mask probe on the real kernels: {len(leaks)} of {len(document.get('mask_probe', []))} "
                 "(dtype, magnitude, head_dim) cases let a hidden key contribute or gave non-finite output")
    return "\n".join(lines)
