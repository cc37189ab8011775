"""The daemon against devcluster with every gang protocol: it lists and watches the new kinds,
binds each kind of gang all at once, and runs on when a cluster does not serve the Workload API."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from devcluster.cluster import DevCluster
from tests.integration.daemon.harness import (
    NAMESPACE,
    bound_count,
    daemons,
    node_of,
    nodes,
    pod,
    pod_names,
    wait_until,
)


def member(name: str, *, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
           **spec: Any) -> dict[str, Any]:
    manifest = pod(name)
    manifest["metadata"]["labels"] = labels or {}
    manifest["metadata"]["annotations"] = annotations or {}
    manifest["spec"].update(spec)
    return manifest


def annotation_gang(names: range) -> list[dict[str, Any]]:
    return [member(f"gang-a-{i}", annotations={"gang.scheduling.koordinator.sh/name": "gang-a",
                                               "gang.scheduling.koordinator.sh/min-available": "3"}) for i in names]


def kube_gang() -> list[dict[str, Any]]:
    group = {"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
             "metadata": {"name": "example-podgroup", "namespace": NAMESPACE},
             "spec": {"schedulingPolicy": {"gang": {"minCount": 2}},
                      "schedulingConstraints": {"topology": [{"key": "network.topology.nvidia.com/block"}]}}}
    return [group, *(member(f"worker-{i}", schedulingGroup={"podGroupName": "example-podgroup"}) for i in range(2))]


def workload_gang() -> list[dict[str, Any]]:
    workload = {"apiVersion": "scheduling.k8s.io/v1alpha1", "kind": "Workload",
                "metadata": {"name": "training", "namespace": NAMESPACE},
                "spec": {"controllerRef": {"apiGroup": "batch", "kind": "Job", "name": "training"},
                         "podGroups": [{"name": "workers", "policy": {"gang": {"minCount": 2}}}]}}
    ref = {"name": "training", "podGroup": "workers", "podGroupReplicaKey": "0"}
    return [workload, *(member(f"training-{i}", workloadRef=ref) for i in range(2))]


def scheduler_plugins_gang() -> list[dict[str, Any]]:
    group = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
             "metadata": {"name": "nginx", "namespace": NAMESPACE},
             "spec": {"scheduleTimeoutSeconds": 10, "minMember": 2}}
    return [group, *(member(f"nginx-{i}", labels={"scheduling.x-k8s.io/pod-group": "nginx"}) for i in range(2))]


async def test_every_gang_protocol_is_watched_and_bound_all_at_once(tmp_path: Path) -> None:
    async with DevCluster() as cluster:
        cluster.load_objects(nodes(16))
        async with daemons(cluster, tmp_path) as (running,):
            state = running.daemon.state
            assert state is not None
            first = annotation_gang(range(2))
            cluster.load_objects(first)
            await wait_until(lambda: "default/gang-a" in state.gangs and state.gangs["default/gang-a"].attempts > 0,
                             what="the incomplete annotation gang tried")
            assert bound_count(cluster, pod_names(first)) == 0  # 2 of min-available 3: none bound, not one by one
            jobs = [annotation_gang(range(2, 3)), kube_gang(), workload_gang(), scheduler_plugins_gang()]
            for job in jobs:
                cluster.load_objects(job)
            names = pod_names(first) + [name for job in jobs for name in pod_names(job)]
            await wait_until(lambda: bound_count(cluster, names) == len(names), what="every gang bound")
            assert set(state.scheduler_plugins_pod_groups) == {"default/nginx"}
            assert set(state.kube_pod_groups) == {"default/example-podgroup"}
            assert set(state.workloads) == {"default/training"}


async def test_a_cluster_without_the_workload_api_is_fine(tmp_path: Path) -> None:
    async with DevCluster() as cluster:
        cluster.load_objects(nodes(4))
        missing = [cluster.faults.fail_fraction(1.0, 404, verb="list", path=f"/apis/scheduling.k8s.io/{version}/")
                   for version in ("v1alpha1", "v1alpha2", "v1alpha3", "v1beta1")]
        async with daemons(cluster, tmp_path) as (running,):
            watchers = running.daemon.watchers
            assert watchers is not None
            await wait_until(lambda: running.daemon.health.ready, what="ready without the Workload API")
            absent = {w.info.name for w in watchers.watchers if w.missing_crd}
            assert absent == {"Workload", "KubernetesPodGroup", "CompositePodGroup"}
            job = scheduler_plugins_gang()
            cluster.load_objects(job)
            await wait_until(lambda: bound_count(cluster, pod_names(job)) == 2, what="gang bound")
            for rule in missing:
                cluster.faults.remove(rule)
            await wait_until(lambda: not any(w.missing_crd for w in watchers.watchers), within=5,
                             what="the Workload API picked up")


def pod_group_conditions(cluster: DevCluster, api_version: str, name: str) -> dict[str, dict[str, Any]]:
    group = cluster.store.get(f"{api_version}/PodGroup", name, NAMESPACE)
    return {c["type"]: c for c in group.get("status", {}).get("conditions", [])}


async def test_a_kubernetes_pod_group_says_whether_it_is_scheduled_as_kube_scheduler_does(tmp_path: Path) -> None:
    """On a 1.36 cluster (v1alpha2): PodGroupScheduled, False with reason Unschedulable while the gang cannot
    fit, True once bound."""
    async with DevCluster() as cluster:
        cluster.load_objects(nodes(2))
        for version in ("v1beta1", "v1alpha3"):  # a 1.36 cluster: v1alpha2 only
            cluster.faults.fail_fraction(1.0, 404, path=f"/apis/scheduling.k8s.io/{version}/")
        async with daemons(cluster, tmp_path):
            group = {"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
                     "metadata": {"name": "three", "namespace": NAMESPACE},
                     "spec": {"schedulingPolicy": {"gang": {"minCount": 3}}}}
            job = [group, *(member(f"three-{i}", schedulingGroup={"podGroupName": "three"}) for i in range(3))]
            cluster.load_objects(job)

            def scheduled() -> dict[str, Any]:
                return pod_group_conditions(cluster, "scheduling.k8s.io/v1alpha2", "three").get(
                    "PodGroupScheduled", {})

            await wait_until(lambda: scheduled().get("status") == "False", what="PodGroupScheduled False")
            waiting = scheduled()
            assert waiting["reason"] == "Unschedulable" and "three" in waiting["message"]
            assert waiting["lastTransitionTime"]
            cluster.load_objects(nodes(4)[2:])
            await wait_until(lambda: bound_count(cluster, pod_names(job)) == 3, what="the gang bound")
            await wait_until(lambda: scheduled().get("status") == "True", what="PodGroupScheduled True")
            assert scheduled()["reason"] == "Scheduled"
            assert "PodGroupInitiallyScheduled" not in pod_group_conditions(
                cluster, "scheduling.k8s.io/v1alpha2", "three")


def kube_137_gang() -> list[dict[str, Any]]:
    """A Kubernetes 1.37 PodGroup, as its docs write one (scheduling.k8s.io/v1beta1), the leaf of a
    CompositePodGroup (v1alpha3, alpha in 1.37)."""
    group = {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
             "metadata": {"name": "workers-137", "namespace": NAMESPACE},
             "spec": {"schedulingPolicy": {"gang": {"minCount": 3}}, "disruptionMode": {"all": {}},
                      "workloadRef": {"workloadName": "training", "templateName": "workers"},
                      "parentCompositePodGroupName": "training",
                      "schedulingConstraints": {"topology": [{"key": "network.topology.nvidia.com/block"}]}}}
    root = {"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "CompositePodGroup",
            "metadata": {"name": "training", "namespace": NAMESPACE},
            "spec": {"schedulingPolicy": {"gang": {"minGroupCount": 1}},
                     "workloadRef": {"workloadName": "training", "templateName": "root"}}}
    return [root, group, *(member(f"w137-{i}", schedulingGroup={"podGroupName": "workers-137"}) for i in range(3))]


async def test_a_kubernetes_1_37_pod_group_is_watched_at_v1beta1_and_bound_whole(tmp_path: Path) -> None:
    async with DevCluster() as cluster:
        cluster.load_objects(nodes(16))
        async with daemons(cluster, tmp_path) as (running,):
            state, watchers = running.daemon.state, running.daemon.watchers
            assert state is not None and watchers is not None
            job = kube_137_gang()
            cluster.load_objects(job)
            await wait_until(lambda: bound_count(cluster, pod_names(job)) == 3, what="the 1.37 gang bound")
            (watcher,) = [w for w in watchers.watchers if w.info.name == "KubernetesPodGroup"]
            assert watcher.api_version == "scheduling.k8s.io/v1beta1"
            spec = state.gangs[f"{NAMESPACE}/workers-137"].spec
            assert spec is not None and spec.min_member == 3 and spec.disrupt_whole
            blocks = {cluster.store.get("nodes", node_of(cluster, name))["metadata"]["labels"][
                "network.topology.nvidia.com/block"] for name in pod_names(job)}
            assert len(blocks) == 1

            def initially() -> dict[str, Any]:
                return pod_group_conditions(cluster, "scheduling.k8s.io/v1beta1", "workers-137").get(
                    "PodGroupInitiallyScheduled", {})

            await wait_until(lambda: initially().get("status") == "True", what="PodGroupInitiallyScheduled True")
            assert "PodGroupScheduled" not in pod_group_conditions(cluster, "scheduling.k8s.io/v1beta1", "workers-137")

            assert spec.composite is not None and spec.gang_group == (f"{NAMESPACE}/workers-137",)
            assert f"{NAMESPACE}/training" in state.composite_pod_groups


async def test_a_pod_group_with_a_pod_left_to_another_scheduler_waits_until_it_is_gone(tmp_path: Path) -> None:
    async with DevCluster() as cluster:
        cluster.load_objects(nodes(4))
        async with daemons(cluster, tmp_path) as (running,):
            state = running.daemon.state
            assert state is not None
            group = {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                     "metadata": {"name": "mixed", "namespace": NAMESPACE},
                     "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}}
            ours = [member(f"mixed-{i}", schedulingGroup={"podGroupName": "mixed"}) for i in range(2)]
            stray = member("mixed-stray", schedulerName="default-scheduler", schedulingGroup={"podGroupName": "mixed"})
            cluster.load_objects([group, *ours, stray])
            gang = f"{NAMESPACE}/mixed"
            await wait_until(lambda: gang in state.gangs and "names scheduler 'default-scheduler'"
                             in state.gangs[gang].last_reason, what="the mixed gang refused")
            assert bound_count(cluster, pod_names(ours)) == 0
            cluster.store.delete("pods", "mixed-stray", NAMESPACE, grace_period_seconds=0)
            await wait_until(lambda: bound_count(cluster, pod_names(ours)) == 2, what="the gang bound once alone")


def hierarchy(root: str, leaves: dict[str, int], *, min_groups: int, pods_each: int,
              priority_class: str = "") -> list[dict[str, Any]]:
    """A 1.37 CompositePodGroup with PodGroup leaves (each gang minCount as given) and `pods_each` pods per leaf."""
    spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minGroupCount": min_groups}},
                            "workloadRef": {"workloadName": root, "templateName": "root"},
                            "schedulingConstraints": {"topology": [{"key": "network.topology.nvidia.com/block"}]}}
    if priority_class:
        spec["priorityClassName"] = priority_class
    manifests: list[dict[str, Any]] = [{"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "CompositePodGroup",
                                        "metadata": {"name": root, "namespace": NAMESPACE}, "spec": spec}]
    for name, min_count in leaves.items():
        manifests.append({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                          "metadata": {"name": name, "namespace": NAMESPACE},
                          "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}},
                                   "parentCompositePodGroupName": root,
                                   "workloadRef": {"workloadName": root, "templateName": name}}})
        manifests += [member(f"{name}-{i}", schedulingGroup={"podGroupName": name}) for i in range(pods_each)]
    return manifests


async def test_a_hierarchy_needing_one_of_two_replicas_binds_the_one_that_fits(tmp_path: Path) -> None:
    """minGroupCount 1 of 2 PodGroups of 3 pods on 4 nodes: one replica binds whole (Permit passes on the root's
    minimum, not on every PodGroup's minCount); the other waits for room."""
    async with DevCluster() as cluster:
        cluster.load_objects(nodes(4))
        async with daemons(cluster, tmp_path) as (running,):
            job = hierarchy("training", {"replica-a": 3, "replica-b": 3}, min_groups=1, pods_each=3)
            cluster.load_objects(job)
            await wait_until(lambda: bound_count(cluster, pod_names(job)) == 3, what="one replica bound")
            replicas = [[f"{leaf}-{i}" for i in range(3)] for leaf in ("replica-a", "replica-b")]
            assert sorted(bound_count(cluster, names) for names in replicas) == [0, 3]
            state = running.daemon.state
            assert state is not None
            await wait_until(lambda: state.gangs["default/replica-a"].attempts > 1, what="the rest tried again")
            assert bound_count(cluster, pod_names(job)) == 3


async def test_a_hierarchy_of_higher_priority_preempts_whole_lower_priority_pods(tmp_path: Path) -> None:
    """The root's priorityClassName is every pod's in the hierarchy: two replicas of one pod each preempt the two
    low-priority pods that hold the only two nodes, and bind."""
    async with DevCluster() as cluster:
        cluster.load_objects([{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                               "metadata": {"name": "high"}, "value": 1000}, *nodes(2)])
        async with daemons(cluster, tmp_path) as (_running,):
            low = [pod(f"low-{i}") for i in range(2)]
            cluster.load_objects(low)
            await wait_until(lambda: bound_count(cluster, pod_names(low)) == 2, what="the low pods bound")
            job = hierarchy("urgent", {"replica-a": 1, "replica-b": 1}, min_groups=2, pods_each=1,
                            priority_class="high")
            cluster.load_objects(job)
            await wait_until(lambda: bound_count(cluster, pod_names(job)) == 2, within=20, what="the hierarchy bound")
            assert all(cluster.store.find("pods", name, NAMESPACE) is None for name in pod_names(low))
