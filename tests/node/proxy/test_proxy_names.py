"""Chain names: upstream's for the same keys, deterministic, within 28 characters."""

from __future__ import annotations

import pytest

from node.proxy import names


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        pytest.param(
            names.service_chain("ns1/svc1:p80", "TCP"), "KUBE-SVC-XPGD46QRK7WJZT7O", id="svc"
        ),
        pytest.param(
            names.endpoint_chain("ns1/svc1:p80", "TCP", "10.180.0.1:80"),
            "KUBE-SEP-SXIVWICOYRO3J4NJ",
            id="sep",
        ),
        pytest.param(
            names.external_chain("ns1/svc1:p80", "tcp"), "KUBE-EXT-XPGD46QRK7WJZT7O", id="ext"
        ),
        pytest.param(
            names.local_chain("ns1/svc1:p80", "tcp"), "KUBE-SVL-XPGD46QRK7WJZT7O", id="svl"
        ),
        pytest.param(
            names.firewall_chain("ns1/svc1:p80", "tcp"), "KUBE-FW-XPGD46QRK7WJZT7O", id="fw"
        ),
    ],
)
def test_names_match_upstream(name: str, expected: str) -> None:
    assert name == expected
    assert len(name) <= 28


def test_protocol_and_endpoint_are_part_of_the_key() -> None:
    assert names.service_chain("ns/s:p", "TCP") != names.service_chain("ns/s:p", "UDP")
    assert names.endpoint_chain("ns/s:p", "TCP", "10.0.0.1:80") != names.endpoint_chain(
        "ns/s:p", "TCP", "10.0.0.1:81"
    )


@pytest.mark.parametrize(
    ("chain", "owned"),
    [
        pytest.param("KUBE-SVC-XPGD46QRK7WJZT7O", True, id="svc"),
        pytest.param("KUBE-SEP-SXIVWICOYRO3J4NJ", True, id="sep"),
        pytest.param("KUBE-SERVICES", False, id="top-level"),
        pytest.param("KUBELAB-CNI-MASQ", False, id="other-tool"),
    ],
)
def test_is_per_service(chain: str, owned: bool) -> None:
    assert names.is_per_service(chain) is owned
