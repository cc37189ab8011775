"""Volcano's enqueue: the PodGroups of Volcano Jobs whose schedulerName is ours, and of Kubeflow training jobs
a replica of which names us, move from Pending to Inqueue (so that Volcano's job controller or
training-operator creates their pods) when their minResources fit the cluster's idle room
with Volcano's overcommit factor, and their queue's capability; best-effort ones at once; others' never."""

from __future__ import annotations

import msgspec

from events.builders import bound, kubeflow_job, node, pod, queue, volcano_job, volcano_pod_group
from events.ingest import KIND_BY_NAME, upsert_event
from events.model import (
    Event,
    KubeflowJobDeleted,
    KubeflowJobUpserted,
    NodeUpserted,
    ObjectUndecodable,
    PodUpserted,
    PriorityClassUpserted,
    QueueUpserted,
    VolcanoJobDeleted,
    VolcanoJobUpserted,
    VolcanoPodGroupUpserted,
)
from events.objects import ObjectMeta, PriorityClass
from state.cluster import ClusterState
from state.volcano_enqueue import pod_scheduler_names, to_enqueue

GPUS_8 = {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "8"}


def job(name: str, *, gpus: int = 8, pods: int = 1, scheduler: str = "toposched", queue_name: str = "",
        phase: str = "Pending", priority_class: str = "", best_effort: bool = False) -> list[Event]:
    """A Volcano Job and the PodGroup its job controller makes for it (no pods yet)."""
    vcjob = volcano_job(name, scheduler_name=scheduler)
    wanted = {"cpu": str(8 * pods), "memory": f"{64 * pods}Gi", "nvidia.com/gpu": str(gpus * pods), "pods": "1"}
    group = volcano_pod_group(f"{name}-{vcjob.metadata.uid}", min_member=pods, queue=queue_name, phase=phase,
                              priority_class_name=priority_class, min_resources=None if best_effort else wanted,
                              job_uid=vcjob.metadata.uid)
    return [VolcanoJobUpserted(job=vcjob), VolcanoPodGroupUpserted(pod_group=group)]


def cluster(*events: Event, nodes: int = 2) -> ClusterState:
    state = ClusterState()
    state.apply_all([NodeUpserted(node=node(f"n{index}")) for index in range(nodes)])
    state.apply_all(events)
    return state


def names(keys: list[str]) -> list[str]:
    return [key.partition("/")[2].partition("-uid")[0] for key in keys]


def test_a_job_whose_min_resources_fit_is_enqueued_and_others_schedulers_jobs_are_left_alone() -> None:
    state = cluster(*job("mine"), *job("volcanos", scheduler="volcano"), *job("unnamed", scheduler=""))
    assert names(to_enqueue(state)) == ["mine"]  # an empty schedulerName is Volcano's (its webhook's default)


def test_room_counts_the_overcommit_factor_and_what_is_inqueue_already() -> None:
    # two 8-GPU nodes: 16 GPUs x 1.2 = 19.2 of idle room; 16 GPUs already inqueue leave 3
    state = cluster(*job("queued", pods=2, phase="Inqueue"), *job("small", gpus=3), *job("big", gpus=4))
    assert names(to_enqueue(state)) == ["small"]
    # a running pod takes its room from the idle part
    state = cluster(*job("waiting", pods=2), PodUpserted(pod=bound(pod("busy", gpus=8), "n0")))
    assert to_enqueue(state) == []


def test_one_that_does_not_fit_does_not_hold_back_the_next_and_in_flight_ones_count() -> None:
    state = cluster(*job("huge", pods=3), *job("one"), *job("two"))
    assert names(to_enqueue(state)) == ["one", "two"]  # oldest first, huge skipped
    [one, two] = to_enqueue(state)
    assert to_enqueue(state, in_flight={one, two}) == []  # 16 of 19.2 GPUs taken by them: huge still waits


def test_higher_priority_first() -> None:
    urgent = PriorityClassUpserted(priority_class=PriorityClass(metadata=ObjectMeta(name="urgent"), value=1000))
    state = cluster(urgent, *job("older", pods=2), *job("newer", pods=2, priority_class="urgent"))
    assert names(to_enqueue(state)) == ["newer"]  # 16 GPUs each: one fits


def test_a_best_effort_job_is_enqueued_whatever_the_room() -> None:
    state = cluster(*job("queued", pods=2, phase="Inqueue"), *job("free", best_effort=True), nodes=1)
    assert names(to_enqueue(state)) == ["free"]


def test_the_queue_capability_holds_jobs_back() -> None:
    capped = QueueUpserted(queue=queue("team", capability={"nvidia.com/gpu": "8"}))
    state = cluster(capped, *job("first", queue_name="team"), *job("second", queue_name="team"), *job("other"))
    assert names(to_enqueue(state)) == ["first", "other"]


def test_a_pod_group_without_its_job_or_past_pending_is_not_enqueued() -> None:
    state = cluster(*job("gone"), *job("running", phase="Running"))
    state.apply(VolcanoJobDeleted(key="default/gone"))
    assert to_enqueue(state) == []
    plain = volcano_pod_group("plain", min_member=1)  # made by hand: its pods come whatever its phase
    state.apply(VolcanoPodGroupUpserted(pod_group=plain))
    assert to_enqueue(state) == []


def test_volcano_jobs_survive_a_snapshot() -> None:
    state = cluster(*job("mine"))
    restored = ClusterState.restore(state.snapshot())
    assert to_enqueue(restored) == to_enqueue(state) and restored.volcano_jobs == state.volcano_jobs


def test_a_job_of_a_missing_or_closed_queue_is_not_enqueued_but_one_of_the_default_queue_is() -> None:
    closed = QueueUpserted(queue=queue("shut", state="Closed"))
    state = cluster(closed, *job("nowhere", queue_name="missing"), *job("shut-out", queue_name="shut"),
                    *job("fine"), *job("default-named", queue_name="default"))
    assert sorted(names(to_enqueue(state))) == ["default-named", "fine"]


def training_job(name: str, schedulers: dict[str, str], *, kind: str = "PyTorchJob", gpus: int = 8,
                 namespace: str = "default") -> list[Event]:
    """A Kubeflow training job and the Volcano PodGroup training-operator makes for it (named as the job,
    queue `default`, minResources summed over its replicas; no pods yet)."""
    trainer = kubeflow_job(name, kind=kind, namespace=namespace, schedulers=schedulers)
    wanted = {"cpu": str(8 * len(schedulers)), "nvidia.com/gpu": str(gpus * len(schedulers))}
    group = volcano_pod_group(name, namespace=namespace, min_member=len(schedulers), queue="default",
                              phase="Pending", min_resources=wanted, job_uid=trainer.metadata.uid)
    return [KubeflowJobUpserted(job=trainer), VolcanoPodGroupUpserted(pod_group=group)]


def test_a_training_operator_jobs_pod_group_is_enqueued_when_a_replica_names_toposched() -> None:
    state = cluster(*training_job("bert", {"Master": "toposched", "Worker": "toposched"}, gpus=4),
                    *training_job("mixed", {"Chief": "", "Worker": "toposched"}, kind="TFJob", gpus=2),
                    *training_job("theirs", {"Master": "", "Worker": "volcano"}, gpus=1))
    # training-operator writes "volcano" into a template without a schedulerName: "theirs" is Volcano's
    assert sorted(names(to_enqueue(state))) == ["bert", "mixed"]


def test_a_training_job_is_told_apart_from_another_kinds_of_the_same_name_and_forgotten_when_deleted() -> None:
    state = cluster(*training_job("llm", {"Worker": "toposched"}, gpus=1),
                    *training_job("llm", {"Worker": ""}, kind="MPIJob", gpus=1, namespace="other"))
    state.apply(KubeflowJobUpserted(job=kubeflow_job("llm", kind="JAXJob", schedulers={"Worker": ""})))
    assert names(to_enqueue(state)) == ["llm"] and to_enqueue(state)[0] == "default/llm"  # the PyTorchJob's
    restored = ClusterState.restore(state.snapshot())
    assert restored.kubeflow_jobs == state.kubeflow_jobs and to_enqueue(restored) == to_enqueue(state)
    state.apply(KubeflowJobDeleted(kind="JAXJob", key="default/llm"))  # the other kind's: the PyTorchJob stays
    assert to_enqueue(state) == ["default/llm"]
    state.apply(KubeflowJobDeleted(kind="PyTorchJob", key="default/llm"))
    assert to_enqueue(state) == []


def test_a_training_job_as_the_api_serves_it_is_read_with_null_and_bare_replicas() -> None:
    info = KIND_BY_NAME["PyTorchJob"]
    document = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                "metadata": {"name": "ddp", "namespace": "default", "uid": "u-ddp"},
                "spec": {"runPolicy": {"schedulingPolicy": {"queue": "default", "minAvailable": 3}},
                         "pytorchReplicaSpecs": {
                             "Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": {"spec": {
                                 "schedulerName": "toposched", "containers": [{"name": "pytorch", "image": "x"}]}}},
                             "Worker": {"replicas": 2},
                             "Extra": None}}}
    event = upsert_event(info, msgspec.json.encode(document))
    assert isinstance(event, KubeflowJobUpserted)
    assert pod_scheduler_names(event.job) == ["toposched", "volcano", "volcano"]
    bad = upsert_event(info, {**document, "spec": {"pytorchReplicaSpecs": {"Worker": {"template": {"spec": {
        "schedulerName": 7}}}}}})
    assert isinstance(bad, ObjectUndecodable) and "schedulerName" in bad.problem and bad.kind == "PyTorchJob"
