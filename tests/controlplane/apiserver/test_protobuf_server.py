"""Protobuf bodies through a real ``kubelab apiserver``, for the kinds kubectl never sends as
protobuf but any client-go program configured for protobuf does.

Each stored kind is created from the documentation's manifests (the corpus in
tests/kube/api/manifests) encoded as upstream's protobuf, with client-go's Accept for that
configuration: the object created must hold every field sent, equal what the same manifest
gives as JSON (a dry run, just before), and read back the same; the server's whole object,
defaults, status and managed fields included, must travel through the codec unchanged.  Review
kinds are only ever created: the protobuf question gets the JSON question's answer.  The server
answers in protobuf, as client-go's Accept prefers (test_protobuf_responses.py holds those answers
to the JSON ones).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s

from controlplane.apiserver.protobuf import decode_body, encode_body
from kube.api.scheme import SCHEME
from tests.controlplane.apiserver.corpus import CORPUS

PROTOBUF = "application/vnd.kubernetes.protobuf"
JSON = "application/json"
ACCEPT = f"{PROTOBUF},{JSON}"
"""What client-go sends with ContentType protobuf."""

MANIFESTS = [
    "admissionregistration-validatingwebhookconfiguration-policy.yaml",
    "admissionregistration-mutatingwebhookconfiguration-sidecar-injector.yaml",
    "admissionregistration-validatingadmissionpolicy-replicas.yaml",
    "admissionregistration-mutatingadmissionpolicy-sidecar.yaml",
    "admissionregistration-mutatingadmissionpolicy-jsonpatch.yaml",
    "apiextensions-customresourcedefinition-crontab.yaml",
    "apiextensions-customresourcedefinition-webapp-operator.yaml",
]
DOCUMENTS = [
    pytest.param(document, id=f"{manifest.removesuffix('.yaml')}-{document['kind']}")
    for manifest in MANIFESTS
    for document in yaml.safe_load_all((CORPUS / "manifests" / manifest).read_text())
]


def _call(
    api_client: k8s.ApiClient,
    method: str,
    path: str,
    body: Any = None,
    content_type: str = JSON,
    query: tuple[tuple[str, str], ...] = (),
) -> dict[str, Any]:
    """One request, answered as the JSON object it must be (an error raises ApiException)."""
    answer = api_client.call_api(
        path,
        method,
        query_params=list(query),
        header_params={"Content-Type": content_type, "Accept": ACCEPT},
        body=body,
        auth_settings=["BearerToken"],
        _preload_content=False,
    )
    data = answer.read()
    answer.release_conn()
    if answer.headers["Content-Type"] == PROTOBUF:
        return decode_body(data)
    assert answer.headers["Content-Type"] == JSON
    result: dict[str, Any] = json.loads(data)
    return result


def _collection(document: dict[str, Any], namespace: str | None = None) -> str:
    info = SCHEME.by_kind(document["apiVersion"], document["kind"])
    assert info is not None
    where = f"namespaces/{namespace}/" if info.namespaced else ""
    return f"/apis/{document['apiVersion']}/{where}{info.plural}"


def _contains(whole: Any, part: Any) -> bool:
    """Whether ``whole`` has every field of ``part`` with the same value (lists item by item)."""
    if isinstance(part, dict):
        return isinstance(whole, dict) and all(
            key in whole and _contains(whole[key], value) for key, value in part.items()
        )
    if isinstance(part, list):
        return (
            isinstance(whole, list)
            and len(whole) == len(part)
            and all(_contains(w, p) for w, p in zip(whole, part, strict=True))
        )
    return bool(whole == part)


def _content(obj: dict[str, Any]) -> dict[str, Any]:
    """What a user wrote and the server defaulted: neither the server's bookkeeping in metadata
    nor the status its controllers write meanwhile."""
    metadata = {
        key: value
        for key, value in obj["metadata"].items()
        if key in ("name", "namespace", "labels", "annotations")
    }
    return {**{k: v for k, v in obj.items() if k != "status"}, "metadata": metadata}


def _travels(obj: dict[str, Any]) -> None:
    assert decode_body(encode_body(obj)) == obj


@pytest.mark.parametrize("document", DOCUMENTS)
def test_created_from_protobuf(api_client: k8s.ApiClient, document: dict[str, Any]) -> None:
    collection = _collection(document)
    name = document["metadata"]["name"]
    from_json = _call(api_client, "POST", collection, document, query=(("dryRun", "All"),))
    created = _call(api_client, "POST", collection, encode_body(document), PROTOBUF)
    try:
        fetched = _call(api_client, "GET", f"{collection}/{name}")
        assert _contains(created, document)
        assert _content(created) == _content(from_json)
        assert _content(fetched) == _content(created)
        _travels(fetched)
    finally:
        _call(api_client, "DELETE", f"{collection}/{name}")


def _token_review(namespace: str) -> dict[str, Any]:
    """The webhook token authentication docs' TokenReview."""
    return {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "spec": {
            "token": "014fbff9a07c...",
            "audiences": ["https://myserver.example.com", "https://myserver.internal.example.com"],
        },
    }


def _subject_access_review(namespace: str) -> dict[str, Any]:
    """The authorization docs' SubjectAccessReview, as the webhook mode sends it."""
    return {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "resourceAttributes": {
                "namespace": "kittensandponies",
                "verb": "get",
                "group": "unicorn.example.org",
                "resource": "pods",
            },
            "user": "jane",
            "groups": ["group1", "group2"],
            "extra": {"scopes": ["openid", "profile"]},
        },
    }


def _local_subject_access_review(namespace: str) -> dict[str, Any]:
    """The authorization docs' LocalSubjectAccessReview, in the test's namespace."""
    return {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "LocalSubjectAccessReview",
        "metadata": {"namespace": namespace},
        "spec": {
            "resourceAttributes": {
                "group": "apps",
                "resource": "deployments",
                "verb": "create",
                "namespace": namespace,
            },
            "user": "jane",
        },
    }


@pytest.mark.parametrize(
    "review",
    [_token_review, _subject_access_review, _local_subject_access_review],
    ids=["TokenReview", "SubjectAccessReview", "LocalSubjectAccessReview"],
)
def test_review_answered_from_protobuf(
    api_client: k8s.ApiClient, namespace: str, review: Callable[[str], dict[str, Any]]
) -> None:
    document = review(namespace)
    collection = _collection(document, namespace)
    answer = _call(api_client, "POST", collection, encode_body(document), PROTOBUF)
    assert _contains(answer, document)
    assert "status" in answer
    assert answer == _call(api_client, "POST", collection, document)
    _travels(answer)
