"""What the tests of a group's kinds through real kubectl share: the manifest corpus of
tests/kube/api (valid manifests from the docs, invalid ones with the error they must get), and
kubectl's tables read cell by cell."""

from __future__ import annotations

import pathlib
import re

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
