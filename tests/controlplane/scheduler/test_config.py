"""KubeSchedulerConfiguration: defaults, merging user plugins into them, profiles, and errors."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.scheduler import names
from controlplane.scheduler.config import (
    DEFAULT_SCHEDULER_NAME,
    ConfigError,
    ExtensionPoint,
    KubeSchedulerConfiguration,
    LeaderElection,
    PluginRef,
    Plugins,
    PluginSet,
    Profile,
    default_plugins,
    from_dict,
    load,
    merge_plugin_set,
    num_feasible_nodes_to_find,
)
from controlplane.scheduler.framework.runtime import PLUGIN_INTERFACES
from kube.component import parse_duration

HEADER = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}

DEFAULT_WEIGHTS = {
    names.TAINT_TOLERATION: 3,
    names.NODE_AFFINITY: 2,
    names.NODE_RESOURCES_FIT: 1,
    names.POD_TOPOLOGY_SPREAD: 2,
    names.INTER_POD_AFFINITY: 2,
    names.NODE_RESOURCES_BALANCED_ALLOCATION: 1,
    names.IMAGE_LOCALITY: 1,
}


def config(**fields: Any) -> KubeSchedulerConfiguration:
    return from_dict(HEADER | fields)


def test_an_empty_configuration_is_the_default_one() -> None:
    loaded = config()
    assert loaded == KubeSchedulerConfiguration()
    assert loaded.parallelism == 16
    assert loaded.percentage_of_nodes_to_score == 0
    assert (loaded.pod_initial_backoff_seconds, loaded.pod_max_backoff_seconds) == (1, 10)
    assert loaded.leader_election == LeaderElection(
        leader_elect=True,
        lease_duration=15,
        renew_deadline=10,
        retry_period=2,
        resource_lock="leases",
        resource_namespace="kube-system",
        resource_name="kube-scheduler",
    )
    [profile] = loaded.profiles
    assert profile.scheduler_name == DEFAULT_SCHEDULER_NAME
    assert profile.plugins == default_plugins()
    assert profile.percentage_of_nodes_to_score is None


def test_default_plugins_are_upstreams_multi_point_set() -> None:
    defaults = default_plugins()
    assert [ref.name for ref in defaults.multi_point.enabled] == [
        names.SCHEDULING_GATES,
        names.PRIORITY_SORT,
        names.NODE_UNSCHEDULABLE,
        names.NODE_NAME,
        names.TAINT_TOLERATION,
        names.NODE_AFFINITY,
        names.NODE_PORTS,
        names.NODE_RESOURCES_FIT,
        names.VOLUME_RESTRICTIONS,
        names.NODE_VOLUME_LIMITS,
        names.VOLUME_BINDING,
        names.POD_TOPOLOGY_SPREAD,
        names.INTER_POD_AFFINITY,
        names.DEFAULT_PREEMPTION,
        names.NODE_RESOURCES_BALANCED_ALLOCATION,
        names.IMAGE_LOCALITY,
        names.DEFAULT_BINDER,
    ]
    assert {ref.name: ref.weight for ref in defaults.multi_point.enabled if ref.weight} == (
        DEFAULT_WEIGHTS
    )
    assert not defaults.points


def refs(*items: str | tuple[str, int]) -> tuple[PluginRef, ...]:
    return tuple(PluginRef(*item) if isinstance(item, tuple) else PluginRef(item) for item in items)


@pytest.mark.parametrize(
    ("default", "custom", "merged"),
    [
        pytest.param(
            PluginSet(refs("A", "B")), PluginSet(), PluginSet(refs("A", "B")), id="no-changes"
        ),
        pytest.param(
            PluginSet(refs("A", "B")),
            PluginSet(refs("C")),
            PluginSet(refs("A", "B", "C")),
            id="custom-appended",
        ),
        pytest.param(
            PluginSet(refs("A", "B")),
            PluginSet(disabled=("A",)),
            PluginSet(refs("B"), ("A",)),
            id="one-disabled",
        ),
        pytest.param(
            PluginSet(refs("A", "B")),
            PluginSet(refs("C"), ("*",)),
            PluginSet(refs("C"), ("*",)),
            id="all-disabled",
        ),
        pytest.param(
            PluginSet(refs(("A", 1), "B")),
            PluginSet(refs("C", ("A", 5))),
            PluginSet(refs(("A", 5), "B", "C")),
            id="default-replaced-in-place",
        ),
        pytest.param(
            PluginSet(refs("A"), ("X",)),
            PluginSet(disabled=("Y",)),
            PluginSet(refs("A"), ("Y", "X")),
            id="both-disabled-lists-kept",
        ),
        pytest.param(
            PluginSet(refs("A")),
            PluginSet(refs("C", "C")),
            PluginSet(refs("A", "C", "C")),
            id="repeats-left-for-the-framework-to-report",
        ),
    ],
)
def test_merge_plugin_set(default: PluginSet, custom: PluginSet, merged: PluginSet) -> None:
    assert merge_plugin_set(default, custom) == merged


def test_user_plugins_are_merged_into_the_defaults() -> None:
    loaded = config(
        profiles=[
            {
                "plugins": {
                    "multiPoint": {"enabled": [{"name": "ImageLocality", "weight": 5}]},
                    "score": {"disabled": [{"name": "NodeAffinity"}]},
                    "filter": {"enabled": [{"name": "Custom"}]},
                    "preFilter": {"disabled": [{"name": "*"}]},
                }
            }
        ]
    )
    plugins = loaded.profiles[0].plugins
    multi_point = {ref.name: ref.weight for ref in plugins.multi_point.enabled}
    assert multi_point[names.IMAGE_LOCALITY] == 5
    assert list(multi_point)[-2:] == [names.IMAGE_LOCALITY, names.DEFAULT_BINDER]
    assert plugins.at(ExtensionPoint.SCORE) == PluginSet(disabled=("NodeAffinity",))
    assert plugins.at(ExtensionPoint.FILTER) == PluginSet(refs("Custom"))
    assert plugins.at(ExtensionPoint.PRE_FILTER) == PluginSet(disabled=("*",))
    assert plugins.at(ExtensionPoint.BIND) == PluginSet()


def test_multiple_profiles() -> None:
    loaded = config(
        percentageOfNodesToScore=30,
        profiles=[
            {"schedulerName": "default-scheduler"},
            {
                "schedulerName": "no-scoring",
                "percentageOfNodesToScore": 80,
                "plugins": {"score": {"disabled": [{"name": "*"}]}},
                "pluginConfig": [
                    {
                        "name": "NodeResourcesFit",
                        "args": {
                            "apiVersion": "kubescheduler.config.k8s.io/v1",
                            "kind": "NodeResourcesFitArgs",
                            "scoringStrategy": {"type": "MostAllocated"},
                        },
                    }
                ],
            },
        ],
    )
    default, no_scoring = loaded.profiles
    assert loaded.profile("no-scoring") is no_scoring
    assert loaded.profile("missing") is None
    assert (loaded.percentage_for(default), loaded.percentage_for(no_scoring)) == (30, 80)
    assert no_scoring.args("NodeResourcesFit") == {"scoringStrategy": {"type": "MostAllocated"}}
    assert no_scoring.args("ImageLocality") is None
    assert default.plugins == default_plugins()


def test_load_yaml() -> None:
    loaded = load(
        """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: /etc/kubernetes/scheduler.conf
leaderElection:
  leaderElect: false
  leaseDuration: 1m30s
  renewDeadline: 45s
  retryPeriod: 500ms
podInitialBackoffSeconds: 2
podMaxBackoffSeconds: 20
parallelism: 4
profiles:
- schedulerName: default-scheduler
  plugins:
    score:
      enabled:
      - name: NodeResourcesBalancedAllocation
        weight: 4
"""
    )
    assert loaded.leader_election == LeaderElection(
        leader_elect=False, lease_duration=90, renew_deadline=45, retry_period=0.5
    )
    assert (loaded.pod_initial_backoff_seconds, loaded.pod_max_backoff_seconds) == (2, 20)
    assert loaded.parallelism == 4
    assert loaded.profiles[0].plugins.at(ExtensionPoint.SCORE) == PluginSet(
        refs(("NodeResourcesBalancedAllocation", 4))
    )


@pytest.mark.parametrize(
    ("fields", "errors"),
    [
        pytest.param(
            {"apiVersion": "kubescheduler.config.k8s.io/v1beta3"},
            [
                'apiVersion: Unsupported value: "kubescheduler.config.k8s.io/v1beta3": '
                'supported values: "kubescheduler.config.k8s.io/v1"'
            ],
            id="old-api-version",
        ),
        pytest.param(
            {"kind": "KubeProxyConfiguration"},
            [
                'kind: Unsupported value: "KubeProxyConfiguration": '
                'supported values: "KubeSchedulerConfiguration"'
            ],
            id="wrong-kind",
        ),
        pytest.param(
            {"parallelizm": 4}, ["parallelizm: Forbidden: unknown field"], id="unknown-field"
        ),
        pytest.param(
            {"profiles": [{"plugins": {"score": {"enabled": [{"nam": "X"}]}}}]},
            [
                "profiles[0].plugins.score.enabled[0].nam: Forbidden: unknown field",
                "profiles[0].plugins.score.enabled[0].name: Required value",
            ],
            id="plugin-without-name",
        ),
        pytest.param(
            {"parallelism": "4"}, ['parallelism: Invalid value: "4": must be an integer'], id="type"
        ),
        pytest.param(
            {"parallelism": True},
            ["parallelism: Invalid value: true: must be an integer"],
            id="bool-is-not-an-integer",
        ),
        pytest.param(
            {"parallelism": 0},
            ["parallelism: Invalid value: 0: should be an integer value greater than zero"],
            id="parallelism",
        ),
        pytest.param(
            {"profiles": {"schedulerName": "x"}},
            ['profiles: Invalid value: {"schedulerName": "x"}: must be a list'],
            id="profiles-not-a-list",
        ),
        pytest.param(
            {"percentageOfNodesToScore": 101},
            ["percentageOfNodesToScore: Invalid value: 101: not in valid range [0-100]"],
            id="percentage",
        ),
        pytest.param(
            {"profiles": [{"percentageOfNodesToScore": -1}]},
            ["profiles[0].percentageOfNodesToScore: Invalid value: -1: not in valid range [0-100]"],
            id="profile-percentage",
        ),
        pytest.param(
            {"profiles": [{"schedulerName": "a"}, {}]},
            ["profiles[1].schedulerName: Required value"],
            id="name-required-with-several-profiles",
        ),
        pytest.param(
            {"profiles": [{"schedulerName": "a"}, {"schedulerName": "a"}]},
            ['profiles[1].schedulerName: Duplicate value: "a"'],
            id="duplicate-profile",
        ),
        pytest.param(
            {
                "profiles": [
                    {"schedulerName": "a"},
                    {
                        "schedulerName": "b",
                        "plugins": {"queueSort": {"enabled": [{"name": "Other"}]}},
                    },
                ]
            },
            [
                'profiles[1].plugins.queueSort: Invalid value: ["Other"]: '
                "must be the same for all profiles"
            ],
            id="queue-sort-differs",
        ),
        pytest.param(
            {"profiles": [{"plugins": {"filter": {"enabled": [{"name": "EBSLimits"}]}}}]},
            [
                'profiles[0].plugins.filter.enabled[0]: Invalid value: "EBSLimits": was invalid '
                'in version "kubescheduler.config.k8s.io/v1" (KubeSchedulerConfiguration is '
                'version "kubescheduler.config.k8s.io/v1")'
            ],
            id="removed-plugin",
        ),
        pytest.param(
            {"profiles": [{"pluginConfig": [{"name": "A"}, {"name": "A"}]}]},
            ['profiles[0].pluginConfig[1]: Duplicate value: "A"'],
            id="duplicate-plugin-config",
        ),
        pytest.param(
            {"profiles": [{"pluginConfig": [{"name": "A", "args": {"kind": "BArgs"}}]}]},
            ['profiles[0].pluginConfig[0].args: Invalid value: "BArgs": kind must be "AArgs"'],
            id="plugin-config-of-another-kind",
        ),
        pytest.param(
            {"podInitialBackoffSeconds": 0},
            ["podInitialBackoffSeconds: Invalid value: 0: must be greater than 0"],
            id="initial-backoff",
        ),
        pytest.param(
            {"podInitialBackoffSeconds": 5, "podMaxBackoffSeconds": 2},
            [
                "podMaxBackoffSeconds: Invalid value: 2: "
                "must be greater than or equal to PodInitialBackoffSeconds"
            ],
            id="max-backoff-below-initial",
        ),
        pytest.param(
            {"leaderElection": {"leaseDuration": "10s", "renewDeadline": "10s"}},
            [
                'leaderElection.leaseDuration: Invalid value: "10s": '
                "LeaseDuration must be greater than RenewDeadline"
            ],
            id="lease-not-longer-than-renew-deadline",
        ),
        pytest.param(
            {"leaderElection": {"retryPeriod": "soon"}},
            [
                'leaderElection.retryPeriod: Invalid value: "soon": '
                "must be a duration such as 15s or 1m30s"
            ],
            id="bad-duration",
        ),
        pytest.param(
            {"leaderElection": {"resourceLock": "endpoints"}},
            [
                'leaderElection.resourceLock: Invalid value: "endpoints": '
                'resourceLock value must be "leases"'
            ],
            id="resource-lock",
        ),
        pytest.param(
            {"extenders": [{"urlPrefix": "http://x"}]},
            ["extenders: Forbidden: scheduler extenders are not supported"],
            id="extenders",
        ),
    ],
)
def test_bad_configurations(fields: dict[str, Any], errors: list[str]) -> None:
    with pytest.raises(ConfigError) as raised:
        config(**fields)
    assert [str(error) for error in raised.value.errors] == errors
    assert str(raised.value).startswith("invalid KubeSchedulerConfiguration: [")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("a: [", "invalid KubeSchedulerConfiguration: malformed YAML", id="malformed"),
        pytest.param(
            "a: 1\n---\nb: 2",
            "invalid KubeSchedulerConfiguration: expected one YAML document, found 2",
            id="two-documents",
        ),
    ],
)
def test_unreadable_files(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load(text)


def test_profiles_built_in_code_default_to_the_default_plugins() -> None:
    assert Profile().plugins == default_plugins()
    assert Plugins().at(ExtensionPoint.FILTER) == PluginSet()


@pytest.mark.parametrize(
    ("point", "method", "label"),
    [
        pytest.param(ExtensionPoint.QUEUE_SORT, "less", "QueueSort", id="queue-sort"),
        pytest.param(ExtensionPoint.PRE_FILTER, "pre_filter", "PreFilter", id="pre-filter"),
        pytest.param(ExtensionPoint.FILTER, "filter", "Filter", id="filter"),
        pytest.param(ExtensionPoint.POST_BIND, "post_bind", "PostBind", id="post-bind"),
    ],
)
def test_extension_point_names(point: ExtensionPoint, method: str, label: str) -> None:
    # The method is what makes a plugin one of the point's: its interface declares it.
    assert (hasattr(PLUGIN_INTERFACES[point], method), point.label) == (True, label)


@pytest.mark.parametrize(
    ("percentage", "num_nodes", "expected"),
    [
        pytest.param(None, 0, 0, id="no-nodes"),
        pytest.param(None, 99, 99, id="small-cluster-searched-whole"),
        pytest.param(10, 99, 99, id="percentage-ignored-below-100-nodes"),
        pytest.param(None, 100, 100, id="adaptive-at-100"),
        pytest.param(0, 1000, 420, id="adaptive-1000"),
        pytest.param(None, 5000, 500, id="adaptive-5000"),
        pytest.param(None, 6000, 300, id="adaptive-floor-5-percent"),
        pytest.param(None, 250, 120, id="adaptive-250"),
        pytest.param(50, 1000, 500, id="explicit"),
        pytest.param(1, 1000, 100, id="never-below-100"),
        pytest.param(100, 5000, 5000, id="all"),
    ],
)
def test_num_feasible_nodes_to_find(percentage: int | None, num_nodes: int, expected: int) -> None:
    assert num_feasible_nodes_to_find(percentage, num_nodes) == expected


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        pytest.param("15s", 15.0, id="seconds"),
        pytest.param("1m30s", 90.0, id="compound"),
        pytest.param("250ms", 0.25, id="milliseconds"),
        pytest.param("1.5h", 5400.0, id="fractional"),
        pytest.param("0", 0.0, id="zero"),
        pytest.param("-2s", -2.0, id="negative"),
    ],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty"),
        pytest.param("15", id="no-unit"),
        pytest.param("1d", id="unknown-unit"),
        pytest.param("1s ", id="trailing-space"),
    ],
)
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        parse_duration(text)
