"""The story told from recorded objects and events alone (no server): a Deployment's rollout
with a Service on two nodes, and a pod whose image is missing."""

from __future__ import annotations

import datetime
from typing import Any

from kube.api.kinds.apps_v1 import Deployment, ReplicaSet, ReplicaSetSpec
from kube.api.kinds.core_v1.cluster import Event, EventSource
from kube.api.kinds.core_v1.pod import Pod, PodCondition, PodSpec, PodStatus
from kube.api.kinds.core_v1.service import Service, ServiceSpec
from kube.api.kinds.core_v1.volume import ObjectReference
from kube.api.kinds.discovery_v1 import Endpoint, EndpointConditions, EndpointSlice
from kube.api.meta_v1 import ManagedFieldsEntry, ObjectMeta, OwnerReference
from kube.api.meta_v1 import Resource as ApiResource
from kubelab.story.chain import Evidence, explain_summary, tell
from kubelab.story.command import render

T0 = datetime.datetime(2026, 11, 29, 10, 0, 0, tzinfo=datetime.UTC)
NS = "shop"


def at(seconds: float) -> datetime.datetime:
    return T0 + datetime.timedelta(seconds=seconds)


def meta(name: str, seconds: float, owner: ApiResource | None = None, **more: Any) -> ObjectMeta:
    owners = None
    if owner is not None:
        kind = type(owner).kind_info.kind
        owners = [
            OwnerReference(
                api_version="v1",
                kind=kind,
                name=owner.metadata.name,
                uid=owner.metadata.uid,
                controller=True,
            )
        ]
    return ObjectMeta(
        name=name,
        namespace=NS,
        uid=f"uid-{name}-{seconds}",
        creation_timestamp=at(seconds),
        owner_references=owners,
        managed_fields=[ManagedFieldsEntry(manager="kube-controller-manager", time=at(seconds))],
        **more,
    )


def event(
    about: ApiResource, reason: str, message: str, seconds: float, component: str, host: str = ""
) -> Event:
    return Event(
        metadata=ObjectMeta(name=f"{about.metadata.name}.{reason}", namespace=NS),
        involved_object=ObjectReference(
            kind=type(about).kind_info.kind,
            name=about.metadata.name,
            namespace=NS,
            uid=about.metadata.uid,
        ),
        reason=reason,
        message=message,
        source=EventSource(component=component, host=host or None),
        first_timestamp=at(seconds).replace(microsecond=0),
        type="Normal",
    )


def scheduled(pod: Pod, node: str, seconds: float) -> Event:
    made = event(
        pod, "Scheduled", f"Successfully assigned {NS}/{pod.metadata.name} to {node}", 0, ""
    )
    made.first_timestamp, made.source = None, None
    made.event_time = at(seconds).isoformat().replace("+00:00", "Z")
    made.reporting_component, made.reporting_instance = "default-scheduler", "default-scheduler-cp"
    return made


def running_pod(name: str, owner: ReplicaSet, node: str, ip: str, seconds: float) -> Pod:
    ready = PodCondition(type="Ready", status="True", last_transition_time=at(seconds + 2))
    return Pod(
        metadata=meta(name, seconds, owner, labels={"app": "web"}),
        spec=PodSpec(node_name=node),
        status=PodStatus(pod_ip=ip, conditions=[ready]),
    )


def rollout() -> Evidence:
    deployment = Deployment(metadata=meta("web", 0, generation=1))
    replicaset = ReplicaSet(
        metadata=meta("web-6d8", 0.2, deployment), spec=ReplicaSetSpec(replicas=2)
    )
    pods = [
        running_pod("web-6d8-a", replicaset, "worker-1", "10.244.1.5", 0.3),
        running_pod("web-6d8-b", replicaset, "worker-2", "10.244.2.5", 0.3),
    ]
    service = Service(metadata=meta("web", 4), spec=ServiceSpec(selector={"app": "web"}))
    slice_ = EndpointSlice(
        metadata=meta("web-x1", 4, labels={"kubernetes.io/service-name": "web"}),
        address_type="IPv4",
        endpoints=[
            Endpoint(
                addresses=[p.status.pod_ip or ""],
                node_name=p.spec.node_name if p.spec else None,
                conditions=EndpointConditions(ready=True),
                target_ref=ObjectReference(kind="Pod", name=p.metadata.name, uid=p.metadata.uid),
            )
            for p in pods
            if p.status is not None
        ],
    )
    assert slice_.metadata.managed_fields is not None
    slice_.metadata.managed_fields[0].time = at(5)  # the endpoints were added at 5 s
    events = [
        event(
            deployment,
            "ScalingReplicaSet",
            "Scaled up replica set web-6d8 from 0 to 2",
            0.2,
            "deployment-controller",
        ),
        event(
            replicaset, "SuccessfulCreate", "Created pod: web-6d8-a", 0.3, "replicaset-controller"
        ),
        event(
            replicaset, "SuccessfulCreate", "Created pod: web-6d8-b", 0.3, "replicaset-controller"
        ),
    ]
    for pod in pods:
        node = pod.spec.node_name if pod.spec else ""
        ip = pod.status.pod_ip if pod.status else ""
        events += [
            scheduled(pod, node or "", 0.5),
            event(
                pod, "SandboxCreated", "Created pod sandbox 0123456789ab", 1, "kubelet", node or ""
            ),
            event(
                pod,
                "AddedInterface",
                f"Add eth0 [{ip}] from CNI; on the host veth1",
                1,
                "kubelet",
                node or "",
            ),
            event(pod, "Pulling", 'Pulling image "nginx"', 1, "kubelet", node or ""),
            event(pod, "Pulled", 'Successfully pulled image "nginx"', 1, "kubelet", node or ""),
            event(pod, "Created", "Created container: nginx", 1, "kubelet", node or ""),
            event(pod, "Started", "Started container nginx", 1, "kubelet", node or ""),
        ]
    for node in ("worker-1", "worker-2"):
        events.append(
            event(
                service,
                "EndpointsSynced",
                "port 80/TCP → 10.244.1.5:80, 10.244.2.5:80",
                5,
                "kube-proxy",
                node,
            )
        )
    events.append(
        event(
            service,
            "Answered",
            "Answered web.shop.svc.cluster.local. A 10.96.0.20",
            7,
            "kubelab-dns",
            "kube-dns-1",
        )
    )
    audit = [
        {
            "kind": "Event",
            "stage": "ResponseComplete",
            "verb": "create",
            "user": {"username": "alice"},
            "userAgent": "kubectl/v1.36.4",
            "sourceIPs": ["10.240.0.1"],
            "requestURI": f"/apis/apps/v1/namespaces/{NS}/deployments",
            "requestReceivedTimestamp": "2026-11-29T09:59:59.950000Z",
            "objectRef": {"resource": "deployments", "namespace": NS, "name": "web"},
            "responseStatus": {"code": 201},
        }
    ]
    objects: list[ApiResource] = [deployment, replicaset, *pods, service, slice_]
    return Evidence(objects=objects, events=events, audit=audit)


def test_a_rollout_is_told_in_the_chapters_order() -> None:
    steps = tell(rollout())
    told = [(s.step, s.object) for s in steps]
    a, b = "Pod/web-6d8-a", "Pod/web-6d8-b"
    assert told == [
        ("Created Deployment", "Deployment/web"),
        ("ScalingReplicaSet", "Deployment/web"),
        ("Created ReplicaSet", "ReplicaSet/web-6d8"),
        ("SuccessfulCreate", "ReplicaSet/web-6d8"),
        ("SuccessfulCreate", "ReplicaSet/web-6d8"),
        ("Created Pod", a),
        ("Created Pod", b),
        ("Scheduled", a),
        ("Scheduled", b),
        ("SandboxCreated", a),
        ("SandboxCreated", b),
        ("AddedInterface", a),
        ("AddedInterface", b),
        ("Pulling", a),
        ("Pulling", b),
        ("Pulled", a),
        ("Pulled", b),
        ("Created", a),
        ("Created", b),
        ("Started", a),
        ("Started", b),
        ("Ready", a),
        ("Ready", b),
        ("Created Service", "Service/web"),
        ("Created EndpointSlice", "EndpointSlice/web-x1"),
        ("Updated EndpointSlice", "EndpointSlice/web-x1"),
        ("EndpointsSynced", "Service/web"),
        ("EndpointsSynced", "Service/web"),
        ("Answered", "Service/web"),
    ]
    first = steps[0]
    assert (first.actor, first.time) == (
        "alice",
        datetime.datetime.fromisoformat("2026-11-29T09:59:59.95Z"),
    )
    assert first.detail.startswith(
        "create /apis/apps/v1/namespaces/shop/deployments (kubectl/v1.36.4"
    )
    by_step = {(s.step, s.object, s.actor): s for s in steps}
    assert by_step[
        ("Created ReplicaSet", "ReplicaSet/web-6d8", "kube-controller-manager")
    ].cause == ("Deployment/web (ownerReference)")
    assert (
        by_step[("Scheduled", a, "default-scheduler-cp")].cause
        == f"{a} unbound (spec.nodeName empty)"
    )
    assert by_step[("SandboxCreated", a, "kubelet worker-1")].cause == "binding to node worker-1"
    assert by_step[("AddedInterface", b, "kubelet worker-2")].detail.startswith(
        "Add eth0 [10.244.2.5]"
    )
    assert by_step[("Ready", b, "kubelet worker-2")].detail == "IP 10.244.2.5"
    updated = by_step[("Updated EndpointSlice", "EndpointSlice/web-x1", "kube-controller-manager")]
    assert updated.detail == "10.244.1.5 on worker-1 (ready); 10.244.2.5 on worker-2 (ready)"
    assert updated.cause == (
        "Service/web (kubernetes.io/service-name); Pod/web-6d8-a, web-6d8-b (targetRef)"
    )
    syncs = [s for s in steps if s.step == "EndpointsSynced"]
    assert {s.actor for s in syncs} == {"kube-proxy worker-1", "kube-proxy worker-2"}
    assert {s.cause for s in syncs} == {"EndpointSlice/web-x1 (kubernetes.io/service-name)"}
    assert steps[-1].cause == "a DNS query for Service/web"
    table = render(steps).splitlines()
    assert table[0].split() == ["TIME", "ACTOR", "STEP", "OBJECT", "DETAIL", "CAUSE"]
    assert table[1].startswith("09:59:59.950  alice")
    assert len(table) == len(steps) + 1


def test_a_missing_image_and_an_unplaceable_pod() -> None:
    stuck = Pod(metadata=meta("stuck", 0), spec=PodSpec())
    missing = Pod(metadata=meta("missing", 0), spec=PodSpec(node_name="worker-1"))
    failed = event(
        stuck,
        "FailedScheduling",
        "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector.",
        1,
        "",
    )
    failed.count = 4
    events = [
        failed,
        scheduled(missing, "worker-1", 0.1),
        event(
            missing, "SandboxCreated", "Created pod sandbox 0123456789ab", 1, "kubelet", "worker-1"
        ),
        event(missing, "Pulling", 'Pulling image "nginx:0.0.1"', 1, "kubelet", "worker-1"),
        event(missing, "Failed", "Failed to pull image ... not found", 1, "kubelet", "worker-1"),
        event(missing, "Failed", "Error: ErrImagePull", 1, "kubelet", "worker-1"),
        event(missing, "BackOff", 'Back-off pulling image "nginx:0.0.1"', 2, "kubelet", "worker-1"),
    ]
    explain = {
        "node": "",
        "nodesTotal": 3,
        "filter": {"w1": {"plugin": "NodeAffinity"}, "w2": {"plugin": "NodeAffinity"}, "w3": None},
        "total": {},
        "preFilter": None,
    }
    evidence = Evidence(objects=[stuck, missing], events=events, explains={f"{NS}/stuck": explain})
    steps = tell(evidence)
    assert [(s.step, s.object) for s in steps] == [
        ("Created Pod", "Pod/stuck"),
        ("Created Pod", "Pod/missing"),
        ("Scheduled", "Pod/missing"),
        ("FailedScheduling", "Pod/stuck"),
        ("SandboxCreated", "Pod/missing"),
        ("Pulling", "Pod/missing"),
        ("Failed", "Pod/missing"),
        ("Failed", "Pod/missing"),
        ("BackOff", "Pod/missing"),
    ]
    (unplaced,) = [s for s in steps if s.step == "FailedScheduling"]
    assert unplaced.detail.endswith("selector. (x4); explain: 3 of 3 nodes examined, 1 feasible")
    assert "Ready" not in {s.step for s in steps}


def test_explain_summary_names_the_winner_and_a_prefilter() -> None:
    doc = {"node": "w2", "nodesTotal": 5, "filter": {"w1": None, "w2": None}, "total": {"w2": 300}}
    assert explain_summary(doc) == "2 of 5 nodes examined, 2 feasible, w2 scored 300"
    pre = {"nodesTotal": 5, "filter": {}, "preFilter": {"plugin": "NodePorts", "reason": "busy"}}
    assert explain_summary(pre) == "0 of 5 nodes examined, 0 feasible, PreFilter NodePorts: busy"
    assert explain_summary(None) == ""
    alone = {"node": "w1", "nodesTotal": 2, "filter": {"w1": None, "w2": {"plugin": "Taint"}}}
    assert (
        explain_summary(alone) == "2 of 2 nodes examined, 1 feasible, w1 the only one (not scored)"
    )
