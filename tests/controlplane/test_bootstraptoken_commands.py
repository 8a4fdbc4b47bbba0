"""``kubelab token list`` and ``kubelab token delete`` against an API server in the test's
event loop, run as users run them (``kubelab.cli.main``, in a thread of its own): kubeadm's
table, columns and placeholders, unreadable token Secrets reported and skipped, deletion by
token id or whole token, and kubeadm's messages and status when something is wrong."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from controlplane import bootstraptoken
from controlplane.storage.sqlite import SQLiteStore
from kube.api.kinds.core_v1.cluster import Secret
from kube.api.meta_v1 import ObjectMeta
from kube.api.printing import rfc3339
from kube.client.errors import ApiError
from kube.client.rest import Client
from kube.table import aligned
from kubelab import cli
from tests.controlplane.apiserver.inprocess import serving

TOKEN_TYPE = "bootstrap.kubernetes.io/token"


@dataclass
class Cluster:
    admin: Client
    kubeconfig: Path

    async def kubelab(self, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
        """``kubelab token ARGV...``: its status, stdout and stderr."""
        capsys.readouterr()
        code = await asyncio.to_thread(
            cli.main, ["token", *argv, "--kubeconfig", str(self.kubeconfig)]
        )
        out, err = capsys.readouterr()
        return code, out, err

    async def secret_names(self) -> list[str]:
        found = await self.admin.list(Secret, "kube-system")
        return sorted(s.metadata.name or "" for s in found.items)


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    store = await SQLiteStore.open(tmp_path / "state.db")
    data_dir = tmp_path / "data"
    try:
        async with serving(store, data_dir):
            kubeconfig = data_dir / "admin.kubeconfig"
            async with Client.from_kubeconfig(kubeconfig) as admin:
                yield Cluster(admin, kubeconfig)
    finally:
        await store.close()


async def test_list_prints_kubeadms_table(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    now = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
    soon, past = now + datetime.timedelta(minutes=10), now - datetime.timedelta(hours=1)
    await cluster.admin.create(
        bootstraptoken.token_secret(
            "abcdef", "0123456789abcdef", expires=soon, description="kubelab lab node add node4"
        )
    )
    await cluster.admin.create(
        bootstraptoken.token_secret(
            "ghijkl", "0123456789abcdef", expires=None, groups=("system:bootstrappers:ops",)
        )
    )
    await cluster.admin.create(
        bootstraptoken.token_secret("mnopqr", "0123456789abcdef", expires=past)
    )
    code, out, err = await cluster.kubelab(capsys, "list")
    assert (code, err) == (0, "")
    both = "authentication,signing"
    group = bootstraptoken.BOOTSTRAP_TOKEN_GROUP
    assert out.splitlines() == aligned(
        [
            ("TOKEN", "TTL", "EXPIRES", "USAGES", "DESCRIPTION", "EXTRA GROUPS"),
            (
                "abcdef.0123456789abcdef",
                "9m",
                rfc3339(soon),
                both,
                "kubelab lab node add node4",
                group,
            ),
            (
                "ghijkl.0123456789abcdef",
                "<forever>",
                "<never>",
                both,
                "<none>",
                "system:bootstrappers:ops",
            ),
            ("mnopqr.0123456789abcdef", "<invalid>", rfc3339(past), both, "<none>", group),
        ],
        gap=3,
    )
    assert out.splitlines()[1].startswith("abcdef.0123456789abcdef   9m          20")


async def test_list_without_tokens_prints_nothing(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await cluster.kubelab(capsys, "list") == (0, "", "")


def _token_secret(name: str, **data: str) -> Secret:
    return Secret(
        metadata=ObjectMeta(name=name, namespace="kube-system"), type=TOKEN_TYPE, string_data=data
    )


async def test_list_reports_unreadable_token_secrets_and_goes_on(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = "0123456789abcdef"
    for broken in (
        _token_secret("bootstrap-token-aaaaaa", **{"token-secret": secret}),
        _token_secret("bootstrap-token-bbbbbb", **{"token-id": "cccccc", "token-secret": secret}),
        _token_secret("bootstrap-token-dddddd", **{"token-id": "dddddd"}),
        _token_secret("bootstrap-token-eeeeee", **{"token-id": "eeeeee", "token-secret": "short"}),
        _token_secret(
            "bootstrap-token-ffffff",
            **{"token-id": "ffffff", "token-secret": secret, "expiration": "tomorrow"},
        ),
    ):
        await cluster.admin.create(broken)
    await cluster.admin.create(
        Secret(metadata=ObjectMeta(name="bootstrap-token-gggggg", namespace="kube-system"))
    )
    await cluster.admin.create(
        _token_secret("bootstrap-token-hhhhhh", **{"token-id": "hhhhhh", "token-secret": secret})
    )
    code, out, err = await cluster.kubelab(capsys, "list")
    assert code == 0
    assert [line.split()[:2] for line in out.splitlines()] == [
        ["TOKEN", "TTL"],
        ["hhhhhh.0123456789abcdef", "<forever>"],
    ]
    assert out.splitlines()[1].split()[2:] == ["<never>", "<none>", "<none>", "<none>"]
    assert err.splitlines() == [
        "bootstrap Token Secret has no token-id data: bootstrap-token-aaaaaa",
        "bootstrap token name is not of the form 'bootstrap-token-(token-id)'. "
        'Actual: "bootstrap-token-bbbbbb". Expected: "bootstrap-token-cccccc"',
        "bootstrap Token Secret has no token-secret data: bootstrap-token-dddddd",
        "bootstrap Token Secret is invalid and couldn't be parsed: the bootstrap token "
        '"eeeeee.short" was not of the form "\\A([a-z0-9]{6})\\.([a-z0-9]{16})\\Z"',
        'can\'t parse expiration time of bootstrap token "bootstrap-token-ffffff": '
        "Invalid isoformat string: 'tomorrow'",
    ]


async def test_delete_takes_token_ids_and_whole_tokens(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    tokens = [await bootstraptoken.create(cluster.admin, ttl=600) for _ in range(3)]
    ids = [token.split(".")[0] for token in tokens]
    code, out, err = await cluster.kubelab(capsys, "delete", ids[0], tokens[1])
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        f'bootstrap token "{ids[0]}" deleted',
        f'bootstrap token "{ids[1]}" deleted',
    ]
    assert await cluster.secret_names() == [f"bootstrap-token-{ids[2]}"]


async def test_delete_stops_at_the_first_bad_argument_or_refusal(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    token = await bootstraptoken.create(cluster.admin, ttl=600)
    token_id = token.split(".")[0]
    code, out, err = await cluster.kubelab(capsys, "delete", token_id, "not-a-token", "qwerty")
    assert (code, out) == (1, f'bootstrap token "{token_id}" deleted\n')
    assert err == (
        'kubelab token: given token didn\'t match pattern "\\A([a-z0-9]{6})\\.([a-z0-9]{16})\\Z" '
        'or "\\A[a-z0-9]{6}\\Z"\n'
    )
    code, out, err = await cluster.kubelab(capsys, "delete", "qwerty")
    assert (code, out) == (1, "")
    assert err.startswith('kubelab token: failed to delete bootstrap token "qwerty": ')
    assert "bootstrap-token-qwerty" in err and "not found" in err
    with pytest.raises(ApiError) as gone:
        await cluster.admin.get(Secret, f"bootstrap-token-{token_id}", "kube-system")
    assert gone.value.not_found


async def test_delete_without_a_token_says_what_it_wants(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = await cluster.kubelab(capsys, "delete")
    assert (code, out) == (1, "")
    assert err.startswith(
        "kubelab token: missing argument; 'token delete' is missing token of form"
    )
