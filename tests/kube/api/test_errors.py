"""Field errors render as kubectl shows them."""

from __future__ import annotations

import pytest

from kube.api.errors import ROOT, ErrorList, InvalidError, Path


def test_paths_render_like_kubernetes() -> None:
    path = ROOT.child("spec").child("containers").index(0).child("image")
    assert str(path) == "spec.containers[0].image"
    assert str(ROOT.child("metadata").child("labels").key("app")) == "metadata.labels[app]"
    assert str(ROOT) == ""
    assert Path("spec") == ROOT.child("spec")


@pytest.mark.parametrize(
    ("record", "text"),
    [
        pytest.param(
            lambda e: e.required(ROOT.child("spec").child("x")),
            "spec.x: Required value",
            id="required",
        ),
        pytest.param(
            lambda e: e.invalid(
                ROOT.child("metadata").child("name"),
                "Bad_Name",
                "a lowercase RFC 1123 subdomain must consist of ...",
            ),
            'metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain '
            "must consist of ...",
            id="invalid",
        ),
        pytest.param(
            lambda e: e.not_supported(
                ROOT.child("spec").child("restartPolicy"),
                "Sometimes",
                ["Never", "Always", "OnFailure"],
            ),
            'spec.restartPolicy: Unsupported value: "Sometimes": supported values: '
            '"Always", "Never", "OnFailure"',
            id="not-supported",
        ),
        pytest.param(
            lambda e: e.duplicate(ROOT.child("a").index(1).child("name"), "web"),
            'a[1].name: Duplicate value: "web"',
            id="duplicate",
        ),
        pytest.param(
            lambda e: e.forbidden(ROOT.child("spec"), "may not be set"),
            "spec: Forbidden: may not be set",
            id="forbidden",
        ),
        pytest.param(
            lambda e: e.too_long(ROOT.child("metadata").child("annotations"), 262144),
            "metadata.annotations: Too long: may not be more than 262144 bytes",
            id="too-long",
        ),
        pytest.param(
            lambda e: e.immutable(ROOT.child("spec").child("selector"), {"a": "b"}),
            'spec.selector: Invalid value: {"a": "b"}: field is immutable',
            id="immutable",
        ),
        pytest.param(
            lambda e: e.invalid(
                ROOT.child("spec").child("replicas"), -1, "must be greater than or equal to 0"
            ),
            "spec.replicas: Invalid value: -1: must be greater than or equal to 0",
            id="invalid-int",
        ),
    ],
)
def test_messages(record: object, text: str) -> None:
    errors = ErrorList()
    record(errors)  # type: ignore[operator]
    assert [str(e) for e in errors] == [text]


def test_invalid_error_names_kind_and_object() -> None:
    errors = ErrorList()
    errors.required(ROOT.child("spec"))
    error = InvalidError("Deployment", "web", errors)
    assert str(error) == 'Deployment "web" is invalid: [spec: Required value]'
    assert [e.type.value for e in errors] == ["FieldValueRequired"]
