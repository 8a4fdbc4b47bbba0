"""Asking the cloud about a Node's instance, through InstancesV2 when the cloud has it.

The node controllers want three answers (does the instance exist, is it shut down, what is
its metadata).  A cloud offering :class:`InstancesV2` gives each in one call; an older one
offers :class:`Instances` (by name or provider ID) plus :class:`Zones`, and the answers are
assembled from those as upstream's ``getInstanceMetadata`` does.  Whether a cloud has either is
checked when the controllers are built, so these functions may assume one of them.
"""

from __future__ import annotations

from controlplane.cloud.context import CapabilityUnsupported
from controlplane.cloud.provider import (
    CloudProvider,
    InstanceMetadata,
    InstanceNotFound,
    Instances,
    NotImplementedByProvider,
)
from kube.api.kinds.core_v1.node import Node


def require_instances(cloud: CloudProvider) -> None:
    """Raise CapabilityUnsupported unless the cloud offers InstancesV2 or Instances."""
    if not cloud.instances_v2()[1] and not cloud.instances()[1]:
        raise CapabilityUnsupported("the cloud provider supports neither InstancesV2 nor Instances")


def _v1(cloud: CloudProvider) -> Instances:
    instances, supported = cloud.instances()
    if not supported or instances is None:
        raise CapabilityUnsupported("the cloud provider supports neither InstancesV2 nor Instances")
    return instances


async def _provider_id(cloud: CloudProvider, node: Node) -> str:
    provider_id = node.spec.provider_id if node.spec else None
    if provider_id:
        return provider_id
    instance_id = await _v1(cloud).instance_id(node.metadata.name or "")
    return f"{cloud.provider_name()}://{instance_id}"


async def instance_exists(cloud: CloudProvider, node: Node) -> bool:
    """Whether the Node's instance still exists in the cloud."""
    v2, supported = cloud.instances_v2()
    if supported and v2 is not None:
        return await v2.instance_exists(node)
    try:
        provider_id = await _provider_id(cloud, node)
    except InstanceNotFound:
        return False
    return await _v1(cloud).instance_exists_by_provider_id(provider_id)


async def instance_shutdown(cloud: CloudProvider, node: Node) -> bool:
    """Whether the Node's instance is shut down; False where the cloud cannot tell."""
    v2, supported = cloud.instances_v2()
    try:
        if supported and v2 is not None:
            return await v2.instance_shutdown(node)
        return await _v1(cloud).instance_shutdown_by_provider_id(await _provider_id(cloud, node))
    except NotImplementedByProvider:
        return False


async def instance_metadata(cloud: CloudProvider, node: Node) -> InstanceMetadata:
    """The Node's instance metadata; InstanceNotFound if the cloud has no such instance."""
    v2, supported = cloud.instances_v2()
    if supported and v2 is not None:
        return await v2.instance_metadata(node)
    instances = _v1(cloud)
    provider_id = await _provider_id(cloud, node)
    zone, region = "", ""
    zones, has_zones = cloud.zones()
    if has_zones and zones is not None:
        found = await zones.get_zone_by_provider_id(provider_id)
        zone, region = found.failure_domain, found.region
    return InstanceMetadata(
        provider_id=provider_id,
        instance_type=await instances.instance_type_by_provider_id(provider_id),
        node_addresses=tuple(await instances.node_addresses_by_provider_id(provider_id)),
        zone=zone,
        region=region,
    )
