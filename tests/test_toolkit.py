"""sagelib.cuda.toolkit: the one search for NVIDIA's tools, on fake install trees (no CUDA needed)."""

import stat
import sys

from sagelib.cuda import toolkit


def _tool(folder, name, executable=True):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR if executable else stat.S_IRUSR | stat.S_IWUSR)
    return str(path)


def _isolated(monkeypatch, tmp_path):
    """PATH, CUDA_HOME, CUDA_PATH and sys.path pointing only into tmp_path."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty-path"))
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setattr(sys, "path", [str(tmp_path / "site")])
    monkeypatch.setattr(toolkit.glob, "glob", lambda pattern: [] if pattern.startswith(("/usr/", "/opt/")) else
                        _real_glob(pattern))


_real_glob = toolkit.glob.glob


def test_path_wins_over_every_install_folder(monkeypatch, tmp_path):
    _isolated(monkeypatch, tmp_path)
    on_path = _tool(tmp_path / "empty-path", "sagelib-test-tool")
    _tool(tmp_path / "cuda" / "bin", "sagelib-test-tool")
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda"))
    assert toolkit.find("sagelib-test-tool") == on_path


def test_cuda_home_then_the_wheels(monkeypatch, tmp_path):
    _isolated(monkeypatch, tmp_path)
    wheel = _tool(tmp_path / "site" / "nvidia" / "cu13" / "bin", "cuobjdump")
    assert toolkit.find("cuobjdump") == wheel
    home = _tool(tmp_path / "cuda" / "bin", "cuobjdump")
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda"))
    assert toolkit.find("cuobjdump") == home


def test_a_file_that_cannot_run_is_not_a_tool(monkeypatch, tmp_path):
    _isolated(monkeypatch, tmp_path)
    _tool(tmp_path / "site" / "nvidia" / "cu13" / "bin", "nvdisasm", executable=False)
    assert toolkit.find("nvdisasm") is None
    assert toolkit.find("definitely-not-a-tool") is None


def test_versioned_folders_newest_first(monkeypatch, tmp_path):
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setattr(sys, "path", [])
    listing = {"/usr/local/cuda-*/bin/nvcc": ["/usr/local/cuda-12.8/bin/nvcc", "/usr/local/cuda-13.0/bin/nvcc",
                                               "/usr/local/cuda-12.10/bin/nvcc"],
               "/opt/nvidia/nsight-compute/*/nvcc": [], "/opt/nvidia/nsight-compute*/nvcc": []}
    monkeypatch.setattr(toolkit.glob, "glob", lambda pattern: listing.get(pattern, []))
    assert toolkit.candidates("nvcc") == ["/usr/local/cuda/bin/nvcc", "/usr/local/cuda-13.0/bin/nvcc",
                                          "/usr/local/cuda-12.10/bin/nvcc", "/usr/local/cuda-12.8/bin/nvcc"]


def test_not_found_says_what_to_install():
    reason = toolkit.not_found("ncu")
    assert reason.startswith("ncu not found on PATH") and "Nsight Compute" in reason
    assert "nvidia-cuda-cuobjdump" in toolkit.not_found("cuobjdump")
