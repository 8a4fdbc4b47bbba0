"""Static pods: the kubelet's file source (``--pod-manifest-path``), as upstream's
``pkg/kubelet/config/file.go`` and ``common.go``.

The path is a directory of manifests or a single manifest; each file holds one Pod, as YAML or
JSON, and files whose names start with ``.`` are ignored (so a manifest can be written to a
dotfile and renamed into place, which is how to change one without the source ever reading it
half-written).  A file becomes a pod in three steps:

1. decode it as the API server decodes a request body, and apply the API's defaults
   (``walk.set_defaults``); unknown fields are dropped with a warning, as the API's
   fieldValidation=Warn does;
2. apply upstream's ``applyDefaults``: the UID is the hex MD5 of the node name, the file's path
   and the decoded pod (a manifest that keeps its meaning keeps its UID, any change to it gives
   a new UID, so the kubelet replaces the pod), the name gets ``-<node name>`` appended, the
   namespace defaults to ``default``, ``spec.nodeName`` is this node, the annotations
   ``kubernetes.io/config.hash`` (the UID) and ``kubernetes.io/config.source`` (``file``) are
   set, and a toleration of every NoExecute taint is added so node problems never evict it;
3. validate it with the API's validation, so the mirror pod made from it will be accepted.

A file that fails any step is skipped with a warning, logged once per distinct problem, and
never stops the source; a second file naming the same pod as an earlier one (in name order) is
skipped too, as upstream refuses duplicate names.  ``kubernetes.io/config.seen`` records when a
UID was first read.

``StaticPodSource`` polls: ``snapshot()`` reads the whole path now, ``run()`` calls it every
``period`` seconds on the injected clock and hands the complete set to ``on_change`` on the
first poll (an empty set too: it tells the kubelet the source has been read) and whenever the
set differs from the one handed last.  Polling needs no inotify, and a level-triggered full set
leaves no event to be lost.
"""

from __future__ import annotations

import hashlib
import inspect
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

from kube.api import codec, walk
from kube.api.kinds.core_v1.pod import Pod, PodStatus, Toleration
from kube.api.struct import micro_time
from kube.clock import Clock

log = logging.getLogger("kubelab.kubelet.staticpods")

CONFIG_SOURCE_ANNOTATION = "kubernetes.io/config.source"
CONFIG_HASH_ANNOTATION = "kubernetes.io/config.hash"
CONFIG_SEEN_ANNOTATION = "kubernetes.io/config.seen"
FILE_SOURCE = "file"
API_SOURCE = "api"
MAX_MANIFEST_BYTES = 10 * 1024 * 1024
"""Upstream's maxConfigLength: a larger file is refused, not read."""


def is_static_pod(pod: Pod) -> bool:
    """Whether the pod comes from a source other than the API server (a manifest file)."""
    source = (pod.metadata.annotations or {}).get(CONFIG_SOURCE_ANNOTATION, API_SOURCE)
    return source != API_SOURCE


class ManifestError(ValueError):
    """A manifest file that cannot become a static pod; the message says why."""


def static_pod_name(name: str, node_name: str) -> str:
    """The name a static pod has on this node (and its mirror in the API)."""
    return f"{name}-{node_name.lower()}"


def load_manifest(path: Path, node_name: str) -> codec.Decoded[Pod]:
    """The static pod one manifest file describes on ``node_name``, with the unknown fields
    dropped from it; ``ManifestError`` if the file cannot be read or does not hold exactly one
    valid Pod."""
    try:
        with path.open("rb") as file:
            data = file.read(MAX_MANIFEST_BYTES + 1)
    except OSError as error:
        raise ManifestError(f"cannot read: {error.strerror or error}") from None
    if len(data) > MAX_MANIFEST_BYTES:
        raise ManifestError(f"larger than {MAX_MANIFEST_BYTES} bytes")
    try:
        documents = codec.load_yaml_documents(data)
        if len(documents) != 1:
            raise ManifestError(f"must hold exactly one object, found {len(documents)}")
        decoded = codec.decode_object(documents[0])
    except codec.DecodeError as error:
        raise ManifestError(str(error)) from None
    pod = decoded.obj
    if not isinstance(pod, Pod):
        raise ManifestError(f"must hold a Pod, not a {pod.kind}")
    if not pod.metadata.name:
        raise ManifestError("metadata.name: Required value")
    walk.set_defaults(pod)
    apply_defaults(pod, str(path), node_name)
    problems = walk.validate(pod)
    if problems:
        raise ManifestError(f"invalid pod: {problems}")
    return codec.Decoded(pod, decoded.unknown_fields)


def apply_defaults(pod: Pod, source: str, node_name: str) -> None:
    """Make a decoded, defaulted pod this node's static pod (upstream ``applyDefaults``)."""
    meta = pod.metadata
    if not meta.uid:
        hasher = hashlib.md5(usedforsecurity=False)
        hasher.update(f"host:{node_name}".encode())
        hasher.update(f"file:{source}".encode())
        hasher.update(codec.encode_json(pod))
        meta.uid = hasher.hexdigest()
    meta.name = static_pod_name(meta.name or "", node_name)
    meta.namespace = meta.namespace or "default"
    meta.self_link = None
    meta.annotations = {
        **(meta.annotations or {}),
        CONFIG_HASH_ANNOTATION: meta.uid,
        CONFIG_SOURCE_ANNOTATION: FILE_SOURCE,
    }
    if pod.spec is not None:
        pod.spec.node_name = node_name
        every_no_execute = Toleration(operator="Exists", effect="NoExecute")
        pod.spec.tolerations = _with_toleration(pod.spec.tolerations or [], every_no_execute)
    pod.status = PodStatus(phase="Pending")


def _with_toleration(tolerations: list[Toleration], wanted: Toleration) -> list[Toleration]:
    """``tolerations`` with ``wanted`` replacing the one that differs from it at most in
    tolerationSeconds, or appended (upstream ``AddOrUpdateTolerationInPod``)."""
    replaced = [wanted if t.same_except_seconds(wanted) else t for t in tolerations]
    return replaced if wanted in replaced else [*replaced, wanted]


ChangeHandler = Callable[[list[Pod]], Awaitable[None] | None]


class StaticPodSource:
    """The static pods a manifest path describes, read by polling.

    Not thread-safe; ``snapshot`` and ``run`` belong to one event loop.  The pods handed out
    are fresh objects on every read: callers may keep and mutate them.
    """

    def __init__(self, path: Path, node_name: str, clock: Clock, period: float = 5.0) -> None:
        self.path = path
        self.node_name = node_name
        self.period = period
        self._clock = clock
        self._seen: dict[str, str] = {}
        self._reported: dict[Path, str] = {}

    def snapshot(self) -> list[Pod]:
        """Every valid static pod the path describes now, in file-name order."""
        pods: list[Pod] = []
        origin: dict[tuple[str | None, str | None], Path] = {}
        problems: dict[Path, str] = {}
        for file in self._manifest_files(problems):
            try:
                decoded = load_manifest(file, self.node_name)
            except ManifestError as error:
                problems[file] = f"skipping manifest: {error}"
                continue
            pod = decoded.obj
            if decoded.unknown_fields:
                problems[file] = "ignoring unknown fields " + ", ".join(decoded.unknown_fields)
            key = (pod.metadata.namespace, pod.metadata.name)
            if key in origin:
                problems[file] = (
                    f"skipping manifest: pod {key[0]}/{key[1]} is already in {origin[key]}"
                )
                continue
            origin[key] = file
            pods.append(pod)
        self._report(problems)
        now = micro_time(self._clock.now())
        seen: dict[str, str] = {}
        for pod in pods:
            uid = pod.metadata.uid or ""
            seen[uid] = self._seen.get(uid, now)
            pod.metadata.annotations = {
                **(pod.metadata.annotations or {}),
                CONFIG_SEEN_ANNOTATION: seen[uid],
            }
        self._seen = seen
        return pods

    async def run(self, on_change: ChangeHandler) -> None:
        """Poll until cancelled, handing every new full set of pods to ``on_change``."""
        last: list[bytes] | None = None
        while True:
            pods = self.snapshot()
            current = [codec.encode_json(pod) for pod in pods]  # immune to what on_change does
            if current != last:
                last = current
                result = on_change(pods)
                if inspect.isawaitable(result):
                    await result
            await self._clock.sleep(self.period)

    def _manifest_files(self, problems: dict[Path, str]) -> list[Path]:
        """The files to read: the path itself, or its directory's visible regular files."""
        if self.path.is_file():
            return [self.path]
        if not self.path.exists():
            problems[self.path] = "manifest path does not exist"
            return []
        if not self.path.is_dir():
            problems[self.path] = "manifest path is neither a directory nor a file"
            return []
        try:
            entries = sorted(p for p in self.path.iterdir() if not p.name.startswith("."))
        except OSError as error:
            problems[self.path] = f"cannot list manifest directory: {error.strerror or error}"
            return []
        files: list[Path] = []
        for entry in entries:
            if entry.is_file():
                files.append(entry)
            else:
                problems[entry] = "skipping: not a regular file"
        return files

    def _report(self, problems: dict[Path, str]) -> None:
        """Log each problem once, until it goes away or changes."""
        for where, message in problems.items():
            if self._reported.get(where) != message:
                log.warning("%s: %s", where, message)
        self._reported = problems
