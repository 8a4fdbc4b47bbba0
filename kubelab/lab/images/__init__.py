"""The images a lab node needs, built locally: the machines reach no registry.

Images are built from what the machine has and from Debian packages, packed as OCI with umoci,
and converted by skopeo to docker-archive tars that keep the full image names
(``registry.k8s.io/pause:3.9``, ``docker.io/library/nginx:latest``), the names containerd's
CRI plugin finds them under, so ordinary manifests and tutorials work unchanged.

- ``recipes``: what each image is (pause, busybox, echoserver, nginx, python, kubelab, and the
  Debian base the last three share);
- ``cache``: the cache (build only what is missing or whose inputs changed), umoci and skopeo,
  and ``import_images`` into a containerd;
- ``programs``: the C programs of the scratch images;
- ``command``: ``kubelab images build|cached|load|list|push``.

``build_images(cache_dir, names)`` is what the lab and the tests call: the archives of the
named images (all of them unless told otherwise; tests that only run pods ask for
``BASIC_IMAGES``), built into the cache if missing or stale; a warm cache answers in
milliseconds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

from kubelab.lab.images.cache import (
    CRI_NAMESPACE,
    CommandError,
    ImageError,
    Recipe,
    Record,
    archive_name,
    build,
    import_images,
    run,
)
from kubelab.lab.images.recipes import (
    BUSYBOX_BINARY,
    BUSYBOX_IMAGE,
    ECHOSERVER_IMAGE,
    ECHOSERVER_PORT,
    KUBELAB_IMAGE,
    NGINX_IMAGE,
    PAUSE_IMAGE,
    PYTHON_IMAGE,
    RECIPES,
)

BASIC_IMAGES: Final = ("pause", "busybox")
"""What every node and most tests need: the sandbox image and a shell."""
ALL_IMAGES: Final = tuple(name for name, recipe in RECIPES.items() if recipe.exported)
"""Every image a lab offers, by short name."""

__all__ = [
    "ALL_IMAGES",
    "BASIC_IMAGES",
    "BUSYBOX_BINARY",
    "BUSYBOX_IMAGE",
    "CRI_NAMESPACE",
    "ECHOSERVER_IMAGE",
    "ECHOSERVER_PORT",
    "KUBELAB_IMAGE",
    "NGINX_IMAGE",
    "PAUSE_IMAGE",
    "PYTHON_IMAGE",
    "CommandError",
    "ImageError",
    "Recipe",
    "Record",
    "archive_name",
    "build_images",
    "import_images",
    "recipe",
    "run",
]


def recipe(name: str) -> Recipe:
    """The recipe of an exported image, by short name (``nginx``) or any of its names
    (``docker.io/library/nginx:latest``, ``nginx:latest``, ``nginx``)."""
    for candidate in RECIPES.values():
        if candidate.exported and name in _names(candidate):
            return candidate
    known = ", ".join(ALL_IMAGES)
    raise ImageError(f"no image {name!r}; the images are {known}")


def _names(candidate: Recipe) -> set[str]:
    names = {candidate.name}
    for tag in candidate.tags:
        names.add(tag)
        repository, _, version = tag.rpartition(":")
        for prefix in ("docker.io/library/", "docker.io/"):
            if repository.startswith(prefix):
                short = repository.removeprefix(prefix)
                names.add(f"{short}:{version}")
                if version == "latest":
                    names.add(short)
    return names


def build_images(
    cache_dir: Path,
    names: Sequence[str] = ALL_IMAGES,
    progress: Callable[[Recipe, Record], None] | None = None,
) -> list[Path]:
    """The docker-archive tars of the named images, in that order, built into ``cache_dir``
    where missing or stale (the Debian-based ones need root)."""
    return build(cache_dir, [recipe(n) for n in names], progress)
