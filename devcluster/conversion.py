"""Conversion between a stored resource and the other API versions that view the same objects.

A real API server keeps one object per name and serves it at every version of its resource (and, for
Events, under a second group), converting on the way in and out. devcluster does the same for the rows of
`resources.RESOURCES` with a `stored_as`: the store keeps the storage form, and this module converts, one
pair of functions per viewing (apiVersion, kind):

- `events.k8s.io/v1` Event over core `v1` Event (k8s.io/kubernetes pkg/apis/events/v1 conversion:
  regarding = involvedObject, note = message, reportingController = reportingComponent,
  deprecatedSource/FirstTimestamp/LastTimestamp/Count = source/firstTimestamp/lastTimestamp/count);
- `scheduling.k8s.io/v1alpha2` (1.36) and `v1alpha3` (1.37) PodGroup over `v1beta1` (1.37): v1alpha3 has
  v1beta1's fields; v1alpha2 writes disruptionMode as a string ("Pod" = {single: {}}, "PodGroup" =
  {all: {}}) and the workload reference as podGroupTemplateRef.workload.{workloadName,
  podGroupTemplateName} (= workloadRef.{workloadName, templateName}), and has no
  parentCompositePodGroupName nor preemptionPolicy: an object read through it does not show them, and a
  write through it keeps the stored ones.
- `scheduling.k8s.io/v1alpha3` (1.37), `v1alpha2` (1.36) and `v1alpha1` (1.35) Workload over `v1beta1` (1.37).
  v1alpha3 has v1beta1's fields. v1alpha2 writes a template's disruptionMode as PodGroup v1alpha2 does and
  has no template preemptionPolicy nor compositePodGroupTemplates. v1alpha1 is the 1.35 shape,
  podGroups[] {name, policy}: each is podGroupTemplates[] {name, schedulingPolicy} of the same name and
  order. It is a view, not a resource of its own, because every v1alpha1 field has a v1beta1 form (the
  conversion is faithful one way) and the daemon and pods (spec.workloadRef) still name v1alpha1 Workloads:
  one object per name, whichever version wrote it. What v1alpha1 cannot say (a template's constraints,
  claims, disruption mode, priority, preemption policy; composite templates) is not shown through it, and a
  write through it keeps it as stored for the templates it names; a template it drops is dropped. The
  rules differ as the versions do: minCount is immutable through v1alpha1 and v1alpha2 (their validation
  runs first), mutable through v1beta1 and v1alpha3.

Pure: returns new dicts, never mutates its input.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from devcluster.resources import ResourceDef

Obj = dict[str, Any]


class Conversion(NamedTuple):
    """How one viewing version reads and writes the stored objects (apiVersion and kind set by the caller)."""

    to_view: Callable[[Obj], Obj]  # stored -> view
    to_storage: Callable[[Obj, Obj | None], Obj]  # (view, the stored object it replaces, if any) -> stored


# --------------------------------------------------------------------------- events.k8s.io/v1 Event

# (core v1 field, events.k8s.io/v1 field)
_EVENT_FIELDS = (
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("reportingComponent", "reportingController"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
)
_CORE_NAMES = frozenset(core for core, _ in _EVENT_FIELDS)
_VIEW_NAMES = frozenset(view for _, view in _EVENT_FIELDS)


def _event_view(stored: Obj) -> Obj:
    view = {k: v for k, v in stored.items() if k not in _CORE_NAMES}
    for core, name in _EVENT_FIELDS:
        if core in stored:
            view[name] = stored[core]
    return view


def _event_storage(view: Obj, _: Obj | None) -> Obj:
    stored = {k: v for k, v in view.items() if k not in _VIEW_NAMES}
    for core, name in _EVENT_FIELDS:
        if name in view:
            stored[core] = view[name]
    return stored


# --------------------------------------------------------------------------- scheduling.k8s.io PodGroup

_DISRUPTION_MODES = (("Pod", "single"), ("PodGroup", "all"))  # (v1alpha2 string, v1beta1 union member)
_WORKLOAD_NAMES = (("workloadName", "workloadName"), ("podGroupTemplateName", "templateName"))  # (v1alpha2, v1beta1)
_NEWER_ONLY = ("parentCompositePodGroupName", "preemptionPolicy")  # not in v1alpha2


def _disruption_mode_as_text(stored: Obj, out: Obj) -> None:
    """Write into `out` the v1alpha2 string of `stored`'s 1.37 disruptionMode union (`{single: {}}` is
    "Pod", `{all: {}}` "PodGroup"); nothing for a mode naming neither."""
    mode = stored.get("disruptionMode")
    if isinstance(mode, dict):
        for text, member in _DISRUPTION_MODES:
            if mode.get(member) is not None:
                out["disruptionMode"] = text
                return


def _disruption_mode_as_union(view: Obj, out: Obj) -> None:
    """Write into `out` the 1.37 union of `view`'s v1alpha2 disruptionMode string; a value v1alpha2 cannot
    name (its validation refuses it) is not stored."""
    mode = view.get("disruptionMode")
    for text, member in _DISRUPTION_MODES:
        if mode == text:
            out["disruptionMode"] = {member: {}}


def _dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _pod_group_v1alpha2_view(stored: Obj) -> Obj:
    spec = stored.get("spec")
    if not isinstance(spec, dict):
        return dict(stored)
    out = {k: v for k, v in spec.items() if k not in ("workloadRef", "disruptionMode", *_NEWER_ONLY)}
    ref = spec.get("workloadRef")
    if isinstance(ref, dict):
        out["podGroupTemplateRef"] = {"workload": {old: ref[new] for old, new in _WORKLOAD_NAMES if new in ref}}
    _disruption_mode_as_text(spec, out)
    return {**stored, "spec": out}


def _pod_group_v1alpha2_storage(view: Obj, stored: Obj | None) -> Obj:
    spec = view.get("spec")
    if not isinstance(spec, dict):
        return dict(view)
    out = {k: v for k, v in spec.items() if k not in ("podGroupTemplateRef", "disruptionMode", *_NEWER_ONLY)}
    ref = spec.get("podGroupTemplateRef")
    if isinstance(ref, dict):
        workload = _dict(ref.get("workload"))
        out["workloadRef"] = {new: workload[old] for old, new in _WORKLOAD_NAMES if old in workload}
    _disruption_mode_as_union(spec, out)
    kept = _dict(_dict(stored).get("spec"))
    for name in _NEWER_ONLY:  # what v1alpha2 does not show stays as stored
        if name in kept:
            out[name] = kept[name]
    return {**view, "spec": out}


# --------------------------------------------------------------------------- scheduling.k8s.io Workload

_TEMPLATES_1_37_ONLY = ("compositePodGroupTemplates",)  # spec fields v1alpha2 and v1alpha1 do not have
_TEMPLATE_1_37_ONLY = ("preemptionPolicy",)  # template fields v1alpha2 does not have


def _templates_by_name(stored: Obj | None) -> dict[str, Obj]:
    spec = _dict(_dict(stored).get("spec"))
    templates = spec.get("podGroupTemplates")
    return {str(t.get("name")): t for t in templates if isinstance(t, dict)} if isinstance(templates, list) else {}


def _spec_kept(out: Obj, stored: Obj | None) -> Obj:
    """`out` with the stored spec fields its version does not have."""
    kept = _dict(_dict(stored).get("spec"))
    return {**out, **{name: kept[name] for name in _TEMPLATES_1_37_ONLY if name in kept}}


def _template_v1alpha2_view(template: Any) -> Any:
    if not isinstance(template, dict):
        return template
    out = {k: v for k, v in template.items() if k not in ("disruptionMode", *_TEMPLATE_1_37_ONLY)}
    _disruption_mode_as_text(template, out)
    return out


def _template_v1alpha2_storage(template: Any, stored: dict[str, Obj]) -> Any:
    if not isinstance(template, dict):
        return template
    out = {k: v for k, v in template.items() if k != "disruptionMode"}
    _disruption_mode_as_union(template, out)
    kept = stored.get(str(template.get("name")), {})
    return {**out, **{name: kept[name] for name in _TEMPLATE_1_37_ONLY if name in kept}}


def _workload_v1alpha2_view(stored: Obj) -> Obj:
    spec = stored.get("spec")
    if not isinstance(spec, dict):
        return dict(stored)
    out = {k: v for k, v in spec.items() if k not in _TEMPLATES_1_37_ONLY}
    if isinstance(spec.get("podGroupTemplates"), list):
        out["podGroupTemplates"] = [_template_v1alpha2_view(t) for t in spec["podGroupTemplates"]]
    return {**stored, "spec": out}


def _workload_v1alpha2_storage(view: Obj, stored: Obj | None) -> Obj:
    spec = view.get("spec")
    if not isinstance(spec, dict):
        return dict(view)
    out = dict(spec)
    if isinstance(spec.get("podGroupTemplates"), list):
        kept = _templates_by_name(stored)
        out["podGroupTemplates"] = [_template_v1alpha2_storage(t, kept) for t in spec["podGroupTemplates"]]
    return {**view, "spec": _spec_kept(out, stored)}


def _workload_v1alpha1_view(stored: Obj) -> Obj:
    spec = stored.get("spec")
    if not isinstance(spec, dict):
        return dict(stored)
    out = {k: v for k, v in spec.items() if k not in ("podGroupTemplates", *_TEMPLATES_1_37_ONLY)}
    templates = spec.get("podGroupTemplates")
    if isinstance(templates, list):
        out["podGroups"] = [{"name": t.get("name"), "policy": t.get("schedulingPolicy")} if isinstance(t, dict)
                            else t for t in templates]
    return {**stored, "spec": out}


def _workload_v1alpha1_storage(view: Obj, stored: Obj | None) -> Obj:
    spec = view.get("spec")
    if not isinstance(spec, dict):
        return dict(view)
    out = {k: v for k, v in spec.items() if k != "podGroups"}
    groups = spec.get("podGroups")
    if isinstance(groups, list):
        kept = _templates_by_name(stored)
        out["podGroupTemplates"] = [
            {**kept.get(str(g.get("name")), {}), "name": g.get("name"), "schedulingPolicy": g.get("policy")}
            if isinstance(g, dict) else g for g in groups]
    return {**view, "spec": _spec_kept(out, stored)}


def _same_fields(obj: Obj, _: Obj | None = None) -> Obj:
    return dict(obj)


_CONVERSIONS: dict[tuple[str, str], Conversion] = {
    ("events.k8s.io/v1", "Event"): Conversion(_event_view, _event_storage),
    ("scheduling.k8s.io/v1alpha2", "PodGroup"): Conversion(_pod_group_v1alpha2_view, _pod_group_v1alpha2_storage),
    ("scheduling.k8s.io/v1alpha3", "PodGroup"): Conversion(_same_fields, _same_fields),
    ("scheduling.k8s.io/v1alpha3", "Workload"): Conversion(_same_fields, _same_fields),
    ("scheduling.k8s.io/v1alpha2", "Workload"): Conversion(_workload_v1alpha2_view, _workload_v1alpha2_storage),
    ("scheduling.k8s.io/v1alpha1", "Workload"): Conversion(_workload_v1alpha1_view, _workload_v1alpha1_storage),
}


def _conversion(resource: ResourceDef) -> Conversion:
    found = _CONVERSIONS.get((resource.api_version, resource.kind))
    if found is None:
        raise KeyError(f"no conversion for {resource.api_version} {resource.kind}")
    return found


def to_view(resource: ResourceDef, stored: Obj) -> Obj:
    """A stored object as the viewing `resource` presents it."""
    view = _conversion(resource).to_view(stored)
    view["apiVersion"], view["kind"] = resource.api_version, resource.kind
    return view


def to_storage(resource: ResourceDef, storage: ResourceDef, view: Obj, stored: Obj | None = None) -> Obj:
    """An object written through the viewing `resource`, in the form `storage` keeps; `stored` is the object it
    replaces (what the view does not show is kept from it)."""
    converted = _conversion(resource).to_storage(view, stored)
    converted["apiVersion"], converted["kind"] = storage.api_version, storage.kind
    return converted
