"""The pods of a snapshot as tables: each shared part once, each pod a short row pointing at them.

A cluster's pods repeat themselves: 100,000 pods hold a few dozen distinct specs per node they run
on, one label set per gang and one status per phase. Written one by one (the snapshot format before
this one), a 10k-node / 100k-pod snapshot is ~44 MB of pods that a restart decodes into 100,000 full
object trees, then shares their equal parts again (`state.compact`), ~0.45 s of CPU. Here each
distinct part is written once and a pod is a row of indexes into the tables plus what is its own
(name, uid, resourceVersion, deletion stamp, and the scheduler's own record of it); rows are
array-like, so decoding them is a few C calls each, and rebuilding a pod is one `ObjectMeta` and one
`Pod` pointing at the shared parts: the parts are shared by construction, nothing to compact.

- `PodHead`: apiVersion, kind, namespace, labels, annotations (a gang's pods share one).
- specs: whole `PodSpec`s (pods of one shape on one node share one; specs are frozen Structs, so a
  shared one can never change under another pod).
- statuses: whole `PodStatus`es.

The tables are built from values (each part's msgpack encoding is its key), in the order the pods
come (the state passes them sorted by key), so equal states give equal bytes.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from typing import Annotated, TypeVar

import msgspec

from events.objects import Int64, ObjectMeta, Pod, PodSpec, PodStatus
from state.compact import Compactor

Index = Annotated[int, msgspec.Meta(ge=0)]
_Part = TypeVar("_Part")


class PodHead(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """What the pods of one gang (namespace, labels, annotations) have in common."""

    api_version: str
    kind: str
    namespace: str
    labels: dict[str, str]
    annotations: dict[str, str]


class PodRow(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """One pod: its own fields, indexes into the tables, and the scheduler's record of it."""

    name: str
    uid: str
    resource_version: str
    head: Index
    spec: Index
    status: Index
    first_seen: float
    bound_at: float | None = None
    eviction_requested: bool = False
    bound_node: str = ""
    deletion_timestamp: str | None = None
    deletion_grace_period_seconds: Int64 | None = None


class PodTable(msgspec.Struct, frozen=True, array_like=True, gc=False):
    heads: list[PodHead] = []
    specs: list[PodSpec] = []
    statuses: list[PodStatus] = []
    rows: list[PodRow] = []


PodEntry = tuple[Pod, float, float | None, bool, str]  # pod, first_seen, bound_at, eviction_requested, bound_node


def pod_table(entries: Iterable[PodEntry]) -> PodTable:
    """The table of `entries` (in the order given, which is the order `pods_of` gives them back). Parts are
    told apart by value (their encoding); a part object already seen (pods built on shared parts, as the
    fold and the restore build them) is found by identity first, without encoding it again."""
    encode = msgspec.msgpack.encode
    heads: dict[bytes, int] = {}
    specs: dict[bytes, int] = {}
    statuses: dict[bytes, int] = {}
    # By identity: `kept` holds every pod until the end of the call, so no id is reused meanwhile.
    kept: list[Pod] = []
    head_ids: dict[tuple[int, int, str, str, str], int] = {}
    spec_ids: dict[int, int] = {}
    status_ids: dict[int, int] = {}
    head_list: list[PodHead] = []
    spec_list: list[PodSpec] = []
    status_list: list[PodStatus] = []
    rows: list[PodRow] = []
    for obj, first_seen, bound_at, eviction_requested, bound_node in entries:
        kept.append(obj)
        meta = obj.metadata
        head_id = (id(meta.labels), id(meta.annotations), meta.namespace, obj.api_version, obj.kind)
        head_index = head_ids.get(head_id)
        if head_index is None:
            head = PodHead(obj.api_version, obj.kind, meta.namespace, meta.labels, meta.annotations)
            head_index = heads.setdefault(encode(head), len(head_list))
            if head_index == len(head_list):
                head_list.append(head)
            head_ids[head_id] = head_index
        spec_index = spec_ids.get(id(obj.spec))
        if spec_index is None:
            spec_index = spec_ids[id(obj.spec)] = _number(obj.spec, specs, spec_list)
        status_index = status_ids.get(id(obj.status))
        if status_index is None:
            status_index = status_ids[id(obj.status)] = _number(obj.status, statuses, status_list)
        rows.append(PodRow(meta.name, meta.uid, meta.resource_version, head_index, spec_index, status_index,
                           first_seen, bound_at, eviction_requested, bound_node, meta.deletion_timestamp,
                           meta.deletion_grace_period_seconds))
    return PodTable(head_list, spec_list, status_list, rows)


def _number(part: _Part, numbers: dict[bytes, int], parts: list[_Part]) -> int:
    """The number of `part` in `parts` by its value (its encoding), appended if new."""
    number = numbers.setdefault(msgspec.msgpack.encode(part), len(parts))
    if number == len(parts):
        parts.append(part)
    return number


def shared_parts(table: PodTable, compactor: Compactor) -> tuple[list[PodHead], list[PodSpec], list[PodStatus]]:
    """The table's heads, specs and statuses, compacted once each (strings interned, label sets and
    containers shared with the pods that later events bring)."""
    intern = sys.intern
    heads = [PodHead(intern(head.api_version), intern(head.kind), intern(head.namespace),
                     compactor.labels_of(head.labels), compactor.annotations_of(head.annotations))
             for head in table.heads]
    for spec in table.specs:
        compactor.spec(spec)
    for status in table.statuses:
        compactor.status(status)
    return heads, table.specs, table.statuses


def pods_of(table: PodTable, compactor: Compactor) -> Iterator[tuple[Pod, PodRow]]:
    """Each row's pod, rebuilt on the shared parts (raises IndexError on an index past its table)."""
    heads, specs, statuses = shared_parts(table, compactor)
    for row in table.rows:
        yield pod_of(row, heads[row.head], specs[row.spec], statuses[row.status]), row


def pod_of(row: PodRow, head: PodHead, spec: PodSpec, status: PodStatus) -> Pod:
    """The pod of `row`, on its (shared) parts."""
    meta = ObjectMeta(name=row.name, namespace=head.namespace, uid=row.uid, resource_version=row.resource_version,
                      labels=head.labels, annotations=head.annotations, deletion_timestamp=row.deletion_timestamp,
                      deletion_grace_period_seconds=row.deletion_grace_period_seconds)
    return Pod(api_version=head.api_version, kind=head.kind, metadata=meta, spec=spec, status=status)
