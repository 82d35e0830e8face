"""The sweeps notebook 00 shows, as functions (notebooks hold no numerics).

Each returns a :class:`Sweep`: an x axis and one series per configuration,
every point an error against the float64 ground truth.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sagelib import contract
from sagelib import inputs as data
from sagelib.contract import metrics


@dataclass
class Sweep:
    x_name: str
    x: list
    metric: str
    series: dict[str, list[float]] = field(default_factory=dict)

    def add(self, label: str, value: float) -> None:
        self.series.setdefault(label, []).append(value)


def error_vs_tokens(tokens: list[int], shape: data.Shape, input_name: str = "k_outliers", device="cpu",
                    metric: str = "relative_l1", configs: dict[str, dict] | None = None) -> Sweep:
    """Error of each contract configuration as the sequence grows (N_q = N_kv = n)."""
    configs = configs or {"smoothed K": {"smooth_k": True}, "raw K": {"smooth_k": False}}
    sweep = Sweep("tokens", list(tokens), metric)
    for n in tokens:
        x = data.make(input_name, _with_tokens(shape, n), device=device)
        ref = contract.reference_attention(x.q, x.k, x.v)
        for label, options in configs.items():
            sweep.add(label, getattr(metrics, metric)(contract.attention(x.q, x.k, x.v, **options), ref))
    return sweep


def error_vs_outlier_strength(strengths: list[float], shape: data.Shape, device="cpu",
                              metric: str = "relative_l1") -> Sweep:
    """Error with and without K smoothing as the keys' per-channel bias grows."""
    sweep = Sweep("outlier strength", list(strengths), metric)
    for s in strengths:
        x = data.make("k_outliers", shape, device=device, outlier_strength=float(s))
        ref = contract.reference_attention(x.q, x.k, x.v)
        for label, smooth in (("smoothed K", True), ("raw K", False)):
            sweep.add(label, getattr(metrics, metric)(contract.attention(x.q, x.k, x.v, smooth_k=smooth), ref))
    return sweep


def accumulation_vs_tokens(kv_tokens: list[int], heads: int = 1, queries: int = 64, head_dim: int = 128,
                           device="cpu", metric: str = "relative_l1") -> Sweep:
    """One-level (fp32 through FP22) against two-level accumulation as N_kv grows.

    Every other stage is exact, so the error shown is the accumulator's alone
    (quantization error would otherwise hide it).
    """
    sweep = Sweep("key tokens", list(kv_tokens), metric)
    keep = contract.Exact.all_but("pv_accum")
    for n in kv_tokens:
        shape = data.Shape(batch=1, heads=heads, tokens=queries, head_dim=head_dim, kv_tokens=n)
        x = data.make("gaussian", shape, device=device)
        ref = contract.reference_attention(x.q, x.k, x.v)
        for label, mode in (("fp32 (one FP22 accumulator)", "fp32"), ("fp32+fp32 (flushed every block)", "fp32+fp32"),
                            ("fp32+fp16", "fp32+fp16")):
            out = contract.attention(x.q, x.k, x.v, pv_accum=mode, preset="sm89" if mode == "fp32+fp16" else "sm90",
                                     exact=keep)
            sweep.add(label, getattr(metrics, metric)(out, ref))
    return sweep


def traversal_step_errors(cta_ks: list[int], inputs: list[str], shape: data.Shape, preset: str = "sm90",
                          device="cpu") -> list[dict]:
    """Error against float64 of ``preset`` with each traversal block ``cta_k`` (keys per online-softmax
    step and inner-accumulator span), for a kernel structure that steps through keys differently."""
    rows = []
    for name in inputs:
        x = data.make(name, shape, device=device)
        ref = contract.reference_attention(x.q, x.k, x.v)
        for cta_k in cta_ks:
            report = metrics.compare(contract.attention(x.q, x.k, x.v, preset=preset, cta_k=cta_k), ref)
            rows.append({"input": name, "head_dim": shape.head_dim, "cta_k": cta_k,
                         "relative_l1": report.relative_l1, "cosine": report.cosine, "rmse": report.rmse})
    return rows


#: The configurations issue 37 holds the sm90 fp32+fp16 option against (label: contract options).
FP16_INNER_CONFIGS = {
    "sm90 fp32+fp32": {"preset": "sm90", "pv_accum": "fp32+fp32"},
    "sm90 fp32+fp16": {"preset": "sm90", "pv_accum": "fp32+fp16"},
    "sm89 per_warp fp32+fp16 (SageAttention2's)": {"preset": "sm89", "granularity": "per_warp",
                                                   "pv_accum": "fp32+fp16"},
}


def fp16_inner_errors(inputs: list[str], shape: data.Shape, configs: dict[str, dict] | None = None,
                      device="cpu") -> list[dict]:
    """Relative L1 against float64 of each configuration (default :data:`FP16_INNER_CONFIGS`) per input."""
    rows = []
    for name in inputs:
        x = data.make(name, shape, device=device)
        ref = contract.reference_attention(x.q, x.k, x.v)
        row = {"input": name, "head_dim": shape.head_dim}
        for label, options in (configs or FP16_INNER_CONFIGS).items():
            row[label] = metrics.relative_l1(contract.attention(x.q, x.k, x.v, **options), ref)
        rows.append(row)
    return rows


def _with_tokens(shape: data.Shape, n: int) -> data.Shape:
    return data.Shape(batch=shape.batch, heads=shape.heads, tokens=n, head_dim=shape.head_dim,
                      kv_heads=shape.kv_heads)
