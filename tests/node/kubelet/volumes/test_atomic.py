"""The AtomicWriter: upstream's ``..data`` layout, atomic versions, pruning, no-op writes."""

from __future__ import annotations

import datetime
import os
import re
from pathlib import Path

import pytest

from node.kubelet.volumes.atomic import DATA_DIR, AtomicWriter, FileProjection, InvalidPathError

NOW = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)


def writer(target: Path) -> AtomicWriter:
    return AtomicWriter(target, lambda: NOW)


def version(target: Path) -> str:
    return os.readlink(target / DATA_DIR)


def visible(target: Path) -> dict[str, str]:
    """User-visible entries: name → symlink target."""
    return {p.name: os.readlink(p) for p in target.iterdir() if not p.name.startswith("..")}


def test_first_write_publishes_a_version_behind_data(tmp_path: Path) -> None:
    payload = {
        "key": FileProjection(b"value", 0o644),
        "nested/deep/file": FileProjection(b"deep", 0o400),
    }

    assert writer(tmp_path).write(payload)

    assert re.fullmatch(r"\.\.2026_01_02_03_04_05\.\d+", version(tmp_path))
    assert visible(tmp_path) == {"key": "..data/key", "nested": "..data/nested"}
    assert (tmp_path / "key").read_bytes() == b"value"
    assert (tmp_path / "nested/deep/file").read_bytes() == b"deep"
    data = tmp_path / version(tmp_path)
    assert (data / "key").stat().st_mode & 0o777 == 0o644
    assert (data / "nested/deep/file").stat().st_mode & 0o777 == 0o400
    assert data.stat().st_mode & 0o777 == 0o755
    assert not (tmp_path / "..data_tmp").exists()


def test_unchanged_payload_is_a_no_op(tmp_path: Path) -> None:
    payload = {"a": FileProjection(b"1", 0o644)}
    writer(tmp_path).write(payload)
    first = version(tmp_path)

    assert not writer(tmp_path).write(payload)

    assert version(tmp_path) == first
    assert {p.name for p in tmp_path.iterdir()} == {"..data", first, "a"}


def test_no_op_write_restores_missing_visible_links(tmp_path: Path) -> None:
    payload = {"a": FileProjection(b"1", 0o644)}
    writer(tmp_path).write(payload)
    (tmp_path / "a").unlink()

    assert not writer(tmp_path).write(payload)

    assert (tmp_path / "a").read_bytes() == b"1"


@pytest.mark.parametrize(
    ("before", "after", "visible_after"),
    [
        pytest.param(
            {"a": b"1", "b": b"2"}, {"a": b"1", "b": b"3"}, {"a", "b"}, id="content-changed"
        ),
        pytest.param({"a": b"1", "b": b"2"}, {"a": b"1"}, {"a"}, id="top-level-path-removed"),
        pytest.param({"d/x": b"1", "d/y": b"2"}, {"d/x": b"1"}, {"d"}, id="nested-path-removed"),
        pytest.param({"d/x": b"1"}, {"e": b"1"}, {"e"}, id="directory-replaced"),
        pytest.param({"a": b"1"}, {}, set(), id="everything-removed"),
    ],
)
def test_update_swaps_to_a_new_version_and_prunes(
    tmp_path: Path, before: dict[str, bytes], after: dict[str, bytes], visible_after: set[str]
) -> None:
    writer(tmp_path).write({k: FileProjection(v, 0o644) for k, v in before.items()})
    old = version(tmp_path)

    assert writer(tmp_path).write({k: FileProjection(v, 0o644) for k, v in after.items()})

    new = version(tmp_path)
    assert new != old
    assert not (tmp_path / old).exists()
    assert set(visible(tmp_path)) == visible_after
    for path, content in after.items():
        assert (tmp_path / path).read_bytes() == content
    assert {
        os.path.relpath(os.path.join(root, f), tmp_path / new)
        for root, _, files in os.walk(tmp_path / new)
        for f in files
    } == set(after)


def test_paths_are_cleaned(tmp_path: Path) -> None:
    writer(tmp_path).write({"./a//b/": FileProjection(b"x", 0o644)})

    assert (tmp_path / "a/b").read_bytes() == b"x"


@pytest.mark.parametrize(
    ("path", "message"),
    [
        pytest.param("", "must not be empty", id="empty"),
        pytest.param("/etc/passwd", "must be relative", id="absolute"),
        pytest.param("../escape", "must not contain '..'", id="parent"),
        pytest.param("a/../../b", "must not contain '..'", id="inner-parent"),
        pytest.param("..data", "must not start with '..'", id="reserved-prefix"),
        pytest.param("x" * 256, "filenames must be less than or equal to 255", id="long-name"),
        pytest.param("a/" * 2049, "must be less than or equal to 4096", id="long-path"),
    ],
)
def test_invalid_paths_are_refused_before_writing(tmp_path: Path, path: str, message: str) -> None:
    with pytest.raises(InvalidPathError, match=re.escape(message)):
        writer(tmp_path).write({"ok": FileProjection(b"", 0o644), path: FileProjection(b"", 0o644)})

    assert list(tmp_path.iterdir()) == []
