"""The CNI result in containerd's verbose sandbox status, as the AddedInterface event tells it."""

from __future__ import annotations

import json

import pytest

from node.kubelet.runtime.network import Interface, added_interface_message, cni_interfaces

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


def test_interfaces_pod_ends_first() -> None:
    assert cni_interfaces(CONTAINERD_INFO) == [
        Interface("eth0", ("10.244.1.7",), in_pod=True),
        Interface("cni0", (), in_pod=False),
        Interface("vethc1f2a3b4d5e", (), in_pod=False),
    ]
    assert added_interface_message(cni_interfaces(CONTAINERD_INFO)) == (
        "Add eth0 [10.244.1.7] from CNI; on the host cni0, vethc1f2a3b4d5e"
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
def test_nothing_to_tell_is_no_event(info: dict[str, str]) -> None:
    assert added_interface_message(cni_interfaces(info)) is None
