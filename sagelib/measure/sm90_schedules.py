"""The Hopper kernel's build variants that ``sagelib sweep`` times: data only, no logic.

Kept apart from :mod:`sagelib.measure.sweep_sm90` (which builds and times them) so that an edit to the
list of experiment switches (a switch added to ``kernels/include/attn_sm90/``, or one removed when its
experiment closes) touches this file alone. A schedule is a name and the ``-D`` macro options of one
build of ``kernels/attn_sm90.cu`` (the macros of ``kernels/include/attn_sm90/mainloop.cuh``); the names
are what recorded sweeps (``data/results/*-sm90-sweep*.json``, ``sagelib.studies.sweep_records``) call
them, so a name keeps its meaning once recorded.
"""

from __future__ import annotations

#: The shapes timed when --shapes is not given: (B, H, N, D, causal).
SHAPES = [(2, 32, 16384, 128, False), (2, 32, 16384, 128, True), (2, 32, 16384, 64, False), (32, 32, 1024, 128, False)]

#: Schedule variants: name -> the build's -D options. "default" is the kernel as it ships: the alternatives that
#: measured slower were removed (the experiment log names the trees that have them), so an experiment's build
#: comes in with --schedule NAME="-D..." for one run. A name starting with "d64" is built for head_dim 64 only.
SCHEDULES: dict[str, tuple[str, ...]] = {
    "default": (),
}

#: Leave-one-out builds (wrong outputs, timing only; kernels/include/attn_sm90/ablation.cuh), timed with --ablate.
ABLATIONS: dict[str, tuple[str, ...]] = {
    "ablate: no exp2": ("-DSM90_ABLATE_EXP2=1",),
    "ablate: no P.V": ("-DSM90_ABLATE_PV=1",),
    "ablate: no Q.K^T": ("-DSM90_ABLATE_QK=1",),
    "ablate: no P.V, no Q.K^T": ("-DSM90_ABLATE_PV=1", "-DSM90_ABLATE_QK=1"),
    "ablate: no score cvt": ("-DSM90_ABLATE_CVT=1",),
    "ablate: no e4m3 pack": ("-DSM90_ABLATE_PACK=1",),
    "ablate: no K/V loads": ("-DSM90_ABLATE_KV_LOADS=1",),
}

#: Ring depths (the `stages` template argument) timed for the default schedule, per head_dim.
STAGES = {128: (2, 4), 64: (4, 6)}
#: ... and for the default schedule of the three-consumer geometry (64-key stages, --cta-k 64).
STAGES_K64 = {128: (4, 6), 64: (4, 8)}
