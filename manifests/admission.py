"""One write through a Kubernetes API server, as pure functions: decode, default, admit, validate.

A create runs, in the order kube-apiserver runs them:
1. decoding and defaulting (`manifests.defaulting`): canonical quantities, `SetDefaults_*`; a
   quantity that cannot be decoded is a 400 BadRequest;
2. mutating admission, on create only:
   - Priority (plugin/pkg/admission/priority): a pod's `priorityClassName` is resolved to
     `spec.priority` and `spec.preemptionPolicy`; no class named means the globalDefault class
     (lowest value if several) and its name is written into the pod, or priority 0 and
     PreemptLowerPriority when there is none; an unknown class, or a priority/preemptionPolicy
     written in the pod that differs from the class's, is 403 Forbidden. The same for a Workload API
     PodGroup (`PRIORITY_ADMITTED`: 1.36's v1alpha2 gets no preemptionPolicy);
   - DefaultTolerationSeconds: pods that do not tolerate `node.kubernetes.io/not-ready` /
     `unreachable` NoExecute taints get tolerations for 300 seconds;
   - the pod strategy's MatchLabelKeysInPodAffinity and MatchLabelKeysInPodTopologySpreadSelectorMerge
     steps (`merge_label_keys`): a pod (anti-)affinity term's matchLabelKeys / mismatchLabelKeys, and a
     topology spread constraint's matchLabelKeys, become `In` / `NotIn` the pod's values in its selector;
   - PriorityClass: at most one class may be globalDefault (403);
   - PodGroupProtection (plugin/pkg/admission/podgroupprotection, with the GenericWorkload gate): a
     Workload API PodGroup, at whatever version it is written, gets the finalizer
     `scheduling.k8s.io/podgroup-protection` (`admit_pod_group_protection`; devcluster/protection.py
     takes it off once the deleted PodGroup has no non-terminal pod). devcluster's store runs it, as it
     runs StorageObjectInUseProtection (`manifests.storage`), on every create, loads included;
3. validation (`manifests.validation`): 422 Invalid with every cause.
An update runs 1, the PriorityClass rule and 3 (with the old object for immutability rules).

`load_object` is the same pipeline for objects read from a scenario (simulation, `toposched
devcluster --load`): they describe what a cluster holds, so what a real server would have refused
becomes a warning naming the field, not a refusal, and a pod that states its own `spec.priority`
without a class keeps it (docs/scenarios.md lets a scenario write the resolved priority). Only an
object that cannot be decoded at all is refused.

Pure: no I/O; the priority classes are passed in. Imports nothing of ours outside `manifests`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import msgspec

from manifests.defaulting import UndecodableQuantity, apply_defaults
from manifests.validation import Cause, validate, validate_metadata, validate_pod

Obj = dict[str, Any]
PriorityClasses = Mapping[str, Obj]  # name -> PriorityClass object

NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
DEFAULT_TOLERATION_SECONDS = 300


class Rejected(Exception):
    """What the API server answers instead of storing: HTTP `code`, Status `reason`, `message`, `causes`."""

    def __init__(self, code: int, reason: str, message: str, causes: list[Cause] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.causes = causes or []


class Loaded(NamedTuple):
    obj: Obj
    warnings: list[str]


def _dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _name(obj: Obj) -> str:
    return str(_dict(obj.get("metadata")).get("name") or "")


def forbidden(plural: str, group: str, name: str, why: str) -> Rejected:
    resource = f"{plural}.{group}" if group else plural
    return Rejected(403, "Forbidden", f'{resource} "{name}" is forbidden: {why}')


def decode(api_version: str, kind: str, obj: Obj) -> Obj:
    """Decoding and defaulting; Rejected(400) for a quantity that is not one."""
    try:
        return apply_defaults(api_version, kind, obj)
    except UndecodableQuantity as error:
        version = api_version.rpartition("/")[2]
        raise Rejected(400, "BadRequest", f'{kind} in version "{version}" cannot be handled as a {kind}: '
                                          f"{error.field}: {error.message}") from None


# --------------------------------------------------------------------------- admission plugins


def global_default(classes: PriorityClasses) -> Obj | None:
    """The globalDefault PriorityClass; with several (a race), the lowest value, as the plugin picks."""
    found: Obj | None = None
    for priority_class in classes.values():
        if priority_class.get("globalDefault") and (found is None or found.get("value", 0) > priority_class.get(
                "value", 0)):
            found = priority_class
    return found


# The objects the Priority plugin admits besides pods: the Workload API's PodGroup, whose spec carries a
# priorityClassName from 1.36 (v1alpha2: priority only) and a preemptionPolicy from 1.37 (v1alpha3, v1beta1).
# (api_version, kind) -> (plural, group, whether the plugin writes spec.preemptionPolicy)
PRIORITY_ADMITTED: dict[tuple[str, str], tuple[str, str, bool]] = {
    ("v1", "Pod"): ("pods", "", True),
    ("scheduling.k8s.io/v1alpha2", "PodGroup"): ("podgroups", "scheduling.k8s.io", False),
    ("scheduling.k8s.io/v1alpha3", "PodGroup"): ("podgroups", "scheduling.k8s.io", True),
    ("scheduling.k8s.io/v1beta1", "PodGroup"): ("podgroups", "scheduling.k8s.io", True),
}


def resolve_priority(obj: Obj, classes: PriorityClasses, api_version: str = "v1", kind: str = "Pod") -> Obj:
    """The Priority admission plugin on a create of a pod (or another kind of `PRIORITY_ADMITTED`);
    Rejected(403) as the plugin refuses."""
    plural, group, with_policy = PRIORITY_ADMITTED[(api_version, kind)]
    where = "pod spec" if kind == "Pod" else f"{kind} spec"
    spec = _dict(obj.get("spec"))
    class_name = spec.get("priorityClassName") or ""
    name = _name(obj)
    if class_name:
        chosen = classes.get(str(class_name))
        if chosen is None:
            raise forbidden(plural, group, name, f"no PriorityClass with name {class_name} was found")
        priority, policy = int(chosen.get("value", 0)), chosen.get("preemptionPolicy")
    else:
        chosen = global_default(classes)
        if chosen is not None:
            class_name = _name(chosen)
            priority, policy = int(chosen.get("value", 0)), chosen.get("preemptionPolicy")
        else:
            priority, policy = 0, "PreemptLowerPriority"
    written = spec.get("priority")
    if written is not None and written != priority:
        raise forbidden(plural, group, name, f"the integer value of priority ({written}) must not be provided in "
                                             f"{where}; priority admission controller computed {priority} from the "
                                             "given PriorityClass name")
    new_spec = {**spec, "priority": priority}
    if class_name:
        new_spec["priorityClassName"] = class_name
    if policy and with_policy:
        written_policy = spec.get("preemptionPolicy")
        if written_policy and written_policy != policy:
            raise forbidden(plural, group, name, f"the string value of PreemptionPolicy ({written_policy}) must not "
                                                 f"be provided in {where}; priority admission controller computed "
                                                 f"{policy} from the given PriorityClass name")
        new_spec["preemptionPolicy"] = policy
    return {**obj, "spec": new_spec}


POD_GROUP_PROTECTION = "scheduling.k8s.io/podgroup-protection"
# The Workload API's PodGroup at every version a cluster serves it (1.36's v1alpha2, 1.37's v1alpha3 and v1beta1).
WORKLOAD_POD_GROUPS = frozenset({("scheduling.k8s.io/v1alpha2", "PodGroup"), ("scheduling.k8s.io/v1alpha3", "PodGroup"),
                                 ("scheduling.k8s.io/v1beta1", "PodGroup")})


def with_finalizer(obj: Obj, finalizer: str) -> Obj:
    """`obj` with `finalizer` last in its `metadata.finalizers` (unchanged if it is there already), as the
    protection admission plugins write it."""
    meta = _dict(obj.get("metadata"))
    finalizers = list(meta.get("finalizers") or [])
    if finalizer in finalizers:
        return obj
    return {**obj, "metadata": {**meta, "finalizers": [*finalizers, finalizer]}}


def admit_pod_group_protection(api_version: str, kind: str, obj: Obj) -> Obj:
    """The PodGroupProtection admission plugin on a create: a Workload API PodGroup gets its protection
    finalizer; any other object is left as it is."""
    if (api_version, kind) not in WORKLOAD_POD_GROUPS:
        return obj
    return with_finalizer(obj, POD_GROUP_PROTECTION)


def _tolerates(tolerations: list[Any], key: str) -> bool:
    return any(isinstance(t, dict) and t.get("key") in (key, "", None) and t.get("effect") in ("NoExecute", "", None)
               for t in tolerations)


def default_toleration_seconds(pod: Obj) -> Obj:
    """The DefaultTolerationSeconds admission plugin on a pod create."""
    spec = _dict(pod.get("spec"))
    tolerations = list(spec.get("tolerations") or [])
    added = [{"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": DEFAULT_TOLERATION_SECONDS}
             for key in (NOT_READY, UNREACHABLE) if not _tolerates(tolerations, key)]
    if not added:
        return pod
    return {**pod, "spec": {**spec, "tolerations": tolerations + added}}


def _label_keys_merged(term: Any, labels: Obj) -> Any:
    if not isinstance(term, dict) or not isinstance(term.get("labelSelector"), dict):
        return term  # a nil selector selects no pod: nothing to merge into
    added = [{"key": key, "operator": operator, "values": [labels[key]]}
             for field, operator in (("matchLabelKeys", "In"), ("mismatchLabelKeys", "NotIn"))
             for key in term.get(field) or [] if isinstance(key, str) and isinstance(labels.get(key), str)]
    if not added:
        return term
    selector = term["labelSelector"]
    return {**term, "labelSelector": {**selector, "matchExpressions": [*(selector.get("matchExpressions") or []),
                                                                        *added]}}


def merge_label_keys(pod: Obj) -> Obj:
    """The pod strategy's create steps for pod (anti-)affinity (MatchLabelKeysInPodAffinity, on by default
    since 1.31) and topology spread constraints (MatchLabelKeysInPodTopologySpreadSelectorMerge, on by
    default since 1.34): each term's or constraint's `matchLabelKeys` become `key In (the pod's value)`
    and a term's `mismatchLabelKeys` `key NotIn (the pod's value)` in its labelSelector, for the keys the
    pod carries."""
    spec = _dict(pod.get("spec"))
    labels = _dict(_dict(pod.get("metadata")).get("labels"))
    spreads = spec.get("topologySpreadConstraints")
    if isinstance(spreads, list) and spreads_have_label_keys(spreads):
        spec = {**spec, "topologySpreadConstraints": [_label_keys_merged(c, labels) for c in spreads]}
        pod = {**pod, "spec": spec}
    affinity = spec.get("affinity")
    if not isinstance(affinity, dict) or not has_label_keys(affinity):
        return pod
    merged = dict(affinity)
    required = "requiredDuringSchedulingIgnoredDuringExecution"
    preferred = "preferredDuringSchedulingIgnoredDuringExecution"
    for name in ("podAffinity", "podAntiAffinity"):
        part = affinity.get(name)
        if not isinstance(part, dict):
            continue
        copied = dict(part)
        if isinstance(part.get(required), list):
            copied[required] = [_label_keys_merged(term, labels) for term in part[required]]
        if isinstance(part.get(preferred), list):
            copied[preferred] = [{**weighted, "podAffinityTerm": _label_keys_merged(weighted.get("podAffinityTerm"),
                                                                                     labels)}
                                 if isinstance(weighted, dict) else weighted for weighted in part[preferred]]
        merged[name] = copied
    return {**pod, "spec": {**spec, "affinity": merged}}


def spreads_have_label_keys(spreads: list[Any]) -> bool:
    """Whether a topology spread constraint of `spreads` names matchLabelKeys."""
    return any(isinstance(c, dict) and c.get("matchLabelKeys") for c in spreads)


def needs_label_keys_merged(spec: Any) -> bool:
    """Whether `merge_label_keys` changes a pod of this spec (its result then depends on the pod's labels)."""
    spec = _dict(spec)
    affinity, spreads = spec.get("affinity"), spec.get("topologySpreadConstraints")
    return ((isinstance(affinity, dict) and has_label_keys(affinity))
            or (isinstance(spreads, list) and spreads_have_label_keys(spreads)))


def has_label_keys(affinity: Obj) -> bool:
    """Whether a pod (anti-)affinity term of `affinity` names matchLabelKeys or mismatchLabelKeys."""
    for name in ("podAffinity", "podAntiAffinity"):
        part = _dict(affinity.get(name))
        terms = [*(part.get("requiredDuringSchedulingIgnoredDuringExecution") or []),
                 *(_dict(w).get("podAffinityTerm") for w in part.get("preferredDuringSchedulingIgnoredDuringExecution")
                   or [])]
        if any(isinstance(t, dict) and (t.get("matchLabelKeys") or t.get("mismatchLabelKeys")) for t in terms):
            return True
    return False


def check_single_default(priority_class: Obj, classes: PriorityClasses) -> None:
    """The PriorityClass admission plugin: only one class may be globalDefault."""
    if not priority_class.get("globalDefault"):
        return
    name = _name(priority_class)
    for other in classes.values():
        if other.get("globalDefault") and _name(other) != name:
            raise forbidden("priorityclasses", "scheduling.k8s.io", name, f"PriorityClass {_name(other)} is already "
                                                                          "marked as default. Only one default can "
                                                                          "exist")


# --------------------------------------------------------------------------- writes


def _invalid(kind: str, group: str, obj: Obj, causes: list[Cause]) -> Rejected:
    name = _name(obj)
    text = "; ".join(f"{field}: {message}" if field else message for _, field, message in causes)
    if len(causes) > 1:
        text = "[" + ", ".join(f"{field}: {message}" if field else message for _, field, message in causes) + "]"
    title = f"{kind}.{group}" if group else kind
    return Rejected(422, "Invalid", f'{title} "{name}" is invalid: {text}', causes)


def admit_create(api_version: str, kind: str, obj: Obj, classes: PriorityClasses) -> Obj:
    """A create as the API server runs it; returns the object to store, or raises Rejected."""
    obj = decode(api_version, kind, obj)
    if (api_version, kind) == ("v1", "Pod"):
        obj = merge_label_keys(default_toleration_seconds(resolve_priority(obj, classes)))
    elif (api_version, kind) in PRIORITY_ADMITTED:
        obj = resolve_priority(obj, classes, api_version, kind)
    elif (api_version, kind) == ("scheduling.k8s.io/v1", "PriorityClass"):
        check_single_default(obj, classes)
    causes = validate(api_version, kind, obj)
    if causes:
        raise _invalid(kind, api_version.rpartition("/")[0], obj, causes)
    return obj


def admit_update(api_version: str, kind: str, obj: Obj, old: Obj, classes: PriorityClasses) -> Obj:
    """An update (PUT, PATCH, apply) as the API server runs it; returns the object to store, or raises Rejected."""
    obj = decode(api_version, kind, obj)
    if (api_version, kind) == ("scheduling.k8s.io/v1", "PriorityClass"):
        check_single_default(obj, classes)
    causes = validate(api_version, kind, obj, old)
    if causes:
        raise _invalid(kind, api_version.rpartition("/")[0], obj, causes)
    return obj


class SpecMemo:
    """Pod specs `load_object` already loaded, for the next pod with the very same spec (a scenario's
    pods are copies of a few templates, so defaulting, priority, tolerations and the spec's validation
    run once per template, not once per pod): the spec as stored and the warnings the spec alone earns,
    by the spec's msgpack bytes (which keep every type apart: 1, 1.0, "1" and True differ). Only valid
    for one set of PriorityClasses: whoever passes it calls `clear()` when they change. The specs it
    hands out are shared between the pods: like everything here, nobody mutates them."""

    def __init__(self) -> None:
        self._specs: dict[bytes, tuple[Obj, list[str], list[str]]] = {}

    def clear(self) -> None:
        self._specs.clear()

    def get(self, spec: Any) -> tuple[bytes | None, tuple[Obj, list[str], list[str]] | None]:
        try:
            key = _msgpack.encode(spec)
        except (TypeError, ValueError, OverflowError, RecursionError):  # a value msgpack cannot hold: not remembered
            return None, None
        return key, self._specs.get(key)

    def put(self, key: bytes, loaded: tuple[Obj, list[str], list[str]]) -> None:
        self._specs[key] = loaded


_msgpack = msgspec.msgpack.Encoder()


def _refusals(causes: list[Cause]) -> list[str]:
    return [f"a real API server refuses it: {field}: {message}" for _, field, message in causes]


def _load_pod_spec(pod: Obj, classes: PriorityClasses) -> tuple[Obj, list[str], list[str]]:
    """A pod's spec as stored (defaults, priority, default tolerations), the priority plugin's refusal
    as a warning, and the spec's validation as warnings: what depends on the spec alone (the name only
    shows in the refusal's prefix, which the warning drops)."""
    obj = decode("v1", "Pod", pod)
    priority_warnings: list[str] = []
    spec = _dict(obj.get("spec"))
    if spec.get("priority") is None or spec.get("priorityClassName"):
        try:
            obj = resolve_priority(obj, classes)
        except Rejected as refusal:
            priority_warnings.append(f"a real API server refuses it: {refusal.message.partition(': ')[2]}")
    obj = default_toleration_seconds(obj)
    spec = obj["spec"]
    return spec, priority_warnings, _refusals(validate_pod(spec))


def load_object(api_version: str, kind: str, obj: Obj, classes: PriorityClasses,
                memo: SpecMemo | None = None) -> Loaded:
    """An object read from a scenario, as a cluster would hold it; Rejected only if it cannot be decoded.
    `memo` (pods only) remembers specs already loaded against the same `classes` (`SpecMemo`)."""
    if (api_version, kind) != ("v1", "Pod"):
        obj = decode(api_version, kind, obj)
        warnings: list[str] = []
        spec = _dict(obj.get("spec"))
        if (api_version, kind) in PRIORITY_ADMITTED and (spec.get("priority") is None or spec.get("priorityClassName")):
            try:
                obj = resolve_priority(obj, classes, api_version, kind)
            except Rejected as refusal:
                warnings.append(f"a real API server refuses it: {refusal.message.partition(': ')[2]}")
        return Loaded(obj, warnings + _refusals(validate(api_version, kind, obj)))
    raw = obj.get("spec")
    if needs_label_keys_merged(raw):  # the stored spec depends on the pod's labels
        memo = None
        obj = merge_label_keys(obj)
        raw = obj.get("spec")
    key, loaded = memo.get(raw) if memo is not None and ": " not in _name(obj) else (None, None)
    if loaded is None:
        loaded = _load_pod_spec({"metadata": obj.get("metadata"), "spec": raw}, classes)
        if key is not None and memo is not None:
            memo.put(key, loaded)
    spec, priority_warnings, spec_warnings = loaded
    return Loaded({**obj, "spec": spec}, priority_warnings + _refusals(validate_metadata(obj)) + spec_warnings)
