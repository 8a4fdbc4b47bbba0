"""KubeSchedulerConfiguration (``kubescheduler.config.k8s.io/v1``): profiles, plugins, and the
queue and leader-election settings, loaded from YAML the way kube-scheduler loads its
``--config`` file.

Loading happens in three steps, as upstream: *decode* the document strictly (an unknown field
is an error, not a silent typo), *default* it (a missing profile list becomes the one
``default-scheduler`` profile; each profile's plugins are merged into the default set), and
*validate* the result.  Every problem found in decoding and validation is reported at once in
one ``ConfigError`` whose lines name the field (``profiles[1].schedulerName: Required value``).

The default plugins are all enabled through ``multiPoint``: each plugin runs at every extension
point it implements, and the framework expands the list.  A user's plugin sets are merged into
the defaults per extension point: ``disabled`` removes defaults by name (``"*"``: all of them),
an ``enabled`` plugin that is also a default replaces it in place (how weights are changed),
and the other enabled plugins are appended.  A plugin disabled at one extension point keeps
running at the others, which is how ``score: {disabled: [{name: ImageLocality}]}`` turns off
just the scoring of a multi-point plugin.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from controlplane.scheduler import names
from kube.api.codec import DecodeError, load_yaml_documents
from kube.api.errors import ROOT, ErrorList, Path
from kube.component import parse_duration

API_VERSION = "kubescheduler.config.k8s.io/v1"
KIND = "KubeSchedulerConfiguration"
DEFAULT_SCHEDULER_NAME = "default-scheduler"

MIN_FEASIBLE_NODES_TO_FIND = 100
"""Below this many nodes every node is examined, whatever the percentage says."""
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5
"""The adaptive percentage never falls below this, however large the cluster."""

_REMOVED_PLUGINS = ("AzureDiskLimits", "CinderLimits", "EBSLimits", "GCEPDLimits")
"""Plugins that version v1 no longer accepts (folded into NodeVolumeLimits)."""

_IGNORED_FIELDS = frozenset(
    {
        "clientConnection",
        "healthzBindAddress",
        "metricsBindAddress",
        "enableProfiling",
        "enableContentionProfiling",
        "delayCacheUntilActive",
    }
)
"""Upstream fields accepted so real configuration files load, with no effect here."""


class ConfigError(ValueError):
    """The configuration is malformed or invalid; ``errors`` names every offending field
    (empty when the file is not even YAML)."""

    def __init__(self, problem: ErrorList | str) -> None:
        self.errors = problem if isinstance(problem, ErrorList) else ErrorList()
        super().__init__(f"invalid {KIND}: {problem}")


class ExtensionPoint(enum.Enum):
    """An extension point, valued by its key in a profile's ``plugins``."""

    PRE_ENQUEUE = "preEnqueue"
    QUEUE_SORT = "queueSort"
    PRE_FILTER = "preFilter"
    FILTER = "filter"
    POST_FILTER = "postFilter"
    PRE_SCORE = "preScore"
    SCORE = "score"
    RESERVE = "reserve"
    PERMIT = "permit"
    PRE_BIND = "preBind"
    BIND = "bind"
    POST_BIND = "postBind"

    @property
    def label(self) -> str:
        """The name upstream's metrics and messages use (``PreFilter``)."""
        return self.value[0].upper() + self.value[1:]


@dataclass(frozen=True, slots=True)
class PluginRef:
    """A plugin named in a plugin set."""

    name: str
    weight: int = 0
    """Score weight; 0 leaves it unset (the weight given elsewhere in the profile, else 1)."""


@dataclass(frozen=True, slots=True)
class PluginSet:
    enabled: tuple[PluginRef, ...] = ()
    disabled: tuple[str, ...] = ()
    """Names of default plugins not to run here; ``"*"`` disables all of them."""


EMPTY_PLUGIN_SET = PluginSet()


@dataclass(frozen=True, slots=True)
class Plugins:
    """A profile's plugins: those enabled at every point they implement, and per point."""

    multi_point: PluginSet = EMPTY_PLUGIN_SET
    points: Mapping[ExtensionPoint, PluginSet] = field(default_factory=dict)

    def at(self, point: ExtensionPoint) -> PluginSet:
        return self.points.get(point, EMPTY_PLUGIN_SET)

    def names(self) -> list[str]:
        """Every plugin enabled anywhere, multi-point ones first, each once."""
        sets = [self.multi_point, *(self.at(point) for point in ExtensionPoint)]
        return list(dict.fromkeys(ref.name for s in sets for ref in s.enabled))


def default_plugins() -> Plugins:
    """Upstream 1.36's defaults (``apis/config/v1/default_plugins.go``), less the plugins this
    project does not implement (VolumeZone, DynamicResources)."""
    return Plugins(
        multi_point=PluginSet(
            enabled=(
                PluginRef(names.SCHEDULING_GATES),
                PluginRef(names.PRIORITY_SORT),
                PluginRef(names.NODE_UNSCHEDULABLE),
                PluginRef(names.NODE_NAME),
                PluginRef(names.TAINT_TOLERATION, 3),
                PluginRef(names.NODE_AFFINITY, 2),
                PluginRef(names.NODE_PORTS),
                PluginRef(names.NODE_RESOURCES_FIT, 1),
                PluginRef(names.VOLUME_RESTRICTIONS),
                PluginRef(names.NODE_VOLUME_LIMITS),
                PluginRef(names.VOLUME_BINDING),
                PluginRef(names.POD_TOPOLOGY_SPREAD, 2),
                PluginRef(names.INTER_POD_AFFINITY, 2),
                PluginRef(names.DEFAULT_PREEMPTION),
                PluginRef(names.NODE_RESOURCES_BALANCED_ALLOCATION, 1),
                PluginRef(names.IMAGE_LOCALITY, 1),
                PluginRef(names.DEFAULT_BINDER),
            )
        )
    )


def merge_plugin_set(default: PluginSet, custom: PluginSet) -> PluginSet:
    """``custom`` applied to ``default`` (upstream's ``mergePluginSet``).

    Both disabled lists are kept: the framework's multi-point expansion reads them to skip a
    plugin at this point.  A custom plugin repeated by mistake stays repeated, so that the
    framework reports it.
    """
    disabled = (*custom.disabled, *default.disabled)
    replacements = {ref.name: i for i, ref in enumerate(custom.enabled)}
    enabled: list[PluginRef] = []
    replaced: set[int] = set()
    if "*" not in disabled:
        for ref in default.enabled:
            if ref.name in disabled:
                continue
            if ref.name in replacements:
                index = replacements[ref.name]
                replaced.add(index)
                ref = custom.enabled[index]
            enabled.append(ref)
    enabled += [ref for i, ref in enumerate(custom.enabled) if i not in replaced]
    return PluginSet(tuple(enabled), disabled)


def merge_plugins(default: Plugins, custom: Plugins) -> Plugins:
    """``custom`` applied to ``default``, extension point by extension point."""
    return Plugins(
        multi_point=merge_plugin_set(default.multi_point, custom.multi_point),
        points={
            point: merge_plugin_set(default.at(point), custom.at(point))
            for point in ExtensionPoint
            if point in default.points or point in custom.points
        },
    )


@dataclass(frozen=True, slots=True)
class Profile:
    """One scheduling profile: pods whose ``spec.schedulerName`` is ``scheduler_name`` are
    scheduled by a framework built from these plugins (already merged with the defaults)."""

    scheduler_name: str = DEFAULT_SCHEDULER_NAME
    plugins: Plugins = field(default_factory=default_plugins)
    plugin_config: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Plugin name → its args; a plugin without an entry gets its defaults."""
    percentage_of_nodes_to_score: int | None = None
    """None: the configuration-wide value."""

    def args(self, plugin: str) -> Mapping[str, Any] | None:
        return self.plugin_config.get(plugin)


@dataclass(frozen=True, slots=True)
class LeaderElection:
    """Only one scheduler of a high-availability set schedules: the holder of a Lease."""

    leader_elect: bool = True
    lease_duration: float = 15.0
    """Seconds a non-leader waits after the last renewal before taking over."""
    renew_deadline: float = 10.0
    """Seconds the leader keeps trying to renew before it gives up leading."""
    retry_period: float = 2.0
    resource_lock: str = "leases"
    resource_namespace: str = "kube-system"
    resource_name: str = "kube-scheduler"


@dataclass(frozen=True, slots=True)
class KubeSchedulerConfiguration:
    profiles: tuple[Profile, ...] = (Profile(),)
    parallelism: int = 16
    percentage_of_nodes_to_score: int = 0
    """0: adaptive (see ``num_feasible_nodes_to_find``)."""
    pod_initial_backoff_seconds: int = 1
    pod_max_backoff_seconds: int = 10
    leader_election: LeaderElection = LeaderElection()

    def profile(self, scheduler_name: str) -> Profile | None:
        return next((p for p in self.profiles if p.scheduler_name == scheduler_name), None)

    def percentage_for(self, profile: Profile) -> int:
        """The percentage of nodes ``profile`` scores: its own if set, else the global one."""
        if profile.percentage_of_nodes_to_score is not None:
            return profile.percentage_of_nodes_to_score
        return self.percentage_of_nodes_to_score


def num_feasible_nodes_to_find(percentage: int | None, num_nodes: int) -> int:
    """How many feasible nodes a scheduling cycle looks for before it stops filtering.

    Small clusters are searched whole.  A percentage of 0 (or None) adapts to the cluster:
    50% less one point per 125 nodes, never under 5%; the answer is never under 100.
    """
    if num_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_nodes
    if not percentage:
        percentage = max(50 - num_nodes // 125, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    return max(num_nodes * percentage // 100, MIN_FEASIBLE_NODES_TO_FIND)


# Decoding.

T = TypeVar("T")


class _Decoder:
    """Reads plain YAML values into the configuration, collecting every problem."""

    def __init__(self) -> None:
        self.errors = ErrorList()

    def mapping(
        self, raw: Any, path: Path, known: Sequence[str], ignored: frozenset[str] = frozenset()
    ) -> dict[str, Any]:
        """``raw`` as a mapping of its ``known`` keys; other keys not ``ignored`` are errors."""
        if raw is None:
            return {}
        if not isinstance(raw, dict):
            self.errors.invalid(path, raw, "must be an object")
            return {}
        for key in raw:
            if key not in known and key not in ignored:
                self.errors.forbidden(path.child(str(key)), "unknown field")
        return {key: value for key, value in raw.items() if key in known}

    def sequence(self, raw: Any, path: Path) -> list[Any]:
        if raw is None:
            return []
        if not isinstance(raw, list):
            self.errors.invalid(path, raw, "must be a list")
            return []
        return raw

    def scalar(self, raw: Any, path: Path, kind: type[T], default: T) -> T:
        if raw is None:
            return default
        # bool is an int to Python, never to a configuration file.
        if isinstance(raw, kind) and not (isinstance(raw, bool) and kind is not bool):
            return raw
        self.errors.invalid(path, raw, f"must be {_KIND_NAMES[kind]}")
        return default

    def duration(self, raw: Any, path: Path, default: float) -> float:
        if raw is None:
            return default
        try:
            return parse_duration(raw if isinstance(raw, str) else "")
        except ValueError:
            self.errors.invalid(path, raw, "must be a duration such as 15s or 1m30s")
            return default

    def plugin_set(self, raw: Any, path: Path) -> PluginSet:
        fields = self.mapping(raw, path, ("enabled", "disabled"))
        return PluginSet(
            enabled=tuple(self._refs(fields.get("enabled"), path.child("enabled"))),
            disabled=tuple(
                ref.name for ref in self._refs(fields.get("disabled"), path.child("disabled"))
            ),
        )

    def _refs(self, raw: Any, path: Path) -> list[PluginRef]:
        refs = []
        for i, item in enumerate(self.sequence(raw, path)):
            item_path = path.index(i)
            fields = self.mapping(item, item_path, ("name", "weight"))
            name = self.scalar(fields.get("name"), item_path.child("name"), str, "")
            if not name:
                self.errors.required(item_path.child("name"))
            weight = self.scalar(fields.get("weight"), item_path.child("weight"), int, 0)
            refs.append(PluginRef(name, weight))
        return refs

    def plugins(self, raw: Any, path: Path) -> Plugins:
        keys = ["multiPoint", *(point.value for point in ExtensionPoint)]
        fields = self.mapping(raw, path, keys)
        return Plugins(
            multi_point=self.plugin_set(fields.get("multiPoint"), path.child("multiPoint")),
            points={
                point: self.plugin_set(fields[point.value], path.child(point.value))
                for point in ExtensionPoint
                if point.value in fields
            },
        )

    def plugin_config(self, raw: Any, path: Path) -> dict[str, Mapping[str, Any]]:
        """Plugin name → args, with an ``apiVersion``/``kind`` header in the args dropped."""
        config: dict[str, Mapping[str, Any]] = {}
        for i, item in enumerate(self.sequence(raw, path)):
            item_path = path.index(i)
            fields = self.mapping(item, item_path, ("name", "args"))
            name = self.scalar(fields.get("name"), item_path.child("name"), str, "")
            if not name:
                self.errors.required(item_path.child("name"))
                continue
            if name in config:
                self.errors.duplicate(item_path, name)
                continue
            args = fields.get("args")
            if args is not None and not isinstance(args, dict):
                self.errors.invalid(item_path.child("args"), args, "must be an object")
                continue
            args = dict(args or {})
            args.pop("apiVersion", None)
            kind = args.pop("kind", f"{name}Args")
            if kind != f"{name}Args":
                self.errors.invalid(item_path.child("args"), kind, f'kind must be "{name}Args"')
            config[name] = args
        return config

    def profile(self, raw: Any, path: Path, name_default: str) -> Profile:
        fields = self.mapping(
            raw, path, ("schedulerName", "percentageOfNodesToScore", "plugins", "pluginConfig")
        )
        percentage = fields.get("percentageOfNodesToScore")
        return Profile(
            scheduler_name=self.scalar(
                fields.get("schedulerName"), path.child("schedulerName"), str, name_default
            ),
            plugins=merge_plugins(
                default_plugins(), self.plugins(fields.get("plugins"), path.child("plugins"))
            ),
            plugin_config=self.plugin_config(
                fields.get("pluginConfig"), path.child("pluginConfig")
            ),
            percentage_of_nodes_to_score=None
            if percentage is None
            else self.scalar(percentage, path.child("percentageOfNodesToScore"), int, 0),
        )

    def leader_election(self, raw: Any, path: Path) -> LeaderElection:
        defaults = LeaderElection()
        fields = self.mapping(
            raw,
            path,
            (
                "leaderElect",
                "leaseDuration",
                "renewDeadline",
                "retryPeriod",
                "resourceLock",
                "resourceNamespace",
                "resourceName",
            ),
        )

        def text(key: str, default: str) -> str:
            return self.scalar(fields.get(key), path.child(key), str, default) or default

        return LeaderElection(
            leader_elect=self.scalar(
                fields.get("leaderElect"), path.child("leaderElect"), bool, True
            ),
            lease_duration=self.duration(
                fields.get("leaseDuration"), path.child("leaseDuration"), defaults.lease_duration
            ),
            renew_deadline=self.duration(
                fields.get("renewDeadline"), path.child("renewDeadline"), defaults.renew_deadline
            ),
            retry_period=self.duration(
                fields.get("retryPeriod"), path.child("retryPeriod"), defaults.retry_period
            ),
            resource_lock=text("resourceLock", defaults.resource_lock),
            resource_namespace=text("resourceNamespace", defaults.resource_namespace),
            resource_name=text("resourceName", defaults.resource_name),
        )

    def configuration(self, raw: Any) -> KubeSchedulerConfiguration:
        defaults = KubeSchedulerConfiguration()
        fields = self.mapping(
            raw,
            ROOT,
            (
                "apiVersion",
                "kind",
                "parallelism",
                "percentageOfNodesToScore",
                "podInitialBackoffSeconds",
                "podMaxBackoffSeconds",
                "leaderElection",
                "profiles",
                "extenders",
            ),
            _IGNORED_FIELDS,
        )
        if fields.get("apiVersion") != API_VERSION:
            self.errors.not_supported(
                ROOT.child("apiVersion"), fields.get("apiVersion"), [API_VERSION]
            )
        if fields.get("kind") != KIND:
            self.errors.not_supported(ROOT.child("kind"), fields.get("kind"), [KIND])
        if self.sequence(fields.get("extenders"), ROOT.child("extenders")):
            self.errors.forbidden(ROOT.child("extenders"), "scheduler extenders are not supported")
        raw_profiles = self.sequence(fields.get("profiles"), ROOT.child("profiles")) or [{}]
        # Only a lone profile may leave its name out; validation catches the others.
        name_default = DEFAULT_SCHEDULER_NAME if len(raw_profiles) == 1 else ""
        return KubeSchedulerConfiguration(
            profiles=tuple(
                self.profile(raw_profile, ROOT.child("profiles").index(i), name_default)
                for i, raw_profile in enumerate(raw_profiles)
            ),
            parallelism=self.scalar(
                fields.get("parallelism"), ROOT.child("parallelism"), int, defaults.parallelism
            ),
            percentage_of_nodes_to_score=self.scalar(
                fields.get("percentageOfNodesToScore"),
                ROOT.child("percentageOfNodesToScore"),
                int,
                defaults.percentage_of_nodes_to_score,
            ),
            pod_initial_backoff_seconds=self.scalar(
                fields.get("podInitialBackoffSeconds"),
                ROOT.child("podInitialBackoffSeconds"),
                int,
                defaults.pod_initial_backoff_seconds,
            ),
            pod_max_backoff_seconds=self.scalar(
                fields.get("podMaxBackoffSeconds"),
                ROOT.child("podMaxBackoffSeconds"),
                int,
                defaults.pod_max_backoff_seconds,
            ),
            leader_election=self.leader_election(
                fields.get("leaderElection"), ROOT.child("leaderElection")
            ),
        )


_KIND_NAMES: dict[type[Any], str] = {
    int: "an integer",
    str: "a string",
    bool: "a boolean",
}


# Validation.


def _validate_percentage(errors: ErrorList, path: Path, value: int | None) -> None:
    if value is not None and not 0 <= value <= 100:
        errors.invalid(path, value, "not in valid range [0-100]")


def _validate_leader_election(errors: ErrorList, path: Path, le: LeaderElection) -> None:
    if not le.leader_elect:
        return
    for key, value in (
        ("leaseDuration", le.lease_duration),
        ("renewDeadline", le.renew_deadline),
        ("retryPeriod", le.retry_period),
    ):
        if value <= 0:
            errors.invalid(path.child(key), f"{value:g}s", "must be greater than zero")
    if le.lease_duration <= le.renew_deadline:
        errors.invalid(
            path.child("leaseDuration"),
            f"{le.lease_duration:g}s",
            "LeaseDuration must be greater than RenewDeadline",
        )
    if le.resource_lock != "leases":
        errors.invalid(
            path.child("resourceLock"), le.resource_lock, 'resourceLock value must be "leases"'
        )


def _validate_profile(errors: ErrorList, path: Path, profile: Profile) -> None:
    if not profile.scheduler_name:
        errors.required(path.child("schedulerName"))
    _validate_percentage(
        errors, path.child("percentageOfNodesToScore"), profile.percentage_of_nodes_to_score
    )
    plugin_sets = {"multiPoint": profile.plugins.multi_point} | {
        point.value: profile.plugins.at(point) for point in ExtensionPoint
    }
    removed = (
        f'was invalid in version "{API_VERSION}" '
        f'(KubeSchedulerConfiguration is version "{API_VERSION}")'
    )
    for key, plugin_set in plugin_sets.items():
        for i, ref in enumerate(plugin_set.enabled):
            if ref.name in _REMOVED_PLUGINS:
                errors.invalid(
                    path.child("plugins").child(key).child("enabled").index(i), ref.name, removed
                )
    for name in profile.plugin_config:
        if name in _REMOVED_PLUGINS:
            errors.invalid(path.child("pluginConfig"), name, removed)


def _validate_common_queue_sort(errors: ErrorList, profiles: Sequence[Profile]) -> None:
    """Profiles share one scheduling queue, so they must sort it the same way."""
    first = profiles[0]
    canon = first.plugins.at(ExtensionPoint.QUEUE_SORT)
    path = ROOT.child("profiles")
    if len(canon.enabled) > 1:
        errors.invalid(
            path.index(0).child("plugins").child("queueSort").child("enabled"),
            len(canon.enabled),
            "only one queue sort plugin can be enabled",
        )
    name = canon.enabled[0].name if canon.enabled else ""
    for i, profile in enumerate(profiles[1:], start=1):
        current = profile.plugins.at(ExtensionPoint.QUEUE_SORT)
        if current != canon:
            errors.invalid(
                path.index(i).child("plugins").child("queueSort"),
                [ref.name for ref in current.enabled],
                "must be the same for all profiles",
            )
        if name and profile.args(name) != first.args(name):
            errors.invalid(
                path.index(i).child("pluginConfig"),
                name,
                "queueSort must be the same for all profiles",
            )


def validate(config: KubeSchedulerConfiguration) -> ErrorList:
    """Every problem with ``config`` (upstream's ``ValidateKubeSchedulerConfiguration``)."""
    errors = ErrorList()
    _validate_leader_election(errors, ROOT.child("leaderElection"), config.leader_election)
    if config.parallelism <= 0:
        errors.invalid(
            ROOT.child("parallelism"),
            config.parallelism,
            "should be an integer value greater than zero",
        )
    profiles_path = ROOT.child("profiles")
    if not config.profiles:
        errors.required(profiles_path)
    else:
        seen: dict[str, int] = {}
        for i, profile in enumerate(config.profiles):
            _validate_profile(errors, profiles_path.index(i), profile)
            if profile.scheduler_name in seen:
                errors.duplicate(
                    profiles_path.index(i).child("schedulerName"), profile.scheduler_name
                )
            seen.setdefault(profile.scheduler_name, i)
        _validate_common_queue_sort(errors, config.profiles)
    _validate_percentage(
        errors, ROOT.child("percentageOfNodesToScore"), config.percentage_of_nodes_to_score
    )
    if config.pod_initial_backoff_seconds <= 0:
        errors.invalid(
            ROOT.child("podInitialBackoffSeconds"),
            config.pod_initial_backoff_seconds,
            "must be greater than 0",
        )
    if config.pod_max_backoff_seconds < config.pod_initial_backoff_seconds:
        errors.invalid(
            ROOT.child("podMaxBackoffSeconds"),
            config.pod_max_backoff_seconds,
            "must be greater than or equal to PodInitialBackoffSeconds",
        )
    return errors


def from_dict(raw: Any) -> KubeSchedulerConfiguration:
    """A configuration decoded from plain values, defaulted and validated; ConfigError if not."""
    decoder = _Decoder()
    config = decoder.configuration(raw)
    errors = decoder.errors
    errors += validate(config)
    if errors:
        raise ConfigError(errors)
    return config


def load(text: str | bytes) -> KubeSchedulerConfiguration:
    """The configuration in a YAML (or JSON) document, as ``kube-scheduler --config`` reads it."""
    try:
        documents = load_yaml_documents(text)
    except DecodeError as error:
        raise ConfigError(str(error)) from None
    if len(documents) != 1:
        raise ConfigError(f"expected one YAML document, found {len(documents)}")
    return from_dict(documents[0])
