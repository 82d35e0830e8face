"""The per-SM rates of a card that bound an attention kernel, stated or measured.

:class:`Hardware` holds the figures the Phase 1 projections (``sagelib.studies.unit_bounds``)
and the register and occupancy budgets (``sagelib.studies.ownership``) take; each field's
``source`` says where its number comes from. :data:`H200` holds the datasheet and
programming-guide figures; ``sagelib.measure.microbench.measured_hardware`` puts measured
rates in their place.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace


@dataclass(frozen=True)
class Hardware:
    """Per-SM rates of one GPU. ``source`` says where each number comes from."""

    name: str = "NVIDIA H200 (SXM)"
    sms: int = 132
    clock_ghz: float = 1.98  # the clock seen under load on the lent H200 (nvidia-smi, 2026-10-28)
    regs_per_sm: int = 65536
    max_regs_per_thread: int = 255
    smem_per_sm_bytes: int = 228 * 1024
    max_smem_per_cta_bytes: int = 227 * 1024
    max_threads_per_sm: int = 2048
    #: dense int8/e4m3 tensor ops per clock per SM with wgmma (1979 TOPS datasheet at 1.83 GHz)
    wgmma_8bit_ops_per_clk: float = 8192.0
    #: mma.sync 8-bit ops per clock per SM: the datasheet gives none; half of wgmma until measured
    mma_sync_8bit_ops_per_clk: float = 4096.0
    #: P.V ops per clock per SM on the mma.sync path: e4m3 mma.sync, or on sm_90, which has none,
    #: the f16 m16n8k16 the portable kernel widens its operands to (kernels/attn_mma.cu)
    mma_sync_pv_ops_per_clk: float = 4096.0
    #: ex2.approx results per clock per SM (CUDA programming guide, cc 9.0: 16)
    mufu_per_clk: float = 16.0
    #: cvt.rn.f32.s32 results per clock per SM (CUDA programming guide, cc 9.0: 16, "other conversions")
    cvt_i2f_per_clk: float = 16.0
    fp32_per_clk: float = 128.0
    #: whether cvt.rn.f32.s32 competes with exp2 for one unit (the guide lists both at 16; worst case until measured)
    convert_shares_exp2_unit: bool = True
    memory_bytes_per_s: float = 4.25e12  # device copy, read + write, measured (shared/ANCHORS.md)
    source: dict = field(default_factory=lambda: {
        "wgmma_8bit_ops_per_clk": "datasheet (1979 dense int8 TOPS)",
        "mma_sync_8bit_ops_per_clk": "assumption (half of wgmma) until measured",
        "mma_sync_pv_ops_per_clk": "assumption (half of wgmma) until measured",
        "mufu_per_clk": "CUDA programming guide, throughput table, cc 9.0",
        "cvt_i2f_per_clk": "CUDA programming guide, throughput table, cc 9.0",
        "memory_bytes_per_s": "measured device copy, shared/ANCHORS.md",
        "convert_shares_exp2_unit": "assumption (worst case) until measured",
    })

    def per_second(self, per_clk: float) -> float:
        return per_clk * self.sms * self.clock_ghz * 1e9

    def with_measured(self, **rates) -> "Hardware":
        """The same card with measured figures (rates per clock per SM) in place of the stated ones."""
        source = dict(self.source)
        for key in rates:
            source[key] = "measured (sagelib.measure.microbench)"
        return replace(self, source=source, **rates)


H200 = Hardware()

#: 8-bit mma.sync ops per clock per SM on consumer Blackwell (sm_120), dense: the GeForce RTX 5090's 838 dense
#: 8-bit tensor TOPS (fp16 accumulation; NVIDIA RTX Blackwell GPU architecture whitepaper) over 170 SMs at its
#: 2.41 GHz boost. e4m3 with fp32 accumulation runs at half that (issue 36; SageAttention2++, arXiv 2505.21136,
#: accumulates P.V in fp16 for it).
SM120_MMA_SYNC_8BIT_OPS_PER_CLK = 2048.0

#: GB10 (DGX Spark, sm_121): the public figures of issue 36, read not measured. Its P.V rate is e4m3 mma.sync
#: with fp32 accumulation (half of fp16 accumulation); sagelib.studies.sm120 doubles it for the fp16 inner
#: accumulator.
GB10 = Hardware(
    name="NVIDIA GB10 (DGX Spark), stated figures",
    sms=48, clock_ghz=2.1, regs_per_sm=65536, max_regs_per_thread=255,
    smem_per_sm_bytes=100 * 1024, max_smem_per_cta_bytes=99 * 1024, max_threads_per_sm=1536,
    wgmma_8bit_ops_per_clk=0.0,  # no wgmma on sm_120/sm_121 (ptxas refuses it for sm_121a)
    mma_sync_8bit_ops_per_clk=SM120_MMA_SYNC_8BIT_OPS_PER_CLK,
    mma_sync_pv_ops_per_clk=SM120_MMA_SYNC_8BIT_OPS_PER_CLK / 2,
    mufu_per_clk=16.0, cvt_i2f_per_clk=16.0, fp32_per_clk=128.0, convert_shares_exp2_unit=True,
    memory_bytes_per_s=273e9,
    source={
        "sms": "48 SMs (6,144 CUDA cores), NVIDIA DGX Spark specifications; issue 36",
        "clock_ghz": "~2.1 GHz, issue 36 (not measured; the microbenchmarks count SM clocks and need none)",
        "smem_per_sm_bytes": "CUDA C++ Programming Guide, technical specifications, cc 12.x: 100 KB per SM, "
                             "99 KB per block",
        "max_threads_per_sm": "CUDA C++ Programming Guide, technical specifications, cc 12.x: 1,536",
        "mma_sync_8bit_ops_per_clk": "RTX 5090 datasheet (838 dense 8-bit TOPS / 170 SMs / 2.41 GHz); same SM "
                                     "design assumed for GB10 until measured",
        "mma_sync_pv_ops_per_clk": "half the 8-bit rate: e4m3 with fp32 accumulation on consumer Blackwell "
                                   "(issue 36; SageAttention2++)",
        "mufu_per_clk": "CUDA C++ Programming Guide, arithmetic instruction throughput, cc 12.x",
        "cvt_i2f_per_clk": "CUDA C++ Programming Guide, arithmetic instruction throughput, cc 12.x",
        "memory_bytes_per_s": "273 GB/s LPDDR5X, NVIDIA DGX Spark specifications (a peak, not a measured copy)",
    })
