"""sagelib.records.datafile: errors that point at a line, hashing, repository-relative paths."""

import hashlib
import re
from datetime import datetime, timedelta, timezone

import pytest

from sagelib.records.datafile import (
    UTC_FORMAT,
    DataFileError,
    canonical_json,
    repo_relative,
    sha256_file,
    utc_stamp,
)


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


def test_utc_stamp_is_the_one_spelling_of_recorded_times():
    assert UTC_FORMAT == "%Y-%m-%dT%H:%M:%SZ"
    assert utc_stamp(datetime(2026, 8, 26, 16, 30, 5, 999, tzinfo=timezone.utc)) == "2026-08-26T16:30:05Z"
    ahead = timezone(timedelta(hours=2))  # another zone is converted, not relabelled
    assert utc_stamp(datetime(2026, 8, 26, 18, 30, 5, tzinfo=ahead)) == "2026-08-26T16:30:05Z"
    before = datetime.now(timezone.utc).replace(microsecond=0)
    now = utc_stamp()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", now)
    assert datetime.strptime(now, UTC_FORMAT).replace(tzinfo=timezone.utc) >= before
    with pytest.raises(ValueError, match="when: expected a datetime with a time zone.*got the naive"):
        utc_stamp(datetime(2026, 8, 26, 16, 30))
