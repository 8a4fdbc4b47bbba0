"""CEL expressions in objects, compiled when the objects are validated.

Several kinds hold CEL: a CRD's ``x-kubernetes-validations`` rules, webhooks' match conditions,
DRA device selectors.  Their validation lives with the kinds, in ``kube.api``, but the CEL
compiler is the API server's (``controlplane.apiserver.crd.cel``), which this package may not
import.  So the server installs one compiler per environment (what an expression may name)
with ``use_compiler`` when it imports its CEL module, and the kinds ask ``problem``.  Where no
compiler is installed (a client, which never validates CEL), expressions are kept as written.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum


class Environment(Enum):
    """What an expression may name, by where it is written."""

    CRD_RULE = "crd-rule"
    """``self``, ``oldSelf``: a CRD schema's validation rule or its messageExpression."""
    MATCH_CONDITION = "match-condition"
    """``object``, ``oldObject``, ``request``, ``authorizer``: a webhook's matchConditions.
    Policies' conditions, which may name more variables, are compiled with their policy."""
    DEVICE_SELECTOR = "device-selector"
    """``device``: a DRA request's or DeviceClass's CEL selector."""


Compiler = Callable[[str], str | None]
"""Compiles an expression: None, or why it does not compile (cel-go-like issue text)."""

_compilers: dict[Environment, Compiler] = {}


def use_compiler(environment: Environment, compiler: Compiler) -> None:
    """Install the compiler for ``environment``'s expressions."""
    _compilers[environment] = compiler


def problem(environment: Environment, text: str) -> str | None:
    """Why ``text`` does not compile in ``environment``; None when it does, when it is empty
    (left to the field's own check) or when no compiler is installed."""
    compiler = _compilers.get(environment)
    return compiler(text) if compiler is not None and text.strip() else None
