// Leave-one-out switches for timing experiments (`sagelib sweep --ablate`): each
// removes one unit's work from the consumer loop so the time it costs shows as a
// difference (device/METHOD.md: place time inside a kernel by leaving a stage out).
// The outputs are WRONG with any switch on; the default build has them all off.
//   SM90_ABLATE_EXP2  exp2 by an FMA instead of the MUFU unit
//   SM90_ABLATE_PV    no P.V wgmma (the inner accumulator is zero)
//   SM90_ABLATE_QK    no Q.K^T wgmma after the first block (scores reused)
//   SM90_ABLATE_CVT   scores reinterpreted as floats instead of converted (no I2FP)
//   SM90_ABLATE_PACK  P not converted to e4m3 (the fp32 bits truncated instead)
//   SM90_ABLATE_KV_LOADS  no K/V copies once the ring has been filled once: the producer arrives on
//                     each stage's `full` barrier without a transfer, and the consumers read the
//                     stale (valid, earlier) K/V bytes; what the L2-to-SM traffic costs in time and power
#pragma once

#ifndef SM90_ABLATE_EXP2
#define SM90_ABLATE_EXP2 0
#endif
#ifndef SM90_ABLATE_PV
#define SM90_ABLATE_PV 0
#endif
#ifndef SM90_ABLATE_QK
#define SM90_ABLATE_QK 0
#endif
#ifndef SM90_ABLATE_CVT
#define SM90_ABLATE_CVT 0
#endif
#ifndef SM90_ABLATE_PACK
#define SM90_ABLATE_PACK 0
#endif
#ifndef SM90_ABLATE_KV_LOADS
#define SM90_ABLATE_KV_LOADS 0
#endif
