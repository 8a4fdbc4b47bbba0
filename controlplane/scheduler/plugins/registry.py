"""The in-tree registry: every default plugin's name and factory.

A profile enables plugins by these names; out-of-tree plugins join by merging their own
mapping into a copy of ``REGISTRY`` before the scheduler is built.
"""

from __future__ import annotations

from collections.abc import Mapping

from controlplane.scheduler import names
from controlplane.scheduler.framework.interface import PluginFactory
from controlplane.scheduler.plugins import (
    defaultbinder,
    defaultpreemption,
    imagelocality,
    interpodaffinity,
    nodeaffinity,
    nodename,
    nodeports,
    noderesourcesbalancedallocation,
    noderesourcesfit,
    nodeunschedulable,
    nodevolumelimits,
    podtopologyspread,
    prioritysort,
    schedulinggates,
    tainttoleration,
    volumebinding,
    volumerestrictions,
)

REGISTRY: Mapping[str, PluginFactory] = {
    names.PRIORITY_SORT: prioritysort.new,
    names.SCHEDULING_GATES: schedulinggates.new,
    names.NODE_UNSCHEDULABLE: nodeunschedulable.new,
    names.NODE_NAME: nodename.new,
    names.TAINT_TOLERATION: tainttoleration.new,
    names.NODE_AFFINITY: nodeaffinity.new,
    names.NODE_PORTS: nodeports.new,
    names.NODE_RESOURCES_FIT: noderesourcesfit.new,
    names.NODE_RESOURCES_BALANCED_ALLOCATION: noderesourcesbalancedallocation.new,
    names.IMAGE_LOCALITY: imagelocality.new,
    names.INTER_POD_AFFINITY: interpodaffinity.new,
    names.POD_TOPOLOGY_SPREAD: podtopologyspread.new,
    names.VOLUME_BINDING: volumebinding.new,
    names.VOLUME_RESTRICTIONS: volumerestrictions.new,
    names.NODE_VOLUME_LIMITS: nodevolumelimits.new,
    names.DEFAULT_PREEMPTION: defaultpreemption.new,
    names.DEFAULT_BINDER: defaultbinder.new,
}
