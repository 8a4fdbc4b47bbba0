"""The images a lab node needs, built locally: the machines reach no registry.

Two images are enough for the lab and the tests: the pause image every pod sandbox runs, and
busybox for workloads.  Both are built from what the machine has (gcc, busybox-static), packed
as OCI with umoci, and converted by skopeo to docker-archive tars that keep the full image name
(``registry.k8s.io/pause:3.9``), which is the name containerd's CRI plugin then finds them under.

- pause: a static C program that sleeps in ``pause()``, reaps children on SIGCHLD (it is PID 1
  of the sandbox, which shares its PID namespace when asked) and exits on SIGTERM or SIGINT;
  entrypoint ``/pause``, user 65535, as upstream's.
- busybox: the static busybox with one ``/bin`` symlink per applet, an ``/etc/passwd`` and
  ``/etc/group`` with root and nobody, and a world-writable sticky ``/tmp``.

Archives are cached in a directory and built only when missing (build + import of both takes
well under a second, but every test session would otherwise redo it); a build writes to a
temporary name and renames, so concurrent builders never see half an archive.  Nothing here
needs root: umoci runs ``--rootless`` when not root.  ``import_images`` loads archives into a
containerd's ``k8s.io`` namespace, the one the CRI plugin reads (elsewhere it would try to pull).

Every failure raises ``CommandError`` carrying the command line and its output.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

PAUSE_IMAGE: Final = "registry.k8s.io/pause:3.9"
BUSYBOX_IMAGE: Final = "docker.io/library/busybox:1.35"
CRI_NAMESPACE: Final = "k8s.io"
BUSYBOX_BINARY: Final = Path("/bin/busybox")
PAUSE_USER: Final = "65535"
PATH_ENV: Final = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
COMMAND_TIMEOUT: Final = 120.0

PAUSE_SOURCE: Final = r"""
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void leave(int sig) { (void)sig; _exit(0); }

static void reap(int sig) {
    (void)sig;
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
}

int main(void) {
    struct sigaction on_exit = {.sa_handler = leave};
    struct sigaction on_child = {.sa_handler = reap, .sa_flags = SA_NOCLDSTOP | SA_RESTART};
    if (sigaction(SIGINT, &on_exit, NULL) < 0 || sigaction(SIGTERM, &on_exit, NULL) < 0 ||
        sigaction(SIGCHLD, &on_child, NULL) < 0) {
        return 1;
    }
    for (;;) {
        pause();
    }
}
"""

PASSWD: Final = "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/home:/bin/false\n"
GROUP: Final = "root:x:0:\nnobody:x:65534:\n"


class CommandError(Exception):
    """A build or import step failed: the command line, its exit status and its output."""

    def __init__(self, command: Sequence[str], returncode: int | None, output: str) -> None:
        what = f"exit status {returncode}" if returncode is not None else "timed out"
        super().__init__(f"{shlex.join(command)}: {what}\n{output.strip()}")
        self.command = list(command)
        self.returncode = returncode
        self.output = output


def run(*command: str | Path, cwd: Path | None = None) -> str:
    """Run a command to completion; its combined output, or ``CommandError``."""
    args = [str(a) for a in command]
    try:
        done = subprocess.run(
            args,
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=COMMAND_TIMEOUT,
            check=False,
        )
    except FileNotFoundError as error:
        raise CommandError(args, 127, str(error)) from None
    except subprocess.TimeoutExpired as error:
        output = error.output if isinstance(error.output, str) else ""
        raise CommandError(args, None, output) from None
    if done.returncode != 0:
        raise CommandError(args, done.returncode, done.stdout)
    return done.stdout


def archive_name(image: str) -> str:
    """The cache file of an image: ``registry.k8s.io/pause:3.9`` → ``pause-3.9.tar``."""
    repository, _, tag = image.rpartition(":")
    return f"{repository.rsplit('/', 1)[-1]}-{tag}.tar"


def build_images(cache_dir: Path) -> list[Path]:
    """The docker-archive tars of the pause and busybox images, built into ``cache_dir`` if
    missing; the order is pause, busybox."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    builders: list[tuple[str, Filler]] = [(PAUSE_IMAGE, _pause), (BUSYBOX_IMAGE, _busybox)]
    archives = []
    for image, fill in builders:
        archive = cache_dir / archive_name(image)
        if not archive.exists():
            _build(image, archive, fill)
        archives.append(archive)
    return archives


def import_images(containerd_socket: Path, archives: Sequence[Path]) -> None:
    """Import docker-archive tars into the ``k8s.io`` namespace of the containerd listening
    on ``containerd_socket``; importing an image again is harmless."""
    for archive in archives:
        run("ctr", "-a", containerd_socket, "-n", CRI_NAMESPACE, "images", "import", archive)


Filler = Callable[[Path, Path], list[str]]
"""Fills an image's root filesystem (first argument; the second is a scratch directory) and
returns the ``umoci config`` options of the image."""


def _build(image: str, archive: Path, fill: Filler) -> None:
    """An OCI image of one layer, the root filesystem ``fill`` makes, converted to a
    docker-archive at ``archive``, atomically.

    The layer comes from ``umoci repack`` of an unpacked bundle: ``umoci insert`` (0.4.7)
    leaves the tar trailer out of the layer, which containerd refuses when the last entry is
    a file.
    """
    rootless = ["--rootless"] if os.geteuid() != 0 else []
    with tempfile.TemporaryDirectory(prefix="kubelab-image-", dir=archive.parent) as scratch:
        work = Path(scratch)
        oci, bundle = work / "oci", work / "bundle"
        reference = f"{oci}:{image.rpartition(':')[2]}"
        run("umoci", "init", "--layout", oci)
        run("umoci", "new", "--image", reference)
        run("umoci", "unpack", *rootless, "--image", reference, bundle)
        config = fill(bundle / "rootfs", work)
        run("umoci", "repack", "--image", reference, bundle)
        run("umoci", "config", "--image", reference, "--config.env", PATH_ENV, *config)
        partial = work / archive.name
        run("skopeo", "copy", f"oci:{reference}", f"docker-archive:{partial}:{image}")
        os.replace(partial, archive)


def _pause(rootfs: Path, work: Path) -> list[str]:
    source = work / "pause.c"
    source.write_text(PAUSE_SOURCE)
    run("gcc", "-static", "-Os", "-s", "-o", rootfs / "pause", source)
    return ["--config.entrypoint", "/pause", "--config.user", PAUSE_USER]


def _busybox(rootfs: Path, work: Path) -> list[str]:
    if not BUSYBOX_BINARY.is_file():
        raise CommandError([str(BUSYBOX_BINARY)], 127, "busybox-static is not installed")
    for directory in ("bin", "etc", "root", "home", "tmp", "var", "usr/bin", "usr/sbin", "sbin"):
        (rootfs / directory).mkdir(parents=True, exist_ok=True)
    shutil.copy2(BUSYBOX_BINARY, rootfs / "bin" / "busybox")
    for applet in run(BUSYBOX_BINARY, "--list").split():
        if applet != "busybox":
            (rootfs / "bin" / applet).symlink_to("busybox")
    (rootfs / "etc" / "passwd").write_text(PASSWD)
    (rootfs / "etc" / "group").write_text(GROUP)
    (rootfs / "tmp").chmod(0o1777)
    return ["--config.cmd", "sh"]
