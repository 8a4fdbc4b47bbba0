"""Errors a client sees: the API server's refusals, carried with their Status.

Callers branch on the reason, not on the message: ``not_found``, ``conflict`` and
``already_exists`` drive every controller's read-modify-write loop, ``gone`` (410 Expired)
makes an informer re-list.
"""

from __future__ import annotations

from kube.api.meta_v1 import Status


class ApiError(Exception):
    """The API server answered with a failure Status."""

    def __init__(self, status: Status) -> None:
        super().__init__(f"{status.code} {status.reason}: {status.message}")
        self.status = status

    @property
    def code(self) -> int:
        return self.status.code or 0

    @property
    def reason(self) -> str:
        return self.status.reason or ""

    @property
    def message(self) -> str:
        return self.status.message or ""

    @property
    def not_found(self) -> bool:
        return self.code == 404

    @property
    def conflict(self) -> bool:
        return self.code == 409 and self.reason != "AlreadyExists"

    @property
    def already_exists(self) -> bool:
        return self.code == 409 and self.reason == "AlreadyExists"

    @property
    def gone(self) -> bool:
        """410: the resourceVersion asked for is older than the server keeps."""
        return self.code == 410

    @property
    def retryable(self) -> bool:
        """Worth trying again unchanged after a pause: throttling and server-side trouble."""
        return self.code == 429 or self.code >= 500


class ClientError(Exception):
    """The request never got an answer: connection refused, reset, TLS failure, timeout."""
