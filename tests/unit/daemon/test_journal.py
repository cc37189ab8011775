"""The journal: stamp, append to the log before folding, notify, snapshot."""

from __future__ import annotations

from pathlib import Path

from daemon.journal import Journal
from daemon.simulator import VirtualClock
from events.log import EventLog
from events.model import Event, NodeUpserted, PodAssumed
from state.cluster import ClusterState
from tests.factories import node, node_event, pod, pod_event


class LogCheckingState(ClusterState):
    """A state that asserts every event it folds is already in the log."""

    def __init__(self, log: EventLog) -> None:
        super().__init__()
        self.log = log
        self.checked = 0

    def apply(self, event: Event) -> None:
        assert self.log.last_seq >= event.seq > 0
        self.checked += 1
        super().apply(event)


def test_record_stamps_clock_time_and_consecutive_seqs_and_folds() -> None:
    clock = VirtualClock(12.5)
    state = ClusterState()
    journal = Journal(state, clock)
    first = journal.record(node_event(node("n0")))
    clock.advance_to(20.0)
    second = journal.record(pod_event(pod("p", gpus=1), time=999.0))
    assert (first.seq, first.time) == (1, 12.5)
    assert (second.seq, second.time) == (2, 20.0)  # the clock's time, not the producer's
    assert "n0" in state.nodes and "default/p" in state.pending
    assert state.pods["default/p"].first_seen == 20.0
    assert journal.recorded == 2


def test_listeners_see_the_stored_event_after_it_is_folded() -> None:
    state = ClusterState()
    journal = Journal(state, VirtualClock())
    seen: list[tuple[int, bool]] = []
    journal.subscribe(lambda e: seen.append((e.seq, "default/p" in state.pods)))
    journal.record(pod_event(pod("p")))
    assert seen == [(1, True)]


def test_seqs_continue_a_restored_state_without_a_log() -> None:
    state = ClusterState()
    state.apply(NodeUpserted(node=node("n0"), seq=41))
    journal = Journal(state, VirtualClock())
    assert journal.record(pod_event(pod("p"))).seq == 42


def test_with_a_log_events_are_appended_before_they_are_folded(tmp_path: Path) -> None:
    with EventLog.open(tmp_path, fsync="never") as log:
        state = LogCheckingState(log)
        journal = Journal(state, VirtualClock(3.0), log)
        stored = journal.record(node_event(node("n0")))
        journal.record(pod_event(pod("p", gpus=1)))
        journal.record(PodAssumed(pod="default/p", uid="uid-default-p", node="n0"))
        assert state.checked == 3
        assert [e.seq for e in log.read(1)] == [1, 2, 3]
        assert next(iter(log.read(1))) == stored
    with EventLog.open(tmp_path, fsync="never") as reopened:
        journal = Journal(ClusterState(), VirtualClock(), reopened)
        assert journal.record(pod_event(pod("q"))).seq == 4


def test_a_snapshot_is_written_every_n_events(tmp_path: Path) -> None:
    with EventLog.open(tmp_path, fsync="never") as log:
        state = ClusterState()
        journal = Journal(state, VirtualClock(), log, snapshot_every=3)
        for index in range(7):
            journal.record(node_event(node(f"n{index}")))
        latest = log.latest_snapshot()
        assert latest is not None
        seq, payload = latest
        assert seq == 6
        restored = ClusterState.restore(payload)
        assert sorted(restored.nodes) == [f"n{i}" for i in range(6)]


async def test_the_watch_recorder_records_through_the_journal() -> None:
    state = ClusterState()
    journal = Journal(state, VirtualClock())
    await journal.recorder().record(node_event(node("n0")))
    assert "n0" in state.nodes and journal.recorded == 1
