"""The journal: stamp, append to the log before folding, notify, snapshot."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path

import msgspec
from structlog.testing import capture_logs

from daemon.config import EventLogConfig
from daemon.offline.replay import fold_log
from daemon.offline.simulator import VirtualClock
from daemon.scheduling.journal import Journal
from daemon.scheduling.snapshots import FoldedSnapshots
from daemon.telemetry.metrics import Metrics
from events.builders import bound, group_event, node, node_event, pod, pod_event, pod_group
from events.log import EventLog
from events.model import Event, GangPending, NodeUpserted, ObjectUndecodable, PodAssumed
from state.cluster import ClusterState


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


def test_batch_listeners_hear_what_was_recorded_together_once_all_of_it_is_folded_and_heard() -> None:
    state = ClusterState()
    journal = Journal(state, VirtualClock())
    heard: list[int] = []
    batches: list[tuple[list[int], list[int], bool]] = []
    journal.subscribe(lambda e: heard.append(e.seq))
    journal.subscribe_batches(lambda events: batches.append(
        ([e.seq for e in events], list(heard), all(f"default/{n}" in state.pods for n in ("a", "b", "c")))))

    def broken(events: object) -> None:
        raise RuntimeError("a listener bug")

    journal.subscribe_batches(broken)
    journal.record(node_event(node("n0")))
    journal.record_many([pod_event(pod(name)) for name in ("a", "b", "c")])
    assert batches == [([1], [1], False), ([2, 3, 4], [1, 2, 3, 4], True)]
    assert journal.internal_errors == {"listener": 2}  # the broken one cost the others nothing


def test_a_listener_cannot_record_while_a_batch_is_folded_but_a_batch_listener_can(tmp_path: Path) -> None:
    """Recorded mid-batch, an event would be logged after the batch and folded inside it: a replay would
    fold it elsewhere. It is refused and reported as the listener's error; from a batch listener it lands."""
    log = EventLog.open(tmp_path / "log", fsync="never")
    state = ClusterState()
    journal = Journal(state, VirtualClock(), log)
    journal.record(node_event(node("n0", gpus=8)))

    def nested(event: Event) -> None:
        if isinstance(event, PodAssumed):
            journal.record(GangPending(gang="default/a", reason="recorded by a listener"))

    def after_batch(events: Sequence[Event]) -> None:
        if len(events) > 1:
            journal.record(GangPending(gang="default/b", reason="after the batch"))

    journal.subscribe(nested)
    journal.subscribe_batches(after_batch)
    journal.record(pod_event(pod("a", gpus=1)))
    journal.record(pod_event(pod("b", gpus=1)))
    with capture_logs() as logs:
        journal.record_many([PodAssumed(pod="default/a", uid="uid-default-a", node="n0"),
                             PodAssumed(pod="default/b", uid="uid-default-b", node="n0")])
    assert journal.internal_errors == {"listener": 2}
    assert "seq 4-5 were being folded" in logs[0]["error"]
    kinds = [type(stored).__name__ for stored in log.read(1)]
    assert kinds == ["NodeUpserted", "PodUpserted", "PodUpserted", "PodAssumed", "PodAssumed", "GangPending"]
    after = next(iter(log.read(6)))
    assert isinstance(after, GangPending) and after.gang == "default/b"  # the batch listener's, after the batch
    assert fold_log(log).state.canonical() == state.canonical()
    log.close()


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


def test_a_decision_s_events_are_appended_together_then_each_folded_and_heard_in_order(tmp_path: Path) -> None:
    with EventLog.open(tmp_path, fsync="never") as log:
        state = LogCheckingState(log)
        journal = Journal(state, VirtualClock(5.0), log, snapshot_every=4)
        journal.record(node_event(node("n0", gpus=8)))
        for name in ("a", "b"):
            journal.record(pod_event(pod(name, gpus=1)))
        heard: list[tuple[int, bool]] = []
        journal.subscribe(lambda e: heard.append((e.seq, isinstance(e, PodAssumed)
                                                  and state.pods[e.pod].assumed_node == "n0")))
        stored = journal.record_many([PodAssumed(pod=f"default/{name}", uid=f"uid-default-{name}", node="n0")
                                      for name in ("a", "b")])
        assert [(e.seq, e.time) for e in stored] == [(4, 5.0), (5, 5.0)]
        assert [e.seq for e in log.read(1)] == [1, 2, 3, 4, 5]
        assert heard == [(4, True), (5, True)]
        assert not state.pending and journal.recorded == 5
        # The snapshot due inside the batch is taken after it, of the state that folded all of it.
        latest = log.latest_snapshot()
        assert latest is not None and latest[0] == 5
        assert sorted(ClusterState.restore(latest[1]).pods) == ["default/a", "default/b"]
        assert not ClusterState.restore(latest[1]).pending


def test_a_batch_without_a_log_continues_the_seqs() -> None:
    state = ClusterState()
    journal = Journal(state, VirtualClock(1.0))
    journal.record(node_event(node("n0", gpus=8)))
    journal.record(pod_event(pod("a", gpus=1)))
    stored = journal.record_many([PodAssumed(pod="default/a", uid="uid-default-a", node="n0"),
                                  PodAssumed(pod="default/a", uid="uid-default-a", node="n0")])
    assert [e.seq for e in stored] == [3, 4]
    assert journal.record(pod_event(pod("b"))).seq == 5

async def test_the_watch_recorder_records_through_the_journal() -> None:
    state = ClusterState()
    journal = Journal(state, VirtualClock())
    await journal.recorder().record(node_event(node("n0")))
    assert "n0" in state.nodes and journal.recorded == 1


# --------------------------------------------------------------------------- the record cap

SMALL_CAP = EventLogConfig(max_record_bytes=64 * 1024)


def huge_labels() -> dict[str, str]:
    return {f"example.com/label-{i}": "v" * 60 for i in range(1500)}  # ~130 KB of labels, over a 64 KiB cap


def test_a_pod_over_the_record_cap_is_counted_on_its_node_but_never_placed(tmp_path: Path) -> None:
    metrics = Metrics()
    with EventLog.open(tmp_path, fsync="never") as log, capture_logs() as logs:
        state = ClusterState()
        journal = Journal(state, VirtualClock(), log, policy=SMALL_CAP, metrics=metrics)
        journal.record(node_event(node("n0", gpus=8)))
        journal.record(pod_event(bound(pod("running", gpus=6, labels=huge_labels()), "n0")))
        journal.record(pod_event(pod("waiting", gpus=1, labels=huge_labels())))
        assert all(len(payload) < 4096 for _, payload in log.read_raw(1))
    assert state.nodes["n0"].used["nvidia.com/gpu"] == 6000  # the running pod still holds its GPUs
    assert "default/waiting" not in state.pending  # what toposched cannot read whole, it does not place
    problems = [str(p) for p in state.problems_of("Pod", "default/waiting")]
    assert problems and "over the 65536-byte record cap" in problems[0]
    errors = [line for line in logs if line["event"] == "journal.record_too_large"]
    assert [(line["kind"], line["object"]) for line in errors] == [("Pod", "default/running"),
                                                                   ("Pod", "default/waiting")]
    assert errors[0]["bytes"] > 64 * 1024 and errors[0]["limit"] == 64 * 1024
    assert metrics.registry.get_sample_value("toposched_event_log_oversized_records_total", {"kind": "Pod"}) == 2


def test_a_later_version_that_fits_replaces_the_core(tmp_path: Path) -> None:
    with EventLog.open(tmp_path, fsync="never") as log:
        state = ClusterState()
        journal = Journal(state, VirtualClock(), log, policy=SMALL_CAP)
        journal.record(pod_event(pod("p", gpus=1, labels=huge_labels())))
        journal.record(pod_event(pod("p", gpus=1)))
    assert "default/p" in state.pending and not state.problems_of("Pod", "default/p")


def test_a_node_over_the_record_cap_is_not_placed_on_but_its_pods_are_counted(tmp_path: Path) -> None:
    with EventLog.open(tmp_path, fsync="never") as log:
        state = ClusterState()
        journal = Journal(state, VirtualClock(), log, policy=SMALL_CAP)
        journal.record(node_event(node("n0", gpus=8, labels=huge_labels())))
        journal.record(pod_event(bound(pod("running", gpus=2), "n0")))
    info = state.nodes["n0"]
    assert info.unschedulable and info.allocatable["nvidia.com/gpu"] == 8000 and info.used["nvidia.com/gpu"] == 2000
    assert "over the 65536-byte record cap" in str(state.problems_of("Node", "n0")[0])


def test_a_pod_group_over_the_record_cap_keeps_its_last_version_that_fitted(tmp_path: Path) -> None:
    with EventLog.open(tmp_path, fsync="never") as log:
        state = ClusterState()
        journal = Journal(state, VirtualClock(), log, policy=SMALL_CAP)
        journal.record(group_event(pod_group("train", min_member=4)))
        bigger = pod_group("train", min_member=2)
        bigger = msgspec.structs.replace(bigger, metadata=msgspec.structs.replace(bigger.metadata,
                                                                                   labels=huge_labels()))
        stored = journal.record(group_event(bigger))
    assert isinstance(stored, ObjectUndecodable) and stored.key == "default/train"
    assert state.pod_groups["default/train"].spec.min_member == 4
    assert ("PodGroup", "default/train") in state.undecodable


def test_decisions_are_never_capped(tmp_path: Path) -> None:
    with EventLog.open(tmp_path, fsync="never") as log:
        journal = Journal(ClusterState(), VirtualClock(), log, policy=SMALL_CAP)
        stored = journal.record(GangPending(gang="default/g", reason="x" * 100_000))
    assert isinstance(stored, GangPending) and len(stored.reason) == 100_000


# --------------------------------------------------------------------------- retention


def test_after_each_snapshot_history_beyond_the_retention_is_pruned(tmp_path: Path) -> None:
    policy = EventLogConfig(retention_bytes=0, retention_seconds=0)
    with EventLog.open(tmp_path, fsync="never", segment_bytes=4096) as log:
        state = ClusterState()
        journal = Journal(state, VirtualClock(), log, snapshot_every=100, policy=policy)
        for index in range(450):
            journal.record(node_event(node(f"n{index}")))
        assert log.first_seq > 1
        assert sum(path.stat().st_size for path in tmp_path.glob("*.seg")) < 20 * 4096
    with EventLog.open_readonly(tmp_path) as reader:
        restored = fold_log(reader)
        from_base = fold_log(reader, use_snapshot=False)
    assert restored.state.canonical() == state.canonical() == from_base.state.canonical()
    assert from_base.snapshot_seq == 400 >= reader.first_seq - 1  # the oldest snapshot kept


def test_a_snapshot_is_also_written_once_enough_bytes_were_logged(tmp_path: Path) -> None:
    with EventLog.open(tmp_path, fsync="never") as log:
        journal = Journal(ClusterState(), VirtualClock(), log, snapshot_every=10**9, snapshot_bytes=4096)
        for index in range(40):
            journal.record(node_event(node(f"n{index}")))
        latest = log.latest_snapshot()
    assert latest is not None and latest[0] < 40


# --------------------------------------------------------------------------- snapshots written by another process


def wait_for_snapshot(journal: Journal, within: float = 60.0) -> None:
    deadline = time.monotonic() + within
    while journal.snapshot_in_progress:
        assert time.monotonic() < deadline, "the snapshot writer did not finish"
        time.sleep(0.01)


def test_a_background_snapshot_holds_the_state_as_of_its_seq_while_the_loop_goes_on(tmp_path: Path) -> None:
    metrics = Metrics()
    with EventLog.open(tmp_path, fsync="interval:10ms") as log:
        state = ClusterState()
        journal = Journal(state, VirtualClock(), log, snapshot_every=50, background=True, metrics=metrics)
        for index in range(50):
            journal.record(node_event(node(f"n{index}")))
        journal.record(pod_event(pod("p", gpus=1)))  # the loop goes on while the writer works
        assert journal.snapshot_in_progress
        wait_for_snapshot(journal)
        latest = log.latest_snapshot()
        journal.close()
    assert latest is not None and latest[0] == 50
    with EventLog.open_readonly(tmp_path) as reader:
        at_50 = fold_log(reader, until=50, use_snapshot=False).state
    assert ClusterState.restore(latest[1]).canonical() == at_50.canonical()
    assert metrics.registry.get_sample_value("toposched_event_log_snapshot_duration_seconds_count") == 1


def test_a_background_snapshot_is_folded_with_the_daemon_s_scheduler_name(tmp_path: Path) -> None:
    with EventLog.open(tmp_path, fsync="never") as log:
        state = ClusterState("other-scheduler")
        journal = Journal(state, VirtualClock(), log, snapshot_every=5, background=True)
        for index in range(12):
            journal.record(pod_event(pod(f"p{index}", scheduler="other-scheduler")))
            wait_for_snapshot(journal)
        journal.close()
        latest = log.latest_snapshot()
    assert latest is not None and latest[0] == 10
    restored = ClusterState.restore(latest[1])
    assert restored.scheduler_name == "other-scheduler" and len(restored.pending) == 10  # folded as its own


def test_a_snapshot_due_while_one_is_written_is_taken_after_it(tmp_path: Path) -> None:
    with EventLog.open(tmp_path, fsync="never") as log:
        journal = Journal(ClusterState(), VirtualClock(), log, snapshot_every=5, background=True)
        for index in range(12):
            journal.record(node_event(node(f"n{index}")))
        wait_for_snapshot(journal)
        journal.record(node_event(node("after")))  # due (>= 5 since the one at 5), taken now
        wait_for_snapshot(journal)
        journal.close()
        latest = log.latest_snapshot()
    assert latest is not None and latest[0] == 13


def test_a_failed_snapshot_writer_is_reported_and_the_journal_goes_on(tmp_path: Path) -> None:
    metrics = Metrics()
    with EventLog.open(tmp_path, fsync="never") as log, capture_logs() as logs:
        journal = Journal(ClusterState(), VirtualClock(), log, snapshot_every=3, background=True, metrics=metrics)
        writer = journal._writer
        assert isinstance(writer, FoldedSnapshots)
        writer.command = [sys.executable, "-c", "import sys; sys.exit(3)"]
        for index in range(3):
            journal.record(node_event(node(f"n{index}")))
        wait_for_snapshot(journal)
        assert journal.record(node_event(node("next"))).seq == 4
        wait_for_snapshot(journal)
        journal.close()
        assert log.latest_snapshot() is None
    failed = [line for line in logs if line["event"] == "journal.snapshot_failed"]
    assert failed and failed[0]["log_level"] == "error" and failed[0]["exit_code"] == 3
    failures = metrics.registry.get_sample_value("toposched_event_log_snapshot_failures_total")
    assert failures is not None and failures >= 1


def test_history_is_pruned_after_a_background_snapshot_too(tmp_path: Path) -> None:
    policy = EventLogConfig(retention_bytes=0, retention_seconds=0)
    with EventLog.open(tmp_path, fsync="interval:10ms", segment_bytes=4096) as log:
        journal = Journal(ClusterState(), VirtualClock(), log, snapshot_every=200, policy=policy, background=True)
        for index in range(200):
            journal.record(node_event(node(f"n{index}")))
        wait_for_snapshot(journal)
        journal.close()
        assert log.first_seq > 1
