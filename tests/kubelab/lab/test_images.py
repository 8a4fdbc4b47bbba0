"""Offline images: names, cache keys and staleness, the command, and the scratch images built
without root (the Debian-based ones need root: test_images_containerd.py runs them all)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import tarfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from kube import __version__
from kubelab.cli import build_parser
from kubelab.lab import images
from kubelab.lab.images import (
    BUSYBOX_IMAGE,
    KUBELAB_IMAGE,
    PAUSE_IMAGE,
    CommandError,
    ImageError,
    build_images,
    cache,
    command,
    programs,
    recipes,
)
from kubelab.lab.images.cache import Recipe, Record, Workspace
from tests.servers import free_port

SCRATCH_IMAGES = ("pause", "busybox", "echoserver")
TOOLS = ("gcc", "umoci", "skopeo")
needs_tools = pytest.mark.skipif(
    any(shutil.which(t) is None for t in TOOLS) or not images.BUSYBOX_BINARY.is_file(),
    reason="gcc, umoci, skopeo and busybox-static are needed to build images",
)


@pytest.fixture(scope="module")
def archives(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return build_images(tmp_path_factory.mktemp("images"), SCRATCH_IMAGES)


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
    assert tags == [BUSYBOX_IMAGE, "docker.io/library/busybox:latest"]
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

    monkeypatch.setattr(cache, "run", refuse)
    monkeypatch.setattr(recipes, "run", refuse)
    assert build_images(archives[0].parent, SCRATCH_IMAGES) == archives


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


@needs_tools
def test_echoserver_image_answers_over_http(archives: list[Path], tmp_path: Path) -> None:
    tags, config, files = read_archive(archives[2])
    assert tags == [images.ECHOSERVER_IMAGE]
    assert config["config"]["Entrypoint"] == ["/echoserver"]
    assert config["config"]["ExposedPorts"] == {f"{images.ECHOSERVER_PORT}/tcp": {}}
    binary = tmp_path / "echoserver"
    binary.write_bytes(files["echoserver"].data)
    binary.chmod(0o755)
    port = free_port()
    process = subprocess.Popen([binary, f"--port={port}"], stdout=subprocess.PIPE, text=True)
    try:
        base = f"http://127.0.0.1:{port}"
        echoed = get(f"{base}/some/path?x=1", headers={"X-Probe": "yes"})
        assert echoed.startswith(f"Hostname: {socket.gethostname()}\n")
        assert "\tclient_address=127.0.0.1\n" in echoed
        assert "\tmethod=GET\n\tpath=/some/path\n\tquery=x=1\n\tversion=HTTP/1.1\n" in echoed
        assert "\tX-Probe: yes\n" in echoed
        assert get(f"{base}/healthz") == "ok\n"
        assert get(f"{base}/hostname") == f"{socket.gethostname()}\n"
        assert get(f"{base}/clientip").startswith("127.0.0.1:")
        assert get(f"{base}/echo?msg=hello%20there") == "hello there\n"
        os.kill(process.pid, signal.SIGTERM)
        output, _ = process.communicate(timeout=5)
        assert process.returncode == 0
        assert "GET /some/path from 127.0.0.1:" in output
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate()


def get(url: str, headers: dict[str, str] | None = None) -> str:
    """GET with retries while the server starts listening."""
    request = urllib.request.Request(url, headers=headers or {})
    for _ in range(100):
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                body: bytes = response.read()
                return body.decode()
        except urllib.error.URLError as error:
            if not isinstance(error.reason, ConnectionRefusedError):
                raise
            time.sleep(0.02)
    raise AssertionError(f"{url} never answered")


@pytest.mark.parametrize(
    ("name", "short"),
    [
        ("nginx", "nginx"),
        ("nginx:latest", "nginx"),
        ("docker.io/library/nginx:latest", "nginx"),
        ("python", "python"),
        ("python:3.11", "python"),
        ("docker.io/library/python:latest", "python"),
        ("busybox", "busybox"),
        ("busybox:1.35", "busybox"),
        ("registry.k8s.io/pause:3.9", "pause"),
        ("kubelab/echoserver:1.0", "echoserver"),
        (KUBELAB_IMAGE, "kubelab"),
    ],
    ids=lambda value: str(value),
)
def test_images_answer_to_their_usual_names(name: str, short: str) -> None:
    assert images.recipe(name).name == short


@pytest.mark.parametrize("name", ["debian", "nginx:1.27", "docker.io/library/redis:latest"])
def test_unknown_images_are_refused(name: str) -> None:
    with pytest.raises(ImageError, match="the images are pause, busybox"):
        images.recipe(name)


def test_names_and_archives() -> None:
    assert f"docker.io/kubelab/kubelab:{__version__}" == KUBELAB_IMAGE
    assert images.ALL_IMAGES == ("pause", "busybox", "echoserver", "nginx", "python", "kubelab")
    archives = [r.archive for r in recipes.RECIPES.values()]
    assert len(set(archives)) == len(archives)
    assert recipes.NGINX.archive == "nginx-latest.tar"
    lineage = [recipes.DEBIAN, recipes.PYTHON, recipes.KUBELAB_DEPENDENCIES, recipes.KUBELAB]
    assert recipes.KUBELAB.lineage() == lineage


# The cache, with umoci, skopeo and cp replaced by a fake that makes the files they would.

INPUTS = {"base": b"base 1", "child": b"child 1"}


def fill_nothing(work: Workspace) -> None:
    (work.rootfs / "marker").write_text("filled")


BASE = Recipe(
    "base", ("example.com/base:1",), fill_nothing, ("--config.cmd", "sh"),
    inputs=lambda: INPUTS["base"], exported=False,
)  # fmt: skip
CHILD = Recipe(
    "child", ("example.com/child:1", "example.com/child:latest"), fill_nothing,
    parent=BASE, inputs=lambda: INPUTS["child"],
)  # fmt: skip


class FakeTools:
    """umoci, skopeo and cp as far as the cache uses them: the files appear where they would,
    and every command is remembered."""

    def __init__(self) -> None:
        self.commands: list[list[str]] = []

    def __call__(self, *command: str | Path, cwd: Path | None = None, timeout: float = 0) -> str:
        args = [str(c) for c in command]
        self.commands.append(args)
        tool, verb = args[0], args[1]
        if tool == "umoci" and verb == "init":
            Path(args[3]).mkdir(parents=True)
            Path(args[3], "index.json").write_text('{"manifests": []}')
        elif tool == "umoci" and verb in ("new", "repack", "config", "tag"):
            reference = args[args.index("--image") + 1]
            layout, _, tag = reference.rpartition(":")
            self._tag(Path(layout), args[-1] if verb == "tag" else tag)
        elif tool == "umoci" and verb == "unpack":
            Path(args[-1], "rootfs").mkdir(parents=True)
        elif tool == "cp":
            shutil.copytree(args[-2], args[-1], symlinks=True)
        elif tool == "skopeo":
            Path(args[-1].split(":")[1]).write_text("archive")
        return ""

    @staticmethod
    def _tag(layout: Path, tag: str) -> None:
        """A manifest blob (with no layers) under ``tag``, replacing the tag's old one."""
        index = json.loads((layout / "index.json").read_text())
        manifest = write_blob(layout, {"config": {"digest": write_blob(layout, {})}})
        index["manifests"] = [
            *(m for m in index["manifests"] if tag_of(m) != tag),
            {"digest": manifest, "annotations": {"org.opencontainers.image.ref.name": tag}},
        ]
        (layout / "index.json").write_text(json.dumps(index))

    def built(self) -> list[str]:
        """The images packed, in order."""
        return [c[-1].rsplit("/", 2)[-2].split("-")[1] for c in self.commands if "repack" in c]


def write_blob(layout: Path, content: dict[str, Any]) -> str:
    data = json.dumps({**content, "nonce": os.urandom(4).hex()}).encode()  # distinct blobs
    digest = hashlib.sha256(data).hexdigest()
    (layout / "blobs" / "sha256").mkdir(parents=True, exist_ok=True)
    (layout / "blobs" / "sha256" / digest).write_bytes(data)
    return f"sha256:{digest}"


def tag_of(descriptor: dict[str, Any]) -> str:
    tag: str = descriptor["annotations"]["org.opencontainers.image.ref.name"]
    return tag


@pytest.fixture
def tools(monkeypatch: pytest.MonkeyPatch) -> FakeTools:
    fake = FakeTools()
    monkeypatch.setattr(cache, "run", fake)
    monkeypatch.setitem(INPUTS, "base", b"base 1")
    monkeypatch.setitem(INPUTS, "child", b"child 1")
    return fake


def test_keys_follow_inputs_and_parents(tools: FakeTools) -> None:
    base, child = cache.cache_key(BASE), cache.cache_key(CHILD)
    assert (cache.cache_key(BASE), cache.cache_key(CHILD)) == (base, child)
    INPUTS["child"] = b"child 2"
    assert (cache.cache_key(BASE), cache.cache_key(CHILD)) == (base, cache.cache_key(CHILD))
    assert cache.cache_key(CHILD) != child
    INPUTS["base"] = b"base 2"
    assert cache.cache_key(BASE) != base
    renamed = Recipe("child", ("example.com/child:2",), fill_nothing, parent=BASE)
    assert cache.cache_key(renamed) != cache.cache_key(CHILD)


def test_build_builds_what_is_missing_or_stale_and_nothing_else(
    tools: FakeTools, tmp_path: Path
) -> None:
    reported: list[tuple[str, Record]] = []
    archives = cache.build(tmp_path, [CHILD], lambda r, record: reported.append((r.name, record)))
    assert archives == [tmp_path / "child-1.tar"]
    assert tools.built() == ["base", "child"]
    assert [name for name, _ in reported] == ["base", "child"]
    assert reported[1][1].key == cache.cache_key(CHILD)
    assert reported[1][1].tags == CHILD.tags
    # The parent's bundle is kept and copied for the child, not unpacked again.
    assert (tmp_path / "bundles" / "base" / "rootfs" / "marker").is_file()
    assert any(c[:2] == ["cp", "-a"] for c in tools.commands)
    # The child's config carries its parent's, then its own; the archive has both names.
    configs = [c[4:] for c in tools.commands if c[1] == "config" and c[3].endswith(":child")]
    assert configs == [["--config.env", cache.PATH_ENV], ["--config.cmd", "sh"]]
    skopeo = next(c for c in tools.commands if c[0] == "skopeo")
    assert "--additional-tag=example.com/child:latest" in skopeo
    assert skopeo[-1].endswith(":example.com/child:1")

    tools.commands.clear()
    assert cache.build(tmp_path, [CHILD]) == archives
    assert tools.commands == []

    INPUTS["child"] = b"child 2"
    (tmp_path / "build-child-left-by-a-killed-builder").mkdir()
    cache.build(tmp_path, [CHILD])
    assert tools.built() == ["child"]
    assert not (tmp_path / "build-child-left-by-a-killed-builder").exists()

    tools.commands.clear()
    (tmp_path / "child-1.tar").unlink()
    cache.build(tmp_path, [CHILD])
    assert tools.built() == ["child"]


def test_entries_say_fresh_stale_or_missing(tools: FakeTools, tmp_path: Path) -> None:
    assert cache.entry(tmp_path, CHILD).state == "missing"
    cache.build(tmp_path, [CHILD])
    fresh = cache.entry(tmp_path, CHILD)
    assert (fresh.state, fresh.size) == ("fresh", len("archive"))
    INPUTS["base"] = b"base 2"
    assert cache.entry(tmp_path, CHILD).state == "stale"
    table = command.format_table(tmp_path, [CHILD]).splitlines()
    assert table[0].split() == ["IMAGE", "SIZE", "BUILT", "TOOK", "STATE", "NAMES"]
    assert table[1].split()[0] == "child"
    assert "stale  example.com/child:1 example.com/child:latest" in table[1]


def test_a_failed_build_leaves_no_record(tools: FakeTools, tmp_path: Path) -> None:
    def broken(work: Workspace) -> None:
        raise CommandError(["apt-get", "install", "nginx-light"], 100, "E: no such package")

    cache.build(tmp_path, [CHILD])
    failing = Recipe("child", CHILD.tags, broken, parent=BASE, inputs=lambda: b"other")
    with pytest.raises(CommandError, match="no such package"):
        cache.build(tmp_path, [failing])
    assert cache.entry(tmp_path, failing).state == "missing"
    assert not list(tmp_path.glob("build-*"))


# The command.


def test_load_parses_images_by_any_name() -> None:
    args = build_parser().parse_args(
        ["images", "load", "--address", "/run/n1/containerd.sock", "nginx", "python:3.11"]
    )
    assert args.address == Path("/run/n1/containerd.sock")
    assert args.images == [recipes.NGINX, recipes.PYTHON]
    assert args.cache == Path("/var/cache/kubelab")


@pytest.mark.parametrize(
    "argv",
    [
        ["images", "build", "nginx:1.27"],
        ["images", "load", "nginx"],  # no --address
        ["images"],
    ],
    ids=["unknown image", "load without address", "no subcommand"],
)
def test_bad_command_lines_are_usage_errors(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(argv)
    assert exit_.value.code == 2
    assert "kubelab images" in capsys.readouterr().err


def test_cached_needs_no_root_and_shows_every_image(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = build_parser().parse_args(["images", "cached", "--cache", str(tmp_path)])
    assert args.run(args) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines[1:]] == list(images.ALL_IMAGES)
    assert all(" missing " in line for line in lines[1:])


def test_programs_are_the_sources_the_keys_hash() -> None:
    assert recipes.PAUSE.inputs() == programs.PAUSE.encode()
    assert recipes.ECHOSERVER.inputs() == programs.ECHOSERVER.encode()


def test_garbage_is_what_no_tag_reaches(tmp_path: Path) -> None:
    layout = tmp_path / "oci"
    config, layer, orphan = (write_blob(layout, {"n": n}) for n in range(3))
    manifest = write_blob(layout, {"config": {"digest": config}, "layers": [{"digest": layer}]})
    tagged = {"digest": manifest, "annotations": {"org.opencontainers.image.ref.name": "a"}}
    (layout / "index.json").write_text(json.dumps({"manifests": [tagged]}))
    assert cache.collect_garbage(layout) == [orphan]
    left = {f"sha256:{p.name}" for p in (layout / "blobs" / "sha256").iterdir()}
    assert left == {manifest, config, layer}
