"""Running the enabled controllers together, as one component.

``--controllers`` works as upstream's: ``*`` enables every controller that is on by default,
a name enables that one, ``-name`` disables it; ``*,-garbage-collector`` is everything but
the garbage collector.  All controllers share one informer factory, so each resource is
watched once however many controllers read it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence

from controlplane.controllers.context import ControllerContext
from controlplane.controllers.controller import Controller

log = logging.getLogger("kubelab.controllers")

ControllerFactory = Callable[[ControllerContext], Controller]


class NotStarted(Exception):
    """Raised by a controller's factory when its configuration leaves it off (upstream's
    "skipping"): the manager logs why and runs the others."""


class UnknownControllerError(ValueError):
    """``--controllers`` names a controller that does not exist."""


def enabled(spec: str, known: Sequence[str], off_by_default: Sequence[str] = ()) -> list[str]:
    """The controllers ``spec`` enables, in the order of ``known``."""
    items = [item.strip() for item in spec.split(",") if item.strip()]
    wanted: set[str] = set()
    disabled: set[str] = set()
    for item in items:
        name = item.removeprefix("-")
        if name != "*" and name not in known:
            raise UnknownControllerError(
                f"--controllers: {name!r} is not a known controller (known: {', '.join(known)})"
            )
        if item == "*":
            wanted.update(n for n in known if n not in off_by_default)
        elif item.startswith("-"):
            disabled.add(name)
        else:
            wanted.add(name)
    return [name for name in known if name in wanted and name not in disabled]


async def run_controllers(
    ctx: ControllerContext,
    factories: Mapping[str, ControllerFactory],
    names: Sequence[str],
    contexts: Mapping[str, ControllerContext] | None = None,
) -> None:
    """Build the named controllers, start the shared informers, and run them all until
    cancelled (or until one fails, which ends them all).  A controller named in ``contexts``
    gets that context (its own credentials) instead of ``ctx``."""
    contexts = contexts or {}
    controllers = []
    for name in names:
        try:
            controllers.append(factories[name](contexts.get(name, ctx)))
        except NotStarted as reason:
            log.warning("%s not started: %s", name, reason)
    ctx.informers.start()
    tasks = [
        asyncio.create_task(c.run(ctx.options.workers(c.NAME)), name=f"controller {c.NAME}")
        for c in controllers
    ]
    try:
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
