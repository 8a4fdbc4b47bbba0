"""Building recipes into a cache, and importing what was built into a containerd.

A ``Recipe`` says what an image is: its names, what fills its root filesystem, its config,
and the image it starts from (``parent``).  ``build`` turns recipes into docker-archive tars in
a cache directory, rebuilding only what is missing or whose inputs changed:

- Every recipe has a key, the SHA-256 of its parent's key, its names and config, the source
  of its fill function (editing how an image is filled rebuilds it), whatever its ``inputs``
  function returns (a C program's text, the busybox binary, Debian package lists, kubelab's
  source tree), and ``REVISION``, to bump when packing itself changes what images contain.
  A build records the key next to the archive (``NAME.json``); the archive is fresh while
  the recorded key is the current one.  Computing every key and reading the records takes
  milliseconds, so a warm cache costs nothing.
- Images are assembled with umoci in one OCI layout in the cache (``oci/``), one tag per
  recipe.  A recipe with a parent unpacks the parent, fills the bundle and repacks it, so its
  image is the parent's layers plus one layer of what changed; images sharing a parent share
  those layer blobs (and containerd stores them once).  ``skopeo copy`` then writes the
  docker-archive with every name of the image, the names containerd's CRI plugin looks up.
- A lock file serialises builders of one cache; archives are written under a temporary name
  and renamed, and a record is written only after its archive, so a crash leaves a stale or
  missing image, never a half one that looks fresh.

``import_images`` loads archives into a containerd's ``k8s.io`` namespace, the one the CRI
plugin reads (elsewhere it would try to pull), without unpacking them: the CRI plugin unpacks
an image into its snapshotter when a container first needs it, so a node pays the unpacking
only for the images it runs (importing is then about half as long).  Every failed command
raises ``CommandError`` carrying the command line and its output.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import hashlib
import inspect
import json
import os
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, NamedTuple

CRI_NAMESPACE: Final = "k8s.io"
PATH_ENV: Final = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
COMMAND_TIMEOUT: Final = 120.0
LAYOUT: Final = "oci"
LOCK: Final = ".lock"
BUNDLES: Final = "bundles"
PACK_TIMEOUT: Final = 600.0
SCRATCH_PREFIX: Final = "build-"
REVISION: Final = 1
"""Part of every key: bump it when a change here changes what images contain."""


class ImageError(Exception):
    """An image cannot be built, listed or imported."""


class CommandError(ImageError):
    """A build or import step failed: the command line, its exit status and its output."""

    def __init__(self, command: Sequence[str], returncode: int | None, output: str) -> None:
        what = f"exit status {returncode}" if returncode is not None else "timed out"
        super().__init__(f"{shlex.join(command)}: {what}\n{output.strip()}")
        self.command = list(command)
        self.returncode = returncode
        self.output = output


def run(*command: str | Path, cwd: Path | None = None, timeout: float = COMMAND_TIMEOUT) -> str:
    """Run a command to completion; its combined output, or ``CommandError``."""
    args = [str(a) for a in command]
    try:
        done = subprocess.run(
            args,
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            timeout=timeout,
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


class Workspace(NamedTuple):
    """Where a fill works: the image's root filesystem, a scratch directory removed after
    the build, and the cache directory (for downloads worth keeping between builds)."""

    rootfs: Path
    scratch: Path
    cache_dir: Path


Filler = Callable[[Workspace], None]


def no_inputs() -> bytes:
    return b""


@dataclass(frozen=True)
class Recipe:
    """An image: its names (the first names its archive), what fills its root filesystem
    (on top of ``parent``'s, if any), its ``umoci config`` options, and a digest of what the
    fill reads from the machine.  ``exported`` is false for a parent that is never imported
    on its own (it still has a record, so its children know when it changed)."""

    name: str
    tags: tuple[str, ...]
    fill: Filler
    config: tuple[str, ...] = ()
    parent: Recipe | None = None
    inputs: Callable[[], bytes] = no_inputs
    exported: bool = True

    @property
    def archive(self) -> str:
        return archive_name(self.tags[0])

    def lineage(self) -> list[Recipe]:
        """This recipe's ancestors, oldest first, then itself."""
        chain = [self]
        while chain[0].parent is not None:
            chain.insert(0, chain[0].parent)
        return chain


def archive_name(image: str) -> str:
    """The cache file of an image: ``registry.k8s.io/pause:3.9`` → ``pause-3.9.tar``."""
    repository, _, tag = image.rpartition(":")
    return f"{repository.rsplit('/', 1)[-1]}-{tag}.tar"


def cache_key(recipe: Recipe) -> str:
    """The digest that changes whenever anything the image is made from changes."""
    digest = hashlib.sha256(f"revision {REVISION}".encode())
    for step in recipe.lineage():
        digest.update(json.dumps([step.name, step.tags, step.config]).encode())
        digest.update(inspect.getsource(step.fill).encode())
        digest.update(step.inputs())
    return digest.hexdigest()


class Record(NamedTuple):
    """What a build left next to an archive: the key it was built from, when, how long."""

    key: str
    tags: tuple[str, ...]
    built: datetime.datetime
    seconds: float


def read_record(cache_dir: Path, recipe: Recipe) -> Record | None:
    try:
        data = json.loads((cache_dir / f"{recipe.name}.json").read_text())
        return Record(
            data["key"],
            tuple(data["tags"]),
            datetime.datetime.fromisoformat(data["built"]),
            float(data["seconds"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write_record(cache_dir: Path, recipe: Recipe, record: Record) -> None:
    path = cache_dir / f"{recipe.name}.json"
    partial = path.with_suffix(".json.partial")
    data = {
        "key": record.key,
        "tags": list(record.tags),
        "built": record.built.isoformat(),
        "seconds": round(record.seconds, 3),
    }
    partial.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(partial, path)


def layout_tags(cache_dir: Path) -> set[str]:
    """The tags of the cache's OCI layout (read from its index, without running umoci)."""
    try:
        index = json.loads((cache_dir / LAYOUT / "index.json").read_text())
    except (OSError, ValueError):
        return set()
    return {
        m.get("annotations", {}).get("org.opencontainers.image.ref.name", "")
        for m in index.get("manifests", [])
    }


def is_fresh(cache_dir: Path, recipe: Recipe, tags: set[str] | None = None) -> bool:
    """Whether the cache holds this recipe as its inputs are now."""
    record = read_record(cache_dir, recipe)
    if record is None or record.key != cache_key(recipe):
        return False
    if recipe.name not in (layout_tags(cache_dir) if tags is None else tags):
        return False
    return not recipe.exported or (cache_dir / recipe.archive).is_file()


class Entry(NamedTuple):
    """What the cache holds of a recipe: ``state`` is fresh, stale (built from other inputs)
    or missing; ``size`` is the archive's, in bytes."""

    recipe: Recipe
    state: str
    size: int | None
    record: Record | None


def entry(cache_dir: Path, recipe: Recipe) -> Entry:
    """Describe one recipe's place in the cache (reads only; needs no root)."""
    record = read_record(cache_dir, recipe)
    archive = cache_dir / recipe.archive
    size = archive.stat().st_size if archive.is_file() else None
    if record is None or size is None:
        return Entry(recipe, "missing", size, record)
    return Entry(recipe, "fresh" if is_fresh(cache_dir, recipe) else "stale", size, record)


def build(
    cache_dir: Path,
    recipes: Sequence[Recipe],
    progress: Callable[[Recipe, Record], None] | None = None,
) -> list[Path]:
    """The archives of ``recipes`` (in that order), built into ``cache_dir`` with their
    parents where missing or stale.  ``progress`` hears of each image built."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    ordered = list(dict.fromkeys(step for recipe in recipes for step in recipe.lineage()))
    parents = {r.parent.name for r in ordered if r.parent is not None}
    tags = layout_tags(cache_dir)
    if not all(is_fresh(cache_dir, r, tags) for r in ordered):
        with _locked(cache_dir):
            for left in cache_dir.glob(f"{SCRATCH_PREFIX}*"):  # by a builder that was killed
                shutil.rmtree(left, ignore_errors=True)
            built = False
            for recipe in ordered:
                if not is_fresh(cache_dir, recipe):  # another builder may have done it
                    record = _build(cache_dir, recipe, keep_bundle=recipe.name in parents)
                    built = True
                    if progress is not None:
                        progress(recipe, record)
            if built:
                collect_garbage(cache_dir / LAYOUT)
    return [cache_dir / r.archive for r in recipes if r.exported]


def collect_garbage(layout: Path) -> list[str]:
    """Remove the blobs no tag of ``layout`` reaches (what rebuilt images left); the digests
    removed.  What ``umoci gc`` does, without re-hashing every blob: that took longer than
    rebuilding an image on a busy machine."""
    blobs = layout / "blobs" / "sha256"
    index = json.loads((layout / "index.json").read_text())
    reachable: set[str] = set()
    for descriptor in index.get("manifests", []):
        digest = descriptor["digest"]
        manifest = json.loads((blobs / digest.removeprefix("sha256:")).read_text())
        reachable.add(digest)
        reachable.add(manifest["config"]["digest"])
        reachable.update(layer["digest"] for layer in manifest.get("layers", []))
    removed = []
    for blob in blobs.iterdir():
        if f"sha256:{blob.name}" not in reachable:
            blob.unlink()
            removed.append(f"sha256:{blob.name}")
    return removed


@contextlib.contextmanager
def _locked(cache_dir: Path) -> Iterator[None]:
    with (cache_dir / LOCK).open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _build(cache_dir: Path, recipe: Recipe, *, keep_bundle: bool) -> Record:
    """Fill, pack and (if exported) export one recipe, whose parent is in the layout.

    A parent's unpacked bundle is kept in the cache (``bundles/NAME``, refreshed to what was
    packed) because copying it is several times faster than ``umoci unpack``; its tag
    ``NAME.packed`` keeps the manifest the bundle refers to from being collected.
    Config options are applied after packing, the whole lineage's in order, so a child's
    command replaces its parent's (its bundle refers to its parent's packed manifest, from
    before that parent's config).
    """
    started = time.monotonic()
    key = cache_key(recipe)
    (cache_dir / f"{recipe.name}.json").unlink(missing_ok=True)
    layout, kept = cache_dir / LAYOUT, cache_dir / BUNDLES / recipe.name
    shutil.rmtree(kept, ignore_errors=True)
    if not (layout / "index.json").is_file():
        run("umoci", "init", "--layout", layout)
    rootless = ["--rootless"] if os.geteuid() != 0 else []
    reference = f"{layout}:{recipe.name}"
    with tempfile.TemporaryDirectory(
        prefix=f"{SCRATCH_PREFIX}{recipe.name}-", dir=cache_dir
    ) as scratch:
        work = Path(scratch)
        bundle = work / "bundle"
        parent_bundle = None if recipe.parent is None else cache_dir / BUNDLES / recipe.parent.name
        if recipe.parent is None:
            run("umoci", "new", "--image", reference)
            run("umoci", "unpack", *rootless, "--image", reference, bundle)
        elif parent_bundle is not None and parent_bundle.is_dir():
            run("cp", "-a", parent_bundle, bundle, timeout=PACK_TIMEOUT)
        else:
            source = f"{layout}:{recipe.parent.name}"
            run("umoci", "unpack", *rootless, "--image", source, bundle, timeout=PACK_TIMEOUT)
        (work / "fill").mkdir()
        recipe.fill(Workspace(bundle / "rootfs", work / "fill", cache_dir))
        # A layer from `umoci repack`, not `umoci insert`: insert (0.4.7) leaves the tar
        # trailer out of the layer, which containerd refuses when the last entry is a file.
        refresh = ["--refresh-bundle"] if keep_bundle else []
        run("umoci", "repack", *refresh, "--image", reference, bundle, timeout=PACK_TIMEOUT)
        if keep_bundle:
            run("umoci", "tag", "--image", reference, f"{recipe.name}.packed")
        run("umoci", "config", "--image", reference, "--config.env", PATH_ENV)
        for step in recipe.lineage():  # one call each: a list option given twice accumulates
            if step.config:
                run("umoci", "config", "--image", reference, *step.config)
        if recipe.exported:
            archive = cache_dir / recipe.archive
            partial = work / archive.name
            first, *others = recipe.tags
            extra = [f"--additional-tag={tag}" for tag in others]
            run(
                "skopeo", "copy", "--quiet", *extra,
                f"oci:{reference}", f"docker-archive:{partial}:{first}",
                timeout=PACK_TIMEOUT,
            )  # fmt: skip
            os.replace(partial, archive)
        if keep_bundle:
            kept.parent.mkdir(exist_ok=True)
            os.replace(bundle, kept)
    record = Record(key, recipe.tags, _now(), time.monotonic() - started)
    _write_record(cache_dir, recipe, record)
    return record


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC).replace(microsecond=0)


def import_images(containerd_socket: Path, archives: Sequence[Path]) -> None:
    """Import docker-archive tars into the ``k8s.io`` namespace of the containerd listening
    on ``containerd_socket``, unpacked on first use; importing an image again is harmless."""
    for archive in archives:
        run(
            "ctr", "-a", containerd_socket, "-n", CRI_NAMESPACE,
            "images", "import", "--no-unpack", archive,
            timeout=PACK_TIMEOUT,
        )  # fmt: skip
