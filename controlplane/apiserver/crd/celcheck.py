"""Static type checking of CEL expressions, as cel-go's checker reports it: the
``status.typeChecking`` of ValidatingAdmissionPolicies
(``controlplane.controllers.admissionpolicystatus``).

celpy, the interpreter ``controlplane.apiserver.crd.cel`` runs expressions with, has no type
checker, so this module is one, over celpy's syntax tree.  It infers each subexpression's type
and reports what cel-go's checker reports, in its words and at its positions:

- ``undefined field 'x'`` where a selection names no property of an object typed by an OpenAPI
  schema (``object`` and ``oldObject`` the matched kind's, ``params`` the paramKind's), or no
  variable of the policy (``variables.x``);
- ``found no matching overload for 'f' applied to '(int, string)'`` (``'string.(int)'`` for a
  method) where an operator, an index, a function or a method is given arguments its
  overloads (``SIGNATURES``, written in cel-go's notation) do not take;
- ``expected type 'bool' but found 'int'`` for an operand of ``&&`` or ``||``, and so for the
  predicate of ``all`` and ``exists``, which cel-go expands into them;
- ``type 'string' does not support field selection`` and ``expression of type 'int' cannot be
  range of a comprehension (must be list, map, or dynamic)``.

Types follow Kubernetes' OpenAPI-to-CEL mapping (``integer`` → int, ``number`` → double,
``string`` with ``format: byte`` → bytes, ``date``/``date-time`` → timestamp, ``duration`` →
duration, arrays → lists, ``additionalProperties`` → maps, properties → objects,
``x-kubernetes-int-or-string`` and preserved unknown fields → dyn).  Macros bind their variable
to the element type of the range (a map's key type); ``map`` gives a list of its transform's
type, ``filter`` the range's list type.  A policy variable has the type of its expression
(checked with the variables before it; dyn if it has an error of its own).  What the checker
cannot type is dyn, and dyn is never an error; an error's own type is dyn, so one mistake is
reported once.

Not reported: errors whose operands include an object type, which cel-go names after the kind
and the nanosecond it made the type (``Deployment123456789.spec``): nobody can compare those;
``request`` and ``namespaceObject``, which upstream types, are dyn here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import lark

from controlplane.apiserver.crd import cel
from controlplane.apiserver.crd.cel import Schema, escape, issue, parse
from kube.api.expressions import Scope


@dataclass(frozen=True)
class Type:
    """A CEL type: a primitive, ``list(E)``, ``map(K, V)``, an object typed by its OpenAPI
    schema, or an opaque type of a library.  None stands for dyn wherever a type goes."""

    name: str
    params: tuple[Type | None, ...] = ()
    schema: Schema | None = field(default=None, repr=False)


INT, UINT, DOUBLE = Type("int"), Type("uint"), Type("double")
BOOL, STRING, BYTES, NULL = Type("bool"), Type("string"), Type("bytes"), Type("null_type")
TIMESTAMP = Type("google.protobuf.Timestamp")
DURATION = Type("google.protobuf.Duration")
OBJECT = "object"
VARIABLES = Type("variables")
"""The type of ``variables``: its fields are the policy's variables."""
AUTHORIZER = Type("kubernetes.authorization.Authorizer")
RESOURCE_CHECK = Type("kubernetes.authorization.ResourceCheck")
_SPELLED = {"int": INT, "uint": UINT, "double": DOUBLE, "bool": BOOL, "string": STRING}
_SPELLED |= {"bytes": BYTES, "null_type": NULL}
_STRING_FORMATS = {"byte": BYTES, "date": TIMESTAMP, "date-time": TIMESTAMP, "duration": DURATION}
_NOT_NULLABLE = frozenset({"int", "uint", "double", "bool", "string", "bytes", "list", "map"})


def list_of(element: Type | None) -> Type:
    return Type("list", (element,))


def show(t: Type | None) -> str | None:
    """The type as cel-go prints it (None for an object type, see the module docstring)."""
    if t is None:
        return "dyn"
    if t.name == OBJECT or t is VARIABLES:
        return None
    params = [show(p) for p in t.params]
    if any(p is None for p in params):
        return None
    return f"{t.name}({', '.join(str(p) for p in params)})" if params else t.name


# Overloads, written as cel-go prints function types: ``target.(args) -> result`` for a method,
# ``(args) -> result`` for a function; single capitals are type parameters.


@dataclass(frozen=True)
class Signature:
    member: bool
    params: tuple[Type | None, ...]
    """The target first, for a method."""
    result: Type | None


def _split(text: str) -> list[str]:
    """Comma-separated types, commas inside parentheses kept."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        depth += {"(": 1, ")": -1}.get(c, 0)
        if c == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def spelled(text: str) -> Type | None:
    """The type written ``text`` (``list(string)``, ``A``, ``dyn``...)."""
    text = text.strip()
    if text == "dyn":
        return None
    name, paren, inner = text.partition("(")
    if paren:
        return Type(name, tuple(spelled(p) for p in _split(inner[:-1])))
    return _SPELLED.get(text) or Type(text)


def signature(text: str) -> Signature:
    head, _, result = text.partition(" -> ")
    target, dot, args = head.partition(".(") if not head.startswith("(") else ("", "", head[1:])
    params = [spelled(p) for p in _split(args[:-1])]
    if dot:
        params.insert(0, spelled(target))
    return Signature(bool(dot), tuple(params), spelled(result))


def _signatures(*texts: str) -> tuple[Signature, ...]:
    return tuple(signature(t) for t in texts)


_NUMBERS = ("int", "uint", "double")
_ORDERED = (*_NUMBERS, "string", "bytes", "bool", TIMESTAMP.name, DURATION.name)
_COMPARISON = _signatures(
    *(f"({a}, {b}) -> bool" for a in _NUMBERS for b in _NUMBERS),
    *(f"({t}, {t}) -> bool" for t in _ORDERED[3:]),
)
_TS, _DUR = TIMESTAMP.name, DURATION.name
_TIME_PARTS = (
    "getFullYear", "getMonth", "getDayOfYear", "getDayOfMonth", "getDate", "getDayOfWeek",
    "getHours", "getMinutes", "getSeconds", "getMilliseconds",
)  # fmt: skip
_DURATION_PARTS = ("getHours", "getMinutes", "getSeconds", "getMilliseconds")
_QUANTITY = "kubernetes.Quantity"
_SEMVER = "kubernetes.Semver"
_AUTHZ = "kubernetes.authorization"

SIGNATURES: dict[str, tuple[Signature, ...]] = {
    "_==_": _signatures("(A, A) -> bool"),
    "_!=_": _signatures("(A, A) -> bool"),
    "_<_": _COMPARISON,
    "_<=_": _COMPARISON,
    "_>_": _COMPARISON,
    "_>=_": _COMPARISON,
    "_+_": _signatures(
        *(f"({t}, {t}) -> {t}" for t in (*_NUMBERS, "string", "bytes", _DUR)),
        "(list(A), list(A)) -> list(A)",
        f"({_TS}, {_DUR}) -> {_TS}",
        f"({_DUR}, {_TS}) -> {_TS}",
    ),
    "_-_": _signatures(
        *(f"({t}, {t}) -> {t}" for t in (*_NUMBERS, _DUR)),
        f"({_TS}, {_TS}) -> {_DUR}",
        f"({_TS}, {_DUR}) -> {_TS}",
    ),
    "_*_": _signatures(*(f"({t}, {t}) -> {t}" for t in _NUMBERS)),
    "_/_": _signatures(*(f"({t}, {t}) -> {t}" for t in _NUMBERS)),
    "_%_": _signatures("(int, int) -> int", "(uint, uint) -> uint"),
    "-_": _signatures("(int) -> int", "(double) -> double"),
    "!_": _signatures("(bool) -> bool"),
    "_?_:_": _signatures("(bool, A, A) -> A"),
    "@in": _signatures("(A, list(A)) -> bool", "(A, map(A, B)) -> bool"),
    "_[_]": _signatures("(list(A), int) -> A", "(map(A, B), A) -> B"),
    "size": _signatures(
        *(f"({t}) -> int" for t in ("string", "bytes", "list(A)", "map(A, B)")),
        *(f"{t}.() -> int" for t in ("string", "bytes", "list(A)", "map(A, B)")),
    ),
    "contains": _signatures("string.(string) -> bool"),
    "startsWith": _signatures("string.(string) -> bool"),
    "endsWith": _signatures("string.(string) -> bool"),
    "matches": _signatures("string.(string) -> bool", "(string, string) -> bool"),
    "int": _signatures(*(f"({t}) -> int" for t in (*_NUMBERS, "string", _TS))),
    "uint": _signatures(*(f"({t}) -> uint" for t in (*_NUMBERS, "string"))),
    "double": _signatures(*(f"({t}) -> double" for t in (*_NUMBERS, "string"))),
    "string": _signatures(*(f"({t}) -> string" for t in _ORDERED)),
    "bytes": _signatures("(bytes) -> bytes", "(string) -> bytes"),
    "bool": _signatures("(bool) -> bool", "(string) -> bool"),
    "duration": _signatures(f"(string) -> {_DUR}", f"({_DUR}) -> {_DUR}"),
    "timestamp": _signatures(f"(string) -> {_TS}", f"({_TS}) -> {_TS}", f"(int) -> {_TS}"),
    "dyn": _signatures("(A) -> dyn"),
    **{
        part: _signatures(
            f"{_TS}.() -> int",
            f"{_TS}.(string) -> int",
            *((f"{_DUR}.() -> int",) if part in _DURATION_PARTS else ()),
        )
        for part in _TIME_PARTS
    },
    "lowerAscii": _signatures("string.() -> string"),
    "upperAscii": _signatures("string.() -> string"),
    "trim": _signatures("string.() -> string"),
    "replace": _signatures(
        "string.(string, string) -> string", "string.(string, string, int) -> string"
    ),
    "split": _signatures("string.(string) -> list(string)", "string.(string, int) -> list(string)"),
    "substring": _signatures("string.(int) -> string", "string.(int, int) -> string"),
    "charAt": _signatures("string.(int) -> string"),
    "indexOf": _signatures(
        "string.(string) -> int", "string.(string, int) -> int", "list(A).(A) -> int"
    ),
    "lastIndexOf": _signatures(
        "string.(string) -> int", "string.(string, int) -> int", "list(A).(A) -> int"
    ),
    "join": _signatures("list(string).() -> string", "list(string).(string) -> string"),
    "isSorted": _signatures("list(A).() -> bool"),
    "sum": _signatures(*(f"list({t}).() -> {t}" for t in (*_NUMBERS, _DUR))),
    "min": _signatures("list(A).() -> A"),
    "max": _signatures("list(A).() -> A"),
    "quantity": _signatures(f"(string) -> {_QUANTITY}"),
    "isQuantity": _signatures("(string) -> bool"),
    "sign": _signatures(f"{_QUANTITY}.() -> int"),
    "isInteger": _signatures(f"{_QUANTITY}.() -> bool"),
    "asInteger": _signatures(f"{_QUANTITY}.() -> int"),
    "asApproximateFloat": _signatures(f"{_QUANTITY}.() -> double"),
    "add": _signatures(
        f"{_QUANTITY}.({_QUANTITY}) -> {_QUANTITY}", f"{_QUANTITY}.(int) -> {_QUANTITY}"
    ),
    "sub": _signatures(
        f"{_QUANTITY}.({_QUANTITY}) -> {_QUANTITY}", f"{_QUANTITY}.(int) -> {_QUANTITY}"
    ),
    **{
        name: _signatures(*(f"{t}.({t}) -> {result}" for t in (_QUANTITY, _SEMVER)))
        for name, result in (
            ("isLessThan", "bool"),
            ("isGreaterThan", "bool"),
            ("compareTo", "int"),
        )
    },
    "semver": _signatures(f"(string) -> {_SEMVER}", f"(string, bool) -> {_SEMVER}"),
    "isSemver": _signatures("(string) -> bool", "(string, bool) -> bool"),
    **{part: _signatures(f"{_SEMVER}.() -> int") for part in ("major", "minor", "patch")},
    "path": _signatures(f"{_AUTHZ}.Authorizer.(string) -> {_AUTHZ}.PathCheck"),
    "group": _signatures(f"{_AUTHZ}.Authorizer.(string) -> {_AUTHZ}.GroupCheck"),
    "serviceAccount": _signatures(f"{_AUTHZ}.Authorizer.(string, string) -> {_AUTHZ}.Authorizer"),
    "resource": _signatures(f"{_AUTHZ}.GroupCheck.(string) -> {_AUTHZ}.ResourceCheck"),
    **{
        name: _signatures(f"{_AUTHZ}.ResourceCheck.(string) -> {_AUTHZ}.ResourceCheck")
        for name in ("subresource", "namespace", "name")
    },
    "check": _signatures(
        f"{_AUTHZ}.PathCheck.(string) -> {_AUTHZ}.Decision",
        f"{_AUTHZ}.ResourceCheck.(string) -> {_AUTHZ}.Decision",
    ),
    "allowed": _signatures(f"{_AUTHZ}.Decision.() -> bool"),
    "errored": _signatures(f"{_AUTHZ}.Decision.() -> bool"),
    "reason": _signatures(f"{_AUTHZ}.Decision.() -> string"),
    "error": _signatures(f"{_AUTHZ}.Decision.() -> string"),
}
"""The overloads of every operator and function the checker types; calls of others are dyn
(whether they exist at all is checked when the expression is compiled)."""


def _is_parameter(t: Type | None) -> bool:
    return t is not None and len(t.name) == 1 and t.name.isupper()


def _agree(a: Type | None, b: Type | None) -> bool:
    """Whether two types unify (dyn agrees with anything, null with what is nullable)."""
    if a is None or b is None:
        return True
    if a == NULL or b == NULL:
        return a == b or (b if a == NULL else a).name not in _NOT_NULLABLE
    return (
        a.name == b.name
        and a.schema == b.schema
        and len(a.params) == len(b.params)
        and all(_agree(x, y) for x, y in zip(a.params, b.params, strict=True))
    )


def _matches(actual: Type | None, wanted: Type | None, bound: dict[str, Type | None]) -> bool:
    """Whether ``actual`` may be passed where ``wanted`` (with type parameters) is taken."""
    if actual is None or wanted is None:
        return True
    if _is_parameter(wanted):
        if wanted.name not in bound:
            bound[wanted.name] = actual
            return True
        return _agree(actual, bound[wanted.name])
    if actual == NULL:
        return wanted == NULL or wanted.name not in _NOT_NULLABLE
    return (
        actual.name == wanted.name
        and len(actual.params) == len(wanted.params)
        and all(_matches(a, w, bound) for a, w in zip(actual.params, wanted.params, strict=True))
    )


def _substitute(t: Type | None, bound: Mapping[str, Type | None]) -> Type | None:
    if t is None:
        return None
    if _is_parameter(t):
        return bound.get(t.name)
    return Type(t.name, tuple(_substitute(p, bound) for p in t.params)) if t.params else t


# What the checker is given.


@dataclass(frozen=True)
class TypedRoots:
    r"""The OpenAPI schemas the checked variables have (``object`` and ``oldObject`` the matched
    kind's, ``params`` the paramKind's; None where unknown), the document's component
    schemas their ``$ref``\ s point into, and the policy's variables (name, expression) in
    order."""

    roots: Mapping[str, Schema | None]
    components: Mapping[str, Schema]
    variables: Sequence[tuple[str, str]] = ()

    def resolve(self, schema: Schema) -> Schema:
        r"""The schema behind ``$ref``\ s and single-member ``allOf`` wrappers."""
        for _ in range(64):
            if "$ref" in schema:
                schema = self.components.get(str(schema["$ref"]).rsplit("/", 1)[-1], {})
            elif len(schema.get("allOf") or ()) == 1:
                schema = schema["allOf"][0]
            else:
                break
        return schema

    def type_of(self, schema: Schema, depth: int = 0) -> Type | None:
        """The CEL type of values of ``schema`` (Kubernetes' OpenAPI to CEL mapping)."""
        schema = self.resolve(schema)
        kind = schema.get("type")
        if depth > 32 or schema.get("x-kubernetes-int-or-string"):
            return None
        if kind == "array":
            items = schema.get("items")
            return list_of(self.type_of(items, depth + 1)) if isinstance(items, dict) else None
        if kind == "object":
            values = schema.get("additionalProperties")
            if isinstance(values, dict):
                return Type("map", (STRING, self.type_of(values, depth + 1)))
            preserved = schema.get("x-kubernetes-preserve-unknown-fields")
            return (
                Type(OBJECT, schema=schema) if schema.get("properties") and not preserved else None
            )
        if kind == "string":
            return _STRING_FORMATS.get(str(schema.get("format")), STRING)
        return {"integer": INT, "number": DOUBLE, "boolean": BOOL}.get(str(kind))


# The checker.

_OPERATORS = {
    "relation_lt": ("_<_", "<"),
    "relation_le": ("_<=_", "<="),
    "relation_gt": ("_>_", ">"),
    "relation_ge": ("_>=_", ">="),
    "relation_eq": ("_==_", "=="),
    "relation_ne": ("_!=_", "!="),
    "relation_in": ("@in", "in"),
    "addition_add": ("_+_", "+"),
    "addition_sub": ("_-_", "-"),
    "multiplication_mul": ("_*_", "*"),
    "multiplication_div": ("_/_", "/"),
    "multiplication_mod": ("_%_", "%"),
}
_WRAPPERS = frozenset(
    {
        "expr", "conditionalor", "conditionaland", "relation", "addition", "multiplication",
        "unary", "member", "primary",
    }
)  # fmt: skip
"""Grammar rules that, with one child, are that child."""
_LITERALS = {
    "INT_LIT": INT,
    "UINT_LIT": UINT,
    "FLOAT_LIT": DOUBLE,
    "STRING_LIT": STRING,
    "MLSTRING_LIT": STRING,
    "BYTES_LIT": BYTES,
    "BOOL_LIT": BOOL,
    "NULL_LIT": NULL,
}
_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})
Issue = tuple[int, str]
"""(offset in the text, message)."""


def _trees(node: lark.Tree[Any]) -> list[lark.Tree[Any]]:
    return [c for c in node.children if isinstance(c, lark.Tree)]


def _arguments(node: lark.Tree[Any]) -> list[lark.Tree[Any]]:
    """The argument expressions of a call (its ``exprlist``)."""
    lists = [c for c in _trees(node) if c.data == "exprlist"]
    return _trees(lists[0]) if lists else []


class _Checker:
    """Infers the type of every subexpression of one expression, noting cel-go's errors."""

    def __init__(self, text: str, typed: TypedRoots, variables: Mapping[str, Type | None]) -> None:
        self.text, self.typed, self.variables = text, typed, variables
        self.issues: list[Issue] = []
        self.scope: dict[str, Type | None] = {
            name: typed.type_of(schema) if schema is not None else None
            for name, schema in typed.roots.items()
        }
        self.scope |= {"authorizer": AUTHORIZER, "variables": VARIABLES}

    def infer(self, node: lark.Tree[Any]) -> Type | None:
        data, trees = node.data, _trees(node)
        if data in _WRAPPERS and len(node.children) == 1 and trees:
            return self.infer(trees[0])
        if data == "paren_expr":
            return self.infer(trees[0])
        if data == "expr" and len(trees) == 3:
            return self._call("_?_:_", node, None, trees)
        if data in ("conditionalor", "conditionaland"):
            for operand in trees:
                self._expect_bool(operand, self.infer(operand))
            return BOOL
        if data in ("relation", "addition", "multiplication"):
            left = _trees(trees[0])[0]
            return self._call(_OPERATORS[trees[0].data][0], node, None, [left, trees[1]])
        if data == "unary":
            function = "!_" if trees[0].data == "unary_not" else "-_"
            return self._call(function, node, None, [trees[1]])
        if data == "literal":
            return _LITERALS.get(str(getattr(node.children[0], "type", "")))
        if data == "ident":
            return self.scope.get(str(node.children[0]))
        if data == "member_dot":
            return self._select(node)
        if data == "member_index":
            return self._call("_[_]", node, None, trees)
        if data == "member_dot_arg":
            name = str(node.children[1])
            if name in _MACROS:
                return self._macro(node, name, trees[0], _arguments(node))
            return self._call(name, node, trees[0], _arguments(node))
        if data == "ident_arg":
            name = str(node.children[0])
            if name == "has":
                self._infer_all(_arguments(node))
                return BOOL
            return self._call(name, node, None, _arguments(node))
        if data == "list_lit":
            return list_of(_joined(self._infer_all(_arguments(node))))
        if data == "map_lit":
            entries = self._infer_all(_trees(trees[0]) if trees else [])
            return Type("map", (_joined(entries[::2]), _joined(entries[1::2])))
        self._infer_all(trees)  # dot_ident, member_object...: untyped here
        return None

    def _infer_all(self, nodes: Iterable[lark.Tree[Any]]) -> list[Type | None]:
        return [self.infer(n) for n in nodes]

    def _call(
        self,
        function: str,
        node: lark.Tree[Any],
        target: lark.Tree[Any] | None,
        arguments: Sequence[lark.Tree[Any]],
    ) -> Type | None:
        types = self._infer_all([target, *arguments] if target is not None else arguments)
        return self._resolve(function, node, target is not None, types)

    def _resolve(
        self, function: str, node: lark.Tree[Any], member: bool, types: Sequence[Type | None]
    ) -> Type | None:
        """The result of the first overload that takes ``types`` (dyn if several with
        different results do); an error where none does."""
        overloads = SIGNATURES.get(function)
        if overloads is None:
            return None
        results = []
        for overload in overloads:
            bound: dict[str, Type | None] = {}
            if (
                overload.member == member
                and len(overload.params) == len(types)
                and all(_matches(t, p, bound) for t, p in zip(types, overload.params, strict=True))
            ):
                results.append(_substitute(overload.result, bound))
        if not results:
            shown = [show(t) for t in types]
            if all(s is not None for s in shown):
                target = f"{shown.pop(0)}." if member else ""
                applied = f"{target}({', '.join(str(s) for s in shown)})"
                message = f"found no matching overload for '{function}' applied to '{applied}'"
                self.issues.append((self._offset(node), message))
            return None
        return results[0] if all(r == results[0] for r in results) else None

    def _expect_bool(self, node: lark.Tree[Any], found: Type | None) -> None:
        shown = show(found)
        if found is not None and found != BOOL and shown is not None:
            message = f"expected type 'bool' but found '{shown}'"
            self.issues.append((self._offset(node), message))

    def _select(self, node: lark.Tree[Any]) -> Type | None:
        base_node, name = _trees(node)[0], str(node.children[1])
        if _ident(base_node) == "authorizer" and name == "requestResource":
            return RESOURCE_CHECK
        base = self.infer(base_node)
        if base is None:
            return None
        if base is VARIABLES:
            if name in self.variables:
                return self.variables[name]
        elif base.name == OBJECT and base.schema is not None:
            properties: Mapping[str, Schema] = base.schema.get("properties") or {}
            visible = {escape(p) or p: schema for p, schema in properties.items()}
            if name in visible:
                return self.typed.type_of(visible[name])
        elif base.name == "map":
            return base.params[1]
        elif base.name in _NOT_NULLABLE or base in (NULL, TIMESTAMP, DURATION):
            message = f"type '{show(base)}' does not support field selection"
            self.issues.append((self._offset(node), message))
            return None
        else:
            return None
        self.issues.append((self._offset(node), f"undefined field '{name}'"))
        return None

    def _macro(
        self,
        node: lark.Tree[Any],
        name: str,
        target: lark.Tree[Any],
        arguments: Sequence[lark.Tree[Any]],
    ) -> Type | None:
        """A comprehension macro: its variable bound to the range's elements."""
        range_type = self.infer(target)
        variable = _ident(arguments[0]) if len(arguments) in (2, 3) else None
        if variable is None:
            self._infer_all(arguments)
            return None
        element = self._element(target, range_type)
        outer = self.scope.get(variable)
        self.scope[variable] = element
        try:
            body = self._infer_all(arguments[1:])
        finally:
            self.scope[variable] = outer
        if name in ("all", "exists"):
            self._expect_bool(arguments[1], body[0])
            return BOOL
        if name == "exists_one":
            self._resolve("_?_:_", node, False, [body[0], INT, INT])
            return BOOL
        if name == "filter":
            kept = list_of(element)
            self._resolve("_?_:_", node, False, [body[0], kept, kept])
            return kept
        result = list_of(body[-1])
        if len(body) == 2:
            self._resolve("_?_:_", node, False, [body[0], result, result])
        return result

    def _element(self, target: lark.Tree[Any], range_type: Type | None) -> Type | None:
        """The type a macro's variable takes over ``range_type`` (a map's keys)."""
        if range_type is None or range_type.name in ("list", "map"):
            return range_type.params[0] if range_type is not None else None
        shown = show(range_type)
        if shown is not None:
            message = (
                f"expression of type '{shown}' cannot be range of a comprehension "
                "(must be list, map, or dynamic)"
            )
            self.issues.append((self._offset(target), message))
        return None

    def _offset(self, node: lark.Tree[Any]) -> int:
        """Where cel-go places an expression: an operator's symbol, a call's ``(``, a
        selection's ``.``, an index's ``[``; else its first character."""
        data, trees = node.data, _trees(node)
        if (data in _WRAPPERS and len(node.children) == 1 and trees) or data == "paren_expr":
            return self._offset(trees[0])
        text, end = self.text, getattr(trees[0].meta, "end_pos", 0) if trees else 0
        if data == "expr" and len(trees) == 3:
            return text.find("?", end)
        if data in ("conditionalor", "conditionaland") and len(trees) == 2:
            return text.find("||" if data == "conditionalor" else "&&", end)
        if data in ("relation", "addition", "multiplication") and len(trees) == 2:
            left = _trees(trees[0])[0]  # the operator's node holds the left operand and symbol
            return text.find(_OPERATORS[trees[0].data][1], getattr(left.meta, "end_pos", 0))
        if data in ("member_dot", "member_dot_arg", "ident_arg"):
            name = node.children[1 if data != "ident_arg" else 0]
            start = getattr(name, "start_pos", 0)
            return text.rfind(".", 0, start) if data == "member_dot" else text.find("(", start)
        if data == "member_index":
            return text.find("[", end)
        return getattr(node.meta, "start_pos", 0)


def _ident(node: lark.Tree[Any]) -> str | None:
    """The name ``node`` is if it is a plain identifier."""
    while node.data in _WRAPPERS and len(node.children) == 1 and _trees(node):
        node = _trees(node)[0]
    return str(node.children[0]) if node.data == "ident" else None


def _joined(types: Sequence[Type | None]) -> Type | None:
    """The element type of a literal list of ``types``: theirs if they agree, else dyn."""
    if not types or any(t is None or t != types[0] for t in types):
        return None
    return types[0]


def _variable_types(typed: TypedRoots) -> dict[str, Type | None]:
    """Each policy variable's type: its expression's, checked with the variables before it
    (dyn if the expression does not parse or has an error)."""
    types: dict[str, Type | None] = {}
    for name, text in typed.variables:
        checker = _Checker(text, typed, dict(types))
        try:
            found = checker.infer(parse(text))
        except Exception:  # a syntax error or too deep a nesting: the variable's to report
            types[name] = None
            continue
        types[name] = None if checker.issues else found
    return types


@dataclass(frozen=True)
class Checked:
    """What checking one expression found: cel-go's errors (None if none) and the type of
    its result (None for dyn)."""

    issues: str | None
    output: Type | None


def check(text: str, typed: TypedRoots) -> Checked | None:
    """``text`` checked against ``typed``; None when it does not parse (a syntax error is the
    compiler's to report)."""
    try:
        tree = parse(text)
    except Exception:
        return None
    checker = _Checker(text, typed, _variable_types(typed))
    try:
        output = checker.infer(tree)
    except RecursionError:  # nesting deeper than this checker's recursion can follow
        return Checked(issue(text, 1, 1, "expression recursion limit exceeded"), None)
    issues = []
    for offset, message in sorted(checker.issues):
        line = text.count("\n", 0, offset) + 1
        column = offset - (text.rfind("\n", 0, offset) + 1) + 1
        issues.append(issue(text, line, column, message))
    return Checked("\n".join(dict.fromkeys(issues)) or None, output)


def type_issues(text: str, typed: TypedRoots) -> str | None:
    """cel-go's type-checking errors of ``text`` against ``typed`` (one issue per line group,
    in the order of their positions), or None."""
    checked = check(text, typed)
    return checked.issues if checked is not None else None


# Admission expressions, compiled when their object is written.


def admission_problem(text: str, base: cel.Declarations, scope: Scope) -> str | None:
    """Why an admission expression is refused, in upstream's words: ``compilation failed:
    ERROR: ...`` when it does not parse, names what ``scope`` does not declare in ``base`` or
    fails type checking (``object``, ``request``... are dyn: nothing types them when a policy
    is written), else ``must evaluate to bool but got dyn`` when its result is not of a type
    ``scope`` wants; None when it compiles."""
    declarations = cel.admission_declarations(
        base,
        scope.params,
        scope.authorizer,
        scope.variables is not None,
        None if scope.stored else cel.COMPATIBILITY_VERSION,
    )
    problem = cel.compile_problem(text, declarations)
    checked = check(text, TypedRoots({}, {}, scope.variables or ()))
    if problem is None and checked is not None and checked.issues is not None:
        problem = checked.issues
    if problem is not None:
        return f"compilation failed: {problem}"
    output = checked.output if checked is not None else None
    shown = show(output) or (output.name if output is not None else "dyn")
    if not scope.results or shown in scope.results:
        return None
    if len(scope.results) == 1:
        return f"must evaluate to {scope.results[0]} but got {shown}"
    return f"must evaluate to one of [{' '.join(scope.results)}] but got {shown}"
