"""The studies the notebooks show: the Phase 1 models, the contract's sweeps, the figures."""
