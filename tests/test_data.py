"""Canonical inputs: reproducible, hashed, described; bad names refused."""

import pytest
import torch

from sagelib import inputs as data

SMALL = data.Shape(batch=1, heads=2, tokens=32, head_dim=16)


def test_same_seed_same_tensors_and_hash():
    a, b = data.make("k_outliers", SMALL), data.make("k_outliers", SMALL)
    assert torch.equal(a.k, b.k) and a.sha256 == b.sha256 and len(a.sha256) == 64


def test_hash_changes_with_shape_dtype_and_overrides():
    base = data.make("k_outliers", SMALL).sha256
    assert data.make("k_outliers", data.Shape(1, 2, 33, 16)).sha256 != base
    assert data.make("k_outliers", SMALL, dtype="bf16").sha256 != base
    assert data.make("k_outliers", SMALL, outlier_strength=8.0).sha256 != base


def test_k_outliers_carry_a_per_channel_bias_shared_by_tokens():
    x = data.make("k_outliers", data.Shape(1, 1, 4096, 64), outlier_strength=10.0)
    channel_mean = x.k.float().mean(dim=2).abs()
    assert float(channel_mean.max()) > 5.0  # a bias of 10 * N(0,1) shows in some channel
    assert float(x.q.float().mean(dim=2).abs().max()) < 0.2


def test_heavy_tails_are_heavier_than_gaussian():
    shape = data.Shape(1, 1, 4096, 64)
    g, t = data.make("gaussian", shape), data.make("heavy_tails", shape)
    assert float(t.q.float().abs().max()) > 2 * float(g.q.float().abs().max())


def test_gqa_and_nhd_shapes_and_describe():
    x = data.make("gaussian", data.Shape(2, 4, 10, 16, kv_heads=2, kv_tokens=12), layout="NHD")
    assert x.q.shape == (2, 10, 4, 16) and x.k.shape == (2, 12, 2, 16)
    row = x.describe()
    assert row["input"] == "gaussian" and row["sha256"] == x.sha256[:16] and "kv (2, 12)" in row["shape (B, H, N, D)"]


def test_long_input_defaults_to_a_long_sequence():
    assert data.load_specs()["long"].default_tokens == 16384


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="name: unknown canonical input 'bogus'"):
        data.make("bogus", SMALL)
    with pytest.raises(ValueError, match="dtype: expected one of"):
        data.make("gaussian", SMALL, dtype="fp8")


def test_malformed_spec_file_names_the_input_and_field(tmp_path):
    bad = tmp_path / "specs.yaml"
    bad.write_text("x:\n  kind: gaussian\n  seed: 1\n")
    with pytest.raises(ValueError, match="input 'x' lacks 'description'"):
        data.load_specs(bad)
    bad.write_text("x:\n  kind: lognormal\n  seed: 1\n  description: d\n")
    with pytest.raises(ValueError, match="kind 'lognormal'"):
        data.load_specs(bad)


def test_one_shape_for_every_part_of_sagelib():
    gqa = data.Shape(2, 8, 100, 64, kv_heads=2, kv_tokens=300)
    assert (gqa.seq_q, gqa.seq_kv, gqa.heads_kv) == (100, 300, 2)
    assert data.Shape.from_record(gqa.record()) == gqa
    assert gqa.record() == {"batch": 2, "heads": 8, "seq_q": 100, "seq_kv": 300, "head_dim": 64, "heads_kv": 2}
    # a K/V side equal to the query side is the same shape, whichever way it is spelt
    assert data.Shape(1, 2, 64, 32, kv_tokens=64, kv_heads=2) == data.Shape(1, 2, 64, 32)
    assert data.parse_shape("1:2:64:64:32") == data.Shape(1, 2, 64, 32)
    assert data.parse_shape("1:2:64:96:32").spec == "1:2:64:96:32"
    # the K/V sizes are keyword-only, so a call in another field order fails instead of meaning something else
    with pytest.raises(TypeError):
        data.Shape(1, 2, 64, 96, 32)


def test_random_qkv_sizes_follow_the_layout_and_gqa():
    q, k, v = data.random_qkv(data.Shape(1, 4, 8, 16, kv_heads=2, kv_tokens=12), torch.float16,
                              torch.device("cpu"), "NHD", seed=0)
    assert q.shape == (1, 8, 4, 16) and k.shape == v.shape == (1, 12, 2, 16) and q.dtype == torch.float16
