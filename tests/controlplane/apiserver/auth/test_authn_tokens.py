"""Bearer tokens and impersonation, decided from in-memory objects: which tokens name a user,
which are refused and why, and what an impersonating caller must be allowed."""

from __future__ import annotations

import asyncio
import base64
import datetime
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import make_mocked_request
from cryptography.hazmat.primitives.asymmetric import ec
from hypothesis import example, given
from hypothesis import strategies as st
from multidict import CIMultiDict

from controlplane.apiserver.auth import AUTHENTICATED, User
from controlplane.apiserver.auth.authn import (
    BootstrapTokens,
    InvalidToken,
    ServiceAccountTokens,
    StaticTokens,
    TokenChain,
    impersonate,
    load_token_file,
)
from controlplane.apiserver.auth.tokens import ISSUER, TokenIssuer
from controlplane.apiserver.endpoints.requestinfo import RequestInfo
from controlplane.apiserver.errors import ApiError
from kube.api.kinds.core_v1.cluster import Secret, ServiceAccount
from kube.api.kinds.core_v1.pod import Pod
from kube.api.meta_v1 import ObjectMeta, Resource

NOW = datetime.datetime(2026, 11, 22, 12, 0, tzinfo=datetime.UTC)


class Clock:
    def __init__(self) -> None:
        self.current = NOW

    def now(self) -> datetime.datetime:
        return self.current

    def monotonic(self) -> float:
        return 0.0

    async def sleep(self, seconds: float) -> None:
        raise AssertionError("authentication never sleeps")


class Objects:
    def __init__(self, *objects: Resource) -> None:
        self.items = {(o.metadata.namespace or "", o.metadata.name or ""): o for o in objects}

    async def lookup(self, namespace: str, name: str) -> Resource | None:
        return self.items.get((namespace, name))


ISSUER_KEY = TokenIssuer(ec.generate_private_key(ec.SECP256R1()))
ACCOUNT = ServiceAccount(metadata=ObjectMeta(name="robot", namespace="team", uid="sa-uid"))
POD = Pod(metadata=ObjectMeta(name="web", namespace="team", uid="pod-uid"))


def _claims(**changes: Any) -> dict[str, Any]:
    issued = int(NOW.timestamp())
    claims: dict[str, Any] = {
        "aud": [ISSUER],
        "exp": issued + 3600,
        "iat": issued,
        "nbf": issued,
        "iss": ISSUER,
        "sub": "system:serviceaccount:team:robot",
        "kubernetes.io": {
            "namespace": "team",
            "serviceaccount": {"name": "robot", "uid": "sa-uid"},
            "pod": {"name": "web", "uid": "pod-uid"},
        },
    }
    claims.update(changes)
    return claims


def _service_accounts(
    clock: Clock | None = None, pods: Objects | None = None, secrets: Objects | None = None
) -> ServiceAccountTokens:
    return ServiceAccountTokens(
        key=ISSUER_KEY.key.public_key(),
        issuers=[ISSUER],
        audiences=[ISSUER],
        clock=clock or Clock(),
        accounts=Objects(ACCOUNT),
        pods=pods if pods is not None else Objects(POD),
        secrets=secrets or Objects(),
    )


async def test_a_bound_token_names_its_service_account() -> None:
    user = await _service_accounts()(ISSUER_KEY.sign(_claims()))
    assert user is not None
    assert user.name == "system:serviceaccount:team:robot"
    assert user.groups == ("system:serviceaccounts", "system:serviceaccounts:team", AUTHENTICATED)
    assert user.uid == "sa-uid"
    assert user.extra["authentication.kubernetes.io/pod-name"] == ("web",)


def _identity(**changes: dict[str, str]) -> dict[str, Any]:
    return _claims(**{"kubernetes.io": {**_claims()["kubernetes.io"], **changes}})


BAD_TOKENS = {
    "expired": (_claims(exp=int(NOW.timestamp())), "expired"),
    "not yet valid": (_claims(nbf=int(NOW.timestamp()) + 60), "not valid yet"),
    "other audience": (_claims(aud=["https://elsewhere"]), "audiences"),
    "pod uid differs": (_identity(pod={"name": "web", "uid": "old"}), "uid"),
    "pod gone": (_identity(pod={"name": "gone", "uid": "x"}), "does not exist"),
    "account recreated": (_identity(serviceaccount={"name": "robot", "uid": "old"}), "uid"),
}


@pytest.mark.parametrize(("claims", "reason"), BAD_TOKENS.values(), ids=BAD_TOKENS.keys())
async def test_bad_service_account_tokens_are_refused(claims: dict[str, Any], reason: str) -> None:
    with pytest.raises(InvalidToken, match=reason):
        await _service_accounts()(ISSUER_KEY.sign(claims))


async def test_a_token_signed_with_another_key_is_refused() -> None:
    forger = TokenIssuer(ec.generate_private_key(ec.SECP256R1()))
    with pytest.raises(InvalidToken, match="signature"):
        await _service_accounts()(forger.sign(_claims()))


async def test_a_token_is_refused_once_its_pod_is_deleted() -> None:
    pods = Objects(POD)
    authenticate = _service_accounts(pods=pods)
    token = ISSUER_KEY.sign(_claims())
    assert await authenticate(token) is not None
    pods.items.clear()
    with pytest.raises(InvalidToken):
        await authenticate(token)


async def test_legacy_secret_tokens_are_checked_against_their_secret() -> None:
    prefix = "kubernetes.io/serviceaccount/"
    token = ISSUER_KEY.sign(
        {
            "iss": "kubernetes/serviceaccount",
            prefix + "namespace": "team",
            prefix + "secret.name": "robot-token",
            prefix + "service-account.name": "robot",
            prefix + "service-account.uid": "sa-uid",
            "sub": "system:serviceaccount:team:robot",
        }
    )

    def secret(value: str) -> Secret:
        return Secret(
            metadata=ObjectMeta(name="robot-token", namespace="team"),
            type="kubernetes.io/service-account-token",
            data={"token": base64.b64encode(value.encode()).decode()},
        )

    user = await _service_accounts(secrets=Objects(secret(token)))(token)
    assert user is not None and user.name == "system:serviceaccount:team:robot"
    with pytest.raises(InvalidToken, match="no longer holds"):
        await _service_accounts(secrets=Objects(secret("rotated")))(token)


async def test_static_token_file(tmp_path: Path) -> None:
    path = tmp_path / "tokens.csv"
    path.write_text('# comment\nsecret1,alice,1001,"devs,ops"\nsecret2,bob,1002\n')
    tokens = StaticTokens(load_token_file(path))
    assert await tokens("secret1") == User("alice", ("devs", "ops", AUTHENTICATED), uid="1001")
    assert await tokens("secret2") == User("bob", (AUTHENTICATED,), uid="1002")
    assert await tokens("secret3") is None
    path.write_text("secret1,alice,1\nonlytoken\n")
    with pytest.raises(ValueError, match=":2: expected token,user,uid"):
        load_token_file(path)


def _bootstrap_secret(**data: str) -> Secret:
    values = {
        "token-id": "abcdef",
        "token-secret": "0123456789abcdef",
        "usage-bootstrap-authentication": "true",
        "auth-extra-groups": "system:bootstrappers:kubelab:default-node-token",
        **data,
    }
    return Secret(
        metadata=ObjectMeta(name="bootstrap-token-abcdef", namespace="kube-system"),
        type="bootstrap.kubernetes.io/token",
        string_data=values,
    )


async def test_bootstrap_tokens() -> None:
    clock = Clock()
    token = "abcdef.0123456789abcdef"
    user = await BootstrapTokens(Objects(_bootstrap_secret()), clock)(token)
    assert user == User(
        "system:bootstrap:abcdef",
        ("system:bootstrappers", "system:bootstrappers:kubelab:default-node-token", AUTHENTICATED),
    )
    assert await BootstrapTokens(Objects(), clock)("not-a-bootstrap-token") is None


REFUSED_BOOTSTRAP = {
    "wrong secret": {"token-secret": "fedcba9876543210"},
    "not for authentication": {"usage-bootstrap-authentication": "false"},
    "expired": {"expiration": "2026-11-22T11:00:00Z"},
    "unreadable expiration": {"expiration": "tomorrow"},
    "expiration without a zone": {"expiration": "2026-11-23T12:00:00"},
    "foreign group": {"auth-extra-groups": "system:masters"},
}


@pytest.mark.parametrize("data", REFUSED_BOOTSTRAP.values(), ids=REFUSED_BOOTSTRAP.keys())
async def test_bad_bootstrap_tokens_are_refused(data: dict[str, str]) -> None:
    with pytest.raises(InvalidToken):
        await BootstrapTokens(Objects(_bootstrap_secret(**data)), Clock())(
            "abcdef.0123456789abcdef"
        )


async def test_the_chain_refuses_what_no_authenticator_accepts() -> None:
    service_accounts = _service_accounts()
    chain = TokenChain([StaticTokens({}), service_accounts], [ISSUER], service_accounts)
    for garbage in ("garbage", "a.b.c", "x" * 5000, "eyJhbGciOiJub25lIn0.e30."):
        with pytest.raises(InvalidToken):
            await chain.authenticate(garbage)
    user, audiences = await chain.authenticate(ISSUER_KEY.sign(_claims()))
    assert user.name == "system:serviceaccount:team:robot"
    assert audiences == [ISSUER]
    with pytest.raises(InvalidToken):
        await chain.authenticate(ISSUER_KEY.sign(_claims()), ["https://vault"])
    request = make_mocked_request("GET", "/api", headers={"Authorization": "Bearer garbage"})
    with pytest.raises(ApiError) as refused:
        await chain(request)
    assert (refused.value.code, refused.value.reason) == (401, "Unauthorized")
    assert await chain(make_mocked_request("GET", "/api")) is None


# Impersonation.

ADMIN = User("admin", ("admins", AUTHENTICATED))


def _may_impersonate(allowed: set[tuple[str, str, str]]) -> Any:
    def authorize(user: User, info: RequestInfo) -> bool:
        assert info.verb == "impersonate"
        resource = f"{info.resource}/{info.subresource}" if info.subresource else info.resource
        return (resource, info.namespace, info.name) in allowed

    return authorize


def _request(*headers: tuple[str, str]) -> Any:
    return make_mocked_request("GET", "/api/v1/pods", headers=CIMultiDict(headers))


def test_impersonation_replaces_the_user_when_allowed() -> None:
    authorize = _may_impersonate({("users", "", "jane"), ("groups", "", "devs")})
    user = impersonate(
        _request(("Impersonate-User", "jane"), ("Impersonate-Group", "devs")), ADMIN, authorize
    )
    assert user == User("jane", ("devs", AUTHENTICATED))
    assert impersonate(_request(), ADMIN, authorize) is ADMIN


def test_impersonating_a_service_account_implies_its_groups() -> None:
    authorize = _may_impersonate({("serviceaccounts", "team", "robot")})
    user = impersonate(
        _request(("Impersonate-User", "system:serviceaccount:team:robot")), ADMIN, authorize
    )
    assert user.groups == ("system:serviceaccounts", "system:serviceaccounts:team", AUTHENTICATED)


def test_impersonation_is_refused_part_by_part() -> None:
    authorize = _may_impersonate({("users", "", "jane")})
    with pytest.raises(ApiError) as refused:
        impersonate(
            _request(("Impersonate-User", "jane"), ("Impersonate-Group", "system:masters")),
            ADMIN,
            authorize,
        )
    assert refused.value.code == 403
    assert refused.value.message == (
        'groups "system:masters" is forbidden: User "admin" cannot impersonate resource '
        '"groups" in API group "" at the cluster scope'
    )
    with pytest.raises(ApiError) as extra:
        impersonate(
            _request(("Impersonate-User", "jane"), ("Impersonate-Extra-Scopes", "view")),
            ADMIN,
            authorize,
        )
    assert "userextras/scopes" in extra.value.message
    with pytest.raises(ApiError) as no_user:
        impersonate(_request(("Impersonate-Group", "devs")), ADMIN, authorize)
    assert no_user.value.code == 400


# Fuzzing: whatever a client sends as a token, the answer is a user or InvalidToken.

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
_claim_values = st.fixed_dictionaries(
    {},
    optional={
        "iss": st.sampled_from([ISSUER, "kubernetes/serviceaccount"]) | _json,
        "aud": st.sampled_from([[ISSUER], ISSUER]) | _json,
        "exp": st.integers() | _json,
        "nbf": st.integers() | _json,
        "kubernetes.io": st.fixed_dictionaries(
            {},
            optional={"namespace": _json, "serviceaccount": _json, "pod": _json, "secret": _json},
        )
        | _json,
        "kubernetes.io/serviceaccount/namespace": _json,
        "kubernetes.io/serviceaccount/secret.name": _json,
        "kubernetes.io/serviceaccount/service-account.name": _json,
        "kubernetes.io/serviceaccount/service-account.uid": _json,
    },
)


def _outcome(token: str) -> str:
    service_accounts = _service_accounts()
    chain = TokenChain(
        [
            StaticTokens({"known": User("u", ())}),
            service_accounts,
            BootstrapTokens(Objects(), Clock()),
        ],
        [ISSUER],
        service_accounts,
    )
    try:
        asyncio.run(chain.authenticate(token))
    except InvalidToken:
        return "refused"
    return "accepted"


@given(st.text() | st.text(alphabet="abcdef0123456789.-_=").map(lambda t: t[:64]))
def test_arbitrary_text_is_refused_cleanly(token: str) -> None:
    assert _outcome(token) in ("refused", "accepted")


@given(_claim_values)
@example({"iss": ISSUER, "aud": [{}], "exp": 2**62})
@example({"iss": ISSUER, "aud": ISSUER, "exp": 2**62, "kubernetes.io": {"serviceaccount": []}})
def test_signed_tokens_with_arbitrary_claims_never_crash(claims: dict[str, Any]) -> None:
    assert _outcome(ISSUER_KEY.sign(claims)) in ("refused", "accepted")
