"""Image names as Docker and containerd read them: ``nginx`` is ``docker.io/library/nginx:latest``.

One parser for everything that turns what people type into where an image lives: the fake CRI
runtime, the kubelet's credential keyring (which matches a pull secret's registry against the
image's repository), and the lab registry (which stores ``docker.io/library/nginx`` under that
very path).  The rules are the distribution reference's: the first path component is a
registry host when it contains a ``.`` or a ``:`` or is ``localhost``, otherwise the registry
is ``docker.io`` and a single component gets the ``library/`` namespace; a missing tag is
``latest`` unless a digest (``@sha256:...``) pins the image.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

DEFAULT_REGISTRY: Final = "docker.io"
DEFAULT_TAG: Final = "latest"
_COMPONENT: Final = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_HOST: Final = r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)(?:\.[a-zA-Z0-9-]+)*(?::[0-9]+)?"
_PATH = re.compile(rf"^{_COMPONENT}(?:/{_COMPONENT})*$")
_HOST_RE = re.compile(rf"^{_HOST}$")
_TAG = re.compile(r"^[\w][\w.-]{0,127}$")
_DIGEST = re.compile(r"^[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[a-fA-F0-9]{32,}$")


class ImageNameError(ValueError):
    """Not an image name; the message says what is wrong, as the reference parser does."""


@dataclass(frozen=True)
class ImageName:
    """A parsed image name: ``registry`` (host[:port]), ``path`` (``library/nginx``), ``tag``
    (``latest`` by default), ``digest`` (empty unless pinned)."""

    registry: str
    path: str
    tag: str
    digest: str = ""

    @classmethod
    def parse(cls, text: str) -> ImageName:
        """Parse and validate ``text``; ``ImageNameError`` says why it is not a name."""
        name, at, digest = text.partition("@")
        if at and not _DIGEST.match(digest):
            raise ImageNameError(f"invalid reference format: bad digest in {text!r}")
        slash, colon = name.rfind("/"), name.rfind(":")
        tag = ""
        if colon > slash:
            name, tag = name[:colon], name[colon + 1 :]
            if not _TAG.match(tag):
                raise ImageNameError(f"invalid reference format: bad tag in {text!r}")
        first, sep, rest = name.partition("/")
        if sep and ("." in first or ":" in first or first == "localhost"):
            registry, path = first, rest
            if not _HOST_RE.match(registry):
                raise ImageNameError(f"invalid reference format: bad registry in {text!r}")
        else:
            registry, path = DEFAULT_REGISTRY, name
        if registry == DEFAULT_REGISTRY and "/" not in path:
            path = f"library/{path}"
        if not _PATH.match(path):
            raise ImageNameError(
                f"invalid reference format: repository name must be lowercase ({text!r})"
                if path.lower() != path
                else f"invalid reference format: {text!r}"
            )
        return cls(registry, path, tag or ("" if at else DEFAULT_TAG), digest)

    @property
    def repository(self) -> str:
        """``registry/path``: ``docker.io/library/nginx``."""
        return f"{self.registry}/{self.path}"

    def __str__(self) -> str:
        tag = f":{self.tag}" if self.tag else ""
        digest = f"@{self.digest}" if self.digest else ""
        return f"{self.repository}{tag}{digest}"


def normalize(text: str) -> str:
    """The fully qualified name: ``nginx`` is ``docker.io/library/nginx:latest``."""
    return str(ImageName.parse(text))
