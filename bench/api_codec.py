"""Typed decoding and validation of a 10,000-pod list beside plain ``json``.

Floor: ``json.loads`` of the same bytes (untyped, unchecked).  Measured: ``codec.decode_json``
into ``ResourceList[Pod]`` followed by ``walk.validate`` of every pod, which is what the API
server does with a list it is handed.  Target: no slower than 3x the floor.  Encoding is
measured the same way against ``json.dumps`` of the plain values.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import kube.api.kinds  # noqa: F401  (registers every kind)
from kube.api import codec, walk
from kube.api.kinds.core_v1.pod import Pod
from kube.api.meta_v1 import ResourceList

PODS = 10_000
ROUNDS = 5


def make_pod(i: int) -> dict[str, Any]:
    """A pod as a Deployment creates it, scheduled and running, as the API returns it."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"web-7d9f8c6b5-{i:05d}",
            "generateName": "web-7d9f8c6b5-",
            "namespace": "default",
            "uid": f"6f1c1b2e-0000-4000-8000-{i:012d}",
            "resourceVersion": str(1000 + i),
            "creationTimestamp": "2026-11-01T10:00:00Z",
            "labels": {"app": "web", "pod-template-hash": "7d9f8c6b5"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "web-7d9f8c6b5",
                    "uid": "0b6f3b9e-1111-4000-8000-000000000001",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "containers": [
                {
                    "name": "nginx",
                    "image": "docker.io/library/nginx:1.27",
                    "ports": [{"containerPort": 80, "protocol": "TCP"}],
                    "resources": {
                        "requests": {"cpu": "100m", "memory": "128Mi"},
                        "limits": {"memory": "256Mi"},
                    },
                    "readinessProbe": {
                        "httpGet": {"path": "/", "port": 80, "scheme": "HTTP"},
                        "periodSeconds": 10,
                        "timeoutSeconds": 1,
                        "successThreshold": 1,
                        "failureThreshold": 3,
                    },
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                    "imagePullPolicy": "IfNotPresent",
                }
            ],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "nodeName": f"node{i % 100}",
            "securityContext": {},
            "schedulerName": "default-scheduler",
            "tolerations": [
                {
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                }
            ],
        },
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-01T10:00:05Z"}
            ],
            "hostIP": "10.240.0.11",
            "podIP": f"10.244.{i // 250}.{i % 250 + 2}",
            "podIPs": [{"ip": f"10.244.{i // 250}.{i % 250 + 2}"}],
            "startTime": "2026-11-01T10:00:01Z",
            "containerStatuses": [
                {
                    "name": "nginx",
                    "ready": True,
                    "restartCount": 0,
                    "started": True,
                    "image": "docker.io/library/nginx:1.27",
                    "imageID": "sha256:0d3f",
                    "containerID": f"containerd://{i:064x}",
                    "state": {"running": {"startedAt": "2026-11-01T10:00:03Z"}},
                }
            ],
            "qosClass": "Burstable",
        },
    }


def best(fn: Callable[[], object]) -> float:
    """The median of ``ROUNDS`` timings of ``fn`` in seconds."""
    times = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> dict[str, float]:
    plain = {
        "apiVersion": "v1",
        "kind": "PodList",
        "metadata": {},
        "items": [make_pod(i) for i in range(PODS)],
    }
    data = json.dumps(plain).encode()
    typed = codec.decode_json(data, ResourceList[Pod]).obj

    def decode_and_validate() -> None:
        pods = codec.decode_json(data, ResourceList[Pod]).obj
        for pod in pods.items:
            if walk.validate(pod):
                raise AssertionError("benchmark pods must be valid")

    results = {
        "json.loads": best(lambda: json.loads(data)),
        "typed decode": best(lambda: codec.decode_json(data, ResourceList[Pod])),
        "typed decode+validate": best(decode_and_validate),
        "json.dumps": best(lambda: json.dumps(plain)),
        "typed encode": best(lambda: codec.encode_json(typed)),
    }
    floor = results["json.loads"]
    print(f"api_codec: {PODS} pods, {len(data) / 1e6:.1f} MB, median of {ROUNDS}")
    for name, seconds in results.items():
        ref = results["json.dumps"] if "encode" in name or "dumps" in name else floor
        print(f"  {name:<24} {seconds * 1000:8.1f} ms   {seconds / ref:5.2f}x")
    ratio = results["typed decode+validate"] / floor
    verdict = "meets" if ratio <= 3 else "MISSES"
    print(f"  decode+validate / json.loads = {ratio:.2f} ({verdict} the 3x target)")
    return results


if __name__ == "__main__":
    main()
