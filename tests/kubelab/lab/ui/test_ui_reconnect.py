"""``kubelab lab ui`` through a control-plane restart, without a lab: the page, pointed at a
``kubelab server`` with ``--kubeconfig``, shows a pod created while it is open; when the server
stops it says that the API is unreachable (and keeps the last state it saw); once the server is
back on the same port it says so and a pod created then appears without a reload (its
informers listed and watched again).  Screenshots of each state go to ``ui-screenshots/`` under
pytest's base temporary directory."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.kubelab.lab.ui.uipage import Page, browser, screenshots_dir, ui_command
from tests.servers import Kubectl, free_port, start_all_in_one, stop_server

pytestmark = [pytest.mark.browser, pytest.mark.timeout(180)]


def pod_manifest(name: str) -> str:
    return (
        "apiVersion: v1\nkind: Pod\n"
        f"metadata: {{name: {name}}}\n"
        "spec: {containers: [{name: main, image: busybox}]}\n"
    )


def create_pod(kubectl: Kubectl, name: str) -> None:
    """``kubectl create`` a pod, retried while the ServiceAccount controller has not yet made
    the namespace's default account (a server that just started)."""
    deadline = time.monotonic() + 30
    while True:
        result = kubectl.run("create", "-f", "-", input=pod_manifest(name), check=False)
        if result.returncode == 0:
            return
        assert time.monotonic() < deadline, result.stderr
        time.sleep(0.5)


def shown_pods(page: Page) -> set[str]:
    return {i for i in page.graph_ids() if i.startswith("pod/")}


def api_status(page: Page) -> str:
    return page.text("#api-status")


def test_the_page_says_the_api_is_gone_and_picks_up_again_after_a_restart(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    data_dir = tmp_path / "server"
    data_dir.mkdir()
    port = str(free_port())
    server = start_all_in_one(data_dir, "--secure-port", port)
    kubectl = Kubectl(data_dir / "admin.kubeconfig", tmp_path / "kubectl-cache", "default")
    shots = screenshots_dir(tmp_path_factory)
    try:
        args = ("--name", "kluirst", "--kubeconfig", str(data_dir / "admin.kubeconfig"))
        with ui_command(*args) as url, browser(url, shots) as page:
            page.wait("the API answering", lambda: "API answering" in api_status(page))
            create_pod(kubectl, "before")
            page.wait("pod before", lambda: "pod/default/before" in shown_pods(page))
            page.shot("restart-1-before")

            stop_server(server)
            down = page.wait(
                "the API unreachable",
                lambda: s if (s := api_status(page)).startswith("API unreachable") else None,
            )
            assert "reconnecting" in down
            assert "pod/default/before" in shown_pods(page)  # the last state seen
            page.shot("restart-2-api-down")

            server = start_all_in_one(data_dir, "--secure-port", port)
            page.wait("the API back", lambda: "API answering" in api_status(page), 30)
            create_pod(kubectl, "after")
            page.wait(
                "pod after", lambda: {"pod/default/before", "pod/default/after"} <= shown_pods(page)
            )
            page.shot("restart-3-back")
    finally:
        stop_server(server)
