"""CEL expressions in objects, compiled when the objects are validated.

Several kinds hold CEL: a CRD's ``x-kubernetes-validations`` rules, webhooks' match conditions,
DRA device selectors.  Their validation lives with the kinds, in ``kube.api``, but the CEL
compiler is the API server's (``controlplane.apiserver.crd.cel``), which this package may not
import.  So the server installs one compiler per environment (what an expression may name)
with ``use_compiler`` when it imports its CEL module, and the kinds ask ``problem``.  Where no
compiler is installed (a client, which never validates CEL), expressions are kept as written.

Admission expressions also say, in a ``Scope``, what else they may name (``params`` only if
the policy has a paramKind, ...), what their result must be (a validation a bool), and whether
they are stored: upstream compiles an expression written anew against the libraries of the
API server's compatibility version, and one an update keeps unchanged against all it has (so
that what a newer server once accepted is not refused on rollback).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum


class Environment(Enum):
    """What an expression may name, by where it is written."""

    CRD_RULE = "crd-rule"
    """``self``, ``oldSelf``: a CRD schema's validation rule or its messageExpression."""
    MATCH_CONDITION = "match-condition"
    """``object``, ``oldObject``, ``request``, ``authorizer``: a webhook's matchConditions."""
    POLICY = "policy"
    """``object``, ``oldObject``, ``request``, ``namespaceObject``, and as the ``Scope`` says
    ``params``, ``authorizer`` and ``variables``: an admission policy's expressions."""
    MUTATION = "mutation"
    """A policy's, and ``Object``, ``JSONPatch`` and ``jsonpatch``: a MutatingAdmissionPolicy's
    apply configurations and JSON patches."""
    DEVICE_SELECTOR = "device-selector"
    """``device``: a DRA request's or DeviceClass's CEL selector."""


@dataclass(frozen=True)
class Scope:
    """What an admission expression may name beyond its environment's, what it must evaluate
    to, and whether it is stored (see the module docstring)."""

    params: bool = False
    """``params``: the policy has a paramKind."""
    authorizer: bool = True
    variables: tuple[tuple[str, str], ...] | None = None
    """The policy variables (name, expression) it may read as ``variables.<name>``; None when
    the policy has none (``variables`` is then undeclared, as upstream)."""
    results: tuple[str, ...] = ()
    """The CEL types (``bool``, ``string``, ``null_type``) its result may have; any if empty."""
    stored: bool = False


Compiler = Callable[[str, Scope], str | None]
"""Compiles an expression: None, or why it is refused: cel-go-like issue text (``ERROR:
<input>:1:1: ...``) for CRD rules and device selectors, upstream's whole detail for admission
expressions (``compilation failed: ERROR: ...``, ``must evaluate to bool but got int``)."""

_compilers: dict[Environment, Compiler] = {}


def use_compiler(environment: Environment, compiler: Compiler) -> None:
    """Install the compiler for ``environment``'s expressions."""
    _compilers[environment] = compiler


def problem(environment: Environment, text: str, scope: Scope | None = None) -> str | None:
    """Why ``text`` is refused in ``environment`` (and ``scope``); None when it compiles, when
    it is empty (left to the field's own check) or when no compiler is installed."""
    compiler = _compilers.get(environment)
    if compiler is None or not text.strip():
        return None
    return compiler(text, scope or Scope())
