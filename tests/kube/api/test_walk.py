"""The walker: declared checks, hooks, defaults and immutability, driven by declarations."""

from __future__ import annotations

from typing import Annotated

from kube.api import walk
from kube.api.errors import ErrorList, Path
from kube.api.kinds.coordination_v1 import Lease, LeaseSpec
from kube.api.meta_v1 import ObjectMeta
from kube.api.struct import DNS1123_LABEL, QuantityValue, Struct, meta


class Port(Struct):
    name: Annotated[str | None, meta(format=DNS1123_LABEL)] = None
    number: Annotated[int | None, meta(required=True, minimum=1, maximum=65535)] = None
    protocol: Annotated[str | None, meta(enum=("TCP", "UDP"))] = None

    def set_defaults(self) -> None:
        if self.protocol is None:
            self.protocol = "TCP"


class Box(Struct):
    ports: list[Port] | None = None
    named: dict[str, Port] | None = None
    one: Port | None = None
    limits: dict[str, QuantityValue] | None = None
    frozen: Annotated[str | None, meta(immutable=True)] = None
    tags: Annotated[list[str] | None, meta(format=DNS1123_LABEL)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        if self.one is not None and self.ports:
            errors.forbidden(path.child("one"), "may not be set together with ports")


def test_declared_checks_report_every_error_with_its_path() -> None:
    box = Box(
        ports=[Port(number=0, protocol="SCTP"), Port(name="Web")],
        named={"a": Port(number=70000)},
        one=Port(number=1),
        tags=["ok", "Not_OK"],
    )
    label_rule = (
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
        "and must start and end with an alphanumeric character (e.g. 'my-name',  or "
        "'123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
    )
    assert [str(e) for e in walk.validate_struct(box)] == [
        f'tags[1]: Invalid value: "Not_OK": {label_rule}',
        "one: Forbidden: may not be set together with ports",
        "ports[0].number: Invalid value: 0: must be greater than or equal to 1",
        'ports[0].protocol: Unsupported value: "SCTP": supported values: "TCP", "UDP"',
        f'ports[1].name: Invalid value: "Web": {label_rule}',
        "ports[1].number: Required value",
        "named[a].number: Invalid value: 70000: must be less than or equal to 65535",
    ]


def test_defaults_reach_lists_maps_and_quantities() -> None:
    box = Box(ports=[Port(number=1)], named={"x": Port(number=2)}, limits={"cpu": "1000m"})
    walk.set_defaults(box)
    assert box.ports is not None and box.ports[0].protocol == "TCP"
    assert box.named is not None and box.named["x"].protocol == "TCP"
    assert box.limits == {"cpu": "1"}


def test_defaults_keep_what_the_user_set() -> None:
    box = Box(ports=[Port(number=1, protocol="UDP")], limits={"memory": "bogus"})
    walk.set_defaults(box)
    assert box.ports is not None and box.ports[0].protocol == "UDP"
    assert box.limits == {"memory": "bogus"}, "invalid quantities are left for validation"


def test_top_level_validation_checks_metadata_by_kind() -> None:
    lease = Lease(metadata=ObjectMeta(name="Bad_Name"), spec=LeaseSpec(lease_duration_seconds=0))
    assert [e.field for e in walk.validate(lease)] == [
        "metadata.name",
        "metadata.namespace",
        "spec.leaseDurationSeconds",
    ]


def test_update_checks_immutable_metadata() -> None:
    old = Lease(metadata=ObjectMeta(name="a", namespace="ns", uid="1"))
    new = Lease(metadata=ObjectMeta(name="a", namespace="ns", uid="2"))
    assert [str(e) for e in walk.validate_update(new, old)] == [
        'metadata.uid: Invalid value: "2": field is immutable'
    ]


def test_update_checks_fields_declared_immutable() -> None:
    class Holder(Struct):
        box: Box | None = None

    old = Holder(box=Box(frozen="a"))
    new = Holder(box=Box(frozen="b"))
    errors = ErrorList()
    walk._validate_immutable(new, old, Path(), errors)
    assert [str(e) for e in errors] == ['box.frozen: Invalid value: "b": field is immutable']


def test_defaulting_types_objects_and_decoding_does_not() -> None:
    lease = Lease()
    assert (lease.api_version, lease.kind) == (None, None)
    walk.set_defaults(lease)
    assert (lease.api_version, lease.kind) == ("coordination.k8s.io/v1", "Lease")


def test_a_field_can_opt_out_of_nested_validation() -> None:
    class Holder(Struct):
        checked: Port | None = None
        unchecked: Annotated[Port | None, meta(validated=False)] = None

    holder = Holder(checked=Port(), unchecked=Port())
    assert [str(e) for e in walk.validate_struct(holder)] == ["checked.number: Required value"]
    walk.set_defaults(holder)
    assert holder.unchecked is not None and holder.unchecked.protocol == "TCP"


class Numbered(Struct):
    size: Annotated[QuantityValue | None, meta(proto=1)] = None
    port: Annotated[Port | None, meta(proto=2)] = None
    name: Annotated[str | None, meta(format=DNS1123_LABEL, proto=3, omitempty=True)] = None


def test_a_protobuf_number_hides_nothing_declared_inside() -> None:
    """``meta(proto=N)`` around a type that carries its own meta (a quantity) keeps it."""
    numbered = Numbered(size="2048Mi", port=Port(number=0), name="Web")
    walk.set_defaults(numbered)
    assert numbered.size == "2Gi"
    assert [str(e).split(":")[0] for e in walk.validate_struct(numbered)] == ["name", "port.number"]
    numbered.size = "lots"
    errors = [str(e) for e in walk.validate_struct(numbered)]
    assert errors[0].startswith('size: Invalid value: "lots": quantities must match')
    assert len(errors) == 3
