"""Review kinds: questions the server answers and never stores.

``SelfSubjectAccessReview`` (``kubectl auth can-i``), ``SubjectAccessReview``,
``LocalSubjectAccessReview``, ``SelfSubjectRulesReview`` (``kubectl auth can-i --list``),
``SelfSubjectReview`` (``kubectl auth whoami``) and ``TokenReview``: each is POSTed, filled in
from the same authenticators and authorizers that guard every request, and returned with 201.
A SubjectAccessReview asks about exactly the user, groups, uid and extra it names (nothing is
implied, as upstream); a SelfSubjectRulesReview lists the rules every authorization mode knows
for the caller in the namespace, ``incomplete`` when some mode cannot list its rules.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from controlplane.apiserver import errors
from controlplane.apiserver.auth import Authorizer, User
from controlplane.apiserver.auth.authn import InvalidToken
from controlplane.apiserver.endpoints.requestinfo import RequestInfo
from kube.api import walk
from kube.api.errors import ROOT, ErrorList
from kube.api.kinds.authentication_v1 import (
    SelfSubjectReview,
    SelfSubjectReviewStatus,
    TokenReview,
    TokenReviewStatus,
    UserInfo,
)
from kube.api.kinds.authorization_v1 import (
    LocalSubjectAccessReview,
    NonResourceRule,
    ResourceRule,
    SelfSubjectAccessReview,
    SelfSubjectRulesReview,
    SubjectAccessReview,
    SubjectAccessReviewStatus,
    SubjectRulesReviewStatus,
)
from kube.api.kinds.rbac_v1 import PolicyRule
from kube.api.meta_v1 import Resource
from kube.api.scheme import KindInfo

Reviewer = Callable[[Resource, User, str], Awaitable[Resource]]
RulesResolver = Callable[[User, str], tuple[list[PolicyRule], bool]]
"""The rules a user has in a namespace, and whether the list is incomplete."""
TokenReviewer = Callable[[str, Sequence[str]], Awaitable[tuple[User, list[str]]]]
"""A token's user and the audiences it is valid for; raises with the reason if invalid."""


def _question(spec: object) -> RequestInfo:
    resource = getattr(spec, "resource_attributes", None)
    non_resource = getattr(spec, "non_resource_attributes", None)
    if resource is not None:
        selector = resource.field_selector
        return RequestInfo(
            path="",
            verb=resource.verb or "",
            is_resource_request=True,
            group=resource.group or "",
            version=resource.version or "",
            namespace=resource.namespace or "",
            resource=resource.resource or "",
            subresource=resource.subresource or "",
            name=resource.name or "",
            field_selector=(selector.raw_selector or "") if selector is not None else "",
        )
    assert non_resource is not None
    return RequestInfo(path=non_resource.path or "", verb=non_resource.verb or "")


def _answer(allowed: bool) -> SubjectAccessReviewStatus:
    return SubjectAccessReviewStatus(allowed=allowed)


def reviewers(
    authorize: Authorizer,
    rules_for: RulesResolver,
    review_token: Callable[[], TokenReviewer | None],
) -> dict[tuple[str, str], Reviewer]:
    """Answer functions by (group, kind); each gets the review, the caller and the namespace.
    ``review_token`` gives the token authenticators once the server has its signing key."""

    async def self_access(review: Resource, user: User, namespace: str) -> Resource:
        assert isinstance(review, SelfSubjectAccessReview)
        review.status = _answer(authorize(user, _question(review.spec)))
        return review

    async def subject_access(review: Resource, user: User, namespace: str) -> Resource:
        assert isinstance(review, SubjectAccessReview | LocalSubjectAccessReview)
        spec = review.spec
        assert spec is not None
        subject = User(
            spec.user or "",
            tuple(spec.groups or ()),
            uid=spec.uid or "",
            extra={k: tuple(v) for k, v in (spec.extra or {}).items()},
        )
        question = _question(spec)
        if isinstance(review, LocalSubjectAccessReview):
            attributes = spec.resource_attributes
            if attributes is not None and attributes.namespace not in (None, "", namespace):
                problems = ErrorList()
                problems.invalid(
                    ROOT.child("spec").child("resourceAttributes").child("namespace"),
                    attributes.namespace,
                    "must match metadata.namespace",
                )
                raise errors.invalid(review.kind_info, "", problems)
            question = RequestInfo(**{**question.__dict__, "namespace": namespace})
        review.status = _answer(authorize(subject, question))
        return review

    async def self_rules(review: Resource, user: User, namespace: str) -> Resource:
        assert isinstance(review, SelfSubjectRulesReview)
        wanted = review.spec.namespace if review.spec is not None else None
        rules, incomplete = rules_for(user, wanted or "")
        review.status = SubjectRulesReviewStatus(
            resource_rules=[
                ResourceRule(
                    verbs=r.verbs,
                    api_groups=r.api_groups,
                    resources=r.resources,
                    resource_names=r.resource_names,
                )
                for r in rules
                if not r.non_resource_urls
            ],
            non_resource_rules=[
                NonResourceRule(verbs=r.verbs, non_resource_urls=r.non_resource_urls)
                for r in rules
                if r.non_resource_urls
            ],
            incomplete=incomplete,
        )
        return review

    async def whoami(review: Resource, user: User, namespace: str) -> Resource:
        assert isinstance(review, SelfSubjectReview)
        review.status = SelfSubjectReviewStatus(user_info=_user_info(user))
        return review

    async def token(review: Resource, user: User, namespace: str) -> Resource:
        assert isinstance(review, TokenReview)
        spec = review.spec
        authenticate = review_token()
        if spec is None or not spec.token:
            review.status = _token_refused("no token given")
        elif authenticate is None:
            review.status = _token_refused("no token authenticator is configured")
        else:
            try:
                found, audiences = await authenticate(spec.token, spec.audiences or ())
            except InvalidToken as error:
                review.status = _token_refused(str(error))
            else:
                review.status = TokenReviewStatus(
                    authenticated=True, user=_user_info(found), audiences=audiences
                )
        return review

    return {
        ("authorization.k8s.io", "SelfSubjectAccessReview"): self_access,
        ("authorization.k8s.io", "SubjectAccessReview"): subject_access,
        ("authorization.k8s.io", "LocalSubjectAccessReview"): subject_access,
        ("authorization.k8s.io", "SelfSubjectRulesReview"): self_rules,
        ("authentication.k8s.io", "SelfSubjectReview"): whoami,
        ("authentication.k8s.io", "TokenReview"): token,
    }


def _token_refused(error: str) -> TokenReviewStatus:
    """Upstream's answer for a token that did not authenticate: ``authenticated`` false, which
    its JSON omits, and an empty user, which it keeps (a struct is never omitted)."""
    return TokenReviewStatus(user=UserInfo(), error=error)


def _user_info(user: User) -> UserInfo:
    return UserInfo(
        username=user.name,
        uid=user.uid or None,
        groups=list(user.groups),
        extra={k: list(v) for k, v in user.extra.items()} or None,
    )


def validate(info: KindInfo, review: Resource) -> None:
    """Reviews have no name; everything else about them is checked as for any object."""
    spec = getattr(review, "spec", None)
    problems = walk.validate_struct(spec, ROOT.child("spec")) if spec is not None else ErrorList()
    if isinstance(review, SubjectAccessReview | LocalSubjectAccessReview | SelfSubjectAccessReview):
        # Upstream's access-review validation: exactly one kind of attributes, and (but for
        # the self review) someone to ask about.
        where = ROOT.child("spec")
        resource = getattr(spec, "resource_attributes", None)
        non_resource = getattr(spec, "non_resource_attributes", None)
        if resource is not None and non_resource is not None:
            problems.invalid(
                where.child("nonResourceAttributes"),
                "",
                "cannot be specified in combination with resourceAttributes",
            )
        if resource is None and non_resource is None:
            problems.invalid(
                where.child("resourceAttributes"),
                "",
                "exactly one of nonResourceAttributes or resourceAttributes must be specified",
            )
        if not isinstance(review, SelfSubjectAccessReview) and not (
            getattr(spec, "user", None) or getattr(spec, "groups", None)
        ):
            problems.invalid(
                where.child("user"), "", "at least one of user or group must be specified"
            )
    if problems:
        raise errors.invalid(info, "", problems)
