"""The daemon reads NVIDIA KAI Scheduler's dialect from the API server, over HTTP with the real client: a
KAI `Topology` (kai.scheduler) over nodes labelled with keys no built-in scheme knows gives the tree, a
KAI PodGroup (scheduling.run.ai) that pods join with `pod-group-name` is a gang whose
requiredTopologyLevel holds it in one rack; a PodGroup naming another topology and a level that is no
layer, and a bad Topology, get Warning Events naming the object and field. A KAI `Queue`
(scheduling.run.ai/v2) is the quota of the gangs whose PodGroup names it: a gang over its limit waits
with the quota's reason, one within is placed, and a bad Queue is warned about naming the field."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from devcluster.cluster import DevCluster
from events.objects import KAI_POD_GROUP_ANNOTATION, KAI_SUB_GROUP_LABEL
from state.topology import SOURCE_KAI
from tests.integration.daemon.harness import (
    NAMESPACE,
    RunningDaemon,
    bound_count,
    daemons,
    node_of,
    nodes,
    pod,
    wait_until,
)
from tests.integration.daemon.test_kueue_topology import BLOCK, RACK, custom_nodes
from tests.integration.daemon.test_quota_status import stored_pod
from tests.integration.daemon.test_topology_status import warning_events

HOST = "kubernetes.io/hostname"


def kai_topology(name: str, *labels: str) -> dict[str, Any]:
    return {"apiVersion": "kai.scheduler/v1alpha1", "kind": "Topology", "metadata": {"name": name},
            "spec": {"levels": [{"nodeLabel": label} for label in labels]}}


def kai_gang(name: str, size: int, constraint: dict[str, str], queue: str = "", *, priority_class: str = "",
             preemptibility: str = "") -> list[dict[str, Any]]:
    spec: dict[str, Any] = {"minMember": size, "topologyConstraint": constraint}
    if queue:
        spec["queue"] = queue
    if priority_class:
        spec["priorityClassName"] = priority_class  # as KAI's pod-grouper copies it from the workload
    if preemptibility:
        spec["preemptibility"] = preemptibility
    group = {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
             "metadata": {"name": name, "namespace": NAMESPACE}, "spec": spec}
    members = []
    for index in range(size):
        member = pod(f"{name}-{index}", priority_class=priority_class)
        member["metadata"]["annotations"] = {KAI_POD_GROUP_ANNOTATION: name}
        members.append(member)
    return [group, *members]


def names(manifests: list[dict[str, Any]]) -> list[str]:
    return [m["metadata"]["name"] for m in manifests if m["kind"] == "Pod"]


def source_of(running: RunningDaemon) -> tuple[str, str]:
    state = running.daemon.state
    return ("", "") if state is None else (state.topology.source, state.topology.source_name)


async def test_a_kai_gang_lands_in_one_rack_of_the_kai_topology(tmp_path: Path) -> None:
    async with DevCluster() as cluster:
        cluster.load_objects([*custom_nodes(), kai_topology("cluster-topology", BLOCK, RACK, HOST)])
        async with daemons(cluster, tmp_path) as (running,):
            await wait_until(lambda: source_of(running) == (SOURCE_KAI, "cluster-topology"),
                             what="the tree from the KAI Topology")
            job = kai_gang("job", 2, {"topology": "cluster-topology", "requiredTopologyLevel": RACK})
            cluster.load_objects(job)
            await wait_until(lambda: bound_count(cluster, names(job)) == 2, what="KAI gang bound")
            assert sorted(node_of(cluster, name) for name in names(job)) == ["node-002", "node-003"]
            assert warning_events(cluster, "PodGroup", "job") == []


async def test_unusable_kai_fields_and_a_bad_kai_topology_are_warned_about_and_the_gang_waits(
        tmp_path: Path) -> None:
    async with DevCluster() as cluster:
        cluster.load_objects([*custom_nodes(), kai_topology("cluster-topology", BLOCK, RACK),
                              kai_topology("twice", RACK, RACK)])
        async with daemons(cluster, tmp_path) as (running,):
            await wait_until(lambda: source_of(running) == (SOURCE_KAI, "cluster-topology"),
                             what="the tree from the good KAI Topology")
            job = kai_gang("lost", 2, {"topology": "elsewhere", "requiredTopologyLevel": "example.com/zone"})
            cluster.load_objects(job)

            def invalid() -> list[dict[str, Any]]:
                return [e for e in warning_events(cluster, "PodGroup", "lost") if e["reason"] == "InvalidPodGroup"]

            await wait_until(lambda: len(invalid()) >= 2, what="InvalidPodGroup Warning Events on the KAI PodGroup")
            events = invalid()
            messages = " | ".join(event["message"] for event in events)
            assert "spec.topologyConstraint.topology" in messages and "elsewhere" in messages, messages
            assert "spec.topologyConstraint.requiredTopologyLevel" in messages, messages
            assert {event["involvedObject"]["apiVersion"] for event in events} == {"scheduling.run.ai/v2alpha2"}
            assert events[0]["involvedObject"]["uid"] == cluster.store.get(
                "podgroups.scheduling.run.ai", "lost", NAMESPACE)["metadata"]["uid"]
            assert bound_count(cluster, names(job)) == 0
            await wait_until(lambda: bool(warning_events(cluster, "Topology", "twice")), what="a Topology Warning")
            event = warning_events(cluster, "Topology", "twice")[0]
            assert event["reason"] == "InvalidTopology"
            assert event["involvedObject"]["apiVersion"] == "kai.scheduler/v1alpha1"
            assert any("spec.levels[1].nodeLabel" in e["message"] for e in warning_events(cluster, "Topology", "twice"))


async def test_a_cluster_without_kai_runs_and_picks_kai_up_when_its_crds_appear(tmp_path: Path) -> None:
    async with DevCluster() as cluster:
        cluster.load_objects([*custom_nodes(), kai_topology("cluster-topology", BLOCK, RACK)])
        missing = [cluster.faults.fail_fraction(1.0, 404, verb="list", path=path)
                   for path in ("/apis/kai.scheduler/", "/apis/scheduling.run.ai/")]
        async with daemons(cluster, tmp_path) as (running,):
            watchers = running.daemon.watchers
            assert watchers is not None
            kai = [w for w in watchers.watchers if w.info.name in ("KaiTopology", "KaiPodGroup", "KaiQueue")]
            await wait_until(lambda: running.daemon.health.ready, what="ready without KAI's CRDs")
            assert len(kai) == 3 and all(w.missing_crd for w in kai)
            for fault in missing:
                cluster.faults.remove(fault)
            await wait_until(lambda: source_of(running) == (SOURCE_KAI, "cluster-topology"), within=10,
                             what="the KAI Topology picked up once its CRD is served")
            job = kai_gang("late", 2, {"topology": "cluster-topology", "requiredTopologyLevel": RACK})
            cluster.load_objects(job)
            await wait_until(lambda: bound_count(cluster, names(job)) == 2, within=10, what="KAI gang bound")
            assert sorted(node_of(cluster, name) for name in names(job)) == ["node-002", "node-003"]


def kai_queue(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name}, "spec": spec}


# KAI's units: cpu in millicores, memory in megabytes, gpu in GPUs; -1 is no limit (an absent limit is 0).
NO_LIMIT = {"quota": 0, "limit": -1, "overQuotaWeight": 1}


def reason_of(cluster: DevCluster, name: str) -> str:
    conditions = (stored_pod(cluster, name).get("status") or {}).get("conditions") or []
    return next((c.get("message", "") for c in conditions if c["type"] == "PodScheduled"), "")


def kai_reasons(cluster: DevCluster, name: str) -> list[dict[str, Any]]:
    """The `reasons` of the KAI PodGroup's UnschedulableOnNodePool condition, as KAI's clients read them."""
    group = cluster.store.get("podgroups.scheduling.run.ai", name, NAMESPACE)
    conditions = (group.get("status") or {}).get("schedulingConditions") or []
    return next((c.get("reasons", []) for c in conditions if c["type"] == "UnschedulableOnNodePool"), [])


async def test_a_kai_gang_over_its_queues_limit_waits_with_the_quota_reason_and_one_within_is_placed(
        tmp_path: Path) -> None:
    team = kai_queue("team-a", {"resources": {"cpu": NO_LIMIT, "memory": NO_LIMIT,
                                              "gpu": {"quota": 8, "limit": 16, "overQuotaWeight": 1}}})
    guarded = kai_queue("team-b", {"resources": {"cpu": NO_LIMIT, "memory": NO_LIMIT,
                                                 "gpu": {"quota": 8, "limit": -1, "overQuotaWeight": 1}}})
    async with DevCluster() as cluster:
        cluster.load_objects([*nodes(4), team, guarded])
        async with daemons(cluster, tmp_path):
            within = kai_gang("within", 2, {}, queue="team-a")
            cluster.load_objects(within)
            await wait_until(lambda: bound_count(cluster, names(within)) == 2, what="the gang within the limit bound")
            over = kai_gang("over", 1, {}, queue="team-a")
            cluster.load_objects(over)
            await wait_until(lambda: "KAI queue team-a: nvidia.com/gpu 16 used + 8 asked > limit 16"
                             in reason_of(cluster, "over-0"), what="the quota's reason on the waiting pod")
            assert bound_count(cluster, names(over)) == 0  # three nodes are free: only the queue holds it back
            assert warning_events(cluster, "Queue", "team-a") == []
            # The PodGroup's condition says it as KAI's scheduler does: OverLimit, with the queue's figures.
            await wait_until(lambda: bool(kai_reasons(cluster, "over")), what="the KAI condition's reasons")
            (limit,) = kai_reasons(cluster, "over")
            assert limit["reason"] == "OverLimit"
            assert "nvidia.com/gpu 16 used + 8 asked > limit 16" in limit["message"]
            queue = limit["details"]["queueDetails"]
            assert queue["name"] == "team-a"
            assert queue["queueResourceLimits"] == {"nvidia.com/gpu": "16"}  # cpu and memory: -1, no limit
            assert queue["queueDeservedResources"]["nvidia.com/gpu"] == "8"
            assert queue["queueAllocatedResources"]["nvidia.com/gpu"] == "16"
            # only the queue's own resources, as KAI lists them: not the pods' slots or other resources counted
            kai_resources = {"cpu", "memory", "nvidia.com/gpu"}
            assert set(queue["queueAllocatedResources"]) <= kai_resources
            assert set(queue["podGroupRequestedResources"]) <= kai_resources
            assert queue["podGroupRequestedResources"]["nvidia.com/gpu"] == "8"
            assert queue["podGroupRequestedNonPreemptibleResources"] == {}
            # A non-preemptible job past its queue's quota (within its limit): NonPreemptibleOverQuota.
            build = kai_gang("build", 2, {}, queue="team-b", preemptibility="non-preemptible")
            cluster.load_objects(build)
            await wait_until(lambda: bool(kai_reasons(cluster, "build")), what="the non-preemptible job's reasons")
            (quota,) = kai_reasons(cluster, "build")
            assert quota["reason"] == "NonPreemptibleOverQuota", quota
            assert quota["details"]["queueDetails"]["podGroupRequestedNonPreemptibleResources"][
                "nvidia.com/gpu"] == "16"
            # A job the nodes cannot hold (2 of 4 nodes free), in a queue that admits it: PodSchedulingErrors.
            wide = kai_gang("wide", 3, {}, queue="team-b")
            cluster.load_objects(wide)
            await wait_until(lambda: bool(kai_reasons(cluster, "wide")), what="the wide job's reasons")
            assert [r["reason"] for r in kai_reasons(cluster, "wide")] == ["PodSchedulingErrors"]
            assert bound_count(cluster, names(build) + names(wide)) == 0


async def test_a_bad_kai_queue_is_warned_about_naming_the_field_and_its_gang_waits_on_a_missing_queue(
        tmp_path: Path) -> None:
    bad = kai_queue("bad", {"preemptMinRuntime": "10 minutes", "resources": {
        "cpu": NO_LIMIT, "memory": NO_LIMIT, "gpu": {"quota": -5, "limit": -1, "overQuotaWeight": 1,
                                                     "lendingLimit": 2}}})
    async with DevCluster() as cluster:
        cluster.load_objects([*nodes(2), bad])
        async with daemons(cluster, tmp_path):
            lost = kai_gang("lost", 1, {}, queue="no-such-queue")
            cluster.load_objects(lost)

            def on_queue() -> dict[str, list[dict[str, Any]]]:
                found: dict[str, list[dict[str, Any]]] = {}
                for event in warning_events(cluster, "Queue", "bad"):
                    if event["involvedObject"]["apiVersion"] == "scheduling.run.ai/v2":
                        found.setdefault(event["reason"], []).append(event)
                return found

            await wait_until(lambda: len(on_queue().get("InvalidQuota", [])) == 2 and "UnsupportedField" in on_queue(),
                             what="Warning Events on the KAI Queue")
            found = on_queue()
            messages = sorted(event["message"] for event in found["InvalidQuota"])
            assert messages[0].startswith("spec.preemptMinRuntime: '10 minutes' is not a duration"), messages
            assert messages[1].startswith("spec.resources.gpu.quota: -5 is negative"), messages
            assert found["UnsupportedField"][0]["message"].startswith("spec.resources.gpu.lendingLimit: 2 is read "
                                                                      "but not implemented")
            assert found["InvalidQuota"][0]["involvedObject"]["uid"] == cluster.store.get(
                "queues.scheduling.run.ai", "bad")["metadata"]["uid"]
            await wait_until(lambda: any(e["reason"] == "QuotaNotFound"
                                         for e in warning_events(cluster, "PodGroup", "lost")),
                             what="QuotaNotFound on the KAI PodGroup")
            await wait_until(lambda: "KAI queue 'no-such-queue' not found" in reason_of(cluster, "lost-0"),
                             what="the missing queue in the pod's reason")
            assert bound_count(cluster, names(lost)) == 0
            await wait_until(lambda: bool(kai_reasons(cluster, "lost")), what="the KAI condition's reasons")
            (missing,) = kai_reasons(cluster, "lost")
            assert missing["reason"] == "QueueDoesNotExist" and "no-such-queue" in missing["message"]



def priority_class(name: str, value: int) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
            "value": value}


async def test_kais_burst_queue_borrows_idle_gpus_and_gives_them_back_and_an_inference_job_is_kept(
        tmp_path: Path) -> None:
    # KAI's documented burst queue (gpu quota 0, limit -1, no overQuotaWeight) runs on idle GPUs. Queue
    # team (quota 8) runs `serve`, of KAI's `inference` class (125: non-preemptible), and `batch`, of
    # `train` (50). An urgent job of team, on the full cluster, takes back the burst queue's GPUs (no
    # weight: no fair share to keep), not `batch` (of lower priority in its own queue) nor `serve`.
    burst = kai_queue("burst-queue", {"resources": {"cpu": {"quota": -1, "limit": -1},
                                                    "memory": {"quota": 0, "limit": -1},
                                                    "gpu": {"quota": 0, "limit": -1}}})
    # a non-preemptible job must fit the quota of every resource it asks for, as in KAI
    deserves_all = {"quota": -1, "limit": -1, "overQuotaWeight": 1}
    team = kai_queue("team", {"resources": {"cpu": deserves_all, "memory": deserves_all,
                                            "gpu": {"quota": 8, "limit": -1, "overQuotaWeight": 1}}})
    classes = [priority_class("train", 50), priority_class("inference", 125), priority_class("urgent", 1000)]
    async with DevCluster() as cluster:
        cluster.load_objects([*nodes(3), burst, team, *classes])
        async with daemons(cluster, tmp_path):
            scratch = kai_gang("scratch", 1, {}, queue="burst-queue", priority_class="train")
            serve = kai_gang("serve", 1, {}, queue="team", priority_class="inference")
            batch = kai_gang("batch", 1, {}, queue="team", priority_class="train")
            cluster.load_objects([*scratch, *serve, *batch])
            await wait_until(lambda: bound_count(cluster, names([*scratch, *serve, *batch])) == 3,
                             what="the burst queue's job and team's two jobs bound")
            scratch_node = node_of(cluster, "scratch-0")
            urgent = kai_gang("urgent", 1, {}, queue="team", priority_class="urgent", preemptibility="preemptible")
            cluster.load_objects(urgent)
            await wait_until(lambda: node_of(cluster, "urgent-0") == scratch_node,
                             what="the urgent job bound where the burst queue's job ran")
            assert cluster.store.find("pods", "scratch-0", NAMESPACE) is None  # reclaimed
            for kept in ("serve-0", "batch-0"):
                found = cluster.store.find("pods", kept, NAMESPACE)
                assert found is not None and not found["metadata"].get("deletionTimestamp"), kept


async def test_a_kai_job_preempts_and_is_ordered_by_its_pod_groups_priority_class_not_its_pods(
        tmp_path: Path) -> None:
    # KAI's documented way to set a workload's priority is its `priorityClassName` label, which KAI's
    # pod-grouper copies onto the PodGroup; the pods' own specs name no class (priority 0 here). `research`
    # (train, 50) fills both nodes; `build` (build, 100) then needs one: as a job of priority 100 it preempts
    # research, which its pods' priority (0 against 0) would never allow.
    classes = [priority_class("train", 50), priority_class("build", 100)]

    def job(name: str, size: int, class_name: str) -> list[dict[str, Any]]:
        manifests = kai_gang(name, size, {})
        manifests[0]["spec"]["priorityClassName"] = class_name  # the PodGroup's only, as the pod-grouper writes it
        return manifests

    async with DevCluster() as cluster:
        cluster.load_objects([*nodes(2), *classes])
        async with daemons(cluster, tmp_path) as (running,):
            research = job("research", 2, "train")
            cluster.load_objects(research)
            await wait_until(lambda: bound_count(cluster, names(research)) == 2, what="research bound")
            state = running.daemon.state
            assert state is not None and state.pods[f"{NAMESPACE}/research-0"].priority == 50
            assert stored_pod(cluster, "research-0")["spec"].get("priority", 0) == 0  # the pod's own
            build = job("build", 1, "build")
            cluster.load_objects(build)
            await wait_until(lambda: bound_count(cluster, names(build)) == 1, within=15,
                             what="the build job bound once research was preempted")
            assert all(cluster.store.find("pods", name, NAMESPACE) is None for name in names(research))
            # both classes exist: nothing to warn about on either PodGroup but the wait that preempted
            assert {e["reason"] for e in warning_events(cluster, "PodGroup", "build")} <= {"FailedScheduling"}
            invalid = [e for e in warning_events(cluster, "PodGroup", "research") if e["reason"] == "InvalidPodGroup"]
            assert invalid == []


async def test_a_kai_queues_preempt_min_runtime_keeps_a_young_job_until_it_has_run_that_long(tmp_path: Path) -> None:
    # queue team says preemptMinRuntime 3s: `research` (train, 50) is not preempted by `urgent` (1000) of the
    # same queue until it has run 3 s; the daemon says so in urgent's reason and tries again then by itself.
    team = kai_queue("team", {"preemptMinRuntime": "3s", "resources": {
        "cpu": NO_LIMIT, "memory": NO_LIMIT, "gpu": {"quota": 16, "limit": -1, "overQuotaWeight": 1}}})
    classes = [priority_class("train", 50), priority_class("urgent", 1000)]
    async with DevCluster() as cluster:
        cluster.load_objects([*nodes(2), team, *classes])
        async with daemons(cluster, tmp_path):
            research = kai_gang("research", 2, {}, queue="team", priority_class="train")
            cluster.load_objects(research)
            await wait_until(lambda: bound_count(cluster, names(research)) == 2, what="research bound")
            started = time.monotonic()
            urgent = kai_gang("urgent", 2, {}, queue="team", priority_class="urgent", preemptibility="preemptible")
            cluster.load_objects(urgent)
            await wait_until(lambda: "KAI queue's preemptMinRuntime has not passed" in reason_of(cluster, "urgent-0"),
                             what="the min runtime in urgent's reason")
            assert bound_count(cluster, names(urgent)) == 0
            assert all(cluster.store.find("pods", name, NAMESPACE) is not None for name in names(research))
            await wait_until(lambda: bound_count(cluster, names(urgent)) == 2, within=15,
                             what="urgent bound once research has run 3 s and was preempted")
            assert time.monotonic() - started >= 2.0  # research ran ~3 s from its binding, before urgent came
            assert all(cluster.store.find("pods", name, NAMESPACE) is None for name in names(research))
            assert [e for e in warning_events(cluster, "Queue", "team") if e["reason"] == "UnsupportedField"] == []


def kai_hierarchical_gang(name: str, sub_groups: list[dict[str, Any]], leaves: dict[str, int],
                          **spec: Any) -> list[dict[str, Any]]:
    group = {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
             "metadata": {"name": name, "namespace": NAMESPACE}, "spec": {**spec, "subGroups": sub_groups}}
    members = []
    for leaf, count in leaves.items():
        for index in range(count):
            member = pod(f"{name}-{leaf}-{index}")
            member["metadata"]["annotations"] = {KAI_POD_GROUP_ANNOTATION: name}
            member["metadata"]["labels"] = {KAI_SUB_GROUP_LABEL: leaf}
            members.append(member)
    return [group, *members]


async def test_a_kai_sub_group_lands_in_one_rack_and_a_tree_kai_refuses_is_warned_about_and_waits(
        tmp_path: Path) -> None:
    async with DevCluster() as cluster:
        cluster.load_objects([*custom_nodes(), kai_topology("cluster-topology", BLOCK, RACK, HOST)])
        async with daemons(cluster, tmp_path) as (running,):
            await wait_until(lambda: source_of(running) == (SOURCE_KAI, "cluster-topology"),
                             what="the tree from the KAI Topology")
            rack = {"topology": "cluster-topology", "requiredTopologyLevel": RACK}
            job = kai_hierarchical_gang("infer", [{"name": "leader", "minMember": 1},
                                                  {"name": "workers", "minMember": 2, "topologyConstraint": rack}],
                                        {"leader": 1, "workers": 2}, minSubGroup=2)
            cluster.load_objects(job)
            await wait_until(lambda: bound_count(cluster, names(job)) == 3, what="the KAI hierarchical gang bound")
            workers = sorted(node_of(cluster, f"infer-workers-{index}") for index in range(2))
            assert workers == ["node-002", "node-003"]  # the one rack that holds both (the first free nodes do not)
            assert warning_events(cluster, "PodGroup", "infer") == []
            looped = kai_hierarchical_gang("looped", [{"name": "a", "parent": "b", "minMember": 1},
                                                      {"name": "b", "parent": "a"}], {"a": 1}, minMember=1)
            cluster.load_objects(looped)

            def invalid() -> list[dict[str, Any]]:
                return [e for e in warning_events(cluster, "PodGroup", "looped") if e["reason"] == "InvalidPodGroup"]

            await wait_until(lambda: bool(invalid()), what="a Warning on the PodGroup whose sub-groups make a cycle")
            assert "spec.subGroups[0].parent" in invalid()[0]["message"]
            await wait_until(lambda: "makes a cycle" in reason_of(cluster, "looped-a-0"),
                             what="the pending pod's reason")
            assert bound_count(cluster, names(looped)) == 0
