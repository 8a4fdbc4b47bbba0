"""authentication.k8s.io/v1: asking the API server who a token or the caller is.

TokenReview (a webhook or proxy asks whether a bearer token is valid and whose it is) and
SelfSubjectReview (``kubectl auth whoami``) are only ever created, never stored.  TokenRequest
is the body of ``serviceaccounts/<name>/token``, which issues a bound service-account token; it
has no resource of its own.
"""

from __future__ import annotations

from typing import Annotated

from kube.api.errors import ErrorList, Path
from kube.api.meta_v1 import Resource
from kube.api.scheme import CREATE_ONLY, NOT_SERVED, kind
from kube.api.struct import Struct, Time, atomic, meta

GROUP = "authentication.k8s.io"
DEFAULT_TOKEN_SECONDS = 3600
MIN_TOKEN_SECONDS = 10 * 60
MAX_TOKEN_SECONDS = 1 << 32


class UserInfo(Struct):
    """A user as the authenticators saw it: name, uid, groups and extra attributes."""

    username: Annotated[str | None, meta(proto=1, omitempty=True)] = None
    uid: Annotated[str | None, meta(proto=2, omitempty=True)] = None
    groups: Annotated[list[str] | None, atomic(proto=3)] = None
    extra: Annotated[dict[str, list[str]] | None, meta(proto=4)] = None


class TokenReviewSpec(Struct):
    """The token to check and the audiences it should be valid for."""

    token: Annotated[str | None, meta(doc="The opaque bearer token.", proto=1, omitempty=True)] = (
        None
    )
    audiences: Annotated[list[str] | None, atomic(proto=2)] = None


class TokenReviewStatus(Struct):
    """Whether the token authenticated, as whom, and for which audiences."""

    authenticated: Annotated[bool | None, meta(proto=1, omitempty=True)] = None
    user: Annotated[UserInfo | None, meta(proto=2)] = None
    audiences: Annotated[list[str] | None, atomic(proto=4)] = None
    error: Annotated[str | None, meta(proto=3, omitempty=True)] = None


@kind(group=GROUP, version="v1", plural="tokenreviews", namespaced=False, verbs=CREATE_ONLY)
class TokenReview(Resource):
    """A question to the authenticators: is this token valid, and whose is it?"""

    spec: Annotated[TokenReviewSpec | None, meta(doc="The token to check.", proto=2)] = None
    status: Annotated[TokenReviewStatus | None, meta(doc="The answer, filled in.", proto=3)] = None


class BoundObjectReference(Struct):
    """The object (a Pod, Secret or Node) a token is bound to: the token dies with it."""

    kind: Annotated[str | None, meta(proto=1, omitempty=True)] = None
    api_version: Annotated[str | None, meta(proto=2, omitempty=True)] = None
    name: Annotated[str | None, meta(proto=3, omitempty=True)] = None
    uid: Annotated[str | None, meta(proto=4, omitempty=True)] = None


class TokenRequestSpec(Struct):
    """Audiences, lifetime and bound object of the token asked for."""

    audiences: Annotated[list[str] | None, atomic(proto=1)] = None
    expiration_seconds: Annotated[
        int | None,
        meta(
            doc="Requested lifetime in seconds (default 3600, at least 600).", proto=4, int64=True
        ),
    ] = None
    bound_object_ref: Annotated[BoundObjectReference | None, meta(proto=3)] = None

    def set_defaults(self) -> None:
        if self.expiration_seconds is None:
            self.expiration_seconds = DEFAULT_TOKEN_SECONDS

    def validate(self, path: Path, errors: ErrorList) -> None:
        seconds = self.expiration_seconds
        if seconds is None:
            return
        if seconds < MIN_TOKEN_SECONDS:
            errors.invalid(
                path.child("expirationSeconds"),
                seconds,
                "may not specify a duration less than 10 minutes",
            )
        if seconds > MAX_TOKEN_SECONDS:
            errors.invalid(
                path.child("expirationSeconds"),
                seconds,
                "may not specify a duration larger than 2^32 seconds",
            )


class TokenRequestStatus(Struct):
    """The issued token and when it expires."""

    token: Annotated[str | None, meta(proto=1)] = None
    expiration_timestamp: Annotated[Time | None, meta(proto=2)] = None


@kind(group=GROUP, version="v1", plural="tokenrequests", verbs=NOT_SERVED)
class TokenRequest(Resource):
    """A request for a service-account token (the body of serviceaccounts/<name>/token)."""

    spec: Annotated[TokenRequestSpec | None, meta(doc="The token asked for.", proto=2)] = None
    status: Annotated[TokenRequestStatus | None, meta(doc="The issued token.", proto=3)] = None

    def set_defaults(self) -> None:
        if self.spec is None:
            self.spec = TokenRequestSpec()


class SelfSubjectReviewStatus(Struct):
    """The caller, as the API server authenticated it."""

    user_info: Annotated[UserInfo | None, meta(proto=1)] = None


@kind(group=GROUP, version="v1", plural="selfsubjectreviews", namespaced=False, verbs=CREATE_ONLY)
class SelfSubjectReview(Resource):
    """Who am I? Created empty; answered with the caller's user information."""

    status: Annotated[
        SelfSubjectReviewStatus | None, meta(doc="The caller's identity.", proto=2)
    ] = None
