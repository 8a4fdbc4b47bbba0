"""resource.k8s.io/v1: dynamic resource allocation (DRA), the API through which devices (GPUs,
NICs, FPGAs...) are described by their drivers and requested by workloads.

A DeviceClass is the administrator's category of devices, as a StorageClass is for volumes: CEL
selectors that every device of the class must satisfy, and opaque configuration handed to the
driver for each device claimed through it.  Claims name a class; a class with an
``extendedResourceName`` also serves pods that ask for that extended resource.

Only the API is served here: nothing allocates devices, so a class is stored and validated for
the schedulers and drivers that would read it.  The selectors' CEL expressions are checked for
presence and size, not compiled: upstream compiles them in a DRA-specific environment (the
``device`` variable with its attributes and capacity) that ``kube/`` has no compiler for, and the
CEL compiler of the control plane (controlplane/apiserver/crd/cel.py) knows only the CRD and
admission environments.

Field names, order and protobuf numbers are k8s.io/api release-1.36's (DeviceClassSpec's field 3,
suitableNodes, was removed upstream and is not declared); validation and messages are
pkg/apis/resource/validation's.  Opaque parameters are a RawExtension, which travels in protobuf
as FieldsV1 does (the JSON bytes in field 1).
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from kube.api.errors import ErrorList, Path
from kube.api.kinds.core_v1.resources import is_extended
from kube.api.kinds.core_v1.volume import validate_csi_driver_name
from kube.api.meta_v1 import Resource
from kube.api.printing import AGE_COLUMN, NAME_COLUMN
from kube.api.scheme import kind
from kube.api.struct import Embedded, RawJSON, Struct, atomic, meta

GROUP = "resource.k8s.io"

# pkg/apis/resource/types.go's limits.
DEVICE_SELECTORS_MAX_SIZE = 32
DEVICE_CONFIG_MAX_SIZE = 32
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
