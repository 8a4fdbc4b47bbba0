"""The etcd cluster configuration: names, URLs, the initial-cluster string, flags and PKI."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from kube.pki import CertificateAuthority
from kubelab.lab.etcd import EtcdCluster, EtcdMember, EtcdProcess

ADDRESSES = ["10.100.0.11", "10.100.0.12", "10.100.0.13"]


def three(tmp_path: Path, *, client_tls: bool = False) -> EtcdCluster:
    return EtcdCluster.on_addresses(ADDRESSES, tmp_path, client_tls=client_tls)


def test_members_names_and_urls(tmp_path: Path) -> None:
    cluster = three(tmp_path)
    assert [m.name for m in cluster.members] == ["etcd1", "etcd2", "etcd3"]
    assert cluster.endpoints() == ["10.100.0.11:2379", "10.100.0.12:2379", "10.100.0.13:2379"]
    assert cluster.store_url() == "etcd://10.100.0.11:2379,10.100.0.12:2379,10.100.0.13:2379"
    assert cluster.initial_cluster() == (
        "etcd1=https://10.100.0.11:2380,etcd2=https://10.100.0.12:2380,"
        "etcd3=https://10.100.0.13:2380"
    )
    assert cluster.quorum == 2
    assert cluster.data_dir(cluster.member("etcd2")) == tmp_path / "etcd2"


def test_ipv6_addresses_are_bracketed() -> None:
    member = EtcdMember("a", "fd00::1", 12379, 12380)
    assert member.endpoint == "[fd00::1]:12379"
    assert member.peer_endpoint() == "[fd00::1]:12380"


def test_flags_new_cluster_with_peer_tls(tmp_path: Path) -> None:
    cluster = three(tmp_path)
    flags = cluster.flags(cluster.member("etcd1"))
    assert "--name=etcd1" in flags
    assert "--listen-peer-urls=https://10.100.0.11:2380" in flags
    assert "--listen-client-urls=http://10.100.0.11:2379" in flags
    assert f"--initial-cluster={cluster.initial_cluster()}" in flags
    assert "--initial-cluster-state=new" in flags
    assert "--peer-client-cert-auth" in flags
    assert "--pre-vote" in flags
    assert f"--peer-cert-file={tmp_path / 'pki' / 'etcd1.crt'}" in flags
    assert f"--peer-trusted-ca-file={tmp_path / 'pki' / 'ca.crt'}" in flags
    assert not any(f.startswith("--cert-file") or f == "--client-cert-auth" for f in flags)


def test_flags_client_tls(tmp_path: Path) -> None:
    cluster = three(tmp_path, client_tls=True)
    flags = cluster.flags(cluster.member("etcd3"))
    assert "--listen-client-urls=https://10.100.0.13:2379" in flags
    assert "--client-cert-auth" in flags
    assert f"--cert-file={tmp_path / 'pki' / 'etcd3.crt'}" in flags


def test_flags_replacement_member_joins_existing(tmp_path: Path) -> None:
    cluster = three(tmp_path)
    survivors = [cluster.member("etcd1"), cluster.member("etcd2")]
    replacement = EtcdMember("etcd4", "10.100.0.14")
    grown = EtcdCluster((*survivors, replacement), tmp_path)
    flags = grown.flags(replacement, state="existing")
    assert "--initial-cluster-state=existing" in flags
    assert (
        "--initial-cluster=etcd1=https://10.100.0.11:2380,etcd2=https://10.100.0.12:2380,"
        "etcd4=https://10.100.0.14:2380"
    ) in flags


def test_command_inside_netns(tmp_path: Path) -> None:
    cluster = three(tmp_path)
    process = EtcdProcess(cluster, cluster.member("etcd1"), netns="cp1")
    assert process.command()[:5] == ["ip", "netns", "exec", "cp1", process.command()[4]]
    assert process.command()[4].endswith("etcd")


@pytest.mark.parametrize(
    ("members", "message"),
    [
        ((), "at least one member"),
        ((EtcdMember("a", "10.0.0.1"), EtcdMember("a", "10.0.0.2")), "unique"),
        ((EtcdMember("a", "10.0.0.1"), EtcdMember("b", "10.0.0.1")), "share"),
    ],
)
def test_invalid_clusters(tmp_path: Path, members: tuple[EtcdMember, ...], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        EtcdCluster(members, tmp_path)


def test_write_pki_issues_member_certificates(tmp_path: Path) -> None:
    cluster = three(tmp_path)
    ca = CertificateAuthority.create()
    cluster.write_pki(ca)
    assert (tmp_path / "pki" / "ca.crt").read_bytes() == ca.cert_pem
    files = cluster.member_tls(cluster.member("etcd2"))
    cert = x509.load_pem_x509_certificate(files.cert.read_bytes())
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert set(sans.get_values_for_type(x509.IPAddress)) == {
        ipaddress.ip_address("10.100.0.12"),
        ipaddress.ip_address("127.0.0.1"),
    }
    usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert set(usages) == {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH}
    assert (files.key.stat().st_mode & 0o077) == 0
    client = x509.load_pem_x509_certificate(cluster.client_tls_files().cert.read_bytes())
    client_usages = client.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(client_usages) == [ExtendedKeyUsageOID.CLIENT_AUTH]
