"""The lab's kubelets and server run with the kubelet API secured: serving certificates through
the CSR API (approved by the server's csrapproving) and verified by the API server, requests to
the kubelet authenticated and authorized by the API server; the real flag parsers accept it."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from controlplane import command as server_command
from kubelab.lab import components
from kubelab.lab.topology import Lab, LabSpec
from node.kubelet import command as kubelet_command


def parse(
    add_flags: Callable[[argparse.ArgumentParser], None], command: tuple[str, ...], skip: int
) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_flags(parser)
    return parser.parse_args(list(command[skip:]))


def test_the_lab_kubelet_asks_for_its_serving_certificate_and_delegates_auth() -> None:
    lab = Lab(LabSpec(name="demo"))
    kubelet = components.kubelet(lab, lab.node("node1")).command
    assert "--tls-cert-file" not in kubelet
    args = parse(kubelet_command.add_flags, kubelet, len(components.KUBELAB) + 1)
    assert args.rotate_server_certificates
    config = kubelet_command.kubelet_config(args)
    assert config.server is not None
    assert (config.server.tls_cert, config.server.client_ca) == (None, lab.ca_file)
    auth = config.server.auth
    assert (auth.anonymous, auth.token_webhook, auth.webhook_authorization) == (False, True, True)
    assert config.cert_dir == lab.node("node1").kubelet_pki_dir


def test_the_lab_server_verifies_kubelets_and_approves_their_serving_requests() -> None:
    lab = Lab(LabSpec(name="demo"))
    server = components.server(lab, lab.controlplane).command
    args = parse(server_command.add_flags, server, len(components.KUBELAB) + 1)
    assert Path(args.kubelet_certificate_authority) == lab.ca_file
    assert args.approve_kubelet_serving_certificates
