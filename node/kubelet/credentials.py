"""Registry credentials from image pull secrets: which ones go with an image, as upstream's
``pkg/credentialprovider`` keyring decides.

A pod's ``imagePullSecrets`` (the ServiceAccount admission plugin copies its account's when the
pod names none) are Secrets of type ``kubernetes.io/dockerconfigjson`` (``.dockerconfigjson``:
``{"auths": {KEY: ENTRY}}``) or ``kubernetes.io/dockercfg`` (``.dockercfg``: ``{KEY: ENTRY}``).
An entry carries ``username`` and ``password``, or ``auth`` (base64 of ``user:password``), which
wins over them as in upstream's decoding.

A KEY is a registry host, optionally with a scheme, a port and a path
(``https://index.docker.io/v1/``, ``private.example:5000``, ``*.example.com/team``).  Keys are
normalised as upstream's ``BasicDockerKeyring.Add`` does (scheme dropped, ``/v1/`` and ``/v2/``
prefixes of the path dropped) and tried longest first (upstream sorts the keys in reverse
order); a key matches an image's repository (``docker.io/library/nginx``, the name normalised
by ``parse_image``) when its host matches label by label (``*`` globs inside a label, the same
number of labels), the ports are equal, and its path is a prefix of the repository's path.  The
credentials of ``index.docker.io`` also serve any ``docker.io`` image no other key matched.

The kubelet tries every matching credential in that order and stops at the first pull that
works; with none it pulls anonymously (``node.kubelet.runtime.images``).  This module only
computes: it never reads the API.
"""

from __future__ import annotations

import base64
import binascii
import fnmatch
import json
from collections.abc import Iterable
from typing import Final, NamedTuple

from kube.api.kinds.core_v1.cluster import Secret
from kube.imagename import DEFAULT_REGISTRY, ImageName, ImageNameError

DOCKER_CONFIG_JSON: Final = "kubernetes.io/dockerconfigjson"
DOCKER_CONFIG_JSON_KEY: Final = ".dockerconfigjson"
DOCKER_CFG: Final = "kubernetes.io/dockercfg"
DOCKER_CFG_KEY: Final = ".dockercfg"
DEFAULT_REGISTRY_HOST: Final = "index.docker.io"


class Credential(NamedTuple):
    """One username and password for a registry (what CRI's ``AuthConfig`` carries)."""

    username: str
    password: str


def parse_image(image: str) -> str:
    """The repository of an image name, normalised as Docker does: ``nginx:1.2`` is
    ``docker.io/library/nginx``; a name that does not parse is taken as it is."""
    try:
        return ImageName.parse(image).repository
    except ImageNameError:
        return image


def _entry(value: object) -> Credential | None:
    if not isinstance(value, dict):
        return None
    username, password = value.get("username", ""), value.get("password", "")
    auth = value.get("auth")
    if isinstance(auth, str) and auth:
        try:
            username, _, password = base64.b64decode(auth, validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return None
    if not isinstance(username, str) or not isinstance(password, str):
        return None
    return Credential(username, password)


def secret_entries(secret: Secret) -> dict[str, Credential]:
    """The registry keys and credentials of a pull secret (nothing from a Secret of another
    type, or one whose content does not decode: upstream skips those too)."""
    data = secret.decoded_data()
    if secret.type == DOCKER_CONFIG_JSON and DOCKER_CONFIG_JSON_KEY in data:
        raw, nested = data[DOCKER_CONFIG_JSON_KEY], True
    elif secret.type == DOCKER_CFG and DOCKER_CFG_KEY in data:
        raw, nested = data[DOCKER_CFG_KEY], False
    else:
        return {}
    try:
        document = json.loads(raw)
    except ValueError:
        return {}
    if nested:
        document = document.get("auths") if isinstance(document, dict) else None
    if not isinstance(document, dict):
        return {}
    entries = {}
    for key, value in document.items():
        credential = _entry(value)
        if credential is not None:
            entries[str(key)] = credential
    return entries


def _normalise(key: str) -> str:
    """A keyring key as upstream stores it: no scheme, no ``/v1/``/``/v2/`` path prefix, no
    trailing ``/`` alone."""
    rest = key.split("://", 1)[1] if "://" in key else key
    host, sep, path = rest.partition("/")
    path = f"/{path}" if sep else ""
    if path.startswith(("/v1/", "/v2/")):
        path = path[3:]
    return host if path in ("", "/") else host + path


def _split(url: str) -> tuple[list[str], str, str]:
    hostport, _, path = url.partition("/")
    host, _, port = hostport.partition(":")
    return host.split("."), port, f"/{path}" if path else ""


def matches(key: str, repository: str) -> bool:
    """Upstream's ``URLsMatchStr``: does (normalised) ``key`` cover ``repository``?"""
    glob_labels, glob_port, glob_path = _split(key)
    labels, port, path = _split(repository)
    if len(glob_labels) != len(labels) or glob_port != port:
        return False
    if not all(fnmatch.fnmatchcase(label, g) for g, label in zip(glob_labels, labels, strict=True)):
        return False
    return path.startswith(glob_path)


def lookup(secrets: Iterable[Secret], image: str) -> list[Credential]:
    """The credentials to try for ``image``, in upstream's order (see the module docstring)."""
    keyring: dict[str, list[Credential]] = {}
    for secret in secrets:
        for key, credential in secret_entries(secret).items():
            found = keyring.setdefault(_normalise(key), [])
            if credential not in found:
                found.append(credential)
    repository = parse_image(image)
    chosen = [
        credential
        for key in sorted(keyring, reverse=True)
        if matches(key, repository)
        for credential in keyring[key]
    ]
    if not chosen and repository.startswith(f"{DEFAULT_REGISTRY}/"):
        chosen = keyring.get(DEFAULT_REGISTRY_HOST, [])
    return chosen
