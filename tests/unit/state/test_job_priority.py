"""A Volcano or KAI job's priority is its PodGroup's `priorityClassName`, whatever its pods carry: Volcano's
scheduler cache and KAI's scheduler order jobs, and preempt between them, by it. Every member takes it
(`PodInfo.priority`), keeps its own apart (`own_priority`), and follows the PodGroup and the PriorityClasses
as they come, change and go; a PodGroup naming a class that does not exist is reported."""

from __future__ import annotations

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
    PodNominated,
    PriorityClassDeleted,
    PriorityClassUpserted,
    VolcanoPodGroupDeleted,
    VolcanoPodGroupUpserted,
    encode_event,
    with_seq,
)
from events.objects import (
    KAI_POD_GROUP_ANNOTATION,
    KAI_QUEUE_LABEL,
    VOLCANO_GROUP_ANNOTATION,
    ObjectMeta,
    PriorityClass,
)
from state.cluster import ClusterState
from state.gangs import KAI_POD_GROUP_PROBLEM


def priority_class(name: str, value: int, *, default: bool = False) -> PriorityClassUpserted:
    return PriorityClassUpserted(priority_class=PriorityClass(metadata=ObjectMeta(name=name), value=value,
                                                              global_default=default))


def volcano_member(name: str, group: str, *, priority_class: str = "") -> Event:
    return pod_event(pod(name, annotations={VOLCANO_GROUP_ANNOTATION: group}, priority_class=priority_class))


def volcano_group(name: str, priority_class: str) -> VolcanoPodGroupUpserted:
    return VolcanoPodGroupUpserted(pod_group=volcano_pod_group(name, min_member=2, priority_class_name=priority_class))


def fold(*events: Event) -> ClusterState:
    state = ClusterState()
    for event in events:
        assert state.apply(event) is None
    return state


def priorities(state: ClusterState, *names: str) -> list[tuple[int, int]]:
    return [(state.pods[f"default/{name}"].priority, state.pods[f"default/{name}"].own_priority) for name in names]


def test_the_members_of_a_volcano_job_take_its_pod_groups_class_whatever_their_own() -> None:
    state = fold(priority_class("low", 10), priority_class("high", 1000),
                 volcano_member("a-0", "a"), volcano_member("a-1", "a", priority_class="low"))
    assert priorities(state, "a-0", "a-1") == [(0, 0), (10, 10)]
    seen = state.priority_changes.end
    state.apply(volcano_group("a", "high"))  # the PodGroup after its pods, as a controller may make them
    assert priorities(state, "a-0", "a-1") == [(1000, 0), (1000, 10)]
    assert state.priority_changes.since(seen) == ["default/a-0", "default/a-1"]  # for the queue's indexes
    state.apply(volcano_member("a-2", "a", priority_class="low"))  # a member created later takes it too
    assert priorities(state, "a-2") == [(1000, 10)]
    state.apply(volcano_group("a", "low"))
    assert priorities(state, "a-0", "a-1", "a-2") == [(10, 0), (10, 10), (10, 10)]
    state.apply(VolcanoPodGroupDeleted(key="default/a"))  # each goes by its own again
    assert priorities(state, "a-0", "a-1", "a-2") == [(0, 0), (10, 10), (10, 10)]


def test_a_pod_group_naming_no_class_leaves_its_pods_their_own_and_other_dialects_are_unchanged() -> None:
    state = fold(priority_class("low", 10), priority_class("high", 1000, default=True),
                 volcano_group("v", ""), volcano_member("v-0", "v", priority_class="low"),
                 group_event(pod_group("k", min_member=1)), pod_event(pod("k-0", gang="k", priority_class="low")))
    assert priorities(state, "v-0", "k-0") == [(10, 10), (10, 10)]
    assert state.gangs["default/v"].job_priority is None


def test_a_missing_class_is_reported_and_the_default_taken_until_it_exists() -> None:
    state = fold(priority_class("normal", 5, default=True),
                 KaiPodGroupUpserted(pod_group=kai_pod_group("train", min_member=2, priority_class_name="train")),
                 pod_event(pod("t-0", annotations={KAI_POD_GROUP_ANNOTATION: "train"})))
    assert priorities(state, "t-0") == [(5, 5)]  # the globalDefault class's, as KAI and Volcano take it
    (problem,) = state.problems_of(KAI_POD_GROUP_PROBLEM, "default/train")
    assert (problem.field, problem.message) == (
        "spec.priorityClassName", "PriorityClass 'train' not found: the job takes the default priority, 5, as KAI does")
    state.apply(priority_class("train", 50))
    assert priorities(state, "t-0") == [(50, 5)]
    assert state.problems_of(KAI_POD_GROUP_PROBLEM, "default/train") == []
    state.apply(PriorityClassDeleted(name="normal"))
    state.apply(PriorityClassDeleted(name="train"))
    assert priorities(state, "t-0") == [(0, 0)]
    assert len(state.problems_of(KAI_POD_GROUP_PROBLEM, "default/train")) == 1


def test_a_nomination_blocks_by_its_jobs_priority_and_its_node_is_noted_when_that_moves() -> None:
    state = fold(node_event(node("n0")), priority_class("low", 10), priority_class("high", 1000),
                 volcano_group("a", "high"), volcano_member("a-0", "a"),
                 PodNominated(pod="default/a-0", uid="uid-default-a-0", node="n0", gang="default/a", priority=1000))
    node_info = state.nodes["n0"]
    assert state.nominated_load(node_info, 500)  # a pod of priority 500 must leave the nominated room alone
    seen = state.node_changes.end
    state.apply(volcano_group("a", "low"))
    assert not state.nominated_load(node_info, 500)
    assert "n0" in (state.node_changes.since(seen) or [])  # what n0 offers a pod of 500 has changed


def test_a_snapshot_restores_the_job_priorities() -> None:
    state = fold(node_event(node("n0")), priority_class("high", 1000), volcano_member("a-0", "a"),
                 volcano_group("a", "high"), volcano_group("b", "missing"),
                 pod_event(bound(pod("b-0", annotations={VOLCANO_GROUP_ANNOTATION: "b"}), "n0")))
    restored = ClusterState.restore(state.snapshot())
    assert restored.canonical() == state.canonical()
    assert priorities(restored, "a-0", "b-0") == [(1000, 0), (0, 0)]
    assert restored.gangs["default/a"].job_priority == 1000


def kai_pod(name: str, **labels: str) -> Event:
    return pod_event(pod(name, labels={KAI_QUEUE_LABEL: "default-queue", **labels}))


def test_a_pod_in_a_kai_queue_by_label_takes_the_class_its_label_names_as_kais_pod_grouper_reads_it() -> None:
    state = fold(priority_class("train", 50), priority_class("build", 100), priority_class("normal", 7),
                 kai_pod("by-label", priorityClassName="build"),
                 pod_event(pod("by-spec", labels={KAI_QUEUE_LABEL: "default-queue"}, priority_class="normal")),
                 kai_pod("by-default"),
                 pod_event(pod("no-queue", labels={"priorityClassName": "build"})))  # no KAI queue: its own
    assert [state.pods[f"default/{name}"].priority for name in ("by-label", "by-spec", "by-default", "no-queue")] == [
        100, 7, 50, 0]
    why = state.kai_non_preemptible_why(state.pods["default/by-label"])
    assert why == "pod default/by-label is of priority 100 (its label priorityClassName build), 100 or more"


def test_a_kai_pod_labelled_with_a_missing_class_is_reported_and_takes_it_once_it_exists() -> None:
    state = fold(kai_pod("p", priorityClassName="build"))
    (problem,) = state.problems_of("Pod", "default/p")
    assert (problem.field, problem.message) == (
        "metadata.labels[priorityClassName]", "PriorityClass 'build' not found: the default priority, 0, taken, "
        "as KAI does")
    state.apply(priority_class("build", 100))
    assert state.pods["default/p"].priority == 100 and state.problems_of("Pod", "default/p") == []


def test_the_fast_fold_and_a_restored_snapshot_give_a_kai_pod_its_labels_priority_too() -> None:
    # A pod of a head met before without labels derives alike but for its gang (`_add_new_pod`,
    # `_restored_shape`): not one whose KAI labels decide its priority.
    events: list[Event] = [priority_class("build", 100), pod_event(pod("plain")),
                           kai_pod("labelled", priorityClassName="build")]
    folded = ClusterState()
    with folded.batching_binds():
        folded.fold_records((seq, encode_event(with_seq(event, seq))) for seq, event in enumerate(events, 1))
    assert [folded.pods[f"default/{n}"].priority for n in ("plain", "labelled")] == [0, 100]
    restored = ClusterState.restore(folded.snapshot())
    assert [restored.pods[f"default/{n}"].priority for n in ("plain", "labelled")] == [0, 100]
    assert restored.canonical() == folded.canonical()
