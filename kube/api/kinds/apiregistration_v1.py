"""apiregistration.k8s.io/v1: APIService, which server answers for one API group/version.

The aggregator in front of the API server reads these: a *local* APIService (no ``service``)
says the group/version is served by the API server itself (the server registers one for each
built-in group/version it serves, as upstream's autoregister controller); any other names the
in-cluster Service of an extension API server, and requests under ``/apis/GROUP/VERSION`` are
proxied to it over TLS verified with ``caBundle``.  The name is always ``VERSION.GROUP``
(``v1.`` for the core group), so there is one APIService per group/version.  Its
``Available`` condition says whether the server answers (kept by the available-condition
controller); ``kubectl get apiservices`` shows it as ``True`` or ``False (Reason)``.
``groupPriorityMinimum`` and ``versionPriority`` order groups and versions in discovery.

Field names, order and protobuf numbers are k8s.io/kube-aggregator release-1.36's; validation
follows its pkg/apis/apiregistration/validation with upstream's paths and messages (the two
priorities are required here, where upstream reports a missing one as the invalid 0).
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from kube.api import names
from kube.api.errors import ErrorList, Path
from kube.api.meta_v1 import Resource
from kube.api.printing import AGE_COLUMN, NAME_COLUMN, Column
from kube.api.scheme import PATH_SEGMENT, kind
from kube.api.struct import Struct, Time, meta

GROUP = "apiregistration.k8s.io"
AVAILABLE = "Available"


class ServiceReference(Struct):
    """The Service in front of an extension API server."""

    namespace: Annotated[
        str | None, meta(doc="The namespace of the service.", proto=1, omitempty=True)
    ] = None
    name: Annotated[str | None, meta(doc="The name of the service.", proto=2, omitempty=True)] = (
        None
    )
    port: Annotated[
        int | None,
        meta(
            doc="The port on the service the API server listens on; 443 when not given. "
            "`port` should be a valid port number (1-65535, inclusive).",
            proto=3,
        ),
    ] = None

    def set_defaults(self) -> None:
        if self.port is None:
            self.port = 443


class APIServiceSpec(Struct):
    """Where a group/version is served and how to reach and trust its server."""

    service: Annotated[
        ServiceReference | None,
        meta(
            doc="The service of the API server for this group/version; absent: served locally "
            "by this server.",
            proto=1,
            omitempty=True,
        ),
    ] = None
    group: Annotated[
        str | None, meta(doc="The API group name this server hosts.", proto=2, omitempty=True)
    ] = None
    version: Annotated[
        str | None,
        meta(doc='The API version this server hosts, for example "v1".', proto=3, omitempty=True),
    ] = None
    insecure_skip_tls_verify: Annotated[
        bool | None,
        meta(
            doc="Disables TLS certificate verification towards this server; strongly "
            "discouraged (use caBundle).",
            proto=4,
            omitempty=True,
        ),
    ] = msgspec.field(default=None, name="insecureSkipTLSVerify")
    ca_bundle: Annotated[
        bytes | None,
        meta(
            doc="A PEM encoded CA bundle which will be used to validate an API server's serving "
            "certificate. If unspecified, system trust roots on the apiserver are used.",
            proto=5,
            omitempty=True,
        ),
    ] = None
    group_priority_minimum: Annotated[
        int | None,
        meta(
            required=True,
            doc="The priority this group should have at least; groups are listed highest "
            "first, then by the name of the object.",
            proto=7,
        ),
    ] = None
    version_priority: Annotated[
        int | None,
        meta(
            required=True,
            doc="The ordering of this API version inside of its group, highest first; must be "
            "greater than zero.",
            proto=8,
        ),
    ] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        group, version = self.group or "", self.version or ""
        if not group and version != "v1":
            errors.required(
                path.child("group"), "only v1 may have an empty group and it better be legacy kube"
            )
        if group:
            errors.extend_checked(path.child("group"), group, names.is_dns1123_subdomain(group))
        errors.extend_checked(path.child("version"), version, names.is_dns1035_label(version))
        for name, value, limit in (
            ("groupPriorityMinimum", self.group_priority_minimum, 20000),
            ("versionPriority", self.version_priority, 1000),
        ):
            if value is not None and (value <= 0 or value > limit):
                errors.invalid(path.child(name), value, f"must be positive and less than {limit}")
        if self.service is None:
            if self.ca_bundle:
                errors.invalid(
                    path.child("caBundle"),
                    f"{len(self.ca_bundle)} bytes",
                    "local APIServices may not have a caBundle",
                )
            if self.insecure_skip_tls_verify:
                errors.invalid(
                    path.child("insecureSkipTLSVerify"),
                    True,
                    "local APIServices may not have insecureSkipTLSVerify",
                )
            return
        service = path.child("service")
        if not self.service.namespace:
            errors.required(service.child("namespace"))
        if not self.service.name:
            errors.required(service.child("name"))
        if self.insecure_skip_tls_verify and self.ca_bundle:
            errors.invalid(
                path.child("insecureSkipTLSVerify"), True, "may not be true if caBundle is present"
            )


class APIServiceCondition(Struct):
    """The state of an APIService at a point in time (``Available``)."""

    type: Annotated[str | None, meta(required=True, doc="The type of the condition.", proto=1)] = (
        None
    )
    status: Annotated[
        str | None,
        meta(
            required=True,
            enum=("True", "False", "Unknown"),
            doc="The status of the condition: True, False or Unknown.",
            proto=2,
        ),
    ] = None
    last_transition_time: Annotated[
        Time | None,
        meta(doc="Last time the condition transitioned from one status to another.", proto=3),
    ] = None
    reason: Annotated[
        str | None,
        meta(doc="Unique, one-word, CamelCase reason for the last transition.", proto=4),
    ] = None
    message: Annotated[
        str | None,
        meta(doc="Human-readable message indicating details about last transition.", proto=5),
    ] = None


class APIServiceStatus(Struct):
    """What is known about the server of an APIService."""

    conditions: Annotated[
        list[APIServiceCondition] | None,
        meta(merge_key="type", doc="Current service state of apiService.", proto=1),
    ] = None


def available_condition(service: APIService) -> APIServiceCondition | None:
    """The ``Available`` condition of ``service``, if it has one."""
    for condition in (service.status.conditions if service.status else None) or ():
        if condition.type == AVAILABLE:
            return condition
    return None


def _service_cell(service: APIService) -> str:
    ref = service.spec.service if service.spec else None
    return "Local" if ref is None else f"{ref.namespace or ''}/{ref.name or ''}"


def _available_cell(service: APIService) -> str:
    condition = available_condition(service)
    if condition is None:
        return "Unknown"
    status = condition.status or ""
    if status != "True" and condition.reason:
        return f"{status} ({condition.reason})"
    return status


@kind(
    group=GROUP,
    version="v1",
    plural="apiservices",
    namespaced=False,
    categories=("api-extensions",),
    subresources=("status",),
    name_format=PATH_SEGMENT,
    columns=(
        NAME_COLUMN,
        Column(
            "Service",
            lambda o, now: _service_cell(o),
            description="The reference to the service that hosts this API endpoint.",
        ),
        Column(
            "Available",
            lambda o, now: _available_cell(o),
            description="Whether this service is available.",
        ),
        AGE_COLUMN,
    ),
)
class APIService(Resource):
    """A server for a particular group/version; its name must be ``VERSION.GROUP``."""

    spec: Annotated[
        APIServiceSpec | None,
        meta(doc="Information for locating and communicating with a server.", proto=2),
    ] = None
    status: Annotated[
        APIServiceStatus | None, meta(doc="Derived information about an API server.", proto=3)
    ] = None

    def set_defaults(self) -> None:
        if self.spec is None:
            self.spec = APIServiceSpec()

    def validate(self, path: Path, errors: ErrorList) -> None:
        name = self.metadata.name
        spec = self.spec or APIServiceSpec()
        required = f"{spec.version or ''}.{spec.group or ''}"
        if name and not names.is_path_segment_name(name) and name != required:
            errors.invalid(
                path.child("metadata").child("name"),
                name,
                f'must be `spec.version+"."+spec.group`: "{required}"',
            )
