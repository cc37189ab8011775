"""Per-quota gauges (daemon/telemetry/quota_metrics.py): used, min, max and runtime per quota and
resource, pending gangs per quota, and no series left behind for a quota that was deleted."""

from __future__ import annotations

from daemon.telemetry.metrics import Metrics
from daemon.telemetry.quota_metrics import QuotaGauges
from events.builders import bound, elastic_quota, gpu_nodes, gpus, pod, pod_event, pod_group, queue
from events.model import ElasticQuotaDeleted, ElasticQuotaUpserted, PodGroupUpserted, QueueUpserted
from events.objects import QUOTA_NAME_LABEL
from state.cluster import ClusterState

GPU = "nvidia.com/gpu"


def sample(metrics: Metrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_each_quota_has_its_used_min_max_runtime_and_pending_gangs() -> None:
    state = ClusterState()
    team = {QUOTA_NAME_LABEL: "team-a"}
    state.apply_all([
        *gpu_nodes(4, per_block=2),
        ElasticQuotaUpserted(quota=elastic_quota("team-a", namespace="default", minimum=gpus(16), maximum=gpus(24))),
        QueueUpserted(queue=queue("q1", capability=gpus(8))),
        pod_event(bound(pod("a", labels=team), "node-0")),
        PodGroupUpserted(pod_group=pod_group("big", min_member=2)),
        pod_event(pod("big-0", gang="big", labels=team)), pod_event(pod("big-1", gang="big", labels=team)),
    ])
    metrics = Metrics()
    gauges = QuotaGauges(metrics, state)
    gauges.refresh()
    koordinator = {"dialect": "koordinator", "quota": "team-a", "resource": GPU}
    assert sample(metrics, "toposched_quota_used", **koordinator) == 8
    assert sample(metrics, "toposched_quota_min", **koordinator) == 16
    assert sample(metrics, "toposched_quota_max", **koordinator) == 24
    assert sample(metrics, "toposched_quota_runtime", **koordinator) == 24
    assert sample(metrics, "toposched_quota_pending_gangs", dialect="koordinator", quota="team-a") == 1
    volcano = {"dialect": "volcano", "quota": "q1", "resource": GPU}
    assert sample(metrics, "toposched_quota_max", **volcano) == 8
    assert sample(metrics, "toposched_quota_pending_gangs", dialect="volcano", quota="q1") == 0
    assert sample(metrics, "toposched_quota_used", **{**koordinator, "resource": "cpu"}) is None  # not counted

    state.apply(ElasticQuotaDeleted(key="default/team-a"))
    gauges.refresh()
    assert sample(metrics, "toposched_quota_used", **koordinator) is None
    assert sample(metrics, "toposched_quota_pending_gangs", dialect="koordinator", quota="team-a") is None
    assert sample(metrics, "toposched_quota_max", **volcano) == 8
