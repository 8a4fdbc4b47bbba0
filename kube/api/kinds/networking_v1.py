"""networking.k8s.io/v1: Ingress, declared but not served yet.

``kubectl create ingress`` builds an Ingress and POSTs it as protobuf; the protobuf codec reads
it from this declaration like any other kind.  There is no ingress controller here, so the
kind is not registered in the scheme: the API server answers 404 for ``ingresses`` as before,
and discovery and OpenAPI do not list the group.  Serving it means adding ``@kind(...)``,
validation and printer columns to the declaration below.
"""

from __future__ import annotations

from typing import Annotated, ClassVar

from kube.api.kinds.core_v1.volume import TypedLocalObjectReference
from kube.api.meta_v1 import Resource
from kube.api.struct import Embedded, Struct, atomic, meta


class ServiceBackendPort(Struct):
    """The port of a Service backend, by name or number."""

    name: Annotated[str | None, meta(proto=1, omitempty=True)] = None
    number: Annotated[int | None, meta(proto=2, omitempty=True)] = None


class IngressServiceBackend(Struct):
    """A Service in the Ingress's namespace, and its port."""

    name: Annotated[str | None, meta(required=True, proto=1)] = None
    port: Annotated[ServiceBackendPort | None, meta(proto=2)] = None


class IngressBackend(Struct):
    """Where matching requests go: a Service or another resource."""

    resource: Annotated[TypedLocalObjectReference | None, meta(proto=3)] = None
    service: Annotated[IngressServiceBackend | None, meta(proto=4)] = None


class IngressTLS(Struct):
    """Hosts served over TLS with the certificate of a Secret."""

    hosts: Annotated[list[str] | None, atomic(proto=1)] = None
    secret_name: Annotated[str | None, meta(proto=2, omitempty=True)] = None


class HTTPIngressPath(Struct):
    """A path and the backend its requests go to."""

    path: Annotated[str | None, meta(proto=1, omitempty=True)] = None
    backend: Annotated[IngressBackend | None, meta(required=True, proto=2)] = None
    path_type: Annotated[
        str | None, meta(required=True, enum=("Exact", "Prefix", "ImplementationSpecific"), proto=3)
    ] = None


class HTTPIngressRuleValue(Struct):
    """The paths of an HTTP rule."""

    paths: Annotated[list[HTTPIngressPath] | None, atomic(proto=1)] = None


class IngressRule(Struct):
    """Requests for a host (or any host) and the paths that route them."""

    PROTO_EMBEDDED = (Embedded(2, "IngressRuleValue", ("http",)),)

    host: Annotated[str | None, meta(proto=1, omitempty=True)] = None
    http: Annotated[HTTPIngressRuleValue | None, meta(proto=1)] = None


class IngressSpec(Struct):
    """The rules, TLS and default backend of an Ingress."""

    ingress_class_name: Annotated[str | None, meta(proto=4)] = None
    default_backend: Annotated[IngressBackend | None, meta(proto=1)] = None
    tls: Annotated[list[IngressTLS] | None, atomic(proto=2)] = None
    rules: Annotated[list[IngressRule] | None, atomic(proto=3)] = None


class IngressPortStatus(Struct):
    """The state of one port of a load balancer."""

    port: Annotated[int | None, meta(required=True, proto=1)] = None
    protocol: Annotated[str | None, meta(required=True, proto=2)] = None
    error: Annotated[str | None, meta(proto=3)] = None


class IngressLoadBalancerIngress(Struct):
    """One entry point of a load balancer."""

    ip: Annotated[str | None, meta(proto=1, omitempty=True)] = None
    hostname: Annotated[str | None, meta(proto=2, omitempty=True)] = None
    ports: Annotated[list[IngressPortStatus] | None, atomic(proto=4)] = None


class IngressLoadBalancerStatus(Struct):
    """The load balancer serving an Ingress."""

    ingress: Annotated[list[IngressLoadBalancerIngress] | None, atomic(proto=1)] = None


class IngressStatus(Struct):
    """What the ingress controller reports."""

    load_balancer: Annotated[IngressLoadBalancerStatus | None, meta(proto=1)] = None


class Ingress(Resource):
    """HTTP routes from outside the cluster to Services, by host and path."""

    API_VERSION: ClassVar[str] = "networking.k8s.io/v1"
    KIND: ClassVar[str] = "Ingress"

    spec: Annotated[IngressSpec | None, meta(proto=2)] = None
    status: Annotated[IngressStatus | None, meta(proto=3)] = None
