"""A pod's record decoded in parts: its own fields, and its spec, status and labels left as raw bytes.

Folding a log decodes every pod update whole, then shares its equal parts with the pods already held
(`state.compact`): for 100,000 pods that is 100,000 specs decoded and taken apart again, though a
cluster's pods have a few thousand distinct ones. `decode_parts` decodes a `PodUpserted` record as
`PodUpsertedParts`: the pod's name, uid, resourceVersion and deletion stamp as values, and its spec,
status, labels and annotations as the raw msgpack bytes they were written as (msgspec `Raw`, a view
of the record), so the caller decodes a part only the first time those bytes come (`parts_pod`
builds the pod from the parts it holds). Every other record decodes as `decode_event` decodes it.

The bytes are the record's own: equal bytes are equal values (the encoder writes one value one way).
A part is validated when it is first decoded, as `decode_event` would validate it.

Pure data: no I/O.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from typing import Any

import msgspec

from events.model import Event, EventBase, PodUpserted
from events.objects import Int64, ObjectMeta, Pod, PodSpec, PodStatus

_EMPTY_MAP = msgspec.Raw(b"\x80")  # what an omitted (default, empty) map part is


class PodMetaParts(msgspec.Struct, kw_only=True, rename="camel", frozen=True, gc=False):
    """`ObjectMeta` with labels and annotations raw."""

    name: str = ""
    namespace: str = ""
    uid: str = ""
    resource_version: str = ""
    generation: Int64 = 0
    labels: msgspec.Raw = _EMPTY_MAP
    annotations: msgspec.Raw = _EMPTY_MAP
    deletion_timestamp: str | None = None
    deletion_grace_period_seconds: Int64 | None = None


class PodParts(msgspec.Struct, kw_only=True, rename="camel", frozen=True, gc=False):
    """`Pod` with its spec and status raw."""

    api_version: str = "v1"
    kind: str = "Pod"
    metadata: PodMetaParts = PodMetaParts()
    spec: msgspec.Raw = _EMPTY_MAP
    status: msgspec.Raw = _EMPTY_MAP


class PodUpsertedParts(EventBase, tag="pod", frozen=True):
    """A `PodUpserted` record, its pod in parts."""

    pod: PodParts


_PARTS_UNION: Any = typing.Union.__getitem__(
    (*(kind for kind in typing.get_args(Event) if kind is not PodUpserted), PodUpsertedParts))
_parts_decoder: msgspec.msgpack.Decoder[Any] = msgspec.msgpack.Decoder(_PARTS_UNION)
_spec_decoder = msgspec.msgpack.Decoder(PodSpec)
_status_decoder = msgspec.msgpack.Decoder(PodStatus)
_labels_decoder = msgspec.msgpack.Decoder(dict[str, str])


# A record, a pod update in parts (raises as `decode_event` does for a record that does not decode): the
# decoder's own method, with no call of ours around it (the fold calls it once a record).
decode_parts: Callable[[bytes], Event | PodUpsertedParts] = _parts_decoder.decode


def decode_spec(raw: bytes) -> PodSpec:
    return _spec_decoder.decode(raw)


def decode_status(raw: bytes) -> PodStatus:
    return _status_decoder.decode(raw)


def decode_map(raw: bytes) -> dict[str, str]:
    """Labels or annotations."""
    return _labels_decoder.decode(raw)


def parts_pod(parts: PodParts, api_version: str, kind: str, namespace: str, labels: dict[str, str],
              annotations: dict[str, str], spec: PodSpec, status: PodStatus) -> Pod:
    """The pod of `parts`, on the given (decoded, shared) parts."""
    meta = parts.metadata
    return Pod(api_version=api_version, kind=kind, spec=spec, status=status, metadata=ObjectMeta(
        name=meta.name, namespace=namespace, uid=meta.uid, resource_version=meta.resource_version,
        generation=meta.generation, labels=labels,
        annotations=annotations, deletion_timestamp=meta.deletion_timestamp,
        deletion_grace_period_seconds=meta.deletion_grace_period_seconds))
