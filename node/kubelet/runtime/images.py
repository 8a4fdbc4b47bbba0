"""Images for containers: pull policy, pulls through CRI, per-image pull backoff.

As upstream's ``pkg/kubelet/images`` (``imageManager.EnsureImageExists``): before a container
is created its image must be present.  The container's ``imagePullPolicy`` decides whether to
pull (``Always``; ``IfNotPresent`` when the runtime lacks it; ``Never`` fails with
``ErrImageNeverPull`` when it is missing); a container without a policy gets the API's
default (``Always`` for ``:latest`` or no tag, ``IfNotPresent`` otherwise).  A failed pull
starts a backoff per pod and image (10 s doubling to 300 s, the ``CrashLoopBackOff``
arithmetic keyed by the time of the failure): until it ends the image is not pulled again
and the container waits with ``ImagePullBackOff`` instead of ``ErrImagePull``.

Credentials come from the pod's ``imagePullSecrets`` (read through ``SecretGetter``; a
missing one is a ``FailedToRetrieveImagePullSecret`` warning and the pull goes on without
it): every credential ``node.kubelet.credentials.lookup`` matches with the image is tried in
turn in the PullImageRequest's ``auth`` until one pull succeeds, as upstream's
``pullImage``; with none the pull is anonymous.  The last failure is the one reported.

Events go through the ``record`` callback (type, reason, message) in upstream's words:
Pulling, Pulled, Failed, BackOff, ErrImageNeverPull, FailedToRetrieveImagePullSecret.
Failures raise ``ImagePullError`` carrying the container's waiting reason and message.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Protocol

from kube.api.kinds.core_v1.cluster import Secret
from kube.api.kinds.core_v1.pod import Container, Pod
from kube.api.kinds.core_v1.volume import image_pull_policy
from kube.clock import Clock
from node.cri.client import CRIError, RuntimeClient
from node.cri.pb import api_pb2 as pb
from node.kubelet.backoff import BackoffKey, CrashLoopBackOff
from node.kubelet.credentials import Credential, lookup

ERR_IMAGE_PULL = "ErrImagePull"
IMAGE_PULL_BACK_OFF = "ImagePullBackOff"
ERR_IMAGE_NEVER_PULL = "ErrImageNeverPull"
INVALID_IMAGE_NAME = "InvalidImageName"

Record = Callable[[str, str, str], None]
"""Record an event on the pod: (type, reason, message)."""


class SecretGetter(Protocol):
    """Where pull secrets come from (the API server, as for volumes)."""

    async def secret(self, namespace: str, name: str) -> Secret | None:
        """The Secret, or None when it does not exist; other failures raise."""
        ...


class ImagePullError(Exception):
    """The image could not be made present: ``reason`` is the container's waiting reason,
    ``retry_after`` the seconds until the pull backoff ends (None: no backoff)."""

    def __init__(self, reason: str, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.retry_after = retry_after


def grpc_message(error: CRIError) -> str:
    """A CRI error as Go's gRPC prints it: ``rpc error: code = NotFound desc = ...``."""
    code = "".join(word.capitalize() for word in error.code.name.split("_"))
    return f"rpc error: code = {code} desc = {error.details}"


def go_seconds(seconds: float) -> str:
    """A duration truncated to milliseconds as Go prints it: 0s, 12ms, 1.5s."""
    millis = int(seconds * 1000)
    if millis == 0:
        return "0s"
    if millis < 1000:
        return f"{millis}ms"
    return f"{millis / 1000:.3f}".rstrip("0").rstrip(".") + "s"


class ImagePuller:
    """Makes images present for containers; one per kubelet, one event loop."""

    def __init__(
        self, cri: RuntimeClient, clock: Clock, secrets: SecretGetter | None = None
    ) -> None:
        self.cri = cri
        self.clock = clock
        self.secrets = secrets
        self.backoff = CrashLoopBackOff(clock)
        self._failed_at: dict[BackoffKey, datetime.datetime] = {}

    async def ensure(
        self,
        pod: Pod,
        container: Container,
        sandbox_config: pb.PodSandboxConfig,
        record: Record,
    ) -> str:
        """The image ref of ``container``'s image, pulled if its policy says so.

        Raises ``ImagePullError``; an unexpected failure of ImageStatus raises ``CRIError``.
        """
        image = container.image or ""
        if not image.strip():
            message = f"Failed to apply default image tag {image!r}: couldn't parse image name"
            record("Warning", INVALID_IMAGE_NAME, message)
            raise ImagePullError(INVALID_IMAGE_NAME, message)
        present = await self.cri.image_status(image)
        policy = container.image_pull_policy or image_pull_policy(image)
        if present is not None and policy != "Always":
            record("Normal", "Pulled", f'Container image "{image}" already present on machine')
            return present.id
        if present is None and policy == "Never":
            message = f'Container image "{image}" is not present with pull policy of Never'
            record("Warning", ERR_IMAGE_NEVER_PULL, message)
            raise ImagePullError(ERR_IMAGE_NEVER_PULL, message)
        key = BackoffKey(pod.metadata.uid or "", image, "")
        failed_at = self._failed_at.get(key)
        if failed_at is not None:
            remaining = self.backoff.in_backoff(key, failed_at)
            if remaining > 0:
                message = f'Back-off pulling image "{image}"'
                record("Normal", "BackOff", message)
                raise ImagePullError(IMAGE_PULL_BACK_OFF, message, remaining)
        credentials = await self._credentials(pod, image, record)
        record("Normal", "Pulling", f'Pulling image "{image}"')
        started = self.clock.monotonic()
        try:
            ref = await self._pull(image, credentials, sandbox_config)
        except CRIError as error:
            message = grpc_message(error)
            record("Warning", "Failed", f'Failed to pull image "{image}": {message}')
            now = self.clock.now()
            self.backoff.record_exit(key, now)
            self._failed_at[key] = now
            raise ImagePullError(ERR_IMAGE_PULL, message, self.backoff.delay(key)) from None
        took = go_seconds(self.clock.monotonic() - started)
        pulled = await self.cri.image_status(ref)
        size = pulled.size if pulled is not None else 0
        record(
            "Normal",
            "Pulled",
            f'Successfully pulled image "{image}" in {took} ({took} including waiting). '
            f"Image size: {size} bytes.",
        )
        self.backoff.gc()
        return ref

    async def _credentials(self, pod: Pod, image: str, record: Record) -> list[Credential]:
        names = [
            r.name for r in (pod.spec.image_pull_secrets if pod.spec else None) or [] if r.name
        ]
        if not names or self.secrets is None:
            return []
        found: list[Secret] = []
        missing: list[str] = []
        for name in names:
            try:
                secret = await self.secrets.secret(pod.metadata.namespace or "", name)
            except Exception:
                secret = None
            if secret is None:
                missing.append(f"{pod.metadata.namespace}/{name}")
            else:
                found.append(secret)
        if missing:
            record(
                "Warning",
                "FailedToRetrieveImagePullSecret",
                f"Unable to retrieve some image pull secrets ({', '.join(missing)}); "
                "attempting to pull the image may not succeed.",
            )
        return lookup(found, image)

    async def _pull(
        self, image: str, credentials: list[Credential], sandbox_config: pb.PodSandboxConfig
    ) -> str:
        """Pull anonymously, or with each credential in turn until one works; the last
        failure raises."""
        if not credentials:
            return await self.cri.pull_image(image, sandbox_config=sandbox_config)
        failure: CRIError | None = None
        for credential in credentials:
            auth = pb.AuthConfig(username=credential.username, password=credential.password)
            try:
                return await self.cri.pull_image(image, auth=auth, sandbox_config=sandbox_config)
            except CRIError as error:
                failure = error
        assert failure is not None
        raise failure

    def forget_pod(self, pod_uid: str) -> None:
        """Drop the pull backoffs of a pod that is gone."""
        self.backoff.forget_pod(pod_uid)
        for key in [k for k in self._failed_at if k.pod_uid == pod_uid]:
            del self._failed_at[key]
