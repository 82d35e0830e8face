"""Measuring kernels: timing and sweeps, ceilings, parity, profiling, power, targets, microbenchmarks."""
