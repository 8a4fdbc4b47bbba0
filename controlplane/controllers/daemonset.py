"""The daemonset controller: one pod of each DaemonSet on every node it should run on
(upstream ``pkg/controller/daemon``).

Keys are DaemonSets.  A sync claims the set's pods, groups them by the node they run on (or
are pinned to), and for each node decides from the pod template alone whether a daemon pod
*should run* there (it may be created) and whether one *may keep running* (it need not be
deleted): the node must pass the template's ``nodeSelector`` and required node affinity, and
carry no ``NoSchedule``/``NoExecute`` taint the pod does not tolerate; a pod stays on a node
that only gained an untolerated ``NoSchedule`` taint.  The controller does not wait for the
scheduler: each pod it creates is pinned to its node by a required node affinity on
``metadata.name`` (replacing the template's required terms, already checked here), and gets
the tolerations every daemon pod has (not-ready and unreachable ``NoExecute``; the pressure,
unschedulable and, with ``hostNetwork``, network-unavailable ``NoSchedule`` taints) so the
node lifecycle controller does not evict it for the node conditions a daemon often exists to
fix.

Missing pods are created, pods on nodes they should not be on are deleted, a node with more
than one pod keeps the oldest, and a failed pod is deleted (with a per-node backoff, as the
kubelet may keep rejecting it) so that the next sync replaces it.  Creations and deletions
are counted in ``ControllerExpectations``: until the pod informer has shown them, a sync
only recomputes status, so a slow watch cannot make it create a node's pod twice.

The template's revision is a ControllerRevision (see ``history``) whose hash labels the pods
(``controller-revision-hash``).  Under ``RollingUpdate`` the old pods are deleted, and then
recreated from the new template by the next sync, as long as no more than ``maxUnavailable``
nodes (rounded up from a percentage of the desired nodes, at least one) are without an
available pod; old pods that are unavailable anyway are replaced at once.  ``maxSurge``
(creating the new pod before deleting the old one) is not implemented.  ``OnDelete`` leaves
old pods until someone deletes them.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Any

import msgspec

from controlplane.controllers import nodeutil
from controlplane.controllers.context import ControllerContext
from controlplane.controllers.controller import Controller, unwrap
from controlplane.controllers.history import (
    CONTROLLER_REVISION_HASH_LABEL,
    History,
    new_revision,
    next_revision,
    owned_revisions,
    scaled_count,
    template_patch,
)
from controlplane.controllers.podcontrol import (
    ORPHAN_INDEX,
    ControllerExpectations,
    claim_pods,
    create_pod,
    delete_pod,
    is_pod_available,
    is_pod_ready,
    orphan_index,
    pods_to_claim,
    slow_start_batch,
)
from kube.api.keys import object_key
from kube.api.kinds.apps_v1 import ControllerRevision, DaemonSet, DaemonSetStatus
from kube.api.kinds.core_v1.node import Node, Taint
from kube.api.kinds.core_v1.pod import (
    Affinity,
    NodeAffinity,
    Pod,
    PodSpec,
    PodTemplateSpec,
    Toleration,
)
from kube.api.kinds.core_v1.volume import (
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
)
from kube.api.labels import Selector, SelectorError, selector_of
from kube.api.meta_v1 import LabelSelector, ObjectMeta
from kube.api.nodeaffinity import OBJECT_NAME_FIELD, RequiredNodeAffinity
from kube.api.owners import controller_of
from kube.api.taints import tolerates
from kube.client.errors import ApiError

NAME = "daemonset"

BURST_REPLICAS = 250
"""Most creations (and deletions) one sync asks for."""

FAILED_DAEMON_POD = "FailedDaemonPod"
SELECTING_ALL = "SelectingAll"

_FAILED_POD_BACKOFF = (1.0, 15 * 60.0)
"""Initial and maximum seconds between deletions of failed pods on one node."""

_DAEMON_TOLERATIONS = (
    (nodeutil.TAINT_NOT_READY, nodeutil.NO_EXECUTE),
    (nodeutil.TAINT_UNREACHABLE, nodeutil.NO_EXECUTE),
    (nodeutil.TAINT_DISK_PRESSURE, nodeutil.NO_SCHEDULE),
    (nodeutil.TAINT_MEMORY_PRESSURE, nodeutil.NO_SCHEDULE),
    (nodeutil.TAINT_PID_PRESSURE, nodeutil.NO_SCHEDULE),
    (nodeutil.TAINT_UNSCHEDULABLE, nodeutil.NO_SCHEDULE),
)

# Scheduling predicates, from the template alone.


def _untolerated(taints: Sequence[Taint], tolerations: Sequence[Toleration], *effects: str) -> bool:
    """Whether a taint with one of ``effects`` is tolerated by none of ``tolerations``."""
    return any(
        taint.effect in effects and not any(tolerates(t, taint) for t in tolerations)
        for taint in taints
    )


def fits_node(spec: PodSpec, node: Node) -> bool:
    """Upstream ``GetRequiredNodeAffinity(pod).Match(node)``: the nodeSelector and one of the
    required node affinity terms (if there are any) hold."""
    return RequiredNodeAffinity.of(Pod(spec=spec)).matches(node)


def should_run(template: PodTemplateSpec, node: Node) -> tuple[bool, bool]:
    """(should run, may keep running) for a daemon pod of ``template`` on ``node``
    (upstream ``NodeShouldRunDaemonPod``)."""
    spec = with_daemon_tolerations(template).spec or PodSpec()
    if spec.node_name and spec.node_name != node.metadata.name:
        return False, False
    if not fits_node(spec, node):
        return False, False
    taints = nodeutil.node_taints(node)
    tolerations = spec.tolerations or []
    if _untolerated(taints, tolerations, nodeutil.NO_SCHEDULE, nodeutil.NO_EXECUTE):
        return False, not _untolerated(taints, tolerations, nodeutil.NO_EXECUTE)
    return True, True


# The pods the controller makes.


def _add_toleration(tolerations: list[Toleration], toleration: Toleration) -> None:
    """Upstream ``AddOrUpdateTolerationInPodSpec``: replace the one with the same key,
    operator, value and effect, or append."""
    for i, existing in enumerate(tolerations):
        if (existing.key, existing.operator, existing.value, existing.effect) == (
            toleration.key,
            toleration.operator,
            toleration.value,
            toleration.effect,
        ):
            tolerations[i] = toleration
            return
    tolerations.append(toleration)


def with_daemon_tolerations(template: PodTemplateSpec) -> PodTemplateSpec:
    """A copy of the template with the tolerations every daemon pod gets."""
    spec = msgspec.structs.replace(template.spec or PodSpec())
    tolerations = list(spec.tolerations or ())
    wanted = list(_DAEMON_TOLERATIONS)
    if spec.host_network:
        wanted.append((nodeutil.TAINT_NETWORK_UNAVAILABLE, nodeutil.NO_SCHEDULE))
    for key, effect in wanted:
        _add_toleration(tolerations, Toleration(key=key, operator="Exists", effect=effect))
    spec.tolerations = tolerations
    return msgspec.structs.replace(template, spec=spec)


def pod_template(ds: DaemonSet, hash_: str) -> PodTemplateSpec:
    """The template of the set's pods: its template, the daemon tolerations and the revision
    label (upstream ``CreatePodTemplate``)."""
    template = with_daemon_tolerations((ds.spec.template if ds.spec else None) or PodTemplateSpec())
    meta = msgspec.structs.replace(template.metadata or ObjectMeta())
    meta.labels = {**template.labels(), CONTROLLER_REVISION_HASH_LABEL: hash_}
    return msgspec.structs.replace(template, metadata=meta)


def pinned_to(template: PodTemplateSpec, node_name: str) -> PodTemplateSpec:
    """The template with its required node affinity replaced by ``metadata.name In [node]``
    (upstream ``ReplaceDaemonSetPodNodeNameNodeAffinity``); preferred terms stay."""
    spec = msgspec.structs.replace(template.spec or PodSpec())
    term = NodeSelectorTerm(
        match_fields=[
            NodeSelectorRequirement(key=OBJECT_NAME_FIELD, operator="In", values=[node_name])
        ]
    )
    required = NodeSelector(node_selector_terms=[term])
    affinity = msgspec.structs.replace(spec.affinity) if spec.affinity else Affinity()
    node_affinity = (
        msgspec.structs.replace(affinity.node_affinity)
        if affinity.node_affinity
        else NodeAffinity()
    )
    node_affinity.required_during_scheduling_ignored_during_execution = required
    affinity.node_affinity = node_affinity
    spec.affinity = affinity
    return msgspec.structs.replace(template, spec=spec)


def target_node(pod: Pod) -> str:
    """The node a daemon pod runs on, or the one its affinity pins it to before binding
    (upstream ``GetTargetNodeName``); empty if neither."""
    spec = pod.spec or PodSpec()
    if spec.node_name:
        return spec.node_name
    affinity = spec.affinity.node_affinity if spec.affinity else None
    required = affinity.required_during_scheduling_ignored_during_execution if affinity else None
    for term in (required.node_selector_terms if required else None) or ():
        for field in term.match_fields or ():
            if field.key == OBJECT_NAME_FIELD and field.operator == "In" and field.values:
                return field.values[0]
    return ""


def _oldest_first(pods: Sequence[Pod]) -> list[Pod]:
    """Scheduled before unscheduled, then by creation time and name."""
    epoch = datetime.datetime.min.replace(tzinfo=datetime.UTC)
    return sorted(
        pods,
        key=lambda p: (
            not (p.spec and p.spec.node_name),
            p.metadata.creation_timestamp or epoch,
            p.metadata.name or "",
        ),
    )


def _phase(pod: Pod) -> str:
    return (pod.status.phase if pod.status else None) or ""


def _is_updated(pod: Pod, hash_: str) -> bool:
    return bool(hash_) and (pod.metadata.labels or {}).get(CONTROLLER_REVISION_HASH_LABEL) == hash_


class DaemonSetsController(Controller):
    NAME = NAME
    EVENT_SOURCE = "daemonset-controller"

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self.expectations = ControllerExpectations(ctx.clock)
        self.history = History(ctx.client)
        self.daemonsets = ctx.informers.informer_for(DaemonSet)
        self.nodes = ctx.informers.informer_for(Node)
        self.pods = ctx.informers.informer_for(Pod, indexers={ORPHAN_INDEX: orphan_index})
        self.revisions = ctx.informers.informer_for(ControllerRevision)
        self._failed_backoff: dict[tuple[str, str], tuple[float, float]] = {}
        self.daemonsets.add_event_handler(self.enqueue, self.enqueue_update, self._ds_deleted)
        self.nodes.add_event_handler(self._node_added, self._node_updated)
        self.pods.add_event_handler(self._pod_added, self._pod_updated, self._pod_deleted)
        self.revisions.add_event_handler(
            self._owner_changed, lambda old, new: self._owner_changed(new), self._owner_changed
        )

    # Handlers.

    def _ds_deleted(self, obj: Any) -> None:
        key = object_key(unwrap(obj))
        self.expectations.delete_expectations(key)
        self.queue.add(key)

    def _node_added(self, obj: Any) -> None:
        for ds in self.daemonsets.lister.list():
            self.enqueue(ds)

    def _node_updated(self, old: Node, new: Node) -> None:
        before = (old.metadata.labels, old.spec.taints if old.spec else None)
        after = (new.metadata.labels, new.spec.taints if new.spec else None)
        if before != after:
            self._node_added(new)

    def _owner(self, obj: Pod | ControllerRevision) -> DaemonSet | None:
        ref = controller_of(obj)
        if ref is None or ref.kind != "DaemonSet":
            return None
        ds = self.daemonsets.lister.get(f"{obj.metadata.namespace}/{ref.name}")
        return ds if ds is not None and ds.metadata.uid == ref.uid else None

    def _enqueue_selecting(self, pod: Pod) -> None:
        """Orphans: every set in the namespace whose selector matches may adopt it."""
        for ds in self.daemonsets.lister.list(pod.metadata.namespace):
            if _selector(ds).matches(pod.metadata.labels):
                self.enqueue(ds)

    def _owner_changed(self, obj: Any) -> None:
        ds = self._owner(unwrap(obj))
        if ds is not None:
            self.enqueue(ds)

    def _pod_added(self, pod: Pod) -> None:
        if pod.metadata.deletion_timestamp is not None:
            self._pod_deleted(pod)
            return
        ds = self._owner(pod)
        if ds is not None:
            self.expectations.creation_observed(object_key(ds))
            self.enqueue(ds)
        elif controller_of(pod) is None:
            self._enqueue_selecting(pod)

    def _pod_updated(self, old: Pod, new: Pod) -> None:
        if old.metadata.resource_version == new.metadata.resource_version:
            return
        if controller_of(old) != controller_of(new):
            self._owner_changed(old)
        ds = self._owner(new)
        if ds is not None:
            self.enqueue(ds)
        elif controller_of(new) is None and old.metadata.labels != new.metadata.labels:
            self._enqueue_selecting(new)

    def _pod_deleted(self, obj: Any) -> None:
        ds = self._owner(unwrap(obj))
        if ds is not None:
            self.expectations.deletion_observed(object_key(ds))
            self.enqueue(ds)

    # Sync.

    async def sync_key(self, key: str) -> None:
        ds = self.daemonsets.lister.get(key)
        if ds is None:
            self.expectations.delete_expectations(key)
            return
        nodes = self.nodes.lister.list()
        if ds.spec is not None and ds.spec.selector == LabelSelector():
            self.ctx.recorder.event(
                ds,
                "Warning",
                SELECTING_ALL,
                "This daemon set is selecting all pods. A non-empty selector is required.",
            )
            return
        if ds.metadata.deletion_timestamp is not None:
            return
        current, old, collisions = await self._construct_history(ds)
        hash_ = (current.metadata.labels or {}).get(CONTROLLER_REVISION_HASH_LABEL, "")
        pods = await self._claimed_pods(ds)
        if self.expectations.satisfied(key):
            await self._manage(ds, nodes, pods, hash_)
            if self.expectations.satisfied(key) and self._rolling(ds):
                await self._rolling_update(ds, nodes, pods, hash_)
            await self._cleanup_history(ds, old, pods)
        await self._update_status(ds, nodes, pods, hash_, collisions)

    async def _claimed_pods(self, ds: DaemonSet) -> list[Pod]:
        return await claim_pods(self.ctx, ds, _selector(ds), pods_to_claim(self.pods.lister, ds))

    def _by_node(self, pods: Sequence[Pod]) -> dict[str, list[Pod]]:
        """Pods by target node, leaving out finished pods already being deleted."""
        by_node: dict[str, list[Pod]] = {}
        for pod in pods:
            if _phase(pod) in nodeutil.TERMINAL_PHASES and pod.metadata.deletion_timestamp:
                continue
            by_node.setdefault(target_node(pod), []).append(pod)
        return by_node

    def _rolling(self, ds: DaemonSet) -> bool:
        strategy = ds.spec.update_strategy if ds.spec else None
        return strategy is None or strategy.type in (None, "", "RollingUpdate")

    # History.

    async def _construct_history(
        self, ds: DaemonSet
    ) -> tuple[ControllerRevision, list[ControllerRevision], int]:
        """The revision of the current template (made if missing, renumbered to be the newest),
        the older ones, and the collision count."""
        template = ds.spec.template if ds.spec else None
        revisions = self.revisions.lister.list(ds.metadata.namespace)
        owned, orphans = owned_revisions(revisions, ds, _selector(ds))
        for orphan in orphans:
            owned.append(await self.history.adopt(ds, orphan))
        data = template_patch(template)
        current = [r for r in owned if r.data == data]
        old = [r for r in owned if r.data != data]
        number = next_revision(old)
        collisions = [(ds.status.collision_count if ds.status else None) or 0]
        if not current:
            made = new_revision(ds, template, number, collisions[0])
            return await self.history.create(ds, made, collisions), old, collisions[0]
        newest = max(current, key=lambda r: r.revision or 0)
        old.extend(r for r in current if r is not newest)
        if (newest.revision or 0) < number:
            newest = await self.history.renumber(newest, number)
        return newest, old, collisions[0]

    async def _cleanup_history(
        self, ds: DaemonSet, old: list[ControllerRevision], pods: Sequence[Pod]
    ) -> None:
        limit = (ds.spec.revision_history_limit if ds.spec else None) or 0
        live = {(p.metadata.labels or {}).get(CONTROLLER_REVISION_HASH_LABEL) for p in pods}

        def is_live(revision: ControllerRevision) -> bool:
            return (revision.metadata.labels or {}).get(CONTROLLER_REVISION_HASH_LABEL) in live

        await self.history.delete_oldest(old, is_live, len(old) - limit)

    # Pods.

    def _in_backoff(self, ds: DaemonSet, node: str) -> float:
        """Seconds until a failed pod on ``node`` may be deleted again (0: now, and the
        backoff doubles)."""
        key = (ds.metadata.uid or "", node)
        now = self.ctx.clock.monotonic()
        delay, since = self._failed_backoff.get(key, (0.0, now))
        if delay and now - since < delay:
            return delay - (now - since)
        initial, maximum = _FAILED_POD_BACKOFF
        fresh = not delay or now - since > 2 * maximum
        self._failed_backoff[key] = (initial if fresh else min(2 * delay, maximum), now)
        return 0.0

    async def _manage(
        self, ds: DaemonSet, nodes: Sequence[Node], pods: Sequence[Pod], hash_: str
    ) -> None:
        """Create the missing pods and delete the ones that should go."""
        template = (ds.spec.template if ds.spec else None) or PodTemplateSpec()
        by_node = self._by_node(pods)
        create: list[str] = []
        delete: list[str] = []
        for node in nodes:
            name = node.metadata.name or ""
            run, keep = should_run(template, node)
            on_node = by_node.get(name)
            if run and on_node is None:
                create.append(name)
            elif keep and on_node:
                running = []
                for pod in on_node:
                    if pod.metadata.deletion_timestamp is not None:
                        continue
                    if _phase(pod) == "Failed":
                        wait = self._in_backoff(ds, name)
                        if wait:
                            self.enqueue_after(ds, wait)
                            continue
                        self.ctx.recorder.event(
                            ds,
                            "Warning",
                            FAILED_DAEMON_POD,
                            f"Found failed daemon pod {pod.metadata.namespace}/"
                            f"{pod.metadata.name} on node {name}, will try to kill it",
                        )
                        delete.append(pod.metadata.name or "")
                    else:
                        running.append(pod)
                delete.extend(p.metadata.name or "" for p in _oldest_first(running)[1:])
            elif not keep and on_node:
                delete.extend(
                    p.metadata.name or "" for p in on_node if p.metadata.deletion_timestamp is None
                )
        # Pods pinned to nodes that no longer exist and never bound (upstream
        # getUnscheduledPodsWithoutNode); bound ones are the pod garbage collector's.
        known = {n.metadata.name for n in nodes}
        for name, on_node in by_node.items():
            if name not in known:
                delete.extend(
                    p.metadata.name or ""
                    for p in on_node
                    if not (p.spec and p.spec.node_name) and p.metadata.deletion_timestamp is None
                )
        await self._sync_nodes(ds, delete, create, hash_)

    async def _sync_nodes(
        self, ds: DaemonSet, delete: list[str], create: list[str], hash_: str
    ) -> None:
        """Delete ``delete`` and create a pod on each node of ``create``, expecting both."""
        key = object_key(ds)
        create, delete = create[:BURST_REPLICAS], delete[:BURST_REPLICAS]
        self.expectations.expect_creations(key, len(create))
        self.expectations.raise_expectations(key, 0, len(delete))
        namespace = ds.metadata.namespace or ""
        template = pod_template(ds, hash_)
        errors: list[BaseException] = []
        targets = iter(create)
        failed = 0

        async def create_one() -> None:
            nonlocal failed
            node = next(targets)
            try:
                await create_pod(self.ctx, namespace, pinned_to(template, node), ds)
            except Exception:
                failed += 1
                self.expectations.creation_observed(key)
                raise

        created, error = await slow_start_batch(len(create), 1, create_one)
        if error is not None:
            errors.append(error)
            # Failed creations were observed one by one; skipped ones will never come.
            self.expectations.lower_expectations(key, len(create) - created - failed, 0)
        for name in delete:
            try:
                await delete_pod(self.ctx, namespace, name, ds)
            except ApiError as failure:
                self.expectations.deletion_observed(key)
                if not failure.not_found:
                    errors.append(failure)
        if errors:
            raise errors[0]

    async def _rolling_update(
        self, ds: DaemonSet, nodes: Sequence[Node], pods: Sequence[Pod], hash_: str
    ) -> None:
        """Delete old pods within the maxUnavailable budget (upstream ``rollingUpdate``
        without surge)."""
        template = (ds.spec.template if ds.spec else None) or PodTemplateSpec()
        by_node = self._by_node(pods)
        desired = 0
        for node in nodes:
            if should_run(template, node)[0]:
                desired += 1
                by_node.setdefault(node.metadata.name or "", [])
        strategy = ds.spec.update_strategy if ds.spec else None
        rolling = strategy.rolling_update if strategy else None
        budget = scaled_count(rolling.max_unavailable if rolling else None, desired, 1)
        if desired > 0 and budget == 0:
            budget = 1
        min_ready = (ds.spec.min_ready_seconds if ds.spec else None) or 0
        now = self.ctx.clock.now()
        unavailable = 0
        replace: list[str] = []
        candidates: list[str] = []
        for on_node in by_node.values():
            found = _new_and_old(on_node, hash_)
            if found is None:
                unavailable += 1
                continue
            new, old = found
            if (new is None) == (old is None):
                unavailable += 1
            elif new is not None:
                if not is_pod_available(new, min_ready, now):
                    unavailable += 1
            elif old is not None:
                if not is_pod_available(old, min_ready, now):
                    replace.append(old.metadata.name or "")
                elif unavailable < budget:
                    candidates.append(old.metadata.name or "")
        room = min(max(budget - unavailable, 0), len(candidates))
        await self._sync_nodes(ds, replace + candidates[:room], [], hash_)

    # Status.

    async def _update_status(
        self,
        ds: DaemonSet,
        nodes: Sequence[Node],
        pods: Sequence[Pod],
        hash_: str,
        collisions: int,
    ) -> None:
        template = (ds.spec.template if ds.spec else None) or PodTemplateSpec()
        min_ready = (ds.spec.min_ready_seconds if ds.spec else None) or 0
        now = self.ctx.clock.now()
        by_node = self._by_node(pods)
        desired = current = misscheduled = ready = available = updated = 0
        for node in nodes:
            run, _ = should_run(template, node)
            on_node = by_node.get(node.metadata.name or "")
            if not run:
                misscheduled += bool(on_node)
                continue
            desired += 1
            if not on_node:
                continue
            current += 1
            pod = _oldest_first(on_node)[0]
            if is_pod_ready(pod):
                ready += 1
                available += is_pod_available(pod, min_ready, now)
            updated += _is_updated(pod, hash_)
        old = ds.status or DaemonSetStatus()
        status = msgspec.structs.replace(
            old,
            desired_number_scheduled=desired,
            current_number_scheduled=current,
            number_misscheduled=misscheduled,
            number_ready=ready,
            updated_number_scheduled=updated,
            number_available=available,
            number_unavailable=desired - available,
            observed_generation=ds.metadata.generation,
            collision_count=collisions or old.collision_count,
        )
        if status != old:
            try:
                await self.ctx.client.update_status(msgspec.structs.replace(ds, status=status))
            except ApiError as error:
                if not error.conflict:
                    raise
                # The cached set is stale: write the same counts onto the stored one, once.
                fresh = await self.ctx.client.get(
                    DaemonSet, ds.metadata.name or "", ds.metadata.namespace
                )
                await self.ctx.client.update_status(msgspec.structs.replace(fresh, status=status))
        if min_ready > 0 and ready != available:
            self.enqueue_after(ds, min_ready)


def _new_and_old(pods: Sequence[Pod], hash_: str) -> tuple[Pod | None, Pod | None] | None:
    """The updated and the old pod of a node, or None when there are several of either
    (upstream ``findUpdatedPodsOnNode``)."""
    new = old = None
    for pod in pods:
        if pod.metadata.deletion_timestamp is not None:
            continue
        if _is_updated(pod, hash_):
            if new is not None:
                return None
            new = pod
        else:
            if old is not None:
                return None
            old = pod
    return new, old


def _selector(ds: DaemonSet) -> Selector:
    try:
        return selector_of(ds.spec.selector if ds.spec else None)
    except SelectorError:
        return Selector.nothing()


def new(ctx: ControllerContext) -> DaemonSetsController:
    return DaemonSetsController(ctx)
