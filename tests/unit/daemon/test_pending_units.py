"""What the loop keeps from the events (pending units, the lowest placed priority) is always what walking
the state gives."""

from __future__ import annotations

from pathlib import Path

import anyio
import msgspec
import pytest
from hypothesis import given

from daemon.offline.simulator import Simulation, VirtualClock
from daemon.scheduling.journal import Journal
from daemon.scheduling.queue import PendingUnits, PlacedPriorities, Unit, pending_units
from events.builders import (
    bound,
    group_event,
    kai_pod_group,
    node,
    node_event,
    pod,
    pod_event,
    pod_group,
    volcano_pod_group,
)
from events.model import (
    Event,
    KaiPodGroupUpserted,
    PodAssumed,
    PodDeleted,
    PodForgotten,
    PriorityClassUpserted,
    VolcanoPodGroupDeleted,
    VolcanoPodGroupUpserted,
)
from events.objects import KAI_POD_GROUP_ANNOTATION, VOLCANO_GROUP_ANNOTATION, ObjectMeta, PriorityClass
from events.scenario import load_scenario
from state.cluster import ClusterState
from tests.property.test_fold_properties import priority_events_strategy

REPO = Path(__file__).parents[3]
SCENARIOS = sorted(p for p in (REPO / "tests" / "scenarios").glob("*.yaml") if not p.name.endswith(".expect.yaml"))


def _same(kept: list[Unit], walked: list[Unit]) -> bool:
    def order(unit: Unit) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
        return unit.key, unit.gangs, unit.pods  # GangGroups that disagree may share a first gang, hence a key

    return sorted(kept, key=order) == sorted(walked, key=order)


class Checked:
    """A journal whose every event is followed by comparing the kept units with a walk of the state."""

    def __init__(self, journal: Journal) -> None:
        self.state = journal.state
        self.units = PendingUnits(self.state)
        self.placed = PlacedPriorities(self.state)
        self.checks = 0
        journal.subscribe(self.check)

    def check(self, event: Event) -> None:
        self.units.observe(event)
        self.placed.observe(event)
        assert _same(self.units.units(), pending_units(self.state)), f"after {type(event).__name__}"
        walked = min((p.priority for p in self.state.pods.values() if p.placed_node), default=1 << 62)
        assert self.placed.lowest() == walked, f"after {type(event).__name__}"
        self.checks += 1


@pytest.mark.parametrize("path", [*SCENARIOS, REPO / "examples" / "demo-cluster.yaml"], ids=lambda p: p.stem)
def test_what_is_kept_matches_a_walk_of_the_state_through_every_scenario(path: Path) -> None:
    simulation = Simulation(load_scenario(path))
    checked = Checked(simulation.journal)
    anyio.run(simulation.run)
    assert checked.checks == simulation.journal.recorded


def test_what_is_kept_follows_gang_moves_priorities_deletions_and_re_creations() -> None:
    journal = Journal(ClusterState(), VirtualClock())
    checked = Checked(journal)
    low = PriorityClass(metadata=ObjectMeta(name="low"), value=10)
    steps: list[Event] = [
        node_event(node("n0")), PriorityClassUpserted(priority_class=low),
        group_event(pod_group("a", min_member=2)),
        group_event(pod_group("b", min_member=1, gang_group=["default/a", "default/b"])),
        pod_event(pod("a-0", gang="a", priority_class="low")), pod_event(pod("a-1", gang="a")),
        pod_event(pod("b-0", gang="b")), pod_event(pod("solo", priority=5)),
        pod_event(pod("a-1", gang="b")),  # moved to the other gang by its label
        PodAssumed(pod="default/a-0", uid="uid-default-a-0", node="n0", gang="default/a"),
        PodForgotten(pod="default/a-0", uid="uid-default-a-0", reason="test"),
        PriorityClassUpserted(priority_class=msgspec.structs.replace(low, value=500)),  # every pod of it re-prioritised
        pod_event(bound(pod("solo", priority=5), "n0")),
        pod_event(pod("b-0", gang="b", uid="new-uid")),  # re-created under the same name
        PodDeleted(key="default/a-1", uid="uid-default-a-1"),
        group_event(pod_group("a", min_member=2, gang_group=["default/a"])),  # the GangGroup split again
    ]
    for event in steps:
        journal.record(event)
    assert checked.checks == len(steps)
    units = {u.gangs: u for u in checked.units.units()}
    assert sorted(units) == [("default/a",), ("default/a", "default/b")]
    assert units[("default/a",)].pods == ("default/a-0",) and units[("default/a",)].priority == 500
    assert checked.placed.lowest() == 5  # solo, bound


def test_what_is_kept_follows_the_job_priority_a_volcano_or_kai_pod_group_gives_its_pods() -> None:
    journal = Journal(ClusterState(), VirtualClock())
    checked = Checked(journal)

    def member(name: str, group: str, annotation: str) -> Event:
        return pod_event(pod(name, annotations={annotation: group}))

    high = PriorityClass(metadata=ObjectMeta(name="high"), value=1000)
    steps: list[Event] = [
        node_event(node("n0")), PriorityClassUpserted(priority_class=PriorityClass(
            metadata=ObjectMeta(name="low"), value=10)),
        member("v-0", "v", VOLCANO_GROUP_ANNOTATION), member("v-1", "v", VOLCANO_GROUP_ANNOTATION),
        VolcanoPodGroupUpserted(pod_group=volcano_pod_group("v", min_member=2, priority_class_name="low")),
        pod_event(bound(pod("v-0", annotations={VOLCANO_GROUP_ANNOTATION: "v"}), "n0")),  # placed, at 10
        KaiPodGroupUpserted(pod_group=kai_pod_group("k", priority_class_name="high")),  # missing: the default, 0
        member("k-0", "k", KAI_POD_GROUP_ANNOTATION),
        VolcanoPodGroupUpserted(pod_group=volcano_pod_group("v", min_member=2, priority_class_name="high")),
        PriorityClassUpserted(priority_class=high),  # k's class comes
        VolcanoPodGroupDeleted(key="default/v"),  # v's pods go by their own again
    ]
    for event in steps:
        journal.record(event)
    assert checked.checks == len(steps)
    units = {u.key: u.priority for u in checked.units.units()}
    assert units == {"default/k": 1000, "default/v": 0}
    assert checked.placed.lowest() == 0  # v-0, bound, its own priority again


@given(priority_events_strategy)
def test_what_is_kept_matches_a_walk_while_jobs_priorities_move(events: list[Event]) -> None:
    journal = Journal(ClusterState(), VirtualClock())
    checked = Checked(journal)
    for event in events:
        journal.record(event)
    assert checked.checks == len(events)
