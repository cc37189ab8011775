"""Server-side apply and field management: who owns which field of an object, and merging what they apply.

`PATCH` with `application/apply-patch+yaml` (what `kubectl apply --server-side` sends) carries an
*applied configuration*: the fields the manager (`?fieldManager=`) wants, with the values it wants.
As structured-merge-diff does it in kube-apiserver:

- The fields of an object are paths: `f:<name>` for a map field, `k:{"name":"main"}` for an item of
  a list merged by key (the schema's `x-kubernetes-patch-merge-key`, e.g. containers by name), `v:<json>`
  for a value of a set-like list (finalizers); other lists are atomic, owned as a whole. An item is
  owned itself (`.`) as well as by its fields. `metadata.managedFields` lists each manager's set as
  `fieldsV1`, with its operation (`Apply` or `Update`), apiVersion, time and subresource.
- An apply sets every field of the configuration. A field another manager owns with a different value
  is a conflict: 409, one cause per field (`conflict with "kubectl-edit" using v1`), unless
  `force=true`, which takes the field over. Managers agreeing on a value share it.
- A field the manager applied before but no longer does is removed from the object, unless another
  manager owns it too.
- Any other write (`Update`) to an object with managed fields gives the writer the fields it changed
  and takes them from the others, without conflicts.

devcluster keeps field management only on objects that have it (created or touched by an apply, or
written with `managedFields`): plain creates and updates of other objects record none, which keeps the
hot paths (pods created and bound by the thousands) as cheap as before. Pure: no I/O; the time is an
argument.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from devcluster import errors
from devcluster.schemas import Schema, child_schema

Obj = dict[str, Any]
Element = tuple[str, str]  # ("f", name) | ("k", '{"name":"main"}') | ("v", '"x"') | (".", "")
Path = tuple[Element, ...]
_ITEM: Element = (".", "")
APPLY = "Apply"
UPDATE = "Update"
IGNORED = frozenset({"apiVersion", "kind"})
IGNORED_META = frozenset({"managedFields", "resourceVersion", "uid", "creationTimestamp", "generation",
                          "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"})


# --------------------------------------------------------------------------- schema helpers


def _list_keys(schema: Schema | None) -> tuple[str, ...] | None:
    """The merge keys of an associative list, () for a set-like list, None for an atomic one."""
    if schema is None:
        return None
    keys = schema.get("x-kubernetes-list-map-keys")
    if keys:
        return tuple(keys)
    key = schema.get("x-kubernetes-patch-merge-key")
    if key:
        return (str(key),)
    if "merge" in str(schema.get("x-kubernetes-patch-strategy", "")) or schema.get("x-kubernetes-list-type") == "set":
        return ()
    return None


def _key_of(item: Any, keys: tuple[str, ...]) -> str | None:
    if not isinstance(item, dict) or any(k not in item for k in keys):
        return None
    return json.dumps({k: item[k] for k in keys}, sort_keys=True, separators=(",", ":"))


# --------------------------------------------------------------------------- field sets


def _walk(value: Any, schema: Schema | None, prefix: Path, out: set[Path]) -> None:
    if isinstance(value, dict) and value:
        if schema is not None and "additionalProperties" in schema and "properties" not in schema and prefix:
            out.add((*prefix, _ITEM))  # a map (labels, ...) is owned as such too
        for key, child in value.items():
            if child is None:
                continue
            _walk(child, child_schema(schema, key), (*prefix, ("f", key)), out)
        return
    if isinstance(value, list) and value:
        items = schema.get("items") if schema is not None else None
        keys = _list_keys(schema)
        if keys is None:
            out.add(prefix)
            return
        for item in value:
            if not keys:
                out.add((*prefix, ("v", json.dumps(item, sort_keys=True, separators=(",", ":")))))
                continue
            key = _key_of(item, keys)
            if key is None:  # an item without its key: the list cannot be merged, own it whole
                out.add(prefix)
                return
            path = (*prefix, ("k", key))
            out.add((*path, _ITEM))
            _walk(item, items, path, out)
        return
    out.add(prefix)


def field_set(obj: Obj, schema: Schema | None) -> set[Path]:
    """Every field path `obj` sets (apiVersion, kind and server-owned metadata aside)."""
    out: set[Path] = set()
    for key, value in obj.items():
        if key in IGNORED or value is None:
            continue
        child = child_schema(schema, key)
        if key == "metadata" and isinstance(value, dict):
            value = {k: v for k, v in value.items() if k not in IGNORED_META and k not in ("name", "namespace")}
            if not value:
                continue
        _walk(value, child, (("f", key),), out)
    return out


def to_fields_v1(paths: Iterable[Path]) -> Obj:
    root: Obj = {}
    for path in sorted(paths):
        node = root
        for kind, value in path:
            name = "." if kind == "." else f"{kind}:{value}"
            node = node.setdefault(name, {})
    return root


def from_fields_v1(fields: Any) -> set[Path]:
    out: set[Path] = set()

    def walk(node: Any, prefix: Path) -> None:
        if not isinstance(node, dict) or not node:
            if prefix:
                out.add(prefix)
            return
        for name, child in node.items():
            if name == ".":
                out.add((*prefix, _ITEM))
                continue
            kind, _, value = str(name).partition(":")
            walk(child, (*prefix, (kind, value)))

    walk(fields, ())
    return out


def path_text(path: Path) -> str:
    """structured-merge-diff's rendering: `.spec.containers[name="main"].image`, `.metadata.finalizers[="x"]`."""
    text = ""
    for kind, value in path:
        if kind == "f":
            text += f".{value}"
        elif kind == "k":
            text += "[" + ",".join(f"{k}={json.dumps(v)}" for k, v in json.loads(value).items()) + "]"
        elif kind == "v":
            text += f"[={value}]"
    return text


# --------------------------------------------------------------------------- reading and writing paths


_MISSING = object()


def _find(container: Any, element: Element) -> Any:
    kind, value = element
    if kind == "f":
        return container.get(value, _MISSING) if isinstance(container, dict) else _MISSING
    if kind == "k" and isinstance(container, list):
        wanted = json.loads(value)
        for item in container:
            if isinstance(item, dict) and all(item.get(k) == v for k, v in wanted.items()):
                return item
        return _MISSING
    if kind == "v" and isinstance(container, list):
        decoded = json.loads(value)
        return decoded if decoded in container else _MISSING
    return _MISSING


def value_at(obj: Any, path: Path) -> Any:
    node = obj
    for element in path:
        if element == _ITEM:
            return node
        node = _find(node, element)
        if node is _MISSING:
            return _MISSING
    return node


def _remove(obj: Any, path: Path) -> Any:
    """`obj` without the field at `path` (copies along the path; empty maps left behind are dropped)."""
    if path and path[-1] == _ITEM:
        path = path[:-1]
    if not path:
        return obj
    head, rest = path[0], path[1:]
    kind, value = head
    if isinstance(obj, dict) and kind == "f" and value in obj:
        if not rest:
            return {k: v for k, v in obj.items() if k != value}
        child = _remove(obj[value], rest)
        if child == {} and obj[value] != {}:
            return {k: v for k, v in obj.items() if k != value}
        return {**obj, value: child}
    if isinstance(obj, list) and kind in ("k", "v"):
        target = _find(obj, head)
        if target is _MISSING:
            return obj
        index = next(i for i, item in enumerate(obj) if item is target or (kind == "v" and item == target))
        if not rest:
            return obj[:index] + obj[index + 1:]
        return [*obj[:index], _remove(obj[index], rest), *obj[index + 1:]]
    return obj


def merge(current: Any, applied: Any, schema: Schema | None) -> Any:
    """`applied` merged into `current`: maps field by field, keyed lists item by item, sets as sets, the rest
    replaced."""
    if isinstance(applied, dict):
        result = dict(current) if isinstance(current, dict) else {}
        for key, value in applied.items():
            if value is None:
                result.pop(key, None)
            else:
                result[key] = merge(result.get(key), value, child_schema(schema, key))
        return result
    if isinstance(applied, list):
        keys = _list_keys(schema)
        if keys is None or not isinstance(current, list):
            return applied
        if not keys:
            return list(current) + [item for item in applied if item not in current]
        items = schema.get("items") if schema is not None else None
        result_list = list(current)
        for item in applied:
            key = _key_of(item, keys)
            position = next((i for i, old in enumerate(result_list) if key is not None and _key_of(old, keys) == key),
                            None)
            if position is None:
                result_list.append(item)
            else:
                result_list[position] = merge(result_list[position], item, items)
        return result_list
    return applied


# --------------------------------------------------------------------------- managers


def _entries(obj: Obj) -> list[Obj]:
    meta = obj.get("metadata")
    entries = meta.get("managedFields") if isinstance(meta, dict) else None
    return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []


def _entry_key(entry: Obj) -> tuple[str, str, str]:
    return str(entry.get("manager", "")), str(entry.get("operation", "")), str(entry.get("subresource", ""))


def _owners(obj: Obj) -> dict[tuple[str, str, str], tuple[Obj, set[Path]]]:
    return {_entry_key(e): (e, from_fields_v1(e.get("fieldsV1"))) for e in _entries(obj)}


def _entries_of(owners: dict[tuple[str, str, str], tuple[Obj, set[Path]]], changed: dict[tuple[str, str, str], Obj],
                ) -> list[Obj]:
    result = []
    for key, (entry, paths) in owners.items():
        if not paths:
            continue  # a manager that owns nothing any more is dropped
        if key in changed:
            entry = changed[key]
        result.append({**entry, "fieldsType": "FieldsV1", "fieldsV1": to_fields_v1(paths)})
    return result


def _manager_name(key: tuple[str, str, str], entry: Obj) -> str:
    manager, operation, _ = key
    if operation == UPDATE:
        return f'"{manager}" using {entry.get("apiVersion", "")}'
    return f'"{manager}"'


def _conflict(kind: str, group: str, name: str, conflicts: list[tuple[str, Path]]) -> errors.ApiError:
    causes = [{"reason": "FieldManagerConflict", "message": f"conflict with {manager}", "field": path_text(path)}
              for manager, path in conflicts]
    if len(conflicts) == 1:
        manager, path = conflicts[0]
        message = f"Apply failed with 1 conflict: conflict with {manager}: {path_text(path)}"
    else:
        by_manager: dict[str, list[str]] = {}
        for manager, path in conflicts:
            by_manager.setdefault(manager, []).append(path_text(path))
        lines = [line for manager in sorted(by_manager)
                 for line in (f"conflicts with {manager}:", *(f"- {p}" for p in by_manager[manager]))]
        message = f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(lines)
    details: Obj = {"name": name, "kind": kind, "causes": causes}
    if group:
        details["group"] = group
    return errors.ApiError(409, "Conflict", message, details)


def _removals(dropped: set[Path], others: set[Path]) -> list[Path]:
    """The fields to delete when a manager stops applying `dropped`: those that nobody else owns, nor anything
    under them; an item or a map once as a whole rather than field by field (its key fields find it)."""
    gone: set[Path] = set()
    for path in dropped:
        target = path[:-1] if path[-1:] == (_ITEM,) else path
        if not any(other[:len(target)] == target for other in others):
            gone.add(target)
    return sorted((p for p in gone if not any(p[:n] in gone for n in range(1, len(p)))), key=len, reverse=True)


def apply(current: Obj | None, applied: Obj, *, manager: str, force: bool, schema: Schema | None,
          api_version: str, kind: str, group: str, now: str) -> Obj:
    """The object after `manager` applies `applied` to `current` (None: it does not exist yet), with its
    managedFields; ApiError 409 on conflicts unless `force`."""
    base: Obj = current if current is not None else {}
    name = str((applied.get("metadata") or {}).get("name") or "")
    wanted = field_set(applied, schema)
    owners = _owners(base)
    me = (manager, APPLY, "")
    previous = owners.get(me, ({}, set()))[1]
    conflicts: list[tuple[str, Path]] = []
    taken: dict[tuple[str, str, str], set[Path]] = {}
    for key, (entry, paths) in owners.items():
        if key == me:
            continue
        for path in wanted & paths:
            if path[-1:] == (_ITEM,) or value_at(base, path) == value_at(applied, path):
                continue  # the same value: ownership is shared
            conflicts.append((_manager_name(key, entry), path))
            taken.setdefault(key, set()).add(path)
    if conflicts and not force:
        raise _conflict(kind, group, name, sorted(conflicts, key=lambda c: (c[0], path_text(c[1]))))
    result = base
    others = set().union(*(paths - taken.get(key, set()) for key, (_, paths) in owners.items() if key != me)) \
        if owners else set()
    for path in _removals(previous - wanted, others):
        result = _remove(result, path)
    content = {k: v for k, v in applied.items() if k not in IGNORED}
    result = merge(result, content, schema)
    result["apiVersion"], result["kind"] = api_version, kind
    new_owners = {key: (entry, paths - taken.get(key, set())) for key, (entry, paths) in owners.items()}
    mine = {"manager": manager, "operation": APPLY, "apiVersion": api_version, "time": now}
    if me in owners and wanted == previous and not taken and _same(base, result):
        mine = owners[me][0]  # nothing changed: the entry keeps its time, and the object its version
    new_owners[me] = (mine, wanted)
    meta = dict(result.get("metadata") or {})
    meta["managedFields"] = _entries_of(new_owners, {me: mine})
    return {**result, "metadata": meta}


def _same(old: Obj, new: Obj) -> bool:
    strip = ("managedFields", "resourceVersion")
    return ({**old, "metadata": {k: v for k, v in (old.get("metadata") or {}).items() if k not in strip}}
            == {**new, "metadata": {k: v for k, v in (new.get("metadata") or {}).items() if k not in strip}})


def _changed(old: Any, new: Any, schema: Schema | None) -> tuple[set[Path], set[Path]]:
    """(paths set or changed in `new`, paths gone from `old`)."""
    old_paths, new_paths = field_set(old, schema), field_set(new, schema)
    changed = {p for p in new_paths if p not in old_paths
               or (p[-1:] != (_ITEM,) and value_at(old, p) != value_at(new, p))}  # an item or map: only if new
    return changed, old_paths - new_paths


def track_update(old: Obj, new: Obj, *, manager: str, subresource: str, schema: Schema | None, api_version: str,
                 now: str) -> Obj:
    """`new` with managedFields after a non-apply write by `manager` (objects without managedFields: unchanged)."""
    new_meta = new.get("metadata")
    if not _entries(old) or not isinstance(new_meta, dict):
        return new
    if new_meta.get("managedFields") not in (None, (old.get("metadata") or {}).get("managedFields")):
        return new  # the writer set managedFields itself (kubectl's upgrade to server-side apply)
    owners = _owners(old)
    changed, gone = _changed(old, new, schema)
    if not changed and not gone:
        return {**new, "metadata": {**new_meta, "managedFields": _entries(old)}}
    me = (manager, UPDATE, subresource)
    new_owners = {key: (entry, paths - changed - gone) for key, (entry, paths) in owners.items() if key != me}
    mine: Obj = {"manager": manager, "operation": UPDATE, "apiVersion": api_version, "time": now}
    if subresource:
        mine["subresource"] = subresource
    new_owners[me] = (mine, (owners.get(me, ({}, set()))[1] - gone) | changed)
    return {**new, "metadata": {**new_meta, "managedFields": _entries_of(new_owners, {me: mine})}}
