// attn_sm90.cu's parameter list (contract stages 3-7), in the form and under the rules of ../params.cuh,
// which also holds the flag bits (AttnFlags). Apart because its tensor maps need hopper/tma.cuh (sm_90a
// only). The kernel takes these as scalar parameters, each TensorMap `const __grid_constant__`; see
// ../params.cuh for why not the struct by value. No state, no sync, no code. Target: sm_90a.
#pragma once
#include "../hopper/tma.cuh"
#include "../params.cuh"

struct AttnSm90Params {
  TensorMap q_map;     // [B*H_q, N_q, D] int8 (sagelib.cuda.tma)
  TensorMap k_map;     // [B, H_kv, N_kv, D] int8
  TensorMap v_map;     // [B, H_kv, D, N_pad] e4m3
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
  int heads_q;
  int heads_kv;
  int batch;
  int q_groups;
  int k_groups;
  int flags;           // AttnFlags
  int causal_shift;
  float sm_scale_log2e;
  int *tile_counter;   // zeroed: the dynamic tile scheduler's (scheduler.cuh)
  u64 *trace;          // SM90_TRACE builds only (trace.cuh), else null
};
