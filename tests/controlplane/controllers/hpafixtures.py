"""Fakes for the horizontal pod autoscaler's tests: metrics a test sets, pods with CPU
requests, and a scalable target the fake API serves (discovery and the scale subresource)."""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import Any

from controlplane.controllers.hpametrics import MetricsError, PodMetric, PodMetricsInfo
from kube.api import codec
from kube.api.kinds.autoscaling_v1 import Scale, ScaleSpec, ScaleStatus
from kube.api.kinds.autoscaling_v2 import CrossVersionObjectReference
from kube.api.kinds.core_v1.pod import Container, Pod, PodStatus, ResourceRequirements
from kube.api.labels import Selector
from kube.api.meta_v1 import ObjectMeta
from tests import builders
from tests.fakeapi import Action, FakeApi, RawRequest, api_error

NAMESPACE = "team"
LABELS = {"app": "web"}
WINDOW = 30.0


@dataclass
class FakeMetrics:
    """A ``MetricsClient`` whose values the test sets (thousandths), read at ``timestamp``."""

    timestamp: datetime.datetime
    resources: dict[str, dict[str, int]] = field(default_factory=dict)
    """Resource -> pod name -> value."""
    pods: dict[str, dict[str, int]] = field(default_factory=dict)
    """Custom metric -> pod name -> value."""
    objects: dict[str, int] = field(default_factory=dict)
    external: dict[str, list[int]] = field(default_factory=dict)
    error: str | None = None
    asked: list[tuple[str, str]] = field(default_factory=list)

    def _answer(self, values: dict[str, int], selector: Selector) -> PodMetricsInfo:
        if self.error is not None:
            raise MetricsError(self.error)
        return {name: PodMetric(value, self.timestamp, WINDOW) for name, value in values.items()}

    async def resource_metric(
        self, resource: str, namespace: str, selector: Selector, container: str
    ) -> tuple[PodMetricsInfo, datetime.datetime]:
        self.asked.append((resource, container))
        return self._answer(self.resources.get(resource, {}), selector), self.timestamp

    async def raw_metric(
        self, name: str, namespace: str, selector: Selector, metric_selector: Selector
    ) -> tuple[PodMetricsInfo, datetime.datetime]:
        self.asked.append((name, str(metric_selector)))
        return self._answer(self.pods.get(name, {}), selector), self.timestamp

    async def object_metric(
        self,
        name: str,
        namespace: str,
        described: CrossVersionObjectReference,
        metric_selector: Selector,
    ) -> tuple[int, datetime.datetime]:
        self.asked.append((name, f"{described.kind}/{described.name}"))
        if self.error is not None or name not in self.objects:
            raise MetricsError(self.error or f"no metric {name}")
        return self.objects[name], self.timestamp

    async def external_metric(
        self, name: str, namespace: str, selector: Selector
    ) -> tuple[list[int], datetime.datetime]:
        self.asked.append((name, str(selector)))
        if self.error is not None or name not in self.external:
            raise MetricsError(self.error or f"no metric {name}")
        return self.external[name], self.timestamp


def pod(
    name: str,
    *,
    cpu: str = "1",
    phase: str = "Running",
    ready: bool = True,
    started: datetime.datetime | None = None,
    ready_since: datetime.datetime | None = None,
) -> Pod:
    """A pod of the target with one container requesting ``cpu``, started and Ready (since
    ``ready_since``) long before the tests' clock starts unless told otherwise."""
    long_ago = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)
    made = builders.pod(
        name,
        NAMESPACE,
        labels=LABELS,
        containers=[
            Container(
                name="app",
                image="php-apache",
                resources=ResourceRequirements(requests={"cpu": cpu}),
            )
        ],
        phase=phase,
        ready=ready,
        ready_since=ready_since or long_ago,
    )
    assert made.status is not None
    made.status = PodStatus(
        phase=made.status.phase,
        conditions=made.status.conditions,
        start_time=started or long_ago,
    )
    return made


@dataclass
class ScaleTarget:
    """A Deployment as the autoscaler sees it through the fake API: ``apps/v1`` discovery and
    ``deployments/NAME/scale`` (GET, and PUT, which sets ``replicas``; ``refuse`` makes the
    next PUTs fail)."""

    replicas: int
    selector: str = "app=web"
    name: str = "web"
    puts: list[int] = field(default_factory=list)
    refuse: str | None = None
    missing: bool = False

    @property
    def path(self) -> str:
        return f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{self.name}/scale"

    def serve(self, client: FakeApi) -> None:
        client.react("request", "*", self._react)

    def _react(self, action: Action) -> bytes | None:
        raw: RawRequest = action.obj
        if raw.method == "GET" and raw.path == "/apis/apps/v1":
            return codec.encode_json(
                {
                    "kind": "APIResourceList",
                    "groupVersion": "apps/v1",
                    "resources": [
                        {"name": "deployments", "namespaced": True, "kind": "Deployment"},
                        {"name": "deployments/scale", "namespaced": True, "kind": "Scale"},
                    ],
                }
            )
        if raw.path != self.path:
            return None
        if self.missing:
            raise api_error(404, "NotFound", f'deployments.apps "{self.name}" not found')
        if raw.method == "PUT":
            if self.refuse is not None:
                raise api_error(409, "Conflict", self.refuse)
            sent = codec.decode_json(raw.body or b"{}", Scale).obj
            assert sent.spec is not None and sent.spec.replicas is not None
            self.replicas = sent.spec.replicas
            self.puts.append(self.replicas)
        return codec.encode_json(self.scale().typed())

    def scale(self) -> Scale:
        return Scale(
            metadata=ObjectMeta(name=self.name, namespace=NAMESPACE, resource_version="7"),
            spec=ScaleSpec(replicas=self.replicas),
            status=ScaleStatus(replicas=self.replicas, selector=self.selector),
        )


def condition(hpa_status: Any, type: str) -> tuple[str, str, str]:
    """(status, reason, message) of one condition of an HPA's status."""
    found = next(c for c in hpa_status.conditions or [] if c.type == type)
    return found.status, found.reason, found.message
