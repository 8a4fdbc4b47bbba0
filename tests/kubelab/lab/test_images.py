"""Offline images: built without root, cached, named as the CRI plugin will look them up."""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import tarfile
import time
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from kubelab.lab import images
from kubelab.lab.images import BUSYBOX_IMAGE, PAUSE_IMAGE, CommandError, build_images

TOOLS = ("gcc", "umoci", "skopeo")
needs_tools = pytest.mark.skipif(
    any(shutil.which(t) is None for t in TOOLS) or not images.BUSYBOX_BINARY.is_file(),
    reason="gcc, umoci, skopeo and busybox-static are needed to build images",
)


@pytest.fixture(scope="module")
def archives(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return build_images(tmp_path_factory.mktemp("images"))


def read_archive(archive: Path) -> tuple[list[str], dict[str, Any], dict[str, Entry]]:
    """The repo tags, the image config and the files of the (only) layer of a docker-archive,
    by path without the leading slash."""
    with tarfile.open(archive) as outer:
        manifest = json.load(_member(outer, "manifest.json"))[0]
        config = json.load(_member(outer, manifest["Config"]))
        (layer_name,) = manifest["Layers"]
        layer_bytes = _member(outer, layer_name).read()
    files: dict[str, Entry] = {}
    with tarfile.open(fileobj=io.BytesIO(layer_bytes)) as layer:
        for member in layer.getmembers():
            data = _member(layer, member.name).read() if member.isfile() else b""
            files[member.name.strip("/")] = Entry(member, data)
    return manifest["RepoTags"], config, files


class Entry(NamedTuple):
    info: tarfile.TarInfo
    data: bytes


def _member(tar: tarfile.TarFile, name: str) -> Any:
    extracted = tar.extractfile(name)
    assert extracted is not None, name
    return extracted


def test_archive_names() -> None:
    assert images.archive_name(PAUSE_IMAGE) == "pause-3.9.tar"
    assert images.archive_name(BUSYBOX_IMAGE) == "busybox-1.35.tar"


@needs_tools
def test_pause_image(archives: list[Path], tmp_path: Path) -> None:
    tags, config, files = read_archive(archives[0])
    assert tags == [PAUSE_IMAGE]
    assert config["config"]["Entrypoint"] == ["/pause"]
    assert config["config"]["User"] == "65535"
    assert config["os"] == "linux"
    binary = tmp_path / "pause"
    binary.write_bytes(files["pause"].data)
    binary.chmod(0o755)
    # It sleeps until told to stop, then exits 0.
    process = subprocess.Popen([binary])
    try:
        time.sleep(0.1)
        assert process.poll() is None
        os.kill(process.pid, signal.SIGTERM)
        assert process.wait(timeout=5) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@needs_tools
def test_busybox_image(archives: list[Path]) -> None:
    tags, config, files = read_archive(archives[1])
    assert tags == [BUSYBOX_IMAGE]
    assert config["config"]["Cmd"] == ["sh"]
    members = {name: entry.info for name, entry in files.items()}
    assert members["bin/busybox"].isfile()
    assert members["bin/sh"].issym()
    assert members["bin/sh"].linkname == "busybox"
    assert members["bin/wget"].issym()
    assert members["tmp"].mode & 0o7777 == 0o1777
    assert members["etc/passwd"].isfile()
    assert all(m.uid == 0 for m in members.values())


@needs_tools
def test_cached_archives_are_not_rebuilt(
    archives: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*command: object, **_: object) -> str:
        raise AssertionError(f"ran {command}")

    monkeypatch.setattr(images, "run", refuse)
    assert build_images(archives[0].parent) == archives


def test_command_error_carries_command_and_output() -> None:
    with pytest.raises(CommandError) as caught:
        images.run("sh", "-c", "echo broken layout >&2; exit 3")
    assert caught.value.command == ["sh", "-c", "echo broken layout >&2; exit 3"]
    assert caught.value.returncode == 3
    assert "broken layout" in str(caught.value)
    assert "exit status 3" in str(caught.value)


def test_missing_tool_is_a_command_error() -> None:
    with pytest.raises(CommandError, match="no-such-tool-kubelab"):
        images.run("no-such-tool-kubelab", "--version")
