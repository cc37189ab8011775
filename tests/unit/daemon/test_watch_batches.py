"""Watch events that arrive in one chunk are recorded together: one append, in order, each folded."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import msgspec
import pytest

from daemon.config import EventLogConfig, TimeoutConfig
from daemon.kube.watch import Gone, KindWatcher
from daemon.offline.simulator import VirtualClock
from daemon.scheduling.journal import Journal
from daemon.telemetry.metrics import MeteredEventLog, Metrics
from events.builders import pod
from events.ingest import KIND_BY_NAME
from events.log import EventLog
from events.model import Event, ObjectUndecodable, PodDeleted, PodUpserted
from state.cluster import ClusterState


class Chunks:
    def __init__(self, chunks: Sequence[bytes]) -> None:
        self.chunks = list(chunks)

    async def readany(self) -> bytes:
        return self.chunks.pop(0) if self.chunks else b""


class StreamingClient:
    """A client whose one watch request streams `chunks`."""

    def __init__(self, chunks: Sequence[bytes]) -> None:
        self.chunks = chunks

    @contextlib.asynccontextmanager
    async def stream(self, path: str, query: Any, read_timeout: float) -> AsyncIterator[tuple[int, Chunks]]:
        yield 200, Chunks(self.chunks)


def line(kind: str, obj: dict[str, Any]) -> bytes:
    return json.dumps({"type": kind, "object": obj}).encode() + b"\n"


def pod_json(name: str, version: str) -> dict[str, Any]:
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", **msgspec.to_builtins(pod(name, gpus=1))}
    obj["metadata"]["resourceVersion"] = version
    return obj


def watcher(chunks: Sequence[bytes], journal: Journal) -> KindWatcher:
    return KindWatcher(StreamingClient(chunks), KIND_BY_NAME["Pod"], journal.recorder(),  # type: ignore[arg-type]
                       TimeoutConfig())


async def test_a_chunk_s_events_go_to_the_log_in_one_append_in_order(tmp_path: Path) -> None:
    metrics = Metrics()
    log = MeteredEventLog.open(tmp_path, fsync="never")
    assert isinstance(log, MeteredEventLog)
    log.metrics = metrics
    state = ClusterState()
    journal = Journal(state, VirtualClock(7.0), log)
    heard: list[Event] = []
    journal.subscribe(heard.append)
    chunk = (line("ADDED", pod_json("a", "11")) + line("ADDED", pod_json("b", "12"))
             + line("BOOKMARK", {"metadata": {"resourceVersion": "13"}}) + line("DELETED", pod_json("a", "14")))
    kind = watcher([chunk, line("ADDED", pod_json("c", "15"))], journal)
    await kind.watch_once()
    log.close()
    assert [type(e).__name__ for e in heard] == ["PodUpserted", "PodUpserted", "PodDeleted", "PodUpserted"]
    assert [e.seq for e in heard] == [1, 2, 3, 4]
    assert isinstance(heard[2], PodDeleted) and heard[2].key == "default/a"
    assert sorted(state.pods) == ["default/b", "default/c"]
    assert kind.resource_version == "15" and kind.known == {"default/b": "uid-default-b", "default/c": "uid-default-c"}
    # two chunks, two appends
    assert metrics.registry.get_sample_value("toposched_event_log_append_duration_seconds_count") == 2
    with EventLog.open_readonly(tmp_path) as reread:
        assert [e.seq for e in reread.read(1)] == [1, 2, 3, 4]


async def test_an_error_line_raises_after_the_events_before_it_are_recorded() -> None:
    state = ClusterState()
    journal = Journal(state, VirtualClock())
    gone = line("ERROR", {"kind": "Status", "code": 410, "message": "too old resource version"})
    kind = watcher([line("ADDED", pod_json("a", "11")) + line("ADDED", pod_json("b", "12")) + gone], journal)
    with pytest.raises(Gone):
        await kind.watch_once()
    assert sorted(state.pods) == ["default/a", "default/b"]


async def test_a_pod_over_the_record_cap_in_a_chunk_is_logged_as_its_core_and_the_rest_as_they_are(
        tmp_path: Path) -> None:
    with EventLog.open(tmp_path, fsync="never") as log:
        state = ClusterState()
        journal = Journal(state, VirtualClock(), log, policy=EventLogConfig(max_record_bytes=64 * 1024))
        huge = pod_json("huge", "12")
        huge["metadata"]["labels"] = {f"example.com/label-{i}": "v" * 60 for i in range(1500)}
        chunk = line("ADDED", pod_json("a", "11")) + line("ADDED", huge) + line("ADDED", pod_json("b", "13"))
        await watcher([chunk], journal).watch_once()
        stored = list(log.read(1))
    assert [e.seq for e in stored] == [1, 2, 3]
    assert all(isinstance(e, PodUpserted) for e in stored)
    core = stored[1]
    assert isinstance(core, PodUpserted) and core.pod.metadata.name == "huge" and not core.pod.metadata.labels
    assert sorted(state.pending) == ["default/a", "default/b"]  # what is not read whole is never placed
    assert "over the 65536-byte record cap" in str(state.problems_of("Pod", "default/huge")[0])


async def test_an_object_whose_metadata_does_not_decode_is_recorded_as_undecodable_and_the_watch_goes_on() -> None:
    state = ClusterState()
    journal = Journal(state, VirtualClock())
    heard: list[Event] = []
    journal.subscribe(heard.append)
    nameless = pod_json("x", "12")
    nameless["metadata"]["name"] = 5  # no API server stores this; the watch must not stall on it either
    broken_spec = pod_json("y", "13")
    broken_spec["spec"]["containers"] = "not a list"
    chunk = (line("ADDED", pod_json("a", "11")) + line("MODIFIED", nameless) + line("ADDED", broken_spec)
             + line("DELETED", nameless) + line("ADDED", pod_json("b", "14")))
    kind = watcher([chunk], journal)
    await kind.watch_once()
    assert [type(e).__name__ for e in heard] == ["PodUpserted", "ObjectUndecodable", "ObjectUndecodable",
                                                 "PodUpserted"]
    undecodable = [e for e in heard if isinstance(e, ObjectUndecodable)]
    assert undecodable[0].key == "<unnamed>" and undecodable[1].key == "default/y"
    assert "spec.containers" in undecodable[1].problem
    # the one whose identity decodes is known (a relist that misses it records its deletion); the other is not
    assert kind.known == {"default/a": "uid-default-a", "default/y": "uid-default-y", "default/b": "uid-default-b"}
    assert kind.resource_version == "14"  # the deletion of the nameless one was logged as a bad line and skipped
