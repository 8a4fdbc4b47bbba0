"""The lab registry end to end, on the shared lab: images by the names people type.

Manifests as people write them (``kubectl create deployment --image=nginx``, ``kubectl run
--image=busybox``, ``image: python`` with a command, ``nginx:latest`` with ``Always``) run,
pulled through every node's containerd from the registry in the router; a tag the lab lacks
fails at once with the registry's answer; an image pushed with ``kubelab images push`` runs on
both workers; the private repository pulls with a pull secret (the pod's or its service
account's) and fails with the registry's 401 without one; names from outside get NXDOMAIN from
the nodes' resolver at once.  The rendering of every file involved is checked without root.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from kubelab.lab import components, registry
from kubelab.lab.topology import Lab, LabSpec
from node.kubelet.runtimeconfig import containerd_config
from tests.kubelab.lab.labs import RunningLab
from tests.servers import REPO, Kubectl

pytestmark = pytest.mark.lab

WORKERS = ("node1", "node2")
PRIVATE = f"{registry.PRIVATE_SEED}:latest"
FAIL_FAST = 2.0
"""A pull of a name the lab lacks must fail within this (the issue's bound)."""


# -- without root -----------------------------------------------------------------------------


def test_containerd_mirrors_every_public_registry_to_the_lab_registry() -> None:
    lab = Lab(LabSpec(name="demo"))
    node = lab.node("node1")
    containerd = components.containerd(lab, node)
    hosts_dir = node.containerd_dir / "certs.d"
    config = containerd.files[node.containerd_dir / "config.toml"]
    assert f'config_path = "{hosts_dir}"' in config
    docker = containerd.files[hosts_dir / "docker.io" / "hosts.toml"]
    assert docker.splitlines()[:3] == [
        'server = "http://10.240.0.1:5000/v2/docker.io"',
        'capabilities = ["pull", "resolve"]',
        "override_path = true",
    ]
    assert '[host."http://10.240.0.1:5000/v2/docker.io"]' in docker
    mirrored = {p.parent.name for p in containerd.files if p.name == "hosts.toml"}
    assert mirrored == {
        *registry.MIRRORED,
        registry.PRIVATE_HOST,
        "10.240.0.1:5000",
        "10.240.0.1:5001",
    }
    assert containerd_config(components.containerd_layout(node)) == config


def test_registries_run_in_the_router_with_storage_under_the_lab_state() -> None:
    lab = Lab(LabSpec(name="demo", nameservers=("10.255.255.53",)))
    keys = [c.key for c in components.node_components(lab, lab.router)]
    assert keys == ["router/registry", "router/private-registry", "router/resolver"]
    public, private = (components.by_key(lab, k) for k in keys[:2])
    assert public.netns == lab.router.netns_path
    assert json.loads(public.files[lab.registry_dir / "public.json"])["storage"] == {
        "filesystem": {"rootdirectory": str(lab.registry_dir / "public")},
        "delete": {"enabled": True},
    }
    document = json.loads(private.files[lab.registry_dir / "private.json"])
    assert document["http"]["addr"] == "10.240.0.1:5001"
    assert document["auth"]["htpasswd"]["path"] == str(lab.registry_dir / "htpasswd")
    assert lab.registry_dir.is_relative_to(lab.state_dir)


@pytest.mark.parametrize(
    ("name", "stored"),
    [
        pytest.param("nginx", "10.240.0.1:5000/docker.io/library/nginx:latest", id="short"),
        pytest.param("team/app:1", "10.240.0.1:5000/docker.io/team/app:1", id="user"),
        pytest.param("registry.k8s.io/pause:3.9", "10.240.0.1:5000/registry.k8s.io/pause:3.9"),
        pytest.param(f"{registry.PRIVATE_HOST}/a/b:2", "10.240.0.1:5001/a/b:2", id="private"),
        pytest.param("10.240.0.1:5000/mine:1", "10.240.0.1:5000/mine:1", id="by-address"),
    ],
)
def test_names_people_type_map_to_the_lab_registry(name: str, stored: str) -> None:
    where = registry.LabRegistry.of(Lab(LabSpec(name="demo")))
    assert registry.destination(where, name).reference(where) == stored


@pytest.mark.parametrize(
    ("name", "message"),
    [
        pytest.param("example.com/app:1", "not example.com", id="unmirrored"),
        pytest.param("Nginx", "must be lowercase", id="uppercase"),
        pytest.param("nginx@sha256:" + "a" * 64, "by a tag, not a digest", id="digest"),
    ],
)
def test_names_the_lab_cannot_hold_are_refused(name: str, message: str) -> None:
    where = registry.LabRegistry.of(Lab(LabSpec(name="demo")))
    with pytest.raises(registry.RegistryError, match=message):
        registry.destination(where, name)


def test_seed_tags_are_latest_the_version_and_its_prefixes() -> None:
    from kubelab.lab.images import recipe

    assert registry.upstream_version("1:1.35.0-4+deb12u1+b1") == "1.35.0"
    assert registry.seed_names(recipe("nginx"), "1.22.1") == [
        "docker.io/library/nginx:latest",
        "docker.io/library/nginx:1.22.1",
        "docker.io/library/nginx:1.22",
        "docker.io/library/nginx:1",
    ]


def tar_of(path: Path, members: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w") as tar:
        for name, content in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
    return path


def test_sources_say_what_they_are_and_the_name_they_record(tmp_path: Path) -> None:
    manifest = json.dumps([{"RepoTags": ["team/app:1"], "Layers": []}]).encode()
    docker = tar_of(tmp_path / "d.tar", {"manifest.json": manifest})
    assert registry.source(docker) == (f"docker-archive:{docker}", "team/app:1")
    index = {"manifests": [{"annotations": {"org.opencontainers.image.ref.name": "latest"}}]}
    oci = tar_of(
        tmp_path / "o.tar", {"oci-layout": b"{}", "index.json": json.dumps(index).encode()}
    )
    assert registry.source(oci) == (f"oci-archive:{oci}", None)  # a tag alone names nothing


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param(None, "no such file or directory", id="missing"),
        pytest.param(b"not a tar", "neither a directory nor a tar archive", id="not-tar"),
        pytest.param({"README": b"hello"}, "neither an OCI layout nor a docker archive", id="tar"),
        pytest.param("truncated", "a corrupt archive", id="corrupt"),
        pytest.param({"manifest.json": b"[1, 2]"}, "holds 2 images", id="two"),
        pytest.param({"manifest.json": b"{"}, "its manifest does not parse", id="bad-json"),
    ],
)
def test_bad_sources_are_one_line(
    tmp_path: Path, content: bytes | dict[str, bytes] | str | None, message: str
) -> None:
    path = tmp_path / "image.tar"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, dict):
        tar_of(path, content)
    elif content == "truncated":
        whole = tar_of(tmp_path / "whole.tar", {"a": b"x" * 4096, "manifest.json": b"[]"})
        path.write_bytes(whole.read_bytes()[:2048])
    with pytest.raises(registry.RegistryError, match=message) as caught:
        registry.source(path)
    assert "\n" not in str(caught.value)


# -- on the shared lab ------------------------------------------------------------------------


def kubelab(*args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kubelab", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        check=False,
    )


def wait_ready(kubectl: Kubectl, *selector: str) -> None:
    kubectl.run("wait", "--for=condition=Ready", "pod", *selector, "--timeout=90s")


def events_of(kubectl: Kubectl, pod: str) -> list[tuple[str, str]]:
    listed = kubectl.json("get", "events", "--field-selector", f"involvedObject.name={pod}")
    items = listed["items"]
    assert isinstance(items, list)
    return [(e["reason"], e["message"]) for e in items]


def wait_event(kubectl: Kubectl, pod: str, reason: str, fragment: str) -> float:
    """Seconds until the pod has an event ``reason`` whose message contains ``fragment``."""
    started = time.monotonic()
    while time.monotonic() - started < 60:
        if any(r == reason and fragment in m for r, m in events_of(kubectl, pod)):
            return time.monotonic() - started
        time.sleep(0.2)
    raise AssertionError(f"no {reason} event with {fragment!r}: {events_of(kubectl, pod)}")


@pytest.mark.privileged
@pytest.mark.containerd
def test_images_by_the_names_people_type(lab_kubectl: Kubectl) -> None:
    k = lab_kubectl
    k.run("create", "deployment", "web", "--image=nginx")
    k.run("run", "sleeper", "--image=busybox", "--", "sleep", "3600")
    k.run(
        "run", "hello", "--image=python", "--restart=Never",
        "--", "python3", "-c", "print('hello from python')",
    )  # fmt: skip
    k.run(
        "run", "latest", "--image=nginx:latest", "--image-pull-policy=Always",
    )  # fmt: skip
    k.run("rollout", "status", "deployment/web", "--timeout=90s")
    wait_ready(k, "sleeper", "latest")
    k.run("wait", "--for=jsonpath={.status.phase}=Succeeded", "pod/hello", "--timeout=90s")
    assert k.run("logs", "hello").stdout == "hello from python\n"
    pod = k.json("get", "pod", "latest")
    assert pod["spec"]["containers"][0]["imagePullPolicy"] == "Always"
    assert any(r == "Pulled" for r, _ in events_of(k, "latest"))
    assert ("Pulling", 'Pulling image "busybox"') in events_of(k, "sleeper")


@pytest.mark.privileged
@pytest.mark.containerd
def test_a_tag_the_lab_lacks_fails_fast_with_the_registry_answer(lab_kubectl: Kubectl) -> None:
    lab_kubectl.run("run", "missing", "--image=nginx:0.0.404")
    took = wait_event(lab_kubectl, "missing", "Failed", "not found")
    pulling = [m for r, m in events_of(lab_kubectl, "missing") if r == "Failed"]
    assert all("i/o timeout" not in m and "lookup" not in m for m in pulling)
    assert 'failed to resolve reference "docker.io/library/nginx:0.0.404"' in pulling[0]
    assert took < 15  # scheduling, the sandbox, then the pull itself (below)
    described = lab_kubectl.run("describe", "pod", "missing").stdout
    assert "docker.io/library/nginx:0.0.404: not found" in described
    times = kubelab_pull_seconds(lab_kubectl, "missing")
    assert times < FAIL_FAST, f"the failed pull took {times:.1f}s"


@pytest.mark.privileged
@pytest.mark.containerd
def test_an_unmirrored_registry_fails_fast_with_nxdomain(lab_kubectl: Kubectl) -> None:
    """A registry the lab does not mirror is looked up: the nodes' resolver says at once that
    the name does not exist, never a DNS timeout."""
    lab_kubectl.run("run", "outside", "--image=example.com/team/app:1")
    wait_event(lab_kubectl, "outside", "Failed", "no such host")
    assert kubelab_pull_seconds(lab_kubectl, "outside") < FAIL_FAST


def kubelab_pull_seconds(kubectl: Kubectl, pod: str) -> float:
    """Seconds from the kubelet's Pulling event to its Failed one (event timestamps)."""
    listed = kubectl.json("get", "events", "--field-selector", f"involvedObject.name={pod}")
    items = listed["items"]
    assert isinstance(items, list)

    def first(reason: str) -> float:
        stamps = [e.get("eventTime") or e["firstTimestamp"] for e in items if e["reason"] == reason]
        return time.mktime(time.strptime(stamps[0][:19], "%Y-%m-%dT%H:%M:%S"))

    return first("Failed") - first("Pulling")


@pytest.mark.privileged
@pytest.mark.containerd
def test_a_pushed_image_runs_on_both_workers(
    shared_lab: RunningLab, lab_kubectl: Kubectl, tmp_path: Path
) -> None:
    name = f"tools/{lab_kubectl.namespace}:1.0"
    archive = tmp_path / "tool.tar"
    subprocess.run(
        ["skopeo", "copy", "-q", "docker-archive:/var/cache/kubelab/busybox-1.35.tar",
         f"oci-archive:{archive}:{name}"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    before = kubelab("images", "list", "--name", shared_lab.name)
    assert before.returncode == 0, before.stderr
    for bad in (tmp_path / "missing.tar", archive.with_suffix(".txt")):
        if bad.suffix == ".txt":
            bad.write_text("not an image")
        refused = kubelab("images", "push", "--name", shared_lab.name, str(bad), "bad:1")
        assert refused.returncode == 1
        assert len(refused.stderr.splitlines()) == 1, refused.stderr
    assert kubelab("images", "list", "--name", shared_lab.name).stdout == before.stdout
    pushed = kubelab("images", "push", "--name", shared_lab.name, str(archive), name)
    assert pushed.returncode == 0, pushed.stderr
    listed = kubelab("images", "list", "--name", shared_lab.name).stdout
    assert f"docker.io/{name.split(':')[0]}" in listed
    daemonset = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "tool"},
        "spec": {
            "selector": {"matchLabels": {"app": "tool"}},
            "template": {
                "metadata": {"labels": {"app": "tool"}},
                "spec": {
                    "terminationGracePeriodSeconds": 1,
                    "containers": [{"name": "tool", "image": name, "command": ["sleep", "3600"]}],
                },
            },
        },
    }
    lab_kubectl.run("apply", "-f", "-", input=json.dumps(daemonset))
    lab_kubectl.run("rollout", "status", "daemonset/tool", "--timeout=90s")
    pods = lab_kubectl.json("get", "pods", "-l", "app=tool")["items"]
    assert isinstance(pods, list)
    assert sorted(p["spec"]["nodeName"] for p in pods) == list(WORKERS)


@pytest.mark.privileged
@pytest.mark.containerd
def test_private_images_need_their_pull_secret(
    shared_lab: RunningLab, lab_kubectl: Kubectl
) -> None:
    k = lab_kubectl
    password = registry.password(registry.LabRegistry.of(shared_lab.lab))
    k.run(
        "create", "secret", "docker-registry", "regcred",
        f"--docker-server={registry.PRIVATE_HOST}", f"--docker-username={registry.PRIVATE_USER}",
        f"--docker-password={password}",
    )  # fmt: skip
    k.run("run", "without", f"--image={PRIVATE}", "--", "sleep", "3600")
    overrides = json.dumps({"spec": {"imagePullSecrets": [{"name": "regcred"}]}})
    k.run("run", "with", f"--image={PRIVATE}", f"--overrides={overrides}", "--", "sleep", "3600")
    wait_ready(k, "with")
    wait_event(k, "without", "Failed", "401 Unauthorized")
    k.run("create", "serviceaccount", "puller")
    k.run("patch", "serviceaccount", "puller", "-p", '{"imagePullSecrets":[{"name":"regcred"}]}')
    k.run(
        "run", "account", f"--image={PRIVATE}", "--overrides",
        json.dumps({"spec": {"serviceAccountName": "puller"}}), "--", "sleep", "3600",
    )  # fmt: skip
    wait_ready(k, "account")


@pytest.mark.privileged
def test_outside_names_get_nxdomain_at_once(shared_lab: RunningLab) -> None:
    for node in (*WORKERS, "controlplane"):
        started = time.monotonic()
        lookup = subprocess.run(
            ["nsenter", f"--net={shared_lab.lab.node(node).netns_path}",
             "getent", "hosts", "registry-1.docker.io"],
            capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
        assert lookup.returncode == 2  # not found
        assert time.monotonic() - started < 1.0
