"""Events correlated by client-go's rules: repeats counted, similar messages aggregated, spam dropped."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio
from structlog.testing import capture_logs

from daemon.kube.client import Response
from daemon.kube.event_correlator import (
    AGGREGATE_INTERVAL_SECONDS,
    COMBINED_PREFIX,
    SPAM_BURST,
    EventCorrelator,
    EventWrite,
    ObjectRef,
)
from daemon.kube.event_recorder import EventRecorder

GANG = ObjectRef(api_version="scheduling.volcano.sh/v1beta1", kind="PodGroup", namespace="team", name="train",
                 uid="uid-train")
OTHER = ObjectRef(api_version="v1", kind="Pod", namespace="team", name="train-0", uid="uid-train-0")


def written(correlator: EventCorrelator, message: str, at: float, ref: ObjectRef = GANG,
            reason: str = "FailedScheduling") -> EventWrite:
    write = correlator.correlate(ref, "Warning", reason, message, at)
    assert write is not None
    return write


def test_the_same_occurrence_again_updates_one_event_with_a_count() -> None:
    correlator = EventCorrelator("toposched")
    first = written(correlator, "no room", 100.0)
    again = [written(correlator, "no room", 100.0 + i) for i in range(1, 5)]
    assert first.create and first.count == 1 and first.namespace == "team"
    assert {w.name for w in again} == {first.name} and not any(w.create for w in again)
    assert [w.count for w in again] == [2, 3, 4, 5]
    assert again[-1].first_timestamp == 100.0 and again[-1].last_timestamp == 104.0


def test_the_tenth_distinct_message_of_one_reason_goes_to_one_combined_event_with_the_latest_message() -> None:
    correlator = EventCorrelator("toposched")
    singles = [written(correlator, f"{n} of minMember 8000 pods exist", float(n)) for n in range(9)]
    assert len({w.name for w in singles}) == 9 and all(w.create for w in singles)
    combined = [written(correlator, f"{n} of minMember 8000 pods exist", float(n)) for n in range(9, 20)]
    assert len({w.name for w in combined}) == 1
    assert combined[0].create and not any(w.create for w in combined[1:])
    assert combined[-1].message == COMBINED_PREFIX + "19 of minMember 8000 pods exist"
    assert combined[-1].count == len(combined)
    other_reason = written(correlator, "bound", 21.0, ref=OTHER, reason="Scheduled")  # per object and reason
    assert other_reason.create and not other_reason.message.startswith(COMBINED_PREFIX)


def test_a_reason_changing_624_times_on_one_object_makes_at_most_ten_events_and_few_writes() -> None:
    correlator = EventCorrelator("toposched")
    writes = [correlator.correlate(GANG, "Warning", "FailedScheduling", f"{n} of minMember 8000 pods exist",
                                   n * 0.5) for n in range(624)]
    kept = [w for w in writes if w is not None]
    assert len({w.name for w in kept}) == 10  # 9 messages of their own, then one combined Event
    assert len(kept) == SPAM_BURST + 1  # 312 s: the burst, then one token every 5 minutes
    assert correlator.skipped == 624 - len(kept)


def test_similar_messages_after_a_quiet_interval_start_afresh() -> None:
    correlator = EventCorrelator("toposched")
    for n in range(12):
        written(correlator, f"message {n}", float(n))
    later = written(correlator, "message 99", 11.0 + AGGREGATE_INTERVAL_SECONDS + 1)
    assert not later.message.startswith(COMBINED_PREFIX) and later.create


def test_an_object_gets_a_burst_of_25_then_one_event_per_five_minutes_whatever_the_reason() -> None:
    correlator = EventCorrelator("toposched")
    allowed = [correlator.correlate(GANG, "Warning", f"R{i % 3}", "same", 10.0) for i in range(SPAM_BURST + 5)]
    assert sum(1 for w in allowed if w is not None) == SPAM_BURST and correlator.skipped == 5
    assert correlator.correlate(OTHER, "Warning", "R0", "same", 10.0) is not None  # another object: its own bucket
    assert correlator.correlate(GANG, "Warning", "R0", "same", 100.0) is None
    refilled = correlator.correlate(GANG, "Warning", "R0", "same", 10.0 + 300.0)
    assert refilled is not None and refilled.count == 10 + 2  # R0 came 10 times, then 2: skipped ones count too


def test_event_names_are_the_objects_name_and_distinct_even_at_one_instant() -> None:
    correlator = EventCorrelator("toposched")
    names = {written(correlator, f"m{i}", 5.0, ref=OTHER if i % 2 else GANG).name for i in range(6)}
    assert len(names) == 6
    assert all(name.startswith(("train.", "train-0.")) for name in names)


class Sink:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []
        self.missing: set[str] = set()  # Event names the API answers 404 for
        self.gate: anyio.Event | None = None

    async def send_event(self, method: str, path: str, body: Mapping[str, Any], content_type: str) -> Response:
        if self.gate is not None:
            await self.gate.wait()
        self.calls.append((method, path, dict(body)))
        if method == "PATCH" and path.rsplit("/", 1)[-1] in self.missing:
            return Response(404, b"{}")
        return Response(201 if method == "POST" else 200, b"{}")


async def test_recording_never_waits_and_one_event_written_later_is_written_once_as_it_reads_last() -> None:
    sink = Sink()
    clock = [1000.0]
    recorder = EventRecorder(sink, "toposched", now=lambda: clock[0])
    for _ in range(5):
        clock[0] += 1
        recorder.record(GANG, "Warning", "FailedScheduling", "no room")
    assert sink.calls == [] and recorder.queued == 1
    await recorder.flush()
    ((method, path, body),) = sink.calls
    assert method == "POST" and path == "/api/v1/namespaces/team/events"
    assert body["count"] == 5 and body["involvedObject"]["uid"] == "uid-train"
    assert body["firstTimestamp"] == "1970-01-01T00:16:41Z" and body["lastTimestamp"] == "1970-01-01T00:16:45Z"
    recorder.record(GANG, "Warning", "FailedScheduling", "no room")
    await recorder.flush()
    method, path, body = sink.calls[-1]
    assert method == "PATCH" and body == {"count": 6, "lastTimestamp": "1970-01-01T00:16:45Z", "message": "no room"}


async def test_an_expired_event_is_created_again_and_a_full_queue_drops_with_a_count() -> None:
    sink = Sink()
    recorder = EventRecorder(sink, "toposched", now=lambda: 50.0, max_queued=2)
    recorder.record(GANG, "Warning", "FailedScheduling", "no room")
    await recorder.flush()
    sink.missing.add(sink.calls[0][2]["metadata"]["name"])
    recorder.record(GANG, "Warning", "FailedScheduling", "no room")
    await recorder.flush()
    assert [c[0] for c in sink.calls] == ["POST", "PATCH", "POST"] and sink.calls[-1][2]["count"] == 2
    for i in range(4):
        recorder.record(OTHER, "Normal", f"Reason{i}", "x")
    assert recorder.queued == 2 and recorder.dropped == 2


async def test_a_full_queue_drops_loudly_but_writes_a_few_lines_not_one_per_drop() -> None:
    sink = Sink()
    clock = [1000.0]
    counted: list[int] = []
    recorder = EventRecorder(sink, "toposched", now=lambda: clock[0], max_queued=2,
                             on_drop=lambda: counted.append(1))
    pods = [ObjectRef(api_version="v1", kind="Pod", namespace="team", name=f"p{i}") for i in range(60)]
    with capture_logs() as logs:
        for index, pod in enumerate(pods):  # 2 queued, 58 dropped over 5.8 s: no second line yet
            clock[0] += 0.1 if index else 0.0
            recorder.record(pod, "Normal", "Scheduled", "bound")
        lines = [line for line in logs if line["event"] == "event.dropped"]
        assert [(line["dropped"], line["dropped_total"], line["last_object"]) for line in lines] == [
            (1, 1, "Pod team/p2")]
        clock[0] += 5.0  # 10 s after the first line: the next drop is logged, with those before it
        recorder.record(OTHER, "Normal", "Scheduled", "bound")
        await recorder.flush()
        recorder.record(GANG, "Warning", "FailedScheduling", "no room")  # room again: the rest are told
    lines = [line for line in logs if line["event"] == "event.dropped"]
    assert [(line["dropped"], line["dropped_total"], line["now"]) for line in lines] == [
        (1, 1, "the queue is full"), (58, 59, "the queue is full")]
    assert lines[0]["log_level"] == "warning" and lines[1]["last_object"] == "Pod team/train-0"
    assert recorder.dropped == 59 == len(counted) and len(sink.calls) == 2
    with capture_logs() as logs:  # within 10 s of the last line: drops are told once recording resumes
        for pod in pods[:3]:
            recorder.record(pod, "Normal", "Scheduled", "bound again")  # p0 queued (beside GANG), p1, p2 dropped
        recorder.record(OTHER, "Normal", "Scheduled", "bound again")  # dropped
        await recorder.flush()
        recorder.record(GANG, "Warning", "FailedScheduling", "no room at all")
    assert [(line["dropped"], line["now"], line["last_object"]) for line in logs
            if line["event"] == "event.dropped"] == [(3, "the queue has room again", "Pod team/train-0")]


async def test_one_event_is_never_written_by_two_writers_at_once() -> None:
    sink = Sink()
    sink.gate = anyio.Event()
    recorder = EventRecorder(sink, "toposched", now=lambda: 50.0)
    recorder.record(GANG, "Warning", "FailedScheduling", "no room")
    async with anyio.create_task_group() as group:
        group.start_soon(recorder.flush)
        await anyio.wait_all_tasks_blocked()
        recorder.record(GANG, "Warning", "FailedScheduling", "no room")
        group.start_soon(recorder.flush)  # the name is being written: this flush leaves it to that writer
        await anyio.wait_all_tasks_blocked()
        sink.gate.set()
    assert [(c[0], c[2]["count"]) for c in sink.calls] == [("POST", 1), ("PATCH", 2)]


class SlowSink(Sink):
    """Answers each Event write after `delays[reason]` seconds (0 when not listed)."""

    def __init__(self, delays: dict[str, float]) -> None:
        super().__init__()
        self.delays = delays
        self.started: list[str] = []

    async def send_event(self, method: str, path: str, body: Mapping[str, Any], content_type: str) -> Response:
        self.started.append(str(body.get("reason", "")))
        await anyio.sleep(self.delays.get(str(body.get("reason", "")), 0.0))
        return await super().send_event(method, path, body, content_type)


async def test_the_events_of_one_object_land_in_the_order_they_were_recorded_whatever_the_lanes() -> None:
    sink = SlowSink({"Scheduled": 0.05})
    recorder = EventRecorder(sink, "toposched", now=lambda: 50.0, concurrency=8)
    pods = [ObjectRef(api_version="v1", kind="Pod", namespace="team", name=f"p{i}") for i in range(20)]
    async with anyio.create_task_group() as group:
        group.start_soon(recorder.run)
        for pod in pods:
            recorder.record(pod, "Normal", "Scheduled", "bound")
        for pod in pods:
            recorder.record(pod, "Normal", "Preempted", "evicted")
        with anyio.fail_after(10):
            await recorder.drain()
        group.cancel_scope.cancel()
    for pod in pods:
        landed = [c[2]["reason"] for c in sink.calls if c[2]["involvedObject"]["name"] == pod.name]
        assert landed == ["Scheduled", "Preempted"]
    assert recorder.written == 40 and recorder.queued == 0


async def test_an_event_a_caller_waits_for_lands_after_every_event_recorded_before_it() -> None:
    sink = SlowSink({"Scheduled": 0.05})
    recorder = EventRecorder(sink, "toposched", now=lambda: 50.0, concurrency=8)
    pods = [ObjectRef(api_version="v1", kind="Pod", namespace="team", name=f"p{i}") for i in range(10)]
    async with anyio.create_task_group() as group:
        group.start_soon(recorder.run)
        for pod in pods:
            recorder.record(pod, "Normal", "Scheduled", "bound")
        with anyio.fail_after(10):
            assert await recorder.post(GANG, "Normal", "Preempted", "the gang lost pods") == ""
        group.cancel_scope.cancel()
    assert [c[2]["reason"] for c in sink.calls][-1] == "Preempted" and len(sink.calls) == 11
    assert sink.started.index("Preempted") == 10  # not even sent before the others were answered


class HoldingSink(Sink):
    """Holds its first `hold` Event writes until they are cancelled; answers the rest at once."""

    def __init__(self, hold: int) -> None:
        super().__init__()
        self.hold = hold
        self.started = 0
        self.all_held = anyio.Event()

    async def send_event(self, method: str, path: str, body: Mapping[str, Any], content_type: str) -> Response:
        self.started += 1
        if self.started <= self.hold:
            if self.started == self.hold:
                self.all_held.set()
            await anyio.sleep_forever()
        return await super().send_event(method, path, body, content_type)


async def test_a_drain_finishes_what_a_stopped_writer_left() -> None:
    sink = HoldingSink(hold=2)
    recorder = EventRecorder(sink, "toposched", now=lambda: 50.0, concurrency=2)
    # An object's lane comes from a string hash, which differs per process: pick names that fill both
    # lanes, or a run where all six share one lane would hold one write and wait for the second forever.
    names = (f"p{i}" for i in range(1000))
    by_lane: dict[int, list[str]] = {0: [], 1: []}
    while min(len(found) for found in by_lane.values()) < 3:
        name = next(names)
        by_lane[hash(("team", name)) % 2].append(name)
    pods = [ObjectRef(api_version="v1", kind="Pod", namespace="team", name=name)
            for name in by_lane[0][:3] + by_lane[1][:3]]
    with anyio.fail_after(10):
        async with anyio.create_task_group() as outer, anyio.create_task_group() as leader:
            leader.start_soon(recorder.run)
            for pod in pods:
                recorder.record(pod, "Normal", "Scheduled", "bound")
            await sink.all_held.wait()  # run()'s writers are busy with their first Events, held there
            outer.start_soon(recorder.drain)  # waits on their lanes
            await anyio.wait_all_tasks_blocked()
            leader.cancel_scope.cancel()  # run() stops with its writers (the lease is lost)
    # The drain wrote what they left by itself: only the two Events in flight at the stop are missing.
    assert recorder.queued == 0 and len(sink.calls) == 4
