"""Properties of the event log: what goes in comes out, and damage never turns into a wrong record.

Whatever is done to the bytes on disk (a cut at any byte of any segment, flipped bits anywhere in a
segment or its index), opening and reading the log gives either a prefix of the records that were
written, or a `LogCorruptError`; it never returns a record that differs from what was appended.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events.log import EventLog, LogCorruptError
from events.model import Event, NodeUpserted, PodBound, PodUpserted
from events.objects import (
    Container,
    Node,
    NodeStatus,
    ObjectMeta,
    Pod,
    PodSpec,
    ResourceRequirements,
)

SEGMENT_BYTES = 4096

names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=24)
label_values = st.text(max_size=30)
times = st.floats(min_value=0, max_value=2e9, allow_nan=False)

node_events = st.builds(
    lambda name, gpus, labels, time: NodeUpserted(
        time=time,
        node=Node(
            metadata=ObjectMeta(name=name, uid=f"uid-{name}", labels=labels),
            status=NodeStatus(allocatable={"nvidia.com/gpu": str(gpus), "cpu": "96"}),
        ),
    ),
    names,
    st.integers(min_value=0, max_value=16),
    st.dictionaries(names, label_values, max_size=4),
    times,
)
pod_events = st.builds(
    lambda name, namespace, gpus, gang, time: PodUpserted(
        time=time,
        pod=Pod(
            metadata=ObjectMeta(
                name=name,
                namespace=namespace,
                uid=f"uid-{namespace}-{name}",
                labels={"pod-group.scheduling.sigs.k8s.io": gang},
            ),
            spec=PodSpec(
                scheduler_name="toposched",
                containers=[Container(name="main", resources=ResourceRequirements(requests={"nvidia.com/gpu": gpus}))],
            ),
        ),
    ),
    names,
    names,
    st.integers(min_value=1, max_value=8).map(str),
    names,
    times,
)
bound_events = st.builds(
    lambda pod, node, time: PodBound(pod=pod, uid=f"uid-{pod}", node=node, time=time), names, names, times
)
events = st.one_of(node_events, pod_events, bound_events)


def _sample_events(count: int) -> list[Event]:
    result: list[Event] = []
    for i in range(count):
        result.append(PodBound(pod=f"default/pod-{i}", uid=f"uid-{i}", node=f"node-{i % 13}", time=float(i)))
        if i % 5 == 0:
            result.append(
                PodUpserted(pod=Pod(metadata=ObjectMeta(name=f"pod-{i}", namespace="default", uid=f"uid-{i}")))
            )
    return result


@pytest.fixture(scope="module")
def pristine() -> Iterator[tuple[Path, list[Event]]]:
    """A log of a few segments (with sealed-segment indexes) that each example copies and damages."""
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "log"
        with EventLog.open(path, fsync="never", segment_bytes=SEGMENT_BYTES) as log:
            stored = log.append_many(_sample_events(120))
        assert len(list(path.glob("*.seg"))) >= 3
        yield path, stored


def _read_all(directory: Path, *, readonly: bool) -> list[Event]:
    if readonly:
        with EventLog.open_readonly(directory) as log:
            return list(log.read())
    with EventLog.open(directory, fsync="never", segment_bytes=SEGMENT_BYTES) as log:
        return list(log.read())


def _outcome(directory: Path, *, readonly: bool) -> list[Event] | LogCorruptError:
    try:
        return _read_all(directory, readonly=readonly)
    except LogCorruptError as error:
        return error


def _damaged_copy(source: Path) -> tuple[tempfile.TemporaryDirectory[str], Path]:
    holder = tempfile.TemporaryDirectory()
    target = Path(holder.name) / "log"
    shutil.copytree(source, target)
    return holder, target


@settings(max_examples=60, deadline=None)
@given(
    batch=st.lists(st.lists(events, max_size=12), max_size=8),
    segment_bytes=st.integers(min_value=4096, max_value=12000),
    start=st.integers(min_value=0, max_value=120),
)
def test_random_event_sequences_round_trip_through_the_log(
    batch: list[list[Event]], segment_bytes: int, start: int
) -> None:
    with tempfile.TemporaryDirectory() as directory:
        stored: list[Event] = []
        with EventLog.open(directory, fsync="never", segment_bytes=segment_bytes) as log:
            for chunk in batch:
                if len(chunk) == 1:
                    stored.append(log.append(chunk[0]))
                else:
                    stored.extend(log.append_many(chunk))
        assert [event.seq for event in stored] == list(range(1, len(stored) + 1))
        with EventLog.open(directory, fsync="never", segment_bytes=segment_bytes) as log:
            assert log.next_seq == len(stored) + 1
            assert list(log.read()) == stored
            assert list(log.read(start)) == stored[max(start, 1) - 1 :]
        with EventLog.open_readonly(directory) as reader:
            assert list(reader.read()) == stored


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_cutting_any_segment_at_any_byte_gives_a_clean_prefix_or_a_clear_error(
    pristine: tuple[Path, list[Event]], data: st.DataObject
) -> None:
    source, stored = pristine
    holder, directory = _damaged_copy(source)
    with holder:
        segments = sorted(directory.glob("*.seg"))
        victim = data.draw(st.sampled_from(segments), label="segment")
        size = victim.stat().st_size
        cut = data.draw(st.integers(min_value=0, max_value=size - 1), label="cut")
        with open(victim, "r+b") as handle:
            handle.truncate(cut)
        is_last = victim == segments[-1]

        seen_by_reader = _outcome(directory, readonly=True)
        recovered = _outcome(directory, readonly=False)
        for outcome in (seen_by_reader, recovered):
            if is_last:
                # a cut of the last segment is exactly what a crash leaves: always a clean cut, never an error
                assert isinstance(outcome, list)
                assert outcome == stored[: len(outcome)]
                assert len(outcome) >= int(victim.name.removesuffix(".seg")) - 1
            else:
                assert isinstance(outcome, LogCorruptError)
                assert outcome.segment.parent == directory
        if is_last:
            assert seen_by_reader == recovered
            # the recovered log takes new appends right after the cut
            with EventLog.open(directory, fsync="never", segment_bytes=SEGMENT_BYTES) as log:
                again = log.append(PodBound(pod="after", uid="u", node="n"))
                assert isinstance(recovered, list)
                assert again.seq == len(recovered) + 1
                assert list(log.read()) == [*recovered, again]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_flipping_bits_anywhere_never_yields_a_wrong_record(
    pristine: tuple[Path, list[Event]], data: st.DataObject
) -> None:
    source, stored = pristine
    holder, directory = _damaged_copy(source)
    with holder:
        files = sorted([*directory.glob("*.seg"), *directory.glob("*.idx")])
        victim = data.draw(st.sampled_from(files), label="file")
        damaged = bytearray(victim.read_bytes())
        flips = data.draw(
            st.lists(
                st.tuples(st.integers(0, len(damaged) - 1), st.integers(0, 7)), min_size=1, max_size=3
            ),
            label="flips",
        )
        for position, bit in flips:
            damaged[position] ^= 1 << bit
        victim.write_bytes(bytes(damaged))

        for readonly in (True, False):
            outcome = _outcome(directory, readonly=readonly)
            if isinstance(outcome, list):
                assert outcome == stored[: len(outcome)]


@settings(max_examples=60, deadline=None)
@given(
    steps=st.lists(
        st.one_of(
            st.tuples(st.just("append"), st.integers(min_value=1, max_value=60)),
            st.tuples(st.just("snapshot"), st.just(0)),
            st.tuples(st.just("prune"), st.integers(min_value=0, max_value=40_000)),
            st.tuples(st.just("reopen"), st.just(0)),
        ),
        max_size=20,
    ),
)
def test_pruning_keeps_a_contiguous_suffix_that_starts_right_after_a_kept_snapshot(
    steps: list[tuple[str, int]],
) -> None:
    """Whatever is appended, snapshotted, pruned and reopened: the log holds exactly the events from its
    `first_seq` on, and a pruned log has a readable snapshot to start from at or after `first_seq - 1`."""
    with tempfile.TemporaryDirectory() as directory:
        stored: list[Event] = []
        log = EventLog.open(directory, fsync="never", segment_bytes=SEGMENT_BYTES)
        try:
            for action, amount in steps:
                if action == "append":
                    stored.extend(log.append_many(_sample_events(amount)))
                elif action == "snapshot" and log.last_seq:
                    log.write_snapshot(log.last_seq, str(log.last_seq).encode())
                elif action == "prune":
                    log.prune(retention_bytes=amount, retention_seconds=1e9)
                elif action == "reopen":
                    log.close()
                    log = EventLog.open(directory, fsync="never", segment_bytes=SEGMENT_BYTES)
                first = log.first_seq
                assert list(log.read(1)) == stored[first - 1 :]
                assert log.next_seq == len(stored) + 1
                base = log.base_snapshot()
                if first > 1:
                    assert base is not None and first - 1 <= base[0] <= log.last_seq
                    assert base[1] == str(base[0]).encode()
                else:
                    assert base is None
        finally:
            log.close()
        with EventLog.open_readonly(directory) as reader:
            assert list(reader.read(1)) == stored[reader.first_seq - 1 :]
