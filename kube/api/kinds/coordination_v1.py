"""coordination.k8s.io/v1: Lease, the lock behind leader election and node heartbeats."""

from __future__ import annotations

from typing import Annotated

from kube.api.errors import ErrorList, Path
from kube.api.meta_v1 import Resource
from kube.api.printing import AGE_COLUMN, NAME_COLUMN, Column
from kube.api.scheme import kind
from kube.api.struct import MicroTime, Struct, meta


class LeaseSpec(Struct):
    """Who holds the lease, for how long, and since when."""

    holder_identity: Annotated[str | None, meta(proto=1)] = None
    lease_duration_seconds: Annotated[int | None, meta(minimum=1, proto=2)] = None
    acquire_time: Annotated[MicroTime | None, meta(proto=3)] = None
    renew_time: Annotated[MicroTime | None, meta(proto=4)] = None
    lease_transitions: Annotated[int | None, meta(minimum=0, proto=5)] = None
    strategy: Annotated[str | None, meta(proto=6)] = None
    preferred_holder: Annotated[str | None, meta(proto=7)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        if self.preferred_holder and not self.strategy:
            errors.forbidden(
                path.child("preferredHolder"), "may only be specified if `strategy` is defined"
            )


@kind(
    group="coordination.k8s.io",
    version="v1",
    plural="leases",
    columns=(
        NAME_COLUMN,
        Column("Holder", lambda o, now: o.spec.holder_identity or ""),
        AGE_COLUMN,
    ),
)
class Lease(Resource):
    """A lease on a name, renewed by its holder; stale when not renewed in time."""

    spec: Annotated[LeaseSpec | None, meta(proto=2)] = None
