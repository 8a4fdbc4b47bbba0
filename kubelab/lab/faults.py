"""Faults on purpose, for the HA lab's fault tests and for people trying failover by hand.

- ``kill``: a signal (SIGKILL by default) to one component's process, by the PID the process
  table recorded, as a crash would; the lab's supervisor starts it again after its backoff
  (``kubelab.lab.supervisor``), so this is "crash and come back";
- ``stop`` / ``start``: a component kept down: ``stop`` removes it from the process table
  before signalling (``ProcessTable.stop``), so the supervisor never restarts it, and
  ``start`` starts it again from its definition (``kubelab.lab.components``), recorded anew;
- ``partition`` / ``heal``: one control-plane node cut off from the other control planes by
  DROP rules in the router's namespace (``kubelab.lab.network.partition``), the host's
  iptables untouched; the load balancer (in the router) still reaches every node.

``kubelab lab kill|stop|start NODE COMPONENT`` and ``kubelab lab partition|heal NODE`` call
these.
"""

from __future__ import annotations

import os
import signal

from kubelab.lab import components, network
from kubelab.lab.cluster import LabError, start_component
from kubelab.lab.processes import ProcessRecord, ProcessTable
from kubelab.lab.topology import Lab, Node, Role


def kill(lab: Lab, node: str, component: str, sig: int = signal.SIGKILL) -> int:
    """Send ``sig`` to the component's process; its PID.  LabError if it is not running."""
    record = ProcessTable(lab.process_file).get(f"{node}/{component}")
    if record is None or not record.alive():
        raise LabError(f"{node}/{component} is not running in lab {lab.name}")
    os.kill(record.pid, sig)
    return record.pid


def stop(lab: Lab, node: str, component: str) -> bool:
    """Stop the component and keep it down (the supervisor no longer sees it); True if it
    was running.  KeyError for a component the lab does not have."""
    key = components.by_key(lab, f"{node}/{component}").key
    return ProcessTable(lab.process_file).stop(key)


def start(lab: Lab, node: str, component: str) -> ProcessRecord:
    """Start a component ``stop`` kept down (or one that is recorded but dead); its record.
    LabError if it runs already."""
    wanted = components.by_key(lab, f"{node}/{component}")
    table = ProcessTable(lab.process_file)
    current = table.get(wanted.key)
    if current is not None and current.alive():
        raise LabError(f"{wanted.key} runs already (pid {current.pid})")
    start_component(table, wanted)
    started = table.get(wanted.key)
    assert started is not None
    return started


def partition(lab: Lab, name: str) -> list[Node]:
    """Cut control plane ``name`` off from the other control planes; the nodes it no longer
    reaches."""
    node = _controlplane(lab, name)
    others = [cp for cp in lab.controlplanes if cp != node]
    network.partition(lab, node, others)
    return others


def heal(lab: Lab, name: str) -> None:
    """Undo ``partition`` of control plane ``name``."""
    network.heal(lab, _controlplane(lab, name))


def _controlplane(lab: Lab, name: str) -> Node:
    node = lab.node(name)
    if node.role is not Role.CONTROLPLANE or not lab.ha:
        raise LabError(f"{name}: only a control plane of an HA lab can be partitioned")
    return node
