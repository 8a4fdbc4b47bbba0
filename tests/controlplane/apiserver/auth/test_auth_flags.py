"""The API server's authentication and authorization flags: parsed as upstream spells them,
refused with a clear message otherwise."""

from __future__ import annotations

import argparse

import pytest

from controlplane.apiserver.command import add_flags


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(exit_on_error=False)
    add_flags(parser)
    return parser.parse_args(argv)


def test_defaults_keep_the_compatible_behaviour() -> None:
    args = _parse()
    assert args.authorization_mode == ["AlwaysAllow"]
    assert args.anonymous_auth is True
    assert args.token_auth_file is None
    assert args.api_audiences == []


def test_upstream_spellings() -> None:
    args = _parse(
        "--authorization-mode=Node,RBAC",
        "--anonymous-auth=false",
        "--api-audiences=https://kubernetes.default.svc,vault",
    )
    assert args.authorization_mode == ["Node", "RBAC"]
    assert args.anonymous_auth is False
    assert args.api_audiences == ["https://kubernetes.default.svc", "vault"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--authorization-mode=RBAC,ABAC",), "mode ABAC; choose from AlwaysAllow"),
        (("--authorization-mode=RBAC,RBAC",), "listed twice"),
        (("--anonymous-auth=maybe",), "expected true or false"),
    ],
    ids=["unknown mode", "repeated mode", "not a boolean"],
)
def test_bad_values_are_refused(argv: tuple[str, ...], message: str) -> None:
    with pytest.raises(argparse.ArgumentError, match=message):
        _parse(*argv)
