"""resource.k8s.io/v1: dynamic resource allocation (DRA), the API through which devices (GPUs,
NICs, FPGAs...) are described by their drivers and requested by workloads.

A DeviceClass is the administrator's category of devices, as a StorageClass is for volumes: CEL
selectors that every device of the class must satisfy, and opaque configuration handed to the
driver for each device claimed through it.  Claims name a class; a class with an
``extendedResourceName`` also serves pods that ask for that extended resource.

A ResourceClaim asks for devices: named requests, each either ``exactly`` some devices of a
class (ExactCount, by default one, or All that match) or the first of a prioritized list of
alternatives that can be met, with constraints across requests and configuration for the
drivers.  Its spec is immutable; its status (the allocation, the pods it is reserved for, the
drivers' reports) is written through ``/status`` by the scheduler and the drivers.  A
ResourceClaimTemplate, whose spec is immutable too, is the claim made for each pod that names it.

Only the API is served here: nothing allocates devices, so these objects are stored and validated
for the schedulers and drivers that would read them.  The selectors' CEL expressions are checked for
presence and size, not compiled: upstream compiles them in a DRA-specific environment (the
``device`` variable with its attributes and capacity) that ``kube/`` has no compiler for, and the
CEL compiler of the control plane (controlplane/apiserver/crd/cel.py) knows only the CRD and
admission environments.

Field names, order and protobuf numbers are k8s.io/api release-1.36's (DeviceClassSpec's field 3,
suitableNodes, was removed upstream and is not declared); validation and messages are
pkg/apis/resource/validation's, but for what needs the device API's own formats (the attribute
names of constraints, toleration keys beyond qualified names, the status's pool and device names
against the allocation), not checked here.  Opaque parameters are a RawExtension, which travels
in protobuf as FieldsV1 does (the JSON bytes in field 1).
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Self

import msgspec

from kube.api import expressions, names
from kube.api.errors import ROOT, ErrorList, Path
from kube.api.expressions import Environment
from kube.api.kinds.core_v1.resources import is_extended
from kube.api.kinds.core_v1.volume import NodeSelector, validate_csi_driver_name
from kube.api.meta_v1 import Condition, ObjectMeta, Resource
from kube.api.printing import AGE_COLUMN, NAME_COLUMN, Column
from kube.api.scheme import kind
from kube.api.struct import (
    Embedded,
    QuantityValue,
    RawJSON,
    Struct,
    Time,
    atomic,
    meta,
)

GROUP = "resource.k8s.io"

# pkg/apis/resource/types.go's limits.
DEVICE_SELECTORS_MAX_SIZE = 32
DEVICE_CONFIG_MAX_SIZE = 32
DEVICE_REQUESTS_MAX_SIZE = 32
DEVICE_CONSTRAINTS_MAX_SIZE = 32
FIRST_AVAILABLE_MAX_SIZE = 8
DEVICE_TOLERATIONS_MAX_SIZE = 16
RESERVED_FOR_MAX_SIZE = 256
SLICE_MAX_DEVICES = 128
SLICE_MAX_DEVICES_WITH_TAINTS_OR_COUNTERS = 64
SLICE_MAX_COUNTER_SETS = 8
MAX_ATTRIBUTES_AND_CAPACITIES = 32
DEVICE_TAINTS_MAX_SIZE = 16
POOL_NAME_MAX_LENGTH = 253
ATTRIBUTE_VALUE_MAX_LENGTH = 64
DEVICE_ID_MAX_LENGTH = 32
DEVICE_DOMAIN_MAX_LENGTH = 63
TAINT_EFFECTS = ("NoExecute", "NoSchedule", "None")
SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(-(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(\.(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*)?"
    r"(\+[0-9a-zA-Z-]+(\.[0-9a-zA-Z-]+)*)?$"
)
ALLOCATION_MODES = ("All", "ExactCount")
TOLERATION_OPERATORS = ("Equal", "Exists")
TOLERATION_EFFECTS = ("NoExecute", "NoSchedule")
CEL_SELECTOR_EXPRESSION_MAX_LENGTH = 10 * 1024
OPAQUE_PARAMETERS_MAX_LENGTH = 10 * 1024


class CELDeviceSelector(Struct):
    """A CEL expression over a device (``device.driver``, ``device.attributes``, ...)."""

    expression: Annotated[
        str | None,
        meta(
            required=True,
            doc="A CEL expression that must evaluate to true for a device to be selected.",
            proto=1,
        ),
    ] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        if self.expression and len(self.expression) > CEL_SELECTOR_EXPRESSION_MAX_LENGTH:
            errors.too_long(path.child("expression"), CEL_SELECTOR_EXPRESSION_MAX_LENGTH)
            return
        problem = expressions.problem(Environment.DEVICE_SELECTOR, self.expression or "")
        if problem is not None:
            errors.invalid(
                path.child("expression"), self.expression, f"compilation failed: {problem}"
            )


class DeviceSelector(Struct):
    """One criterion a device must satisfy."""

    cel: Annotated[
        CELDeviceSelector | None,
        meta(required=True, doc="A CEL expression that selects a device.", proto=1),
    ] = None


class OpaqueDeviceConfiguration(Struct):
    """Configuration for one driver, in the driver's own format."""

    driver: Annotated[
        str | None,
        meta(
            required=True,
            doc="The driver the configuration applies to (a DNS subdomain, at most 63 characters).",
            proto=1,
        ),
    ] = None
    parameters: Annotated[
        RawJSON,
        meta(
            preserve_unknown=True,
            doc="The configuration (required; {} counts): a JSON object, perhaps a versioned "
            "one with apiVersion and kind; at most 10 KiB.",
            proto=2,
        ),
    ] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        validate_csi_driver_name(self.driver, path.child("driver"), errors)
        parameters = path.child("parameters")
        if self.parameters is None:
            # Checked here, not declared required: that would refuse an empty object too.
            errors.required(parameters)
        elif len(json.dumps(self.parameters, separators=(",", ":"))) > OPAQUE_PARAMETERS_MAX_LENGTH:
            errors.too_long(parameters, OPAQUE_PARAMETERS_MAX_LENGTH)
        elif not isinstance(self.parameters, dict):
            errors.invalid(parameters, "<value omitted>", "parameters must be a valid JSON object")


class DeviceClassConfiguration(Struct):
    """Configuration applied to each device claimed through a class (upstream embeds a
    DeviceConfiguration at field 1; its one field, ``opaque``, is declared here flat)."""

    PROTO_EMBEDDED = (Embedded(1, "DeviceConfiguration", ("opaque",)),)

    opaque: Annotated[
        OpaqueDeviceConfiguration | None,
        meta(required=True, doc="Configuration in the driver's own format.", proto=1),
    ] = None


def _validate_list_size(items: list[Any] | None, limit: int, path: Path, errors: ErrorList) -> None:
    if items is not None and len(items) > limit:
        errors.too_many(path, len(items), limit)


class DeviceClassSpec(Struct):
    """Which devices belong to a class and how they are configured."""

    selectors: Annotated[
        list[DeviceSelector] | None,
        atomic(doc="Criteria that every device of the class satisfies; at most 32.", proto=1),
    ] = None
    config: Annotated[
        list[DeviceClassConfiguration] | None,
        atomic(
            doc="Configuration passed to the drivers for each device claimed through the "
            "class; at most 32.",
            proto=2,
        ),
    ] = None
    extended_resource_name: Annotated[
        str | None,
        meta(
            doc="The extended resource name pods may request to get devices of this class.",
            proto=4,
        ),
    ] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        _validate_list_size(
            self.selectors, DEVICE_SELECTORS_MAX_SIZE, path.child("selectors"), errors
        )
        _validate_list_size(self.config, DEVICE_CONFIG_MAX_SIZE, path.child("config"), errors)
        name = self.extended_resource_name
        if name is not None and not is_extended(name):
            errors.invalid(
                path.child("extendedResourceName"), name, "must be a valid extended resource name"
            )


@kind(
    group=GROUP,
    version="v1",
    plural="deviceclasses",
    namespaced=False,
    returns_deleted=True,
    columns=(NAME_COLUMN, AGE_COLUMN),
)
class DeviceClass(Resource):
    """A category of devices that claims can ask for, with the drivers' configuration."""

    spec: Annotated[
        DeviceClassSpec | None,
        meta(required=True, doc="The selectors and configuration of the class.", proto=2),
    ] = None

    def set_defaults(self) -> None:
        if self.spec is None:
            self.spec = DeviceClassSpec()


# ResourceClaim and ResourceClaimTemplate.


class DeviceToleration(Struct):
    """A taint of a device that a request tolerates."""

    key: Annotated[
        str | None, meta(doc="The taint key tolerated; empty: every key (with Exists).", proto=1)
    ] = None
    operator: Annotated[
        str | None,
        meta(enum=TOLERATION_OPERATORS, doc="Equal (the default) or Exists.", proto=2),
    ] = None
    value: Annotated[str | None, meta(doc="The taint value matched (Equal).", proto=3)] = None
    effect: Annotated[
        str | None,
        meta(doc="The effect matched: NoSchedule or NoExecute; empty: every effect.", proto=4),
    ] = None
    toleration_seconds: Annotated[
        int | None,
        meta(doc="How long a NoExecute taint is tolerated; unset: forever.", proto=5, int64=True),
    ] = None

    def set_defaults(self) -> None:
        if self.operator is None:
            self.operator = "Equal"

    def validate(self, path: Path, errors: ErrorList) -> None:
        if self.key:
            errors.extend_checked(path.child("key"), self.key, names.is_qualified_name(self.key))
        if self.operator == "Exists" and self.value:
            errors.invalid(
                path.child("value"), self.value, "must be empty when `operator` is 'Exists'"
            )
        if self.operator not in TOLERATION_OPERATORS:
            errors.not_supported(path.child("operator"), self.operator, TOLERATION_OPERATORS)
        if self.effect and self.effect not in TOLERATION_EFFECTS:
            errors.not_supported(path.child("effect"), self.effect, TOLERATION_EFFECTS)


class CapacityRequirements(Struct):
    """How much of each capacity of a device a request consumes."""

    requests: Annotated[
        dict[str, QuantityValue] | None,
        meta(doc="The amount requested of each named capacity.", proto=1),
    ] = None


def _validate_allocation(request: Any, path: Path, errors: ErrorList) -> None:
    """An exact request's or subrequest's class, list limits and allocation mode and count."""
    if request.device_class_name:
        errors.extend_checked(
            path.child("deviceClassName"),
            request.device_class_name,
            names.is_dns1123_subdomain(request.device_class_name),
        )
    _validate_list_size(
        request.selectors, DEVICE_SELECTORS_MAX_SIZE, path.child("selectors"), errors
    )
    _validate_list_size(
        request.tolerations, DEVICE_TOLERATIONS_MAX_SIZE, path.child("tolerations"), errors
    )
    mode, count = request.allocation_mode, request.count or 0
    if mode == "All" and count != 0:
        errors.invalid(
            path.child("count"), count, "must not be specified when allocationMode is 'All'"
        )
    elif mode == "ExactCount" and count <= 0:
        errors.invalid(path.child("count"), count, "must be greater than zero")
    elif mode not in ALLOCATION_MODES:
        errors.not_supported(path.child("allocationMode"), mode, ALLOCATION_MODES)


def _default_allocation(request: Any) -> None:
    """ExactCount of one device unless said otherwise."""
    if request.allocation_mode is None:
        request.allocation_mode = "ExactCount"
    if request.allocation_mode == "ExactCount" and request.count is None:
        request.count = 1


class ExactDeviceRequest(Struct):
    """A request for one or more identical devices of a class."""

    device_class_name: Annotated[
        str | None,
        meta(required=True, doc="The DeviceClass whose devices are requested.", proto=1),
    ] = None
    selectors: Annotated[
        list[DeviceSelector] | None,
        atomic(doc="Criteria a device must satisfy, beside the class's.", proto=2),
    ] = None
    allocation_mode: Annotated[
        str | None,
        meta(doc="ExactCount (the default: count devices) or All (every matching one).", proto=3),
    ] = None
    count: Annotated[
        int | None,
        meta(doc="How many devices, with ExactCount; default 1.", proto=4, int64=True),
    ] = None
    admin_access: Annotated[
        bool | None, meta(doc="Whether the devices are claimed for administration.", proto=5)
    ] = None
    tolerations: Annotated[
        list[DeviceToleration] | None,
        atomic(doc="Device taints the request tolerates; at most 16.", proto=6),
    ] = None
    capacity: Annotated[
        CapacityRequirements | None,
        meta(doc="How much of each device's capacity the request consumes.", proto=7),
    ] = None

    def set_defaults(self) -> None:
        _default_allocation(self)

    def validate(self, path: Path, errors: ErrorList) -> None:
        _validate_allocation(self, path, errors)


class DeviceSubRequest(Struct):
    """One alternative of a request's prioritized list."""

    name: Annotated[
        str | None,
        meta(
            required=True,
            doc="The subrequest's name, referred to as <request>/<subrequest>.",
            proto=1,
        ),
    ] = None
    device_class_name: Annotated[
        str | None,
        meta(required=True, doc="The DeviceClass whose devices are requested.", proto=2),
    ] = None
    selectors: Annotated[
        list[DeviceSelector] | None,
        atomic(doc="Criteria a device must satisfy, beside the class's.", proto=3),
    ] = None
    allocation_mode: Annotated[
        str | None,
        meta(doc="ExactCount (the default: count devices) or All (every matching one).", proto=4),
    ] = None
    count: Annotated[
        int | None,
        meta(doc="How many devices, with ExactCount; default 1.", proto=5, int64=True),
    ] = None
    tolerations: Annotated[
        list[DeviceToleration] | None,
        atomic(doc="Device taints the subrequest tolerates; at most 16.", proto=6),
    ] = None
    capacity: Annotated[
        CapacityRequirements | None,
        meta(doc="How much of each device's capacity the subrequest consumes.", proto=7),
    ] = None

    def set_defaults(self) -> None:
        _default_allocation(self)

    def validate(self, path: Path, errors: ErrorList) -> None:
        _validate_dns_label(self.name, path.child("name"), errors)
        _validate_allocation(self, path, errors)


def _validate_dns_label(name: str | None, path: Path, errors: ErrorList) -> None:
    if name:
        errors.extend_checked(path, name, names.is_dns1123_label(name))


def _validate_unique_names(items: list[Any] | None, path: Path, errors: ErrorList) -> None:
    seen: set[str] = set()
    for i, item in enumerate(items or ()):
        if item.name in seen:
            errors.duplicate(path.index(i), item.name)
        seen.add(item.name)


class DeviceRequest(Struct):
    """A request for devices: exactly one of ``exactly`` and ``firstAvailable``."""

    name: Annotated[
        str | None,
        meta(required=True, doc="The request's name, referred to by containers.", proto=1),
    ] = None
    exactly: Annotated[
        ExactDeviceRequest | None,
        meta(doc="The devices, when they must be exactly these.", proto=2),
    ] = None
    first_available: Annotated[
        list[DeviceSubRequest] | None,
        atomic(doc="Alternatives, of which the first that can be met is used; at most 8.", proto=3),
    ] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        _validate_dns_label(self.name, path.child("name"), errors)
        if self.exactly is None and not self.first_available:
            errors.required(path, "exactly one of `exactly` or `firstAvailable` is required")
        elif self.exactly is not None and self.first_available:
            errors.invalid(
                path,
                None,
                "exactly one of `exactly` or `firstAvailable` is required, but multiple fields "
                "are set",
            )
        elif self.first_available:
            available = path.child("firstAvailable")
            _validate_list_size(self.first_available, FIRST_AVAILABLE_MAX_SIZE, available, errors)
            _validate_unique_names(self.first_available, available, errors)


class DeviceConstraint(Struct):
    """A constraint the devices of some requests must satisfy together."""

    requests: Annotated[
        list[str] | None,
        atomic(doc="The requests constrained; empty: all of them.", proto=1),
    ] = None
    match_attribute: Annotated[
        str | None,
        meta(doc="An attribute whose value the devices must share.", proto=2),
    ] = None
    distinct_attribute: Annotated[
        str | None,
        meta(doc="An attribute whose value must differ between the devices.", proto=3),
    ] = None


class DeviceClaimConfiguration(Struct):
    """Configuration of the devices of some requests (upstream embeds a DeviceConfiguration at
    field 2, declared here flat)."""

    PROTO_EMBEDDED = (Embedded(2, "DeviceConfiguration", ("opaque",)),)

    requests: Annotated[
        list[str] | None,
        atomic(doc="The requests configured; empty: all of them.", proto=1),
    ] = None
    opaque: Annotated[
        OpaqueDeviceConfiguration | None,
        meta(required=True, doc="Configuration in the driver's own format.", proto=1),
    ] = None


class DeviceClaim(Struct):
    """The devices a claim requests, their constraints and configuration."""

    requests: Annotated[
        list[DeviceRequest] | None,
        atomic(doc="The requests, all of which must be met; at most 32.", proto=1),
    ] = None
    constraints: Annotated[
        list[DeviceConstraint] | None,
        atomic(doc="Constraints on the devices allocated; at most 32.", proto=2),
    ] = None
    config: Annotated[
        list[DeviceClaimConfiguration] | None,
        atomic(doc="Configuration for the drivers; at most 32.", proto=3),
    ] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        requests = path.child("requests")
        _validate_list_size(self.requests, DEVICE_REQUESTS_MAX_SIZE, requests, errors)
        _validate_unique_names(self.requests, requests, errors)
        known = self._request_names()
        constraints, config = path.child("constraints"), path.child("config")
        _validate_list_size(self.constraints, DEVICE_CONSTRAINTS_MAX_SIZE, constraints, errors)
        _validate_list_size(self.config, DEVICE_CONFIG_MAX_SIZE, config, errors)
        references = [
            (constraints.index(i), c.requests) for i, c in enumerate(self.constraints or ())
        ]
        references += [(config.index(i), c.requests) for i, c in enumerate(self.config or ())]
        for at, referred in references:
            for j, name in enumerate(referred or ()):
                if name not in known:
                    errors.invalid(
                        at.child("requests").index(j),
                        name,
                        "must be the name of a request in the claim or the name of a request "
                        "and a subrequest separated by '/'",
                    )

    def _request_names(self) -> set[str]:
        """What constraints and configuration may refer to: requests and request/subrequest."""
        known: set[str] = set()
        for request in self.requests or ():
            known.add(request.name or "")
            known.update(f"{request.name}/{sub.name}" for sub in request.first_available or ())
        return known


class ResourceClaimSpec(Struct):
    """What a claim requests."""

    devices: Annotated[
        DeviceClaim | None, meta(doc="The devices requested and their configuration.", proto=1)
    ] = None


class DeviceAllocationConfiguration(Struct):
    """Configuration of allocated devices, from their class or their claim (upstream embeds a
    DeviceConfiguration at field 3, declared here flat)."""

    PROTO_EMBEDDED = (Embedded(3, "DeviceConfiguration", ("opaque",)),)

    source: Annotated[
        str | None,
        meta(
            required=True, enum=("FromClass", "FromClaim"), doc="FromClass or FromClaim.", proto=1
        ),
    ] = None
    requests: Annotated[
        list[str] | None,
        atomic(doc="The requests configured; empty: all of them.", proto=2),
    ] = None
    opaque: Annotated[
        OpaqueDeviceConfiguration | None,
        meta(required=True, doc="Configuration in the driver's own format.", proto=1),
    ] = None


class DeviceRequestAllocationResult(Struct):
    """One device allocated for a request."""

    request: Annotated[
        str | None, meta(required=True, doc="The request (or request/subrequest).", proto=1)
    ] = None
    driver: Annotated[str | None, meta(required=True, doc="The device's driver.", proto=2)] = None
    pool: Annotated[str | None, meta(required=True, doc="The device's pool.", proto=3)] = None
    device: Annotated[
        str | None, meta(required=True, doc="The device's name in its pool.", proto=4)
    ] = None
    admin_access: Annotated[
        bool | None, meta(doc="Whether it was allocated for administration.", proto=5)
    ] = None
    tolerations: Annotated[
        list[DeviceToleration] | None,
        atomic(doc="The request's tolerations when the device was allocated.", proto=6),
    ] = None
    binding_conditions: Annotated[
        list[str] | None, atomic(doc="The slice's binding conditions at allocation.", proto=7)
    ] = None
    binding_failure_conditions: Annotated[
        list[str] | None,
        atomic(doc="The slice's binding failure conditions at allocation.", proto=8),
    ] = None
    share_id: Annotated[str | None, meta(doc="Which share of a shareable device.", proto=9)] = (
        msgspec.field(default=None, name="shareID")
    )
    consumed_capacity: Annotated[
        dict[str, QuantityValue] | None,
        meta(doc="The capacity consumed of a shareable device.", proto=10),
    ] = None


class DeviceAllocationResult(Struct):
    """The devices allocated and their configuration."""

    results: Annotated[
        list[DeviceRequestAllocationResult] | None,
        atomic(doc="The devices allocated.", proto=1),
    ] = None
    config: Annotated[
        list[DeviceAllocationConfiguration] | None,
        atomic(doc="The configuration of the classes and the claim.", proto=2),
    ] = None


class AllocationResult(Struct):
    """What was allocated for a claim, and where it can be used."""

    devices: Annotated[
        DeviceAllocationResult | None, meta(doc="The devices allocated.", proto=1)
    ] = None
    node_selector: Annotated[
        NodeSelector | None,
        meta(doc="The nodes where the devices are available; unset: every node.", proto=3),
    ] = None
    allocation_timestamp: Annotated[
        Time | None, meta(doc="When the devices were allocated.", proto=5)
    ] = None


class ResourceClaimConsumerReference(Struct):
    """An object (a pod) the claim is reserved for, in the claim's namespace."""

    api_group: Annotated[str | None, meta(doc="Its group; empty for the core.", proto=1)] = None
    resource: Annotated[
        str | None, meta(required=True, doc="Its resource, e.g. pods.", proto=3)
    ] = None
    name: Annotated[str | None, meta(required=True, doc="Its name.", proto=4)] = None
    uid: Annotated[str | None, meta(required=True, doc="Its UID.", proto=5)] = None


class NetworkDeviceData(Struct):
    """A network device's interface, addresses and hardware address."""

    interface_name: Annotated[str | None, meta(doc="The interface's name in the pod.", proto=1)] = (
        None
    )
    ips: Annotated[
        list[str] | None, atomic(doc="The interface's addresses, in CIDR notation.", proto=2)
    ] = None
    hardware_address: Annotated[
        str | None, meta(doc="The interface's hardware (MAC) address.", proto=3)
    ] = None


class AllocatedDeviceStatus(Struct):
    """What a driver reports about a device it was allocated."""

    driver: Annotated[str | None, meta(required=True, doc="The device's driver.", proto=1)] = None
    pool: Annotated[str | None, meta(required=True, doc="The device's pool.", proto=2)] = None
    device: Annotated[
        str | None, meta(required=True, doc="The device's name in its pool.", proto=3)
    ] = None
    share_id: Annotated[str | None, meta(doc="Which share of a shareable device.", proto=7)] = (
        msgspec.field(default=None, name="shareID")
    )
    conditions: Annotated[
        list[Condition] | None,
        meta(merge_key="type", doc="The device's conditions (Ready...).", proto=4),
    ] = None
    data: Annotated[RawJSON, meta(preserve_unknown=True, doc="Driver-specific data.", proto=5)] = (
        None
    )
    network_data: Annotated[
        NetworkDeviceData | None, meta(doc="The device's network details.", proto=6)
    ] = None


class ResourceClaimStatus(Struct):
    """Whether a claim is allocated, for whom it is reserved, and its devices' state."""

    allocation: Annotated[
        AllocationResult | None, meta(doc="What was allocated, once it was.", proto=1)
    ] = None
    reserved_for: Annotated[
        list[ResourceClaimConsumerReference] | None,
        meta(merge_key="uid", doc="The pods that may use the claim; at most 256.", proto=2),
    ] = None
    devices: Annotated[
        list[AllocatedDeviceStatus] | None,
        meta(
            list_type="map",
            list_map_keys=("driver", "device", "pool", "shareID"),
            doc="The drivers' reports on the allocated devices.",
            proto=4,
        ),
    ] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        reserved = path.child("reservedFor")
        _validate_list_size(self.reserved_for, RESERVED_FOR_MAX_SIZE, reserved, errors)
        seen: set[str | None] = set()
        for i, consumer in enumerate(self.reserved_for or ()):
            if consumer.uid in seen:
                errors.duplicate(reserved.index(i).child("uid"), consumer.uid)
            seen.add(consumer.uid)


def _claim_state(obj: Any) -> str:
    """upstream's summary: deleted, then pending or allocated (and reserved)."""
    states = []
    deleted = obj.metadata.deletion_timestamp is not None
    if deleted:
        states.append("deleted")
    status = obj.status or ResourceClaimStatus()
    if status.allocation is None:
        if not deleted:
            states.append("pending")
    else:
        states.append("allocated")
        if status.reserved_for:
            states.append("reserved")
    return ",".join(states)


def _spec_immutable(new: Any, old: Any, errors: ErrorList) -> None:
    if new.spec != old.spec:
        errors.immutable(ROOT.child("spec"), msgspec.to_builtins(new.spec))


@kind(
    group=GROUP,
    version="v1",
    plural="resourceclaims",
    namespaced=True,
    returns_deleted=True,
    subresources=("status",),
    columns=(
        NAME_COLUMN,
        Column(
            "State",
            lambda o, now: _claim_state(o),
            description="A summary of the current state (allocated, pending, reserved, etc.).",
        ),
        AGE_COLUMN,
    ),
)
class ResourceClaim(Resource):
    """A request for devices for workloads, answered in its status by the allocation."""

    spec: Annotated[
        ResourceClaimSpec | None,
        meta(required=True, doc="What is requested; immutable.", proto=2),
    ] = None
    status: Annotated[
        ResourceClaimStatus | None, meta(doc="The allocation and reservations.", proto=3)
    ] = None

    def set_defaults(self) -> None:
        if self.spec is None:
            self.spec = ResourceClaimSpec()

    def validate_update(self, old: Self, errors: ErrorList) -> None:
        _spec_immutable(self, old, errors)


class ResourceClaimTemplateSpec(Struct):
    """The claim a template makes: its labels and annotations, and its spec."""

    metadata: Annotated[
        ObjectMeta | None,
        meta(doc="Labels and annotations copied into the claims made.", proto=1),
    ] = None
    spec: Annotated[
        ResourceClaimSpec | None,
        meta(required=True, doc="The spec of the claims made.", proto=2),
    ] = None


@kind(
    group=GROUP,
    version="v1",
    plural="resourceclaimtemplates",
    namespaced=True,
    returns_deleted=True,
    columns=(NAME_COLUMN, AGE_COLUMN),
)
class ResourceClaimTemplate(Resource):
    """The pattern of the claims made for the pods that refer to it."""

    spec: Annotated[
        ResourceClaimTemplateSpec | None,
        meta(required=True, doc="The claims to make; immutable.", proto=2),
    ] = None

    def set_defaults(self) -> None:
        if self.spec is None:
            self.spec = ResourceClaimTemplateSpec()

    def validate_update(self, old: Self, errors: ErrorList) -> None:
        _spec_immutable(self, old, errors)


# ResourceSlice.


class DeviceAttribute(Struct):
    """One attribute value of a device: exactly one of int, bool, string and version."""

    int_value: Annotated[int | None, meta(doc="A number.", proto=2, int64=True)] = msgspec.field(
        default=None, name="int"
    )
    bool_value: Annotated[bool | None, meta(doc="A true/false value.", proto=3)] = msgspec.field(
        default=None, name="bool"
    )
    string_value: Annotated[str | None, meta(doc="A string of at most 64 characters.", proto=4)] = (
        msgspec.field(default=None, name="string")
    )
    version_value: Annotated[
        str | None, meta(doc="A semantic version (semver.org 2.0.0).", proto=5)
    ] = msgspec.field(default=None, name="version")
    int_values: Annotated[list[int] | None, atomic(doc="Numbers.", proto=6, int64=True)] = (
        msgspec.field(default=None, name="ints")
    )
    bool_values: Annotated[list[bool] | None, atomic(doc="True/false values.", proto=7)] = (
        msgspec.field(default=None, name="bools")
    )
    string_values: Annotated[list[str] | None, atomic(doc="Strings.", proto=8)] = msgspec.field(
        default=None, name="strings"
    )
    version_values: Annotated[list[str] | None, atomic(doc="Semantic versions.", proto=9)] = (
        msgspec.field(default=None, name="versions")
    )

    def validate(self, path: Path, errors: ErrorList) -> None:
        values = (
            self.int_value,
            self.bool_value,
            self.string_value,
            self.version_value,
            self.int_values,
            self.bool_values,
            self.string_values,
            self.version_values,
        )
        if sum(value is not None for value in values) != 1:
            errors.invalid(path, "", "exactly one value must be specified")
        if self.string_value is not None and len(self.string_value) > ATTRIBUTE_VALUE_MAX_LENGTH:
            errors.too_long(path.child("string"), ATTRIBUTE_VALUE_MAX_LENGTH)
        if self.version_value is not None:
            version = path.child("version")
            if not SEMVER.match(self.version_value):
                detail = "must be a string compatible with semver.org spec 2.0.0"
                errors.invalid(version, self.version_value, detail)
            if len(self.version_value) > ATTRIBUTE_VALUE_MAX_LENGTH:
                errors.too_long(version, ATTRIBUTE_VALUE_MAX_LENGTH)


class CapacityRequestPolicyRange(Struct):
    """The amounts a request may consume of a shareable capacity: from min to max by step."""

    min: Annotated[QuantityValue | None, meta(required=True, doc="The least.", proto=1)] = None
    max: Annotated[QuantityValue | None, meta(doc="The most.", proto=2)] = None
    step: Annotated[QuantityValue | None, meta(doc="The step from min.", proto=3)] = None


class CapacityRequestPolicy(Struct):
    """How requests consume a capacity of a device that allows multiple allocations."""

    default: Annotated[
        QuantityValue | None, meta(doc="What a request that names no amount consumes.", proto=1)
    ] = None
    valid_values: Annotated[
        list[QuantityValue] | None, atomic(doc="The amounts allowed, ascending.", proto=3)
    ] = None
    valid_range: Annotated[
        CapacityRequestPolicyRange | None, meta(doc="The range of amounts allowed.", proto=4)
    ] = None


class DeviceCapacity(Struct):
    """How much of a capacity a device has."""

    value: Annotated[
        QuantityValue | None, meta(required=True, doc="The device's total.", proto=1)
    ] = None
    request_policy: Annotated[
        CapacityRequestPolicy | None,
        meta(doc="How requests consume it, when the device is shared.", proto=2),
    ] = None


class Counter(Struct):
    """An amount of a counter."""

    value: Annotated[QuantityValue | None, meta(required=True, doc="The amount.", proto=1)] = None


class DeviceCounterConsumption(Struct):
    """The counters a device consumes from one of the pool's counter sets."""

    counter_set: Annotated[
        str | None, meta(required=True, doc="The counter set consumed from.", proto=1)
    ] = None
    counters: Annotated[
        dict[str, Counter] | None,
        meta(required=True, doc="The amount consumed of each counter.", proto=2),
    ] = None


class CounterSet(Struct):
    """Named counters that devices of the pool consume from."""

    name: Annotated[
        str | None, meta(required=True, doc="The set's name (a DNS label).", proto=1)
    ] = None
    counters: Annotated[
        dict[str, Counter] | None,
        meta(required=True, doc="The counters available, by name.", proto=2),
    ] = None


class DeviceTaint(Struct):
    """A driver's taint on a device, kept off claims that do not tolerate it."""

    key: Annotated[
        str | None, meta(required=True, doc="The taint key (a label name).", proto=1)
    ] = None
    value: Annotated[str | None, meta(doc="The taint value (a label value).", proto=2)] = None
    effect: Annotated[
        str | None,
        meta(required=True, doc="None, NoSchedule or NoExecute.", proto=3),
    ] = None
    time_added: Annotated[Time | None, meta(doc="When the taint was added.", proto=4)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        if self.key:
            errors.extend_checked(path.child("key"), self.key, names.is_qualified_name(self.key))
        if self.value:
            value = path.child("value")
            errors.extend_checked(value, self.value, names.is_valid_label_value(self.value))
        if self.effect and self.effect not in TAINT_EFFECTS:
            errors.not_supported(path.child("effect"), self.effect, TAINT_EFFECTS)


def _validate_qualified_key(key: str, path: Path, errors: ErrorList) -> None:
    """An attribute or capacity name: an identifier, perhaps behind a domain and a slash."""
    domain, _, identifier = key.rpartition("/")
    if domain:
        if len(domain) > DEVICE_DOMAIN_MAX_LENGTH:
            errors.too_long(path, DEVICE_DOMAIN_MAX_LENGTH)
        errors.extend_checked(path, key, names.is_dns1123_subdomain(domain))
    if len(identifier) > DEVICE_ID_MAX_LENGTH:
        errors.too_long(path, DEVICE_ID_MAX_LENGTH)
    errors.extend_checked(path, key, names.is_c_identifier(identifier))


class NodeAllocatableResourceMapping(Struct):
    """How much of a node resource an allocation of a device accounts for."""

    capacity_key: Annotated[
        str | None, meta(doc="The device capacity whose consumption is multiplied.", proto=1)
    ] = None
    allocation_multiplier: Annotated[
        QuantityValue | None,
        meta(
            doc="The amount per device allocated (or per unit of capacityKey); default 1.", proto=2
        ),
    ] = None


class Device(Struct):
    """One device of a pool, with its attributes and capacities."""

    name: Annotated[
        str | None, meta(required=True, doc="The device's name in its pool (a DNS label).", proto=1)
    ] = None
    attributes: Annotated[
        dict[str, DeviceAttribute] | None,
        meta(doc="Attributes, by qualified name; with capacity, at most 32.", proto=2),
    ] = None
    capacity: Annotated[
        dict[str, DeviceCapacity] | None,
        meta(doc="Capacities, by qualified name; with attributes, at most 32.", proto=3),
    ] = None
    consumes_counters: Annotated[
        list[DeviceCounterConsumption] | None,
        atomic(doc="The counters the device consumes from the pool's sets.", proto=4),
    ] = None
    node_name: Annotated[
        str | None, meta(doc="The node of the device (perDeviceNodeSelection).", proto=5)
    ] = None
    node_selector: Annotated[
        NodeSelector | None,
        meta(doc="The nodes of the device (perDeviceNodeSelection).", proto=6),
    ] = None
    all_nodes: Annotated[
        bool | None, meta(doc="Every node has the device (perDeviceNodeSelection).", proto=7)
    ] = None
    taints: Annotated[
        list[DeviceTaint] | None, atomic(doc="The driver's taints; at most 16.", proto=8)
    ] = None
    binds_to_node: Annotated[
        bool | None, meta(doc="Whether an allocation is bound to the node chosen.", proto=9)
    ] = None
    binding_conditions: Annotated[
        list[str] | None, atomic(doc="Conditions to be true before binding.", proto=10)
    ] = None
    binding_failure_conditions: Annotated[
        list[str] | None, atomic(doc="Conditions that mean binding failed.", proto=11)
    ] = None
    allow_multiple_allocations: Annotated[
        bool | None, meta(doc="Whether the device may be allocated more than once.", proto=12)
    ] = None
    node_allocatable_resource_mappings: Annotated[
        dict[str, NodeAllocatableResourceMapping] | None,
        meta(
            doc="Node resources (cpu, memory...) an allocation of the device accounts for.",
            proto=13,
        ),
    ] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        _validate_dns_label(self.name, path.child("name"), errors)
        attributes, capacity = self.attributes or {}, self.capacity or {}
        if len(attributes) + len(capacity) > MAX_ATTRIBUTES_AND_CAPACITIES:
            detail = (
                "the total number of attributes and capacities must not exceed "
                f"{MAX_ATTRIBUTES_AND_CAPACITIES}"
            )
            errors.invalid(path, len(attributes) + len(capacity), detail)
        for field, keys in (("attributes", attributes), ("capacity", capacity)):
            for key in keys:
                _validate_qualified_key(key, path.child(field).key(key), errors)
        _validate_list_size(self.taints, DEVICE_TAINTS_MAX_SIZE, path.child("taints"), errors)


class ResourcePool(Struct):
    """The pool a slice belongs to, and how many slices make up its current generation."""

    name: Annotated[
        str | None,
        meta(required=True, doc="The pool's name: DNS subdomains separated by slashes.", proto=1),
    ] = None
    generation: Annotated[
        int | None,
        meta(
            required=True,
            doc="The pool's generation; consumers use the highest.",
            proto=2,
            int64=True,
        ),
    ] = None
    resource_slice_count: Annotated[
        int | None,
        meta(
            required=True,
            doc="How many slices the pool has at this generation.",
            proto=3,
            int64=True,
        ),
    ] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        name = self.name or ""
        if len(name) > POOL_NAME_MAX_LENGTH:
            errors.too_long(path.child("name"), POOL_NAME_MAX_LENGTH)
        for part in name.split("/") if name else ():
            errors.extend_checked(path.child("name"), part, names.is_dns1123_subdomain(part))
        if (self.resource_slice_count or 0) <= 0:
            count = self.resource_slice_count or 0
            errors.invalid(path.child("resourceSliceCount"), count, "must be greater than zero")
        if (self.generation or 0) < 0:
            detail = "must be greater than or equal to zero"
            errors.invalid(path.child("generation"), self.generation, detail)


NODE_SELECTION = (
    "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"
)


class ResourceSliceSpec(Struct):
    """What a driver publishes in one slice of a pool."""

    driver: Annotated[
        str | None, meta(required=True, doc="The driver of the devices; immutable.", proto=1)
    ] = None
    pool: Annotated[
        ResourcePool | None, meta(required=True, doc="The pool of the slice.", proto=2)
    ] = None
    node_name: Annotated[
        str | None, meta(doc="The node that has the devices; immutable.", proto=3)
    ] = None
    node_selector: Annotated[
        NodeSelector | None, meta(doc="The nodes that have the devices (one term).", proto=4)
    ] = None
    all_nodes: Annotated[bool | None, meta(doc="Every node has the devices.", proto=5)] = None
    devices: Annotated[
        list[Device] | None,
        atomic(doc="Devices of the pool; at most 128 (64 with taints or counters).", proto=6),
    ] = None
    per_device_node_selection: Annotated[
        bool | None, meta(doc="Whether each device says which nodes have it.", proto=7)
    ] = None
    shared_counters: Annotated[
        list[CounterSet] | None,
        atomic(doc="Counter sets of the pool, instead of devices; at most 8.", proto=8),
    ] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        validate_csi_driver_name(self.driver, path.child("driver"), errors)
        chosen = []
        if self.node_name:
            chosen.append("`nodeName`")
            node = path.child("nodeName")
            errors.extend_checked(node, self.node_name, names.is_dns1123_subdomain(self.node_name))
        if self.node_selector is not None:
            chosen.append("`nodeSelector`")
            if len(self.node_selector.node_selector_terms or ()) != 1:
                terms = path.child("nodeSelector").child("nodeSelectorTerms")
                errors.invalid(
                    terms,
                    msgspec.to_builtins(self.node_selector.node_selector_terms),
                    "must have exactly one node selector term",
                )
        for field, flag in (
            ("allNodes", self.all_nodes),
            ("perDeviceNodeSelection", self.per_device_node_selection),
        ):
            if flag:
                chosen.append(f"`{field}`")
            elif flag is False:
                errors.invalid(path.child(field), False, "must be either unset or set to true")
        if not chosen:
            errors.required(path, NODE_SELECTION)
        elif len(chosen) > 1:
            errors.invalid(
                path,
                "{" + ", ".join(chosen) + "}",
                f"{NODE_SELECTION}, but multiple fields are set",
            )
        if self.shared_counters is not None and self.devices is not None:
            errors.invalid(path, "", "only one of `sharedCounters` or `devices` is allowed")
        devices = self.devices or []
        limit = SLICE_MAX_DEVICES
        if any(d.taints or d.consumes_counters for d in devices):
            limit = SLICE_MAX_DEVICES_WITH_TAINTS_OR_COUNTERS
        _validate_list_size(self.devices, limit, path.child("devices"), errors)
        _validate_unique_names(self.devices, path.child("devices"), errors)
        counter_sets = path.child("sharedCounters")
        _validate_list_size(self.shared_counters, SLICE_MAX_COUNTER_SETS, counter_sets, errors)
        _validate_unique_names(self.shared_counters, counter_sets, errors)
        for i, device in enumerate(devices):
            placed = device.node_name or device.node_selector or device.all_nodes is not None
            if placed and not self.per_device_node_selection:
                errors.invalid(
                    path.child("devices").index(i),
                    None,
                    "`nodeName`, `nodeSelector` and `allNodes` can only be set if "
                    "`perDeviceNodeSelection` is set to true in the ResourceSlice spec",
                )


def _slice_spec(obj: Any) -> ResourceSliceSpec:
    return obj.spec if obj.spec is not None else ResourceSliceSpec()


@kind(
    group=GROUP,
    version="v1",
    plural="resourceslices",
    namespaced=False,
    returns_deleted=True,
    columns=(
        NAME_COLUMN,
        Column(
            "Node",
            lambda o, now: _slice_spec(o).node_name or "",
            description="The node that has the devices of the slice.",
        ),
        Column(
            "Driver",
            lambda o, now: _slice_spec(o).driver or "",
            description="The DRA driver of the devices of the slice.",
        ),
        Column(
            "Pool",
            lambda o, now: (_slice_spec(o).pool or ResourcePool()).name or "",
            description="The pool the slice belongs to.",
        ),
        AGE_COLUMN,
    ),
    field_selectors={
        "spec.nodeName": lambda o: _slice_spec(o).node_name or "",
        "spec.driver": lambda o: _slice_spec(o).driver or "",
    },
)
class ResourceSlice(Resource):
    """Devices of one pool of a driver, as the driver publishes them."""

    spec: Annotated[
        ResourceSliceSpec | None,
        meta(required=True, doc="The driver's devices in this slice of its pool.", proto=2),
    ] = None

    def set_defaults(self) -> None:
        if self.spec is None:
            self.spec = ResourceSliceSpec()

    def validate_update(self, old: Self, errors: ErrorList) -> None:
        new_spec, old_spec = _slice_spec(self), _slice_spec(old)
        spec = ROOT.child("spec")
        new_pool, old_pool = new_spec.pool or ResourcePool(), old_spec.pool or ResourcePool()
        for path, new, previous in (
            (spec.child("pool").child("name"), new_pool.name, old_pool.name),
            (spec.child("driver"), new_spec.driver, old_spec.driver),
            (spec.child("nodeName"), new_spec.node_name, old_spec.node_name),
        ):
            if new != previous:
                errors.immutable(path, new)
