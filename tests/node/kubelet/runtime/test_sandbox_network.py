"""The CNI result in containerd's verbose sandbox status, and the bounded log of sandboxes the
kubelet serves at /debug/sandboxes."""

from __future__ import annotations

import datetime
import json

import pytest

from node.kubelet.runtime.network import Interface, SandboxLog, SandboxRecord, cni_interfaces

# As containerd answered a verbose PodSandboxStatus of a lab pod on kubelab-cni (trimmed).
CONTAINERD_INFO = {
    "info": json.dumps(
        {
            "pid": 4242,
            "cniResult": {
                "Interfaces": {
                    "vethc1f2a3b4d5e": {"IPConfigs": None, "Mac": "9a:1b", "Sandbox": ""},
                    "eth0": {
                        "IPConfigs": [{"IP": "10.244.1.7", "Gateway": "10.244.1.1"}],
                        "Mac": "0e:2c",
                        "Sandbox": "/var/run/netns/cni-5f0e",
                    },
                    "cni0": {"IPConfigs": None, "Mac": "ae:11", "Sandbox": ""},
                    "lo": {
                        "IPConfigs": [{"IP": "127.0.0.1"}, {"IP": "::1"}],
                        "Sandbox": "/var/run/netns/cni-5f0e",
                    },
                },
                "DNS": [{}],
                "Routes": None,
            },
        }
    )
}


def test_interfaces_pod_ends_first_without_loopback() -> None:
    assert cni_interfaces(CONTAINERD_INFO) == (
        Interface("eth0", ("10.244.1.7",), in_pod=True),
        Interface("cni0", (), in_pod=False),
        Interface("vethc1f2a3b4d5e", (), in_pod=False),
    )


@pytest.mark.parametrize(
    "info",
    [
        pytest.param({}, id="not-verbose"),
        pytest.param({"info": "not json"}, id="not-json"),
        pytest.param({"info": "[1, 2]"}, id="not-an-object"),
        pytest.param({"info": json.dumps({"cniResult": None})}, id="host-network"),
        pytest.param({"info": json.dumps({"cniResult": {"Interfaces": 3}})}, id="bad-shape"),
    ],
)
def test_nothing_to_tell_is_no_interface(info: dict[str, str]) -> None:
    assert cni_interfaces(info) == ()


def record(uid: str, sandbox: str) -> SandboxRecord:
    created = datetime.datetime(2026, 11, 29, 12, 0, 1, 250000, tzinfo=datetime.UTC)
    return SandboxRecord(
        "shop", f"pod-{uid}", uid, sandbox, created, cni_interfaces(CONTAINERD_INFO)
    )


def test_the_log_keeps_the_latest_sandbox_of_the_latest_pods() -> None:
    log = SandboxLog(capacity=2)
    for uid, sandbox in (("a", "s1"), ("b", "s2"), ("a", "s3"), ("c", "s4")):
        log.add(record(uid, sandbox))
    assert [(r.uid, r.sandbox_id) for r in log.records()] == [("a", "s3"), ("c", "s4")]
    assert log.records()[0].to_json() == {
        "pod": {"namespace": "shop", "name": "pod-a", "uid": "a"},
        "sandboxID": "s3",
        "created": "2026-11-29T12:00:01.250000Z",
        "interfaces": [
            {"name": "eth0", "ips": ["10.244.1.7"], "inPod": True},
            {"name": "cni0", "ips": [], "inPod": False},
            {"name": "vethc1f2a3b4d5e", "ips": [], "inPod": False},
        ],
    }
