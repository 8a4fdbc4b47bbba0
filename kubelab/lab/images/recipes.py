"""What each image is made of, and the names it answers to.

- pause (``registry.k8s.io/pause:3.9``): ``programs.PAUSE``, static; entrypoint ``/pause``,
  user 65535, as upstream's.
- busybox (``docker.io/library/busybox:1.35`` and ``:latest``): the machine's static busybox
  with one ``/bin`` symlink per applet, ``/etc/passwd`` and ``/etc/group`` with root and
  nobody, a world-writable sticky ``/tmp``.
- echoserver (``docker.io/kubelab/echoserver:1.0``): ``programs.ECHOSERVER``, static, alone on
  an empty root filesystem, port 8080 (like upstream's agnhost netexec, but one small binary).
- debian (not exported): Debian bookworm ``--variant=minbase`` from mmdebstrap, /usr merged,
  without docs, man pages and locales, dpkg without fsync (options that stay in the image, as
  in Debian's official images).  The shared first layer of the next three.
- nginx (``docker.io/library/nginx:latest``): debian plus ``nginx-light``; as the official
  image: ``nginx -g 'daemon off;'``, port 80, logs symlinked to the container's stdout and
  stderr, stopped by SIGQUIT (graceful).  It serves Debian's "Welcome to nginx!" page.
- python (``docker.io/library/python:3.11`` and ``:latest``): debian plus ``python3`` and
  ``python-is-python3``; command ``python3``.
- kubelab (``KUBELAB_IMAGE``): python plus kubelab from this source tree and its runtime
  dependencies: the host's pip builds the wheels (the only step that needs PyPI), then the
  image's own Python installs them with ``--no-index`` in a chroot.  Two layers: pip and the
  dependencies pyproject.toml lists (the kubelab-dependencies parent, rebuilt only when that
  list changes), then kubelab itself, rebuilt whenever the source tree changes (15 s or so).
  Add-ons that run as pods (cluster DNS) use it.

The Debian images need root (mmdebstrap, and apt-get in a chroot inside a private mount
namespace, so its /proc and bind mounts vanish with the process); pause, busybox and
echoserver build without it.  Downloaded .deb files and apt lists are kept in the cache
(``apt/``) so rebuilds do not download them again.
"""

from __future__ import annotations

import inspect
import os
import shutil
import sys
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import kube
import kubelab
from kubelab.lab.images import programs
from kubelab.lab.images.cache import ImageError, Recipe, Workspace, run

PAUSE_IMAGE: Final = "registry.k8s.io/pause:3.9"
BUSYBOX_IMAGE: Final = "docker.io/library/busybox:1.35"
ECHOSERVER_IMAGE: Final = "docker.io/kubelab/echoserver:1.0"
NGINX_IMAGE: Final = "docker.io/library/nginx:latest"
PYTHON_IMAGE: Final = "docker.io/library/python:3.11"
KUBELAB_IMAGE: Final = f"docker.io/kubelab/kubelab:{kube.__version__}"
ECHOSERVER_PORT: Final = 8080
PAUSE_USER: Final = "65535"
BUSYBOX_BINARY: Final = Path("/bin/busybox")
PASSWD: Final = "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/home:/bin/false\n"
GROUP: Final = "root:x:0:\nnobody:x:65534:\n"

DEBIAN_SUITE: Final = "bookworm"
DEBIAN_SOURCES: Final = (
    "deb http://deb.debian.org/debian bookworm main",
    "deb http://deb.debian.org/debian bookworm-updates main",
    "deb http://deb.debian.org/debian-security bookworm-security main",
)
DPKG_OPTIONS: Final = (
    "force-unsafe-io",
    "path-exclude=/usr/share/doc/*",
    "path-include=/usr/share/doc/*/copyright",
    "path-exclude=/usr/share/man/*",
    "path-exclude=/usr/share/info/*",
    "path-exclude=/usr/share/locale/*",
)
MERGED_USR_HOOKS: Final = Path("/usr/share/mmdebstrap/hooks/merged-usr")
"""mmdebstrap's hooks that merge /usr themselves; without them bookworm installs usrmerge,
which brings 46 MB of perl into every image."""
NGINX_PACKAGES: Final = ("nginx-light",)
PYTHON_PACKAGES: Final = ("python3", "python-is-python3")
DEBIAN_TIMEOUT: Final = 900.0
PIP_INSTALL: Final = (
    "install", "--quiet", "--no-index", "--break-system-packages",
    "--root-user-action=ignore", "--disable-pip-version-check", "--no-warn-script-location",
)  # fmt: skip
SOURCE_PARTS: Final = ("kube", "controlplane", "node", "kubelab", "pyproject.toml", "README.md")
"""What of the source tree goes into kubelab's wheel (the packages, and what pyproject.toml
reads)."""

CHROOT: Final = r"""
set -eu
root=$1
shift
mount -t proc proc "$root/proc"
while [ "$1" != -- ]; do
    mount --bind "$1" "$root$2"
    shift 2
done
shift
exec chroot "$root" "$@"
"""
"""Runs in a private mount namespace (``unshare --mount``): /proc and the bind mounts are
gone when the command exits, whatever happens to it."""


def _pause(work: Workspace) -> None:
    _compile(programs.PAUSE, work.rootfs / "pause", work.scratch)


def _busybox(work: Workspace) -> None:
    if not BUSYBOX_BINARY.is_file():
        raise ImageError(f"{BUSYBOX_BINARY} is missing: install busybox-static")
    rootfs = work.rootfs
    for directory in ("bin", "etc", "root", "home", "tmp", "var", "usr/bin", "usr/sbin", "sbin"):
        (rootfs / directory).mkdir(parents=True, exist_ok=True)
    shutil.copy2(BUSYBOX_BINARY, rootfs / "bin" / "busybox")
    for applet in run(BUSYBOX_BINARY, "--list").split():
        if applet != "busybox":
            (rootfs / "bin" / applet).symlink_to("busybox")
    (rootfs / "etc" / "passwd").write_text(PASSWD)
    (rootfs / "etc" / "group").write_text(GROUP)
    (rootfs / "tmp").chmod(0o1777)


def _busybox_inputs() -> bytes:
    try:
        return BUSYBOX_BINARY.read_bytes()
    except OSError:
        return b""  # the build says what is missing


def _echoserver(work: Workspace) -> None:
    _compile(programs.ECHOSERVER, work.rootfs / "echoserver", work.scratch)


def _compile(source: str, binary: Path, scratch: Path) -> None:
    path = scratch / f"{binary.name}.c"
    path.write_text(source)
    run("gcc", "-static", "-Os", "-s", "-o", binary, path)


def _debian(work: Workspace) -> None:
    _require_root("debian")
    debs = _apt_dirs(work.cache_dir)[0]
    run(
        "mmdebstrap", "--variant=minbase", "--quiet", "--skip=essential/unlink",
        f"--hook-dir={MERGED_USR_HOOKS}",
        *(f"--dpkgopt={option}" for option in DPKG_OPTIONS),
        "--setup-hook=mkdir -p \"$1\"/var/cache/apt/archives",
        f"--setup-hook=sync-in {debs} /var/cache/apt/archives/",
        f"--customize-hook=sync-out /var/cache/apt/archives {debs}",
        DEBIAN_SUITE, work.rootfs, *DEBIAN_SOURCES,
        timeout=DEBIAN_TIMEOUT,
    )  # fmt: skip
    for name in ("resolv.conf", "hostname"):  # the host's; the runtime provides its own
        (work.rootfs / "etc" / name).write_text("")


def _debian_inputs() -> bytes:
    return repr(
        (DEBIAN_SUITE, DEBIAN_SOURCES, DPKG_OPTIONS, inspect.getsource(_apt_install))
    ).encode()


def _nginx(work: Workspace) -> None:
    _apt_install(work, NGINX_PACKAGES)
    logs = work.rootfs / "var" / "log" / "nginx"
    for name, target in (("access.log", "/dev/stdout"), ("error.log", "/dev/stderr")):
        (logs / name).unlink(missing_ok=True)
        (logs / name).symlink_to(target)


def _python(work: Workspace) -> None:
    _apt_install(work, PYTHON_PACKAGES)


def _kubelab_dependencies(work: Workspace) -> None:
    _require_root("kubelab")
    wheels = work.scratch / "wheels"
    _pip("wheel", "--wheel-dir", wheels, "pip", *_requirements())
    (pip_wheel,) = wheels.glob("pip-*.whl")
    _chroot(
        work.rootfs,
        {wheels: "/mnt"},
        "python3", f"/mnt/{pip_wheel.name}/pip", *PIP_INSTALL, "--find-links", "/mnt",
        "pip", *_requirements(),
    )  # fmt: skip


def _kubelab(work: Workspace) -> None:
    _require_root("kubelab")
    tree, wheels = work.scratch / "source", work.scratch / "wheels"
    for part in SOURCE_PARTS:
        _copy_source(source_tree() / part, tree / part)
    _pip("wheel", "--no-deps", "--no-build-isolation", "--wheel-dir", wheels, tree)
    (wheel,) = wheels.glob("kubelab-*.whl")
    _chroot(
        work.rootfs, {wheels: "/mnt"}, "python3", "-m", "pip", *PIP_INSTALL, "--no-deps",
        f"/mnt/{wheel.name}",
    )  # fmt: skip


def _pip(*args: str | Path) -> None:
    """The host's pip (the one running kubelab), which builds the wheels the image installs."""
    command = (sys.executable, "-m", "pip", "--quiet", "--disable-pip-version-check", *args)
    run(*command, timeout=DEBIAN_TIMEOUT)


def _requirements() -> list[str]:
    """kubelab's runtime dependencies, as pyproject.toml declares them."""
    with (source_tree() / "pyproject.toml").open("rb") as pyproject:
        dependencies: list[str] = tomllib.load(pyproject)["project"]["dependencies"]
    return dependencies


def source_tree() -> Path:
    """The source tree kubelab runs from; the kubelab image is built from it."""
    root = Path(kubelab.__file__).resolve().parent.parent
    if not (root / "pyproject.toml").is_file():
        raise ImageError(f"kubelab is not running from a source tree ({root})")
    return root


def _source_files() -> list[Path]:
    root = source_tree()
    found = []
    for part in SOURCE_PARTS:
        path = root / part
        if path.is_file():
            found.append(path)
        else:
            found.extend(p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    return sorted(found)


def _kubelab_inputs() -> bytes:
    root = source_tree()
    return b"".join(
        str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() for path in _source_files()
    )


def _copy_source(source: Path, target: Path) -> None:
    if source.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
    else:
        shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))


def _apt_install(work: Workspace, packages: Sequence[str]) -> None:
    """Install Debian packages into a root filesystem made by ``_debian``: apt-get in a
    chroot, services kept from starting (policy-rc.d), downloads kept in the cache."""
    rootfs = work.rootfs
    debs, lists = _apt_dirs(work.cache_dir)
    policy = rootfs / "usr" / "sbin" / "policy-rc.d"
    policy.write_text("#!/bin/sh\nexit 101\n")
    policy.chmod(0o755)
    shutil.copy(Path("/etc/resolv.conf"), rootfs / "etc" / "resolv.conf")
    _chroot(
        rootfs,
        {debs: "/var/cache/apt/archives", lists: "/var/lib/apt/lists"},
        "sh", "-euc",
        'apt-get update -qq && apt-get install -y -qq --no-install-recommends "$@"',
        "apt", *packages,
    )  # fmt: skip
    policy.unlink()
    (rootfs / "etc" / "resolv.conf").write_text("")
    for cache in ("pkgcache.bin", "srcpkgcache.bin"):
        (rootfs / "var" / "cache" / "apt" / cache).unlink(missing_ok=True)


def _chroot(rootfs: Path, binds: dict[Path, str], *command: str) -> None:
    mounts = [str(arg) for source, target in binds.items() for arg in (source, target)]
    run(
        "unshare", "--mount", "--propagation", "private", "--",
        "sh", "-c", CHROOT, "chroot", rootfs, *mounts, "--", *command,
        timeout=DEBIAN_TIMEOUT,
    )  # fmt: skip


def _apt_dirs(cache_dir: Path) -> tuple[Path, Path]:
    """The cache's .deb and package-list directories."""
    debs, lists = cache_dir / "apt" / "archives", cache_dir / "apt" / "lists"
    for directory in (debs / "partial", lists / "partial"):
        directory.mkdir(parents=True, exist_ok=True)
    return debs, lists


def _require_root(image: str) -> None:
    if os.geteuid() != 0:
        raise ImageError(f"building the {image} image needs root (mmdebstrap, chroot)")


PAUSE: Final = Recipe(
    "pause",
    (PAUSE_IMAGE,),
    _pause,
    ("--config.entrypoint", "/pause", "--config.user", PAUSE_USER),
    inputs=programs.PAUSE.encode,
)
BUSYBOX: Final = Recipe(
    "busybox",
    (BUSYBOX_IMAGE, "docker.io/library/busybox:latest"),
    _busybox,
    ("--config.cmd", "sh"),
    inputs=_busybox_inputs,
)
ECHOSERVER: Final = Recipe(
    "echoserver",
    (ECHOSERVER_IMAGE,),
    _echoserver,
    (
        "--config.entrypoint",
        "/echoserver",
        "--config.exposedports",
        f"{ECHOSERVER_PORT}/tcp",
    ),
    inputs=programs.ECHOSERVER.encode,
)
DEBIAN: Final = Recipe(
    "debian",
    (f"docker.io/library/debian:{DEBIAN_SUITE}",),
    _debian,
    ("--config.env", "LANG=C.UTF-8", "--config.cmd", "bash"),
    inputs=_debian_inputs,
    exported=False,
)
NGINX: Final = Recipe(
    "nginx",
    (NGINX_IMAGE,),
    _nginx,
    (
        "--config.cmd",
        "nginx",
        "--config.cmd",
        "-g",
        "--config.cmd",
        "daemon off;",
        "--config.exposedports",
        "80/tcp",
        "--config.stopsignal",
        "SIGQUIT",
    ),
    parent=DEBIAN,
    inputs=repr(NGINX_PACKAGES).encode,
)
PYTHON: Final = Recipe(
    "python",
    (PYTHON_IMAGE, "docker.io/library/python:latest"),
    _python,
    ("--config.cmd", "python3"),
    parent=DEBIAN,
    inputs=repr(PYTHON_PACKAGES).encode,
)
KUBELAB_DEPENDENCIES: Final = Recipe(
    "kubelab-dependencies",
    ("docker.io/kubelab/kubelab-dependencies:latest",),
    _kubelab_dependencies,
    parent=PYTHON,
    inputs=lambda: repr(_requirements()).encode(),
    exported=False,
)
KUBELAB: Final = Recipe(
    "kubelab",
    (KUBELAB_IMAGE,),
    _kubelab,
    ("--config.cmd", "kubelab", "--config.cmd", "--help"),
    parent=KUBELAB_DEPENDENCIES,
    inputs=_kubelab_inputs,
)

RECIPES: Final = {
    r.name: r
    for r in (PAUSE, BUSYBOX, ECHOSERVER, DEBIAN, NGINX, PYTHON, KUBELAB_DEPENDENCIES, KUBELAB)
}
"""Every image by its short name, parents before children."""
