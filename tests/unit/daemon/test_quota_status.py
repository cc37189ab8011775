"""What the quota status writer would write (daemon/kube/quota_status.py `plan_quota_status`): each
dialect's field, only what differs from the object as folded, the same value spelled differently
counting as the same, and a write that came back by watch never written again."""

from __future__ import annotations

import json

import anyio
import msgspec

from daemon.kube.quota_status import QuotaStatus, plan_quota_status
from daemon.scheduling.ports import OK, ApiOutcome
from events.builders import (
    bound,
    capacity_quota,
    elastic_quota,
    gpu_nodes,
    gpus,
    pod,
    pod_event,
    queue,
    volcano_pod_group,
)
from events.model import (
    CapacityElasticQuotaUpserted,
    ElasticQuotaUpserted,
    Event,
    QueueUpserted,
    VolcanoPodGroupUpserted,
)
from events.objects import (
    QUOTA_NAME_LABEL,
    QUOTA_REQUEST_ANNOTATION,
    QUOTA_RUNTIME_ANNOTATION,
    VOLCANO_GROUP_ANNOTATION,
    ElasticQuota,
    ElasticQuotaStatus,
    QueueStatus,
)
from state.cluster import ClusterState
from state.quota import CAPACITY_KIND, KOORDINATOR_KIND, QUEUE_KIND

GPU = "nvidia.com/gpu"


def fold(*events: Event) -> ClusterState:
    state = ClusterState()
    state.apply_all([*gpu_nodes(4, per_block=2), *events])
    return state


def team_a(**changes: object) -> ElasticQuota:
    quota = elastic_quota("team-a", namespace="default", minimum=gpus(16), maximum=gpus(32))
    return msgspec.structs.replace(quota, **changes)


def running_in(quota: str, name: str, node: str) -> Event:
    return pod_event(bound(pod(name, labels={QUOTA_NAME_LABEL: quota}), node))


def test_koordinator_quota_gets_used_and_the_runtime_and_request_annotations() -> None:
    state = fold(ElasticQuotaUpserted(quota=team_a()), running_in("team-a", "a", "node-0"),
                 pod_event(pod("waiting", labels={QUOTA_NAME_LABEL: "team-a"})))
    (write,) = plan_quota_status(state)
    assert (write.kind, write.key, write.plural) == (KOORDINATOR_KIND, "default/team-a", "elasticquotas")
    assert write.status == {"used": {GPU: "8"}}  # the placed pod only; cpu and memory are not counted
    assert write.annotations is not None
    assert json.loads(write.annotations[QUOTA_REQUEST_ANNOTATION]) == {GPU: "16"}  # pending pods too
    assert json.loads(write.annotations[QUOTA_RUNTIME_ANNOTATION]) == {GPU: "16"}


def test_nothing_is_written_once_the_object_holds_it_even_spelled_differently() -> None:
    written = team_a(status=ElasticQuotaStatus(used={GPU: "8000m", "cpu": "0"}))
    meta = msgspec.structs.replace(written.metadata, annotations={
        QUOTA_RUNTIME_ANNOTATION: '{"nvidia.com/gpu":"8"}', QUOTA_REQUEST_ANNOTATION: '{"nvidia.com/gpu":"8000m"}'})
    state = fold(ElasticQuotaUpserted(quota=msgspec.structs.replace(written, metadata=meta)),
                 running_in("team-a", "a", "node-0"))
    assert plan_quota_status(state) == []


def test_a_resource_no_longer_counted_is_removed_and_a_garbled_value_rewritten() -> None:
    stale = team_a(status=ElasticQuotaStatus(used={GPU: "many", "example.com/fpga": "2"}))
    state = fold(ElasticQuotaUpserted(quota=stale), running_in("team-a", "a", "node-0"))
    (write,) = plan_quota_status(state)
    assert write.status == {"used": {GPU: "8", "example.com/fpga": None}}


def test_capacity_quota_used_names_every_resource_of_min_and_max_and_a_queue_its_allocated() -> None:
    job = pod("vj-0", annotations={VOLCANO_GROUP_ANNOTATION: "vj"})
    state = fold(
        CapacityElasticQuotaUpserted(quota=capacity_quota("team-b", minimum=gpus(8), maximum={"cpu": "64"})),
        QueueUpserted(queue=queue("root")), QueueUpserted(queue=queue("q1", capability=gpus(16))),
        QueueUpserted(queue=queue("idle", capability=gpus(16))),
        VolcanoPodGroupUpserted(pod_group=volcano_pod_group("vj", queue="q1")),
        pod_event(bound(pod("lone", namespace="team-b", gpus=0, cpu="4"), "node-1")),
        pod_event(bound(job, "node-2")),
    )
    writes = {(w.kind, w.key): w for w in plan_quota_status(state)}
    assert writes[(CAPACITY_KIND, "team-b/quota")].status == {"used": {"cpu": "4", GPU: "0"}}
    assert writes[(QUEUE_KIND, "q1")].status == {"allocated": {GPU: "8"}}
    assert writes[(QUEUE_KIND, "root")].status == {"allocated": {GPU: "8"}}  # Volcano's root holds every queue's
    assert (QUEUE_KIND, "idle") not in writes  # nothing allocated, nothing written: 0 is what it holds
    # an allocated the queue already holds is not written again
    held = msgspec.structs.replace(queue("q1", capability=gpus(16)), status=QueueStatus(allocated={GPU: "8"}))
    state.apply(QueueUpserted(queue=held))
    assert (QUEUE_KIND, "q1") not in {(w.kind, w.key) for w in plan_quota_status(state)}


def test_no_quota_objects_nothing_to_write() -> None:
    assert plan_quota_status(fold(running_in("team-a", "a", "node-0"))) == []


class _Recorder:
    def __init__(self, answer: ApiOutcome = OK) -> None:
        self.calls: list[tuple[str, str]] = []
        self.answer = answer

    async def set_quota_status(self, api_version: str, plural: str, key: str, *,
                               status: object, annotations: object) -> ApiOutcome:
        self.calls.append((plural, key))
        return self.answer


def test_a_write_is_made_once_until_the_object_changes_and_failures_are_retried() -> None:
    async def scenario() -> None:
        state = fold(ElasticQuotaUpserted(quota=team_a()), running_in("team-a", "a", "node-0"))
        writer = _Recorder()
        keeper = QuotaStatus(state, writer)
        assert await keeper.sync_once()
        assert await keeper.sync_once()
        assert writer.calls == [("elasticquotas", "default/team-a")]  # not again before the watch brings it
        failing = QuotaStatus(state, _Recorder(ApiOutcome(ok=False, reason="HTTP 500", retriable=True)))
        assert not await failing.sync_once()
        gone = QuotaStatus(state, _Recorder(ApiOutcome(ok=False, reason="not found", retriable=False)))
        assert await gone.sync_once()

    anyio.run(scenario)


def test_pod_churn_marks_the_writer_dirty_only_through_the_quota_book() -> None:
    state = fold(ElasticQuotaUpserted(quota=team_a()))
    keeper = QuotaStatus(state, _Recorder())
    keeper._dirty = anyio.Event()
    event = running_in("team-a", "a", "node-0")
    state.apply(event)
    keeper.notice_all([event])
    assert keeper._dirty.is_set()
    keeper._dirty = anyio.Event()
    other = pod_event(pod("elsewhere", namespace="nobody", gpus=0))
    state.apply(other)
    keeper.notice_all([other])
    assert not keeper._dirty.is_set()
