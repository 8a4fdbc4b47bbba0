"""``kubelab images``: the lab's images, built, loaded, and in the lab registry.

- ``build [--cache DIR] [IMAGE...]``: build images (all by default) into the cache, only those
  missing or whose inputs changed; one line per image built, with its time.
- ``cached [--cache DIR]``: every image: short name, archive size, build date and time taken,
  whether the cache holds it as its inputs are now (fresh, stale, missing), and its names.
- ``load --address SOCKET [--cache DIR] [IMAGE...]``: import images (all by default) into the
  containerd listening on SOCKET, building what is missing or stale first.
- ``list [--name LAB]``: what the running lab's registry holds (``kubelab.lab.registry``):
  each image by the name pods use, and its tags.
- ``push [--name LAB] SOURCE [NAME:TAG]``: an image of your own into the lab registry, as
  ``kind load`` does: SOURCE is an OCI layout directory, an OCI archive or a docker archive;
  NAME defaults to the one SOURCE records.  Afterwards a pod naming it runs on every node.  A
  bad SOURCE (missing, not an image, corrupt) is one line on stderr, exit 1, and no name in
  the registry changes (a manifest is written only after all its blobs).

IMAGE is a short name (``nginx``) or any name of an image (``docker.io/library/nginx:latest``,
``nginx:latest``); an unknown one is a usage error.  Building the Debian-based images needs
root; listing does not.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from kube.table import aligned
from kubelab.lab.images import ALL_IMAGES, ImageError, Recipe, Record, recipe
from kubelab.lab.images.cache import build, entry, import_images
from kubelab.lab.images.recipes import RECIPES
from kubelab.lab.registry import LabRegistry, RegistryError, catalog, destination, push, source
from kubelab.lab.topology import IMAGE_CACHE, Lab, LabSpec, spec_file


def _image(text: str) -> Recipe:
    try:
        return recipe(text)
    except ImageError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def configure(parser: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    commands = parser.add_subparsers(dest="images_command", metavar="COMMAND", required=True)
    build_ = commands.add_parser("build", help="build images missing from the cache or stale")
    cached = commands.add_parser("cached", help="the images, their sizes, dates and states")
    load = commands.add_parser("load", help="import images into a containerd")
    load.add_argument(
        "--address", type=Path, required=True, help="containerd's socket (as ctr's -a)"
    )
    list_ = commands.add_parser("list", help="what the lab registry holds: images and tags")
    push = commands.add_parser(
        "push", help="push SOURCE (OCI layout, OCI or docker archive) into the lab registry"
    )
    push.add_argument("source", type=Path, metavar="SOURCE")
    push.add_argument("image", nargs="?", metavar="NAME:TAG", help="default: SOURCE's own name")
    for sub in (list_, push):
        sub.add_argument("--name", default="lab", help="the lab's name (default: lab)")
    for sub in (build_, cached, load):
        sub.add_argument("--cache", type=Path, default=IMAGE_CACHE, help=f"default: {IMAGE_CACHE}")
    for sub in (build_, load):
        sub.add_argument(
            "images",
            nargs="*",
            type=_image,
            metavar="IMAGE",
            help=f"short name or image name (default: all of {', '.join(ALL_IMAGES)})",
        )

    def run(args: argparse.Namespace) -> int:
        handler = {
            "build": _build,
            "cached": _cached,
            "load": _load,
            "list": _list,
            "push": _push,
        }[args.images_command]
        try:
            return handler(args)
        except (ImageError, RegistryError) as error:
            print(f"kubelab images: {error}", file=sys.stderr)
            return 1

    return run


def _wanted(args: argparse.Namespace) -> list[Recipe]:
    chosen: list[Recipe] = args.images or [recipe(name) for name in ALL_IMAGES]
    return list(dict.fromkeys(chosen))


def _report(built: Recipe, record: Record) -> None:
    print(f"built {built.name} in {record.seconds:.1f} s: {', '.join(built.tags)}", flush=True)


def _build(args: argparse.Namespace) -> int:
    started = time.monotonic()
    archives = build(args.cache, _wanted(args), _report)
    print(f"{len(archives)} images ready in {args.cache} ({time.monotonic() - started:.1f} s)")
    return 0


def _cached(args: argparse.Namespace) -> int:
    print(format_table(args.cache, [r for r in RECIPES.values() if r.exported]))
    return 0


def _running(name: str) -> LabRegistry:
    """The registry of the running lab ``name``."""
    try:
        spec = LabSpec.load(spec_file(name))
    except (OSError, ValueError, TypeError):
        raise RegistryError(f"lab {name} is not running (`kubelab lab up --name {name}`)") from None
    return LabRegistry.of(Lab(spec))


def _list(args: argparse.Namespace) -> int:
    rows = [("IMAGE", "TAGS")]
    rows += [(image, " ".join(tags)) for image, tags in catalog(_running(args.name))]
    print("\n".join(aligned(rows)))
    return 0


def _push(args: argparse.Namespace) -> int:
    where = _running(args.name)
    reference, recorded = source(args.source)
    name = args.image or recorded
    if name is None:
        raise RegistryError(f"{args.source} records no image name: give NAME:TAG")
    destination(where, name)  # a bad name is refused before anything is read
    started = time.monotonic()
    stored = push(where, reference, name)
    took = time.monotonic() - started
    print(f"pushed {name} to {stored.reference(where)} in {took:.1f} s")
    return 0


def format_table(cache_dir: Path, recipes: Sequence[Recipe]) -> str:
    """The ``list`` output: one row per image, aligned columns."""
    rows = [("IMAGE", "SIZE", "BUILT", "TOOK", "STATE", "NAMES")]
    for found in (entry(cache_dir, r) for r in recipes):
        size = "-" if found.size is None else f"{found.size / 1e6:.1f} MB"
        record = found.record
        built = "-" if record is None else record.built.strftime("%Y-%m-%d %H:%M:%S UTC")
        took = "-" if record is None else f"{record.seconds:.1f} s"
        rows.append(
            (found.recipe.name, size, built, took, found.state, " ".join(found.recipe.tags))
        )
    return "\n".join(aligned(rows))


def _load(args: argparse.Namespace) -> int:
    wanted = _wanted(args)
    archives = build(args.cache, wanted, _report)
    started = time.monotonic()
    import_images(args.address, archives)
    names = ", ".join(r.name for r in wanted)
    print(f"imported {names} into {args.address} in {time.monotonic() - started:.1f} s")
    return 0
