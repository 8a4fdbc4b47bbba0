"""The kubelet's keyring: which pull secret's credentials go with which image (upstream's
``credentialprovider`` matching), and both secret types decoded."""

from __future__ import annotations

import base64
import json

import pytest

from kube.api.kinds.core_v1.cluster import Secret
from kube.api.meta_v1 import ObjectMeta
from node.kubelet.credentials import Credential, lookup, matches, parse_image, secret_entries


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def config_json(auths: dict[str, dict[str, str]]) -> Secret:
    return Secret(
        metadata=ObjectMeta(name="regcred", namespace="default"),
        type="kubernetes.io/dockerconfigjson",
        data={".dockerconfigjson": b64(json.dumps({"auths": auths}))},
    )


def dockercfg(entries: dict[str, dict[str, str]]) -> Secret:
    return Secret(
        metadata=ObjectMeta(name="old", namespace="default"),
        type="kubernetes.io/dockercfg",
        data={".dockercfg": b64(json.dumps(entries))},
    )


@pytest.mark.parametrize(
    ("image", "repository"),
    [
        pytest.param("nginx", "docker.io/library/nginx", id="short"),
        pytest.param("team/app:1", "docker.io/team/app", id="user"),
        pytest.param("private.kubelab.test/a/b:1", "private.kubelab.test/a/b", id="host"),
        pytest.param("10.240.0.1:5001/a@sha256:" + "0" * 64, "10.240.0.1:5001/a", id="digest"),
    ],
)
def test_parse_image(image: str, repository: str) -> None:
    assert parse_image(image) == repository


@pytest.mark.parametrize(
    ("key", "repository", "matched"),
    [
        pytest.param("private.kubelab.test", "private.kubelab.test/a/b", True, id="host"),
        pytest.param("*.kubelab.test", "private.kubelab.test/a", True, id="glob"),
        pytest.param("*.test", "private.kubelab.test/a", False, id="glob-labels-differ"),
        pytest.param("private.kubelab.test/a", "private.kubelab.test/a/b", True, id="path"),
        pytest.param("private.kubelab.test/b", "private.kubelab.test/a/b", False, id="other-path"),
        pytest.param("10.240.0.1:5001", "10.240.0.1:5001/a", True, id="port"),
        pytest.param("10.240.0.1:5000", "10.240.0.1:5001/a", False, id="other-port"),
        pytest.param("docker.io", "docker.io/library/nginx", True, id="docker-io"),
    ],
)
def test_matches(key: str, repository: str, matched: bool) -> None:
    assert matches(key, repository) is matched


def test_both_secret_types_and_auth_field() -> None:
    new = config_json({"https://private.kubelab.test/v2/": {"auth": b64("u:p:w")}})
    old = dockercfg({"quay.io": {"username": "q", "password": "r"}})
    assert secret_entries(new) == {"https://private.kubelab.test/v2/": Credential("u", "p:w")}
    assert secret_entries(old) == {"quay.io": Credential("q", "r")}
    assert lookup([new, old], "private.kubelab.test/kubelab/busybox") == [Credential("u", "p:w")]
    assert lookup([new, old], "quay.io/x/y:1") == [Credential("q", "r")]
    assert lookup([new, old], "nginx") == []


def test_longest_key_first_and_default_registry() -> None:
    secret = config_json(
        {
            "reg.example/team": {"username": "team", "password": "1"},
            "reg.example": {"username": "all", "password": "2"},
            "https://index.docker.io/v1/": {"username": "hub", "password": "3"},
        }
    )
    assert [c.username for c in lookup([secret], "reg.example/team/app")] == ["team", "all"]
    assert [c.username for c in lookup([secret], "nginx:1")] == ["hub"]


@pytest.mark.parametrize(
    "secret",
    [
        pytest.param(Secret(type="Opaque", data={".dockerconfigjson": b64("{}")}), id="opaque"),
        pytest.param(
            Secret(type="kubernetes.io/dockerconfigjson", data={".dockerconfigjson": b64("[")}),
            id="not-json",
        ),
        pytest.param(config_json({"x.io": {"auth": "!!"}}), id="bad-auth"),
    ],
)
def test_unusable_secrets_give_nothing(secret: Secret) -> None:
    assert lookup([secret], "x.io/a") == []
