"""The CNI agent as a child process of the kubelet, kept running.

The agent does its netlink work with pyroute2, which forks a child per pod-netns operation
and SIGTERMs it afterwards.  In the kubelet's own process that fork would happen beside gRPC's
threads and inherit the event loop's signal wakeup fd (a child's SIGTERM then stops the
kubelet), so the agent runs as ``python -m node.cni.agent SOCKET``, started by the kubelet and
so in the kubelet's network namespace, the node's.  ``supervise`` restarts it if it dies; the
``kubelab-cni`` shim falls back to the in-process plugin meanwhile, so pods never wait on it.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path

log = logging.getLogger(__name__)

READY_TIMEOUT = 30.0
RESTART_DELAY = 1.0
STOP_TIMEOUT = 10.0


class AgentProcess:
    """``start`` the agent, ``supervise`` it until cancelled, ``stop`` it."""

    def __init__(self, socket_path: Path) -> None:
        self.socket_path = socket_path
        self._process: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        """Start the agent and wait until it listens (its socket appears)."""
        self.socket_path.unlink(missing_ok=True)
        self._process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "node.cni.agent", str(self.socket_path)
        )
        loop = asyncio.get_running_loop()
        deadline = loop.time() + READY_TIMEOUT
        while not self.socket_path.exists():
            if self._process.returncode is not None:
                raise RuntimeError(f"the CNI agent exited with {self._process.returncode}")
            if loop.time() > deadline:
                raise RuntimeError(f"the CNI agent did not listen on {self.socket_path}")
            await asyncio.sleep(0.05)
        log.info("CNI agent %d listening on %s", self._process.pid, self.socket_path)

    async def supervise(self) -> None:
        """Restart the agent whenever it exits; returns only by cancellation."""
        while True:
            if self._process is None:
                await self.start()
            assert self._process is not None
            code = await self._process.wait()
            log.warning("the CNI agent exited with %d; restarting it", code)
            self._process = None
            await asyncio.sleep(RESTART_DELAY)

    async def stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.returncode is not None:
            return
        process.terminate()
        try:
            await asyncio.wait_for(process.wait(), STOP_TIMEOUT)
        except TimeoutError:
            process.kill()
            await process.wait()
