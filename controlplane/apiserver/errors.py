"""API errors: every failure a client can cause becomes a ``Status`` with the right code.

The constructors mirror upstream's ``k8s.io/apimachinery/pkg/api/errors`` so messages read as
kubectl users expect (``pods "web" not found``, ``Operation cannot be fulfilled on ...``), and
kubectl's printing of ``details`` (kind, name, causes) works.  Nothing a client sends may reach a
500: handlers raise ``ApiError`` for every refusal.
"""

from __future__ import annotations

from collections.abc import Sequence

from kube.api.errors import ErrorList
from kube.api.meta_v1 import Status, StatusCause, StatusDetails
from kube.api.scheme import KindInfo


class ApiError(Exception):
    """A refusal with its HTTP code, reason and details."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: StatusDetails | None = None,
        retry_after: int | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.retry_after = retry_after

    def status(self) -> Status:
        return Status(
            status="Failure",
            message=self.message,
            reason=self.reason,
            details=self.details,
            code=self.code,
        )


def _details(info: KindInfo | None, name: str) -> StatusDetails:
    return StatusDetails(
        name=name or None,
        group=(info.group or None) if info else None,
        kind=info.plural if info else None,
    )


def not_found(info: KindInfo, name: str) -> ApiError:
    return ApiError(
        404, "NotFound", f'{info.group_resource} "{name}" not found', _details(info, name)
    )


def already_exists(info: KindInfo, name: str) -> ApiError:
    return ApiError(
        409,
        "AlreadyExists",
        f'{info.group_resource} "{name}" already exists',
        _details(info, name),
    )


def conflict(info: KindInfo, name: str, why: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {info.group_resource} "{name}": {why}',
        _details(info, name),
    )


MODIFIED = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


def invalid(info: KindInfo, name: str, errors: ErrorList) -> ApiError:
    """422 with every field error as a cause; the message as upstream's ``NewInvalid``."""
    causes = [StatusCause(reason=e.type.value, message=e.message, field=e.field) for e in errors]
    kind = f"{info.kind}.{info.group}" if info.group else info.kind
    listed = str(errors[0]) if len(errors) == 1 else "[" + ", ".join(map(str, errors)) + "]"
    return ApiError(
        422,
        "Invalid",
        f'{kind} "{name}" is invalid: {listed}',
        StatusDetails(name=name or None, group=info.group or None, kind=info.kind, causes=causes),
    )


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def method_not_allowed(message: str) -> ApiError:
    return ApiError(405, "MethodNotAllowed", message)


def not_routed() -> ApiError:
    """Upstream's answer to a path nothing serves: its router's 404, as a Status with empty
    details (``NewGenericServerResponse``)."""
    return ApiError(
        404, "NotFound", "the server could not find the requested resource", StatusDetails()
    )


def method_not_routed() -> ApiError:
    """Upstream's answer to a method a served path has no route for: its router's 405."""
    return ApiError(
        405,
        "MethodNotAllowed",
        "the server does not allow this method on the requested resource",
        StatusDetails(),
    )


COLLECTION_VERBS = frozenset({"list", "watch", "create", "deletecollection"})
OBJECT_VERBS = frozenset({"get", "update", "patch", "delete"})


def verb_not_served(named: bool, served: Sequence[str]) -> ApiError:
    """A verb a kind does not serve: upstream registers no route for it, so its router answers
    405 when the path (an object's, if ``named``, else the collection's) serves other verbs,
    and 404 when it serves none (``kubectl get tokenreviews`` is a 405, a GET of one a 404)."""
    on_path = OBJECT_VERBS if named else COLLECTION_VERBS
    return method_not_routed() if on_path.intersection(served) else not_routed()


def not_acceptable(message: str) -> ApiError:
    return ApiError(406, "NotAcceptable", message)


def unsupported_media_type(content_type: str) -> ApiError:
    return ApiError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown "
        f"format - accepted media types include: application/json, "
        f"application/yaml, application/vnd.kubernetes.protobuf "
        f"(got {content_type!r})",
    )


def gone(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def too_large(message: str = "the request body is too large") -> ApiError:
    return ApiError(413, "RequestEntityTooLarge", message)


def too_many_requests(retry_after: int = 1) -> ApiError:
    return ApiError(
        429,
        "TooManyRequests",
        "Too many requests, please try again later.",
        StatusDetails(retry_after_seconds=retry_after),
        retry_after=retry_after,
    )


def forbidden(info: KindInfo | None, name: str, message: str) -> ApiError:
    return ApiError(403, "Forbidden", message, _details(info, name))


def internal(message: str) -> ApiError:
    return ApiError(500, "InternalError", f"Internal error occurred: {message}")


def unavailable(message: str) -> ApiError:
    return ApiError(503, "ServiceUnavailable", message, retry_after=1)
