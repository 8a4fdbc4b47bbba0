"""core/v1 resource names (``cpu``, ``hugepages-2Mi``, ``example.com/gpu``, ``requests.memory``):
which are standard, which may be overcommitted, and the name checks of containers, quotas and
limit ranges (upstream's ``validateResourceName`` family)."""

from __future__ import annotations

from kube.api import names
from kube.api.errors import ErrorList, Path

INTEGER_RESOURCES = frozenset(
    {
        "pods",
        "resourcequotas",
        "services",
        "replicationcontrollers",
        "secrets",
        "configmaps",
        "persistentvolumeclaims",
        "services.nodeports",
        "services.loadbalancers",
    }
)
COMPUTE_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage"})
STANDARD_QUOTA_RESOURCES = (
    INTEGER_RESOURCES
    | COMPUTE_RESOURCES
    | {
        "requests.cpu",
        "requests.memory",
        "requests.storage",
        "requests.ephemeral-storage",
        "limits.cpu",
        "limits.memory",
        "limits.ephemeral-storage",
    }
)
STANDARD_RESOURCES = STANDARD_QUOTA_RESOURCES | {"storage"}


def is_native(resource: str) -> bool:
    return "/" not in resource or "kubernetes.io/" in resource


def is_extended(resource: str) -> bool:
    """A resource a device plugin or operator advertises (``example.com/gpu``)."""
    return (
        not is_native(resource)
        and not resource.startswith("requests.")
        and not names.is_qualified_name("requests." + resource)
    )


def is_quota_hugepages(resource: str) -> bool:
    return resource.startswith(("hugepages-", "requests.hugepages-"))


def is_hugepages(resource: str) -> bool:
    return resource.startswith("hugepages-")


def overcommit_allowed(resource: str) -> bool:
    """Whether a request may be below its limit (not for hugepages or extended resources)."""
    return is_native(resource) and not is_hugepages(resource)


def validate_resource_name(resource: str, path: Path, errors: ErrorList) -> bool:
    """A qualified name, standard unless it has a prefix; whether it is a qualified name."""
    problems = names.is_qualified_name(resource)
    for problem in problems:
        errors.invalid(path, resource, problem)
    if problems:
        return False
    if "/" not in resource and not (resource in STANDARD_RESOURCES or is_quota_hugepages(resource)):
        errors.invalid(path, resource, "must be a standard resource type or fully qualified")
    return True


def validate_quota_resource_name(resource: str, path: Path, errors: ErrorList) -> None:
    """A resource a quota may count."""
    validate_resource_name(resource, path, errors)
    if "/" not in resource and not (
        resource in STANDARD_QUOTA_RESOURCES or is_quota_hugepages(resource)
    ):
        errors.invalid(path, resource, "must be a standard resource for quota")


def validate_container_resource_name(resource: str, path: Path, errors: ErrorList) -> None:
    """A resource a limit range of pods or containers may name: a valid resource name that
    :func:`validate_container_resource_kind` accepts (``validateContainerResourceName``)."""
    if validate_resource_name(resource, path, errors):
        validate_container_resource_kind(resource, path, errors)


def validate_container_resource_kind(resource: str, path: Path, errors: ErrorList) -> None:
    """A qualified resource name is one containers may use: standard for containers, hugepages
    or an extended resource."""
    if "/" not in resource:
        if resource not in COMPUTE_RESOURCES and not is_hugepages(resource):
            errors.invalid(path, resource, "must be a standard resource for containers")
    elif not is_native(resource) and not is_extended(resource):
        errors.invalid(path, resource, "doesn't follow extended resource name standard")
