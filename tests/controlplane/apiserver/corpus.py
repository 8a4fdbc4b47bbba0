"""What the tests of a group's kinds through real kubectl share: the manifest corpus of
tests/kube/api (valid manifests from the docs, invalid ones with the error they must get), and
kubectl's tables read cell by cell, objects created and refused through ``kubectl create -f -``."""

from __future__ import annotations

import json
import pathlib
import re
from typing import Any

from tests.servers import Kubectl

CORPUS = pathlib.Path(__file__).parents[2] / "kube" / "api"


def columns(text: str) -> list[list[str]]:
    """A table's cells cut where its header's columns start (so empty cells stay cells)."""
    lines = text.rstrip("\n").splitlines()
    starts = [m.start() for m in re.finditer(r"\S+", lines[0])]
    bounds = list(zip(starts, [*starts[1:], None], strict=True))
    return [[line[a:b].strip() for a, b in bounds] for line in lines]


def refusal(kubectl: Kubectl, invalid_manifest: str) -> str:
    """What kubectl prints when ``create -f`` of an invalid corpus manifest fails, as it must."""
    refused = kubectl.run("create", "-f", str(CORPUS / "invalid" / invalid_manifest), check=False)
    assert refused.returncode == 1
    return refused.stderr


def create(kubectl: Kubectl, *documents: dict[str, Any]) -> str:
    """What kubectl prints when it creates the documents (one line each)."""
    body = "\n---\n".join(json.dumps(d) for d in documents)
    return kubectl.run("create", "-f", "-", input=body).stdout.strip()


def refused_document(kubectl: Kubectl, document: dict[str, Any]) -> str:
    """What kubectl prints when ``create`` of an invalid document fails, as it must."""
    refused = kubectl.run("create", "-f", "-", input=json.dumps(document), check=False)
    assert refused.returncode == 1
    return refused.stderr
