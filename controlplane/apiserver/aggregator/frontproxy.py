"""The front proxy's two sides in the API server: the identity it proxies with, and the
requestheader authentication of requests that come from a front proxy.

``--proxy-client-cert-file``/``--proxy-client-key-file`` are the client certificate the
aggregator presents to extension servers; ``--requestheader-client-ca-file`` and
``--requestheader-allowed-names`` say whose ``X-Remote-*`` headers to believe (the API server
believes them too, as upstream's: first in the authentication chain).  Given none of them, the
server uses the front-proxy CA and client certificate it makes under ``<data-dir>/pki`` and
allows only ``front-proxy-client``, as a kubeadm cluster is configured.

At every start the settings are published in ``kube-system/extension-apiserver-authentication``
with the cluster CA as ``client-ca-file``, as upstream, so extension servers find them.  A
request with a front-proxy certificate but no user header is anonymous (upstream's x509
authenticator would not accept a certificate of another CA).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from aiohttp import web

from controlplane.apiserver import auth
from controlplane.apiserver.aggregator.proxy import FrontProxyIdentity
from controlplane.apiserver.certs import serving
from controlplane.apiserver.system import configmaps
from kube.client import delegation

if TYPE_CHECKING:
    from controlplane.apiserver.registry.rest import Lookup
    from controlplane.apiserver.server import ServerConfig


@dataclass(frozen=True)
class FrontProxy:
    identity: FrontProxyIdentity
    requestheader: delegation.RequestHeaderConfig
    ca_file: Path
    """The requestheader CA, which the TLS layer must accept client certificates of."""
    checker: delegation.RequestHeaderAuthenticator

    def authenticator(self, request: web.Request) -> auth.User | None:
        ssl_object = request.transport.get_extra_info("ssl_object") if request.transport else None
        cert = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
        if not self.checker.trusts(cert):
            return None
        user = self.checker.authenticate(cert, list(request.headers.items()))
        if user is None:
            return auth.ANONYMOUS_USER
        groups = (
            user.groups if auth.AUTHENTICATED in user.groups else (*user.groups, auth.AUTHENTICATED)
        )
        return auth.User(user.name, groups, user.uid, user.extra)


def configure(config: ServerConfig, pki: serving.PKI) -> FrontProxy:
    """The front proxy the flags (or, without them, the PKI kubelab made) describe."""
    if (config.proxy_client_cert_file is None) != (config.proxy_client_key_file is None):
        raise SystemExit("--proxy-client-cert-file and --proxy-client-key-file go together")
    if config.proxy_client_cert_file is not None and config.proxy_client_key_file is not None:
        identity = FrontProxyIdentity(
            config.proxy_client_cert_file.read_bytes(), config.proxy_client_key_file.read_bytes()
        )
    else:
        identity = FrontProxyIdentity(
            pki.front_proxy_client.cert_pem, pki.front_proxy_client.key_pem
        )
    if config.requestheader_client_ca_file is not None:
        ca_file, allowed = config.requestheader_client_ca_file, config.requestheader_allowed_names
    else:
        ca_file = pki.front_proxy_ca
        allowed = config.requestheader_allowed_names or (serving.FRONT_PROXY_CLIENT,)
    requestheader = delegation.RequestHeaderConfig(
        ca_pem=ca_file.read_bytes(),
        allowed_names=tuple(allowed),
        username_headers=tuple(config.requestheader_username_headers),
        group_headers=tuple(config.requestheader_group_headers),
        extra_headers_prefix=tuple(config.requestheader_extra_headers_prefix),
    )
    return FrontProxy(
        identity, requestheader, ca_file, delegation.RequestHeaderAuthenticator(requestheader)
    )


async def publish(
    registry: Lookup, client_ca_pem: bytes, requestheader: delegation.RequestHeaderConfig
) -> bool:
    """Write ``kube-system/extension-apiserver-authentication``; whether anything changed."""
    data = {delegation.CLIENT_CA_KEY: client_ca_pem.decode(), **requestheader.configmap_data()}
    return await configmaps.publish(registry, delegation.NAMESPACE, delegation.CONFIGMAP, data)
