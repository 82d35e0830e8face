// Kernel parameter lists: one plain C struct per __global__ function, naming its parameters in order,
// and the flag bits of the attention kernels. This header is the single source of both on the host
// side: sagelib.cuda.params parses it (members -> the launch's argument list with each C type, enum ->
// values) and the launchers build their arguments from it by name; tests/test_kernel_params.py checks
// that each kernel's signature lists exactly these members, in this order, with these types.
//
// Why the kernels still take scalar parameters rather than the struct by value: with a struct, NVVM
// merges adjacent members' loads (ld.param.v2.u32 of two ints) and loads them in another order, which
// changes register allocation and scheduling. With nvcc 13.0 every kernel's SASS moved: quant_kv.cu
// (half its instances, by value and __grid_constant__ alike), quant_qk.cu and attn_mma.cu (all
// instances tried, by value) and attn_sm90.cu (all five, __grid_constant__, which its TensorMaps need).
// The param-space layout is the same either way (each parameter at its natural alignment, in order),
// so the launch bytes would not change; only the machine code would.
//
// No contract stage, no state, no sync; plain C for every target (sm_89, sm_90, sm_90a, sm_120a,
// sm_121a); nothing here emits code.
// Parser rules (sagelib/cuda/params.py): one member per line, `TYPE NAME;` (`T *NAME;` for a pointer),
// an optional trailing // comment; types: pointers, i64, int, u32, float, double, TensorMap.
#pragma once
#include "common.cuh"

// The `flags` member of AttnMmaParams and AttnSm90Params.
enum AttnFlags {
  ATTN_CAUSAL = 1,
  ATTN_PER_THREAD = 2,
  ATTN_OUT_BF16 = 4,
};

// quant_qk.cu: quant_int8_kernel (contract stage 2).
struct QuantQkParams {
  const u16 *x;
  i64 x_sb;
  i64 x_sh;
  i64 x_sn;
  i8 *xq;
  i64 q_sb;
  i64 q_sh;
  i64 q_sn;
  float *scale;
  int n_tokens;
  int n_groups;
  int tile_shift;      // GroupGeometry, quant_int8.cuh
  int per_tile_shift;
  int mod_mask;
  int div_shift;
  u32 *zero;           // zero_words words set to 0 by this launch (a later launch's workspace), or null
  int zero_words;
};

// quant_kv.cu: quant_kv_kernel (contract stages 1, 2 for K, 5 for V).
struct QuantKvParams {
  const u16 *k;
  i64 k_sb;
  i64 k_sh;
  i64 k_sn;
  const u16 *v;
  i64 v_sb;
  i64 v_sh;
  i64 v_sn;
  i8 *k_int8;
  i64 kq_sb;
  i64 kq_sh;
  i64 kq_sn;
  float *k_scale;
  int k_groups;
  int tile_shift;      // GroupGeometry, quant_int8.cuh
  int per_tile_shift;
  int mod_mask;
  int div_shift;
  u16 *km;             // [B, H, D] k mean in the input dtype
  u8 *v_fp8;           // [B, H, D, n_pad]
  float *v_scale;      // [B, H, D]
  int n_pad;
  float v_scale_max;
  float inv_v_scale_max;  // fl32(1 / scale_max)
  int permute_v;
  int *workspace_ints;    // zeroed: [ticket, head_done[B*H]]
  double *k_sum;
  u32 *v_amax;
  u32 *km_word;
  u32 *vmult_word;
  int n_tokens;
  int heads;
  int batch;
  int lag;
  int do_k;
  int do_v;
  double inv_n;        // fl64(1 / n_tokens)
};

// attn_mma.cu: attn_mma_kernel (contract stages 3-7).
struct AttnMmaParams {
  const i8 *q;
  i64 q_sb;
  i64 q_sh;
  i64 q_sn;
  const i8 *k;
  i64 k_sb;
  i64 k_sh;
  i64 k_sn;
  const u8 *v;
  const float *q_scale;
  const float *k_scale;
  const float *v_scale;
  u16 *out;
  i64 o_sb;
  i64 o_sh;
  i64 o_sn;
  float *lse;
  int n_q;
  int n_kv;
  int n_pad;
  int heads_q;
  int heads_kv;
  int q_groups;
  int k_groups;
  int flags;           // AttnFlags
  int causal_shift;
  float sm_scale_log2e;
};
