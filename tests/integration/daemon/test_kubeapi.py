"""The real ClusterAPI adapter against devcluster: what each write leaves in the API."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from daemon.config import decode_config
from daemon.kube.client import connect
from daemon.kube.cluster_api import API_CALLS, COMPONENT, KubeClusterAPI
from daemon.kube.event_recorder import EventRecorder
from daemon.kube.leader import AlwaysOpen, WriteGate
from daemon.scheduling.decisions import NOT_READY_REASON
from devcluster.cluster import DevCluster
from events.ingest import kind_of, upsert_event
from state.cluster import ClusterState
from tests.integration.daemon.harness import config_for, nodes, pod


@asynccontextmanager
async def adapter(cluster: DevCluster, tmp_path: Path, gate: WriteGate | None = None,
                  backoff_max: float = 0.5) -> AsyncIterator[KubeClusterAPI]:
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    document = config_for(kubeconfig, tmp_path / "log", election=False)
    document["timeouts"]["backoff_max_seconds"] = backoff_max
    config = decode_config(document)
    async with connect(config) as client:
        yield KubeClusterAPI(client, gate or AlwaysOpen(), bind_concurrency=4)


def uid_of(cluster: DevCluster, name: str) -> str:
    return str(cluster.store.get("pods", name, "default")["metadata"]["uid"])


async def test_bind_carries_the_uid_and_a_409_is_read_back(tmp_path: Path) -> None:
    async with DevCluster(kubelet=False) as cluster:
        cluster.load_objects([*nodes(2), pod("p")])
        async with adapter(cluster, tmp_path) as api:
            uid = uid_of(cluster, "p")
            outcome = await api.bind("default/p", uid, "node-000")
            assert (outcome.status, outcome.node) == ("bound", "node-000")
            again = await api.bind("default/p", uid, "node-000")  # 409, read back: already ours
            assert (again.status, again.node) == ("bound", "node-000")
            elsewhere = await api.bind("default/p", uid, "node-001")
            assert (elsewhere.status, elsewhere.node) == ("already-bound", "node-000")


async def test_a_recreated_pod_of_the_same_name_is_never_bound_by_mistake(tmp_path: Path) -> None:
    async with DevCluster(kubelet=False) as cluster:
        cluster.load_objects([*nodes(1), pod("p")])
        async with adapter(cluster, tmp_path) as api:
            old_uid = uid_of(cluster, "p")
            cluster.store.delete("pods", "p", "default", grace_period_seconds=0)
            cluster.load_objects([pod("p")])
            outcome = await api.bind("default/p", old_uid, "node-000")
            assert outcome.status == "failed" and not outcome.retriable
            assert not cluster.store.get("pods", "p", "default")["spec"].get("nodeName")


async def test_bind_to_a_deleted_pod_fails_for_good(tmp_path: Path) -> None:
    async with DevCluster(kubelet=False) as cluster:
        cluster.load_objects(nodes(1))
        async with adapter(cluster, tmp_path) as api:
            outcome = await api.bind("default/ghost", "", "node-000")
            assert outcome.status == "failed" and not outcome.retriable


async def test_victim_gets_disruption_condition_then_is_evicted(tmp_path: Path) -> None:
    async with DevCluster(kubelet=False) as cluster:
        victim = pod("victim")
        victim["spec"]["nodeName"] = "node-000"
        cluster.load_objects([*nodes(1), victim])
        async with adapter(cluster, tmp_path) as api:
            uid = uid_of(cluster, "victim")
            marked = await api.set_disruption_condition("default/victim", uid, preemptor="default/urgent",
                                                        message="preempted by gang default/urgent for pod urgent-0")
            assert marked.ok
            conditions = cluster.store.get("pods", "victim", "default")["status"]["conditions"]
            target = next(c for c in conditions if c["type"] == "DisruptionTarget")
            assert (target["status"], target["reason"]) == ("True", "PreemptionByScheduler")
            assert "default/urgent" in target["message"] and "urgent-0" in target["message"]
            assert len(conditions) > 1  # the pod's other conditions were kept (strategic merge by type)
            evicted = await api.evict("default/victim", uid, preemptor="default/urgent", message="", grace_seconds=0)
            assert evicted.ok
            assert cluster.store.find("pods", "victim", "default") is None
            gone = await api.evict("default/victim", uid, preemptor="default/urgent", message="", grace_seconds=0)
            assert gone.ok


async def test_a_pod_condition_is_removed_only_while_the_pod_is_as_it_was_seen(tmp_path: Path) -> None:
    """remove_pod_condition: a strategic merge delete of one condition by type, the others kept, conditional on
    the resourceVersion the daemon saw (a pod bound since keeps its PodScheduled=True)."""
    async with DevCluster(kubelet=False) as cluster:
        cluster.load_objects([*nodes(1), pod("p"), pod("q")])
        async with adapter(cluster, tmp_path) as api:

            async def held(name: str) -> str:
                uid = uid_of(cluster, name)
                assert (await api.set_pod_condition(f"default/{name}", uid, {
                    "type": "PodScheduled", "status": "False", "reason": "NotReadyForScheduling", "message": "held",
                    "lastTransitionTime": "2026-01-01T00:00:00Z"})).ok
                assert (await api.set_disruption_condition(f"default/{name}", uid, preemptor="x", message="m")).ok
                return str(cluster.store.get("pods", name, "default")["metadata"]["resourceVersion"])

            def conditions(name: str) -> dict[str, dict[str, Any]]:
                return {c["type"]: c for c in cluster.store.get("pods", name, "default")["status"]["conditions"]}

            seen = await held("q")
            assert (await api.remove_pod_condition("default/q", uid_of(cluster, "q"), seen, "PodScheduled")).ok
            assert "PodScheduled" not in conditions("q") and "DisruptionTarget" in conditions("q")
            seen = await held("p")
            cluster.store.bind("default", "p", "node-000")  # the pod changes after the daemon saw it
            stale = await api.remove_pod_condition("default/p", uid_of(cluster, "p"), seen, "PodScheduled")
            assert not stale.ok and not stale.retriable
            assert conditions("p")["PodScheduled"]["status"] == "True"


async def test_without_strategic_merge_a_condition_is_merged_by_the_adapter_guarded_by_the_resource_version(
        tmp_path: Path) -> None:
    """A server answering 415 to strategic merge patches: the adapter reads the pod and writes its whole list of
    conditions (the others kept) under the resourceVersion it read, for a write and for a removal alike."""
    async with DevCluster(kubelet=False) as cluster:
        cluster.load_objects([*nodes(1), pod("p")])
        async with adapter(cluster, tmp_path) as api:
            uid = uid_of(cluster, "p")

            def conditions() -> dict[str, dict[str, Any]]:
                return {c["type"]: c for c in cluster.store.get("pods", "p", "default")["status"]["conditions"]}

            assert (await api.set_disruption_condition("default/p", uid, preemptor="x", message="m")).ok
            cluster.faults.fail_next(1, 415, verb="patch", path="/pods/p/status")
            assert (await api.set_pod_condition("default/p", uid, {
                "type": "PodScheduled", "status": "False", "reason": "NotReadyForScheduling", "message": "held",
                "lastTransitionTime": "2026-01-01T00:00:00Z"})).ok
            assert conditions()["PodScheduled"]["reason"] == "NotReadyForScheduling"
            assert "DisruptionTarget" in conditions()
            seen = str(cluster.store.get("pods", "p", "default")["metadata"]["resourceVersion"])
            cluster.faults.fail_next(1, 415, verb="patch", path="/pods/p/status")
            stale = await api.remove_pod_condition("default/p", uid, str(int(seen) - 1), "PodScheduled")
            assert not stale.ok and not stale.retriable and "PodScheduled" in conditions()
            cluster.faults.fail_next(1, 415, verb="patch", path="/pods/p/status")
            assert (await api.remove_pod_condition("default/p", uid, seen, "PodScheduled")).ok
            assert "PodScheduled" not in conditions() and "DisruptionTarget" in conditions()
            refused = [r for r in cluster.audit.since() if r.status == 415]
            assert len(refused) == 3  # each write went the adapter's own way


async def test_nominated_node_is_written_and_cleared(tmp_path: Path) -> None:
    async with DevCluster(kubelet=False) as cluster:
        cluster.load_objects([*nodes(1), pod("p")])
        async with adapter(cluster, tmp_path) as api:
            uid = uid_of(cluster, "p")
            assert (await api.set_nominated_node("default/p", uid, "node-000")).ok
            assert cluster.store.get("pods", "p", "default")["status"]["nominatedNodeName"] == "node-000"
            assert (await api.set_nominated_node("default/p", uid, None)).ok
            assert "nominatedNodeName" not in cluster.store.get("pods", "p", "default")["status"]


async def test_scheduled_events_held_for_a_gang_are_written_on_release_stamped_at_their_binding(
        tmp_path: Path) -> None:
    async with DevCluster(kubelet=False) as cluster:
        cluster.load_objects([*nodes(3), pod("a"), pod("b"), pod("c"), pod("d")])
        async with adapter(cluster, tmp_path) as api:
            clock = [1_800_000_000.0]
            api.events = EventRecorder(api, COMPONENT, now=lambda: clock[0])
            api.hold_scheduled_events()
            api.hold_scheduled_events()  # two gangs binding at once: the Events wait for both
            for name, node in (("a", "node-000"), ("b", "node-001")):
                assert (await api.bind(f"default/{name}", uid_of(cluster, name), node)).status == "bound"
            api.release_scheduled_events()
            assert api.events.queued == 0  # held: nothing recorded while a gang binds
            clock[0] += 60.0
            api.release_scheduled_events()
            await api.events.flush()
            written = sorted((e["involvedObject"]["name"], e["reason"], e["message"], e["firstTimestamp"])
                             for e in cluster.store.list("events", "default"))
            bound_at = "2027-01-15T08:00:00Z"  # the clock when they were bound, not 60 s later
            assert written == [("a", "Scheduled", "Successfully assigned default/a to node-000", bound_at),
                               ("b", "Scheduled", "Successfully assigned default/b to node-001", bound_at)]


async def test_an_event_on_a_pod_whose_scheduled_event_is_held_brings_the_held_ones_in_first(tmp_path: Path) -> None:
    async with DevCluster(kubelet=False) as cluster:
        cluster.load_objects([*nodes(3), pod("c"), pod("d")])
        async with adapter(cluster, tmp_path) as api:
            api.hold_scheduled_events()
            assert (await api.bind("default/c", uid_of(cluster, "c"), "node-002")).status == "bound"
            api.event("default/d", "v1", "Pod", uid_of(cluster, "d"), "Warning", "FailedScheduling", "no room")
            assert api.events.queued == 1  # another pod's Event: the held one still waits
            api.event("default/c", "v1", "Pod", uid_of(cluster, "c"), "Normal", "Preempted", "by a bigger job")
            assert api.events.queued == 3  # c's Scheduled first, then its Preempted
            api.release_scheduled_events()
            assert api.events.queued == 3  # nothing more was held
            await api.events.flush()
            on_c = sorted((int(e["metadata"]["resourceVersion"]), e["reason"])
                          for e in cluster.store.list("events", "default") if e["involvedObject"]["name"] == "c")
            assert [reason for _, reason in on_c] == ["Scheduled", "Preempted"]


async def test_a_repeated_event_bumps_its_count_instead_of_piling_up(tmp_path: Path) -> None:
    async with DevCluster(kubelet=False) as cluster:
        cluster.load_objects([pod("p")])
        async with adapter(cluster, tmp_path) as api:
            for _ in range(3):
                await api.record_event("default/p", "v1", "Pod", "", "Warning", "Unschedulable", "no room")
            events = cluster.store.list("events", "default")
            assert len(events) == 1
            assert events[0]["count"] == 3 and events[0]["involvedObject"]["name"] == "p"


async def test_nothing_is_written_without_the_lease(tmp_path: Path) -> None:
    async with DevCluster(kubelet=False) as cluster:
        cluster.load_objects([*nodes(1), pod("p")])
        async with adapter(cluster, tmp_path, gate=WriteGate(renew_deadline=1.0)) as api:
            outcome = await api.bind("default/p", uid_of(cluster, "p"), "node-000")
            assert outcome.status == "failed" and "not the leader" in outcome.reason
            assert not (await api.set_nominated_node("default/p", "", "node-000")).ok
            assert not cluster.store.get("pods", "p", "default")["spec"].get("nodeName")


def test_api_calls_list_every_write_and_every_watched_kind() -> None:
    assert ("", "pods", "binding", "create") in API_CALLS
    assert ("", "pods", "eviction", "create") in API_CALLS
    assert ("", "pods", "status", "patch") in API_CALLS
    assert ("coordination.k8s.io", "leases", "", "update") in API_CALLS
    assert ("", "nodes", "", "watch") in API_CALLS
    assert len(set(API_CALLS)) == len(API_CALLS)


async def test_a_429_is_retried_after_the_retry_after_the_server_asked_for(tmp_path: Path) -> None:
    async with DevCluster(kubelet=False) as cluster:
        cluster.load_objects([*nodes(1), pod("p")])
        cluster.faults.fail_next(1, 429, verb="create", path="/binding", retry_after=1)
        async with adapter(cluster, tmp_path, backoff_max=5.0) as api:
            started = time.monotonic()
            outcome = await api.bind("default/p", uid_of(cluster, "p"), "node-000")
            assert outcome.status == "bound"
            assert time.monotonic() - started >= 0.9


async def test_without_an_eviction_api_the_victim_is_deleted_with_its_grace_period(tmp_path: Path) -> None:
    async with DevCluster(kubelet=False) as cluster:
        victim = pod("victim")
        victim["spec"]["nodeName"] = "node-000"
        cluster.load_objects([*nodes(1), victim])
        cluster.faults.fail_next(1, 405, verb="create", path="/eviction")
        async with adapter(cluster, tmp_path) as api:
            outcome = await api.evict("default/victim", uid_of(cluster, "victim"), preemptor="default/urgent",
                                      message="", grace_seconds=0)
            assert outcome.ok and "deleted" in outcome.reason
            assert cluster.store.find("pods", "victim", "default") is None


@pytest.mark.parametrize(("budgets", "refused"), [(1, 429), (2, 201)])  # two: a failure Status, with a 201
async def test_a_victim_whose_disruption_budget_refuses_its_eviction_is_deleted_as_kube_scheduler_preempts(
        tmp_path: Path, budgets: int, refused: int) -> None:
    async with DevCluster(kubelet=False) as cluster:
        victim = pod("victim")
        victim["spec"]["nodeName"] = "node-000"
        victim["metadata"]["labels"] = {"app": "inference"}
        cluster.load_objects([*nodes(1), victim, *(
            {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
             "metadata": {"name": f"inference-{index}", "namespace": "default"},
             "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "inference"}}}}
            for index in range(budgets))])
        async with adapter(cluster, tmp_path) as api:
            outcome = await api.evict("default/victim", uid_of(cluster, "victim"), preemptor="default/urgent",
                                      message="", grace_seconds=0)
            assert outcome.ok and "PodDisruptionBudget refused the eviction" in outcome.reason
            assert cluster.store.find("pods", "victim", "default") is None
            # The budget's 429 is an answer, not a rate limit: one eviction, then the deletion.
            writes = [(record.method, record.path.rsplit("/", 1)[-1], record.status)
                      for record in cluster.audit.since()]
            assert writes == [("POST", "eviction", refused), ("DELETE", "victim", 200)]


@asynccontextmanager
async def pod_group_reports(cluster: DevCluster, tmp_path: Path, api_version: str
                            ) -> AsyncIterator[tuple[KubeClusterAPI, Callable[[], dict[str, dict[str, Any]]]]]:
    """The adapter, its state holding PodGroup default/job at `api_version`, and `refold()`: the PodGroup as
    stored, folded into the state again (as the watch would), its conditions by type."""
    cluster.load_objects([{"apiVersion": api_version, "kind": "PodGroup",
                           "metadata": {"name": "job", "namespace": "default"},
                           "spec": {"schedulingPolicy": {"gang": {"minCount": 1}}}}])
    info = kind_of(api_version, "PodGroup")
    assert info is not None
    async with adapter(cluster, tmp_path) as api:
        state = api.state = ClusterState()

        def refold() -> dict[str, dict[str, Any]]:
            stored = cluster.store.get(f"{api_version}/PodGroup", "job", "default")
            state.apply(upsert_event(info, stored, api_version))
            return {c["type"]: c for c in stored.get("status", {}).get("conditions", [])}

        refold()
        yield api, refold


async def test_a_kubernetes_pod_groups_conditions_keep_each_other_and_their_transition_times(tmp_path: Path) -> None:
    """report_gang on a scheduling.k8s.io PodGroup: DisruptionTarget when preempted, PodGroupScheduled False
    while it waits; each write keeps the other condition, and an unchanged status keeps its time."""
    async with DevCluster(kubelet=False) as cluster, \
            pod_group_reports(cluster, tmp_path, "scheduling.k8s.io/v1alpha2") as (api, refold):
        assert (await api.report_gang("default/job", "Preempted", "Preempted", "evicted for default/high")).ok
        first = refold()["DisruptionTarget"]
        assert (first["status"], first["reason"]) == ("True", "PreemptionByScheduler")
        assert (await api.report_gang("default/job", "Pending", "Unschedulable", "0/4 nodes fit")).ok
        conditions = refold()
        assert conditions["DisruptionTarget"] == first
        waiting = conditions["PodGroupScheduled"]
        assert (waiting["status"], waiting["reason"], waiting["message"]) == ("False", "Unschedulable", "0/4 nodes fit")
        await anyio.sleep(1.1)  # a later second: a moved status would show a later time
        assert (await api.report_gang("default/job", "Pending", "Unschedulable", "1/4 nodes fit")).ok
        again = refold()["PodGroupScheduled"]
        assert again["message"] == "1/4 nodes fit" and again["lastTransitionTime"] == waiting["lastTransitionTime"]
        assert (await api.report_gang("default/job", "Scheduled", "Scheduled", "bound")).ok
        done = refold()["PodGroupScheduled"]
        assert done["status"] == "True" and done["lastTransitionTime"] > waiting["lastTransitionTime"]


async def test_a_1_37_pod_group_once_scheduled_stays_initially_scheduled(tmp_path: Path) -> None:
    """PodGroupInitiallyScheduled is terminal once True (1.37): a gang pending again after preemption keeps
    it, and gains DisruptionTarget."""
    async with DevCluster(kubelet=False) as cluster, \
            pod_group_reports(cluster, tmp_path, "scheduling.k8s.io/v1beta1") as (api, refold):
        assert (await api.report_gang("default/job", "Pending", "Unschedulable", "0/4 nodes fit")).ok
        assert refold()["PodGroupInitiallyScheduled"]["status"] == "False"
        assert (await api.report_gang("default/job", "Scheduled", "Scheduled", "bound")).ok
        scheduled = refold()["PodGroupInitiallyScheduled"]
        assert (scheduled["status"], scheduled["reason"]) == ("True", "Scheduled")
        assert (await api.report_gang("default/job", "Preempted", "Preempted", "evicted for default/high")).ok
        assert (await api.report_gang("default/job", "Pending", "Unschedulable", "0/4 nodes fit")).ok
        conditions = refold()
        assert conditions["PodGroupInitiallyScheduled"] == scheduled
        assert conditions["DisruptionTarget"]["reason"] == "PreemptionByScheduler"
        assert "PodGroupScheduled" not in conditions


async def test_a_kai_pod_groups_scheduling_conditions_are_kept_as_kais_scheduler_keeps_them(tmp_path: Path) -> None:
    """report_gang on a KAI PodGroup: one UnschedulableOnNodePool condition for the default pool while it
    waits, its transitionID above the latest, rewritten only when it says something new, other pools'
    conditions kept; nothing while it is not ready; the eviction stamp and KAI's Normal Events; none left
    once scheduled."""
    api_version = "scheduling.run.ai/v2alpha2"
    other_pool = {"type": "UnschedulableOnNodePool", "nodePool": "pool-b", "reason": "Unschedulable",
                  "message": "older", "status": "True", "transitionID": "7",
                  "lastTransitionTime": "2026-07-12T10:28:43Z",
                  "reasons": [{"reason": "OverLimit", "message": "older",
                               "details": {"queueDetails": {"name": "team-b",
                                                            "queueResourceLimits": {"nvidia.com/gpu": "8"}}}}]}
    async with DevCluster(kubelet=False) as cluster:
        cluster.load_objects([{"apiVersion": api_version, "kind": "PodGroup",
                               "metadata": {"name": "job", "namespace": "default"}, "spec": {"minMember": 1}}])
        info = kind_of(api_version, "PodGroup")
        assert info is not None
        async with adapter(cluster, tmp_path) as api:
            state = api.state = ClusterState()

            def refold() -> dict[str, Any]:
                stored = cluster.store.get(f"{api_version}/PodGroup", "job", "default")
                state.apply(upsert_event(info, stored, api_version))
                return stored

            refold()
            assert (await api.report_gang("default/job", "Pending", "Unschedulable", "0/4 nodes fit")).ok
            first = refold()
            [condition] = first["status"]["schedulingConditions"]
            assert (condition["type"], condition["nodePool"], condition["reason"], condition["message"],
                    condition["status"], condition["transitionID"]) == (
                "UnschedulableOnNodePool", "default", "Unschedulable", "0/4 nodes fit", "True", "1")
            # KAI's reasons for a job whose pods find no nodes (no quota refusal given)
            assert condition["reasons"] == [{"reason": "PodSchedulingErrors", "message": "0/4 nodes fit"}]
            assert (await api.report_gang("default/job", "Pending", "Unschedulable", "0/4 nodes fit")).ok
            assert refold()["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]  # nothing new
            assert (await api.report_gang("default/job", "Pending", NOT_READY_REASON, "1 missing")).ok
            assert refold()["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]  # not ready
            conditions = [other_pool, *refold()["status"]["schedulingConditions"]]
            cluster.store.patch(f"{api_version}/PodGroup", "job", {"status": {"schedulingConditions": conditions}},
                                "default", subresource="status")
            refold()
            assert (await api.report_gang("default/job", "Pending", "Unschedulable", "1/4 nodes fit")).ok
            pools = [(c["nodePool"], c["transitionID"], c["message"])
                     for c in refold()["status"]["schedulingConditions"]]
            assert pools == [("pool-b", "7", "older"), ("default", "8", "1/4 nodes fit")]
            assert refold()["status"]["schedulingConditions"][0] == other_pool  # written back whole
            assert (await api.report_gang("default/job", "Preempted", "Preempted", "2 pod(s) preempted")).ok
            evicted = refold()
            assert "kai.scheduler/last-eviction-timestamp" in evicted["metadata"]["annotations"]
            assert (await api.report_gang("default/job", "Scheduled", "Scheduled", "bound")).ok
            assert "schedulingConditions" not in refold().get("status", {})
        reasons = [(e["type"], e["reason"]) for e in cluster.store.list("events", "default")
                   if e["involvedObject"]["name"] == "job"]
        assert set(reasons) == {("Normal", "Unschedulable"), ("Normal", "NotReady"), ("Normal", "Evict"),
                                ("Normal", "Scheduled")}, reasons
