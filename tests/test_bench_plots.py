"""sagelib.studies.bench_plots: what the charts of notebook 04 say."""

import matplotlib

matplotlib.use("Agg")

from sagelib.studies import bench_plots


def test_the_quantizer_chart_tells_a_share_near_the_target_from_it():
    quantizers = {"copy_tb_s": 4.0, "rows": [
        {"shape": "2:32:16384:128", "what": "Q", "tb_s": 3.4, "gpu_tb_s": 3.44},            # 86%
        {"shape": "2:32:16384:128", "what": "all quantization", "tb_s": 2.7, "gpu_tb_s": 2.784}]}  # 69.6%
    fig = bench_plots.quantizer_bandwidth(quantizers, title="test")
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert texts == ["86%", "69.6%"]
