"""Server-side field validation of request bodies against the kind schemas.

`check(obj, schema)` walks a decoded JSON body alongside its schema and reports unknown fields
(`spec.containers[0].foo`) and values of the wrong JSON type, and, where a schema declares them as a
CRD's structural schema does, values its OpenAPI value validations refuse (`minItems`, `maxItems`,
`minLength`, `maxLength`, `pattern`, `minimum`, `enum`) and missing fields it requires (only in an
object marked `x-devcluster-required`: the built-in kinds' `required` lists document the API and are
not enforced here), and two rules a CRD writes in CEL, declared here as `x-devcluster-unique` (no
two items of a list equal) and `x-devcluster-last-only` (an item whose field has a value only last).
The server refuses those with a 422 Invalid, as the API server does. The server applies the
request's `fieldValidation` directive: Strict refuses unknown fields (422 naming them), Warn drops
them and answers a `Warning` header, Ignore drops them silently. Subtrees marked
`x-kubernetes-preserve-unknown-fields` are accepted as written.

Pure: no I/O; it reads the body and, only when something must be dropped, returns a pruned copy.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from devcluster.schemas import Schema


class Findings(msgspec.Struct):
    unknown: list[str] = msgspec.field(default_factory=list)
    wrong_type: list[tuple[str, str]] = msgspec.field(default_factory=list)
    invalid: list[tuple[str, str, str]] = msgspec.field(default_factory=list)  # (reason, field, message)


_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
}


def _type_ok(value: Any, schema: Schema) -> tuple[bool, str]:
    if value is None:
        return True, ""
    if schema.get("format") == "quantity":  # decoded by the server, which accepts a JSON number too
        return (isinstance(value, (int, float, str)) and not isinstance(value, bool)), "quantity"
    if schema.get("x-kubernetes-int-or-string"):
        return (isinstance(value, (int, str)) and not isinstance(value, bool)), "integer or string"
    expected = schema.get("type")
    if expected is None:
        return True, ""
    types = _TYPES[expected]
    if expected in ("integer", "number") and isinstance(value, bool):
        return False, expected
    if expected == "integer" and isinstance(value, float) and value.is_integer():
        return True, ""
    return isinstance(value, types), expected


def _describe(value: Any) -> str:
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, str):
        return "string"
    return "number"


def _shown(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str) else str(value)


_PATTERNS: dict[str, re.Pattern[str]] = {}
_STRING_RULES = frozenset({"enum", "minLength", "maxLength", "pattern"})  # a string without them is fine as is


def _values(value: Any, schema: Schema, path: str, out: Findings) -> None:
    """The OpenAPI value validations a CRD's schema may declare, worded as the API server words them."""
    field = path or "."
    if "enum" in schema and value not in schema["enum"]:
        supported = ", ".join(_shown(v) for v in schema["enum"])
        out.invalid.append(("FieldValueNotSupported", field,
                            f"Unsupported value: {_shown(value)}: supported values: {supported}"))
    if isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            out.invalid.append(("FieldValueInvalid", field, f"Invalid value: {_shown(value)}: {field} in body "
                                f"should be at least {schema['minLength']} chars long"))
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            out.invalid.append(("FieldValueTooLong", field,
                                f"Too long: may not be more than {schema['maxLength']} bytes"))
        if "pattern" in schema:
            pattern = _PATTERNS.get(schema["pattern"])
            if pattern is None:
                pattern = _PATTERNS[schema["pattern"]] = re.compile(schema["pattern"])
            if pattern.search(value) is None:
                shown = value if len(value) <= 64 else value[:64] + "..."
                out.invalid.append(("FieldValueInvalid", field, f'Invalid value: "{shown}": {field} in body '
                                    f"should match '{schema['pattern']}'"))
    elif isinstance(value, int) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            out.invalid.append(("FieldValueInvalid", field, f"Invalid value: {value}: {field} in body should be "
                                f"greater than or equal to {schema['minimum']}"))
    elif isinstance(value, list):
        if schema.get("x-devcluster-unique") and any(item in value[:index] for index, item in enumerate(value)):
            out.invalid.append(("FieldValueInvalid", field, 'Invalid value: "array": must be unique'))
        last_only = schema.get("x-devcluster-last-only")
        if last_only and any(isinstance(item, dict) and item.get(last_only["field"]) == last_only["value"]
                             for item in value[:-1]):
            out.invalid.append(("FieldValueInvalid", field, f'Invalid value: "array": {last_only["message"]}'))
        if "minItems" in schema and len(value) < schema["minItems"]:
            out.invalid.append(("FieldValueInvalid", field, f"Invalid value: {len(value)}: {field} in body "
                                f"should have at least {schema['minItems']} items"))
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            out.invalid.append(("FieldValueTooMany", field,
                                f"Too many: {len(value)}: must have at most {schema['maxItems']} items"))
    elif isinstance(value, dict) and schema.get("x-devcluster-required"):
        for name in schema.get("required", ()):
            if value.get(name) is None:
                out.invalid.append(("FieldValueRequired", f"{path}.{name}" if path else name, "Required value"))


def _walk(value: Any, schema: Schema, path: str, out: Findings) -> None:
    ok, expected = _type_ok(value, schema)
    if not ok:
        out.wrong_type.append((path or ".", f"expected {expected}, got {_describe(value)}"))
        return
    if value is None or schema.get("x-kubernetes-preserve-unknown-fields"):
        return
    _values(value, schema, path, out)
    if isinstance(value, dict):
        properties: dict[str, Schema] | None = schema.get("properties")
        additional: Schema | None = schema.get("additionalProperties")
        if properties is not None:
            for key, child in value.items():
                sub = properties.get(key)
                if sub is None:
                    out.unknown.append(f"{path}.{key}" if path else key)
                elif type(child) is not str or sub.get("type") != "string" or not _STRING_RULES.isdisjoint(sub):
                    _walk(child, sub, f"{path}.{key}" if path else key, out)
        elif additional is not None:
            for key, child in value.items():
                _walk(child, additional, f"{path}[{key}]" if path else key, out)
    elif isinstance(value, list):
        items: Schema | None = schema.get("items")
        if items is not None:
            for index, child in enumerate(value):
                _walk(child, items, f"{path}[{index}]", out)


def check(obj: dict[str, Any], schema: Schema) -> Findings:
    """Unknown fields and type mismatches of `obj` under `schema` (empty findings: valid)."""
    findings = Findings()
    _walk(obj, schema, "", findings)
    return findings


def _prune(value: Any, schema: Schema) -> Any:
    if not isinstance(value, (dict, list)) or schema.get("x-kubernetes-preserve-unknown-fields"):
        return value
    if isinstance(value, list):
        items = schema.get("items")
        return [_prune(v, items) for v in value] if items is not None else value
    properties: dict[str, Schema] | None = schema.get("properties")
    if properties is not None:
        return {k: _prune(v, properties[k]) for k, v in value.items() if k in properties}
    additional = schema.get("additionalProperties")
    if additional is not None:
        return {k: _prune(v, additional) for k, v in value.items()}
    return value


def prune(obj: dict[str, Any], schema: Schema) -> dict[str, Any]:
    """A copy of `obj` without the fields `schema` does not declare."""
    pruned: dict[str, Any] = _prune(obj, schema)
    return pruned
