"""``kubelab story KIND/NAME``: the causal chain of an object, in time order.

As the internals chapter draws the chain of events of a Deployment: the create (who, when),
the ReplicaSet the deployment controller made, its Pods, each scheduling decision, the
kubelet's sandbox and CNI ADD, the image pulls, the containers started, Ready, the
EndpointSlice, each node's kube-proxy sync, the first DNS answer; one row per step with its
actor, time and the link to its cause.  The command only reads (:mod:`kubelab.story.gather`);
the telling is :mod:`kubelab.story.chain`.  ``-o json`` prints the steps as a JSON list.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from kube.table import aligned
from kubelab.story.chain import Step, tell
from kubelab.story.gather import StoryError, gather, parse_target

HEADER = ("TIME", "ACTOR", "STEP", "OBJECT", "DETAIL", "CAUSE")


def configure(parser: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    parser.add_argument("target", metavar="KIND/NAME", help="deployment, replicaset, pod, service")
    parser.add_argument("-n", "--namespace", default="default")
    parser.add_argument(
        "--kubeconfig",
        type=Path,
        default=os.environ.get("KUBECONFIG") or Path.home() / ".kube" / "config",
        help="the kubeconfig to read the API with (default: $KUBECONFIG, else ~/.kube/config)",
    )
    parser.add_argument(
        "--audit-log",
        type=Path,
        help="the API server's --audit-log-path, for who created what (default: not read)",
    )
    parser.add_argument(
        "--scheduler",
        metavar="URL",
        help="the scheduler's address, for its explain records (e.g. http://127.0.0.1:10259)",
    )
    parser.add_argument("-o", "--output", choices=("table", "json"), default="table")
    return run


def run(args: argparse.Namespace) -> int:
    try:
        steps = asyncio.run(_story(args))
    except StoryError as error:
        print(f"kubelab story: {error}", file=sys.stderr)
        return 1
    if args.output == "json":
        print(json.dumps([s.to_json() for s in steps], indent=2))
    else:
        print(render(steps), end="")
    return 0


async def _story(args: argparse.Namespace) -> list[Step]:
    from kube.client.errors import ApiError
    from kube.client.kubeconfig import KubeconfigError
    from kube.client.rest import Client

    cls, name = parse_target(args.target)
    try:
        client = Client.from_kubeconfig(args.kubeconfig, user_agent="kubelab-story")
    except (KubeconfigError, OSError) as error:
        raise StoryError(f"cannot load the kubeconfig {args.kubeconfig}: {error}") from error
    async with client:
        try:
            evidence = await gather(
                client,
                cls,
                name,
                args.namespace,
                audit_log=args.audit_log,
                scheduler=args.scheduler,
            )
        except ApiError as error:
            raise StoryError(error.status.message or str(error)) from error
        except OSError as error:
            raise StoryError(f"cannot reach the API server: {error}") from error
    return tell(evidence)


def render(steps: Sequence[Step]) -> str:
    """The steps as an aligned table, times to the millisecond where they are known."""
    rows = [HEADER] + [
        (_clock(s.time), s.actor, s.step, s.object, s.detail, s.cause) for s in steps
    ]
    return "\n".join(aligned(rows)) + "\n"


def _clock(time: datetime.datetime) -> str:
    millis = f".{time.microsecond // 1000:03d}" if time.microsecond else ""
    return time.strftime("%H:%M:%S") + millis
