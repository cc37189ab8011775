"""Sharing what the objects of a cluster have in common, so the state holds each value once.

100,000 pods decoded one by one hold 100,000 copies of their namespace, their scheduler's name,
their label keys, their toleration and their container with its requests: ~2.3 KB a pod, most of it
the same few values again and again. `Compactor.pod` / `Compactor.node` make an object the state
keeps point at one shared copy of each equal part: strings are interned; a container, a list of
tolerations, a set of labels equal to one already held is replaced by that one; empty dicts and
lists by one empty dict and one empty list. A pod then costs ~0.6 KB (measured: the state of
10,000 nodes and 100,000 pods, 400 MiB before, about 100 MiB less after).

The objects are frozen msgspec Structs, so nothing ever changes these parts in place: sharing them
changes no value, only which equal object a field points at (the fields are set with
`msgspec.structs.force_setattr` on the object just decoded, before anyone else reads it), and every
comparison the fold makes is by value. Tables are bounded (`LIMIT` entries each); past that, values
are simply not shared.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import sys
from typing import Any, TypeVar

from msgspec.structs import force_setattr

from events.objects import Condition, Container, ContainerPort, Node, NodeStatus, Pod, PodSpec, PodStatus, Toleration
from events.parts import PodParts, decode_map, decode_spec, decode_status, parts_pod

_Key = TypeVar("_Key")
_Value = TypeVar("_Value")
_Item = TypeVar("_Item", Condition, Toleration)

_EMPTY_DICT: dict[str, str] = {}  # shared: the objects are frozen, nothing adds to it
_EMPTY_LIST: list[Any] = []
# PodSpec list fields nearly every pod leaves empty (besides tolerations and initContainers).
_RARE_SPEC_LISTS = ("scheduling_gates", "topology_spread_constraints", "resource_claims", "volumes")


# A pod's head: apiVersion, kind, namespace, labels, annotations (shared), its number in the table, and the
# number of its head without its labels (apiVersion, kind, namespace, annotations).
_Head = tuple[str, str, str, dict[str, str], dict[str, str], int, int]
# Which pods derive alike (see `ClusterState._derive_pod`): the numbers of a pod's head, its spec and its
# head without labels.
Shape = tuple[int, int, int]


class Compactor:
    __slots__ = ("built", "built_shape", "conditions", "containers", "heads", "labels", "specs", "statuses",
                 "tolerations", "unlabelled")

    LIMIT = 50_000

    def __init__(self) -> None:
        self.labels: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}
        # By (name, requests, ports, restartPolicy) of each container.
        self.containers: dict[tuple[tuple[str, tuple[tuple[str, str], ...], tuple[ContainerPort, ...], str], ...],
                              list[Container]] = {}
        self.tolerations: dict[tuple[Toleration, ...], list[Toleration]] = {}
        # A pending gang's members carry one PodScheduled condition (`events.objects.scheduling_conditions`).
        self.conditions: dict[tuple[Condition, ...], list[Condition]] = {}
        # Parts of pod records by their bytes (`decode`): the head's key is (apiVersion, kind, namespace,
        # labels bytes, annotations bytes); a spec's is its bytes, with its number in the table.
        self.heads: dict[tuple[str, str, str, bytes, bytes], _Head] = {}
        self.unlabelled: dict[tuple[str, str, str, bytes], int] = {}  # heads without labels, numbered
        self.specs: dict[bytes, tuple[PodSpec, int]] = {}
        self.statuses: dict[bytes, PodStatus] = {}
        # The pod `pod_of` built last, already on shared parts, and its shape.
        self.built: Pod | None = None
        self.built_shape: Shape = (0, 0, 0)

    def pod_of(self, parts: PodParts) -> Pod | None:
        """The pod of a record decoded in parts (`events.parts.decode_parts`), built on the parts this
        compactor holds: each distinct spec, status and head is decoded once. The pod is left in `built`
        with its shape in `built_shape` (so `pod` knows it has nothing to share). None when a table is full:
        decode the record whole then (`pod` shares what it can). Raises as `decode_event` does for a part
        that does not decode."""
        meta = parts.metadata
        head_key = (parts.api_version, parts.kind, meta.namespace, bytes(meta.labels), bytes(meta.annotations))
        head = self.heads.get(head_key)
        if head is None:
            if len(self.heads) >= self.LIMIT:
                return None
            intern = sys.intern
            unlabelled_key = (parts.api_version, parts.kind, meta.namespace, head_key[4])
            unlabelled = self.unlabelled.get(unlabelled_key)
            if unlabelled is None:
                unlabelled = self.unlabelled[unlabelled_key] = len(self.unlabelled)
            head = (intern(parts.api_version), intern(parts.kind), intern(meta.namespace),
                    self.labels_of(decode_map(head_key[3])), self.annotations_of(decode_map(head_key[4])),
                    len(self.heads), unlabelled)
            self.heads[head_key] = head
        spec_key = bytes(parts.spec)
        spec_entry = self.specs.get(spec_key)
        if spec_entry is None:
            if len(self.specs) >= self.LIMIT:
                return None
            spec = decode_spec(spec_key)
            self.spec(spec)
            spec_entry = self.specs[spec_key] = (spec, len(self.specs))
        status_key = bytes(parts.status)
        status = self.statuses.get(status_key)
        if status is None:
            if len(self.statuses) >= self.LIMIT:
                return None
            status = self.statuses[status_key] = decode_status(status_key)
            self.status(status)
        pod = self.built = parts_pod(parts, head[0], head[1], head[2], head[3], head[4], spec_entry[0], status)
        self.built_shape = (head[5], spec_entry[1], head[6])
        return pod

    def forget_parts(self) -> None:
        """Drop the tables of record parts `pod_of` keeps (numbering starts again)."""
        self.heads = {}
        self.unlabelled = {}
        self.specs = {}
        self.statuses = {}
        self.built = None

    def pod(self, obj: Pod) -> None:
        """Make `obj` (just decoded, not yet shared with any reader) point at shared copies of its parts."""
        if obj is self.built:  # built by `decode` on shared parts
            return
        intern = sys.intern
        force_setattr(obj, "api_version", intern(obj.api_version))
        force_setattr(obj, "kind", intern(obj.kind))
        meta = obj.metadata
        force_setattr(meta, "namespace", intern(meta.namespace))
        force_setattr(meta, "labels", self.labels_of(meta.labels))
        if not meta.annotations:
            force_setattr(meta, "annotations", _EMPTY_DICT)
        self.spec(obj.spec)
        self.status(obj.status)

    def spec(self, spec: PodSpec) -> None:
        """As `pod`, for a pod's spec alone (a snapshot's table holds specs, each shared by its pods)."""
        intern = sys.intern
        force_setattr(spec, "node_name", intern(spec.node_name))
        force_setattr(spec, "scheduler_name", intern(spec.scheduler_name))
        force_setattr(spec, "priority_class_name", intern(spec.priority_class_name))
        if not spec.node_selector:
            force_setattr(spec, "node_selector", _EMPTY_DICT)
        if not spec.overhead:
            force_setattr(spec, "overhead", _EMPTY_DICT)
        if spec.tolerations:
            force_setattr(spec, "tolerations", self._tolerations(spec.tolerations))
        else:
            force_setattr(spec, "tolerations", _EMPTY_LIST)
        force_setattr(spec, "containers", self._containers(spec.containers))
        if spec.init_containers:
            force_setattr(spec, "init_containers", self._containers(spec.init_containers))
        else:
            force_setattr(spec, "init_containers", _EMPTY_LIST)
        # msgspec gives each decoded pod a list of its own for an absent list field: 56 bytes each, per pod.
        for field in _RARE_SPEC_LISTS:
            if not getattr(spec, field):
                force_setattr(spec, field, _EMPTY_LIST)

    def status(self, status: PodStatus) -> None:
        """As `pod`, for a pod's status alone."""
        force_setattr(status, "phase", sys.intern(status.phase))
        # Each decoded empty list is an object of its own (~56 bytes a pod each); the shared one is never changed.
        if not status.conditions:
            force_setattr(status, "conditions", _EMPTY_LIST)
        else:
            force_setattr(status, "conditions", self._conditions(status.conditions))
        if not status.container_statuses:
            force_setattr(status, "container_statuses", _EMPTY_LIST)
        if not status.init_container_statuses:
            force_setattr(status, "init_container_statuses", _EMPTY_LIST)

    def annotations_of(self, annotations: dict[str, str]) -> dict[str, str]:
        """`annotations`, or the one shared empty dict when there are none."""
        return annotations if annotations else _EMPTY_DICT

    def node(self, obj: Node) -> None:
        """As `pod`, for a node: its labels (topology keys and values) and allocatable."""
        intern = sys.intern
        force_setattr(obj, "api_version", intern(obj.api_version))
        force_setattr(obj, "kind", intern(obj.kind))
        meta = obj.metadata
        force_setattr(meta, "name", intern(meta.name))  # the same string as the pods' spec.nodeName
        force_setattr(meta, "labels", {intern(key): intern(value) for key, value in meta.labels.items()})
        if not meta.annotations:
            force_setattr(meta, "annotations", _EMPTY_DICT)
        self.node_status(obj.status)

    def node_status(self, status: NodeStatus) -> None:
        """As `node`, for a node's status alone (a snapshot's node table holds statuses, each shared by its
        nodes): its allocatable resource names and quantities interned."""
        intern = sys.intern
        force_setattr(status, "allocatable", {intern(key): intern(value) for key, value in status.allocatable.items()})

    def labels_of(self, labels: dict[str, str]) -> dict[str, str]:
        """The shared copy of a pod's label set (interned keys and values)."""
        if not labels:
            return _EMPTY_DICT
        key = tuple(labels.items())
        shared = self.labels.get(key)
        if shared is None:
            intern = sys.intern
            shared = {intern(name): intern(value) for name, value in labels.items()}
            _remember(self.labels, key, shared)
        return shared

    def _containers(self, containers: list[Container]) -> list[Container]:
        if not containers:
            return _EMPTY_LIST
        if len(containers) == 1:  # the usual pod: no generator for one container
            only = containers[0]
            key: tuple[tuple[str, tuple[tuple[str, str], ...], tuple[ContainerPort, ...], str], ...] = (
                (only.name, tuple(only.resources.requests.items()), tuple(only.ports), only.restart_policy),)
        else:
            key = tuple((container.name, tuple(container.resources.requests.items()), tuple(container.ports),
                         container.restart_policy) for container in containers)
        shared = self.containers.get(key)
        if shared is None:
            intern = sys.intern
            for container in containers:
                force_setattr(container, "name", intern(container.name))
                requests = {intern(name): intern(value) for name, value in container.resources.requests.items()}
                force_setattr(container.resources, "requests", requests)
            shared = containers
            _remember(self.containers, key, shared)
        return shared

    def _conditions(self, conditions: list[Condition]) -> list[Condition]:
        return _shared_list(self.conditions, conditions, ("type", "status", "reason", "message"))

    def _tolerations(self, tolerations: list[Toleration]) -> list[Toleration]:
        return _shared_list(self.tolerations, tolerations, ("key", "operator", "value", "effect"))


def _shared_list(table: dict[tuple[_Item, ...], list[_Item]], items: list[_Item], fields: tuple[str, ...]
                 ) -> list[_Item]:
    """The list `table` holds equal to `items` (frozen structs); the first time, `items` itself, its `fields`
    (strings) interned."""
    key = tuple(items)
    shared = table.get(key)
    if shared is None:
        intern = sys.intern
        for item in items:
            for field in fields:
                force_setattr(item, field, intern(getattr(item, field)))
        shared = items
        _remember(table, key, shared)
    return shared


def _remember(table: dict[_Key, _Value], key: _Key, value: _Value) -> None:
    if len(table) < Compactor.LIMIT:
        table[key] = value
