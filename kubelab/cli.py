"""The ``kubelab`` command: one subcommand per component, like the Kubernetes binaries.

``kubelab server`` runs every control-plane component under one command (as ``k3s server``
does), each in a child process it supervises; the others run one component each.  A component
registers itself in ``COMPONENTS`` with a function that adds its flags and returns the
coroutine-running entry point; a component that is not built yet says so, names the issue
that tracks it, and exits with status 2, so no command ever pretends to work.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from controlplane import bootstraptoken as token_command
from controlplane import command as server_command
from controlplane.apiserver import command as apiserver_command
from controlplane.cloud import command as cloud_controller_manager_command
from controlplane.controllers import command as controller_manager_command
from controlplane.dns import command as dns_command
from controlplane.ingress import command as ingress_command
from controlplane.metricsserver import command as metrics_server_command
from controlplane.scheduler import command as scheduler_command
from kube import KUBERNETES_VERSION, __version__
from kubelab.lab import command as lab_command
from kubelab.lab import vagranthost
from kubelab.lab.images import command as images_command
from kubelab.story import command as story_command
from node.doctor import command as doctor_command
from node.hollow import command as hollow_command
from node.kubelet import command as kubelet_command
from node.netpol import command as network_policy_command
from node.proxy import command as proxy_command


@dataclass(frozen=True)
class Component:
    """A subcommand: its help line and either its runner or the issue that will build it."""

    help: str
    configure: Callable[[argparse.ArgumentParser], Callable[[argparse.Namespace], int]] | None = (
        None
    )
    issue: int | None = None


COMPONENTS: dict[str, Component] = {
    "server": Component(
        "every control-plane component under one command (like k3s server)",
        configure=server_command.configure,
    ),
    "apiserver": Component(
        "the Kubernetes API server over SQLite or etcd", configure=apiserver_command.configure
    ),
    "scheduler": Component(
        "the scheduler: framework and default plugins", configure=scheduler_command.configure
    ),
    "controller-manager": Component(
        "the controllers that drive the cluster", configure=controller_manager_command.configure
    ),
    "cloud-controller-manager": Component(
        "node, route and service controllers over a cloud provider",
        configure=cloud_controller_manager_command.configure,
    ),
    "kubelet": Component(
        "the node agent: pods on containerd over CRI", configure=kubelet_command.configure
    ),
    "proxy": Component("kube-proxy: Service VIPs in iptables", configure=proxy_command.configure),
    "network-policy": Component(
        "NetworkPolicy enforced on one node in nftables",
        configure=network_policy_command.configure,
    ),
    "doctor": Component(
        "what is wrong with this node: kubeadm's and k3s' checks, the lab's pitfalls",
        configure=doctor_command.configure,
    ),
    "story": Component(
        "the causal chain of an object in time order, from what the components recorded",
        configure=story_command.configure,
    ),
    "lab": Component("a multi-node cluster in network namespaces", configure=lab_command.configure),
    "vagrant": Component(
        "the lab on VMs: libvirt and Vagrant in a network namespace of their own",
        configure=vagranthost.configure,
    ),
    "images": Component(
        "the lab's images, built and loaded without a registry",
        configure=images_command.configure,
    ),
    "dns": Component(
        "the cluster DNS add-on: Services and EndpointSlices per the Kubernetes DNS spec",
        configure=dns_command.configure,
    ),
    "metrics-server": Component(
        "the resource metrics add-on: kubelets scraped, metrics.k8s.io served for kubectl top",
        configure=metrics_server_command.configure,
    ),
    "ingress": Component(
        "the lab's Ingress controller: an HTTP/HTTPS reverse proxy for networking.k8s.io/v1",
        configure=ingress_command.configure,
    ),
    "token": Component(
        "bootstrap tokens for joining kubelets (like kubeadm token)",
        configure=token_command.configure,
    ),
    "hollow-nodes": Component(
        "many nodes without containers in one process (for tests and benchmarks)",
        configure=hollow_command.configure,
    ),
}


def _not_built(name: str, issue: int) -> Callable[[argparse.Namespace], int]:
    def run(_: argparse.Namespace) -> int:
        print(
            f"kubelab {name}: not built yet; it is tracked in issue {issue}.",
            file=sys.stderr,
        )
        return 2

    return run


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kubelab",
        description="Kubernetes' core in Python, running for real on Linux.",
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"kubelab {__version__} (Kubernetes {KUBERNETES_VERSION})",
    )
    commands = parser.add_subparsers(title="components", dest="component", metavar="COMPONENT")
    for name, component in COMPONENTS.items():
        sub = commands.add_parser(name, help=component.help, description=component.help)
        if component.configure is not None:
            sub.set_defaults(run=component.configure(sub))
        else:
            assert component.issue is not None
            sub.set_defaults(run=_not_built(name, component.issue))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.component is None:
        parser.print_help()
        return 2
    code: int = args.run(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
