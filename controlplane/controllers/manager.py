"""Running the enabled controllers together, as one component: the run loop the
controller-manager and the cloud-controller-manager share.

``--controllers`` works as upstream's: ``*`` enables every controller that is on by default,
a name enables that one, ``-name`` disables it; ``*,-garbage-collector`` is everything but
the garbage collector.  All controllers share one informer factory, so each resource is
watched once however many controllers read it.

``run_manager`` is a manager process's life: events, informers, leader election (only the
holder of the manager's Lease runs controllers; one that loses it stops, status 1), and
``/healthz``, ``/readyz`` (ready once the informer caches have synced) and ``/metrics`` with
``leader_election_master_status``.  What the two managers run under it is theirs.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from controlplane.controllers.context import ControllerContext, ControllerOptions
from controlplane.controllers.controller import Controller
from kube import component
from kube.client.events import EventRecorder
from kube.client.informers import SharedInformerFactory
from kube.client.leaderelection import LeaderElectionConfig, LeaderElector, leader_identity
from kube.client.rest import Client
from kube.clock import Clock
from kube.metrics import Registry

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


@dataclass(frozen=True)
class Manager:
    """What tells one manager process from the other."""

    name: str
    """``controller-manager``: in messages and the banner."""
    event_component: str
    """The component its shared event recorder names (``kube-controller-manager``); each
    controller that records events names its own (``Controller.EVENT_SOURCE``) over it."""
    lease: str
    """Its Lease in ``kube-system``."""
    leader_elect: bool
    bind_address: str
    port: int


def health_app(
    leading: Callable[[], bool], synced: Callable[[], bool], lease: str
) -> web.Application:
    metrics = Registry()
    leader = metrics.gauge(
        "leader_election_master_status",
        "1 while this instance holds the lease it competes for (or runs without one).",
        ("name",),
    )

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(_: web.Request) -> web.Response:
        if synced():
            return web.Response(text="ok")
        return web.Response(status=503, text="informer caches not synced yet")

    async def render(_: web.Request) -> web.Response:
        leader.set(lease, value=1 if leading() else 0)
        return web.Response(text=metrics.render(), content_type="text/plain", charset="utf-8")

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/livez", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", render)
    return app


async def run_manager(
    manager: Manager,
    client: Client,
    clock: Clock,
    options: ControllerOptions,
    controllers: Callable[[ControllerContext], Coroutine[Any, Any, None]],
    banner: Callable[[int], str],
    stop: asyncio.Event,
) -> int:
    """Run ``controllers(ctx)`` while this process leads, until ``stop`` is set (0) or the
    lease is lost (1); ``banner(port)`` is printed once the health port serves."""
    recorder = EventRecorder(client, component=manager.event_component, clock=clock)
    informers = SharedInformerFactory(client, clock=clock)
    ctx = ControllerContext(
        client=client, informers=informers, recorder=recorder, clock=clock, options=options
    )
    elector = (
        LeaderElector(
            client, LeaderElectionConfig(lock_name=manager.lease, identity=leader_identity()), clock
        )
        if manager.leader_elect
        else None
    )
    synced = asyncio.Event()

    async def lead() -> None:
        task = asyncio.create_task(controllers(ctx))
        try:
            await informers.wait_for_cache_sync()
            synced.set()
            await task
        finally:
            task.cancel()

    leading = (lambda: elector.is_leader) if elector is not None else (lambda: True)
    runner, port = await component.serve_health(
        health_app(leading, synced.is_set, manager.lease), manager.bind_address, manager.port
    )
    print(banner(port), flush=True)
    await recorder.start()
    work = elector.run(lead) if elector is not None else lead()
    try:
        return await component.until_stopped(work, stop, manager.name)
    finally:
        await informers.shutdown()
        await recorder.close()
        await runner.cleanup()
