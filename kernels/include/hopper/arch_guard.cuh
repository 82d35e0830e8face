// The headers under hopper/ use instructions that exist only on sm_90a (wgmma,
// setmaxnreg, and the TMA/mbarrier forms the Hopper kernel relies on). Including one
// from a kernel built for any other target is an error at compile time, so the
// portable kernels cannot pick them up by accident. The host pass (no __CUDA_ARCH__)
// and sm_90a's device pass (__CUDA_ARCH_FEAT_SM90_ALL) see nothing.
// No contract stage, no state, no sync. Target: sm_90a.
#pragma once

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "kernels/include/hopper/ is for sm_90a only: build this kernel for sm_90a (instances.ONLY_ARCHS)"
#endif
