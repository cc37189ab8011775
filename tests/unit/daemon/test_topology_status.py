"""Change detection, debounce and once-per-problem reporting of `daemon.kube.topology_status`."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import anyio
import msgspec
import pytest

from daemon.kube import topology_status
from daemon.kube.topology_status import StatusPlan, TopologyStatus, plan_status, topology_problems
from daemon.scheduling.ports import OK, ApiOutcome
from daemon.telemetry.metrics import Metrics
from events.builders import group_event, node, node_event, pod, pod_event, pod_group
from events.ingest import KIND_BY_NAME, upsert_event
from events.model import Event
from events.objects import TopologyDetail
from state.cluster import ClusterState

BLOCK = "network.topology.nvidia.com/block"


async def wait_until(condition: Callable[[], bool], what: str, within: float = 5.0) -> None:
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await anyio.sleep(0.001)


class FakeWriter:
    """Records every write; `fail` makes the next writes fail (retriable)."""

    def __init__(self) -> None:
        self.details: list[list[TopologyDetail]] = []
        self.counts: list[tuple[str, int]] = []
        self.events: list[tuple[str, str, str, str, str]] = []
        self.fail = False

    def _outcome(self) -> ApiOutcome:
        return ApiOutcome(ok=False, reason="HTTP 503", retriable=True) if self.fail else OK

    async def set_network_topology_status(self, name: str, detail_status: Sequence[TopologyDetail]) -> ApiOutcome:
        self.details.append(list(detail_status))
        return self._outcome()

    async def set_hypernode_status(self, name: str, node_count: int) -> ApiOutcome:
        self.counts.append((name, node_count))
        return self._outcome()

    async def report_object(self, key: str, api_version: str, kind: str, uid: str, reason: str,
                            message: str) -> ApiOutcome:
        self.events.append((kind, key, uid, reason, message))
        return self._outcome()


def cnt(resource_version: str = "1", status: list[dict[str, Any]] | None = None,
        layers: list[dict[str, Any]] | None = None) -> Event:
    document: dict[str, Any] = {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "ClusterNetworkTopology",
        "metadata": {"name": "default", "uid": "cnt-uid", "resourceVersion": resource_version},
        "spec": {"networkTopologySpec": layers if layers is not None else [
            {"topologyLayer": "BlockLayer", "labelKey": [BLOCK]},
            {"topologyLayer": "NodeTopologyLayer", "parentTopologyLayer": "BlockLayer"},
        ]},
    }
    if status is not None:
        document["status"] = {"detailStatus": status}
    return upsert_event(KIND_BY_NAME["ClusterNetworkTopology"], document)


def hyper_node(name: str, members: list[dict[str, Any]], *, node_count: int = 0, resource_version: str = "1") -> Event:
    document: dict[str, Any] = {
        "apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
        "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": resource_version},
        "spec": {"tier": 1, "members": members},
    }
    if node_count:
        document["status"] = {"nodeCount": node_count}
    return upsert_event(KIND_BY_NAME["HyperNode"], document)


def regex(pattern: str) -> dict[str, Any]:
    return {"type": "Node", "selector": {"regexMatch": {"pattern": pattern}}}


def cluster(*events: Event) -> ClusterState:
    state = ClusterState()
    state.apply_all([node_event(node(f"n{i}", block=f"b{i // 2}")) for i in range(4)])
    state.apply_all(events)
    return state


def fold_back(state: ClusterState, writer: FakeWriter, resource_version: str) -> None:
    """What the watch would bring back after the last detailStatus write."""
    status = msgspec.to_builtins(writer.details[-1])
    state.apply(cnt(resource_version, status))


async def test_detail_status_is_written_once_and_not_again_when_the_folded_object_holds_it() -> None:
    state = cluster(cnt())
    writer = FakeWriter()
    keeper = TopologyStatus(state, writer)
    assert await keeper.sync_once()
    assert writer.details == [state.topology.detail_status()]
    assert [d.node_num for d in writer.details[0]] == [4, 2, 2]
    assert await keeper.sync_once()  # the watch has not brought the write back yet: not repeated
    assert len(writer.details) == 1
    fold_back(state, writer, "2")
    assert plan_status(state).detail_status is None
    assert await keeper.sync_once()
    assert len(writer.details) == 1


async def test_detail_status_is_written_again_when_the_tree_changes_or_someone_overwrites_it() -> None:
    state = cluster(cnt())
    writer = FakeWriter()
    keeper = TopologyStatus(state, writer)
    await keeper.sync_once()
    fold_back(state, writer, "2")
    state.apply(node_event(node("n4", block="b2")))
    await keeper.sync_once()
    assert [d.node_num for d in writer.details[-1]] == [5, 2, 2, 1]
    fold_back(state, writer, "3")
    cleared = cnt("4", [])  # someone cleared the status
    state.apply(cleared)
    keeper.notice_all([cleared])  # as the journal does for every batch it records
    await keeper.sync_once()
    assert len(writer.details) == 3 and writer.details[-1] == state.topology.detail_status()


async def test_hypernode_counts_are_written_only_where_they_differ() -> None:
    state = cluster(hyper_node("low", [regex("^n[01]$")], node_count=2), hyper_node("high", [regex("^n[23]$")]))
    writer = FakeWriter()
    keeper = TopologyStatus(state, writer)
    await keeper.sync_once()
    assert writer.counts == [("high", 2)]
    assert writer.details == []  # no ClusterNetworkTopology object: nothing to write there


async def test_hypernode_counts_are_left_alone_while_a_cluster_network_topology_is_the_source() -> None:
    state = cluster(cnt(), hyper_node("hn", [regex("^n[01]$")]))
    assert plan_status(state).node_counts == {}


async def test_a_failed_write_is_retried_at_the_next_pass() -> None:
    state = cluster(cnt())
    writer = FakeWriter()
    writer.fail = True
    keeper = TopologyStatus(state, writer)
    assert not await keeper.sync_once()
    writer.fail = False
    assert await keeper.sync_once()
    assert len(writer.details) == 2 and keeper.writes == 1


async def test_each_distinct_problem_gets_one_event_until_it_goes_away_and_comes_back() -> None:
    state = cluster(hyper_node("bad", [regex("n(")]))
    writer = FakeWriter()
    keeper = TopologyStatus(state, writer)
    await keeper.sync_once()
    await keeper.sync_once()
    assert len(writer.events) == 1
    kind, key, uid, reason, message = writer.events[0]
    assert (kind, key, uid, reason) == ("HyperNode", "bad", "uid-bad", "InvalidTopology")
    assert message.startswith("spec.members[0].selector.regexMatch.pattern: ")
    state.apply(hyper_node("bad", [regex("^n0$")], resource_version="2"))
    await keeper.sync_once()
    assert len(writer.events) == 1
    state.apply(hyper_node("bad", [regex("n(")], resource_version="3"))
    await keeper.sync_once()
    assert len(writer.events) == 2


async def test_a_failed_problem_event_is_posted_again_and_a_bad_cnt_is_reported_on_its_object() -> None:
    state = cluster(cnt(layers=[{"topologyLayer": "BlockLayer", "labelKey": [BLOCK],
                                 "parentTopologyLayer": "NoSuchLayer"}]))
    assert any(p.kind == "ClusterNetworkTopology" for p in topology_problems(state))
    writer = FakeWriter()
    writer.fail = True
    keeper = TopologyStatus(state, writer)
    assert not await keeper.sync_once()
    writer.fail = False
    posted = len(writer.events)
    assert await keeper.sync_once()
    assert len(writer.events) == 2 * posted
    assert {(kind, key, uid) for kind, key, uid, _, _ in writer.events} == {
        ("ClusterNetworkTopology", "default", "cnt-uid")}


async def test_passes_are_debounced_and_pod_events_do_not_wake_the_keeper() -> None:
    state = cluster(cnt())
    writer = FakeWriter()
    sleeps: list[float] = []
    tick = anyio.Event()

    async def fake_sleep(seconds: float) -> None:
        sleeps.append(seconds)
        await tick.wait()

    keeper = TopologyStatus(state, writer, interval=1.0, sleep=fake_sleep)
    async with anyio.create_task_group() as group:
        group.start_soon(keeper.run)
        await wait_until(lambda: keeper.passes == 1, what="the first pass")
        assert sleeps == [1.0]

        for index in range(50):  # a burst of tree changes while the keeper waits out its interval
            event = node_event(node(f"x{index}", block="b9"))
            state.apply(event)
            keeper.notice_all([event])
        assert keeper.passes == 1
        tick.set()
        tick = anyio.Event()
        await wait_until(lambda: keeper.passes == 2, what="one pass for the whole burst")
        assert len(writer.details) == 2 and writer.details[-1][0].node_num == 54
        await wait_until(lambda: len(sleeps) == 2, what="the second interval")

        tick.set()
        tick = anyio.Event()
        await anyio.wait_all_tasks_blocked()
        for index in range(20):  # pod churn: no pass at all
            churn = pod_event(pod(f"p{index}", gpus=1))
            state.apply(churn)
            keeper.notice_all([churn])
        await anyio.wait_all_tasks_blocked()
        assert keeper.passes == 2
        group.cancel_scope.cancel()


async def test_a_node_heartbeat_pass_does_not_recompute_anything(monkeypatch: pytest.MonkeyPatch) -> None:
    state = cluster(cnt())
    writer = FakeWriter()
    keeper = TopologyStatus(state, writer)
    await keeper.sync_once()
    fold_back(state, writer, "2")
    await keeper.sync_once()
    planned: list[int] = []

    def counting_plan(state: ClusterState) -> StatusPlan:
        planned.append(1)
        return plan_status(state)

    monkeypatch.setattr(topology_status, "plan_status", counting_plan)
    heartbeat = node_event(node("n0", block="b0"))
    state.apply(heartbeat)
    keeper.notice_all([heartbeat])
    assert await keeper.sync_once()
    assert planned == []
    moved = node_event(node("n0", block="b1"))
    state.apply(moved)
    keeper.notice_all([moved])
    assert await keeper.sync_once()
    assert planned == [1] and len(writer.details) == 2


async def test_a_bad_podgroup_annotation_is_reported_on_the_podgroup_once_even_without_a_tree_change() -> None:
    state = cluster()
    writer = FakeWriter()
    keeper = TopologyStatus(state, writer)
    assert await keeper.sync_once()
    assert writer.events == []
    bad = group_event(pod_group("job", gather=[{"layer": "NoSuchLayer", "strategy": "Sometimes"}]))
    state.apply(bad)
    keeper.notice_all([bad])
    assert await keeper.sync_once()
    assert {(kind, key, uid, reason) for kind, key, uid, reason, _ in writer.events} == {
        ("PodGroup", "default/job", "uid-pg-default-job", "InvalidPodGroup")}
    assert any("strategy" in message for *_, message in writer.events)
    count = len(writer.events)
    keeper.notice_all([bad])
    assert await keeper.sync_once()
    assert len(writer.events) == count


async def test_bad_hypernodes_added_to_a_labelled_cluster_are_reported_and_the_labels_tree_stays() -> None:
    cycle = [{"type": "HyperNode", "selector": {"exactMatch": {"name": "c1"}}}]
    back = [{"type": "HyperNode", "selector": {"exactMatch": {"name": "c0"}}}]
    state = cluster(hyper_node("bad", [regex("n(")]), hyper_node("c0", cycle), hyper_node("c1", back))
    assert state.topology.source == "labels" and state.topology.resolve_level("BlockLayer") == 1
    writer = FakeWriter()
    await TopologyStatus(state, writer).sync_once()
    assert writer.counts == []  # the HyperNodes are not the tree's source: their status is left alone
    assert sorted((kind, key, uid, reason) for kind, key, uid, reason, _ in writer.events) == [
        ("HyperNode", "bad", "uid-bad", "InvalidTopology"), ("HyperNode", "c0", "uid-c0", "InvalidTopology"),
        ("HyperNode", "c1", "uid-c1", "InvalidTopology")]
    messages = {key: message for _, key, _, _, message in writer.events}
    assert messages["c0"] == ("spec.members[0]: HyperNode membership forms a cycle c0 -> c1 -> c0; "
                              "the HyperNode is left out of the tree")


def raw_pod(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
            "spec": {"schedulerName": "toposched", **spec}}


async def test_a_pod_request_that_is_not_a_quantity_and_an_undecodable_pod_each_get_one_warning_and_one_count(
        ) -> None:
    state = cluster()
    writer = FakeWriter()
    metrics = Metrics()
    keeper = TopologyStatus(state, writer, metrics=metrics)
    assert await keeper.sync_once()
    pods = KIND_BY_NAME["Pod"]
    containers = [{"name": "main", "resources": {"requests": {"nvidia.com/gpu": "eight"}}}]
    for event in (upsert_event(pods, raw_pod("bad-request", containers=containers)),
                  upsert_event(pods, raw_pod("undecodable", priority="high"))):
        state.apply(event)
        keeper.notice_all([event])
    assert await keeper.sync_once()
    assert {(kind, key, uid, reason) for kind, key, uid, reason, _ in writer.events} == {
        ("Pod", "default/bad-request", "uid-bad-request", "InvalidQuantity"),
        ("Pod", "default/undecodable", "", "UndecodableObject"),
    }
    messages = {key: message for _, key, _, _, message in writer.events}
    assert messages["default/bad-request"].startswith(
        "spec.containers[0].resources.requests[nvidia.com/gpu]: 'eight' is not a Kubernetes quantity")
    assert messages["default/undecodable"].startswith("spec.priority: Expected `int")
    counted = metrics.invalid_objects
    assert counted.labels("Pod", "InvalidQuantity")._value.get() == 1
    assert counted.labels("Pod", "UndecodableObject")._value.get() == 1

    again = pod_event(pod("churn", gpus=1))  # churn of good pods: no new pass, nothing posted or counted
    state.apply(again)
    keeper.notice_all([again])
    assert await keeper.sync_once()
    assert len(writer.events) == 2 and counted.labels("Pod", "InvalidQuantity")._value.get() == 1


async def test_a_pod_problem_wakes_the_keeper_but_pods_without_problems_do_not() -> None:
    state = cluster()
    writer = FakeWriter()
    keeper = TopologyStatus(state, writer)
    assert await keeper.sync_once()
    keeper._dirty = anyio.Event()  # as `run()` leaves it after its pass
    good = pod_event(pod("good", gpus=1))
    state.apply(good)
    keeper.notice_all([good])
    assert not keeper._dirty.is_set()
    bad = pod_event(pod("bad", cpu="many"))
    state.apply(bad)
    keeper.notice_all([bad])
    assert keeper._dirty.is_set()


async def test_fields_read_but_not_implemented_get_one_warning_on_the_object_of_each_dialect() -> None:
    state = cluster()
    writer = FakeWriter()
    keeper = TopologyStatus(state, writer)
    assert await keeper.sync_once()
    nonstrict = {"gang.scheduling.koordinator.sh/name": "gang-a", "gang.scheduling.koordinator.sh/min-available": "2",
                 "gang.scheduling.koordinator.sh/mode": "NonStrict"}
    events = [
        pod_event(pod("a-1", annotations=nonstrict)),
        pod_event(pod("a-0", annotations=nonstrict)),
        upsert_event(KIND_BY_NAME["PodGroup"], {  # Koordinator's: minResources is not read
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": "nginx", "namespace": "default", "uid": "uid-nginx"},
            "spec": {"minMember": 3, "minResources": {"cpu": "3"}}}),
        upsert_event(KIND_BY_NAME["Workload"], {
            "apiVersion": "scheduling.k8s.io/v1alpha1", "kind": "Workload",
            "metadata": {"name": "training", "namespace": "default", "uid": "uid-training"},
            "spec": {"podGroups": [{"name": "workers", "policy": {"gang": {"minCount": 0}}}]}}),
    ]
    for event in events:
        state.apply(event)
        keeper.notice_all([event])
    assert await keeper.sync_once()
    assert {(kind, key, uid, reason) for kind, key, uid, reason, _ in writer.events} == {
        ("Pod", "default/a-0", "uid-default-a-0", "UnsupportedField"),  # the member whose annotations define it
        ("PodGroup", "default/nginx", "uid-nginx", "UnsupportedField"),
        ("Workload", "default/training", "uid-training", "InvalidWorkload"),
    }
    count = len(writer.events)
    for event in events:
        keeper.notice_all([event])
    assert await keeper.sync_once()
    assert len(writer.events) == count


async def test_bad_quota_input_becomes_warning_events_on_the_quota_and_on_the_pod_naming_a_missing_one() -> None:
    quota = upsert_event(KIND_BY_NAME["ElasticQuota"], {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
        "metadata": {"name": "team-a", "namespace": "quotas", "uid": "eq-uid"},
        "spec": {"min": {"nvidia.com/gpu": "40"}, "max": {"nvidia.com/gpu": "32"}}})
    queue = upsert_event(KIND_BY_NAME["Queue"], {
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
        "metadata": {"name": "research", "uid": "q-uid"}, "spec": {"weight": 1, "parent": "nowhere"}})
    state = cluster(quota, queue, pod_event(pod("typo", labels={"quota.scheduling.koordinator.sh/name": "team-z"})))
    writer = FakeWriter()
    keeper = TopologyStatus(state, writer)
    await keeper.sync_once()
    events = {(kind, key, uid, reason): message for kind, key, uid, reason, message in writer.events}
    assert events[("ElasticQuota", "quotas/team-a", "eq-uid", "InvalidQuota")].startswith(
        "spec.min[nvidia.com/gpu]: is above spec.max[nvidia.com/gpu]; cut to max")
    assert events[("Queue", "research", "q-uid", "InvalidQuota")].startswith("spec.parent: parent 'nowhere'")
    assert "ElasticQuota 'team-z' not found" in events[("Pod", "default/typo", "uid-default-typo", "QuotaNotFound")]


async def test_an_undecodable_claim_gets_its_warning_on_the_claim_and_its_pod_waits_naming_it() -> None:
    state = cluster()
    writer = FakeWriter()
    keeper = TopologyStatus(state, writer)
    assert await keeper.sync_once()
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
             "metadata": {"name": "data", "namespace": "default", "uid": "uid-data"}, "spec": {"volumeName": 7}}
    event = upsert_event(KIND_BY_NAME["PersistentVolumeClaim"], claim)
    state.apply(event)
    keeper.notice_all([event])
    assert await keeper.sync_once()
    assert [(kind, key, reason) for kind, key, _, reason, _ in writer.events] == [
        ("PersistentVolumeClaim", "default/data", "UndecodableObject")]
    assert writer.events[0][4].startswith("spec.volumeName: Expected `str`")
    user = upsert_event(KIND_BY_NAME["Pod"], raw_pod("user", volumes=[
        {"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]))
    state.apply(user)
    assert state.volume_needs(state.pods["default/user"]).blocked == (
        'persistentvolumeclaim "data" could not be read (see its Warning Event)')


async def test_an_undecodable_disruption_budget_gets_its_warning_on_the_budget() -> None:
    state = cluster()
    writer = FakeWriter()
    keeper = TopologyStatus(state, writer)
    assert await keeper.sync_once()
    budget = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
              "metadata": {"name": "serving", "namespace": "default", "uid": "uid-serving"},
              "status": {"disruptionsAllowed": "many"}}
    event = upsert_event(KIND_BY_NAME["PodDisruptionBudget"], budget)
    state.apply(event)
    keeper.notice_all([event])
    assert await keeper.sync_once()
    assert [(kind, key, reason) for kind, key, _, reason, _ in writer.events] == [
        ("PodDisruptionBudget", "default/serving", "UndecodableObject")]


async def test_a_csinode_entry_not_read_gets_a_warning_on_the_csinode_naming_the_field() -> None:
    state = cluster()
    writer = FakeWriter()
    keeper = TopologyStatus(state, writer)
    assert await keeper.sync_once()
    csi_node = {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": "n1", "uid": "uid-csi"},
                "spec": {"drivers": [{"name": "ebs.csi.aws.com", "nodeID": "i-1", "allocatable": {"count": -2}}]}}
    event = upsert_event(KIND_BY_NAME["CSINode"], csi_node)
    state.apply(event)
    keeper.notice_all([event])
    assert await keeper.sync_once()
    assert [(kind, key, uid, reason, message) for kind, key, uid, reason, message in writer.events] == [
        ("CSINode", "n1", "uid-csi", "InvalidCSINode",
         "spec.drivers[0].allocatable.count: -2: must be >= 0; the driver is not limited")]
