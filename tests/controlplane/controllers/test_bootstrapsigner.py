"""The bootstrapsigner, with fake informers, a fake API and a fake clock."""

from __future__ import annotations

import pytest

from controlplane.controllers import bootstrapsigner
from kube.api.kinds.core_v1.cluster import ConfigMap, Secret
from kube.api.meta_v1 import ObjectMeta, Status
from kube.client import jws
from kube.client.errors import ApiError
from kube.clock import FakeClock
from tests.controlplane.controllers.fakes import Harness, harness, stamp
from tests.controlplane.controllers.tokenfixtures import token

KEY = "kube-public/cluster-info"
KUBECONFIG = "apiVersion: v1\nclusters: []\n"


def cluster_info(**data: str) -> ConfigMap:
    return stamp(
        ConfigMap(metadata=ObjectMeta(name="cluster-info", namespace="kube-public"), data=data)
    )


def signature(token_id: str = "abcdef", secret: str = "0123456789abcdef") -> str:
    return jws.detached_signature(KUBECONFIG, token_id, secret)


def signer_with(*objects: ConfigMap | Secret) -> tuple[Harness, bootstrapsigner.BootstrapSigner]:
    h = harness()
    signer = bootstrapsigner.new(h.ctx)  # before the caches are filled: nothing queued yet
    h.store(*objects)
    return h, signer


def stored(h: Harness) -> dict[str, str]:
    configmap = h.client.objects[(ConfigMap, "kube-public", "cluster-info")]
    assert isinstance(configmap, ConfigMap)
    return configmap.data or {}


async def test_each_signing_token_signs_the_kubeconfig() -> None:
    clock = FakeClock()
    h, signer = signer_with(
        cluster_info(kubeconfig=KUBECONFIG, other="kept"),
        token(clock, 3600),
        token(clock, token_id="ghijkl", secret="fedcba9876543210"),
    )
    await signer.sync(KEY)
    assert stored(h) == {
        "kubeconfig": KUBECONFIG,
        "other": "kept",
        "jws-kubeconfig-abcdef": signature(),
        "jws-kubeconfig-ghijkl": signature("ghijkl", "fedcba9876543210"),
    }
    assert [a.verb for a in h.client.actions] == ["update"]
    h.cache(h.client.objects[(ConfigMap, "kube-public", "cluster-info")])
    h.client.actions.clear()
    await signer.sync(KEY)
    assert h.client.actions == [], "a correct cluster-info is left alone"


@pytest.mark.parametrize(
    "secret",
    [
        pytest.param(token(FakeClock(), -1), id="expired"),
        pytest.param(
            token(FakeClock(), data={"usage-bootstrap-signing": ""}), id="not-for-signing"
        ),
        pytest.param(token(FakeClock(), data={"token-id": "zzzzzz"}), id="id-not-its-name"),
        pytest.param(token(FakeClock(), data={"token-secret": ""}), id="no-secret"),
        pytest.param(token(FakeClock(), data={"expiration": "soon"}), id="unparsable-expiration"),
    ],
)
async def test_tokens_that_may_not_sign_lose_their_signature(secret: Secret) -> None:
    h, signer = signer_with(
        cluster_info(kubeconfig=KUBECONFIG, **{"jws-kubeconfig-abcdef": signature()}), secret
    )
    await signer.sync(KEY)
    assert stored(h) == {"kubeconfig": KUBECONFIG}


async def test_signatures_of_deleted_tokens_and_stale_ones_are_fixed() -> None:
    h, signer = signer_with(
        cluster_info(
            kubeconfig=KUBECONFIG,
            **{"jws-kubeconfig-abcdef": "stale..sig", "jws-kubeconfig-gone00": "x..y"},
        ),
        token(FakeClock()),
    )
    await signer.sync(KEY)
    assert stored(h) == {"kubeconfig": KUBECONFIG, "jws-kubeconfig-abcdef": signature()}


@pytest.mark.parametrize(
    "objects",
    [
        pytest.param([], id="no-cluster-info"),
        pytest.param([cluster_info(other="x")], id="no-kubeconfig-key"),
    ],
)
async def test_nothing_to_sign_writes_nothing(objects: list[ConfigMap]) -> None:
    h, signer = signer_with(*objects, token(FakeClock()))
    await signer.sync(KEY)
    assert h.client.actions == []


async def test_a_signature_goes_when_its_token_expires() -> None:
    h = harness()
    signer = bootstrapsigner.new(h.ctx)
    h.store(cluster_info(kubeconfig=KUBECONFIG), token(h.clock, 600))
    await signer.sync(KEY)
    assert "jws-kubeconfig-abcdef" in stored(h)
    h.cache(h.client.objects[(ConfigMap, "kube-public", "cluster-info")])
    await h.clock.advance(599)
    assert len(signer.queue) == 0
    await h.clock.advance(2)
    assert await signer.queue.get() == KEY
    await signer.sync(KEY)
    assert stored(h) == {"kubeconfig": KUBECONFIG}


async def test_a_conflicting_write_is_left_to_the_next_event() -> None:
    h, signer = signer_with(cluster_info(kubeconfig=KUBECONFIG), token(FakeClock()))
    h.client.fail_next("update", ApiError(Status(code=409, reason="Conflict", message="x")))
    await signer.sync(KEY)
    assert h.client.writes() == []


def test_events_about_cluster_info_and_tokens_enqueue_the_one_key() -> None:
    h = harness()
    signer = bootstrapsigner.new(h.ctx)
    ours, other = (
        cluster_info(kubeconfig=KUBECONFIG),
        stamp(ConfigMap(metadata=ObjectMeta(name="cluster-info", namespace="default"))),
    )
    opaque = stamp(Secret(metadata=ObjectMeta(name="s", namespace="kube-system")))
    signer._configmap_added(other)
    signer._secret_changed(opaque)
    signer._configmap_updated(ours, ours)  # a resync
    assert len(signer.queue) == 0
    signer._configmap_added(ours)
    signer._secret_changed(token(h.clock))
    assert len(signer.queue) == 1
