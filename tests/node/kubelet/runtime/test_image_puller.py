"""Image pull policies and the per-image pull backoff, against a FakeRuntime on a fake clock."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from kube.api.kinds.core_v1.cluster import Secret
from kube.api.kinds.core_v1.pod import Container, Pod, PodSpec
from kube.api.kinds.core_v1.volume import LocalObjectReference
from kube.api.meta_v1 import ObjectMeta
from kube.clock import FakeClock
from node.cri.client import CRIError, RuntimeClient
from node.cri.fake import FakeRuntime
from node.cri.pb import api_pb2 as pb
from node.kubelet.runtime.images import ImagePuller, ImagePullError, go_seconds, grpc_message

PRESENT = "busybox:1.35"
SANDBOX = pb.PodSandboxConfig()


class Harness:
    def __init__(self, runtime: FakeRuntime, cri: RuntimeClient, clock: FakeClock) -> None:
        self.runtime = runtime
        self.clock = clock
        self.puller = ImagePuller(cri, clock)
        self.events: list[tuple[str, str, str]] = []

    def record(self, type: str, reason: str, message: str) -> None:
        self.events.append((type, reason, message))

    async def ensure(self, image: str, policy: str | None = None, uid: str = "uid-1") -> str:
        pod = Pod(metadata=ObjectMeta(name="web", namespace="default", uid=uid))
        container = Container(name="app", image=image, image_pull_policy=policy)
        return await self.puller.ensure(pod, container, SANDBOX, self.record)

    def reasons(self) -> list[str]:
        return [reason for _, reason, _ in self.events]


@pytest.fixture
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    clock = FakeClock()
    runtime = FakeRuntime(images=[PRESENT, "busybox:latest"], clock=clock)
    await runtime.start(tmp_path / "cri.sock")
    try:
        async with RuntimeClient(runtime.endpoint) as cri:
            yield Harness(runtime, cri, clock)
    finally:
        await runtime.stop()


@pytest.mark.parametrize(
    ("image", "policy", "pulls"),
    [
        (PRESENT, None, 0),
        (PRESENT, "IfNotPresent", 0),
        (PRESENT, "Never", 0),
        (PRESENT, "Always", 1),
        ("busybox", None, 1),
        ("busybox:latest", None, 1),
    ],
    ids=["tag-default", "if-not-present", "never", "always", "no-tag", "latest"],
)
async def test_policy_decides_whether_to_pull(
    harness: Harness, image: str, policy: str | None, pulls: int
) -> None:
    ref = await harness.ensure(image, policy)
    assert ref.startswith("sha256:")
    assert harness.runtime.calls["PullImage"] == pulls
    if pulls:
        assert harness.reasons() == ["Pulling", "Pulled"]
        assert harness.events[1][2] == (
            f'Successfully pulled image "{image}" in 0s (0s including waiting). '
            "Image size: 1048576 bytes."
        )
    else:
        assert harness.events == [
            ("Normal", "Pulled", f'Container image "{image}" already present on machine')
        ]


async def test_never_policy_without_the_image(harness: Harness) -> None:
    with pytest.raises(ImagePullError) as caught:
        await harness.ensure("nginx:1.25", "Never")
    assert caught.value.reason == "ErrImageNeverPull"
    assert caught.value.message == (
        'Container image "nginx:1.25" is not present with pull policy of Never'
    )
    assert harness.runtime.calls["PullImage"] == 0
    assert harness.reasons() == ["ErrImageNeverPull"]


async def test_failed_pulls_back_off_doubling(harness: Harness) -> None:
    for delay in (10, 20, 40):
        with pytest.raises(ImagePullError) as caught:
            await harness.ensure("nginx:1.25")
        assert caught.value.reason == "ErrImagePull"
        assert caught.value.message.startswith("rpc error: code = NotFound desc = failed to pull")
        assert caught.value.retry_after == delay
        pulls = harness.runtime.calls["PullImage"]
        await harness.clock.advance(delay - 1)
        with pytest.raises(ImagePullError) as caught:
            await harness.ensure("nginx:1.25")
        assert caught.value.reason == "ImagePullBackOff"
        assert caught.value.message == 'Back-off pulling image "nginx:1.25"'
        assert caught.value.retry_after == 1
        assert harness.runtime.calls["PullImage"] == pulls
        await harness.clock.advance(1)
    assert harness.reasons()[:3] == ["Pulling", "Failed", "BackOff"]
    harness.runtime.allow_pull = True
    assert await harness.ensure("nginx:1.25")


async def test_backoff_is_per_pod_and_forgotten_with_it(harness: Harness) -> None:
    with pytest.raises(ImagePullError):
        await harness.ensure("nginx:1.25", uid="a")
    with pytest.raises(ImagePullError) as caught:
        await harness.ensure("nginx:1.25", uid="b")
    assert caught.value.reason == "ErrImagePull"
    harness.puller.forget_pod("a")
    with pytest.raises(ImagePullError) as caught:
        await harness.ensure("nginx:1.25", uid="a")
    assert caught.value.reason == "ErrImagePull"


async def test_empty_image_name(harness: Harness) -> None:
    with pytest.raises(ImagePullError) as caught:
        await harness.ensure("")
    assert caught.value.reason == "InvalidImageName"


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s"), (0.0125, "12ms"), (1.5, "1.5s"), (2, "2s"), (61.25, "61.25s")],
    ids=lambda v: str(v),
)
def test_go_seconds(seconds: float, text: str) -> None:
    assert go_seconds(seconds) == text


def test_grpc_message() -> None:
    error = CRIError("PullImage", grpc.StatusCode.DEADLINE_EXCEEDED, "too slow")
    assert grpc_message(error) == "rpc error: code = DeadlineExceeded desc = too slow"
    error = CRIError("PullImage", grpc.StatusCode.NOT_FOUND, "gone")
    assert grpc_message(error) == "rpc error: code = NotFound desc = gone"


class Secrets:
    """A SecretGetter over a dict."""

    def __init__(self, secrets: dict[str, Secret]) -> None:
        self.secrets = secrets

    async def secret(self, namespace: str, name: str) -> Secret | None:
        return self.secrets.get(f"{namespace}/{name}")


PRIVATE = "private.kubelab.test/kubelab/busybox"


def pull_secret(user: str, password: str) -> Secret:
    config = {"auths": {"private.kubelab.test": {"username": user, "password": password}}}
    encoded = base64.b64encode(json.dumps(config).encode()).decode()
    return Secret(type="kubernetes.io/dockerconfigjson", data={".dockerconfigjson": encoded})


@pytest.fixture
async def private(tmp_path: Path) -> AsyncIterator[tuple[FakeRuntime, RuntimeClient]]:
    runtime = FakeRuntime(allow_pull=True, private={PRIVATE: ("kubelab", "s3cret")})
    await runtime.start(tmp_path / "cri.sock")
    try:
        async with RuntimeClient(runtime.endpoint) as cri:
            yield runtime, cri
    finally:
        await runtime.stop()


def secret_pod(*names: str) -> Pod:
    refs = [LocalObjectReference(name=n) for n in names]
    return Pod(
        metadata=ObjectMeta(name="web", namespace="default", uid="uid-1"),
        spec=PodSpec(containers=[], image_pull_secrets=refs),
    )


async def test_pull_secret_credentials_reach_cri(
    private: tuple[FakeRuntime, RuntimeClient],
) -> None:
    runtime, cri = private
    secrets = Secrets(
        {
            "default/wrong": pull_secret("kubelab", "nope"),
            "default/right": pull_secret("kubelab", "s3cret"),
        }
    )
    events: list[tuple[str, str, str]] = []
    puller = ImagePuller(cri, FakeClock(), secrets)
    container = Container(name="app", image=PRIVATE)
    pod = secret_pod("wrong", "gone", "right")
    assert (await puller.ensure(pod, container, SANDBOX, lambda *e: events.append(e))).startswith(
        "sha256:"
    )
    # Each matching credential in turn: the wrong one fails, the right one pulls.
    assert runtime.pulls == [(f"{PRIVATE}:latest", "kubelab")] * 2
    assert events[0] == (
        "Warning",
        "FailedToRetrieveImagePullSecret",
        "Unable to retrieve some image pull secrets (default/gone); attempting to pull the "
        "image may not succeed.",
    )


async def test_without_pull_secret_the_registry_refuses(
    private: tuple[FakeRuntime, RuntimeClient],
) -> None:
    runtime, cri = private
    puller = ImagePuller(cri, FakeClock(), Secrets({}))
    events: list[tuple[str, str, str]] = []
    with pytest.raises(ImagePullError) as caught:
        await puller.ensure(
            secret_pod(), Container(name="app", image=PRIVATE), SANDBOX, lambda *e: events.append(e)
        )
    assert caught.value.reason == "ErrImagePull"
    assert caught.value.message.endswith("401 Unauthorized")
    assert runtime.pulls == [(f"{PRIVATE}:latest", "")]
