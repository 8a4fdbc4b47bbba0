"""Lifecycle hooks: postStart and preStop handlers run against a container.

As upstream's ``pkg/kubelet/lifecycle/handlers.go``: an ``exec`` handler runs through CRI
ExecSync and fails on a non-zero exit; an ``httpGet`` handler sends one GET to the handler's
host (the pod IP by default) and fails only when no answer comes (the status code is not
checked, as upstream); ``sleep`` waits on the injected clock; ``tcpSocket`` is deprecated
for hooks and, as upstream, cannot run.  ``run`` returns None on success or upstream's
failure message; deciding what a failure means (kill the container, an event) and bounding
a preStop hook by the grace period is the runtime manager's part.
"""

from __future__ import annotations

from collections.abc import Sequence

import aiohttp

from kube.api.kinds.core_v1.pod import Container, LifecycleHandler, Pod
from kube.clock import Clock
from node.cri.client import CRIError, RuntimeClient
from node.kubelet.probes import resolve_port


def pod_ref(pod: Pod) -> str:
    """A pod as upstream's ``format.Pod`` names it: ``name_namespace(uid)``."""
    meta = pod.metadata
    return f"{meta.name}_{meta.namespace}({meta.uid})"


class HookRunner:
    """Runs lifecycle handlers; stateless apart from its CRI client and clock."""

    def __init__(self, cri: RuntimeClient, clock: Clock) -> None:
        self.cri = cri
        self.clock = clock

    async def run(
        self,
        pod: Pod,
        container: Container,
        container_id: str,
        handler: LifecycleHandler,
        pod_ips: Sequence[str],
    ) -> str | None:
        """Run ``handler`` once; None when it succeeded, else why it failed."""
        where = f'for Container "{container.name}" in Pod "{pod_ref(pod)}"'
        if handler.exec is not None:
            command = handler.exec.command or []
            try:
                result = await self.cri.exec_sync(container_id, command)
            except CRIError as error:
                return f"Exec lifecycle hook ({command}) {where} failed - error: {error}"
            if result.exit_code == 0:
                return None
            output = (result.stdout + result.stderr).decode(errors="replace")
            return (
                f"Exec lifecycle hook ({command}) {where} failed - error: command "
                f"'{' '.join(command)}' exited with {result.exit_code}: , message: {output!r}"
            )
        if handler.http_get is not None:
            action = handler.http_get
            host = action.host or (pod_ips[0] if pod_ips else "")
            try:
                port = resolve_port(action.port, container)
            except ValueError as error:
                return f"HTTP lifecycle hook ({action.path}) {where} failed - error: {error}"
            if not host:
                return f"HTTP lifecycle hook ({action.path}) {where} failed - error: no pod IP"
            bracketed = f"[{host}]" if ":" in host else host
            scheme = (action.scheme or "HTTP").lower()
            url = f"{scheme}://{bracketed}:{port}{action.path or '/'}"
            headers = {h.name or "": h.value or "" for h in action.http_headers or ()}
            try:
                async with (
                    aiohttp.ClientSession() as session,
                    session.get(url, headers=headers, ssl=False) as response,
                ):
                    await response.read()
            except (aiohttp.ClientError, OSError) as error:
                reason = str(error) or type(error).__name__
                return f"HTTP lifecycle hook ({action.path}) {where} failed - error: {reason}"
            return None
        if handler.sleep is not None:
            await self.clock.sleep(handler.sleep.seconds or 0)
            return None
        return "Cannot run handler: invalid handler: tcpSocket handlers are not supported"
