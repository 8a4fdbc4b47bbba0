"""``kubelab lab ui --allow-trace`` on the shared lab, in headless Chromium: the page shows
every namespace and every pod of the lab; a pod created during the test appears without a
reload, within 2 s, on its node's bridge with its veth; a Service lists its endpoints; its proxy
chains on a worker are drawn; a trace from a pod to the Service is drawn hop by hop with the
rules it hit; a pod's story is told on click; a deleted pod disappears.  Screenshots of each
step go to ``ui-screenshots/`` under pytest's base temporary directory."""

from __future__ import annotations

import time

import pytest

from tests.kubelab.lab.labs import UP_TIMEOUT, RunningLab
from tests.kubelab.lab.ui.uipage import Page, browser, screenshots_dir, ui_command
from tests.servers import Kubectl

pytestmark = [
    pytest.mark.lab,
    pytest.mark.privileged,
    pytest.mark.containerd,
    pytest.mark.browser,
    pytest.mark.timeout(UP_TIMEOUT + 120),  # the first test may bring the shared lab up
]


def pod_ids(page: Page) -> set[str]:
    return {i for i in page.graph_ids() if i.startswith("pod/")}


def cluster_pods(kubectl: Kubectl) -> set[str]:
    listed = kubectl.json("get", "pods", "--all-namespaces")["items"]
    return {f"pod/{p['metadata']['namespace']}/{p['metadata']['name']}" for p in listed}


def endpoints_in(page: Page, count: int = 2) -> list[str] | None:
    """The chains drawn for the chosen Service, once ``count`` endpoint chains are among them."""
    chains: list[str] = page.script("return window.kubelabUi.chains.nodes().map(n => n.id())")
    return chains if sum(c.startswith("KUBE-SEP-") for c in chains) == count else None


def pod_ip(kubectl: Kubectl, name: str) -> str:
    ip: str = kubectl.json("get", "pod", name)["status"].get("podIP", "")
    return ip


def test_the_lab_seen_live_in_a_browser(
    shared_lab: RunningLab, lab_kubectl: Kubectl, tmp_path_factory: pytest.TempPathFactory
) -> None:
    namespace = lab_kubectl.namespace
    lab_kubectl.run("create", "deployment", "web", "--image=nginx", "--replicas=2")
    lab_kubectl.run("expose", "deployment", "web", "--port", "80")
    shots = screenshots_dir(tmp_path_factory)
    with (
        ui_command("--name", shared_lab.name, "--allow-trace") as url,
        browser(url, shots) as page,
    ):
        page.wait("the API answering", lambda: "API answering" in page.text("#api-status"))
        lab_nodes = {f"node/{n.name}" for n in shared_lab.lab.nodes}
        page.wait("every namespace", lambda: lab_nodes <= page.graph_ids())
        present = cluster_pods(shared_lab.kubectl)
        page.wait("every pod", lambda: present <= pod_ids(page))
        bridged = {i.split("/bridge/")[0] for i in page.graph_ids() if "/bridge/" in i}
        assert bridged == {
            f"node/{n.name}" for n in (*shared_lab.lab.kubernetes_nodes, shared_lab.lab.router)
        }
        page.shot("lab-1-topology")

        lab_kubectl.run("run", "shell", "--image=busybox", "--", "sleep", "3600")
        created = time.monotonic()
        shell = f"pod/{namespace}/shell"
        page.wait("the new pod", lambda: shell in pod_ids(page), timeout=2.0)
        assert time.monotonic() - created <= 2.0
        lab_kubectl.run("wait", "--for=condition=Ready", "pod/shell", "--timeout=60s")
        ip = pod_ip(lab_kubectl, "shell")
        page.wait(
            "the new pod Running with its IP",
            lambda: ip in page.script(f"return window.kubelabUi.cy.$id('{shell}').data('label')"),
        )
        veth = page.wait(
            "the new pod's veth on its node's bridge",
            lambda: page.script(
                f"const e = window.kubelabUi.cy.$id('veth/{shell}'); "
                "return e.length ? e.data('label') : ''"
            ),
        )
        assert veth.startswith("veth") and veth.endswith("⇄ eth0")
        page.shot("lab-2-new-pod")

        lab_kubectl.run("rollout", "status", "deployment/web", "--timeout=60s")
        web_ips = {
            p["status"]["podIP"] for p in lab_kubectl.json("get", "pods", "-l", "app=web")["items"]
        }
        row = f'#services tr[data-service="{namespace}/web"]'
        page.wait("the Service's endpoints", lambda: all(i in page.text(row) for i in web_ips))

        page.script("document.getElementById('chain-node').value = 'node1'")
        page.script(f"document.querySelector('{row} button').click()")
        chains = page.wait(
            "the Service's chains on node1, both endpoints in", lambda: endpoints_in(page)
        )
        assert "KUBE-SERVICES" in chains
        assert any(c.startswith("KUBE-SVC-") for c in chains)
        page.shot("lab-3-service-chains")

        page.script(
            "document.getElementById('trace-source').value = arguments[0];"
            "document.getElementById('trace-destination').value = arguments[1];"
            "document.querySelector('#trace-form button').click()",
            f"pod/{namespace}/shell",
            f"svc/{namespace}/web:80",
        )
        verdict = page.wait("the trace", lambda: page.text("#trace-result .verdict"), timeout=30.0)
        assert verdict == "answered", page.text("#trace-result")
        drawn = page.script("return window.kubelabUi.cy.$('.trace').length")
        assert drawn >= 1
        hops = page.script("return window.kubelabUi.cy.$('.hop').map(e => e.id())")
        assert shell in hops
        assert "DNAT" in page.text("#trace-hops") or "dnat" in page.text("#trace-hops")
        page.shot("lab-4-trace")

        page.script(f"window.kubelabUi.cy.$id('{shell}').emit('tap')")
        story = page.wait("the pod's story", lambda: page.text("#story ol"), timeout=15.0)
        assert "Scheduled" in story and "Started" in story
        page.shot("lab-5-story")

        lab_kubectl.run("delete", "pod", "shell", "--wait=false")
        page.wait("the deleted pod gone", lambda: shell not in pod_ids(page), timeout=60.0)
        page.shot("lab-6-pod-gone")
