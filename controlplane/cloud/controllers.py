"""Every cloud controller by name, in the order the cloud-controller-manager starts them.

Names are upstream's (``--controllers`` takes them).  A controller whose capability the
cloud lacks raises ``CapabilityUnsupported`` when built and is skipped with a log line, as
upstream's are.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from controlplane.cloud import cloudnode, cloudnodelifecycle, route, service
from controlplane.cloud.context import CloudContext
from controlplane.controllers.context import ControllerContext
from controlplane.controllers.controller import Controller

CloudControllerFactory = Callable[[ControllerContext, CloudContext], Controller]

CONTROLLERS: Mapping[str, CloudControllerFactory] = {
    cloudnode.NAME: cloudnode.new,
    cloudnodelifecycle.NAME: cloudnodelifecycle.new,
    service.NAME: service.new,
    route.NAME: route.new,
}
