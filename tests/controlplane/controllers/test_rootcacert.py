"""The root-ca-cert-publisher, with fake informers and a fake API."""

from __future__ import annotations

import datetime

import pytest

from controlplane.controllers import rootcacert
from kube.api.kinds.core_v1.cluster import ConfigMap, Namespace, NamespaceStatus
from kube.api.meta_v1 import ObjectMeta
from kube.client.kubeconfig import ClientConfig
from tests.controlplane.controllers.fakes import Harness, harness, stamp

CA = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
GOOD = {rootcacert.DESCRIPTION_ANNOTATION: rootcacert.DESCRIPTION}


def publisher_harness() -> Harness:
    h = harness()
    h.client.config = ClientConfig(server="https://10.0.0.1:6443", ca_pem=CA.encode())
    return h


def namespace(name: str, *, terminating: bool = False) -> Namespace:
    ns = stamp(Namespace(metadata=ObjectMeta(name=name), status=NamespaceStatus(phase="Active")))
    if terminating:
        ns.metadata.deletion_timestamp = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
        ns.status = NamespaceStatus(phase="Terminating")
    return ns


def configmap(data: dict[str, str], annotations: dict[str, str] | None = None) -> ConfigMap:
    meta = ObjectMeta(name=rootcacert.CONFIGMAP_NAME, namespace="team", annotations=annotations)
    return stamp(ConfigMap(metadata=meta, data=data))


@pytest.mark.parametrize(
    ("existing", "verb"),
    [
        pytest.param(None, "create", id="missing-is-created"),
        pytest.param(configmap({"ca.crt": CA}, GOOD), None, id="correct-is-left-alone"),
        pytest.param(configmap({"ca.crt": "edited"}, GOOD), "update", id="edited-data-restored"),
        pytest.param(
            configmap({"ca.crt": CA, "extra": "x"}, GOOD), "update", id="extra-key-removed"
        ),
        pytest.param(configmap({"ca.crt": CA}), "update", id="missing-annotation-restored"),
    ],
)
async def test_configmap_is_kept_correct(existing: ConfigMap | None, verb: str | None) -> None:
    h = publisher_harness()
    h.cache(namespace("team"))
    if existing is not None:
        h.store(existing)
    await rootcacert.new(h.ctx).sync("team")
    writes = h.client.writes(kind="ConfigMap")
    assert [w.verb for w in writes] == ([verb] if verb else [])
    stored = h.client.objects[(ConfigMap, "team", rootcacert.CONFIGMAP_NAME)]
    assert isinstance(stored, ConfigMap)
    assert stored.data == {"ca.crt": CA}
    assert (stored.metadata.annotations or {}).get(rootcacert.DESCRIPTION_ANNOTATION)


@pytest.mark.parametrize(
    "cached",
    [
        pytest.param([namespace("team", terminating=True)], id="terminating-namespace"),
        pytest.param([], id="namespace-gone"),
    ],
)
async def test_nothing_is_published_where_it_cannot_live(cached: list[Namespace]) -> None:
    h = publisher_harness()
    h.cache(*cached)
    await rootcacert.new(h.ctx).sync("team")
    assert h.client.actions == []


async def test_a_configmap_created_meanwhile_is_not_an_error() -> None:
    h = publisher_harness()
    h.cache(namespace("team"))
    h.client.seed(configmap({"ca.crt": "stale"}))
    await rootcacert.new(h.ctx).sync("team")
    assert h.client.writes() == []


@pytest.mark.parametrize(
    ("name", "queued"),
    [
        pytest.param(rootcacert.CONFIGMAP_NAME, ["team"], id="ours"),
        pytest.param("other", [], id="someone-elses"),
    ],
)
async def test_configmap_changes_requeue_their_namespace(name: str, queued: list[str]) -> None:
    h = publisher_harness()
    controller = rootcacert.new(h.ctx)
    old = stamp(ConfigMap(metadata=ObjectMeta(name=name, namespace="team")))
    new = stamp(ConfigMap(metadata=ObjectMeta(name=name, namespace="team")), rv="2")
    controller._configmap_updated(old, new)
    controller._configmap_changed(new)
    assert len(controller.queue) == len(queued)
