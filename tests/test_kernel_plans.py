"""The fast host path (sagelib.backends.kernels.plans) hands the kernels exactly the general path's arguments.

No GPU: the kernels' functions, the TMA encoder and the driver are test doubles that record what they are given.
The general path (prepare_for + run_attention's launch) and a plan run on the same CPU tensors; every argument of
every launch is compared as the bytes the driver would copy: numbers and tensor maps byte for byte, the inputs'
addresses equal, the plan's own buffers non-null where the general path's are, null where they are null.
"""

import ctypes
import struct as cstruct

import pytest
import torch

from sagelib.backends.kernels import mma, operands, plans, quantizers, sm90
from sagelib.cuda import params, prepared
from sagelib.cuda.tma import TENSOR_MAP_ALIGN, TensorMap, tensor_map_spec

_KIND = {"quant_qk.cu": "QuantQkParams", "quant_kv.cu": "QuantKvParams", "attn_mma.cu": "AttnMmaParams",
         "attn_sm90.cu": "AttnSm90Params"}


class FakeFunction:
    def __init__(self, ptr, struct):
        self.ptr, self.struct = ptr, struct


class FakeDriver:
    """Records each launch's parameters (read back through the kernelParams pointers) and each memset."""

    def __init__(self, functions):
        self.functions, self.calls = functions, []

    def launch(self, function, gx, gy, gz, bx, by, bz, smem, stream, pointers, extra):
        struct = self.functions[function.value]
        sizes = [params.SIZES[f.ctype][0] for f in params.fields(struct)]
        data = [ctypes.string_at(pointers[i], size) for i, size in enumerate(sizes)]
        self.calls.append(("launch", struct, (gx, gy, gz), (bx, by, bz), smem, stream, data))
        return 0

    def launch_converted(self, *args):  # the same call with every argument already a ctypes object
        function, *dims, smem, stream, pointers, extra = args
        return self.launch(function, *(d.value for d in dims), smem.value, stream.value or 0, pointers, extra)

    def memset(self, address, value, nbytes, stream):
        self.calls.append(("memset", address, value, nbytes, stream))
        return 0


def _fake_map(tensor, box, swizzle="128B", driver=None):
    spec = tensor_map_spec(tensor, box, swizzle)
    words = (*spec.dims, *spec.strides, *spec.box, len(spec.swizzle), len(spec.data_type))  # no address
    return TensorMap(cstruct.pack(f"<{len(words)}q", *words).ljust(128, b"\0"), TENSOR_MAP_ALIGN, spec, tensor)


@pytest.fixture
def doubles(monkeypatch):
    functions = {}

    def load_function(kernel, name, arch=None, options=()):
        ptr = 0x1000 + len(functions)
        functions[ptr] = _KIND[kernel]
        return FakeFunction(ptr, _KIND[kernel])

    general = []
    for module in (quantizers, mma, sm90):
        monkeypatch.setattr(module, "load_function", load_function)
        monkeypatch.setattr(module, "run_spec", lambda spec: general.append(spec))
    monkeypatch.setattr(quantizers, "require_cuda", lambda *a: None)
    monkeypatch.setattr(quantizers, "max_active_blocks", lambda fn, threads, smem=0: 3)
    monkeypatch.setattr(quantizers, "sm_count", lambda dev: 132)
    monkeypatch.setattr(sm90, "sm_count", lambda dev: 132)
    monkeypatch.setattr(sm90, "tensor_map", _fake_map)
    monkeypatch.setattr(prepared, "set_dynamic_smem", lambda fn, n: None)
    driver = FakeDriver(functions)
    monkeypatch.setattr(prepared, "_DRIVER", [driver])
    monkeypatch.setattr(plans, "direct_launches", lambda: True)
    return general, driver


def _qkv(layout, n_q=300, n_kv=260, heads=(4, 2), d=128, dtype=torch.float16, seed=0):
    g = torch.Generator().manual_seed(seed)
    make = (lambda h, n: torch.randn(2, h, n, d, generator=g).to(dtype)) if layout == "HND" else \
        (lambda h, n: torch.randn(2, n, h, d, generator=g).to(dtype))
    return make(heads[0], n_q), make(heads[1], n_kv), make(heads[1], n_kv)


def _general(kernel, q, k, v, **call):
    target = sm90.TARGET if kernel == "sm90" else mma.MMA_TARGET
    p = quantizers.prepare_for(target, q, k, v, flavour=None, smooth_k=True, check_finite=False,
                               **{key: call[key] for key in ("causal", "sm_scale", "layout", "granularity",
                                                             "pv_accum", "causal_alignment")})
    out, out_hnd, _ = operands.output_buffers(p, False)
    if kernel == "sm90":
        sm90.run_spec(sm90.attention_spec(p, out_hnd, None, cta_k=call["cta_k"]))
    else:
        mma.run_spec(mma.attention_spec(p, out_hnd, None))
    return out


CASES = [
    ("sm90", dict(layout="HND", causal=False, granularity="per_thread", pv_accum="fp32+fp32", cta_k=None)),
    ("sm90", dict(layout="NHD", causal=True, granularity="per_warp", pv_accum="fp32+fp32", cta_k=64)),
    ("sm90", dict(layout="HND", causal=True, granularity="per_thread", pv_accum="fp32+fp16", cta_k=None)),
    ("mma", dict(layout="HND", causal=True, granularity="per_thread", pv_accum="fp32+fp16", cta_k=None)),
    ("mma", dict(layout="NHD", causal=False, granularity="per_warp", pv_accum="fp32+fp32", cta_k=None)),
]


@pytest.mark.parametrize("kernel,call", CASES,
                         ids=[f"{k}-{c['layout']}-{c['granularity']}-{c['pv_accum']}" for k, c in CASES])
def test_a_plan_launches_what_the_general_path_launches(doubles, kernel, call):
    general, driver = doubles
    call = dict(call, sm_scale=0.1, causal_alignment="top_left")
    q, k, v = _qkv(call["layout"])
    _general(kernel, q, k, v, **call)
    plan = plans.Plan(kernel, q, k, v, stream=7, **call)
    assert plan.supported
    out = plan(q, k, v)
    assert out.shape == q.shape and out.dtype == q.dtype
    launches = [c for c in driver.calls if c[0] == "launch"]
    assert [c[0] for c in driver.calls] == ["launch"] * 3  # no memset: the Q quantizer clears the scratch
    assert [c[1] for c in launches] == [s.struct for s in general]
    given = {"QuantQkParams": {"x": q}, "QuantKvParams": {"k": k, "v": v}}
    # what only the plan's Q launch carries: its scratch (the K/V workspace and the tile counter) to clear
    clears = {"zero": plan.scratch.data_ptr().to_bytes(8, "little"),
              "zero_words": (plan.scratch.numel() // 4).to_bytes(4, "little")}
    for spec, (_, struct, grid, block, smem, stream, data) in zip(general, launches):
        assert (grid, block, smem, stream) == (tuple(spec.grid), tuple(spec.block), spec.shared_mem, 7)
        inputs = {**given.get(struct, {}), "out": out}
        for f, arg, got in zip(params.fields(struct), spec.arguments(), data):
            want = prepared.argument_bytes(arg)
            if struct == "QuantQkParams" and f.name in clears:
                assert got == clears[f.name] and want == bytes(len(want)), f.name  # the general path: none
            elif f.name in inputs:
                assert int.from_bytes(got, "little") == inputs[f.name].data_ptr(), f.name
                assert arg is not None and arg.data_ptr() == inputs[f.name].data_ptr() or f.name == "out"
            elif f.ctype == "ptr":
                assert (int.from_bytes(got, "little") == 0) == (arg is None), f.name
            else:
                assert got == want, f"{struct}.{f.name}"


def test_the_next_call_rewrites_only_the_inputs_and_the_output(doubles):
    _, driver = doubles
    call = dict(layout="HND", causal=False, sm_scale=None, granularity="per_thread", pv_accum="fp32+fp32",
                causal_alignment="bottom_right", cta_k=None)
    q, k, v = _qkv("HND")
    plan = plans.Plan("sm90", q, k, v, stream=3, **call)
    plan(q, k, v)
    first = [c for c in driver.calls if c[0] == "launch"]
    q2, k2, v2 = _qkv("HND", seed=1)
    driver.calls.clear()
    out2 = plan(q2, k2, v2)
    second = [c for c in driver.calls if c[0] == "launch"]
    moved = {"QuantQkParams": {"x": q2}, "QuantKvParams": {"k": k2, "v": v2}, "AttnSm90Params": {"out": out2}}
    for a, b in zip(first, second):
        names = [f.name for f in params.fields(a[1])]
        changed = {n for n, x, y in zip(names, a[6], b[6]) if x != y}
        assert changed <= set(moved[a[1]]), (a[1], changed)
        for name, tensor in moved[a[1]].items():
            assert int.from_bytes(b[6][names.index(name)], "little") == tensor.data_ptr()


def test_padded_or_unaligned_calls_go_the_general_way(doubles):
    call = dict(layout="HND", causal=False, sm_scale=None, granularity="per_thread", pv_accum="fp32+fp32",
                causal_alignment="bottom_right", cta_k=None)
    q, k, v = _qkv("HND", d=80)
    assert not plans.Plan("mma", q, k, v, stream=0, **call).supported
    assert plans.run("mma", q, k, v, **call) is None  # a CPU tensor never takes a plan


def test_a_plan_refuses_what_the_general_path_refuses(doubles):
    q, k, v = _qkv("HND")
    with pytest.raises(ValueError, match="granularity"):
        plans.Plan("mma", q, k, v, stream=0, layout="HND", causal=False, sm_scale=None, granularity="per_block",
                   pv_accum="fp32+fp32", causal_alignment="bottom_right", cta_k=None)


def test_a_prepared_launch_refuses_a_dynamic_member_that_is_no_pointer(doubles):
    spec = prepared.LaunchSpec(FakeFunction(1, "QuantQkParams"), (1, 1, 1), (1, 1, 1), "QuantQkParams", {})
    with pytest.raises(prepared.KernelLaunchError, match="n_tokens"):
        prepared.PreparedLaunch(spec, ("n_tokens",), direct=True)


def test_plans_can_be_switched_off(monkeypatch):
    monkeypatch.setenv("SAGELIB_LAUNCH_PLANS", "0")
    assert not plans.enabled()
    monkeypatch.setenv("SAGELIB_LAUNCH_PLANS", "1")
    assert plans.enabled()


def test_a_plan_keeps_no_callers_tensor_alive(doubles):
    import gc
    import weakref

    call = dict(layout="NHD", causal=True, sm_scale=None, granularity="per_thread", pv_accum="fp32+fp32",
                causal_alignment="bottom_right", cta_k=None)
    for kernel in ("sm90", "mma"):
        q, k, v = _qkv("NHD")
        plan = plans.Plan(kernel, q, k, v, stream=0, **call)
        out = plan(q, k, v)
        refs = [weakref.ref(t) for t in (q, k, v, out)]
        del q, k, v, out
        gc.collect()
        assert all(r() is None for r in refs), kernel
        assert plan.supported
