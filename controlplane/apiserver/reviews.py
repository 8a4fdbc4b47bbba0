"""Review kinds: questions the server answers and never stores.

``SelfSubjectAccessReview`` (``kubectl auth can-i``), ``SubjectAccessReview``,
``LocalSubjectAccessReview``, ``SelfSubjectRulesReview`` (``kubectl auth can-i --list``),
``SelfSubjectReview`` (``kubectl auth whoami``) and ``TokenReview``: each is POSTed, filled in
from the same authenticator and authorizer that guard every request, and returned with 201.
"""

from __future__ import annotations

from collections.abc import Callable

from controlplane.apiserver import errors
from controlplane.apiserver.auth import AUTHENTICATED, Authorizer, User
from controlplane.apiserver.requestinfo import RequestInfo
from kubelab.api import walk
from kubelab.api.errors import ROOT, ErrorList
from kubelab.api.kinds.authentication_v1 import (
    SelfSubjectReview,
    SelfSubjectReviewStatus,
    TokenReview,
    TokenReviewStatus,
    UserInfo,
)
from kubelab.api.kinds.authorization_v1 import (
    LocalSubjectAccessReview,
    NonResourceRule,
    ResourceRule,
    SelfSubjectAccessReview,
    SelfSubjectRulesReview,
    SubjectAccessReview,
    SubjectAccessReviewStatus,
    SubjectRulesReviewStatus,
)
from kubelab.api.meta_v1 import Resource
from kubelab.api.scheme import KindInfo

Reviewer = Callable[[Resource, User, str], Resource]


def _question(spec: object) -> RequestInfo:
    resource = getattr(spec, "resource_attributes", None)
    non_resource = getattr(spec, "non_resource_attributes", None)
    if resource is not None:
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
        )
    assert non_resource is not None
    return RequestInfo(path=non_resource.path or "", verb=non_resource.verb or "")


def _answer(allowed: bool) -> SubjectAccessReviewStatus:
    return SubjectAccessReviewStatus(allowed=allowed, reason="" if allowed else "no rule allows it")


def reviewers(authorize: Authorizer) -> dict[tuple[str, str], Reviewer]:
    """Answer functions by (group, kind); each gets the review, the caller and the namespace."""

    def self_access(review: Resource, user: User, namespace: str) -> Resource:
        assert isinstance(review, SelfSubjectAccessReview)
        review.status = _answer(authorize(user, _question(review.spec)))
        return review

    def subject_access(review: Resource, user: User, namespace: str) -> Resource:
        assert isinstance(review, SubjectAccessReview | LocalSubjectAccessReview)
        spec = review.spec
        assert spec is not None
        subject = User(spec.user or "", (*(spec.groups or ()), AUTHENTICATED))
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

    def self_rules(review: Resource, user: User, namespace: str) -> Resource:
        assert isinstance(review, SelfSubjectRulesReview)
        everything = authorize(
            user, RequestInfo(path="", verb="*", is_resource_request=True, group="*", resource="*")
        )
        review.status = SubjectRulesReviewStatus(
            resource_rules=[ResourceRule(verbs=["*"], api_groups=["*"], resources=["*"])]
            if everything
            else [],
            non_resource_rules=[NonResourceRule(verbs=["*"], non_resource_urls=["*"])]
            if everything
            else [],
            incomplete=False,
        )
        return review

    def whoami(review: Resource, user: User, namespace: str) -> Resource:
        assert isinstance(review, SelfSubjectReview)
        review.status = SelfSubjectReviewStatus(
            user_info=UserInfo(username=user.name, groups=list(user.groups))
        )
        return review

    def token(review: Resource, user: User, namespace: str) -> Resource:
        assert isinstance(review, TokenReview)
        review.status = TokenReviewStatus(
            authenticated=False, error="no token authenticator is configured"
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


def validate(info: KindInfo, review: Resource) -> None:
    """Reviews have no name; everything else about them is checked as for any object."""
    spec = getattr(review, "spec", None)
    problems = walk.validate_struct(spec, ROOT.child("spec")) if spec is not None else None
    if problems:
        raise errors.invalid(info, "", problems)
