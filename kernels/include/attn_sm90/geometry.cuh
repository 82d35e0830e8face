// Geometry of the sm_90a attention kernel (contract preset sm90: 128-key blocks).
//
// CTA = 3 warpgroups: warpgroup 0 is the producer (one thread issues TMA copies),
// warpgroups 1 and 2 are consumers of 64 query rows each, 128 rows per tile.
// Registers: setmaxnreg moves them from the producer to the consumers,
// 128 x 24 + 2 x 128 x 240 = 64,512 of the SM's 65,536.
#pragma once

#define SM90_THREADS 384
#define SM90_CTA_Q 128          // query rows per tile
#define SM90_WG_ROWS 64         // query rows per consumer warpgroup
#define SM90_BLOCK_KEYS 128     // keys per ring stage = CTA_K of the sm90 preset
#define SM90_CONSUMER_WARPS 8   // arrivals that release a stage or the Q slot
#define SM90_PRODUCER_REGS 24
#define SM90_CONSUMER_REGS 240
