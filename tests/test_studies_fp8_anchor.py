"""The FP8 anchor's views pair the two kernels of one run and tabulate the error per input."""

from sagelib.studies import fp8_anchor


def _document():
    timed = [("cudnn-fp8 graph alone", "2:32:16384:128", False, 920.0), ("cuda-sm90 kernel only", "2:32:16384:128",
                                                                          False, 870.0),
             ("cudnn-fp8 graph alone", "2:32:16384:64", True, 550.0)]  # ours missing: no row for this case
    return {"device": "NVIDIA H200",
            "graph_only": [{"kernel": k, "shape": s, "causal": c, "tops": t, "median_ms": 1.0} for k, s, c, t in timed],
            "rows": [{"input": "gaussian", "backend": "cuda-sm90", "rel_l1": 0.037621},
                     {"input": "gaussian", "backend": "cudnn-fp8", "rel_l1": 0.058491}]}


def test_speed_rows_pair_the_kernels_of_a_case_and_skip_a_case_with_one():
    rows = fp8_anchor.speed_rows(_document())
    assert rows == [{"case": "B2 H32 N16384 D128", "cuDNN FP8 graph (TOPS)": 920.0, "cuda-sm90 (TOPS)": 870.0,
                     "ours / cuDNN FP8": round(870 / 920, 3)}]


def test_accuracy_rows_put_the_backends_side_by_side():
    assert fp8_anchor.accuracy_rows(_document()) == [{"input": "gaussian", "cuda-sm90": 0.03762, "cudnn-fp8": 0.05849}]
    assert fp8_anchor.device_name(_document()) == "NVIDIA H200"
    assert fp8_anchor.device_name({"device": {"name": "NVIDIA H100"}}) == "NVIDIA H100"
