"""Our kernels' host code: operands, quantizers and the attention launches (mma.sync, sm_90a)."""
