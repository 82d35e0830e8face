// Smoke tests of the Hopper building blocks (kernels/include/hopper/), sm_90a only.
//
// Contract stages: none; these kernels check the data movement and the fragment
// layouts the sm_90a attention kernel will rely on, bit for bit against torch
// (tests/test_hopper_smoke.py through sagelib.cuda.hopper_smoke).
//
// hopper_tma_swizzle_2d  one 128 x 128 int8 tile, TMA (2D map, 128-byte swizzle) on an
//                        mbarrier; writes the shared bytes as they lie and un-swizzled.
// hopper_qk_s8           the score tile of one query block against one key block:
//                        Q 64 x D from a 3D map ([B*H, N, D]), K 128 x D from a 4D map
//                        ([B, H, N, D], rows past N zero-filled), D/32 int8 wgmma
//                        m64n128k32 steps; a producer warpgroup (setmaxnreg down) loads,
//                        the consumer warpgroup (setmaxnreg up) computes; int32 S is
//                        stored decoded from the accumulator fragment.
// hopper_pv_e4m3_d64/128 P (64 x 128 e4m3, global) in the register A fragment against
//                        V^T (D x 128 keys e4m3, 4D map over [B, H, D, N_pad]); fp32 O stored
//                        decoded. The accumulators start at a non-zero value, so the
//                        first step's accumulate == false is tested too.

#include "hopper/tma.cuh"
#include "hopper/warpgroup_regs.cuh"
#include "hopper/wgmma.cuh"
#include "swizzle.cuh"

#define SMOKE_ROW_BYTES 128  // every tile here: rows of 128 int8 / e4m3 values

SAGE_DEVICE void require_atom_aligned(const void *tile) {
  if (smem_address(tile) % SAGE_WGMMA_SW128_ATOM_BYTES != 0) __trap();  // the swizzle is counted from 1024 B
}

extern "C" __global__ void __launch_bounds__(128, 1)
    hopper_tma_swizzle_2d(const __grid_constant__ TensorMap map, int row0, u8 *raw_out, u8 *plain_out) {
  __shared__ __align__(1024) u8 tile[128 * SMOKE_ROW_BYTES];
  __shared__ __align__(8) u64 full;
  require_atom_aligned(tile);
  if (threadIdx.x == 0) {
    tma_prefetch_descriptor(&map);
    mbarrier_init(&full, 1);
    mbarrier_init_fence();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    mbarrier_arrive_expect_tx(&full, sizeof(tile));
    tma_load_2d(tile, &map, &full, 0, row0);
  }
  mbarrier_wait_parity(&full, 0);
  for (int i = threadIdx.x; i < 128 * SMOKE_ROW_BYTES; i += blockDim.x) {
    const int row = i / SMOKE_ROW_BYTES, col = i % SMOKE_ROW_BYTES;
    raw_out[i] = tile[i];
    plain_out[i] = tile[swizzled_offset<SMOKE_ROW_BYTES>(row, col / 16) + col % 16];
  }
}

#define SMOKE_QK_PRODUCER_REGS 40
#define SMOKE_QK_CONSUMER_REGS 232

extern "C" __global__ void __launch_bounds__(256, 1)
    hopper_qk_s8(const __grid_constant__ TensorMap q_map, const __grid_constant__ TensorMap k_map, int batch,
                 int head, int heads, int q0, int k0, int *s_out) {
  __shared__ __align__(1024) i8 q_tile[64 * SMOKE_ROW_BYTES];
  __shared__ __align__(1024) i8 k_tile[128 * SMOKE_ROW_BYTES];
  __shared__ __align__(8) u64 full;
  require_atom_aligned(q_tile);
  require_atom_aligned(k_tile);
  if (threadIdx.x == 0) {
    mbarrier_init(&full, 1);
    mbarrier_init_fence();
  }
  __syncthreads();
  if (warpgroup_index() == 1) {  // producer: one thread issues both copies
    warpgroup_regs_release<SMOKE_QK_PRODUCER_REGS>();
    if (threadIdx.x == 128) {
      tma_prefetch_descriptor(&q_map);
      tma_prefetch_descriptor(&k_map);
      mbarrier_arrive_expect_tx(&full, sizeof(q_tile) + sizeof(k_tile));
      tma_load_3d(q_tile, &q_map, &full, 0, q0, batch * heads + head);
      tma_load_4d(k_tile, &k_map, &full, 0, k0, head, batch);
    }
    return;
  }
  warpgroup_regs_claim<SMOKE_QK_CONSUMER_REGS>();
  const int t = threadIdx.x;
  i32 s[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) s[i] = 0;
  mbarrier_wait_parity(&full, 0);
  const u64 desc_q = wgmma_desc_sw128(q_tile), desc_k = wgmma_desc_sw128(k_tile);
  wgmma_fence();
#pragma unroll
  for (int step = 0; step < SMOKE_ROW_BYTES / 32; ++step)
    if (step == 0) {
      wgmma_m64n128k32_s32_s8_s8<false>(s, wgmma_desc_advance(desc_q, 0), wgmma_desc_advance(desc_k, 0));
    } else {
      wgmma_m64n128k32_s32_s8_s8<true>(s, wgmma_desc_advance(desc_q, 32 * step), wgmma_desc_advance(desc_k, 32 * step));
    }
  wgmma_commit();
  wgmma_wait<0>();
  wgmma_pin(s);
#pragma unroll
  for (int i = 0; i < 64; ++i) s_out[wgmma_acc_row(t, i) * 128 + wgmma_acc_col(t, i)] = s[i];
}

#define SMOKE_PV_STALE_ACCUMULATOR 12345.0f  // must not survive the first step (accumulate == false)

template <int HEAD_DIM>
SAGE_DEVICE void pv_e4m3(const TensorMap &vt_map, int batch, int head, int k0, const u8 *p, float *o_out) {
  __shared__ __align__(1024) u8 vt_tile[HEAD_DIM * SMOKE_ROW_BYTES];
  __shared__ __align__(8) u64 full;
  require_atom_aligned(vt_tile);
  const int t = threadIdx.x;
  if (t == 0) {
    mbarrier_init(&full, 1);
    mbarrier_init_fence();
  }
  __syncthreads();
  if (t == 0) {
    mbarrier_arrive_expect_tx(&full, sizeof(vt_tile));
    tma_load_4d(vt_tile, &vt_map, &full, k0, 0, head, batch);
  }
  float o[HEAD_DIM / 2];
#pragma unroll
  for (int i = 0; i < HEAD_DIM / 2; ++i) o[i] = SMOKE_PV_STALE_ACCUMULATOR;
  u32 a[SMOKE_ROW_BYTES / 32][4];  // P's register fragments, one set per k32 step
#pragma unroll
  for (int step = 0; step < SMOKE_ROW_BYTES / 32; ++step)
#pragma unroll
    for (int w = 0; w < 4; ++w)
      a[step][w] = *reinterpret_cast<const u32 *>(p + wgmma_a8_row(t, w) * SMOKE_ROW_BYTES + 32 * step +
                                                  wgmma_a8_col(t, w));
  mbarrier_wait_parity(&full, 0);
  const u64 desc_vt = wgmma_desc_sw128(vt_tile);
  wgmma_fence();
#pragma unroll
  for (int step = 0; step < SMOKE_ROW_BYTES / 32; ++step)
    if (step == 0) {
      wgmma_pv_step<HEAD_DIM, false>(o, a[step], desc_vt);
    } else {
      wgmma_pv_step<HEAD_DIM, true>(o, a[step], wgmma_desc_advance(desc_vt, 32 * step));
    }
  wgmma_commit();
  wgmma_wait<0>();
  wgmma_pin(o);
#pragma unroll
  for (int i = 0; i < HEAD_DIM / 2; ++i) o_out[wgmma_acc_row(t, i) * HEAD_DIM + wgmma_acc_col(t, i)] = o[i];
}

extern "C" __global__ void __launch_bounds__(128, 1)
    hopper_pv_e4m3_d64(const __grid_constant__ TensorMap vt_map, int batch, int head, int k0, const u8 *p,
                       float *o_out) {
  pv_e4m3<64>(vt_map, batch, head, k0, p, o_out);
}

extern "C" __global__ void __launch_bounds__(128, 1)
    hopper_pv_e4m3_d128(const __grid_constant__ TensorMap vt_map, int batch, int head, int k0, const u8 *p,
                        float *o_out) {
  pv_e4m3<128>(vt_map, batch, head, k0, p, o_out);
}
