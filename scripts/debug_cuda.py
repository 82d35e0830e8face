"""Stage-by-stage diagnostics of the CUDA kernels against the contract on small inputs (GPU host).

Prints, per stage, where ours and the contract's differ: scales, int8 values,
k mean, e4m3 bytes, and the attention kernel fed with the CONTRACT's quantized
operands (so a quantizer bug and an attention bug show separately).
"""

import torch

from sagelib import contract
from sagelib.backends.kernels import mma, operands, quantizers


def show(name, ours, ref):
    if ours is None or ref is None:
        print(f"  {name}: ours {ours is None and 'None' or 'set'} ref {ref is None and 'None' or 'set'}")
        return
    if ours.dtype == torch.float8_e4m3fn:
        ours, ref = ours.view(torch.uint8), ref.view(torch.uint8)
    diff = ours != ref
    print(f"  {name}: shape {tuple(ours.shape)} differ {int(diff.sum())}/{diff.numel()}")
    if bool(diff.any()):
        idx = diff.nonzero()[:4].tolist()
        for i in idx:
            print(f"    at {i}: ours {ours[tuple(i)].item()!r} ref {ref[tuple(i)].item()!r}")


def torch_division_semantics():
    a = torch.rand(1 << 20, device="cuda") * 10 + 1e-3
    inv = torch.tensor(1 / 127, dtype=torch.float32)
    print("torch cuda: a/127 == a*fl(1/127):", torch.equal(a / 127.0, a * inv.cuda()),
          "| == true division:", torch.equal(a / 127.0, (a.double() / 127).float()))
    print("torch cuda: 127/a == reciprocal*127:", torch.equal(127.0 / a, a.reciprocal() * 127.0))


def quantizers():
    for preset, gran in (("sm90", "per_thread"), ("sm89", "per_thread"), ("sm89", "per_warp")):
        for n in (6, 200):
            torch.manual_seed(0)
            q = torch.randn(1, 1, n, 128, device="cuda", dtype=torch.float16)
            k = (torch.randn(1, 1, n, 128, device="cuda") + 4 * torch.randn(1, 1, 1, 128, device="cuda")).half()
            ours = quantizers.quantize_qk(q, k, preset=preset, granularity=gran)
            ref = contract.quantize_qk(q, k, preset=preset, granularity=gran)
            print(f"quantize_qk {preset} {gran} N={n}")
            for name in ("km", "q_scale", "k_scale", "q_int8", "k_int8"):
                show(name, getattr(ours, name), getattr(ref, name))
            print("  ours k_scale[:8]", ours.k_scale.flatten()[:8].tolist())
            print("  ref  k_scale[:8]", ref.k_scale.flatten()[:8].tolist())
            v = torch.randn(1, 1, n, 128, device="cuda", dtype=torch.float16)
            ov, rv = quantizers.quantize_v(v, preset=preset), contract.quantize_v(v, preset=preset)
            show("v_scale", ov.v_scale, rv.v_scale)
            show("v_fp8", ov.v_fp8, rv.v_fp8)


def attention_on_contract_operands():
    for gran, n, causal in (("per_thread", 200, False), ("per_warp", 200, False), ("per_thread", 1000, True)):
        torch.manual_seed(1)
        q, k, v = (torch.randn(1, 2, n, 128, device="cuda", dtype=torch.float16) for _ in range(3))
        qk = contract.quantize_qk(q, k, preset="sm89", granularity=gran)
        qv = contract.quantize_v(v, preset="sm89", pv_accum="fp32+fp32")
        p = operands.PreparedAttention(
            q_int8=qk.q_int8, q_scale=qk.q_scale, k_int8=qk.k_int8, k_scale=qk.k_scale,
            km=qk.km[:, :, 0, :], v_fp8=qv.v_fp8, v_scale=qv.v_scale, q_hnd=q, n_q=n, n_kv=n, head_dim=128,
            layout="HND", dtype=q.dtype, granularity=gran, pv_accum="fp32+fp32", causal=causal,
            causal_alignment="bottom_right", sm_scale=128 ** -0.5)
        out = mma.run_attention(p)
        ref = contract.attention(q, k, v, preset="sm89", granularity=gran, causal=causal)
        err = ((out.double() - ref.double()).abs().sum() / ref.double().abs().sum()).item()
        rows = ((out.double() - ref.double()).abs().sum(-1) / ref.double().abs().sum(-1))[0, 0]
        bad = (rows > 0.05).nonzero().flatten()[:16].tolist()
        print(f"attention on contract operands {gran} N={n} causal={causal}: rel_l1 {err:.3e}; bad rows {bad}")
        full = mma.attention(q, k, v, granularity=gran, causal=causal)
        err2 = ((full.double() - ref.double()).abs().sum() / ref.double().abs().sum()).item()
        print(f"  full cuda path rel_l1 {err2:.3e}")


if __name__ == "__main__":
    torch_division_semantics()
    quantizers()
    attention_on_contract_operands()
