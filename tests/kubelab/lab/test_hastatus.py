"""``kubelab lab status`` for an etcd lab: parsing etcdctl's and the load balancer's output,
and the lines shown, from collected data only."""

from __future__ import annotations

import json

from kube.api.kinds.coordination_v1 import Lease, LeaseSpec
from kube.api.meta_v1 import ObjectMeta
from kubelab.lab.hastatus import (
    Backend,
    HAStatus,
    Holder,
    MemberStatus,
    holder,
    parse_backends,
    parse_member,
    parse_member_names,
    render,
)
from kubelab.lab.topology import Lab, LabSpec

ID_1, ID_2 = 10501334649042878790, 15168875803774599630


def status_json(member: int, leader: int) -> str:
    header = {"cluster_id": 1, "member_id": member, "revision": 9, "raft_term": 3}
    status = {"header": header, "leader": leader, "raftIndex": 42, "raftTerm": 3}
    return json.dumps([{"Endpoint": "10.240.0.2:2379", "Status": status}])


def test_a_member_is_parsed_from_endpoint_status_and_health() -> None:
    names = parse_member_names(
        json.dumps({"members": [{"ID": ID_1, "name": "controlplane1"}, {"ID": ID_2}]})
    )
    health = json.dumps([{"endpoint": "10.240.0.2:2379", "health": True, "took": "1ms"}])
    member = parse_member("cp", "10.240.0.2:2379", status_json(ID_1, ID_1), health, names)
    assert member == MemberStatus(
        "controlplane1", "10.240.0.2:2379", ID_1, True, True, raft_term=3, raft_index=42
    )
    unhealthy = json.dumps([{"endpoint": "x", "health": False, "error": "timeout"}])
    follower = parse_member("cp2", "10.240.0.3:2379", status_json(ID_2, ID_1), unhealthy, names)
    assert (follower.name, follower.leader, follower.healthy) == ("cp2", False, False)


def test_a_member_cut_off_has_no_leader_and_etcdctl_logs_around_its_json() -> None:
    header = {"member_id": ID_2, "raft_term": 2}
    status = {"header": header, "raftIndex": 7, "raftTerm": 2, "errors": ["etcdserver: no leader"]}
    health = (
        '{"level":"warn","msg":"retrying of unary invoker failed"}\n'
        '[{"endpoint":"10.240.0.4:2379","health":false,"error":"context deadline exceeded"}]\n'
        "Error: unhealthy cluster\n"
    )
    member = parse_member(
        "controlplane3", "10.240.0.4:2379", json.dumps([{"Status": status}]), health, {}
    )
    assert (member.name, member.healthy, member.leader, member.raft_index) == (
        "controlplane3",
        False,
        False,
        7,
    )


def test_the_load_balancer_state_file_is_read() -> None:
    state = {"backends": [{"address": "10.240.0.2:6443", "healthy": True}]}
    assert parse_backends(json.dumps(state)) == (Backend("10.240.0.2:6443", True),)


def test_a_lease_holder_is_named_by_the_node_prefixing_its_identity() -> None:
    lab = Lab(LabSpec(name="demo", store="etcd", control_planes=3))

    def lease(identity: str | None) -> Lease:
        spec = LeaseSpec(holder_identity=identity, lease_transitions=2)
        return Lease(metadata=ObjectMeta(name="kube-scheduler"), spec=spec)

    assert holder(lab, lease("controlplane2_0b5e")) == Holder(
        "kube-scheduler", "controlplane2_0b5e", "controlplane2", 2
    )
    assert holder(lab, lease("laptop_0b5e")).node is None
    assert holder(lab, lease(None)).identity is None


def test_status_shows_members_the_balancer_and_holders() -> None:
    status = HAStatus(
        members=(
            MemberStatus("controlplane1", "10.240.0.2:2379", ID_1, True, True, 3, 42),
            MemberStatus("controlplane2", "10.240.0.3:2379", error="connection refused"),
        ),
        backends=(Backend("10.240.0.2:6443", True), Backend("10.240.0.3:6443", False)),
        holders=(
            Holder("kube-scheduler", "controlplane1_ab", "controlplane1", 1),
            Holder("cloud-controller-manager", None, None),
        ),
    )
    assert render(status) == [
        "etcd members:",
        f"  controlplane1  10.240.0.2:2379        id {ID_1:016x} healthy   leader   "
        "term 3 index 42",
        "  controlplane2  10.240.0.3:2379        unreachable: connection refused",
        "load balancer: healthy 10.240.0.2:6443; out: 10.240.0.3:6443",
        "leases (kube-system):",
        "  kube-scheduler            controlplane1 (controlplane1_ab), transitions 1",
        "  cloud-controller-manager  nobody, transitions 0",
    ]
    assert not status.healthy


def test_healthy_means_every_member_healthy_one_leader_and_a_server_in() -> None:
    member = MemberStatus("a", "a:2379", 1, True, False, 3, 4)
    leader = MemberStatus("b", "b:2379", 2, True, True, 3, 4)
    assert HAStatus(members=(member, leader)).healthy
    assert not HAStatus(members=(member, member)).healthy
    assert not HAStatus(members=(leader,), backends=(Backend("x", False),)).healthy
    assert render(HAStatus(leases_error="refused"))[-1] == "  not readable: refused"
