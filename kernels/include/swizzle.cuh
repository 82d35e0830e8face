// Shared-memory tile addressing with an XOR swizzle of 16-byte chunks.
//
// A tile is rows of ROW_BYTES (64 or 128) bytes. Viewed as 128-byte lines of
// eight 16-byte slots, slot s of line L is stored at slot s ^ (L % 8). Eight
// consecutive rows read at the same logical chunk (one ldmatrix 8x8 matrix)
// then land in eight different slots: no bank conflicts, for both row widths.
// Used by stage 3 and 6 tiles (attn_mma.cu) and the TMA 128-byte swizzle (hopper/). Pure index
// arithmetic: no state, no sync. Targets: all.
#pragma once
#include "common.cuh"

template <int ROW_BYTES>
SAGE_DEVICE u32 swizzled_offset(int row, int chunk) {
  static_assert(ROW_BYTES == 64 || ROW_BYTES == 128, "row width");
  const int logical = row * ROW_BYTES + chunk * 16;
  const int line = logical >> 7;
  const int slot = (logical >> 4) & 7;
  return (u32)((line << 7) | ((slot ^ (line & 7)) << 4));
}
