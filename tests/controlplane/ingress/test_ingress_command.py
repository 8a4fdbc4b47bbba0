"""``kubelab ingress`` as a process against a real API server, with backends on loopback.

The objects are made through the API as users make them (an IngressClass, Services,
EndpointSlices naming the local backends, a TLS Secret, Ingresses); requests go to the proxy's
ports with Host headers and TLS server names: routing by host and path, certificates by SNI
(the fake default one otherwise), 404/503 of its own, keep-alive, status from the published
LoadBalancer Service, an Ingress changed while a long response streams, and bad references that
leave it serving."""

from __future__ import annotations

import asyncio
import base64
import re
import signal
import socket
import ssl
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest
from cryptography import x509

from controlplane.ingress.command import FAKE_CERTIFICATE, default_certificate
from controlplane.ingress.controller import IngressController
from controlplane.ingress.proxy import IngressProxy, open_endpoint
from controlplane.ingress.routing import Address, RoutingTable
from kube.api.codec import from_builtins
from kube.api.kinds.core_v1.cluster import Secret
from kube.api.kinds.core_v1.service import Service
from kube.api.kinds.discovery_v1 import EndpointSlice
from kube.api.kinds.networking_v1 import Ingress, IngressClass
from kube.api.meta_v1 import Resource
from kube.client.informers import SharedInformerFactory
from kube.client.rest import Client
from kube.pki import CertificateAuthority
from kubelab.cli import build_parser
from tests.servers import ServerProcess, start_component

PATIENCE = 15.0
LOOPBACK = "127.0.0.1"
SLOW_PARTS = 8
SLOW_PAUSE = 0.25
INSECURE = ssl.create_default_context()
INSECURE.check_hostname = False
INSECURE.verify_mode = ssl.CERT_NONE


@dataclass
class Ingresses:
    """A controller and its proxy, and what a test needs to drive them."""

    client: Client
    namespace: str
    class_name: str
    http: int
    https: int

    async def make(self, raw: dict[str, Any], cls: type[Resource]) -> Any:
        raw.setdefault("metadata", {}).setdefault("namespace", self.namespace)
        return await self.client.create(from_builtins(raw, cls).obj)


Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def backend_named(name: str) -> Handler:
    """An HTTP/1.1 server that answers ``NAME PATH HOST PROTO BODY-LENGTH`` (keep-alive; the
    proto from X-Forwarded-Proto), and at ``/slow``
    streams SLOW_PARTS lines SLOW_PAUSE apart, chunked."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while head := await reader.readuntil(b"\r\n\r\n"):
                lines = head.decode().split("\r\n")
                path = lines[0].split(" ")[1]
                headers = dict(line.lower().split(": ", 1) for line in lines[1:] if line)
                if path == "/slow":
                    writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
                    for part in range(SLOW_PARTS):
                        line = f"{name} part {part}\n".encode()
                        writer.write(b"%x\r\n%s\r\n" % (len(line), line))
                        await writer.drain()
                        await asyncio.sleep(SLOW_PAUSE)
                    writer.write(b"0\r\n\r\n")
                else:
                    sent = await reader.readexactly(int(headers.get("content-length", "0")))
                    body = (
                        f"{name} {path} {headers.get('host')} "
                        f"{headers.get('x-forwarded-proto')} {len(sent)}\n"
                    ).encode()
                    writer.write(
                        b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
                    )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    return serve


@pytest.fixture
async def backends() -> AsyncIterator[dict[str, int]]:
    """Backends ``apple``, ``banana`` and ``cherry`` on loopback: name → port."""
    servers = {
        name: await asyncio.start_server(backend_named(name), LOOPBACK, 0)
        for name in ("apple", "banana", "cherry")
    }
    yield {name: int(s.sockets[0].getsockname()[1]) for name, s in servers.items()}
    for server in servers.values():
        server.close()


async def make_class(client: Client) -> tuple[str, str]:
    """An IngressClass of the test's own: its name and its controller."""
    name = f"lab-{uuid.uuid4().hex[:8]}"
    raw = {"metadata": {"name": name}, "spec": {"controller": f"kubelab.io/{name}"}}
    await client.create(from_builtins(raw, IngressClass).obj)
    return name, f"kubelab.io/{name}"


async def dial_loopback(address: Address) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Endpoints at TEST-NET-1 addresses (EndpointSlices may not hold loopback ones) reached
    at the same port on loopback."""
    assert address[0].startswith("192.0.2."), address
    return await open_endpoint((LOOPBACK, address[1]))


@pytest.fixture
async def ingresses(client: Client, namespace: str) -> AsyncIterator[Ingresses]:
    """The controller and proxy in this process, for an IngressClass of the test's own."""
    class_name, controller_name = await make_class(client)
    proxy = IngressProxy(RoutingTable(), default_certificate(), dial_loopback)
    informers = SharedInformerFactory(client)
    controller = IngressController(client, informers, proxy.swap, controller=controller_name)
    http, https = await proxy.start((LOOPBACK, 0), (LOOPBACK, 0))
    informers.start()
    running = asyncio.create_task(controller.run())
    try:
        yield Ingresses(client, namespace, class_name, http, https)
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
        await informers.shutdown()
        await proxy.close()
        await client.delete(IngressClass, class_name)


async def expose(ing: Ingresses, name: str, *ports: int) -> None:
    """Service ``name`` (port 80, named http) and a slice per port of its backends, one
    endpoint each (see ``dial_loopback``; no ports: a Service without endpoints)."""
    spec = {"ports": [{"name": "http", "port": 80, "targetPort": 8080}]}
    await ing.make({"metadata": {"name": name}, "spec": spec}, Service)
    for i, port in enumerate(ports):
        endpoint_slice = {
            "metadata": {"name": f"{name}-{i}", "labels": {"kubernetes.io/service-name": name}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": [f"192.0.2.{i + 1}"], "conditions": {"ready": True}}],
            "ports": [{"name": "http", "port": port, "protocol": "TCP"}],
        }
        await ing.make(endpoint_slice, EndpointSlice)


def path(p: str, path_type: str, service: str) -> dict[str, Any]:
    return {
        "path": p,
        "pathType": path_type,
        "backend": {"service": {"name": service, "port": {"name": "http"}}},
    }


def tls_secret(name: str, hosts: list[str]) -> dict[str, Any]:
    pair = CertificateAuthority.create("test-ca").issue(hosts[0], server=True, dns_names=hosts)
    return {
        "metadata": {"name": name},
        "type": "kubernetes.io/tls",
        "data": {
            "tls.crt": base64.b64encode(pair.cert_pem).decode(),
            "tls.key": base64.b64encode(pair.key_pem).decode(),
        },
    }


async def get(
    session: aiohttp.ClientSession, port: int, host: str, target: str, *, tls: bool = False
) -> tuple[int, str]:
    """Status and body of one request for ``host`` (also the TLS server name)."""
    scheme = "https" if tls else "http"
    options: dict[str, Any] = {"headers": {"Host": host}}
    if tls:
        options |= {"ssl": INSECURE, "server_hostname": host}
    async with session.get(f"{scheme}://{LOOPBACK}:{port}{target}", **options) as response:
        return response.status, await response.text()


async def certificate_name(port: int, server_name: str) -> str:
    """The common name of the certificate served to a TLS client naming ``server_name``."""
    _, writer = await asyncio.open_connection(
        LOOPBACK, port, ssl=INSECURE, server_hostname=server_name
    )
    der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    writer.close()
    subject = x509.load_der_x509_certificate(der).subject
    return str(subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)[0].value)


async def eventually(probe: Callable[[], Awaitable[Any]], want: Callable[[Any], bool]) -> Any:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + PATIENCE
    while not want(got := await probe()):
        assert loop.time() < deadline, f"still {got!r}"
        await asyncio.sleep(0.1)
    return got


async def test_hosts_paths_tls_and_answers_of_its_own(
    ingresses: Ingresses, backends: dict[str, int]
) -> None:
    ing = ingresses
    for name, port in backends.items():
        await expose(ing, name, port)
    await expose(ing, "empty")
    await ing.make(tls_secret("fruit-tls", ["secure.example.com"]), Secret)
    await ing.make(
        {
            "metadata": {"name": "junk"},
            "type": "kubernetes.io/tls",
            "data": {
                "tls.crt": base64.b64encode(b"not a certificate").decode(),
                "tls.key": base64.b64encode(b"nor a key").decode(),
            },
        },
        Secret,
    )
    spec = {
        "ingressClassName": ing.class_name,
        "tls": [
            {"hosts": ["secure.example.com"], "secretName": "fruit-tls"},
            {"hosts": ["junk.example.com"], "secretName": "junk"},
            {"hosts": ["gone.example.com"], "secretName": "no-such-secret"},
        ],
        "rules": [
            {
                "host": "foo.example.com",
                "http": {
                    "paths": [
                        path("/", "Prefix", "apple"),
                        path("/banana", "Prefix", "banana"),
                        path("/exact", "Exact", "cherry"),
                        path("/empty", "Prefix", "empty"),
                        path("/missing", "Prefix", "no-such-service"),
                    ]
                },
            },
            {"host": "*.wild.example.com", "http": {"paths": [path("/", "Prefix", "cherry")]}},
            {"host": "secure.example.com", "http": {"paths": [path("/", "Prefix", "banana")]}},
        ],
    }
    await ing.make({"metadata": {"name": "fruit"}, "spec": spec}, Ingress)
    other_class = {
        "ingressClassName": "someone-else",
        "rules": [{"host": "other.example.com", "http": {"paths": [path("/", "Prefix", "apple")]}}],
    }
    await ing.make({"metadata": {"name": "not-ours"}, "spec": other_class}, Ingress)

    async with aiohttp.ClientSession() as session:
        await eventually(
            lambda: get(session, ing.http, "foo.example.com", "/"), lambda r: r[0] == 200
        )
        cases = [
            ("foo.example.com", "/", "apple /"),
            ("foo.example.com", "/banana/split?x=1", "banana /banana/split?x=1"),
            ("foo.example.com", "/bananas", "apple /bananas"),
            ("foo.example.com", "/exact", "cherry /exact"),
            ("foo.example.com", "/exact/", "apple /exact/"),
            ("FOO.example.com:80", "/", "apple /"),
            ("a.wild.example.com", "/x", "cherry /x"),
        ]
        for host, target, expected in cases:
            status, body = await get(session, ing.http, host, target)
            assert (status, body.split(" ")[:2]) == (200, expected.split(" ")), (host, target)
            assert body.split(" ")[2:4] == [host.lower(), "http"]
        for host, target, status in [
            ("b.a.wild.example.com", "/", 404),
            ("other.example.com", "/", 404),
            ("foo.example.com", "/empty", 503),
            ("foo.example.com", "/missing", 503),
        ]:
            got = await get(session, ing.http, host, target)
            assert got[0] == status, (host, target, got)
        assert (await get(session, ing.http, "nowhere.test", "/"))[1] == "default backend - 404\n"
        upload = b"x" * 300_000
        async with session.post(
            f"http://{LOOPBACK}:{ing.http}/banana/up",
            data=upload,
            headers={"Host": "foo.example.com"},
        ) as posted:
            assert (await posted.text()).split() == [
                "banana",
                "/banana/up",
                "foo.example.com",
                "http",
                "300000",
            ]

        status, body = await get(session, ing.https, "secure.example.com", "/s", tls=True)
        name = await certificate_name(ing.https, "secure.example.com")
        assert (status, body.split(" ")[0], name) == (200, "banana", "secure.example.com")
        assert body.split(" ")[3] == "https"
        for server_name, wanted in [
            ("foo.example.com", 200),
            ("junk.example.com", 404),  # its certificate does not load
            ("gone.example.com", 404),  # its secret does not exist
        ]:
            status, _ = await get(session, ing.https, server_name, "/", tls=True)
            served = await certificate_name(ing.https, server_name)
            assert (status, served) == (wanted, FAKE_CERTIFICATE), server_name


async def test_endpoints_in_turn_and_502_when_none_answers(
    ingresses: Ingresses, backends: dict[str, int]
) -> None:
    ing = ingresses
    with socket.socket() as unused:
        unused.bind((LOOPBACK, 0))
        closed = int(unused.getsockname()[1])  # nothing listens there once closed

    async def hang_up(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    rude = await asyncio.start_server(hang_up, LOOPBACK, 0)
    await expose(ing, "pair", backends["apple"], backends["banana"])
    await expose(ing, "half", closed, backends["cherry"])
    await expose(ing, "down", closed)
    await expose(ing, "rude", int(rude.sockets[0].getsockname()[1]))
    paths = [path(f"/{name}", "Prefix", name) for name in ("pair", "half", "down", "rude")]
    spec = {"ingressClassName": ing.class_name, "rules": [{"http": {"paths": paths}}]}
    await ing.make({"metadata": {"name": "turns"}, "spec": spec}, Ingress)
    try:
        async with aiohttp.ClientSession() as session:
            await eventually(lambda: get(session, ing.http, "any", "/pair"), lambda r: r[0] == 200)
            names = [(await get(session, ing.http, "any", "/pair"))[1].split()[0] for _ in range(4)]
            assert sorted(names) == ["apple", "apple", "banana", "banana"]
            assert names[0] != names[1]
            half = [(await get(session, ing.http, "any", "/half"))[1].split()[0] for _ in range(3)]
            assert half == ["cherry"] * 3  # the refusing endpoint skipped
            assert (await get(session, ing.http, "any", "/down"))[0] == 502
            assert await get(session, ing.http, "any", "/rude") == (502, "bad gateway\n")
    finally:
        rude.close()


async def test_a_long_response_finishes_across_an_ingress_change(
    ingresses: Ingresses, backends: dict[str, int]
) -> None:
    ing = ingresses
    for name in ("apple", "banana"):
        await expose(ing, name, backends[name])
    rules: list[dict[str, Any]] = [
        {"host": "long.example.com", "http": {"paths": [path("/", "Prefix", "apple")]}}
    ]
    spec = {"ingressClassName": ing.class_name, "rules": rules}
    await ing.make({"metadata": {"name": "long"}, "spec": spec}, Ingress)
    async with aiohttp.ClientSession() as session:
        await eventually(
            lambda: get(session, ing.http, "long.example.com", "/"), lambda r: r[0] == 200
        )
        async with session.get(
            f"http://{LOOPBACK}:{ing.http}/slow", headers={"Host": "long.example.com"}
        ) as slow:
            first = await slow.content.readline()
            assert first == b"apple part 0\n"
            rules[0]["http"]["paths"] = [path("/", "Prefix", "banana")]
            await ing.client.patch(Ingress, "long", ing.namespace, {"spec": {"rules": rules}})
            await eventually(
                lambda: get(session, ing.http, "long.example.com", "/"),
                lambda r: r[1].startswith("banana"),
            )
            rest = await slow.content.read()
        assert rest.decode().splitlines() == [f"apple part {i}" for i in range(1, SLOW_PARTS)]


async def test_the_command_serves_reports_status_and_stops_on_sigterm(
    apiserver: ServerProcess, client: Client, namespace: str
) -> None:
    """As the add-on runs it: listening at once, the fake certificate, /healthz and /ready,
    and status.loadBalancer from the published Service (given its address by hand here: no
    cloud runs beside this API server)."""
    class_name, controller_name = await make_class(client)
    process, line = await start_component(
        "ingress",
        "--kubeconfig",
        str(apiserver.kubeconfig),
        f"--controller-class={controller_name}",
        f"--publish-service={namespace}/lb",
        f"--http-address={LOOPBACK}:0",
        f"--https-address={LOOPBACK}:0",
        f"--healthz-address={LOOPBACK}:0",
    )
    try:
        match = re.search(r":(\d+) \(http\) and .*:(\d+) \(https\); .* on port (\d+)", line)
        assert match, line
        http, https, health = (int(g) for g in match.groups())
        spec = {
            "ingressClassName": class_name,
            "defaultBackend": {"service": {"name": "web", "port": {"number": 80}}},
        }
        ing = Ingresses(client, namespace, class_name, http, https)
        await ing.make({"metadata": {"name": "web"}, "spec": spec}, Ingress)
        service = {
            "metadata": {"name": "lb"},
            "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]},
        }
        await ing.make(service, Service)
        patch = {"status": {"loadBalancer": {"ingress": [{"ip": "10.240.0.200", "ipMode": "VIP"}]}}}
        await client.patch(Service, "lb", namespace, patch, subresource="status")

        async def addresses() -> list[str]:
            got = await client.get(Ingress, "web", namespace)
            balancer = got.status.load_balancer if got.status else None
            return [p.ip or "" for p in (balancer.ingress if balancer else None) or ()]

        assert await eventually(addresses, bool) == ["10.240.0.200"]
        async with aiohttp.ClientSession() as session:
            for target in ("/healthz", "/ready"):
                async with session.get(f"http://{LOOPBACK}:{health}{target}") as response:
                    assert (response.status, await response.text()) == (200, "ok")
            status, body = await get(session, http, "web.example.com", "/")
            assert (status, body) == (503, "no endpoints for " + namespace + "/web:80\n")
            status, _ = await get(session, https, "web.example.com", "/", tls=True)
            assert (status, await certificate_name(https, "web")) == (503, FAKE_CERTIFICATE)
        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), 30) == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        await client.delete(IngressClass, class_name)


async def test_without_kubeconfig_outside_a_pod_it_says_why() -> None:
    process, _ = await start_component("ingress", "--http-address=127.0.0.1:0")
    assert await asyncio.wait_for(process.wait(), 30) == 2
    assert process.stderr is not None
    assert "KUBERNETES_SERVICE_HOST" in (await process.stderr.read()).decode()


@pytest.mark.parametrize(
    "flag",
    ["--http-address=localhost:80", "--https-address=0.0.0.0:70000", "--publish-service=lb"],
    ids=["http-host", "https-port", "publish-service"],
)
def test_bad_flags_are_refused(flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["ingress", flag])
    assert exit_info.value.code == 2
    assert "kubelab ingress: error: argument" in capsys.readouterr().err
