"""Audit logging: ``--audit-policy-file`` and ``--audit-log-path``, as upstream's.

Every request gets an audit ID, returned as the ``Audit-Id`` header whether or not anything is
logged.  The policy (``audit.k8s.io/v1`` Policy) is a list of rules; the first rule that
matches a request (users, userGroups, verbs, resources by group/resources/resourceNames,
namespaces, nonResourceURLs) sets its level:
- ``None``: nothing is logged;
- ``Metadata``: who, what, when, from where, and the response code;
- ``Request``: and the request's object;
- ``RequestResponse``: and the response's object.
No rule matching means ``None``.  Events are written at the stages upstream writes them:
``RequestReceived``, ``ResponseStarted`` (watches, once the stream's headers are out),
``ResponseComplete``, or ``Panic`` when serving the request raised; ``omitStages`` (the
policy's and the rule's) leaves stages out, ``omitManagedFields`` the objects' managedFields.
Events carry ``annotations``: the authorization decision, and what admission recorded
(PodSecurity's ``pod-security.kubernetes.io/audit-violations``, webhooks' ``auditAnnotations``)
through ``annotations_of(request)``, the dict the request's ``RequestContext`` shares; the
``RequestReceived`` event, written before admission, has only the former.  The
``objectRef`` of a request with an object (a create, an update) is completed from the object
the handler decoded (``log_request_object``) at every level, as upstream's is: the name,
namespace, uid and resourceVersion the URL does not carry.

Each event is one JSON line of an ``audit.k8s.io/v1`` Event.  Requests never wait on the disk:
an event is encoded and handed to a writer thread through a queue; the thread appends (and,
with ``--audit-log-maxsize``, rotates to ``<path>.1`` .. ``<path>.<maxbackup>``).
"""

from __future__ import annotations

import datetime
import logging
import queue
import threading
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import msgspec
import yaml
from aiohttp import web

from controlplane.apiserver import auth
from controlplane.apiserver.endpoints.requestinfo import RequestInfo, parse
from kube.api.meta_v1 import ObjectMeta

log = logging.getLogger(__name__)

API_VERSION = "audit.k8s.io/v1"

LEVELS = ("None", "Metadata", "Request", "RequestResponse")
STAGES = ("RequestReceived", "ResponseStarted", "ResponseComplete", "Panic")


class PolicyError(ValueError):
    """The audit policy file is not one the server can use."""


@dataclass(frozen=True)
class GroupResources:
    group: str = ""
    resources: tuple[str, ...] = ()
    resource_names: tuple[str, ...] = ()

    def matches(self, info: RequestInfo) -> bool:
        if self.group != "*" and info.group != self.group:
            return False
        if self.resources:
            sub = info.subresource
            accepted = {"*", f"{info.resource}/{sub}", f"*/{sub}", f"{info.resource}/*"}
            if not sub:
                accepted = {"*", info.resource}
            if not accepted & set(self.resources):
                return False
        return not self.resource_names or info.name in self.resource_names


@dataclass(frozen=True)
class Rule:
    level: str
    users: tuple[str, ...] = ()
    user_groups: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ()
    resources: tuple[GroupResources, ...] = ()
    namespaces: tuple[str, ...] = ()
    non_resource_urls: tuple[str, ...] = ()
    omit_stages: tuple[str, ...] = ()
    omit_managed_fields: bool | None = None

    def matches(self, user: auth.User, info: RequestInfo) -> bool:
        if self.users and user.name not in self.users:
            return False
        if self.user_groups and not set(user.groups) & set(self.user_groups):
            return False
        if self.verbs and info.verb not in self.verbs:
            return False
        if info.is_resource_request:
            if self.non_resource_urls:
                return False
            if self.namespaces and info.namespace not in self.namespaces:
                return False
            return not self.resources or any(r.matches(info) for r in self.resources)
        if self.resources or self.namespaces:
            return False
        return not self.non_resource_urls or any(
            info.path == url or (url.endswith("*") and info.path.startswith(url[:-1]))
            for url in self.non_resource_urls
        )


@dataclass(frozen=True)
class Policy:
    rules: Sequence[Rule] = ()
    omit_stages: tuple[str, ...] = ()
    omit_managed_fields: bool = False

    def decide(self, user: auth.User, info: RequestInfo) -> tuple[str, set[str], bool]:
        """The level, the stages left out and whether managedFields are, for a request."""
        for rule in self.rules:
            if rule.matches(user, info):
                omit = rule.omit_managed_fields
                return (
                    rule.level,
                    {*self.omit_stages, *rule.omit_stages},
                    self.omit_managed_fields if omit is None else omit,
                )
        return "None", set(), False


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise PolicyError(f"{where}: expected a list of strings")
    return tuple(value)


def _stages(value: Any, where: str) -> tuple[str, ...]:
    stages = _strings(value, where)
    for stage in stages:
        if stage not in STAGES:
            raise PolicyError(f"{where}: unknown stage {stage!r} (one of {', '.join(STAGES)})")
    return stages


def load_policy(path: Path) -> Policy:
    """Read and check a Policy file (``PolicyError`` says what is wrong)."""
    try:
        document = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as error:
        raise PolicyError(f"cannot read {path}: {error}") from None
    if not isinstance(document, dict) or document.get("kind") != "Policy":
        raise PolicyError(f"{path}: expected kind Policy")
    if document.get("apiVersion") != API_VERSION:
        raise PolicyError(f"{path}: expected apiVersion {API_VERSION}")
    rules = []
    for index, entry in enumerate(document.get("rules") or []):
        where = f"rules[{index}]"
        if not isinstance(entry, dict):
            raise PolicyError(f"{where}: expected a mapping")
        level = entry.get("level")
        if level not in LEVELS:
            raise PolicyError(f"{where}.level: {level!r} is not one of {', '.join(LEVELS)}")
        resources = []
        for r, item in enumerate(entry.get("resources") or []):
            if not isinstance(item, dict):
                raise PolicyError(f"{where}.resources[{r}]: expected a mapping")
            resources.append(
                GroupResources(
                    str(item.get("group", "")),
                    _strings(item.get("resources"), f"{where}.resources[{r}].resources"),
                    _strings(item.get("resourceNames"), f"{where}.resources[{r}].resourceNames"),
                )
            )
        urls = _strings(entry.get("nonResourceURLs"), f"{where}.nonResourceURLs")
        if urls and (resources or entry.get("namespaces")):
            raise PolicyError(f"{where}: nonResourceURLs cannot be mixed with resources")
        omit = entry.get("omitManagedFields")
        rules.append(
            Rule(
                level=level,
                users=_strings(entry.get("users"), f"{where}.users"),
                user_groups=_strings(entry.get("userGroups"), f"{where}.userGroups"),
                verbs=_strings(entry.get("verbs"), f"{where}.verbs"),
                resources=tuple(resources),
                namespaces=_strings(entry.get("namespaces"), f"{where}.namespaces"),
                non_resource_urls=urls,
                omit_stages=_stages(entry.get("omitStages"), f"{where}.omitStages"),
                omit_managed_fields=None if omit is None else bool(omit),
            )
        )
    return Policy(
        tuple(rules),
        _stages(document.get("omitStages"), "omitStages"),
        bool(document.get("omitManagedFields", False)),
    )


class LogWriter:
    """Appends lines to a file on a thread of its own; ``write`` never blocks the caller.

    The file is opened at once, so an unwritable path fails the server's start.  With
    ``max_size`` (bytes) the file is rotated before it would grow past it, keeping
    ``max_backups`` old files (``path.1`` newest; 0 keeps every one).  Should writing fail
    later, the error is logged once and further events are dropped.
    """

    def __init__(self, path: Path, max_size: int = 0, max_backups: int = 0) -> None:
        self.path = path
        self.max_size = max_size
        self.max_backups = max_backups
        self._queue: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._failed = False
        path.parent.mkdir(parents=True, exist_ok=True)
        self._out: IO[bytes] = path.open("ab")
        self._thread = threading.Thread(target=self._run, name="audit-writer", daemon=True)
        self._thread.start()

    def write(self, line: bytes) -> None:
        if not self._failed:
            self._queue.put(line)

    def close(self) -> None:
        """Write what is queued, then stop the thread."""
        self._queue.put(None)
        self._thread.join()

    def _run(self) -> None:
        try:
            while True:
                line = self._queue.get()
                if line is None:
                    return
                size = self._out.tell() if self.max_size else 0
                if size and size + len(line) > self.max_size:
                    self._out.close()
                    self._rotate()
                    self._out = self.path.open("ab")
                self._out.write(line)
                if self._queue.empty():
                    self._out.flush()
        except OSError:
            self._failed = True
            log.exception("writing the audit log %s failed; auditing stops", self.path)
        finally:
            self._out.close()

    def _rotate(self) -> None:
        """``path`` becomes ``path.1``, ``path.1`` ``path.2`` and so on; the oldest beyond
        ``max_backups`` are removed."""
        prefix = f"{self.path.name}."
        numbers = sorted(
            (
                int(p.name[len(prefix) :])
                for p in self.path.parent.glob(f"{prefix}*")
                if p.name[len(prefix) :].isdigit()
            ),
            reverse=True,
        )
        for number in numbers:
            older = self.path.with_name(f"{prefix}{number}")
            if self.max_backups and number >= self.max_backups:
                older.unlink()
            else:
                older.replace(self.path.with_name(f"{prefix}{number + 1}"))
        self.path.replace(self.path.with_name(f"{prefix}1"))


AUTHENTICATED = web.RequestKey("audit-authenticated", auth.User)
"""The user the credentials name (before impersonation), set by the server."""
IMPERSONATED = web.RequestKey("audit-impersonated", auth.User)
"""The user impersonation switched to, when it did."""
DECISION = web.RequestKey("audit-decision", bool)
"""The authorization decision."""
_RECORD: web.RequestKey[_Record] = web.RequestKey("audit-record")


@dataclass
class _Record:
    """One request's audit event, built up as it is served."""

    audit_id: str
    info: RequestInfo
    received: str
    level: str = "None"
    omit: set[str] = field(default_factory=set)
    omit_managed_fields: bool = False
    decided: bool = False
    request_object: Any = None
    object_meta: dict[str, str] = field(default_factory=dict)
    """The request object's namespace, name, uid and resourceVersion (``log_request_object``)."""
    annotations: dict[str, str] = field(default_factory=dict)
    """What the request's handling added (admission's ``RequestContext.audit_annotations``)."""


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _user(user: auth.User) -> dict[str, Any]:
    shown: dict[str, Any] = {"username": user.name, "groups": list(user.groups)}
    if user.uid:
        shown["uid"] = user.uid
    if user.extra:
        shown["extra"] = {k: list(v) for k, v in user.extra.items()}
    return shown


def _without_managed_fields(obj: Any) -> Any:
    if isinstance(obj, dict):
        meta = obj.get("metadata")
        if isinstance(meta, dict) and "managedFields" in meta:
            obj = {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}
        if isinstance(obj.get("items"), list):
            obj = {**obj, "items": [_without_managed_fields(i) for i in obj["items"]]}
    return obj


def _json(body: bytes | None) -> Any:
    if not body or body[:1] not in (b"{", b"["):
        return None
    try:
        return msgspec.json.decode(body)
    except msgspec.DecodeError:
        return None


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Auditor:
    """Gives each request its audit ID and, with a policy and a log, writes its events."""

    def __init__(self, policy: Policy | None = None, writer: LogWriter | None = None) -> None:
        self.policy = policy
        self.writer = writer

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        record = _Record(
            str(uuid.uuid4()), parse(request.method, request.path, request.query), _now()
        )
        request[_RECORD] = record
        try:
            response = await handler(request)
        except Exception:
            self._decide(request, record)
            self._emit(request, record, "Panic", None)
            raise
        self._decide(request, record)
        if record.level == "None":
            return response
        if record.level != "Metadata" and request.body_exists:
            # aiohttp keeps a body the handler read, so this reads no bytes twice.
            record.request_object = _json(await request.read())
        self._emit(request, record, "ResponseComplete", response)
        return response

    async def on_prepare(self, request: web.Request, response: web.StreamResponse) -> None:
        """Before a response's headers go out: the ``Audit-Id`` header, and a watch's
        ``ResponseStarted`` event (after authorization, so the level is known)."""
        record = request.get(_RECORD)
        if record is None:
            return
        response.headers["Audit-Id"] = record.audit_id
        if record.info.verb == "watch" and response.status == 200 and record.decided:
            self._emit(request, record, "ResponseStarted", response)

    def authorized(self, request: web.Request) -> None:
        """The server decided who the caller is and whether it may: settle the level and
        write ``RequestReceived`` (upstream writes it at the same point)."""
        record = request.get(_RECORD)
        if record is not None:
            self._decide(request, record)
            self._emit(request, record, "RequestReceived", None)

    def _decide(self, request: web.Request, record: _Record) -> None:
        """The level for the request's user (anonymous when refused before authentication)."""
        if record.decided or self.policy is None or self.writer is None:
            return
        user = request.get(IMPERSONATED) or request.get(AUTHENTICATED) or auth.ANONYMOUS_USER
        decided = self.policy.decide(user, record.info)
        record.level, record.omit, record.omit_managed_fields = decided
        record.decided = True

    def _emit(
        self,
        request: web.Request,
        record: _Record,
        stage: str,
        response: web.StreamResponse | None,
    ) -> None:
        if self.writer is None or record.level == "None" or stage in record.omit:
            return
        info = record.info
        event: dict[str, Any] = {
            "kind": "Event",
            "apiVersion": API_VERSION,
            "level": record.level,
            "auditID": record.audit_id,
            "stage": stage,
            "requestURI": request.path_qs,
            "verb": info.verb,
            "user": _user(request.get(AUTHENTICATED) or auth.ANONYMOUS_USER),
            "sourceIPs": _source_ips(request),
            "userAgent": request.headers.get("User-Agent", ""),
            "requestReceivedTimestamp": record.received,
            "stageTimestamp": _now(),
        }
        impersonated = request.get(IMPERSONATED)
        if impersonated is not None:
            event["impersonatedUser"] = _user(impersonated)
        if info.is_resource_request:
            meta = record.object_meta
            ref = {
                "resource": info.resource,
                "namespace": info.namespace or meta.get("namespace"),
                "name": info.name or meta.get("name"),
                "uid": meta.get("uid"),
                "apiGroup": info.group,
                "apiVersion": info.version,
                "resourceVersion": meta.get("resourceVersion"),
                "subresource": info.subresource,
            }
            event["objectRef"] = {k: v for k, v in ref.items() if v}
        if response is not None:
            event["responseStatus"] = _response_status(response)
        trim = _without_managed_fields if record.omit_managed_fields else (lambda o: o)
        if record.level != "Metadata" and record.request_object is not None:
            event["requestObject"] = trim(record.request_object)
        if (
            record.level == "RequestResponse"
            and stage == "ResponseComplete"
            and isinstance(response, web.Response)
            and response.content_type == "application/json"
        ):
            body = response.body if isinstance(response.body, bytes) else None
            answered = _json(body)
            if answered is not None:
                event["responseObject"] = trim(answered)
        annotations: dict[str, str] = {}
        decision = request.get(DECISION)
        if decision is not None:
            annotations["authorization.k8s.io/decision"] = "allow" if decision else "forbid"
            annotations["authorization.k8s.io/reason"] = ""
        annotations.update(record.annotations)
        if annotations:
            event["annotations"] = annotations
        self.writer.write(msgspec.json.encode(event) + b"\n")

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def log_request_object(request: web.Request, meta: ObjectMeta) -> None:
    """The handler decoded the request's object (in whatever encoding): its identity completes
    the event's ``objectRef``, as upstream's ``LogRequestObject`` does at every level."""
    record = request.get(_RECORD)
    if record is not None:
        found = {
            "namespace": meta.namespace,
            "name": meta.name,
            "uid": meta.uid,
            "resourceVersion": meta.resource_version,
        }
        record.object_meta = {k: v for k, v in found.items() if v}


def annotations_of(request: web.Request) -> dict[str, str]:
    """The annotations of the request's audit event, for the request's handling to add to
    (the same dict, so what admission adds before a refusal is still logged)."""
    record = request.get(_RECORD)
    return record.annotations if record is not None else {}


def _source_ips(request: web.Request) -> list[str]:
    ips = [ip.strip() for ip in request.headers.get("X-Forwarded-For", "").split(",") if ip]
    if request.remote and request.remote not in ips:
        ips.append(request.remote)
    return ips


def _response_status(response: web.StreamResponse) -> dict[str, Any]:
    status: dict[str, Any] = {"metadata": {}, "code": response.status}
    if response.status >= 400 and isinstance(response, web.Response):
        body = response.body if isinstance(response.body, bytes) else None
        answered = _json(body)
        if isinstance(answered, dict) and answered.get("kind") == "Status":
            for key in ("status", "message", "reason"):
                if key in answered:
                    status[key] = answered[key]
    return status


def open_log(path: str, max_size_mb: int, max_backups: int) -> LogWriter | None:
    """The writer ``--audit-log-path`` names (``-`` is standard output, as upstream)."""
    if not path:
        return None
    if path == "-":
        return LogWriter(Path("/dev/stdout"))  # a stream is never rotated
    return LogWriter(Path(path), max_size_mb * 1024 * 1024, max_backups)
