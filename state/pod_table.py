"""The pods of a snapshot as tables: each shared part once, each pod a few numbers pointing at them.

A cluster's pods repeat themselves: 100,000 pods hold a few dozen distinct specs per node they run
on, one label set per gang and one status per phase. Written one by one (version 1), a 10k-node /
100k-pod snapshot is ~44 MB of pods that a restart decodes into 100,000 full object trees, then
shares their equal parts again (`state.compact`), ~0.45 s of CPU. Here each distinct part is written
once, and what is each pod's own (name, uid, resourceVersion, deletion stamp, and the scheduler's own
record of it) is written as columns: rebuilding a pod is one `ObjectMeta` and one `Pod` pointing at
the shared parts, which are shared by construction, nothing to compact.

- `PodHead`: apiVersion, kind, namespace, labels, annotations (a gang's pods share one).
- specs: whole `PodSpec`s (pods of one shape on one node share one; specs are frozen Structs, so a
  shared one can never change under another pod).
- statuses: whole `PodStatus`es.
- per pod, as columns (version 3): its strings as lists; its numbers, generations and times packed into one bytes
  object per column, which decodes without a Python object per pod (version 2 wrote a row Struct per
  pod: decoding the table and reading each pod's own fields back took ~59 ms at 100k pods, ~47 ms now).

The tables are built from values (each part's msgpack encoding is its key), in the order the pods
come (the state passes them sorted by key), so equal states give equal bytes.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import struct
import sys
from array import array
from collections.abc import Iterable, Iterator
from typing import Annotated, Any, TypeVar

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
    """One pod of a version-2 table (`PodRowTable`): its own fields, indexes into the tables, and the
    scheduler's record of it."""

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


class PodRowTable(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """The pod tables of a version-2 snapshot: a row per pod. Still restored (`columns_of_rows`)."""

    heads: list[PodHead] = []
    specs: list[PodSpec] = []
    statuses: list[PodStatus] = []
    rows: list[PodRow] = []


class PodDeleting(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """A pod being deleted (rare, so listed apart): its number, deletionTimestamp, grace period."""

    number: Index
    timestamp: str
    grace_period_seconds: Int64 | None = None


class PodTable(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """The pods as columns, pod number n being the n-th entry of each (version 3).

    Numbers (which head, spec and status; which bound node) are packed unsigned 32-bit integers and times
    packed 64-bit floats, both little-endian: decoded as one bytes object each, with no Python object per
    pod until a restore reads them. `bound_at` is NaN where the pod was not bound by us. What is rare (a
    requested eviction, a deletion under way) is listed apart by pod number."""

    heads: list[PodHead] = []
    specs: list[PodSpec] = []
    statuses: list[PodStatus] = []
    names: list[str] = []
    uids: list[str] = []
    resource_versions: list[str] = []
    head: bytes = b""
    spec: bytes = b""
    status: bytes = b""
    first_seen: bytes = b""
    bound_at: bytes = b""
    # The nodes our bindings named (each once; "" first, for the pods bound by no binding of ours yet seen).
    bound_nodes: list[str] = msgspec.field(default_factory=lambda: [""])
    bound_node: bytes = b""
    evicting: list[Index] = []
    deleting: list[PodDeleting] = []
    # Each pod's metadata.generation, packed signed 64-bit integers; empty in a snapshot written before it was
    # kept (its pods read as generation 0, not said, until their next update).
    generation: bytes = b""

    def head_of(self, number: int) -> int:
        """The number of pod `number`'s head (IndexError past the pods)."""
        if number >= len(self.names):
            raise IndexError(f"pod number {number} of {len(self.names)}")
        head: int = struct.unpack_from("<I", self.head, 4 * number)[0]
        return head


PodEntry = tuple[Pod, float, float | None, bool, str]  # pod, first_seen, bound_at, eviction_requested, bound_node
# What `columns` gives per pod: name, uid, resourceVersion, head, spec, status, first_seen, bound_at,
# bound_node, deletionTimestamp, deletion grace period, generation.
PodColumns = tuple[str, str, str, int, int, int, float, float | None, str, str | None, int | None, int]

# Typecodes of the packed columns: unsigned 32-bit integers (numbers into a table), 64-bit floats (times).
NUMBERS = next(code for code in "IL" if array(code).itemsize == 4)
TIMES = "d"
GENERATIONS = "q"  # signed 64-bit: metadata.generation is an int64
_NOT_BOUND = float("nan")


def packed(typecode: str, values: Iterable[int] | Iterable[float]) -> bytes:
    """`values` as an array of `typecode` (`NUMBERS`, `GENERATIONS` or `TIMES`), little-endian bytes."""
    values_array = array(typecode, values)
    if sys.byteorder == "big":
        values_array.byteswap()
    return values_array.tobytes()


def unpacked(typecode: str, data: bytes, count: int, what: str) -> array[Any]:
    """`packed`'s array back; ValueError unless it holds `count` values (`what` names them in the message)."""
    values_array = array(typecode)
    if len(data) != count * values_array.itemsize:
        raise ValueError(f"snapshot's {what} are {len(data)} bytes, not {count} values of {values_array.itemsize}")
    values_array.frombytes(data)
    if sys.byteorder == "big":
        values_array.byteswap()
    return values_array


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
    names: list[str] = []
    uids: list[str] = []
    versions: list[str] = []
    head_numbers: list[int] = []
    spec_numbers: list[int] = []
    status_numbers: list[int] = []
    first_seens: list[float] = []
    bound_ats: list[float] = []
    node_numbers: dict[str, int] = {"": 0}
    bound_nodes: list[int] = []
    evicting: list[int] = []
    deleting: list[PodDeleting] = []
    generations: list[int] = []
    for number, (obj, first_seen, bound_at, eviction_requested, bound_node) in enumerate(entries):
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
            spec_index = spec_ids[id(obj.spec)] = number_of(obj.spec, specs, spec_list)
        status_index = status_ids.get(id(obj.status))
        if status_index is None:
            status_index = status_ids[id(obj.status)] = number_of(obj.status, statuses, status_list)
        names.append(meta.name)
        uids.append(meta.uid)
        versions.append(meta.resource_version)
        generations.append(meta.generation)
        head_numbers.append(head_index)
        spec_numbers.append(spec_index)
        status_numbers.append(status_index)
        first_seens.append(first_seen)
        bound_ats.append(_NOT_BOUND if bound_at is None else bound_at)
        bound_nodes.append(node_numbers.setdefault(bound_node, len(node_numbers)))
        if eviction_requested:
            evicting.append(number)
        if meta.deletion_timestamp is not None:
            deleting.append(PodDeleting(number, meta.deletion_timestamp, meta.deletion_grace_period_seconds))
    return PodTable(head_list, spec_list, status_list, names, uids, versions, packed(NUMBERS, head_numbers),
                    packed(NUMBERS, spec_numbers), packed(NUMBERS, status_numbers),
                    packed(TIMES, first_seens), packed(TIMES, bound_ats), list(node_numbers),
                    packed(NUMBERS, bound_nodes), evicting, deleting, packed(GENERATIONS, generations))


def columns_of_rows(table: PodRowTable) -> PodTable:
    """A version-2 table as columns (the pods in the same order)."""
    rows = table.rows
    node_numbers: dict[str, int] = {"": 0}
    for row in rows:
        node_numbers.setdefault(row.bound_node, len(node_numbers))
    return PodTable(
        table.heads, table.specs, table.statuses, [row.name for row in rows], [row.uid for row in rows],
        [row.resource_version for row in rows], packed(NUMBERS, [row.head for row in rows]),
        packed(NUMBERS, [row.spec for row in rows]), packed(NUMBERS, [row.status for row in rows]),
        packed(TIMES, [row.first_seen for row in rows]),
        packed(TIMES, [_NOT_BOUND if row.bound_at is None else row.bound_at for row in rows]),
        list(node_numbers), packed(NUMBERS, [node_numbers[row.bound_node] for row in rows]),
        [number for number, row in enumerate(rows) if row.eviction_requested],
        [PodDeleting(number, row.deletion_timestamp, row.deletion_grace_period_seconds)
         for number, row in enumerate(rows) if row.deletion_timestamp is not None])


def columns(table: PodTable) -> Iterator[PodColumns]:
    """Each pod's own fields and numbers, in order. Raises ValueError for columns of unequal lengths and
    IndexError for a number past its list."""
    count = len(table.names)
    if len(table.uids) != count or len(table.resource_versions) != count:
        raise ValueError(f"snapshot's pod table has {count} names, {len(table.uids)} uids and "
                         f"{len(table.resource_versions)} resourceVersions")
    intern = sys.intern
    bound_nodes = [intern(name) for name in table.bound_nodes]  # the nodes' own names
    nodes = [bound_nodes[number] for number in unpacked(NUMBERS, table.bound_node, count, "pods' bound nodes")]
    # NaN (not equal to itself): not bound by us
    bound_at = [None if when != when else when for when in unpacked(TIMES, table.bound_at, count, "pods' bound times")]
    if any(number >= count for number in table.evicting):
        raise IndexError(f"an evicting pod's number is past the {count} pods")
    timestamps: list[str | None] = [None] * count
    graces: list[int | None] = [None] * count
    for deleting in table.deleting:
        timestamps[deleting.number] = deleting.timestamp
        graces[deleting.number] = deleting.grace_period_seconds
    generations = unpacked(GENERATIONS, table.generation, count, "pods' generations") if table.generation \
        else [0] * count
    return zip(table.names, table.uids, table.resource_versions,
               unpacked(NUMBERS, table.head, count, "pods' heads"), unpacked(NUMBERS, table.spec, count, "pods' specs"),
               unpacked(NUMBERS, table.status, count, "pods' statuses"),
               unpacked(TIMES, table.first_seen, count, "pods' first-seen times"), bound_at, nodes, timestamps, graces,
               generations, strict=True)


def number_of(part: _Part, numbers: dict[bytes, int], parts: list[_Part]) -> int:
    """The number of `part` in `parts` by its value (its encoding), appended if new."""
    number = numbers.setdefault(msgspec.msgpack.encode(part), len(parts))
    if number == len(parts):
        parts.append(part)
    return number


def shared_parts(table: PodTable, compactor: Compactor) -> tuple[list[PodHead], list[PodSpec], list[PodStatus]]:
    """The table's heads, specs and statuses, compacted once each (strings interned, containers shared with
    the pods that later events bring). A head's label set is kept as decoded: the table holds each set once
    already, and msgspec shares the short keys (most label keys) between them. Interning its values and
    keeping it for later pods would save ~100 bytes a gang, at ~2 us a gang (25 ms of a 12,500-gang
    restart)."""
    intern = sys.intern
    heads = [PodHead(intern(head.api_version), intern(head.kind), intern(head.namespace),
                     head.labels, compactor.annotations_of(head.annotations))
             for head in table.heads]
    for spec in table.specs:
        compactor.spec(spec)
    for status in table.statuses:
        compactor.status(status)
    return heads, table.specs, table.statuses


def pods_of(table: PodTable, compactor: Compactor) -> Iterator[PodEntry]:
    """Each pod of the table, rebuilt on the shared parts, with the scheduler's record of it (raises
    IndexError on a number past its list, ValueError on columns of unequal lengths)."""
    heads, specs, statuses = shared_parts(table, compactor)
    evicting = set(table.evicting)
    for number, (name, uid, version, head_number, spec_number, status_number, first_seen, bound_at, bound_node,
                 timestamp, grace, generation) in enumerate(columns(table)):
        head = heads[head_number]
        meta = ObjectMeta(name=name, namespace=head.namespace, uid=uid, resource_version=version,
                          generation=generation, labels=head.labels, annotations=head.annotations,
                          deletion_timestamp=timestamp, deletion_grace_period_seconds=grace)
        obj = Pod(api_version=head.api_version, kind=head.kind, metadata=meta, spec=specs[spec_number],
                  status=statuses[status_number])
        yield obj, first_seen, bound_at, number in evicting, bound_node
