"""Atomic projection of a set of files into a directory: upstream's ``AtomicWriter``.

configMap, secret, downwardAPI and projected volumes change while containers read them, so a
reader must see either the whole old set of files or the whole new one, never a mix.  The
layout (the same as upstream's, which applications such as certificate reloaders rely on):

    <dir>/..2026_01_01_00_00_00.123456789/   the real files, one directory per version
    <dir>/..data -> ..2026_01_01_00_00_00.123456789
    <dir>/key    -> ..data/key                 one symlink per top-level path of the payload
    <dir>/sub    -> ..data/sub                 (nested paths go through their first element)

An update writes a complete new timestamped directory, points a temporary ``..data_tmp``
symlink at it and renames that over ``..data`` (``rename(2)`` is atomic), then adds the
user-visible symlinks new top-level paths need, removes those of paths no longer present and
deletes the previous version.  Watchers see one event on ``..data``.

As upstream, a write is a no-op when every file's content is what the current version holds
and no path has to go; file modes are not compared (a pod's volumes are immutable, so the modes
of a volume never change).  ``FileProjection.fs_user`` chowns a file (upstream uses it for
service account tokens when every container runs as the same user).

Blocking file-system calls: the files are small and on local disk or tmpfs.
"""

from __future__ import annotations

import datetime
import logging
import os
import secrets
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import NamedTuple

__all__ = ["DATA_DIR", "AtomicWriter", "FileProjection", "InvalidPathError", "Payload"]

log = logging.getLogger(__name__)

DATA_DIR = "..data"
NEW_DATA_DIR = "..data_tmp"
MAX_FILE_NAME_LENGTH = 255
MAX_PATH_LENGTH = 4096


class FileProjection(NamedTuple):
    """One file of a payload: its bytes, its permission bits, and optionally its owner."""

    data: bytes
    mode: int
    fs_user: int | None = None


Payload = Mapping[str, FileProjection]


class InvalidPathError(ValueError):
    """A payload path that may not be projected (absolute, with ``..``, too long)."""


def validate_path(target: str) -> None:
    """Upstream's ``validatePath``: relative, no ``..`` element, no leading ``..name`` (which
    would collide with the writer's own entries), and within the length limits."""
    if not target:
        raise InvalidPathError(f"invalid path: must not be empty: {target!r}")
    if target.startswith("/"):
        raise InvalidPathError(f"invalid path: must be relative path: {target}")
    if len(target) > MAX_PATH_LENGTH:
        raise InvalidPathError(
            f"invalid path: must be less than or equal to {MAX_PATH_LENGTH} characters"
        )
    items = target.split("/")
    for item in items:
        if item == "..":
            raise InvalidPathError(f"invalid path: must not contain '..': {target}")
        if len(item) > MAX_FILE_NAME_LENGTH:
            raise InvalidPathError(
                "invalid path: filenames must be less than or equal to "
                f"{MAX_FILE_NAME_LENGTH} characters"
            )
    if items[0].startswith("..") and len(items[0]) > 2:
        raise InvalidPathError(f"invalid path: must not start with '..': {target}")


def _clean(payload: Payload) -> dict[str, FileProjection]:
    cleaned: dict[str, FileProjection] = {}
    for path, projection in payload.items():
        validate_path(path)
        cleaned[os.path.normpath(path)] = projection
    return cleaned


def _with_parents(paths: Mapping[str, object]) -> set[str]:
    """Every path and each of its parent directories (which must not be pruned)."""
    result: set[str] = set()
    for path in paths:
        while path:
            result.add(path)
            path = os.path.dirname(path)
    return result


class AtomicWriter:
    """Writes payloads into ``target``, one complete version at a time.

    Not safe for two concurrent writers on one directory: the caller serialises writes.
    """

    def __init__(self, target: Path, now: Callable[[], datetime.datetime] | None = None) -> None:
        self.target = target
        self._now = now or (lambda: datetime.datetime.now(datetime.UTC))

    def write(self, payload: Payload) -> bool:
        """Project ``payload`` (relative path → file); True when a new version was written.

        Raises ``InvalidPathError`` before touching anything when a path is invalid.
        """
        cleaned = _clean(payload)
        data_dir = self.target / DATA_DIR
        old_version = os.readlink(data_dir) if data_dir.is_symlink() else ""
        old_path = self.target / old_version if old_version else None
        to_remove = self._paths_to_remove(cleaned, old_path)
        changed = old_path is None or self._differs(cleaned, old_path)
        if changed or to_remove:
            self._publish(cleaned)
        else:
            # Up to date, but the user-visible links may be missing (upstream #121472).
            old_path = None
        self._create_user_visible_links(cleaned)
        for path in to_remove:
            if "/" not in path:
                (self.target / path).unlink(missing_ok=True)
        if old_path is not None:
            shutil.rmtree(old_path, ignore_errors=True)
        return changed or bool(to_remove)

    def _paths_to_remove(self, payload: Payload, old: Path | None) -> list[str]:
        if old is None or not old.is_dir():
            return []
        present = {
            os.path.relpath(os.path.join(root, name), old)
            for root, dirs, files in os.walk(old)
            for name in (*dirs, *files)
        }
        return sorted(present - _with_parents(payload))

    @staticmethod
    def _differs(payload: Payload, old: Path) -> bool:
        for path, projection in payload.items():
            try:
                if (old / path).read_bytes() != projection.data:
                    return True
            except FileNotFoundError:
                return True
        return False

    def _version_name(self) -> str:
        return self._now().strftime("..%Y_%m_%d_%H_%M_%S.") + str(secrets.randbelow(2**32))

    def _publish(self, payload: Payload) -> None:
        version = self.target / self._version_name()
        version.mkdir(mode=0o755)
        os.chmod(version, 0o755)
        try:
            for path, projection in payload.items():
                file = version / path
                file.parent.mkdir(parents=True, exist_ok=True)
                file.write_bytes(projection.data)
                os.chmod(file, projection.mode)
                if projection.fs_user is not None:
                    os.chown(file, projection.fs_user, -1)
            new_link = self.target / NEW_DATA_DIR
            new_link.unlink(missing_ok=True)
            new_link.symlink_to(version.name)
            new_link.rename(self.target / DATA_DIR)
        except BaseException:
            shutil.rmtree(version, ignore_errors=True)
            raise
        log.debug("%s: published %s", self.target, version.name)

    def _create_user_visible_links(self, payload: Payload) -> None:
        for path in payload:
            top = path.split("/", 1)[0]
            link = self.target / top
            if not os.path.lexists(link):
                link.symlink_to(f"{DATA_DIR}/{top}")
