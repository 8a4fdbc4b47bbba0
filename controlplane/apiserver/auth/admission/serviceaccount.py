"""ServiceAccount admission: every pod runs as an account that exists, with its API token.

As upstream's plugin, on pod creation (the checks again in its validating half, after every
mutating webhook):

- an empty ``serviceAccountName`` becomes ``default``; an account that does not exist is
  refused (403), since the pod could not authenticate as it;
- a pod that names no ``imagePullSecrets`` gets its account's, so the kubelet pulls with them;
- unless ``automountServiceAccountToken`` is false on the pod (else on the account), the pod
  gets a ``kube-api-access-<random>`` projected volume (a bound token that expires after
  3607 seconds, the cluster CA from the ``kube-root-ca.crt`` ConfigMap, and the namespace),
  mounted read-only at /var/run/secrets/kubernetes.io/serviceaccount in every init and app
  container that has nothing mounted there yet.  The kubelet only serves the volume: it asks
  the TokenRequest API for a token bound to the pod;
- mirror pods (a kubelet's static pods) may reference no account, secret nor token
  projection, since the kubelet cannot know the cluster's accounts when it starts them.

The account is read from a watch cache, falling back to the store on a miss (an account
created a moment ago); the ``default`` account is looked for during about a second and a half,
for the serviceaccount controller to create it in a new namespace.
"""

from __future__ import annotations

import asyncio
import random
import secrets

from controlplane.apiserver import errors
from controlplane.apiserver.registry.store import NAME_ALPHABET, Admission, RequestContext
from controlplane.apiserver.storage.watchcache import WatchCache
from kube.api.kinds.core_v1.cluster import ServiceAccount
from kube.api.kinds.core_v1.pod import MIRROR_POD_ANNOTATION, Container, Pod
from kube.api.kinds.core_v1.volume import (
    FILE_MODE_DEFAULT,
    ConfigMapProjection,
    DownwardAPIProjection,
    DownwardAPIVolumeFile,
    KeyToPath,
    LocalObjectReference,
    ObjectFieldSelector,
    ProjectedVolumeSource,
    ServiceAccountTokenProjection,
    Volume,
    VolumeMount,
    VolumeProjection,
)
from kube.api.meta_v1 import Resource
from kube.api.scheme import KindInfo

DEFAULT_ACCOUNT = "default"
DEFAULT_ACCOUNT_ATTEMPTS = 10
MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
VOLUME_PREFIX = "kube-api-access-"
ROOT_CA_CONFIG_MAP = "kube-root-ca.crt"
TOKEN_EXPIRATION_SECONDS = 3607
"""Upstream's one hour and seven seconds: the seven mark tokens of this volume in audits."""


def service_account(accounts: WatchCache) -> tuple[Admission, Admission]:
    """Its ``Admit`` (the default account, the token volume) and its ``Validate`` (mirror pods
    reference nothing; the account, which a mutating webhook may have changed, exists)."""

    async def admit(
        operation: str, info: KindInfo, obj: Resource, old: Resource | None, ctx: RequestContext
    ) -> None:
        if operation != "CREATE" or not isinstance(obj, Pod) or obj.spec is None:
            return
        if MIRROR_POD_ANNOTATION in (obj.metadata.annotations or {}):
            return
        spec = obj.spec
        spec.service_account_name = spec.service_account_name or DEFAULT_ACCOUNT
        account = await _existing(accounts, info, obj)
        if not spec.image_pull_secrets and account.image_pull_secrets:
            spec.image_pull_secrets = [
                LocalObjectReference(name=ref.name) for ref in account.image_pull_secrets
            ]
        automount = spec.automount_service_account_token
        if automount is None:
            automount = account.automount_service_account_token
        if automount is not False:
            mount_token(obj)

    async def validate(
        operation: str, info: KindInfo, obj: Resource, old: Resource | None, ctx: RequestContext
    ) -> None:
        if operation != "CREATE" or not isinstance(obj, Pod) or obj.spec is None:
            return
        name = obj.metadata.name or ""
        if MIRROR_POD_ANNOTATION in (obj.metadata.annotations or {}):
            problem = _mirror_problem(obj)
            if problem:
                raise errors.forbidden(info, name, f'pods "{name}" is forbidden: {problem}')
            return
        if not obj.spec.service_account_name:
            raise errors.forbidden(
                info,
                name,
                f'pods "{name}" is forbidden: no service account specified for pod '
                f"{obj.metadata.namespace}/{name}",
            )
        await _existing(accounts, info, obj)

    return admit, validate


async def _existing(accounts: WatchCache, info: KindInfo, pod: Pod) -> ServiceAccount:
    """The pod's account; 403 when it does not exist."""
    assert pod.spec is not None
    wanted = pod.spec.service_account_name or ""
    namespace = pod.metadata.namespace or ""
    account = await _account(accounts, namespace, wanted)
    if not isinstance(account, ServiceAccount):
        name = pod.metadata.name or ""
        raise errors.forbidden(
            info,
            name,
            f'pods "{name}" is forbidden: error looking up service account '
            f'{namespace}/{wanted}: serviceaccount "{wanted}" not found',
        )
    return account


async def _account(accounts: WatchCache, namespace: str, name: str) -> Resource | None:
    """The account, from the cache or the store; the ``default`` one is waited for a little,
    since the serviceaccount controller creates it just after its namespace (as upstream)."""
    attempts = DEFAULT_ACCOUNT_ATTEMPTS if name == DEFAULT_ACCOUNT else 1
    for attempt in range(attempts):
        if attempt:
            await asyncio.sleep(0.1 + random.random() / 10)
        found = await accounts.lookup(namespace, name)
        if found is not None:
            return found
    return None


def mount_token(pod: Pod) -> None:
    """Mount the API access volume in every container without a mount at its path, adding the
    volume (or reusing a ``kube-api-access-*`` one the pod has) if any container needs it."""
    spec = pod.spec
    assert spec is not None
    volumes = list(spec.volumes or ())
    existing = next((v for v in volumes if (v.name or "").startswith(VOLUME_PREFIX)), None)
    name = (
        existing.name
        if existing is not None and existing.name
        else VOLUME_PREFIX + "".join(secrets.choice(NAME_ALPHABET) for _ in range(5))
    )
    mount = VolumeMount(name=name, read_only=True, mount_path=MOUNT_PATH)
    needed = _add_mount(spec.init_containers, mount) | _add_mount(spec.containers, mount)
    if existing is None and needed:
        volumes.append(Volume(name=name, projected=token_volume_source()))
        spec.volumes = volumes


def _add_mount(containers: list[Container] | None, mount: VolumeMount) -> bool:
    added = False
    for container in containers or ():
        mounts = list(container.volume_mounts or ())
        if not any(m.mount_path == MOUNT_PATH for m in mounts):
            container.volume_mounts = [*mounts, mount]
            added = True
    return added


def token_volume_source() -> ProjectedVolumeSource:
    """The projected source of a ``kube-api-access-*`` volume (upstream ``TokenVolumeSource``)."""
    return ProjectedVolumeSource(
        default_mode=FILE_MODE_DEFAULT,
        sources=[
            VolumeProjection(
                service_account_token=ServiceAccountTokenProjection(
                    path="token", expiration_seconds=TOKEN_EXPIRATION_SECONDS
                )
            ),
            VolumeProjection(
                config_map=ConfigMapProjection(
                    name=ROOT_CA_CONFIG_MAP, items=[KeyToPath(key="ca.crt", path="ca.crt")]
                )
            ),
            VolumeProjection(
                downward_api=DownwardAPIProjection(
                    items=[
                        DownwardAPIVolumeFile(
                            path="namespace",
                            field_ref=ObjectFieldSelector(
                                api_version="v1", field_path="metadata.namespace"
                            ),
                        )
                    ]
                )
            ),
        ],
    )


def _mirror_problem(pod: Pod) -> str | None:
    spec = pod.spec
    assert spec is not None
    if spec.service_account_name:
        return "a mirror pod may not reference service accounts"
    containers = [*(spec.init_containers or ()), *(spec.containers or ())]
    uses_secret = any(v.secret is not None for v in spec.volumes or ()) or any(
        (e.value_from is not None and e.value_from.secret_key_ref is not None)
        for c in containers
        for e in c.env or ()
    )
    uses_secret = uses_secret or any(
        f.secret_ref is not None for c in containers for f in c.env_from or ()
    )
    if uses_secret:
        return "a mirror pod may not reference secrets"
    for volume in spec.volumes or ():
        if volume.projected is not None and any(
            s.service_account_token is not None for s in volume.projected.sources or ()
        ):
            return "a mirror pod may not use ServiceAccountToken volume projections"
    return None
