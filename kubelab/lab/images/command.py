"""``kubelab images``: the lab's images, built and loaded without a registry.

- ``build [--cache DIR] [IMAGE...]``: build images (all by default) into the cache, only those
  missing or whose inputs changed; one line per image built, with its time.
- ``list [--cache DIR]``: every image: short name, archive size, build date and time taken,
  whether the cache holds it as its inputs are now (fresh, stale, missing), and its names.
- ``load --address SOCKET [--cache DIR] [IMAGE...]``: import images (all by default) into the
  containerd listening on SOCKET, building what is missing or stale first.

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

from kubelab.lab.images import ALL_IMAGES, ImageError, Recipe, Record, recipe
from kubelab.lab.images.cache import build, entry, import_images
from kubelab.lab.images.recipes import RECIPES
from kubelab.lab.topology import IMAGE_CACHE
from kubelab.table import aligned


def _image(text: str) -> Recipe:
    try:
        return recipe(text)
    except ImageError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def configure(parser: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    commands = parser.add_subparsers(dest="images_command", metavar="COMMAND", required=True)
    build_ = commands.add_parser("build", help="build images missing from the cache or stale")
    list_ = commands.add_parser("list", help="the images, their sizes, dates and states")
    load = commands.add_parser("load", help="import images into a containerd")
    load.add_argument(
        "--address", type=Path, required=True, help="containerd's socket (as ctr's -a)"
    )
    for sub in (build_, list_, load):
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
        handler = {"build": _build, "list": _list, "load": _load}[args.images_command]
        try:
            return handler(args)
        except ImageError as error:
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


def _list(args: argparse.Namespace) -> int:
    print(format_table(args.cache, [r for r in RECIPES.values() if r.exported]))
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
