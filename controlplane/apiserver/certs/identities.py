"""The identities ``kubelab server`` issues: one client certificate and kubeconfig per component.

Kubernetes knows a certificate's holder by its subject (CN = user, O = groups), and RBAC
grants each control-plane user exactly what its component needs (``bootstrappolicy`` binds
``system:kube-scheduler``, ``system:kube-controller-manager``,
``system:cloud-controller-manager`` and ``system:kube-proxy`` to their roles).  Only the admin
is in ``system:masters``; the API server's own client identity towards kubelets
(``kube-apiserver-kubelet-client``) is bound to ``system:kubelet-api-admin``, which is all a
kubelet asks of it, instead of upstream's older ``system:masters``.

Each identity's key pair lives in ``<data-dir>/pki/<name>.crt|.key`` and its kubeconfig in
``<data-dir>/<name>.kubeconfig`` (what kubeadm keeps under ``/etc/kubernetes``).  Certificates
are created once and kept across restarts; one whose subject no longer matches the table (an
older kubelab issued it differently) is issued again.  Kubeconfigs are rewritten at every start
because the served port may change (port 0 picks a free one).  Kubelets' identities are not
here: the server does not know its nodes in advance, and a kubelet gets its certificate from
the CA's holder (the lab) or through TLS bootstrapping (``kubelab token create`` and the
CertificateSigningRequest API).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kube.client import kubeconfig
from kube.pki import CertificateAuthority, KeyPair, identity


@dataclass(frozen=True)
class Identity:
    """A component's user and groups, and the name its files go by."""

    name: str
    user: str
    groups: tuple[str, ...] = ()


ADMIN = Identity("admin", "kubernetes-admin", ("system:masters",))
SCHEDULER = Identity("scheduler", "system:kube-scheduler")
CONTROLLER_MANAGER = Identity("controller-manager", "system:kube-controller-manager")
CLOUD_CONTROLLER_MANAGER = Identity("cloud-controller-manager", "system:cloud-controller-manager")
PROXY = Identity("proxy", "system:kube-proxy")
KUBELET_CLIENT = Identity("apiserver-kubelet-client", "kube-apiserver-kubelet-client")
"""The API server's identity when it connects to kubelets (logs, exec, port-forward)."""

CLIENTS = (ADMIN, SCHEDULER, CONTROLLER_MANAGER, CLOUD_CONTROLLER_MANAGER, PROXY)
"""The identities that get a kubeconfig."""


def ensure(ca: CertificateAuthority, pki_dir: Path, wanted: Identity) -> KeyPair:
    """The key pair of ``wanted`` in ``pki_dir``, issued (again) unless one with its subject
    is there already."""
    if (pki_dir / f"{wanted.name}.crt").exists() and (pki_dir / f"{wanted.name}.key").exists():
        pair = KeyPair.read(pki_dir, wanted.name)
        user, groups = identity(pair.certificate)
        if (user, tuple(groups)) == (wanted.user, wanted.groups):
            return pair
    pair = ca.issue(wanted.user, organizations=wanted.groups, client=True)
    pair.write(pki_dir, wanted.name)
    return pair


def kubeconfig_path(data_dir: Path, wanted: Identity) -> Path:
    return data_dir / f"{wanted.name}.kubeconfig"


def write_kubeconfigs(data_dir: Path, ca: CertificateAuthority, server: str) -> list[Path]:
    """``<name>.kubeconfig`` in ``data_dir`` for every client identity, for ``server``."""
    pki_dir = data_dir / "pki"
    paths = []
    for wanted in CLIENTS:
        pair = ensure(ca, pki_dir, wanted)
        path = kubeconfig_path(data_dir, wanted)
        kubeconfig.write(path, kubeconfig.render(server, ca.cert_pem, wanted.name, pair))
        paths.append(path)
    return paths
