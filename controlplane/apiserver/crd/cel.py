"""CEL: the validation rules (``x-kubernetes-validations``) of CustomResourceDefinitions, and
admission expressions (``ADMISSION``, ``POLICY``, ``MUTATION``, at the end): webhooks' match
conditions and admission policies', compiled when written in the declarations their field
gives them (``admission_declarations``) and type-checked by ``celcheck``.

A CRD's schema may carry, at any node, rules written in CEL; upstream's API server evaluates
them after pruning, defaulting and the OpenAPI checks, and so does ours, with the pure-Python
interpreter of ``cel-python`` (``celpy``).  ``controlplane.apiserver.crd.schema`` walks the
schema beside the value; this module does what happens at one node:

- **Compiling.**  A rule (and a ``messageExpression``) is parsed once and cached by its text.
  celpy resolves names only when it evaluates, so compiling also walks the syntax tree and
  rejects what upstream's type checker would: a variable other than ``self``, ``oldSelf``, a
  type name or a macro's bound variable, and a function this module does not provide.  The
  problem reads like cel-go's (``compilation failed: ERROR: <input>:1:6: undeclared reference
  to 'foo' (in container '')`` with the line and a caret); CRD validation
  (``kube.api.kinds.apiextensions_v1``) reports it at ``x-kubernetes-validations[i].rule``
  through the compiler this module installs there on import (``kube.api`` may not import the
  control plane).
- **Binding.**  ``self`` is the node's value, converted by its schema as upstream's
  ``UnstructuredToVal`` does: ``integer`` → int, ``number`` → double (``1`` included),
  ``string`` with ``format`` ``date-time``/``date`` → timestamp, ``duration`` → duration,
  ``byte`` → bytes (a string that does not parse stays a string), objects → maps whose
  declared property names are escaped as upstream (``x-y`` → ``x__dash__y``, ``a.b`` →
  ``a__dot__b``, ``namespace`` → ``__namespace__``, ``__`` → ``__underscores__``), values
  without a type (``x-kubernetes-int-or-string``, preserved unknown fields) by their JSON type.
  ``oldSelf`` is the value at the same path in the old object; a rule that uses it (a
  transition rule) is evaluated only on update and only where the old object has a value
  there: map keys and properties correlate by name, list items only in
  ``x-kubernetes-list-type: map`` lists, by their keys.
- **Reporting.**  A rule that is not true yields, at the node's path (or the rule's
  ``fieldPath`` below it), an error of the rule's ``reason`` (``FieldValueInvalid`` by
  default; ``FieldValueForbidden``, ``FieldValueRequired``, ``FieldValueDuplicate``) whose
  value is the schema's type name and whose detail is the ``messageExpression``'s result, else
  the ``message``, else ``failed rule: <rule>`` — as upstream: ``spec: Invalid value:
  "object": failed rule: self.minReplicas <= self.maxReplicas``.  An evaluation error is
  ``<error> evaluating rule: <rule or message>`` (``no such key: foo``, ``division by zero``,
  ...), a mismatched overload ``'no such overload': call arguments did not match a supported
  operator, function or macro signature for rule: ...``.
- **Budget.**  celpy cannot count upstream's cost units, so a ``Budget`` bounds the number of
  rule evaluations of one request (``MAX_EVALUATIONS``); when it runs out, the node reports
  upstream's ``validation failed due to running out of cost budget, no further validation rules
  will be run`` and the walk stops.

What a rule may use: field selection and indexing, ``has()``, ``size()``, the comparison,
arithmetic, logical and ternary operators, ``in`` on lists and maps, list and map literals,
the macros ``all``, ``exists``, ``exists_one``, ``map``, ``filter``; celpy's standard library:
``startsWith``, ``endsWith``, ``contains``, ``matches``, conversions ``int``, ``uint``,
``double``, ``string``, ``bool``, ``bytes``, ``duration``, ``timestamp``, ``type``, and the
timestamp accessors (``getFullYear``, ``getHours``, ...); ``dyn()``; and the cheap Kubernetes
extensions added here: on strings ``lowerAscii``, ``upperAscii``, ``trim``, ``replace``,
``split``, ``substring``, ``charAt``, ``indexOf``, ``lastIndexOf``; on lists ``join``,
``isSorted``, ``sum``, ``min``, ``max``, ``indexOf``, ``lastIndexOf``; the quantity library
(``quantity``, ``isQuantity`` and a quantity's methods) and the semver library
(``controlplane.apiserver.crd.celsemver``: ``semver``, ``isSemver``, a version's methods).

Static type checking (ValidatingAdmissionPolicy ``status.typeChecking``) is
``controlplane.apiserver.crd.celcheck``'s, over the syntax trees ``parse`` makes.

Not done: static typing of CRD rules (a rule comparing an int with a string fails when
evaluated, not when the CRD is written), heterogeneous numeric equality
(``1 == 1.0`` is an error in celpy), the other Kubernetes libraries (``url``, ``ip``,
``cidr``, ``format``, regex ``find``, optionals and ``optionalOldSelf``), cost estimation, the
``apiVersion``/``kind``/``metadata`` of a root ``self``, and validation ratcheting.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import functools
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import celpy
import lark
from celpy import celtypes
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError, base_functions

from controlplane.apiserver.auth import Authorizer, User
from controlplane.apiserver.crd import celsemver
from controlplane.apiserver.endpoints.requestinfo import RequestInfo
from kube.api import expressions
from kube.api.errors import ErrorList, ErrorType, Path
from kube.api.expressions import Environment
from kube.api.quantity import Quantity, QuantityError

Schema = dict[str, Any]

VALIDATIONS = "x-kubernetes-validations"
MAX_EVALUATIONS = 10_000
"""Rule evaluations one request may spend (messageExpressions count too)."""
MAX_MESSAGE_BYTES = 5 * 1024
"""Upstream's limit on an evaluated messageExpression."""

SELF = "self"
OLD_SELF = "oldSelf"
OUT_OF_BUDGET = (
    "validation failed due to running out of cost budget, no further validation rules will be run"
)


class CompileError(Exception):
    """A rule that does not compile; ``str()`` is cel-go-like issue text (``ERROR: ...``)."""


class EvaluationError(Exception):
    """A rule whose evaluation failed; ``str()`` is the error as cel-go words it."""


# Compiling.


@dataclass(frozen=True, eq=False)
class Declarations:
    """What an expression may name: its variables and its functions (one object per kind of
    expression, compared by identity, so that compiled programs are cached per kind)."""

    variables: frozenset[str]
    functions: Mapping[str, Callable[..., Any]]


@dataclass(frozen=True)
class Program:
    """One compiled expression, ready to evaluate any number of times (and thread-safe)."""

    text: str
    uses_old_self: bool
    runner: celpy.Runner

    def evaluate(self, variables: Mapping[str, celtypes.Value]) -> celtypes.Value:
        """The expression's value; raise ``EvaluationError`` for any failure.

        celpy is a third-party interpreter walking user input: any exception it raises (a
        ``RecursionError`` on deep nesting included) is the rule's failure, never the server's.
        """
        try:
            result = self.runner.evaluate(dict(variables))
        except CELEvalError as error:
            raise EvaluationError(_eval_message(error)) from error
        except Exception as error:
            raise EvaluationError(str(error) or type(error).__name__) from error
        if isinstance(result, CELEvalError):
            raise EvaluationError(_eval_message(result))
        return result


_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})
_TYPE_NAMES = frozenset(
    {"int", "uint", "double", "bool", "string", "bytes", "list", "map", "null_type", "type"}
)
_lock = threading.Lock()
_cache: dict[tuple[str, Declarations], Program | CompileError] = {}
_ENVIRONMENT = celpy.Environment()
"""Made on import (a tenth of a second): celpy sets the interpreter's recursion limit (to
2500) whenever it makes one, and that global change belongs at start, not in the middle of
the first request that compiles a rule."""


def compile_expression(text: str, declarations: Declarations | None = None) -> Program:
    """The compiled form of ``text`` (cached) for a kind of expression (default: CRD rules);
    raise ``CompileError`` when it does not compile."""
    declared = declarations or RULES
    with _lock:
        found = _cache.get((text, declared))
    if found is None:
        try:
            found = _compile(text, declared)
        except CompileError as error:
            found = error
        with _lock:
            _cache[(text, declared)] = found
    if isinstance(found, CompileError):
        raise found
    return found


def compile_problem(text: str, declarations: Declarations | None = None) -> str | None:
    """Why ``text`` does not compile (cel-go-like issue text), or None."""
    try:
        compile_expression(text, declarations)
    except CompileError as error:
        return str(error)
    return None


def parse(text: str) -> lark.Tree[Any]:
    """The syntax tree of ``text``; raise ``CELParseError`` (or lark's errors on odd input)."""
    return _ENVIRONMENT.compile(text)


def _compile(text: str, declarations: Declarations) -> Program:
    try:
        tree = parse(text)
    except CELParseError as error:
        line, column = error.line or 1, error.column or 1
        raise CompileError(issue(text, line, column, "Syntax error: unexpected input")) from error
    except Exception as error:  # lark's other failures on odd input: still a syntax error
        raise CompileError(issue(text, 1, 1, f"Syntax error: {error}")) from error
    uses_old_self = _check_names(text, tree, declarations)
    return Program(
        text, uses_old_self, _ENVIRONMENT.program(tree, functions=dict(declarations.functions))
    )


def issue(text: str, line: int, column: int, message: str) -> str:
    """cel-go's issue format: the position, the message, the source line and a caret."""
    lines = text.split("\n")
    source = lines[line - 1] if 0 < line <= len(lines) else ""
    caret = "." * max(column - 1, 0) + "^"
    return f"ERROR: <input>:{line}:{column}: {message}\n | {source}\n | {caret}"


def _check_names(text: str, tree: lark.Tree[Any], declarations: Declarations) -> bool:
    """Reject the names upstream's checker would not resolve; whether ``oldSelf`` is used."""
    bound = _bound_variables(tree)
    functions = declarations.functions
    uses_old_self = False
    for node in _top_down(tree):
        if node.data == "ident":
            name = node.children[0]
            if name not in declarations.variables and name not in bound | _TYPE_NAMES:
                _undeclared(text, name)
            uses_old_self = uses_old_self or name == OLD_SELF
        elif node.data == "ident_arg":
            name = node.children[0]
            if name != "has" and name not in functions:
                _undeclared(text, name)
        elif node.data == "member_dot_arg":
            name = node.children[1]
            if name not in _MACROS and name not in functions:
                _undeclared(text, name)
    return uses_old_self


def _top_down(tree: lark.Tree[Any]) -> Iterator[lark.Tree[Any]]:
    """The subtrees of ``tree`` in source order (so the first error reported is the leftmost)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(c for c in reversed(node.children) if isinstance(c, lark.Tree))


def _undeclared(text: str, name: Any) -> None:
    """Raise cel-go's error for a name (a lark token, which knows its position)."""
    line = getattr(name, "line", None) or 1
    column = getattr(name, "column", None) or 1
    message = f"undeclared reference to '{name}' (in container '')"
    raise CompileError(issue(text, line, column, message))


def _bound_variables(tree: lark.Tree[Any]) -> set[str]:
    """The variables the macros in ``tree`` bind (their first argument)."""
    bound: set[str] = set()
    for node in tree.iter_subtrees():
        if node.data != "member_dot_arg" or node.children[1] not in _MACROS:
            continue
        args = node.children[2] if len(node.children) > 2 else None
        if not isinstance(args, lark.Tree) or not args.children:
            continue
        first = args.children[0]
        if isinstance(first, lark.Tree):
            for sub in first.iter_subtrees():
                if sub.data == "ident":
                    bound.add(str(sub.children[0]))
    return bound


def _eval_message(error: CELEvalError) -> str:
    """celpy's error in cel-go's words (what upstream's messages show)."""
    args = error.args
    message = str(args[0]) if args else "evaluation error"
    kind = args[1] if len(args) > 1 else None
    if kind is KeyError and message.startswith("no such member"):
        key = message.split(":", 1)[1].strip().strip("'") if ":" in message else ""
        return f"no such key: {key}"
    if kind is ZeroDivisionError:
        return "division by zero"
    if kind is IndexError:
        return "index out of bounds"
    if message.startswith("Attempt to reduce an empty sequence"):  # celpy's own min()
        return "min called on empty list"
    if message == "return error for overflow":
        return "integer overflow"
    if kind is TypeError and ("no such overload" in message or "no matching overload" in message):
        return "no such overload"
    if "does not support field selection" in message:
        return "no such overload"
    return message


# Binding JSON values to CEL values.


_RESERVED = frozenset(
    {
        "true", "false", "null", "in", "as", "break", "const", "continue", "else", "for",
        "function", "if", "import", "let", "loop", "package", "namespace", "return", "var",
        "void", "while",
    }
)  # fmt: skip
_ESCAPES = {"__": "__underscores__", ".": "__dot__", "-": "__dash__", "/": "__slash__"}


def escape(name: str) -> str | None:
    """The name a property has in CEL (upstream's escaping), or None if it has none."""
    if not name or name[0].isdigit():
        return None
    if name in _RESERVED:
        return f"__{name}__"
    out: list[str] = []
    i = 0
    while i < len(name):
        if name.startswith("__", i):
            out.append(_ESCAPES["__"])
            i += 2
            continue
        c = name[i]
        if c in _ESCAPES:
            out.append(_ESCAPES[c])
        elif c.isascii() and (c.isalnum() or c == "_"):
            out.append(c)
        else:
            return None
        i += 1
    return "".join(out)


def to_cel(value: Any, schema: Schema | None) -> celtypes.Value:
    """``value`` (plain JSON) as the CEL value its schema makes it."""
    schema = schema or {}
    if value is None:
        return None
    kind = schema.get("type")
    if isinstance(value, dict) and kind in ("object", None):
        properties: dict[str, Schema] = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        result = celtypes.MapType()
        for key, item in value.items():
            if key in properties:
                name = escape(key)
                if name is not None:
                    result[celtypes.StringType(name)] = to_cel(item, properties[key])
            else:
                sub = additional if isinstance(additional, dict) else None
                result[celtypes.StringType(key)] = to_cel(item, sub)
        return result
    if isinstance(value, list) and kind in ("array", None):
        items = schema.get("items")
        sub = items if isinstance(items, dict) else None
        return celtypes.ListType([to_cel(item, sub) for item in value])
    if isinstance(value, bool):
        return celtypes.BoolType(value)
    if isinstance(value, int | float):
        if kind == "number" or (kind is None and isinstance(value, float)):
            return celtypes.DoubleType(float(value))
        if isinstance(value, float) and not value.is_integer():
            return celtypes.DoubleType(value)
        return celtypes.IntType(int(value))
    if isinstance(value, str):
        return _string(value, schema.get("format") if kind == "string" else None)
    return _dynamic(value)


def _string(value: str, fmt: Any) -> celtypes.Value:
    try:
        if fmt in ("date-time", "date"):
            return celtypes.TimestampType(value)
        if fmt == "duration":
            return celtypes.DurationType(value)
        if fmt == "byte":
            return celtypes.BytesType(base64.b64decode(value, validate=True))
    except (ValueError, TypeError, OverflowError, binascii.Error):
        pass
    return celtypes.StringType(value)


def to_cel_json(value: Any) -> celtypes.Value:
    """A JSON value without a schema (an admission request's object) as a CEL value."""
    return _dynamic(value)


def _dynamic(value: Any) -> celtypes.Value:
    if isinstance(value, dict):
        return celtypes.MapType({celtypes.StringType(k): _dynamic(v) for k, v in value.items()})
    if isinstance(value, list):
        return celtypes.ListType([_dynamic(v) for v in value])
    return to_cel(value, {})


# Evaluating one node's rules.


class Budget:
    """How many rule evaluations a request may still spend."""

    def __init__(self, limit: int = MAX_EVALUATIONS) -> None:
        self.remaining = limit
        self._exhausted = False

    def spend(self) -> bool:
        """Take one evaluation; False (and ``exhausted()`` from then on) when none is left."""
        if self.remaining <= 0:
            self._exhausted = True
            return False
        self.remaining -= 1
        return True

    def exhausted(self) -> bool:
        """Whether an evaluation was refused: the walk stops."""
        return self._exhausted


_REASONS = {
    "FieldValueForbidden": ErrorType.FORBIDDEN,
    "FieldValueRequired": ErrorType.REQUIRED,
    "FieldValueDuplicate": ErrorType.DUPLICATE,
}


def rules_of(schema: Schema) -> list[dict[str, Any]]:
    """A schema node's rules (``x-kubernetes-validations``)."""
    rules = schema.get(VALIDATIONS)
    return [r for r in rules if isinstance(r, dict)] if isinstance(rules, list) else []


def has_rules(schema: Any) -> bool:
    """Whether a schema has rules at any node (below properties, items, additionalProperties
    and allOf): upstream builds a CEL validator, and gates it on blocking errors, only then."""
    if not isinstance(schema, dict):
        return False
    if rules_of(schema):
        return True
    below = [
        *(schema.get("properties") or {}).values(),
        schema.get("items"),
        schema.get("additionalProperties"),
        *(schema.get("allOf") or ()),
    ]
    return any(has_rules(sub) for sub in below)


def evaluate_rules(
    schema: Schema,
    value: Any,
    old: Any,
    path: Path,
    errors: ErrorList,
    budget: Budget,
    transitions_only: bool = False,
) -> None:
    """Evaluate the rules of one node (``value`` not null; ``old`` None when there is no old
    value at this path) and append an error for each that does not hold.  With
    ``transitions_only``, only the rules that use ``oldSelf``."""
    rules = rules_of(schema)
    if not rules or value is None:
        return
    type_name = str(schema.get("type") or "")
    variables: dict[str, celtypes.Value] | None = None
    for rule in rules:
        text = str(rule.get("rule") or "").strip()
        if not text:
            continue
        try:
            program = compile_expression(text)
        except CompileError as error:
            if not transitions_only:
                errors.invalid(path, type_name, f"rule compile error: compilation failed: {error}")
            continue
        if (program.uses_old_self and old is None) or (
            transitions_only and not program.uses_old_self
        ):
            continue
        if not budget.spend():
            errors.invalid(path, type_name, OUT_OF_BUDGET)
            return
        if variables is None:
            variables = {SELF: to_cel(value, schema)}
            if old is not None:
                variables[OLD_SELF] = to_cel(old, schema)
        described = _rule_string(rule, text)
        try:
            result = program.evaluate(variables)
            if not isinstance(result, celtypes.BoolType):
                raise EvaluationError("cel expression must evaluate to a bool")
        except EvaluationError as error:
            if str(error) == "no such overload":
                detail = (
                    f"'{error}': call arguments did not match a supported operator, function "
                    f"or macro signature for rule: {described}"
                )
            else:
                detail = f"{error} evaluating rule: {described}"
            errors.invalid(path, type_name, detail)
            continue
        if result:
            continue
        detail = _message_expression(rule, variables, budget) or _default_message(rule, text)
        where = _field_path(path, schema, rule.get("fieldPath"))
        _report(where, type_name, detail, rule.get("reason"), errors)


def _rule_string(rule: Mapping[str, Any], text: str) -> str:
    message = str(rule.get("message") or "").strip()
    return message or text


def _default_message(rule: Mapping[str, Any], text: str) -> str:
    message = str(rule.get("message") or "").strip()
    return message or f"failed rule: {text}"


def _message_expression(
    rule: Mapping[str, Any], variables: Mapping[str, celtypes.Value], budget: Budget
) -> str | None:
    """The evaluated messageExpression, or None (no expression, or it failed: upstream then
    falls back to the message)."""
    text = str(rule.get("messageExpression") or "").strip()
    if not text or not budget.spend():
        return None
    try:
        result = compile_expression(text).evaluate(variables)
    except (CompileError, EvaluationError):
        return None
    if not isinstance(result, str):
        return None
    message = result.strip()
    if not message or "\n" in message or len(message.encode()) > MAX_MESSAGE_BYTES:
        return None
    return message


def _report(path: Path, value: str, detail: str, reason: Any, errors: ErrorList) -> None:
    kind = _REASONS.get(str(reason), ErrorType.INVALID)
    if kind is ErrorType.INVALID:
        errors.invalid(path, value, detail)
    elif kind is ErrorType.FORBIDDEN:
        errors.forbidden(path, detail)
    elif kind is ErrorType.REQUIRED:
        errors.required(path, detail)
    else:
        errors.duplicate(path, value)


def _field_path(base: Path, schema: Schema, text: Any) -> Path:
    """``base`` extended by a rule's ``fieldPath`` (``.spec.x``, ``['key']``), walking the schema
    so that map keys render as ``[key]``; ``base`` when the path does not parse."""
    if not isinstance(text, str) or not text.strip():
        return base
    tokens = _field_path_tokens(text.strip())
    if tokens is None:
        return base
    path, node = base, schema
    for name in tokens:
        properties = node.get("properties") or {}
        additional = node.get("additionalProperties")
        if name in properties:
            path, node = path.child(name), properties[name]
        elif isinstance(additional, dict):
            path, node = path.key(name), additional
        else:
            return base
    return path


def _field_path_tokens(text: str) -> list[str] | None:
    tokens: list[str] = []
    i = 0
    while i < len(text):
        if text[i] == ".":
            j = i + 1
            while j < len(text) and text[j] not in ".[":
                j += 1
            if j == i + 1:
                return None
            tokens.append(text[i + 1 : j])
            i = j
        elif text.startswith("['", i):
            end = text.find("']", i + 2)
            if end < 0:
                return None
            tokens.append(text[i + 2 : end].replace("\\'", "'").replace("\\\\", "\\"))
            i = end + 2
        else:
            return None
    return tokens


# Functions beyond celpy's standard library (Kubernetes' strings and lists extensions).

Result = celtypes.Value | CELEvalError
"""What a function returns: a value, or the error CEL propagates (celpy turns a raised
``TypeError`` into ``no such overload``)."""


def _string_arg(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"no such overload: {type(value).__name__}")
    return value


def _lower_ascii(s: Any) -> celtypes.Value:
    text = _string_arg(s)
    return celtypes.StringType("".join(c.lower() if c.isascii() else c for c in text))


def _upper_ascii(s: Any) -> celtypes.Value:
    text = _string_arg(s)
    return celtypes.StringType("".join(c.upper() if c.isascii() else c for c in text))


def _trim(s: Any) -> celtypes.Value:
    return celtypes.StringType(_string_arg(s).strip())


def _replace(s: Any, old: Any, new: Any, n: Any = -1) -> celtypes.Value:
    return celtypes.StringType(_string_arg(s).replace(_string_arg(old), _string_arg(new), int(n)))


def _split(s: Any, sep: Any, n: Any = -1) -> celtypes.Value:
    text, separator, limit = _string_arg(s), _string_arg(sep), int(n)
    if limit == 0:
        return celtypes.ListType()
    if separator == "":
        parts = list(text) if limit < 0 else [*text[: limit - 1], text[limit - 1 :]]
    else:
        parts = text.split(separator, limit - 1 if limit > 0 else -1)
    return celtypes.ListType([celtypes.StringType(p) for p in parts])


def _substring(s: Any, start: Any, end: Any = None) -> Result:
    text = _string_arg(s)
    low, high = int(start), len(text) if end is None else int(end)
    if not 0 <= low <= high <= len(text):
        return CELEvalError(f"index out of range: {low if low > len(text) or low < 0 else high}")
    return celtypes.StringType(text[low:high])


def _char_at(s: Any, i: Any) -> Result:
    text, index = _string_arg(s), int(i)
    if not 0 <= index <= len(text):
        return CELEvalError(f"index out of range: {index}")
    return celtypes.StringType(text[index : index + 1])


def _index_of(target: Any, item: Any, offset: Any = 0) -> celtypes.Value:
    if isinstance(target, list):
        for i, found in enumerate(target):
            if found == item:
                return celtypes.IntType(i)
        return celtypes.IntType(-1)
    return celtypes.IntType(_string_arg(target).find(_string_arg(item), int(offset)))


def _last_index_of(target: Any, item: Any) -> celtypes.Value:
    if isinstance(target, list):
        for i in range(len(target) - 1, -1, -1):
            if target[i] == item:
                return celtypes.IntType(i)
        return celtypes.IntType(-1)
    return celtypes.IntType(_string_arg(target).rfind(_string_arg(item)))


def _join(items: Any, sep: Any = "") -> celtypes.Value:
    if not isinstance(items, list):
        raise TypeError("no such overload: join")
    return celtypes.StringType(_string_arg(sep).join(_string_arg(i) for i in items))


def _list_arg(value: Any) -> Sequence[Any]:
    if not isinstance(value, list):
        raise TypeError(f"no such overload: {type(value).__name__}")
    return value


def _is_sorted(items: Any) -> celtypes.Value:
    values = _list_arg(items)
    return celtypes.BoolType(all(values[i] <= values[i + 1] for i in range(len(values) - 1)))


def _sum(items: Any) -> celtypes.Value:
    values = _list_arg(items)
    if not values:
        return celtypes.IntType(0)
    total = values[0]
    for v in values[1:]:
        total = total + v
    result: celtypes.Value = total
    return result


def _extreme(pick: Callable[[Any, Any], bool], name: str) -> Callable[..., Result]:
    def extreme(*args: Any) -> Result:
        values = _list_arg(args[0]) if len(args) == 1 else list(args)
        if not values:
            return CELEvalError(f"{name} called on empty list")
        best = values[0]
        for v in values[1:]:
            if pick(v, best):
                best = v
        result: celtypes.Value = best
        return result

    return extreme


def _dyn(value: Any) -> celtypes.Value:
    result: celtypes.Value = value
    return result


# Kubernetes' quantity library.

INT64 = range(-(2**63), 2**63)


@dataclass(frozen=True)
class QuantityValue:
    """CEL's ``Quantity``: ``quantity("64Gi")``; equal to another of the same amount
    (``quantity("1") == quantity("1000m")``)."""

    quantity: Quantity


def _quantity_arg(value: Any) -> Quantity:
    if not isinstance(value, QuantityValue):
        raise TypeError(f"no such overload: {type(value).__name__}")
    return value.quantity


def _operand(value: Any) -> Quantity:
    """A quantity, or an int as the quantity of that many units."""
    if isinstance(value, int) and not isinstance(value, bool):
        return Quantity.parse(int(value))
    return _quantity_arg(value)


def _parse_quantity(text: Any) -> Result:
    try:
        return QuantityValue(Quantity.parse(_string_arg(text)))  # type: ignore[return-value]
    except QuantityError as error:
        return CELEvalError(str(error))


def _as_integer(q: Any) -> Result:
    exact = _quantity_arg(q).as_fraction()
    if exact.denominator != 1 or exact.numerator not in INT64:
        return CELEvalError("cannot convert value to integer")
    return celtypes.IntType(exact.numerator)


def _is_integer(q: Any) -> celtypes.Value:
    exact = _quantity_arg(q).as_fraction()
    return celtypes.BoolType(exact.denominator == 1 and exact.numerator in INT64)


def _compare_quantities(a: Any, b: Any) -> int:
    left, right = _quantity_arg(a), _quantity_arg(b)
    return (left > right) - (left < right)


QUANTITY_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "quantity": _parse_quantity,
    "isQuantity": lambda text: celtypes.BoolType(
        not isinstance(_parse_quantity(text), CELEvalError)
    ),
    "sign": lambda q: celtypes.IntType(_compare_quantities(q, QuantityValue(Quantity.parse(0)))),
    "isInteger": _is_integer,
    "asInteger": _as_integer,
    "asApproximateFloat": lambda q: celtypes.DoubleType(float(_quantity_arg(q).as_fraction())),
    "add": lambda q, other: QuantityValue(_quantity_arg(q) + _operand(other)),
    "sub": lambda q, other: QuantityValue(_quantity_arg(q) - _operand(other)),
}
"""``quantity(string)``, ``isQuantity(string)``, and on a quantity ``sign``, ``isInteger``,
``asInteger``, ``asApproximateFloat``, ``add`` and ``sub`` (a quantity or an int)."""


def _compare(a: Any, b: Any) -> int:
    """Two quantities or two versions (``celsemver``) compared, by the kind of the first."""
    return celsemver.compare(a, b) if isinstance(a, celsemver.Semver) else _compare_quantities(a, b)


COMPARISONS: dict[str, Callable[..., Any]] = {
    "isLessThan": lambda a, b: celtypes.BoolType(_compare(a, b) < 0),
    "isGreaterThan": lambda a, b: celtypes.BoolType(_compare(a, b) > 0),
    "compareTo": lambda a, b: celtypes.IntType(_compare(a, b)),
}
"""The methods the quantity and semver libraries share: ``isLessThan``, ``isGreaterThan``,
``compareTo``."""


FUNCTIONS: dict[str, Callable[..., Any]] = {
    **{
        name: function
        for name, function in base_functions.items()
        if name.isidentifier() and callable(function)
    },
    "dyn": _dyn,
    "lowerAscii": _lower_ascii,
    "upperAscii": _upper_ascii,
    "trim": _trim,
    "replace": _replace,
    "split": _split,
    "substring": _substring,
    "charAt": _char_at,
    "indexOf": _index_of,
    "lastIndexOf": _last_index_of,
    "join": _join,
    "isSorted": _is_sorted,
    "sum": _sum,
    "min": _extreme(lambda a, b: a < b, "min"),
    "max": _extreme(lambda a, b: a > b, "max"),
    **QUANTITY_FUNCTIONS,
    **celsemver.FUNCTIONS,
    **COMPARISONS,
}
"""The functions every expression may call: celpy's standard library, the extensions above
and Kubernetes' semver library (upstream's base environment has it since 1.33)."""

RULES = Declarations(frozenset({SELF, OLD_SELF}), FUNCTIONS)
"""CRD validation rules: ``self`` and ``oldSelf``."""


# The authorizer library of admission expressions.


class AuthorizerValue(celtypes.MessageType):
    """CEL's ``authorizer``: checks the request's user may do something else.  Its one field,
    ``requestResource``, is a check of the resource the request is about."""

    def __init__(self, authorize: Authorizer, user: User, request: RequestInfo) -> None:
        super().__init__()
        self.authorize = authorize
        self.user = user
        # celpy carries any Python object as a value; the library's objects are opaque to it.
        self[celtypes.StringType("requestResource")] = cast(
            celtypes.Value,
            _Check(
                self,
                group=request.group,
                resource=request.resource,
                subresource=request.subresource,
                namespace=request.namespace,
                name=request.name,
                resource_check=True,
            ),
        )


@dataclass(frozen=True)
class _Check:
    """A path or resource check being built (``authorizer.group('apps').resource(...)``)."""

    authorizer: AuthorizerValue
    path: str = ""
    group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    resource_check: bool = False


@dataclass(frozen=True)
class _Decision:
    allowed: bool


def _builder(field: str, resource_check: bool) -> Callable[[Any, Any], _Check]:
    """The library function that sets one field of a check (``path``, ``group``, ...)."""

    def build(target: Any, value: Any) -> _Check:
        text = str(_string_arg(value))
        if isinstance(target, AuthorizerValue):
            target = _Check(target, resource_check=resource_check)
        if not isinstance(target, _Check):
            raise TypeError("no such overload")
        changes: dict[str, Any] = {field: text, "resource_check": resource_check}
        return dataclasses.replace(target, **changes)

    return build


def _authz_check(target: Any, verb: Any) -> _Decision:
    if not isinstance(target, _Check):
        raise TypeError("no such overload")
    asked = RequestInfo(
        path=target.path,
        verb=str(_string_arg(verb)),
        is_resource_request=target.resource_check,
        group=target.group,
        resource=target.resource,
        subresource=target.subresource,
        namespace=target.namespace,
        name=target.name,
    )
    return _Decision(target.authorizer.authorize(target.authorizer.user, asked))


def _decision(read: Callable[[_Decision], celtypes.Value]) -> Callable[[Any], celtypes.Value]:
    def function(target: Any) -> celtypes.Value:
        if not isinstance(target, _Decision):
            raise TypeError("no such overload")
        return read(target)

    return function


def _service_account(target: Any, namespace: Any, name: Any) -> AuthorizerValue:
    if not isinstance(target, AuthorizerValue):
        raise TypeError("no such overload")
    ns, account = str(_string_arg(namespace)), str(_string_arg(name))
    user = User(
        f"system:serviceaccount:{ns}:{account}",
        ("system:serviceaccounts", f"system:serviceaccounts:{ns}", "system:authenticated"),
    )
    return AuthorizerValue(target.authorize, user, RequestInfo(path="", verb=""))


def _equality(negate: bool) -> Callable[[Any, Any], Any]:
    """``==`` / ``!=`` where either side may be null (``object != null``: a DELETE's object
    is null), which celpy's own operators refuse as an overload it lacks."""
    compare = base_functions["_!=_" if negate else "_==_"]

    def equal(left: Any, right: Any) -> Any:
        if left is None or right is None:
            return celtypes.BoolType((left is right) != negate)
        return compare(left, right)

    return equal


ADMISSION = Declarations(
    frozenset({"object", "oldObject", "request", "authorizer"}),
    {
        **FUNCTIONS,
        "_==_": _equality(False),
        "_!=_": _equality(True),
        "path": _builder("path", False),
        "group": _builder("group", True),
        "resource": _builder("resource", True),
        "subresource": _builder("subresource", True),
        "namespace": _builder("namespace", True),
        "name": _builder("name", True),
        "check": _authz_check,
        "allowed": _decision(lambda d: celtypes.BoolType(d.allowed)),
        "reason": _decision(lambda d: celtypes.StringType("")),
        "errored": _decision(lambda d: celtypes.BoolType(False)),
        "error": _decision(lambda d: celtypes.StringType("")),
        "serviceAccount": _service_account,
    },
)
"""Admission expressions (webhooks' ``matchConditions``): ``object``, ``oldObject`` and
``request`` (the AdmissionRequest, as JSON), and ``authorizer``, upstream's authorization
library: ``authorizer.group(g).resource(r).namespace(n).name(x).check(verb).allowed()``,
``authorizer.path(p).check(verb)``, ``authorizer.requestResource.check(verb)`` and
``authorizer.serviceAccount(namespace, name)``; the decisions' ``reason()`` and ``error()``
are empty, since this server's authorizers give none.  Unlike in CRD rules, anything may be
compared with ``null``."""


POLICY = Declarations(
    ADMISSION.variables | {"params", "namespaceObject", "variables"}, ADMISSION.functions
)
"""ValidatingAdmissionPolicy expressions: the admission ones, and ``params`` (the binding's
parameter object, or null), ``namespaceObject`` (the request's Namespace, or null) and
``variables`` (the policy's variables, each evaluated when first read)."""


COMPATIBILITY_VERSION = (1, 35)
"""The Kubernetes version whose CEL libraries an expression written anew may use: upstream
1.36's minimum compatibility version (its ``DefaultCompatibilityVersion``)."""
VERSIONED_LIBRARIES: dict[tuple[int, int], Mapping[str, Callable[..., Any]]] = {
    (1, 28): QUANTITY_FUNCTIONS,
    (1, 33): celsemver.FUNCTIONS,
}
"""The libraries this module has that upstream's base environment adds after 1.27, by the
version that added them (the others are older than any compatibility version 1.36 has)."""


@functools.cache
def admission_declarations(
    base: Declarations,
    params: bool,
    authorizer: bool,
    composition: bool,
    compatibility: tuple[int, int] | None,
) -> Declarations:
    """``base`` (``ADMISSION`` or ``POLICY``) without what the expression's field does not
    declare: ``params`` without a paramKind, ``authorizer`` in a messageExpression,
    ``variables`` in a policy without any; and without the libraries added after
    ``compatibility`` (None: a stored expression, which may use all)."""
    left_out = {
        name
        for name, declared in (
            ("params", params),
            ("authorizer", authorizer),
            ("variables", composition),
        )
        if not declared
    }
    too_new = {
        name
        for version, library in VERSIONED_LIBRARIES.items()
        if compatibility is not None and version > compatibility
        for name in library
    }
    kept = {
        name
        for version, library in VERSIONED_LIBRARIES.items()
        if compatibility is None or version <= compatibility
        for name in library
    }
    functions = {k: f for k, f in base.functions.items() if k not in too_new - kept}
    return Declarations(base.variables - left_out, functions)


DEVICE_SELECTOR = Declarations(frozenset({"device"}), FUNCTIONS)
"""DRA device selectors (DeviceClass, ResourceClaim requests): ``device``, with its
``driver``, ``attributes`` and ``capacity`` (the last are quantities: ``compareTo``).  They are
compiled when written; this cluster has no DRA allocator that evaluates them."""


# Mutating admission policies: building apply configurations and JSON patches.


class TypeName(celtypes.MessageType):
    """An object type a mutation builds (``Object``, ``Object.spec``, ``JSONPatch``): a field
    selection names a nested type, and ``Name{field: value, ...}`` (which celpy evaluates as a
    call) builds a value of it.  Values are untyped here: a field the kind does not have is
    refused when the result is decoded, not when the expression is compiled."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name

    def get(self, key: Any, default: Any = None) -> TypeName:
        return TypeName(f"{self.name}.{key}")

    def __call__(self, fields: Any = None) -> ObjectValue:
        return ObjectValue(self.name, {str(k): v for k, v in (fields or {}).items()})


class ObjectValue(celtypes.MessageType):
    """A value a mutation built, which remembers the type name it was built as."""

    def __init__(self, type_name: str, fields: Mapping[str, Any]) -> None:
        super().__init__(**fields)
        self.type_name = type_name


def apply_configuration(value: Any) -> dict[str, Any]:
    """An ApplyConfiguration expression's result as JSON: an ``Object{...}`` whose nested
    object types follow its field names (``Object.spec`` under ``spec``, as upstream checks
    them), else ``EvaluationError`` in upstream's words."""
    if not isinstance(value, ObjectValue) or value.type_name != "Object":
        got = value.type_name if isinstance(value, ObjectValue) else _cel_type_name(value)
        raise EvaluationError(f"must evaluate to Object but got {got}")
    _check_type_names(value)
    converted = to_json(value)
    assert isinstance(converted, dict)
    return converted


def json_patch(value: Any) -> list[dict[str, Any]]:
    """A JSONPatch expression's result as RFC 6902 operations: a list of ``JSONPatch{op, path,
    from, value}``, object values' type names following their field names, else
    ``EvaluationError`` in upstream's words."""
    if not isinstance(value, list):
        raise EvaluationError("type mismatch: JSONPatchType.expression should evaluate to array")
    operations = []
    for item in value:
        if not isinstance(item, ObjectValue) or item.type_name != "JSONPatch":
            raise EvaluationError(
                "type mismatch: JSONPatchType.expression should evaluate to array of JSONPatch"
            )
        for name, member in item.items():  # (celpy's MessageType.get raises when absent)
            if name == "value" and isinstance(member, ObjectValue):
                _check_type_names(member)
        operation = to_json(item)
        assert isinstance(operation, dict)
        operations.append(operation)
    return operations


def _check_type_names(value: ObjectValue) -> None:
    for name, member in value.items():
        expected = value.type_name + "." + str(name)
        members = member if isinstance(member, list) else [member]
        for item in members:
            if not isinstance(item, ObjectValue):
                continue
            if item.type_name != expected:
                raise EvaluationError(
                    f'type mismatch: unexpected type name "{item.type_name}", expected '
                    f'"{expected}", which matches field name path from root Object type'
                )
            _check_type_names(item)


def _cel_type_name(value: Any) -> str:
    """CEL's name of a value's type (for messages)."""
    names = {
        celtypes.BoolType: "bool",
        celtypes.IntType: "int",
        celtypes.UintType: "uint",
        celtypes.DoubleType: "double",
        celtypes.StringType: "string",
        celtypes.BytesType: "bytes",
        celtypes.ListType: "list",
        celtypes.MapType: "map",
    }
    if value is None:
        return "null_type"
    return next((n for t, n in names.items() if isinstance(value, t)), type(value).__name__)


def _escape_key(target: Any, key: Any) -> celtypes.Value:
    """``jsonpatch.escapeKey``: a map key as one JSON pointer token (RFC 6901)."""
    return celtypes.StringType(str(_string_arg(key)).replace("~", "~0").replace("/", "~1"))


def to_json(value: Any) -> Any:
    """A CEL value as plain JSON (what a mutation built, to merge or apply as a patch)."""
    if value is None or isinstance(value, celtypes.BoolType):
        return None if value is None else bool(value)
    if isinstance(value, celtypes.IntType | celtypes.UintType):
        return int(value)
    if isinstance(value, celtypes.DoubleType):
        return float(value)
    if isinstance(value, celtypes.BytesType):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, celtypes.TimestampType):
        return value.strftime("%Y-%m-%dT%H:%M:%SZ")
    if isinstance(value, str):
        return str(value)
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_json(v) for v in value]
    raise EvaluationError(f"cannot convert {type(value).__name__} to JSON")


MUTATION = Declarations(
    POLICY.variables | {"Object", "JSONPatch", "jsonpatch"},
    {**POLICY.functions, "escapeKey": _escape_key},
)
"""MutatingAdmissionPolicy mutations: the policy variables, and ``Object`` (the root of an
apply configuration), ``JSONPatch`` (one patch operation) and ``jsonpatch.escapeKey``."""


def mutation_variables() -> dict[str, celtypes.Value]:
    """The values of ``MUTATION``'s type names (to add to a policy's variables)."""
    return {
        "Object": TypeName("Object"),
        "JSONPatch": TypeName("JSONPatch"),
        "jsonpatch": TypeName("jsonpatch"),
    }


# CRD, DRA and admission validation compile with this module (kube.api cannot import it);
# admission expressions are type-checked too, by celcheck, which imports this module.
from controlplane.apiserver.crd import celcheck  # noqa: E402

expressions.use_compiler(Environment.CRD_RULE, lambda text, scope: compile_problem(text))
expressions.use_compiler(
    Environment.DEVICE_SELECTOR, lambda text, scope: compile_problem(text, DEVICE_SELECTOR)
)
expressions.use_compiler(
    Environment.MATCH_CONDITION,
    lambda text, scope: celcheck.admission_problem(text, ADMISSION, scope),
)
expressions.use_compiler(
    Environment.POLICY, lambda text, scope: celcheck.admission_problem(text, POLICY, scope)
)
expressions.use_compiler(
    Environment.MUTATION, lambda text, scope: celcheck.admission_problem(text, MUTATION, scope)
)
