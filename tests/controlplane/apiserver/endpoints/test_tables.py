"""Tables as kubectl receives them: definitions from the kind's columns, a cell for each."""

from __future__ import annotations

import datetime

from controlplane.apiserver.endpoints.tables import table
from kube.api.kinds.networking_v1 import IPAddress, IPAddressSpec, ParentReference
from kube.api.meta_v1 import ObjectMeta

NOW = datetime.datetime(2026, 11, 29, 12, 0, tzinfo=datetime.UTC)


def test_a_cell_past_the_definitions_is_sent_as_upstream_sends_it() -> None:
    address = IPAddress(
        metadata=ObjectMeta(name="10.96.0.10", creation_timestamp=NOW - datetime.timedelta(0, 300)),
        spec=IPAddressSpec(
            parent_ref=ParentReference(resource="services", namespace="kube-system", name="dns")
        ),
    )
    got = table(IPAddress.kind_info, [address], NOW)
    assert [c.name for c in got.column_definitions] == ["Name", "ParentRef"]
    assert [r.cells for r in got.rows] == [["10.96.0.10", "services/kube-system/dns", "5m"]]
