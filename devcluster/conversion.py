"""Conversion between a stored resource and another API version that views the same objects.

`events.k8s.io/v1` Events are the core `v1` Events seen through other field names, as on a real
cluster: an event written through either API is listed, watched and described through both. The
store keeps the core form; this module renames fields on the way in and out (the rules of
k8s.io/kubernetes pkg/apis/events/v1 conversion: regarding = involvedObject, note = message,
reportingController = reportingComponent, deprecatedSource/FirstTimestamp/LastTimestamp/Count =
source/firstTimestamp/lastTimestamp/count).

Pure: returns new dicts, never mutates its input.
"""

from __future__ import annotations

from typing import Any

from devcluster.resources import ResourceDef

Obj = dict[str, Any]

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


def to_view(resource: ResourceDef, stored: Obj) -> Obj:
    """A stored (core v1) object as `resource` presents it."""
    view = {k: v for k, v in stored.items() if k not in _CORE_NAMES}
    for core, name in _EVENT_FIELDS:
        if core in stored:
            view[name] = stored[core]
    view["apiVersion"], view["kind"] = resource.api_version, resource.kind
    return view


def to_storage(storage: ResourceDef, view: Obj) -> Obj:
    """An object written through a view resource, in the stored (core v1) form."""
    stored = {k: v for k, v in view.items() if k not in _VIEW_NAMES}
    for core, name in _EVENT_FIELDS:
        if name in view:
            stored[core] = view[name]
    stored["apiVersion"], stored["kind"] = storage.api_version, storage.kind
    return stored
