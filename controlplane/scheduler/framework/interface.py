"""The scheduling framework's contract: one protocol per extension point and the ``Status``
every plugin answers with.

A pod goes through two cycles.  The *scheduling cycle* is serial, one pod at a time, and only
reads the snapshot: PreFilter and Filter find the feasible nodes, PostFilter (preemption) runs
when none is, PreScore and Score rank them, NormalizeScore scales each plugin's scores to
0..100, Reserve claims the chosen node in the cache and Permit may approve, reject or hold the
pod.  The *binding cycle* runs concurrently for many pods: it waits for Permit, then PreBind,
Bind and PostBind talk to the API server.  A failure after Reserve runs every Unreserve in
reverse order, so the cache forgets the assumption.

Filter and Score run once per node for every pod, so they are plain functions; the extension
points that talk to the API server are coroutines.

``Status.code`` is what the scheduling queue acts on: UNSCHEDULABLE sends the pod to the
unschedulable pool until a cluster event its rejecting plugins care about happens;
UNSCHEDULABLE_AND_UNRESOLVABLE additionally tells preemption that evicting pods on that node
would not help; ERROR is retried with backoff.
"""

from __future__ import annotations

import builtins
import enum
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar, runtime_checkable

if TYPE_CHECKING:
    from controlplane.scheduler.framework.types import NodeInfo, PodInfo, QueuedPodInfo
    from kube.api.kinds.core_v1.pod import Pod
    from kube.client.events import EventRecorder
    from kube.client.interface import ApiClient
    from kube.clock import Clock

MAX_NODE_SCORE = 100
MIN_NODE_SCORE = 0


class Code(enum.IntEnum):
    SUCCESS = 0
    ERROR = 1
    UNSCHEDULABLE = 2
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    WAIT = 4
    SKIP = 5
    PENDING = 6
    """Rejected while waiting for something outside the scheduler (e.g. a volume binding)."""


@dataclass(frozen=True, slots=True)
class Status:
    """A plugin's verdict: a code, the human reasons, and which plugin said it."""

    code: Code = Code.SUCCESS
    reasons: tuple[str, ...] = ()
    plugin: str = ""
    error: BaseException | None = field(default=None, compare=False)

    @classmethod
    def unschedulable(cls, *reasons: str) -> Status:
        return cls(Code.UNSCHEDULABLE, reasons)

    @classmethod
    def unresolvable(cls, *reasons: str) -> Status:
        return cls(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reasons)

    @classmethod
    def failed(cls, error: BaseException | str) -> Status:
        if isinstance(error, str):
            error = RuntimeError(error)
        return cls(Code.ERROR, (str(error),), error=error)

    @property
    def is_success(self) -> bool:
        return self.code is Code.SUCCESS

    @property
    def is_skip(self) -> bool:
        return self.code is Code.SKIP

    @property
    def is_rejected(self) -> bool:
        """The pod cannot go there (as opposed to an error, a wait, or success)."""
        return self.code in (
            Code.UNSCHEDULABLE,
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            Code.PENDING,
        )

    @property
    def message(self) -> str:
        return ", ".join(self.reasons)

    def with_plugin(self, plugin: str) -> Status:
        return (
            self if self.plugin == plugin else Status(self.code, self.reasons, plugin, self.error)
        )


SUCCESS = Status()
SKIP = Status(Code.SKIP)
WAIT = Status(Code.WAIT)

T = TypeVar("T")


class CycleState:
    """Data plugins share within one scheduling cycle of one pod, keyed by plugin-chosen keys.

    PreFilter computes, Filter reads, for every node; preemption clones the state to try
    removing victims without touching the real cycle's data.  Values that a clone may change
    must implement ``clone()``.
    """

    def __init__(self) -> None:
        self._data: dict[str, Any] = {}
        self.skip_filter_plugins: set[str] = set()
        self.skip_score_plugins: set[str] = set()

    def write(self, key: str, value: Any) -> None:
        self._data[key] = value

    def read(self, key: str, kind: type[T]) -> T:
        """The value under ``key``; KeyError if PreFilter never wrote it."""
        value = self._data[key]
        if not isinstance(value, kind):
            raise TypeError(
                f"cycle state {key!r} holds {type(value).__name__}, not {kind.__name__}"
            )
        return value

    def get(self, key: str) -> Any | None:
        return self._data.get(key)

    def clone(self) -> CycleState:
        copy = CycleState()
        copy._data = {
            key: value.clone() if hasattr(value, "clone") else value
            for key, value in self._data.items()
        }
        copy.skip_filter_plugins = set(self.skip_filter_plugins)
        copy.skip_score_plugins = set(self.skip_score_plugins)
        return copy


@dataclass(frozen=True, slots=True)
class PreFilterResult:
    """Nodes a PreFilter plugin already knows are the only candidates (``None``: all)."""

    node_names: frozenset[str] | None = None

    def merge(self, other: PreFilterResult | None) -> PreFilterResult:
        if other is None or other.node_names is None:
            return self
        if self.node_names is None:
            return other
        return PreFilterResult(self.node_names & other.node_names)


@dataclass(frozen=True, slots=True)
class PostFilterResult:
    """What PostFilter achieved: the node the pod is nominated to after preemption."""

    nominated_node_name: str


class ActionType(enum.Flag):
    ADD = enum.auto()
    DELETE = enum.auto()
    UPDATE_NODE_ALLOCATABLE = enum.auto()
    UPDATE_NODE_LABEL = enum.auto()
    UPDATE_NODE_TAINT = enum.auto()
    UPDATE_NODE_CONDITION = enum.auto()
    UPDATE_POD_LABEL = enum.auto()
    UPDATE_POD_SCALE_DOWN = enum.auto()
    UPDATE_POD_TOLERATION = enum.auto()
    UPDATE_POD_SCHEDULING_GATES = enum.auto()
    UPDATE = (
        UPDATE_NODE_ALLOCATABLE
        | UPDATE_NODE_LABEL
        | UPDATE_NODE_TAINT
        | UPDATE_NODE_CONDITION
        | UPDATE_POD_LABEL
        | UPDATE_POD_SCALE_DOWN
        | UPDATE_POD_TOLERATION
        | UPDATE_POD_SCHEDULING_GATES
    )
    ALL = ADD | DELETE | UPDATE


class EventResource(enum.StrEnum):
    POD = "Pod"
    ASSIGNED_POD = "AssignedPod"
    UNSCHEDULED_POD = "UnscheduledPod"
    NODE = "Node"
    PERSISTENT_VOLUME = "PersistentVolume"
    PERSISTENT_VOLUME_CLAIM = "PersistentVolumeClaim"
    STORAGE_CLASS = "StorageClass"
    CSI_NODE = "CSINode"
    WILDCARD = "*"


@dataclass(frozen=True, slots=True)
class ClusterEvent:
    """Something that changed in the cluster and may make rejected pods schedulable."""

    resource: EventResource
    action: ActionType
    label: str = ""

    def matches(self, incoming: ClusterEvent) -> bool:
        """Whether a plugin registered for ``self`` cares about ``incoming``."""
        if self.resource is EventResource.WILDCARD:
            return True
        same = self.resource == incoming.resource or (
            self.resource is EventResource.POD
            and incoming.resource in (EventResource.ASSIGNED_POD, EventResource.UNSCHEDULED_POD)
        )
        return same and bool(self.action & incoming.action)


class QueueingHint(enum.Enum):
    SKIP = 0
    QUEUE = 1


QueueingHintFn = Callable[["Pod", Any, Any], QueueingHint]
"""(the rejected pod, the old object, the new object) → whether the event may help it."""


@dataclass(frozen=True, slots=True)
class ClusterEventWithHint:
    event: ClusterEvent
    hint: QueueingHintFn | None = None


@runtime_checkable
class Plugin(Protocol):
    NAME: ClassVar[str]


@runtime_checkable
class EnqueueExtensions(Plugin, Protocol):
    def events_to_register(self) -> list[ClusterEventWithHint]:
        """The cluster events that may make a pod this plugin rejected schedulable."""
        ...


@runtime_checkable
class PreEnqueuePlugin(Plugin, Protocol):
    def pre_enqueue(self, pod: Pod) -> Status:
        """Whether the pod may enter the active queue at all (scheduling gates)."""
        ...


@runtime_checkable
class QueueSortPlugin(Plugin, Protocol):
    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool: ...


class PreFilterExtensions(Protocol):
    """Lets preemption ask "what if this pod were added to / removed from the node?"."""

    def add_pod(
        self, state: CycleState, pod: PodInfo, to_add: PodInfo, node: NodeInfo
    ) -> Status: ...

    def remove_pod(
        self, state: CycleState, pod: PodInfo, to_remove: PodInfo, node: NodeInfo
    ) -> Status: ...


@runtime_checkable
class PreFilterPlugin(Plugin, Protocol):
    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status]:
        """Compute what Filter needs; SKIP means this plugin's Filter has nothing to check."""
        ...

    def pre_filter_extensions(self) -> PreFilterExtensions | None: ...


@runtime_checkable
class FilterPlugin(Plugin, Protocol):
    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        """Whether the pod may run on the node.  Read-only: called for many nodes."""
        ...


@runtime_checkable
class BatchFilterPlugin(FilterPlugin, Protocol):
    """A Filter plugin that judges many nodes in one call.

    Filter runs for hundreds of nodes per pod; in Python the cost of a call per node per
    plugin dominates, so hot plugins decide a whole batch in one loop.  The framework uses
    ``filter_nodes`` when a plugin has it, and must get exactly what ``filter`` would give
    node by node: one Status per node, the ``SUCCESS`` singleton for a node that passes.
    """

    def filter_nodes(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> list[Status]: ...


@runtime_checkable
@runtime_checkable
class FilterCacheKey(Protocol):
    """A Filter plugin that names what it reads of the pod: while that key and a node's
    generation are unchanged, the framework reuses the node's last verdict."""

    def filter_cache_key(self, state: CycleState, pod: PodInfo) -> Hashable | None: ...


@runtime_checkable
class ScoreCacheKey(Protocol):
    """``FilterCacheKey`` for Score: a node's last score is reused while the key holds."""

    def score_cache_key(self, state: CycleState, pod: PodInfo) -> Hashable | None: ...


@runtime_checkable
class PostFilterPlugin(Plugin, Protocol):
    async def post_filter(
        self, state: CycleState, pod: PodInfo, statuses: Mapping[str, Status]
    ) -> tuple[PostFilterResult | None, Status]:
        """Try to make the pod schedulable after every node rejected it (preemption)."""
        ...


@runtime_checkable
class PreScorePlugin(Plugin, Protocol):
    def pre_score(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> Status: ...


class ScoreExtensions(Protocol):
    def normalize_score(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[str], scores: list[int]
    ) -> Status:
        """Rewrite ``scores`` in place into MIN_NODE_SCORE..MAX_NODE_SCORE; ``nodes`` are the
        scored nodes' names, in the same order (a normalizer that ignores some nodes needs
        them)."""
        ...


@runtime_checkable
class ScorePlugin(Plugin, Protocol):
    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]: ...

    def score_extensions(self) -> ScoreExtensions | None: ...


@runtime_checkable
class BatchScorePlugin(ScorePlugin, Protocol):
    """A Score plugin that scores many nodes in one call (see ``BatchFilterPlugin``): the
    scores in the nodes' order, exactly what ``score`` gives node by node, or the first
    error."""

    def score_nodes(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> tuple[list[int], Status]: ...


@runtime_checkable
class ReservePlugin(Plugin, Protocol):
    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status: ...

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        """Undo ``reserve``; idempotent, and called even if this plugin's reserve never ran."""
        ...


@runtime_checkable
class PermitPlugin(Plugin, Protocol):
    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status, float]:
        """SUCCESS, a rejection, or WAIT with a timeout in seconds (approve/reject later
        through ``Handle.waiting_pod``)."""
        ...


@runtime_checkable
class PreBindPlugin(Plugin, Protocol):
    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status: ...


@runtime_checkable
class BindPlugin(Plugin, Protocol):
    async def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        """Bind the pod, or SKIP to let the next Bind plugin do it."""
        ...


@runtime_checkable
class PostBindPlugin(Plugin, Protocol):
    async def post_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> None: ...


class NodeInfoLister(Protocol):
    """The snapshot of nodes a scheduling cycle sees; it does not change during the cycle."""

    def list(self) -> builtins.list[NodeInfo]: ...

    def get(self, node_name: str) -> NodeInfo:
        """KeyError if the node is not in the snapshot."""
        ...

    def have_pods_with_affinity(self) -> builtins.list[NodeInfo]: ...

    def have_pods_with_required_anti_affinity(self) -> builtins.list[NodeInfo]: ...

    def changed_since(self, mark: int) -> tuple[builtins.list[str] | None, int]:
        """The names of the nodes added, changed or removed since ``mark`` (what an earlier
        call returned; 0 the first time), and the mark for the next call.  None instead of the
        names when the snapshot does not remember that far back: look at every node.

        For state kept across cycles (PodTopologySpread's counts per domain): a cycle then
        visits only the nodes that changed since its state was last brought up to date."""
        ...


class Lister(Protocol[T]):
    """Read access to an informer's cache of one kind."""

    def list(self, namespace: str | None = None) -> builtins.list[T]: ...

    def get(self, key: str) -> T | None:
        """The object under ``namespace/name`` (or ``name``), or None."""
        ...


class WaitingPod(Protocol):
    """A pod held at Permit; each waiting plugin must allow it, any one may reject it."""

    @property
    def pod(self) -> Pod: ...

    def allow(self, plugin: str) -> None: ...

    def reject(self, plugin: str, message: str) -> None: ...


class Services(Protocol):
    """What the scheduler lends every framework: the snapshot of the current cycle, the
    informer caches, the clock, the API, and the pods nominated by preemption."""

    @property
    def snapshot(self) -> NodeInfoLister: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def client(self) -> ApiClient: ...

    @property
    def recorder(self) -> EventRecorder: ...

    def lister(self, cls: type[T]) -> Lister[T]:
        """The informer cache of ``cls`` (PersistentVolumeClaim, PodDisruptionBudget, ...)."""
        ...

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]:
        """Pods nominated to the node by preemption and not yet bound."""
        ...

    def nominated_nodes(self) -> Collection[str]:
        """The nodes some pod is nominated to (usually none: a cheap test before filtering)."""
        ...


class Handle(Services, Protocol):
    """What the framework gives plugins: the scheduler's services and the framework's own
    runners (preemption re-runs filters on what-if node states)."""

    def run_filter_plugins_with_nominated_pods(
        self, state: CycleState, pod: PodInfo, node: NodeInfo
    ) -> Status: ...

    def run_pre_filter_extension_add_pod(
        self, state: CycleState, pod: PodInfo, to_add: PodInfo, node: NodeInfo
    ) -> Status: ...

    def run_pre_filter_extension_remove_pod(
        self, state: CycleState, pod: PodInfo, to_remove: PodInfo, node: NodeInfo
    ) -> Status: ...

    def waiting_pod(self, uid: str) -> WaitingPod | None: ...

    def iterate_over_waiting_pods(self) -> list[WaitingPod]: ...


class PluginFactory(Protocol):
    def __call__(self, args: Mapping[str, Any] | None, handle: Handle) -> Plugin:
        """A plugin configured by its ``pluginConfig`` args (None: the defaults)."""
        ...


def plugins_implementing(plugins: Iterable[Plugin], method: str) -> list[Any]:
    """The plugins among ``plugins`` that implement the extension point ``method``."""
    return [plugin for plugin in plugins if callable(getattr(plugin, method, None))]
