"""The Ingress add-on end to end, on the shared lab: curl from the lab's client namespace at the
address the lab cloud gave the controller's LoadBalancer Service.

In the test's namespace: two echoserver Deployments (``apple``, ``banana``) and a busybox httpd
whose CGI script answers slowly (``slow``), each behind a Service; a TLS Secret made with
``kubectl create secret tls``; one Ingress without a class (the lab's ``kubelab`` class is the
default) with hosts, a wildcard host, Prefix and Exact paths, TLS for one host and a path to a
Service that does not exist.  Then: the Ingress's status shows the load balancer's address; a
host and path matrix answered by the right pods (an echoserver names its pod); TLS with SNI
(``curl --resolve`` and the test's CA, so the certificate is checked for the name); 404 and
503 of the controller's own; a bad Ingress refused by the API with 422; a long response that
finishes while the Ingress is changed under it; and the controller never restarted.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from kube.pki import CertificateAuthority
from kubelab.lab import addons
from kubelab.lab.images import ECHOSERVER_IMAGE, ECHOSERVER_PORT
from tests.kubelab.lab.labs import LAB_COMMAND, UP_TIMEOUT, RunningLab
from tests.servers import REPO, Kubectl

pytestmark = [
    pytest.mark.lab,
    pytest.mark.privileged,
    pytest.mark.containerd,
    pytest.mark.timeout(UP_TIMEOUT + 120),
]

SLOW_SECONDS = 6
SLOW_CGI = (
    "#!/bin/sh\n"
    'printf "Content-Type: text/plain\\r\\n\\r\\n"\n'
    f"for i in $(seq 1 {SLOW_SECONDS}); do echo part $i; sleep 1; done\n"
)
SLOW_SERVER = (
    "mkdir -p /www/cgi-bin && printf '%s' \"$CGI\" > /www/cgi-bin/slow && "
    "chmod +x /www/cgi-bin/slow && exec httpd -f -p 8080 -h /www"
)
"""busybox httpd with SLOW_CGI (from the environment) as /cgi-bin/slow."""


def deployment(name: str, image: str, port: int, command: list[str] | None = None) -> Any:
    container: dict[str, Any] = {"name": name, "image": image, "ports": [{"containerPort": port}]}
    if command:
        container["command"] = command
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [container], "terminationGracePeriodSeconds": 1},
            },
        },
    }


def service(name: str, port: int) -> Any:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name},
        "spec": {
            "selector": {"app": name},
            "ports": [{"name": "http", "port": 80, "targetPort": port}],
        },
    }


def path(p: str, path_type: str, name: str) -> dict[str, Any]:
    return {
        "path": p,
        "pathType": path_type,
        "backend": {"service": {"name": name, "port": {"name": "http"}}},
    }


def ingress(slow_backend: str) -> Any:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": "fruit"},
        "spec": {
            "tls": [{"hosts": ["secure.lab.test"], "secretName": "secure-tls"}],
            "rules": [
                {
                    "host": "foo.lab.test",
                    "http": {
                        "paths": [
                            path("/", "Prefix", "apple"),
                            path("/banana", "Prefix", "banana"),
                            path("/exact", "Exact", "banana"),
                            path("/cgi-bin", "Prefix", slow_backend),
                            path("/gone", "Prefix", "no-such-service"),
                        ]
                    },
                },
                {"host": "*.wild.lab.test", "http": {"paths": [path("/", "Prefix", "banana")]}},
                {"host": "secure.lab.test", "http": {"paths": [path("/", "Prefix", "apple")]}},
            ],
        },
    }


def apply(kubectl: Kubectl, *objects: Any) -> None:
    kubectl.run(
        "apply",
        "-f",
        "-",
        input=json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)}),
    )


def curls(lab: RunningLab, scratch: Path, *calls: list[str]) -> list[tuple[int, str]]:
    """curl in the client namespace, one call per argument list, all in one ``lab exec``: each
    call's exit code and ``STATUS FIRST-LINE`` (an echoserver's first line is ``Hostname:
    POD``)."""
    body = scratch / "body"
    script = "".join(
        f": > {body}; code=$(curl -s -m 10 -o {body} -w '%{{http_code}}' {shlex.join(args)}); "
        f'echo "$? $code $(head -n1 {body})"\n'
        for args in calls
    )
    done = lab.exec("client", "sh", "-c", script, timeout=30 + 10 * len(calls))
    assert done.returncode == 0, done.stderr
    answers = []
    for line in done.stdout.splitlines():
        code, _, answer = line.partition(" ")
        answers.append((int(code), answer))
    assert len(answers) == len(calls), done.stdout
    return answers


def load_balancer_ip(kubectl: Kubectl) -> str | None:
    """The address the lab cloud gave the controller's LoadBalancer Service, once it has."""
    got = kubectl.json("-n", addons.ADDON_NAMESPACE, "get", "service", addons.INGRESS_NAME)
    assert got["spec"]["type"] == "LoadBalancer"
    points = got.get("status", {}).get("loadBalancer", {}).get("ingress") or [{}]
    ip: str | None = points[0].get("ip")
    return ip


def eventually(probe: Any, want: Any, seconds: float = 60.0) -> Any:
    deadline = time.monotonic() + seconds
    while not want(got := probe()):
        assert time.monotonic() < deadline, f"still {got!r}"
        time.sleep(0.5)
    return got


def test_ingress_routes_hosts_paths_and_tls_and_survives_changes(
    shared_lab: RunningLab, lab_kubectl: Kubectl, tmp_path: Path
) -> None:
    lab, kubectl = shared_lab, lab_kubectl
    system = lab.kubectl
    controller = system.json(
        "-n",
        addons.ADDON_NAMESPACE,
        "get",
        "pods",
        "-l",
        f"app.kubernetes.io/name={addons.INGRESS_NAME}",
    )
    (pod,) = controller["items"]
    address = eventually(lambda: load_balancer_ip(system), bool)

    slow = ["sh", "-c", SLOW_SERVER]
    slow_deployment = deployment("slow", "busybox", 8080, slow)
    slow_deployment["spec"]["template"]["spec"]["containers"][0]["env"] = [
        {"name": "CGI", "value": SLOW_CGI}
    ]
    apply(
        kubectl,
        deployment("apple", ECHOSERVER_IMAGE, ECHOSERVER_PORT),
        deployment("banana", ECHOSERVER_IMAGE, ECHOSERVER_PORT),
        slow_deployment,
        service("apple", ECHOSERVER_PORT),
        service("banana", ECHOSERVER_PORT),
        service("slow", 8080),
    )
    ca = CertificateAuthority.create("ingress-test-ca")
    ca.pair.write(tmp_path, "ca")
    ca.issue("secure.lab.test", server=True, dns_names=["secure.lab.test"]).write(
        tmp_path, "secure"
    )
    kubectl.run(
        "create",
        "secret",
        "tls",
        "secure-tls",
        f"--cert={tmp_path / 'secure.crt'}",
        f"--key={tmp_path / 'secure.key'}",
    )
    apply(kubectl, ingress("slow"))
    created = kubectl.json("get", "ingress", "fruit")
    assert created["spec"]["ingressClassName"] == addons.INGRESS_CLASS  # the default class
    for name in ("apple", "banana", "slow"):
        kubectl.run("rollout", "status", f"deployment/{name}", "--timeout=90s")

    status = eventually(
        lambda: kubectl.json("get", "ingress", "fruit").get("status", {}),
        lambda s: s.get("loadBalancer", {}).get("ingress"),
    )
    assert status["loadBalancer"]["ingress"] == [{"ip": address}]

    url = f"http://{address}"
    matrix = [
        ("foo.lab.test", "/", "200 Hostname: apple-"),
        ("foo.lab.test", "/anything/else", "200 Hostname: apple-"),
        ("foo.lab.test", "/banana", "200 Hostname: banana-"),
        ("foo.lab.test", "/banana/split", "200 Hostname: banana-"),
        ("foo.lab.test", "/bananas", "200 Hostname: apple-"),
        ("foo.lab.test", "/exact", "200 Hostname: banana-"),
        ("foo.lab.test", "/exact/", "200 Hostname: apple-"),
        ("bar.wild.lab.test", "/", "200 Hostname: banana-"),
        ("deep.bar.wild.lab.test", "/", "404 default backend - 404"),
        ("other.lab.test", "/", "404 default backend - 404"),
        ("foo.lab.test", "/gone", "503 no endpoints for"),
    ]
    front_page = ["-H", "Host: foo.lab.test", f"{url}/"]
    eventually(lambda: curls(lab, tmp_path, front_page), lambda r: r[0][1].startswith("200 "))
    answers = curls(lab, tmp_path, *(["-H", f"Host: {h}", f"{url}{t}"] for h, t, _ in matrix))
    for (host, target, expected), (code, answer) in zip(matrix, answers, strict=True):
        assert code == 0 and answer.startswith(expected), (host, target, answer)

    ca_file = str(tmp_path / "ca.crt")
    secure, unknown, insecure = curls(
        lab,
        tmp_path,
        [
            "--cacert",
            ca_file,
            "--resolve",
            f"secure.lab.test:443:{address}",
            "https://secure.lab.test/",
        ],
        ["--cacert", ca_file, "--resolve", f"foo.lab.test:443:{address}", "https://foo.lab.test/"],
        ["-k", "--resolve", f"foo.lab.test:443:{address}", "https://foo.lab.test/banana"],
    )
    assert secure[0] == 0 and secure[1].startswith("200 Hostname: apple-"), secure
    assert unknown[0] == 60, f"foo.lab.test gets the fake default certificate: {unknown}"
    assert insecure[0] == 0 and insecure[1].startswith("200 Hostname: banana-"), insecure

    bad = ingress("slow")
    bad["metadata"]["name"] = "bad"
    bad["spec"]["rules"][0]["http"]["paths"][0]["path"] = "relative"
    refused = kubectl.run("apply", "-f", "-", input=json.dumps(bad), check=False)
    assert refused.returncode != 0
    assert (
        'The Ingress "bad" is invalid: spec.rules[0].http.paths[0].path: Invalid value: '
        '"relative": must be an absolute path'
    ) in refused.stderr

    long_request = subprocess.Popen(
        [
            *LAB_COMMAND,
            "exec",
            "--name",
            lab.name,
            "client",
            "--",
            "curl",
            "-sN",
            "-m",
            "30",
            "-H",
            "Host: foo.lab.test",
            f"{url}/cgi-bin/slow",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    try:
        assert long_request.stdout is not None
        first = long_request.stdout.readline()  # in flight: its first part relayed
        changed = ingress("slow")
        changed["spec"]["rules"][0]["http"]["paths"] = [path("/", "Prefix", "banana")]
        apply(kubectl, changed)  # /cgi-bin now goes to banana too
        eventually(
            lambda: curls(lab, tmp_path, front_page),
            lambda r: r[0][1].startswith("200 Hostname: banana-"),
            20,
        )
        out, err = long_request.communicate(timeout=SLOW_SECONDS + 20)
    finally:
        long_request.kill()
    assert long_request.returncode == 0, err
    assert [first, *out.splitlines()] == [
        "part 1\n",
        *(f"part {i}" for i in range(2, SLOW_SECONDS + 1)),
    ]

    after = system.json("-n", addons.ADDON_NAMESPACE, "get", "pod", pod["metadata"]["name"])
    assert after["status"]["containerStatuses"][0]["restartCount"] == 0
