"""The three patch formats of the Kubernetes API, applied to plain JSON values.

- JSON merge patch (RFC 7386, `application/merge-patch+json`): objects merge, `null` deletes, lists replace.
- JSON patch (RFC 6902, `application/json-patch+json`): add, remove, replace, move, copy, test.
- Strategic merge patch (`application/strategic-merge-patch+json`): a merge patch in which lists whose
  schema names an `x-kubernetes-patch-merge-key` (pod conditions by `type`, containers by `name`, ...)
  merge item by item, `$patch: delete|replace` directives apply, `$setElementOrder/...`,
  `$retainKeys` and `$deleteFromPrimitiveList/...` directives are honoured, and lists with
  strategy `merge` but no key (finalizers) merge as sets.

Pure: inputs are never mutated; results share untouched subtrees with the original. Errors are
`ApiError`s (422 for a patch that cannot apply, as the real server).
"""

from __future__ import annotations

import copy
from typing import Any

from devcluster.errors import ApiError
from devcluster.schemas import Schema, child_schema


def _cannot(message: str) -> ApiError:
    return ApiError(422, "Invalid", message)


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return patch
    result: dict[str, Any] = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


# --------------------------------------------------------------------------- JSON patch


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _split(pointer: str) -> list[str]:
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise _cannot(f'invalid JSON pointer "{pointer}"')
    return [_unescape(t) for t in pointer[1:].split("/")]


def _index(container: list[Any], token: str, for_add: bool) -> int:
    if token == "-" and for_add:
        return len(container)
    if not token.isdigit():
        raise _cannot(f'invalid array index "{token}"')
    index = int(token)
    if index > len(container) or (index == len(container) and not for_add):
        raise _cannot(f"array index {index} out of bounds")
    return index


def _get(doc: Any, tokens: list[str]) -> Any:
    for token in tokens:
        if isinstance(doc, dict):
            if token not in doc:
                raise _cannot(f'doc is missing path: "/{"/".join(tokens)}"')
            doc = doc[token]
        elif isinstance(doc, list):
            doc = doc[_index(doc, token, False)]
        else:
            raise _cannot(f'doc is missing path: "/{"/".join(tokens)}"')
    return doc


def _parent(doc: Any, tokens: list[str]) -> Any:
    parent = _get(doc, tokens[:-1])
    if not isinstance(parent, (dict, list)):
        raise _cannot(f'doc is missing path: "/{"/".join(tokens)}"')
    return parent


def _add(doc: Any, tokens: list[str], value: Any) -> Any:
    if not tokens:
        return value
    parent = _parent(doc, tokens)
    if isinstance(parent, dict):
        parent[tokens[-1]] = value
    else:
        parent.insert(_index(parent, tokens[-1], True), value)
    return doc


def _remove(doc: Any, tokens: list[str]) -> tuple[Any, Any]:
    if not tokens:
        raise _cannot("cannot remove the whole document")
    parent = _parent(doc, tokens)
    if isinstance(parent, dict):
        if tokens[-1] not in parent:
            raise _cannot(f'unable to remove nonexistent key: {tokens[-1]}: missing value')
        return doc, parent.pop(tokens[-1])
    return doc, parent.pop(_index(parent, tokens[-1], False))


def json_patch(target: Any, operations: Any) -> Any:
    if not isinstance(operations, list):
        raise ApiError(400, "BadRequest", "json patch must be a JSON array of operations")
    doc = copy.deepcopy(target)
    for operation in operations:
        if not isinstance(operation, dict) or "op" not in operation or "path" not in operation:
            raise _cannot(f"invalid JSON patch operation: {operation}")
        op = operation["op"]
        tokens = _split(str(operation["path"]))
        if op == "add":
            doc = _add(doc, tokens, copy.deepcopy(operation.get("value")))
        elif op == "remove":
            doc, _ = _remove(doc, tokens)
        elif op == "replace":
            _get(doc, tokens)
            if tokens:
                doc, _ = _remove(doc, tokens)
            doc = _add(doc, tokens, copy.deepcopy(operation.get("value")))
        elif op in ("move", "copy"):
            source = _split(str(operation.get("from", "")))
            if op == "move":
                doc, value = _remove(doc, source)
            else:
                value = copy.deepcopy(_get(doc, source))
            doc = _add(doc, tokens, value)
        elif op == "test":
            if _get(doc, tokens) != operation.get("value"):
                raise _cannot(f'testing value /{"/".join(tokens)} failed: test failed')
        else:
            raise _cannot(f'Unexpected kind: {op}')
    return doc


# --------------------------------------------------------------------------- strategic merge patch

_ORDER = "$setElementOrder/"
_DELETE_PRIMITIVE = "$deleteFromPrimitiveList/"


def _merge_list(current: Any, patch: list[Any], schema: Schema | None) -> Any:
    merge_key = schema.get("x-kubernetes-patch-merge-key") if schema else None
    strategy = schema.get("x-kubernetes-patch-strategy", "") if schema else ""
    if "merge" not in strategy:
        return [item for item in patch if not (isinstance(item, dict) and item.get("$patch"))]
    existing: list[Any] = list(current) if isinstance(current, list) else []
    if any(isinstance(item, dict) and item.get("$patch") == "replace" for item in patch):
        return [item for item in patch if not (isinstance(item, dict) and "$patch" in item)]
    if not merge_key:
        for item in patch:
            if item not in existing:
                existing.append(item)
        return existing
    items_schema = schema.get("items") if schema else None
    for item in patch:
        if not isinstance(item, dict) or merge_key not in item:
            raise _cannot(f"map: {item} does not contain declared merge key: {merge_key}")
        position = next((i for i, e in enumerate(existing)
                         if isinstance(e, dict) and e.get(merge_key) == item[merge_key]), None)
        if item.get("$patch") == "delete":
            if position is not None:
                existing.pop(position)
        elif position is None:
            existing.append(strategic_merge(None, item, items_schema))
        else:
            existing[position] = strategic_merge(existing[position], item, items_schema)
    return existing


def _reorder(items: list[Any], order: list[Any], merge_key: str | None) -> list[Any]:
    def key(item: Any) -> Any:
        return item.get(merge_key) if merge_key and isinstance(item, dict) else item

    rank = {msg_key: i for i, msg_key in enumerate(key(o) for o in order if key(o) is not None)}
    listed = sorted((i for i in items if key(i) in rank), key=lambda i: rank[key(i)])
    return listed + [i for i in items if key(i) not in rank]


def strategic_merge(target: Any, patch: Any, schema: Schema | None) -> Any:
    """Apply a strategic merge patch; `schema` gives list merge keys (None: plain merge patch)."""
    if not isinstance(patch, dict):
        return patch
    if patch.get("$patch") == "replace":
        return {k: v for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    result: dict[str, Any] = dict(target) if isinstance(target, dict) else {}
    retain = patch.get("$retainKeys")
    orders: dict[str, list[Any]] = {}
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys"):
            continue
        if key.startswith(_ORDER):
            if isinstance(value, list):
                orders[key[len(_ORDER):]] = value
            continue
        if key.startswith(_DELETE_PRIMITIVE):
            name = key[len(_DELETE_PRIMITIVE):]
            if isinstance(result.get(name), list) and isinstance(value, list):
                result[name] = [v for v in result[name] if v not in value]
            continue
        sub = child_schema(schema, key)
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list):
            result[key] = _merge_list(result.get(key), value, sub)
        elif isinstance(value, dict):
            merged = strategic_merge(result.get(key), value, sub)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        else:
            result[key] = value
    for key, order in orders.items():
        if isinstance(result.get(key), list):
            sub = child_schema(schema, key)
            merge_key = sub.get("x-kubernetes-patch-merge-key") if sub else None
            result[key] = _reorder(result[key], order, merge_key)
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result
