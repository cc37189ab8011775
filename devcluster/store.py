"""The object store: every object of every kind, one global resourceVersion, the watch history.

Objects are plain JSON dicts, indexed by resource, namespace and name. A write never mutates a stored
dict: it stores a new one (sharing untouched subtrees), so a dict handed out by `get`/`list` is a
consistent snapshot that callers must treat as read-only. Every write takes the next resourceVersion
from one counter, appends a `WatchEvent` to a bounded history window (the oldest events fall out and
watches from before them get 410 Gone) and offers it to the open watchers of that resource.

Semantics follow the real API server where a client can observe them: optimistic concurrency (a
stale resourceVersion is 409), no-op updates keep the resourceVersion, the status subresource
carries only status, the resize subresource only a pod's containers' resources (devcluster/resize.py; a plain
pod update may not change them), graceful pod deletion (deletionTimestamp now, removal after the grace period;
unscheduled pods go at once), finalizers, binding (409 if already bound, being deleted or still gated,
uid precondition), scheduling gates (a created gated pod gets PodScheduled=False/SchedulingGated; gates
unique, only removed, never with spec.nodeName at create), eviction under the PodDisruptionBudgets (as the
eviction handler enforces them, their status computed at the eviction: devcluster/disruption.py; the
handler's bookkeeping in the budget's status and the evicted pod's DisruptionTarget condition), a
Secret's stringData written into data, the storage kinds' defaulting, DefaultStorageClass admission and
validation (manifests/storage.py).

The store is driven from one event loop thread and never blocks. Deferred removals use the running
loop's `call_later`; without a running loop a graceful deletion removes the object at once.

Resources may be named by `ResourceDef`, by `plural[.group]` (`pods`, `hypernodes.topology.volcano.sh`)
or by `apiVersion/Kind` (`v1/Pod`, `topology.volcano.sh/v1alpha1/HyperNode`). A resource served at several
versions is named by its storage version's key (`podgroups.scheduling.k8s.io` is v1beta1) and its other
versions by `apiVersion/Kind` (`scheduling.k8s.io/v1alpha2/PodGroup`): those, like events.k8s.io Events, are
views of the stored objects (`stored_as`, devcluster/conversion.py), a write through one admitted as its
version and then as the storage version.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import functools
import json
import random
import string
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from devcluster import apply as field_management
from devcluster import disruption, errors, resize, volcano_job_admission
from devcluster.conversion import to_storage, to_view
from devcluster.patches import json_patch, merge_patch, strategic_merge
from devcluster.resources import RESOURCES, ResourceDef, by_kind
from devcluster.schemas import KIND_SCHEMAS
from devcluster.watch import Predicate, Watcher, WatchEvent
from manifests import storage
from manifests.admission import Rejected, admit_create, admit_pod_group_protection, admit_update, decode, load_object
from manifests.validation import Cause, forbidden, invalid, qualified_name_problems, validate

Obj = dict[str, Any]
ResourceRef = ResourceDef | str
Listener = Callable[[WatchEvent], None]
Backlog = list[tuple[str, WatchEvent]]
Objs = list[Obj]
Warnings = list[str]  # what a load would have been refused for by a real API server

DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
# The PriorityClasses every cluster has from its first start (kube-apiserver's bootstrap).
SYSTEM_PRIORITY_CLASSES = (
    ("system-node-critical", 2_000_001_000,
     "Used for system critical pods that must not be moved from their current node."),
    ("system-cluster-critical", 2_000_000_000, "Used for system critical pods that must run in the cluster, but can be "
                                               "moved to another node if necessary."),
)
_UNDELETABLE_NAMESPACES = frozenset({"default", "kube-system", "kube-public"})
# A key names its storage row: the other versions of a resource served at several (same group and plural,
# `stored_as` their own key) are reached by apiVersion/Kind or by their row.
_BY_KEY = {r.key: r for r in RESOURCES if r.stored_as != r.key}
_BUDGETS = _BY_KEY["poddisruptionbudgets.policy"]
_NAME_CHARS = string.ascii_lowercase + string.digits
_VOLCANO_JOB = ("batch.volcano.sh/v1alpha1", "Job")


def resolve(ref: ResourceRef) -> ResourceDef:
    """The `ResourceDef` named by `ref` (see the module docstring); KeyError if not served."""
    if isinstance(ref, ResourceDef):
        return ref
    if ref in _BY_KEY:
        return _BY_KEY[ref]
    api_version, _, kind = ref.rpartition("/")
    found = by_kind(api_version, kind)
    if found is None:
        raise KeyError(f"devcluster does not serve {ref!r}")
    return found


@functools.lru_cache(maxsize=16)
def _rfc3339(second: int) -> str:
    return dt.datetime.fromtimestamp(second, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_rfc3339(clock: Callable[[], float] = time.time) -> str:
    """The clock's time as an RFC 3339 second-precision UTC timestamp."""
    return _rfc3339(int(clock()))


def _meta(obj: Obj) -> Obj:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _without_rv(obj: Obj) -> Obj:
    meta = dict(_meta(obj))
    meta.pop("resourceVersion", None)
    return {**obj, "metadata": meta}


_POD_UPDATE_FORBIDDEN = (
    "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing "
    "tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"
)


def _mutable_masked(spec: Obj) -> Obj:
    """A pod spec without the fields a pod update may change (images, deadline, tolerations, gates)."""
    masked = {k: v for k, v in spec.items()
              if k not in ("activeDeadlineSeconds", "tolerations", "schedulingGates", "terminationGracePeriodSeconds")}
    for field in ("containers", "initContainers"):
        if isinstance(masked.get(field), list):
            masked[field] = [{k: v for k, v in c.items() if k != "image"} if isinstance(c, dict) else c
                             for c in masked[field]]
    return masked


def _write_string_data(secret: Obj) -> None:
    """A Secret's write-only `stringData` goes into `data`, base64-encoded, as the real server does."""
    string_data = secret.pop("stringData", None)
    if isinstance(string_data, dict) and string_data:
        encoded = {k: base64.b64encode(str(v).encode()).decode() for k, v in string_data.items()}
        secret["data"] = {**(secret.get("data") or {}), **encoded}
    secret.setdefault("type", "Opaque")


def _without_seconds(toleration: Any) -> Any:
    return {k: v for k, v in toleration.items() if k != "tolerationSeconds"} if isinstance(toleration, dict) \
        else toleration


def _gate_name(gate: Any) -> str:
    name = gate.get("name") if isinstance(gate, dict) else None
    return "" if name is None else str(name)


def _added_gate_causes(old_gates: list[Any], new_gates: list[Any]) -> list[Cause]:
    """A pod update may only remove scheduling gates: one cause per gate name the old spec lacks (at the
    index it last has in the new list, as the real server's map of new gates keeps it)."""
    old_names = {_gate_name(g) for g in old_gates}
    added: dict[str, int] = {}
    for index, gate in enumerate(new_gates):
        if _gate_name(gate) not in old_names:
            added[_gate_name(gate)] = index
    return [forbidden(f"spec.schedulingGates[{index}].name",
                      f"only deletion is allowed, but found new scheduling gate '{gate_name}'")
            for gate_name, index in sorted(added.items(), key=lambda item: item[1])]


def _check_pod_spec_update(name: str, old: Obj, new: Obj) -> None:
    """422 like the real server when an update changes an immutable pod spec field (e.g. spec.nodeName),
    modifies a toleration or adds a scheduling gate; every cause in one answer, in the real server's order."""
    if old == new:
        return
    causes: list[Cause] = []
    old_tolerations, new_tolerations = old.get("tolerations") or [], new.get("tolerations") or []
    if not all(_without_seconds(t) in [_without_seconds(n) for n in new_tolerations] for t in old_tolerations):
        causes.append(forbidden("spec.tolerations", "existing toleration can not be modified except its "
                                                    "tolerationSeconds"))
    causes += _added_gate_causes(old.get("schedulingGates") or [], new.get("schedulingGates") or [])
    if _mutable_masked(old) != _mutable_masked(new):
        causes.append(("FieldValueForbidden", "spec", _POD_UPDATE_FORBIDDEN))
    if causes:
        raise errors.invalid("Pod", name, causes)


_SCHEDULING_GATED = "Scheduling is blocked due to non-empty scheduling gates"


def _scheduling_gate_causes(pod: Obj, *, creating: bool) -> list[Cause]:
    """The API server's rules on spec.schedulingGates that `manifests` validation does not apply: each name a
    qualified name and unique (ValidatePodSpec, create and update) and, on create, no spec.nodeName while a
    gate remains (ValidatePodCreate)."""
    spec = pod.get("spec")
    gates = spec.get("schedulingGates") if isinstance(spec, dict) else None
    if not gates or not isinstance(gates, list):
        return []
    causes: list[Cause] = []
    seen: set[str] = set()
    for index, gate in enumerate(gates):
        text = _gate_name(gate)
        field = f"spec.schedulingGates[{index}]"
        causes += [invalid(field, text, problem) for problem in qualified_name_problems(text)]
        if text in seen:
            causes.append(("FieldValueDuplicate", field, f"Duplicate value: {json.dumps(text)}"))
        seen.add(text)
    if creating and isinstance(spec, dict) and spec.get("nodeName"):
        causes.append(forbidden("spec.nodeName", "cannot be set until all schedulingGates have been cleared"))
    return causes


def _mark_scheduling_gated(pod: Obj, now: str) -> None:
    """A created pod with scheduling gates and no PodScheduled condition gets PodScheduled=False, reason
    SchedulingGated, as the real server's PrepareForCreate adds it (`pod["status"]` is the pod's own dict)."""
    if not (pod.get("spec") or {}).get("schedulingGates"):
        return
    status = pod["status"]
    conditions = status.get("conditions") or []
    if any(isinstance(c, dict) and c.get("type") == "PodScheduled" for c in conditions):
        return
    status["conditions"] = [*conditions, {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated",
                                          "message": _SCHEDULING_GATED, "lastProbeTime": None,
                                          "lastTransitionTime": now}]


def _api_error(resource: ResourceDef, obj: Obj, refusal: Rejected) -> errors.ApiError:
    name = str(_meta(obj).get("name") or "")
    if refusal.code == 422:
        return errors.invalid(resource.kind, name, refusal.causes, resource.group)
    if refusal.code == 403:
        details: dict[str, Any] = {"name": name, "kind": resource.plural}
        if resource.group:
            details["group"] = resource.group
        return errors.ApiError(403, "Forbidden", refusal.message, details)
    return errors.ApiError(refusal.code, refusal.reason, refusal.message)


class Store:
    """All objects, the resourceVersion counter, the watch history and the open watchers."""

    def __init__(self, history: int = 10_000, *, autocreate_namespaces: bool = True,
                 clock: Callable[[], float] = time.time) -> None:
        if history < 1:
            raise ValueError("history must hold at least one event")
        self._objects: dict[str, dict[str, dict[str, Obj]]] = {r.key: {} for r in RESOURCES}
        self._rv = 0
        self._history: deque[WatchEvent] = deque(maxlen=history)
        self._compacted = 0  # the newest resourceVersion no longer in the history window
        self._watchers: dict[str, set[Watcher]] = {r.key: set() for r in RESOURCES}
        self._listeners: list[Listener] = []
        self.autocreate_namespaces = autocreate_namespaces
        self.clock = clock
        for name in DEFAULT_NAMESPACES:
            self.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        for name, value, description in SYSTEM_PRIORITY_CLASSES:
            self.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
                         "value": value, "description": description})

    # ----------------------------------------------------------------------- reading

    @property
    def resource_version(self) -> int:
        """The newest resourceVersion handed out (lists carry it)."""
        return self._rv

    @property
    def oldest_resumable(self) -> int:
        """The oldest resourceVersion a watch can resume from without 410 Gone."""
        return self._compacted

    def get(self, ref: ResourceRef, name: str, namespace: str = "") -> Obj:
        """The stored object (read-only); ApiError 404 if absent."""
        resource = resolve(ref)
        found = self.find(resource, name, namespace)
        if found is None:
            raise errors.not_found(resource.plural, name, resource.group)
        return found

    def find(self, ref: ResourceRef, name: str, namespace: str = "") -> Obj | None:
        """The stored object or None."""
        resource = resolve(ref)
        if resource.stored_as:
            stored = self.find(_BY_KEY[resource.stored_as], name, namespace)
            return None if stored is None else to_view(resource, stored)
        return self._objects[resource.key].get(self._ns(resource, namespace), {}).get(name)

    def list(self, ref: ResourceRef, namespace: str = "", predicate: Predicate | None = None) -> list[Obj]:
        """Objects of a resource (one namespace or all), sorted by namespace and name."""
        resource = resolve(ref)
        if resource.stored_as:
            views = [to_view(resource, o) for o in self.list(_BY_KEY[resource.stored_as], namespace)]
            return [v for v in views if predicate is None or predicate(v)]
        spaces = self._objects[resource.key]
        names = [namespace] if namespace else sorted(spaces)
        items: list[Obj] = []
        for ns in names:
            bucket = spaces.get(ns)
            if not bucket:
                continue
            for name in sorted(bucket):
                obj = bucket[name]
                if predicate is None or predicate(obj):
                    items.append(obj)
        return items

    def count(self, ref: ResourceRef) -> int:
        resource = resolve(ref)
        return sum(len(bucket) for bucket in self._objects[resource.stored_as or resource.key].values())

    # ----------------------------------------------------------------------- writing

    def create(self, obj: Obj, namespace: str = "", *, keep_status: bool = True,
               warnings: Warnings | None = None) -> Obj:
        """Store a new object (apiVersion/kind pick the resource); returns the stored object.

        `keep_status=False` is the HTTP behaviour: status is reset and the object goes through a real
        server's admission (`manifests.admit_create`: defaulting, priority, validation; ApiError on refusal).
        Direct callers usually keep it, to load objects as a cluster holds them (e.g. running pods):
        `manifests.load_object`'s decoding, defaulting and admission, refusing only what cannot be decoded.
        """
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        resource = by_kind(str(api_version), str(kind))
        if resource is None:
            raise errors.bad_request(f"no kind {kind!r} is registered for version {api_version!r}")
        return self.create_in(resource, obj, namespace or str(_meta(obj).get("namespace") or ""),
                              keep_status=keep_status, warnings=warnings)

    def create_in(self, resource: ResourceDef, obj: Obj, namespace: str, *, keep_status: bool,
                  dry_run: bool = False, warnings: Warnings | None = None) -> Obj:
        """Create in `namespace` (the URL's); `dry_run` validates and returns the object without storing it.

        `warnings` (loads only, `keep_status=True`) receives what a real API server would have refused.
        """
        if resource.stored_as:  # admitted as its version is, then as the storage version is
            storage = _BY_KEY[resource.stored_as]
            admitted = self._admit(resource, obj, strict=not keep_status, warnings=warnings)
            return to_view(resource, self.create_in(storage, to_storage(resource, storage, admitted), namespace,
                                                    keep_status=keep_status, dry_run=dry_run))
        meta = dict(_meta(obj))
        name = meta.get("name")
        if not name:
            prefix = meta.get("generateName")
            if not prefix:
                raise errors.invalid(resource.kind, "", [(
                    "FieldValueRequired", "metadata.name", "Required value: name or generateName is required")],
                    resource.group)
            name = str(prefix) + "".join(random.choices(_NAME_CHARS, k=5))
            meta["name"] = name
        name = str(name)
        if resource.namespaced:
            body_ns = meta.get("namespace")
            if body_ns and namespace and body_ns != namespace:
                raise errors.bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request")
            namespace = namespace or str(body_ns or "") or "default"
            meta["namespace"] = namespace
            self._require_namespace(namespace, dry_run)
        else:
            namespace = ""
            meta.pop("namespace", None)
        bucket = self._objects[resource.key].setdefault(namespace, {})
        if name in bucket:
            raise errors.already_exists(resource.plural, name, resource.group)
        for field in ("deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
            meta.pop(field, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now_rfc3339(self.clock)
        meta["generation"] = 1
        stored: Obj = {**obj, "apiVersion": resource.api_version, "kind": resource.kind, "metadata": meta}
        if not keep_status and resource.has_status and resource.kind != "Node":
            stored.pop("status", None)
        stored = self._admit(resource, stored, strict=not keep_status, warnings=warnings)
        self._default(resource, stored)
        if resource.kind == "Pod":
            _mark_scheduling_gated(stored, now_rfc3339(self.clock))
        meta = stored["metadata"]
        if dry_run:
            return stored
        self._rv += 1
        meta["resourceVersion"] = str(self._rv)
        bucket[name] = stored
        self._publish(WatchEvent("ADDED", resource.key, namespace, stored, self._rv))
        return stored

    def update(self, obj: Obj, namespace: str = "", *, subresource: str = "") -> Obj:
        """Replace an object (PUT semantics); `subresource="status"` replaces only its status."""
        resource = by_kind(str(obj.get("apiVersion")), str(obj.get("kind")))
        if resource is None:
            raise errors.bad_request(f"no kind {obj.get('kind')!r} is registered for version {obj.get('apiVersion')!r}")
        meta = _meta(obj)
        return self.update_in(resource, str(meta.get("name", "")), namespace or str(meta.get("namespace", "")),
                              obj, subresource=subresource)

    def update_in(self, resource: ResourceDef, name: str, namespace: str, obj: Obj, *, subresource: str = "",
                  dry_run: bool = False, strict: bool = False, manager: str = "devcluster") -> Obj:
        """Replace an object; `strict` (the HTTP behaviour) runs a real server's update admission and validation
        (`manifests.admit_update`), otherwise only its decoding and defaulting. `subresource` "status" replaces
        only the status, "resize" (pods) only the containers' resources, always validated (`_resized`)."""
        if resource.stored_as:  # admitted as its version is, then as the storage version is
            storage = _BY_KEY[resource.stored_as]
            stored = self.get(storage, name, namespace)
            if subresource != "status":
                obj = self._admit(resource, obj, strict=strict, old=to_view(resource, stored))
            return to_view(resource, self.update_in(storage, name, namespace,
                                                    to_storage(resource, storage, obj, stored),
                                                    subresource=subresource, dry_run=dry_run, strict=strict,
                                                    manager=manager))
        namespace = self._ns(resource, namespace)
        current = self.get(resource, name, namespace)
        meta = _meta(obj)
        if meta.get("name") and meta["name"] != name:
            raise errors.bad_request(f"the name of the object ({meta['name']}) does not match the name on "
                                     f"the URL ({name})")
        if resource.namespaced and meta.get("namespace") and meta["namespace"] != namespace:
            raise errors.bad_request(
                "the namespace of the provided object does not match the namespace sent on the request")
        wanted_rv = meta.get("resourceVersion")
        current_meta = current["metadata"]
        if wanted_rv and str(wanted_rv) != current_meta["resourceVersion"]:
            raise errors.stale(resource.plural, name, resource.group)
        if subresource == "status":
            new: Obj = {**current}
            if "status" in obj:
                new["status"] = obj["status"]
            else:
                new.pop("status", None)
            if resource.kind == "Node":  # decoding: a node's capacity and allocatable in canonical form
                new = self._admit(resource, new, strict=False, old=current)
        elif subresource == "resize":
            if resource.kind != "Pod":  # served for pods only
                raise errors.path_not_found()
            new = self._resized(name, current, obj)
        else:
            new = {**obj, "apiVersion": resource.api_version, "kind": resource.kind}
            new_meta = dict(meta)
            for field in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
                          "generation", "namespace", "name"):
                if field in current_meta:
                    new_meta[field] = current_meta[field]
                else:
                    new_meta.pop(field, None)
            new["metadata"] = new_meta
            if resource.has_status:
                if "status" in current:
                    new["status"] = current["status"]
                else:
                    new.pop("status", None)
            if resource.kind == "Secret":
                _write_string_data(new)
            new = self._admit(resource, new, strict=strict, old=current)
            if resource.kind == "Pod":
                self._default(resource, new)
                _check_pod_spec_update(name, current.get("spec") or {}, new.get("spec") or {})
            spec_changed = any(new.get(k) != current.get(k) for k in set(new) | set(current)
                               if k not in ("metadata", "status", "apiVersion", "kind"))
            if spec_changed:
                new_meta["generation"] = int(current_meta.get("generation", 1)) + 1
        new = field_management.track_update(current, new, manager=manager, subresource=subresource,
                                            schema=KIND_SCHEMAS[(resource.api_version, resource.kind)][1],
                                            api_version=resource.api_version, now=now_rfc3339(self.clock))
        if dry_run:
            return {**new, "metadata": {**_meta(new), "resourceVersion": current_meta["resourceVersion"]}}
        return self._replace(resource, namespace, current, new)

    def _resized(self, name: str, current: Obj, obj: Obj) -> Obj:
        """A write through the pods/resize subresource (devcluster/resize.py): the body decoded and defaulted,
        only its containers' resources and resizePolicy kept over the stored pod, then the pod validation and
        ValidatePodResize, every cause in one 422. Whether or not `strict`: there is nothing to load through it."""
        pods = resolve("pods")
        try:
            decoded = decode(pods.api_version, pods.kind, obj)
        except Rejected as refusal:
            raise _api_error(pods, obj, refusal) from None
        new = resize.kept_from(current, decoded)
        causes = resize.problems(current, new, validate(pods.api_version, pods.kind, new, current))
        if causes:
            raise errors.invalid(pods.kind, name, causes)
        if new.get("spec") != current.get("spec"):
            new["metadata"] = {**current["metadata"], "generation": int(current["metadata"].get("generation", 1)) + 1}
        return new

    def patch(self, ref: ResourceRef, name: str, patch: Any, namespace: str = "", *,
              patch_type: str = "merge", subresource: str = "",
              check: Callable[[Obj], Obj] | None = None, dry_run: bool = False, strict: bool = False,
              manager: str = "devcluster") -> Obj:
        """Apply a `merge`, `json` or `strategic` patch; a resourceVersion in the result is a precondition.

        `check` sees (and may replace or refuse) the patched object before it is stored.
        """
        resource = resolve(ref)
        current = self.get(resource, name, namespace)
        if patch_type == "merge":
            if not isinstance(patch, dict):
                raise errors.bad_request("a merge patch must be a JSON object")
            result = merge_patch(current, patch)
        elif patch_type == "json":
            result = json_patch(current, patch)
        elif patch_type == "strategic":
            if not isinstance(patch, dict):
                raise errors.bad_request("a strategic merge patch must be a JSON object")
            result = strategic_merge(current, patch, KIND_SCHEMAS[(resource.api_version, resource.kind)][1])
        else:
            raise errors.unsupported_media_type(patch_type)
        if not isinstance(result, dict):
            raise errors.bad_request("the patched object is not a JSON object")
        result_meta = _meta(result)
        if result_meta.get("resourceVersion") == current["metadata"]["resourceVersion"]:
            result = {**result, "metadata": {k: v for k, v in result_meta.items() if k != "resourceVersion"}}
        result.setdefault("apiVersion", resource.api_version)
        result.setdefault("kind", resource.kind)
        if check is not None:
            result = check(result)
        return self.update_in(resource, name, self._ns(resource, namespace), result, subresource=subresource,
                              dry_run=dry_run, strict=strict, manager=manager)

    def apply(self, ref: ResourceRef, name: str, namespace: str, applied: Obj, *, manager: str, force: bool = False,
              check: Callable[[Obj], Obj] | None = None, dry_run: bool = False) -> tuple[Obj, bool]:
        """Server-side apply of `applied` by `manager` (see devcluster/apply.py); (object, created).

        A missing object is created (with HTTP create semantics); ApiError 409 lists the conflicts.
        """
        resource = resolve(ref)
        if resource.stored_as:
            return self._apply_view(resource, name, namespace, applied, manager=manager, force=force, check=check,
                                    dry_run=dry_run)
        namespace = self._ns(resource, namespace)
        current = self.find(resource, name, namespace)
        result = field_management.apply(
            current, applied, manager=manager, force=force, schema=KIND_SCHEMAS[(resource.api_version,
                                                                                  resource.kind)][1],
            api_version=resource.api_version, kind=resource.kind, group=resource.group, now=now_rfc3339(self.clock))
        if check is not None:
            result = check(result)
        if current is None:
            return self.create_in(resource, result, namespace, keep_status=False, dry_run=dry_run), True
        return self.update_in(resource, name, namespace, result, dry_run=dry_run, strict=True, manager=manager), False

    def _apply_view(self, resource: ResourceDef, name: str, namespace: str, applied: Obj, *, manager: str,
                    force: bool, check: Callable[[Obj], Obj] | None, dry_run: bool) -> tuple[Obj, bool]:
        """Server-side apply through a viewing version: the configuration converted and applied to the stored
        object (field ownership kept in the storage version's terms), the result checked and admitted as the
        view's version before it is admitted and stored as the storage's."""
        storage = _BY_KEY[resource.stored_as]
        current = self.find(storage, name, namespace)
        old = None if current is None else to_view(resource, current)

        def checked(result: Obj) -> Obj:
            view = to_view(resource, result)
            if check is not None:
                view = check(view)
            view = self._admit(resource, view, strict=True, old=old)
            return to_storage(resource, storage, view, result)

        obj, created = self.apply(storage, name, namespace, to_storage(resource, storage, applied),
                                  manager=manager, force=force, check=checked, dry_run=dry_run)
        return to_view(resource, obj), created

    def delete(self, ref: ResourceRef, name: str, namespace: str = "", *, grace_period_seconds: int | None = None,
               preconditions: dict[str, Any] | None = None, dry_run: bool = False) -> Obj:
        """Delete (gracefully for bound pods); returns the object as it is after the call."""
        resource = resolve(ref)
        if resource.stored_as:
            return to_view(resource, self.delete(_BY_KEY[resource.stored_as], name, namespace,
                                                 grace_period_seconds=grace_period_seconds,
                                                 preconditions=preconditions, dry_run=dry_run))
        namespace = self._ns(resource, namespace)
        current = self.get(resource, name, namespace)
        meta = current["metadata"]
        if preconditions:
            uid, rv = preconditions.get("uid"), preconditions.get("resourceVersion")
            if uid and uid != meta.get("uid"):
                raise errors.conflict(resource.plural, name, f"Precondition failed: UID in precondition: {uid}, "
                                      f"UID in object meta: {meta.get('uid')}", resource.group)
            if rv and rv != meta.get("resourceVersion"):
                raise errors.conflict(resource.plural, name, f"Precondition failed: ResourceVersion in "
                                      f"precondition: {rv}, ResourceVersion in object meta: "
                                      f"{meta.get('resourceVersion')}", resource.group)
        if resource.kind == "Namespace" and name in _UNDELETABLE_NAMESPACES:
            raise errors.ApiError(403, "Forbidden", f'namespaces "{name}" is forbidden: this namespace may not be '
                                  "deleted", {"name": name, "kind": "namespaces"})
        if dry_run:
            return current
        grace = self._grace(resource, current, grace_period_seconds)
        if grace > 0 or meta.get("finalizers"):
            return self._begin_deletion(resource, namespace, current, grace)
        return self._remove(resource, namespace, current)

    def bind(self, namespace: str, name: str, node: str, *, uid: str | None = None) -> Obj:
        """Assign a pending pod to a node (the binding subresource).

        409 Conflict, checked in the real server's order: uid precondition, being deleted, already assigned,
        scheduling gates left.
        """
        pods = resolve("pods")
        current = self.get(pods, name, namespace)
        meta = current["metadata"]
        if uid and uid != meta.get("uid"):
            raise errors.conflict("pods/binding", name, f"Precondition failed: UID in precondition: {uid}, "
                                  f"UID in object meta: {meta.get('uid')}")
        if meta.get("deletionTimestamp"):
            raise errors.conflict("pods/binding", name, f"pod {name} is being deleted, cannot be assigned to a host")
        spec = current.get("spec") or {}
        if spec.get("nodeName"):
            raise errors.conflict("pods/binding", name, f'pod {name} is already assigned to node "{spec["nodeName"]}"')
        if spec.get("schedulingGates"):  # a pod not ready for scheduling cannot be bound
            raise errors.conflict("pods/binding", name, f"pod {name} has non-empty .spec.schedulingGates")
        status = dict(current.get("status") or {})
        # kube-apiserver clears the nomination of a pod it binds (ClearingNominatedNodeNameAfterBinding,
        # beta and on by default since 1.35): whoever nominated it, the pod now has a node.
        status.pop("nominatedNodeName", None)
        conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
        conditions.append({"type": "PodScheduled", "status": "True", "lastProbeTime": None,
                           "lastTransitionTime": now_rfc3339(self.clock)})
        status["conditions"] = conditions
        new = {**current, "spec": {**spec, "nodeName": node}, "status": status}
        return self._replace(pods, namespace, current, new, changed=True)

    def evict(self, namespace: str, name: str, *, grace_period_seconds: int | None = None,
              preconditions: dict[str, Any] | None = None) -> Obj:
        """The eviction subresource: delete the pod with its grace period if its PodDisruptionBudget allows.

        As kube-apiserver's eviction handler: a pod Pending, Succeeded, Failed or being deleted goes without
        looking at budgets; otherwise the budgets of its namespace selecting it decide, with the status the
        disruption controller would have written computed now (devcluster/disruption.py): 429 with a
        DisruptionBudget cause when it refuses, an `ApiError` with code 500 answered as HTTP 201 when more
        than one budget selects the pod. Then the uid / resourceVersion preconditions (409, in the
        handler's words). A disruption spent is written into the budget's status (disruptionsAllowed one
        less, the pod in disruptedPods), the pod gets the DisruptionTarget condition, and it is deleted.
        """
        pod = self.get("pods", name, namespace)
        budgets = self.list(_BUDGETS, namespace)
        spent = None
        if budgets and not disruption.ignores_budgets(pod):
            spent = disruption.check_eviction(pod, budgets, lambda: self.list("pods", namespace), self.clock())
        meta = pod["metadata"]
        uid, rv = (preconditions or {}).get("uid"), (preconditions or {}).get("resourceVersion")
        if uid and uid != meta.get("uid"):
            raise errors.conflict("Pod", name, f"the UID in the precondition ({uid}) does not match the UID in record "
                                  f"({meta.get('uid')}). The object might have been deleted and then recreated")
        if rv and rv != meta.get("resourceVersion"):
            raise errors.conflict("Pod", name, f"the ResourceVersion in the precondition ({rv}) does not match the "
                                  f"ResourceVersion in record ({meta.get('resourceVersion')}). The object might "
                                  "have been modified")
        stamp = now_rfc3339(self.clock)
        if spent is not None:  # the handler's checkAndDecrement, before it touches the pod
            budget = spent.budget
            self.update_in(_BUDGETS, str(budget["metadata"]["name"]), namespace, {
                **budget, "status": disruption.evicted_status(budget, spent.status, name, stamp)},
                subresource="status")
        marked = disruption.with_disruption_target(pod, stamp)
        if marked is not None:
            pod = self.update_in(resolve("pods"), name, namespace, {**pod, "status": marked}, subresource="status")
            if self.find("pods", name, namespace) is None:  # a terminating pod past its grace period: gone now
                return pod
        return self.delete("pods", name, namespace, grace_period_seconds=grace_period_seconds)

    def load_objects(self, objects: Iterable[Obj]) -> Objs:
        """Create each object (keeping any status); returns the stored objects in order."""
        return [self.create(obj) for obj in objects]

    # ----------------------------------------------------------------------- watching

    def watch(self, ref: ResourceRef, namespace: str = "", predicate: Predicate | None = None,
              resource_version: str = "") -> tuple[Watcher, Backlog]:
        """Open a watcher and return it with the events it must replay first.

        Empty or "0" resourceVersion: the current objects as ADDED events. Otherwise the history after
        that version; ApiError 410 if the history window no longer reaches back to it.
        """
        resource = resolve(ref)
        if resource.stored_as:
            view_predicate = predicate
            if view_predicate is not None:
                predicate = lambda obj: view_predicate(to_view(resource, obj))  # noqa: E731
            resource = _BY_KEY[resource.stored_as]
        watcher = Watcher(resource.key, namespace, predicate)
        backlog: Backlog = []
        if resource_version in ("", "0"):
            for obj in self.list(resource, namespace, predicate):
                ns = str(obj["metadata"].get("namespace", ""))
                backlog.append(("ADDED", WatchEvent("ADDED", resource.key, ns, obj, self._rv)))
        else:
            try:
                since = int(resource_version)
            except ValueError:
                raise errors.bad_request(f'invalid resource version "{resource_version}"') from None
            if since < self._compacted:
                raise errors.gone(f"too old resource version: {since} ({self._compacted + 1})")
            collector = Watcher(resource.key, namespace, predicate)
            for event in self._history:
                if event.rv > since and event.key == resource.key:
                    collector.offer(event)
            backlog = list(collector.queue)
        self._watchers[resource.key].add(watcher)
        return watcher, backlog

    def stop_watch(self, watcher: Watcher) -> None:
        watcher.close()
        self._watchers[watcher.key].discard(watcher)

    def close_watches(self, ref: ResourceRef | None = None) -> int:
        """Close open watches (of one resource or all); returns how many were closed."""
        keys = [resolve(ref).key] if ref is not None else list(self._watchers)
        closed = 0
        for key in keys:
            for watcher in list(self._watchers[key]):
                self.stop_watch(watcher)
                closed += 1
        return closed

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call `listener` synchronously on every change; returns the unsubscribe function."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    # ----------------------------------------------------------------------- internals

    @staticmethod
    def _ns(resource: ResourceDef, namespace: str) -> str:
        return namespace if resource.namespaced else ""

    def _require_namespace(self, namespace: str, dry_run: bool = False) -> None:
        namespaces = self._objects["namespaces"].get("", {})
        found = namespaces.get(namespace)
        if found is None:
            if dry_run:
                return
            if not self.autocreate_namespaces:
                raise errors.not_found("namespaces", namespace)
            self.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        elif found["metadata"].get("deletionTimestamp"):
            raise errors.ApiError(403, "Forbidden", f"unable to create new content in namespace {namespace} "
                                  "because it is being terminated", {"name": namespace, "kind": "namespaces"})

    @property
    def priority_classes(self) -> dict[str, Obj]:
        """The stored PriorityClasses by name (read-only), what the Priority admission plugin reads."""
        return self._objects["priorityclasses.scheduling.k8s.io"].setdefault("", {})

    def _admit(self, resource: ResourceDef, obj: Obj, *, strict: bool, old: Obj | None = None,
               warnings: Warnings | None = None) -> Obj:
        """The API-server pipeline for this write: the shared one of `manifests` (on a create, loads included,
        the PodGroupProtection admission plugin), then for the storage kinds their decoding, defaulting,
        DefaultStorageClass admission (creates) and validation (`storage.py`)."""
        admitted = self._admit_manifests(resource, obj, strict=strict, old=old, warnings=warnings)
        if old is None:  # every PodGroup a cluster holds went through the plugin: loaded ones get it too
            admitted = admit_pod_group_protection(resource.api_version, resource.kind, admitted)
        key = (resource.api_version, resource.kind)
        if key == _VOLCANO_JOB:
            return self._admit_volcano_job(resource, admitted, strict=strict, old=old, warnings=warnings)
        if key not in storage.KINDS:
            return admitted
        try:
            admitted = storage.decode_and_default(resource.api_version, resource.kind, admitted)
        except storage.UndecodableStorage as error:
            raise errors.bad_request(str(error)) from None
        if not strict:
            if warnings is not None and old is None:
                warnings.extend(f"a real API server refuses it: {field}: {message}" for _, field, message
                                in storage.problems(resource.api_version, resource.kind, admitted))
            return admitted
        if old is None and key == storage.CLAIM:
            admitted = storage.admit_default_class(admitted, self.list("storageclasses.storage.k8s.io"))
        if old is None:
            admitted = storage.admit_in_use_protection(key, admitted)
        causes = storage.problems(resource.api_version, resource.kind, admitted, old)
        if causes:
            raise errors.invalid(resource.kind, str(_meta(admitted).get("name") or ""), causes, resource.group)
        return admitted

    @staticmethod
    def _admit_volcano_job(resource: ResourceDef, job: Obj, *, strict: bool, old: Obj | None,
                           warnings: Warnings | None) -> Obj:
        """Volcano's admission of its Job (volcano_job_admission.py): the mutating webhook's defaults on a create
        (loads included), then its ValidatingAdmissionPolicy (HTTP writes; a load's refusal is a warning)."""
        if old is None:
            job = volcano_job_admission.defaulted(job)
        if not strict and old is not None:
            return job
        message = volcano_job_admission.refusal(job, old)
        if message is None:
            return job
        if not strict:
            if warnings is not None:
                warnings.append(f"a real API server refuses it: {message}")
            return job
        raise errors.policy_denied(resource.plural, resource.group, str(_meta(job).get("name") or ""),
                                   volcano_job_admission.denial_message(message))

    def _admit_manifests(self, resource: ResourceDef, obj: Obj, *, strict: bool, old: Obj | None = None,
                         warnings: Warnings | None = None) -> Obj:
        """The shared API-server pipeline of `manifests` for this write (see `create` and `update_in`), with
        the scheduling gate rules of a pod (`_scheduling_gate_causes`) among its validation's causes."""
        if not strict and old is not None:
            try:
                return decode(resource.api_version, resource.kind, obj)
            except Rejected as refusal:
                raise _api_error(resource, obj, refusal) from None
        gates = _scheduling_gate_causes(obj, creating=old is None) if resource.kind == "Pod" else []
        try:
            if not strict:
                loaded = load_object(resource.api_version, resource.kind, obj, self.priority_classes)
                if warnings is not None:
                    warnings.extend(loaded.warnings)
                    warnings.extend(f"a real API server refuses it: {field}: {message}" for _, field, message in gates)
                return loaded.obj
            if old is None:
                admitted = admit_create(resource.api_version, resource.kind, obj, self.priority_classes)
            else:
                admitted = admit_update(resource.api_version, resource.kind, obj, old, self.priority_classes)
        except Rejected as refusal:
            if refusal.code == 422 and gates:
                refusal = Rejected(422, refusal.reason, refusal.message, refusal.causes + gates)
            raise _api_error(resource, obj, refusal) from None
        if gates:
            raise _api_error(resource, obj, Rejected(422, "Invalid", "", gates))
        return admitted

    def _default(self, resource: ResourceDef, obj: Obj) -> None:
        if resource.kind == "Pod":
            status = dict(obj.get("status") or {})
            status.setdefault("phase", "Pending")
            obj["status"] = status
        elif resource.kind == "Namespace":
            obj["spec"] = obj.get("spec") or {"finalizers": ["kubernetes"]}
            obj["status"] = obj.get("status") or {"phase": "Active"}
        elif resource.kind == "Secret":
            _write_string_data(obj)

    def _replace(self, resource: ResourceDef, namespace: str, current: Obj, new: Obj, *, changed: bool = False) -> Obj:
        if not changed and _without_rv(new) == _without_rv(current):
            return current
        self._rv += 1
        new["metadata"] = {**_meta(new), "resourceVersion": str(self._rv)}
        name = current["metadata"]["name"]
        new_meta = new["metadata"]
        if new_meta.get("deletionTimestamp") and not new_meta.get("finalizers") and not self._grace_pending(new):
            self._objects[resource.key][namespace][name] = new
            return self._remove(resource, namespace, new)
        self._objects[resource.key][namespace][name] = new
        self._publish(WatchEvent("MODIFIED", resource.key, namespace, new, self._rv, current))
        return new

    def _grace(self, resource: ResourceDef, obj: Obj, requested: int | None) -> int:
        if resource.kind != "Pod":
            return 0
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        if not spec.get("nodeName") or status.get("phase") in ("Succeeded", "Failed"):
            return 0
        grace = requested if requested is not None else spec.get("terminationGracePeriodSeconds", 30)
        return max(0, int(grace if grace is not None else 30))

    def _grace_pending(self, obj: Obj) -> bool:
        meta = obj["metadata"]
        deadline = meta.get("deletionTimestamp")
        if not deadline or not meta.get("deletionGracePeriodSeconds"):
            return False
        ends = dt.datetime.strptime(str(deadline), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC).timestamp()
        return ends > self.clock()

    def _begin_deletion(self, resource: ResourceDef, namespace: str, current: Obj, grace: int) -> Obj:
        meta = dict(current["metadata"])
        previous = meta.get("deletionGracePeriodSeconds")
        if meta.get("deletionTimestamp") and (previous is None or int(previous) <= grace):
            if grace == 0 and not meta.get("finalizers"):
                return self._remove(resource, namespace, current)
            return current
        meta["deletionTimestamp"] = now_rfc3339(lambda: self.clock() + grace)
        meta["deletionGracePeriodSeconds"] = grace
        updated = self._replace(resource, namespace, current, {**current, "metadata": meta})
        if grace > 0 and self.find(resource, meta["name"], namespace) is updated:
            uid = meta["uid"]
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return self._finish_deletion(resource, namespace, meta["name"], uid) or updated
            loop.call_later(grace, self._finish_deletion, resource, namespace, meta["name"], uid)
        return updated

    def _finish_deletion(self, resource: ResourceDef, namespace: str, name: str, uid: str) -> Obj | None:
        current = self.find(resource, name, namespace)
        if current is None or current["metadata"].get("uid") != uid or current["metadata"].get("finalizers"):
            return None
        return self._remove(resource, namespace, current)

    def _remove(self, resource: ResourceDef, namespace: str, current: Obj) -> Obj:
        name = current["metadata"]["name"]
        if resource.kind == "Namespace":
            for other in RESOURCES:
                if other.namespaced and not other.stored_as:
                    for obj in list(self._objects[other.key].get(name, {}).values()):
                        self._remove(other, name, obj)
                    self._objects[other.key].pop(name, None)
        del self._objects[resource.key][namespace][name]
        self._rv += 1
        gone = {**current, "metadata": {**current["metadata"], "resourceVersion": str(self._rv)}}
        self._publish(WatchEvent("DELETED", resource.key, namespace, gone, self._rv))
        return gone

    def _publish(self, event: WatchEvent) -> None:
        if len(self._history) == self._history.maxlen:
            self._compacted = self._history[0].rv
        self._history.append(event)
        for watcher in self._watchers[event.key]:
            watcher.offer(event)
        for listener in self._listeners:
            listener(event)
