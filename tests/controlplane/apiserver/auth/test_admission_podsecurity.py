"""PodSecurity through the API: namespace labels choose the level and mode; enforce refuses
with upstream's message, warn answers with ``Warning`` headers that kubectl prints."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kube.api.kinds.core_v1.cluster import Namespace
from kube.api.kinds.core_v1.pod import (
    Capabilities,
    Container,
    Pod,
    PodSecurityContext,
    SeccompProfile,
    SecurityContext,
    Sysctl,
)
from kube.client.errors import ApiError
from kube.client.rest import Client
from tests import builders
from tests.controlplane.apiserver.admission_servers import BACKENDS, serve
from tests.servers import Kubectl, ServerProcess


@pytest.fixture(scope="module", params=BACKENDS)
def apiserver(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    yield from serve(
        request.param, tmp_path_factory, "--disable-admission-plugins", "ServiceAccount"
    )


async def label(client: Client, namespace: str, **labels: str) -> None:
    current = await client.get(Namespace, namespace)
    current.metadata.labels = {
        **(current.metadata.labels or {}),
        **{f"pod-security.kubernetes.io/{k.replace('_', '-')}": v for k, v in labels.items()},
    }
    await client.update(current)


def pod(namespace: str, name: str, security: SecurityContext | None = None, **spec: Any) -> Pod:
    app = Container(name="app", image="app", security_context=security)
    return builders.pod(name, namespace, containers=[app], **spec)


RESTRICTED_OK = SecurityContext(
    allow_privilege_escalation=False,
    run_as_non_root=True,
    capabilities=Capabilities(drop=["ALL"], add=["NET_BIND_SERVICE"]),
    seccomp_profile=SeccompProfile(type="RuntimeDefault"),
)


async def test_restricted_refuses_a_privileged_pod(client: Client, namespace: str) -> None:
    await label(client, namespace, enforce="restricted")
    with pytest.raises(ApiError) as refused:
        await client.create(pod(namespace, "root", SecurityContext(privileged=True)))
    assert refused.value.code == 403
    assert refused.value.message == (
        'pods "root" is forbidden: violates PodSecurity "restricted:latest": '
        'privileged (container "app" must not set securityContext.privileged=true), '
        'allowPrivilegeEscalation != false (container "app" must set '
        "securityContext.allowPrivilegeEscalation=false), "
        'unrestricted capabilities (container "app" must set '
        'securityContext.capabilities.drop=["ALL"]), '
        'runAsNonRoot != true (pod or container "app" must set '
        "securityContext.runAsNonRoot=true), "
        'seccompProfile (pod or container "app" must set securityContext.seccompProfile.type '
        'to "RuntimeDefault" or "Localhost")'
    )
    created = await client.create(pod(namespace, "fine", RESTRICTED_OK))
    assert created.metadata.name == "fine"


async def test_baseline_refuses_host_namespaces_and_paths(client: Client, namespace: str) -> None:
    await label(client, namespace, enforce="baseline", enforce_version="v1.31")
    with pytest.raises(ApiError) as refused:
        await client.create(
            pod(
                namespace,
                "host",
                SecurityContext(capabilities=Capabilities(add=["NET_ADMIN", "CHOWN"])),
                host_network=True,
                host_pid=True,
                security_context=PodSecurityContext(
                    sysctls=[Sysctl(name="kernel.msgmax", value="1")]
                ),
            )
        )
    assert refused.value.message == (
        'pods "host" is forbidden: violates PodSecurity "baseline:v1.31": '
        'non-default capabilities (container "app" must not include "NET_ADMIN" in '
        "securityContext.capabilities.add), host namespaces (hostNetwork=true, hostPID=true), "
        "forbidden sysctls (kernel.msgmax)"
    )
    # Baseline allows what only restricted forbids: a root container, default capabilities.
    await client.create(pod(namespace, "plain"))


async def test_warn_mode_warns_and_admits(
    apiserver: ServerProcess, client: Client, namespace: str, tmp_path: Path
) -> None:
    await label(client, namespace, enforce="baseline", warn="restricted")
    kubectl = Kubectl(apiserver.kubeconfig, tmp_path / "cache", namespace)
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "warned"},
        "spec": {"containers": [{"name": "app", "image": "app"}]},
    }
    result = kubectl.run("create", "-f", "-", input=json.dumps(manifest))
    assert (
        'Warning: would violate PodSecurity "restricted:latest": allowPrivilegeEscalation != '
        'false (container "app" must set securityContext.allowPrivilegeEscalation=false)'
    ) in result.stderr
    assert "pod/warned created" in result.stdout

    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "hostNetwork": True,
                    "containers": [{"name": "app", "image": "app"}],
                },
            },
        },
    }
    # Enforce never refuses a workload, nor checks it: its template is warned about, at the
    # warn level (as upstream: a Deployment's template is not its pods).
    result = kubectl.run("create", "-f", "-", input=json.dumps(deployment))
    assert (
        'Warning: would violate PodSecurity "restricted:latest": host namespaces (hostNetwork=true)'
        in result.stderr
    )
    assert "baseline:latest" not in result.stderr
    assert "deployment.apps/web created" in result.stdout


async def test_unlabelled_namespaces_are_privileged(client: Client, namespace: str) -> None:
    created = await client.create(pod(namespace, "root", SecurityContext(privileged=True)))
    assert created.metadata.name == "root"


async def test_tightening_a_namespace_names_the_pods_it_would_refuse(
    apiserver: ServerProcess, client: Client, namespace: str, tmp_path: Path
) -> None:
    for name in ("root-a", "root-b"):
        await client.create(pod(namespace, name, SecurityContext(privileged=True)))
    await client.create(pod(namespace, "host", host_network=True))
    await client.create(pod(namespace, "plain"))
    kubectl = Kubectl(apiserver.kubeconfig, tmp_path / "cache", namespace)
    enforce = "pod-security.kubernetes.io/enforce"
    # The pods reach admission through a watch cache: label until all three are named.
    for _ in range(50):
        result = kubectl.run(
            "label", "namespace", namespace, f"{enforce}=baseline", namespaced=False
        )
        if "(and 1 other pod)" in result.stderr and "host:" in result.stderr:
            break
        kubectl.run("label", "namespace", namespace, f"{enforce}-", namespaced=False)
    warnings = [line for line in result.stderr.splitlines() if line.startswith("Warning:")]
    assert warnings == [
        f'Warning: existing pods in namespace "{namespace}" violate the new PodSecurity enforce '
        'level "baseline:latest"',
        "Warning: host: host namespaces",
        "Warning: root-a (and 1 other pod): privileged",
    ]
    assert (await client.get(Pod, "root-a", namespace)).metadata.name == "root-a"
