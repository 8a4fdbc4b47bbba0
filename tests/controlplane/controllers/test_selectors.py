"""The selector index the HPA controller finds pods two HPAs scale with: it answers what
trying every selector of the namespace answers."""

from __future__ import annotations

import pytest

from controlplane.controllers.selectors import SelectorIndex
from kube.api.labels import parse_selector

SELECTORS = {
    "ns/web": ("ns", "app=web"),
    "ns/either": ("ns", "app in (web,db)"),
    "ns/front": ("ns", "tier=front,app!=db"),
    "ns/untiered": ("ns", "!tier"),
    "ns/all": ("ns", ""),
    "other/web": ("other", "app=web"),
}


@pytest.mark.parametrize(
    ("namespace", "labels"),
    [
        ("ns", {"app": "web"}),
        ("ns", {"app": "web", "tier": "front"}),
        ("ns", {"app": "db", "tier": "front"}),
        ("ns", {}),
        ("other", {"app": "web"}),
        ("elsewhere", {"app": "web"}),
    ],
)
def test_matching_finds_what_trying_every_selector_finds(
    namespace: str, labels: dict[str, str]
) -> None:
    index = SelectorIndex()
    for key, (where, text) in SELECTORS.items():
        index.put(key, where, parse_selector(text))
    expected = {
        key
        for key, (where, text) in SELECTORS.items()
        if where == namespace and parse_selector(text).matches(labels)
    }
    assert index.matching(namespace, labels) == expected


def test_a_selector_put_again_replaces_the_old_one_and_remove_forgets_it() -> None:
    index = SelectorIndex()
    index.put("ns/hpa", "ns", parse_selector("app=web"))
    index.put("ns/hpa", "ns", parse_selector("app=db"))
    assert index.matching("ns", {"app": "web"}) == set()
    assert index.matching("ns", {"app": "db"}) == {"ns/hpa"}
    index.put("ns/hpa", "ns", parse_selector("!legacy"))
    assert index.matching("ns", {"app": "db"}) == {"ns/hpa"}
    index.remove("ns/hpa")
    index.remove("ns/hpa")
    assert index.matching("ns", {"app": "db"}) == set()
