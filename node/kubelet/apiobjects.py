"""What pods read from the API besides themselves: ConfigMaps, Secrets, Services, tokens.

One object serves both the volume manager (``SourcesGetter``) and the container environment
(``EnvSources``).  ConfigMaps and Secrets are read with a GET when a pod needs them (upstream's
default ``Get`` change-detection strategy), so the kubelet never watches every Secret of the
cluster; Services come from the kubelet's Service informer, since every pod with service links
needs all of its namespace's.  Service-account tokens are asked of the TokenRequest API, bound
to the pod that mounts them.  A missing object is ``None``, for the caller to judge against
``optional``; any other failure raises, and the pod worker retries.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from kube.api import codec
from kube.api.kinds.authentication_v1 import (
    BoundObjectReference,
    TokenRequest,
    TokenRequestSpec,
)
from kube.api.kinds.core_v1.cluster import ConfigMap, Secret, ServiceAccount
from kube.api.kinds.core_v1.pod import Pod
from kube.api.kinds.core_v1.service import Service
from kube.api.meta_v1 import ObjectMeta
from kube.client.errors import ApiError
from kube.client.informers import Indexer
from kube.client.interface import ApiClient

T = TypeVar("T", ConfigMap, Secret)


class ApiObjects:
    """See the module docstring."""

    def __init__(
        self,
        client: ApiClient,
        services: Indexer[Service],
    ) -> None:
        self.client = client
        self._services = services

    async def config_map(self, namespace: str, name: str) -> ConfigMap | None:
        return await self._get(ConfigMap, namespace, name)

    async def secret(self, namespace: str, name: str) -> Secret | None:
        return await self._get(Secret, namespace, name)

    def services(self, namespace: str) -> Sequence[Service]:
        return self._services.list(namespace)

    async def service_account_token(
        self, pod: Pod, audience: str | None, expiration_seconds: int
    ) -> str:
        """A TokenRequest for the pod's service account, bound to the pod."""
        account = (pod.spec.service_account_name if pod.spec else None) or "default"
        request = TokenRequest(
            metadata=ObjectMeta(name=account, namespace=pod.metadata.namespace),
            spec=TokenRequestSpec(
                audiences=[audience] if audience else None,
                expiration_seconds=expiration_seconds,
                bound_object_ref=BoundObjectReference(
                    kind="Pod",
                    api_version="v1",
                    name=pod.metadata.name,
                    uid=pod.metadata.uid,
                ),
            ),
        )
        answer = await self.client.create_subresource(
            ServiceAccount, account, pod.metadata.namespace, "token", request
        )
        issued = codec.from_builtins(answer, TokenRequest).obj
        token = issued.status.token if issued.status else None
        if not token:
            raise ValueError(f"the API server issued no token for service account {account!r}")
        return token

    async def _get(self, cls: type[T], namespace: str, name: str) -> T | None:
        try:
            return await self.client.get(cls, name, namespace)
        except ApiError as error:
            if error.not_found:
                return None
            raise
