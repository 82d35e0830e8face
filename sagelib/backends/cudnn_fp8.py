"""cuDNN's FP8 attention (the cudnn-frontend ``sdpa_fp8`` graph) as a peer: how fast FP8 attention runs on this card.

It is the anchor for the Hopper kernel's speed, numerics aside: one scale per tensor, no K smoothing and no
per-block scales, so its error on inputs with a large K bias is far above ours (the bench's check column shows
it beside ours). What it computes, per call:

1. Q, K and V each divided by ``amax / 448`` (one amax per tensor) and cast to e4m3 (``quantize_per_tensor``);
2. cuDNN's fused kernel: S = Q8.K8^T x dq x dk x sm_scale in fp32, softmax, P8 = e4m3(P x 448),
   O = P8.V8 x dv / 448, written in the inputs' dtype where cuDNN builds that (Blackwell), else as e4m3
   O / dv and widened by one more pass (Hopper: cuDNN 9.19 builds fp16/bf16 O only on Blackwell).

Step 1 is plain torch (an amax and a cast per tensor); ``kernel_only`` times step 2 alone, with O's widening
where cuDNN writes e4m3 O (two torch passes: 0.85 ms of 10.1 at B2 H32 N16384 D128 on the H200, measured by
:func:`widening_ms`); :meth:`CudnnFp8.graph_only` is the fused graph alone, its e4m3 O left as it is.

The Python package is ``nvidia-cudnn-frontend`` (``pip install nvidia-cudnn-frontend``; the GPU image here has the cuDNN library but
not the package: carry it as a wheel, ``scripts/build_wheelhouse.sh --cudnn``). The graph is built once per
(shape, dtype, causal, sm_scale) and kept.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

import torch

from sagelib.backends import Backend
from sagelib.contract.arguments import check_call
from sagelib.errors import InputError

E4M3_MAX = 448.0
_SCALARS = ("descale_q", "descale_k", "descale_v", "descale_s", "scale_s", "scale_o")


@dataclass(frozen=True)
class GraphKey:
    """What a built graph is specialised for."""

    batch: int
    heads: int
    seq_q: int
    seq_kv: int
    head_dim: int
    dtype: torch.dtype
    causal: bool
    sm_scale: float
    device: int


def quantize_per_tensor(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x as e4m3 with one scale: (x / d).to(e4m3) and d = amax(|x|) / 448 (a [1, 1, 1, 1] float32 tensor on x's
    device, never read back by the host). An all-zero tensor gets d = 1."""
    amax = x.abs().amax().float()
    descale = torch.where(amax > 0, amax / E4M3_MAX, torch.ones_like(amax)).reshape(1, 1, 1, 1)
    return (x.float() / descale).to(torch.float8_e4m3fn), descale


class CudnnFp8(Backend):
    name = "cudnn-fp8"
    description = "cuDNN FP8 fused attention (cudnn-frontend sdpa_fp8, per-tensor scales)"
    quantized = True

    def unavailable_reason(self) -> str | None:
        if not torch.cuda.is_available():
            return "needs a CUDA GPU (sm_90 or newer); torch sees none"
        major, minor = torch.cuda.get_device_capability()
        if major < 9:
            return f"cuDNN's FP8 attention needs compute capability 9.0 or newer; this GPU is {major}.{minor}"
        try:
            _cudnn()
        except ImportError as exc:
            return (f"the cudnn-frontend Python package does not import ({exc}); pip install nvidia-cudnn-frontend, "
                    "or carry it as a wheel (scripts/build_wheelhouse.sh --cudnn)")
        return None

    def attention(self, q, k, v, *, causal=False, sm_scale=None, layout="HND", return_lse=False):
        check_call(causal=causal, sm_scale=sm_scale, return_lse=return_lse)
        if return_lse:
            raise InputError("return_lse: cudnn-fp8 does not return the log-sum-exp here; use cuda-sm90 or the "
                             "reference backend when lse is needed")
        graph, key = self._graph_for(q, k, v, causal=causal, sm_scale=sm_scale, layout=layout)
        return _graph_call(graph, key, _quantized(q, k, v, layout), layout)()

    def kernel_only(self, q, k, v, *, causal=False, sm_scale=None, layout="HND"):
        graph, key = self._graph_for(q, k, v, causal=causal, sm_scale=sm_scale, layout=layout)
        return _graph_call(graph, key, _quantized(q, k, v, layout), layout)

    def graph_only(self, q, k, v, *, causal=False, sm_scale=None, layout="HND"):
        """A closure that runs cuDNN's fused graph alone on operands quantized ahead, returning O as cuDNN wrote it
        ([B, H, N, D]; e4m3, scaled by 1 / dv, where it cannot write the inputs' dtype): the anchor's kernel time."""
        graph, key = self._graph_for(q, k, v, causal=causal, sm_scale=sm_scale, layout=layout)
        return _graph_call(graph, key, _quantized(q, k, v, layout), layout, widen=False)

    def _graph_for(self, q, k, v, *, causal, sm_scale, layout):
        if layout not in ("HND", "NHD"):
            raise InputError(f"layout: expected 'HND' or 'NHD', got {layout!r}")
        if q.dtype not in (torch.float16, torch.bfloat16) or k.dtype != q.dtype or v.dtype != q.dtype:
            raise InputError(f"q, k, v: cudnn-fp8 takes fp16 or bf16 of one dtype, got {q.dtype}, {k.dtype}, "
                             f"{v.dtype}")
        if not q.is_cuda:
            raise InputError(f"q: cudnn-fp8 runs on a CUDA device; q is on {q.device}")
        qh, kh, vh = ((t.transpose(1, 2) if layout == "NHD" else t) for t in (q, k, v))  # views: shapes only
        if kh.shape[1] != qh.shape[1] or vh.shape != kh.shape:
            raise InputError(f"k, v: cudnn-fp8 here takes as many key/value heads as query heads (q {tuple(q.shape)}, "
                             f"k {tuple(k.shape)}, v {tuple(v.shape)}); expand K and V for grouped-query attention")
        b, h, n_q, d = qh.shape
        scale = float(sm_scale) if sm_scale is not None else 1.0 / math.sqrt(d)
        key = GraphKey(b, h, n_q, kh.shape[2], d, q.dtype, bool(causal), scale, q.device.index or 0)
        return _graph(key), key


def _hnd(t: torch.Tensor, layout: str) -> torch.Tensor:
    return (t.transpose(1, 2) if layout == "NHD" else t).contiguous()


def _quantized(q, k, v, layout: str) -> list:
    """Q, K and V in HND, each as (e4m3, descale): the graph's operands."""
    return [quantize_per_tensor(_hnd(t, layout)) for t in (q, k, v)]


def _graph_call(graph: "_Graph", key: GraphKey, quantized: list, layout: str, widen: bool = True):
    """A closure running ``graph`` on ``quantized`` into one output buffer: O in the inputs' dtype and the caller's
    layout, or (``widen=False``) O as cuDNN wrote it, [B, H, N, D]."""
    raw = graph.fp8_out and not widen
    out = torch.empty((key.batch, key.heads, key.seq_q, key.head_dim),
                      dtype=torch.float8_e4m3fn if raw else key.dtype, device=quantized[0][0].device)
    launch = graph.bind(quantized, out, widen=widen)

    def run():
        launch()
        return out.transpose(1, 2) if widen and layout == "NHD" else out

    return run


def widen_e4m3(o: torch.Tensor, out: torch.Tensor, dv: torch.Tensor) -> None:
    """out = O * dv from cuDNN's e4m3 O (O / dv): the widening copy, then the scale in place (two passes over O)."""
    out.copy_(o)
    out.mul_(dv)


@cache
def _cudnn():
    import cudnn  # nvidia-cudnn-frontend

    return cudnn


@cache
def _graph(key: GraphKey) -> "_Graph":
    """O written in the inputs' dtype where this cuDNN builds it, else in e4m3 and widened after the call.

    cuDNN 9.19 builds fp16/bf16 O only on Blackwell (it says so, on the H200): Hopper tries e4m3 O first."""
    e4m3_first = torch.cuda.get_device_capability(key.device)[0] < 10
    errors = []
    for fp8_out in (e4m3_first, not e4m3_first):
        try:
            with torch.cuda.device(key.device):
                return _Graph(key, fp8_out=fp8_out)
        except Exception as exc:  # cudnn-frontend raises its own error types
            errors.append(f"with O in {'e4m3' if fp8_out else key.dtype}: {exc}")
    raise InputError(f"cudnn-fp8: cuDNN builds no FP8 attention for {key}: {'; '.join(errors)}")


class _Graph:
    """One built cudnn-frontend FP8 SDPA graph and its workspace."""

    def __init__(self, key: GraphKey, fp8_out: bool):
        cudnn = _cudnn()
        self.fp8_out = fp8_out
        self.handle = cudnn.create_handle()
        fp8, f32 = cudnn.data_type.FP8_E4M3, cudnn.data_type.FLOAT
        out_type = cudnn.data_type.HALF if key.dtype == torch.float16 else cudnn.data_type.BFLOAT16
        g = cudnn.pygraph(io_data_type=out_type, intermediate_data_type=f32, compute_data_type=f32,
                          handle=self.handle)

        def operand(name, n):
            return g.tensor(name=name, dim=[key.batch, key.heads, n, key.head_dim],
                            stride=[key.heads * n * key.head_dim, n * key.head_dim, key.head_dim, 1], data_type=fp8)

        self.q, self.k, self.v = operand("q", key.seq_q), operand("k", key.seq_kv), operand("v", key.seq_kv)
        self.scalars = {name: g.tensor(name=name, dim=[1, 1, 1, 1], stride=[1, 1, 1, 1], data_type=f32)
                        for name in _SCALARS}
        options = {"attn_scale": key.sm_scale, "use_causal_mask": key.causal}
        try:
            o, _, amax_s, amax_o = g.sdpa_fp8(q=self.q, k=self.k, v=self.v, **self.scalars, generate_stats=False,
                                              **options)
        except TypeError:  # frontends before generate_stats
            o, _, amax_s, amax_o = g.sdpa_fp8(q=self.q, k=self.k, v=self.v, **self.scalars, is_inference=True,
                                              **options)
        shape = [key.batch, key.heads, key.seq_q, key.head_dim]
        o.set_output(True).set_dim(shape).set_stride([key.heads * key.seq_q * key.head_dim,
                                                      key.seq_q * key.head_dim, key.head_dim, 1])
        o.set_data_type(fp8 if fp8_out else out_type)
        for amax in (amax_s, amax_o):
            amax.set_output(True).set_dim([1, 1, 1, 1]).set_stride([1, 1, 1, 1]).set_data_type(f32)
        self.o, self.amax_s, self.amax_o = o, amax_s, amax_o
        g.validate()
        g.build_operation_graph()
        g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
        g.check_support()
        g.build_plans()
        self.graph = g
        device = torch.device("cuda", key.device)
        self.workspace = torch.empty(g.get_workspace_size(), dtype=torch.uint8, device=device)
        self.amax_out = torch.empty(2, 1, 1, 1, dtype=torch.float32, device=device)
        #: P's scale into e4m3 and back; O is written unscaled in the inputs' dtype
        self.p_scale = torch.full((1, 1, 1, 1), E4M3_MAX, dtype=torch.float32, device=device)
        self.p_descale = torch.full((1, 1, 1, 1), 1.0 / E4M3_MAX, dtype=torch.float32, device=device)
        self.one = torch.ones(1, 1, 1, 1, dtype=torch.float32, device=device)

    def bind(self, quantized, out: torch.Tensor, widen: bool = True):
        """A closure writing O of the quantized operands into ``out`` (the inputs' dtype, [B, H, N, D]); with
        ``widen=False`` and an e4m3 O, ``out`` is that e4m3 O / dv itself. The operand pack (and, for an e4m3 O
        that is widened, its e4m3 buffer) is made once here, not per call."""
        (q8, dq), (k8, dk), (v8, dv) = quantized
        s = self.scalars
        # e4m3 O: |O| <= amax(V) = 448 dv, so O / dv fits e4m3 and is widened by dv after the call
        widened = self.fp8_out and widen
        o = torch.empty(out.shape, dtype=torch.float8_e4m3fn, device=out.device) if widened else out
        pack = {self.q: q8, self.k: k8, self.v: v8, s["descale_q"]: dq, s["descale_k"]: dk, s["descale_v"]: dv,
                s["descale_s"]: self.p_descale, s["scale_s"]: self.p_scale,
                s["scale_o"]: 1.0 / dv if self.fp8_out else self.one,
                self.o: o, self.amax_s: self.amax_out[0:1], self.amax_o: self.amax_out[1:2]}
        cudnn = _cudnn()

        def launch():
            cudnn.set_stream(self.handle, torch.cuda.current_stream(out.device).cuda_stream)
            self.graph.execute(pack, self.workspace, handle=self.handle)
            if widened:
                widen_e4m3(o, out, dv)

        return launch


def widening_ms(shape, dtype=torch.float16, reps: int = 20) -> float:
    """Median GPU ms of widening an e4m3 O of ``shape`` to ``dtype`` (:func:`widen_e4m3`, as a bound graph does on
    Hopper)."""
    o = torch.zeros(shape, dtype=torch.float8_e4m3fn, device="cuda")
    out = torch.empty(shape, dtype=dtype, device="cuda")
    dv = torch.full((1, 1, 1, 1), 0.01, device="cuda")
    times = []
    for _ in range(reps + 2):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        widen_e4m3(o, out, dv)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times[2:])[reps // 2]
