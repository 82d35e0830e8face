"""sagelib.datafile: errors that point at a line, hashing, repository-relative paths."""

import hashlib

import pytest

from sagelib.datafile import DataFileError, canonical_json, repo_relative, sha256_file


def test_error_message_names_file_line_and_fix():
    error = DataFileError("data/x.yaml", 7, "unknown kind 'z'", "use one of a, b")
    assert str(error) == "data/x.yaml line 7: unknown kind 'z'. Fix: use one of a, b"
    assert isinstance(error, ValueError)


def test_sha256_file_and_canonical_json(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"abc" * 1000)
    assert sha256_file(path) == hashlib.sha256(b"abc" * 1000).hexdigest()
    assert canonical_json({"b": 1, "a": "é"}) == '{"a":"é","b":1}'


def test_repo_relative(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "f").write_text("x")
    assert repo_relative("data/f", tmp_path) == "data/f"
    assert repo_relative(tmp_path / "data" / "f", tmp_path) == "data/f"
    assert repo_relative("data/../data/f", tmp_path) == "data/f"
    with pytest.raises(ValueError, match="outside the repository"):
        repo_relative("../f", tmp_path / "data")
    (tmp_path / "data" / "link").symlink_to("/etc")
    with pytest.raises(ValueError, match="outside the repository"):
        repo_relative("data/link/hostname", tmp_path)
    with pytest.raises(ValueError, match="repository root itself"):
        repo_relative(".", tmp_path)
