"""Why a pod went where it went: the scheduler's decision record, as JSON and as a table.

The scheduler keeps, for its latest decisions, every examined node's Filter verdict and every
Score plugin's raw, normalized and weighted score.  ``to_json`` is what the scheduler serves
at ``/debug/explain/NAMESPACE/NAME``; ``render`` is what ``kubelab scheduler explain`` prints
from it.  Rejected nodes are grouped by verdict (a thousand nodes rejected for the same taint
are one line); feasible nodes are listed best first with each plugin's contribution, so the
winner's margin and where it came from are visible at a glance.
"""

from __future__ import annotations

import datetime
from collections import defaultdict
from typing import Any

from controlplane.scheduler.scheduler import Decision
from kube.table import aligned


def to_json(decision: Decision) -> dict[str, Any]:
    record = decision.record
    return {
        "pod": decision.pod,
        "uid": decision.uid,
        "profile": decision.profile,
        "attempt": decision.attempt,
        "result": decision.result,
        "node": decision.node,
        "message": decision.message,
        "nodesTotal": decision.nodes_total,
        "time": datetime.datetime.fromtimestamp(decision.timestamp, datetime.UTC).isoformat(),
        "preFilter": _verdict(record.pre_filter.plugin, record.pre_filter.message)
        if record.pre_filter.reasons
        else None,
        "filter": {
            node: None if status.is_success else _verdict(status.plugin, status.message)
            for node, status in record.filter_verdicts.items()
        },
        "weights": record.scores.weights if record.scores else {},
        "scores": {
            node: {
                plugin: {"raw": b.raw, "normalized": b.normalized, "weighted": b.weighted}
                for plugin, b in plugins.items()
            }
            for node, plugins in (record.scores.breakdown() if record.scores else {}).items()
        },
        "total": record.scores.total() if record.scores else {},
    }


def _verdict(plugin: str, message: str) -> dict[str, str]:
    return {"plugin": plugin, "reason": message}


def render(doc: dict[str, Any], top: int = 10) -> str:
    """The decision as text: outcome, filter verdicts grouped, the best ``top`` nodes' scores."""
    lines = [f"Pod:      {doc['pod']} (uid {doc['uid']})"]
    lines.append(f"Profile:  {doc['profile']}, attempt {doc['attempt']}, at {doc['time']}")
    outcome = doc["result"] + (f" on {doc['node']}" if doc["node"] else "")
    lines.append(f"Result:   {outcome}")
    if doc["message"]:
        lines.append(f"Message:  {doc['message']}")
    verdicts: dict[str, dict[str, str] | None] = doc["filter"]
    feasible = [node for node, verdict in verdicts.items() if verdict is None]
    lines.append(
        f"Nodes:    {doc['nodesTotal']} in the cluster, {len(verdicts)} examined, "
        f"{len(feasible)} feasible"
    )
    if doc["preFilter"]:
        pre = doc["preFilter"]
        lines += ["", f"PreFilter rejected the pod: {pre['plugin']}: {pre['reason']}"]
    rejected: dict[tuple[str, str], list[str]] = defaultdict(list)
    for node, verdict in verdicts.items():
        if verdict is not None:
            rejected[(verdict["plugin"], verdict["reason"])].append(node)
    if rejected:
        lines += ["", "Filtered out:"]
        rows = [["NODES", "PLUGIN", "REASON"]]
        for (plugin, reason), nodes in sorted(rejected.items(), key=lambda kv: -len(kv[1])):
            shown = ", ".join(sorted(nodes)[:3]) + (
                f" (+{len(nodes) - 3})" if len(nodes) > 3 else ""
            )
            rows.append([shown, plugin or "-", reason])
        lines += ["  " + line for line in aligned(rows, gap=3)]
    scores: dict[str, dict[str, dict[str, int]]] = doc["scores"]
    if scores:
        plugins = sorted({plugin for per_node in scores.values() for plugin in per_node})
        ranked = sorted(scores, key=lambda node: (-doc["total"].get(node, 0), node))
        lines += [
            "",
            f"Scores (raw → normalized x weight = weighted), best {min(top, len(ranked))}:",
        ]
        header = ["NODE", "TOTAL"] + [f"{p} (x{doc['weights'].get(p, 1)})" for p in plugins]
        rows = [header]
        for node in ranked[:top]:
            marker = " *" if node == doc["node"] else ""
            cells = [node + marker, str(doc["total"].get(node, 0))]
            for plugin in plugins:
                b = scores[node].get(plugin)
                cells.append(f"{b['raw']} → {b['normalized']} = {b['weighted']}" if b else "-")
            rows.append(cells)
        lines += ["  " + line for line in aligned(rows, gap=3)]
    elif len(feasible) == 1:
        lines += ["", "Only one node was feasible, so nothing was scored."]
    return "\n".join(lines) + "\n"
