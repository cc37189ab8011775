"""NVIDIA KAI Scheduler's dialect applied with kubectl as KAI's docs write it: a `Topology`
(kai.scheduler/v1alpha1) over the admin's own rack labels, and a `PodGroup` (scheduling.run.ai/v2alpha2)
with a topologyConstraint that pods join with the `pod-group-name` annotation. toposched builds its tree
from the Topology and keeps the gang in one rack; the API server refuses what KAI's CRDs refuse. KAI's
documented burst Queue (scheduling.run.ai/v2) lets a job borrow idle GPUs, and is warned about the memory
it leaves out."""

from __future__ import annotations

import json
import time
import zlib
from collections.abc import Iterator

import pytest

from daemon.cli.topology import main as show
from tests.ecosystem.harness import (
    Ecosystem,
    ecosystem,
    gpu_nodes,
    namespace_yaml,
    pod_yaml,
    priority_classes_yaml,
    running,
    stream,
)

pytestmark = ecosystem

BLOCK = "cloud.provider.com/topology-block"
RACK = "cloud.provider.com/topology-rack"
NODES = [f"gpu-{index:02d}" for index in range(8)]
# gpu-00 and gpu-01 are in two racks (the first free nodes by name); racks c and d hold three nodes each.
RACK_OF = dict(zip(NODES, ["rack-a", "rack-b", "rack-c", "rack-c", "rack-c", "rack-d", "rack-d", "rack-d"],
                   strict=True))

TOPOLOGY = """apiVersion: kai.scheduler/v1alpha1
kind: Topology
metadata:
  name: "cluster-topology"
spec:
  levels:
  - nodeLabel: "cloud.provider.com/topology-block"
  - nodeLabel: "cloud.provider.com/topology-rack"
  - nodeLabel: "kubernetes.io/hostname"
"""


def labels(index: int) -> dict[str, str]:
    return {BLOCK: "block-0" if index < 5 else "block-1", RACK: RACK_OF[NODES[index]]}


def pod_group(name: str, namespace: str, min_member: int, extra: str = "") -> str:
    return f"""apiVersion: scheduling.run.ai/v2alpha2
kind: PodGroup
metadata:
  name: {name}
  namespace: {namespace}
spec:
  minMember: {min_member}
  queue: default-queue
  topologyConstraint:
    topology: cluster-topology
    requiredTopologyLevel: {RACK}{extra}
"""


@pytest.fixture(scope="module")
def eco(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ecosystem]:
    with running(tmp_path_factory.mktemp("kai"), gpu_nodes(NODES, labels), TOPOLOGY) as started:
        yield started


def test_kubectl_lists_the_kai_topology_and_topology_show_reads_the_tree_from_it(
        eco: Ecosystem, capsys: pytest.CaptureFixture[str]) -> None:
    listed = eco.kubectl.run("get", "topologies.kai.scheduler", "-o", "name").stdout.split()
    assert listed == ["topology.kai.scheduler/cluster-topology"]
    kubeconfig = eco.kubectl.base[eco.kubectl.base.index("--kubeconfig") + 1]
    assert show(["show", "--kubeconfig", kubeconfig]) == 0
    assert "KaiTopology cluster-topology (kai.scheduler Topology)" in capsys.readouterr().out
    assert show(["show", "--kubeconfig", kubeconfig, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["layers"] == ["ClusterTopologyLayer", "SpineLayer", "BlockLayer"]


def test_a_kai_pod_group_s_required_rack_keeps_its_pods_in_one_rack(eco: Ecosystem) -> None:
    namespace = "kai-racked"
    pods = [pod_yaml(f"train-{index}", namespace, annotations={"pod-group-name": "train"}) for index in range(3)]
    eco.apply(stream(namespace_yaml(namespace), pod_group("train", namespace, 3), *pods))
    where = eco.wait_bound([f"train-{index}" for index in range(3)], namespace)
    assert len({RACK_OF[node] for node in where.values()}) == 1, where
    # its queue, KAI's default-queue, is not defined here: no quota applies, and nothing is warned about it
    assert not any("spec.queue" in e["message"] for e in eco.events(namespace, "train", "PodGroup"))
    eco.kubectl.run("delete", "pods", "--all", "-n", namespace, "--grace-period=0", "--force", "--wait=false")
    eco.kubectl.run("delete", "podgroups.scheduling.run.ai", "--all", "-n", namespace, "--wait=false")
    eco.wait_for(lambda: not eco.objects("pods", namespace), what="the pods gone")


@pytest.mark.parametrize(("extra", "says"), [
    ("\n  preemptibility: sometimes", "supported values"),
    ("\n  minSubGroup: 0", "greater than or equal to 1"),
], ids=["preemptibility", "min-sub-group"])
def test_the_api_server_refuses_what_kai_s_pod_group_crd_refuses(eco: Ecosystem, extra: str, says: str) -> None:
    refused = eco.kubectl.run("apply", "-f", "-", stdin=pod_group("bad", "default", 2, "").replace(
        "  queue: default-queue", "  queue: default-queue" + extra), check=False)
    assert refused.returncode != 0 and says in refused.stderr, refused.stderr


@pytest.mark.parametrize(("levels", "says"), [
    ("[]", "should have at least 1 items"),
    (f"[{{nodeLabel: {RACK}}}, {{nodeLabel: {RACK}}}]", "must be unique"),
    (f"[{{nodeLabel: kubernetes.io/hostname}}, {{nodeLabel: {RACK}}}]", "can only be used at the lowest level"),
    ("[{nodeLabel: -rack}]", "should match"),
    ("[{alias: rack}]", "Required value"),
], ids=["empty", "repeated", "hostname-above", "not-a-key", "no-node-label"])
def test_the_api_server_refuses_what_kai_s_topology_crd_refuses(eco: Ecosystem, levels: str, says: str) -> None:
    name = f"refused-{zlib.crc32(levels.encode()):08x}"
    refused = eco.kubectl.run("apply", "-f", "-", check=False, stdin=f"""apiVersion: kai.scheduler/v1alpha1
kind: Topology
metadata:
  name: {name}
spec:
  levels: {levels}
""")
    assert refused.returncode != 0 and says in refused.stderr, refused.stderr
    assert eco.find("topologies.kai.scheduler", name) is None


# KAI's docs/queues "Unlimited Queue" example, as written there: no memory and no overQuotaWeight.
BURST_QUEUE = """apiVersion: scheduling.run.ai/v2
kind: Queue
metadata:
  name: burst-queue
spec:
  resources:
    cpu:
      quota: -1                          # Unlimited quota
      limit: -1                          # No limit
    gpu:
      quota: 0                           # No guarantee
      limit: -1                          # No limit
"""


def test_kai_s_documented_burst_queue_runs_a_job_on_idle_gpus_and_is_warned_about_memory(eco: Ecosystem) -> None:
    # A preemptible job of KAI's `train` class in the burst queue borrows idle GPUs (KAI holds it by the
    # queue's limits, not its fair share, which is 0 here); its pods ask for no memory (GPU jobs as
    # NVIDIA's docs write them), so the memory the queue leaves out, a limit of 0 in KAI, does not stop
    # them, and the Queue carries a Warning saying what that omission means.
    namespace = "kai-burst"
    pods = [pod_yaml(f"burst-{index}", namespace, annotations={"pod-group-name": "burst"},
                     spec="\n  priorityClassName: train") for index in range(2)]
    group = pod_group("burst", namespace, 2).replace("  queue: default-queue", "  queue: burst-queue\n"
                                                     "  priorityClassName: train")
    eco.apply(stream(priority_classes_yaml(train=50, build=100, inference=125), BURST_QUEUE,
                     namespace_yaml(namespace), group, *pods))
    eco.wait_bound(["burst-0", "burst-1"], namespace)
    eco.wait_for(lambda: any(e["type"] == "Warning" and e["message"].startswith("spec.resources.memory: is absent")
                             for e in eco.events("default", "burst-queue", "Queue")),
                 what="the Warning on the burst queue's memory")
    eco.kubectl.run("delete", "pods", "--all", "-n", namespace, "--grace-period=0", "--force", "--wait=false")
    eco.kubectl.run("delete", "podgroups.scheduling.run.ai", "--all", "-n", namespace, "--wait=false")
    eco.kubectl.run("delete", "queues.scheduling.run.ai", "burst-queue", "--wait=false")
    eco.wait_for(lambda: not eco.objects("pods", namespace), what="the pods gone")


def kai_job(name: str, namespace: str, size: int, priority_class: str, extra: str = "", node_pool: str = "",
            pool_label: str = "kai.scheduler/node-pool") -> str:
    """A KAI PodGroup without topology, of `size` whole-node pods, and the pods (which stop at once when
    evicted); with `node_pool`, both labelled `pool_label` with it, as KAI's pod-grouper labels a PodGroup as its
    workload."""
    labels = f"\n  labels:\n    {pool_label}: {node_pool}" if node_pool else ""
    group = f"""apiVersion: scheduling.run.ai/v2alpha2
kind: PodGroup
metadata:
  name: {name}
  namespace: {namespace}{labels}
spec:
  minMember: {size}
  queue: default-queue
  priorityClassName: {priority_class}{extra}
"""
    pods = [pod_yaml(f"{name}-{index}", namespace, annotations={"pod-group-name": name},
                     labels={pool_label: node_pool} if node_pool else None,
                     spec="\n  terminationGracePeriodSeconds: 0") for index in range(size)]
    return stream(group, *pods)


def scheduling_conditions(eco: Ecosystem, name: str, namespace: str) -> list[dict[str, str]]:
    found = eco.find("podgroups.scheduling.run.ai", name, namespace) or {}
    return list((found.get("status") or {}).get("schedulingConditions") or [])


def test_a_kai_job_within_its_preemption_delay_evicts_no_one_until_it_has_passed(eco: Ecosystem) -> None:
    # KAI 0.17's preemptionDelay, as its docs write it: the urgent job waits 3s before it may evict the
    # running train job; meanwhile its PodGroup says why (KAI's UnschedulableOnNodePool condition), and
    # then the victim's PodGroup is stamped with its eviction time and gets KAI's Evict Event.
    namespace = "kai-delay"
    eco.apply(stream(priority_classes_yaml(train=50, urgent=1000), namespace_yaml(namespace),
                     kai_job("low", namespace, len(NODES), "train")))
    eco.wait_bound([f"low-{index}" for index in range(len(NODES))], namespace)
    eco.apply(kai_job("high", namespace, 2, "urgent", "\n  preemptionDelay: 3s"))
    eco.wait_for(lambda: any("preemption delay window (3s)" in c.get("message", "")
                             for c in scheduling_conditions(eco, "high", namespace)),
                 what="the urgent job's PodGroup saying it waits out its delay")
    [condition] = scheduling_conditions(eco, "high", namespace)
    assert (condition["type"], condition["nodePool"], condition["reason"], condition["status"],
            condition["transitionID"]) == ("UnschedulableOnNodePool", "default", "Unschedulable", "True", "1")
    assert all(not (pod.get("metadata") or {}).get("deletionTimestamp")
               for pod in eco.objects("pods", namespace) if pod["metadata"]["name"].startswith("low-")), \
        "a victim was evicted within the delay"
    assert any(e["type"] == "Normal" and e["reason"] == "Unschedulable"
               for e in eco.events(namespace, "high", "PodGroup"))
    eco.wait_bound(["high-0", "high-1"], namespace)  # after the delay: the train job is preempted
    low = eco.find("podgroups.scheduling.run.ai", "low", namespace) or {}
    assert "kai.scheduler/last-eviction-timestamp" in low["metadata"].get("annotations", {})
    assert any(e["type"] == "Normal" and e["reason"] == "Evict" for e in eco.events(namespace, "low", "PodGroup"))
    eco.wait_for(lambda: not scheduling_conditions(eco, "high", namespace),
                 what="the urgent job's scheduling condition removed once it is scheduled")
    eco.delete_namespace_objects(namespace)
    eco.wait_for(lambda: not eco.objects("pods", namespace), what="the pods gone")


def test_a_kai_pod_group_with_mark_unschedulable_false_leaves_its_pods_unmarked(eco: Ecosystem) -> None:
    # Two gangs too big for the cluster: the one with markUnschedulable false keeps its pods free of the
    # condition autoscalers provision for, while the other's are marked as usual.
    namespace = "kai-unmarked"
    size = len(NODES) + 1
    eco.apply(stream(priority_classes_yaml(train=50), namespace_yaml(namespace),
                     kai_job("huge", namespace, size, "train", "\n  markUnschedulable: false"),
                     kai_job("marked", namespace, size, "train")))
    eco.wait_pending([f"marked-{index}" for index in range(size)], namespace)
    eco.wait_for(lambda: bool(scheduling_conditions(eco, "huge", namespace)), what="the gang tried and refused")
    for index in range(size):
        pod = eco.find("pods", f"huge-{index}", namespace) or {}
        reasons = [c.get("reason") for c in (pod.get("status") or {}).get("conditions") or []
                   if c.get("type") == "PodScheduled"]
        assert "Unschedulable" not in reasons, pod["metadata"]["name"]
    eco.delete_namespace_objects(namespace)
    eco.wait_for(lambda: not eco.objects("pods", namespace), what="the pods gone")


def test_kai_node_pools_keep_each_pod_group_on_its_own_pool_s_nodes(eco: Ecosystem) -> None:
    # KAI's scheduling shards as its docs set them up: nodes labelled kai.scheduler/node-pool=gpu-nodes form a
    # pool; a job labelled so runs only there, one without the label only on the other nodes (KAI's default
    # shard), and one naming a pool no node is in waits, its PodGroup's condition naming that pool.
    namespace = "kai-pools"
    pooled = NODES[-3:]
    eco.kubectl.run("label", "nodes", *pooled, "kai.scheduler/node-pool=gpu-nodes")
    try:
        eco.apply(stream(priority_classes_yaml(train=50), namespace_yaml(namespace),
                         kai_job("nowhere", namespace, 1, "train", node_pool="cpu-nodes")))
        [message] = eco.wait_pending(["nowhere-0"], namespace).values()
        assert f"{len(NODES)} node(s) were outside KAI node pool cpu-nodes" in message, message
        eco.wait_for(lambda: bool(scheduling_conditions(eco, "nowhere", namespace)), what="the job's condition")
        [condition] = scheduling_conditions(eco, "nowhere", namespace)
        assert (condition["type"], condition["nodePool"]) == ("UnschedulableOnNodePool", "cpu-nodes")
        eco.apply(kai_job("gpu", namespace, len(pooled), "train", node_pool="gpu-nodes"))
        assert set(eco.wait_bound([f"gpu-{index}" for index in range(len(pooled))], namespace).values()) == set(pooled)
        # The default pool's job does not fit in its 5 nodes: it is not given the pool's nodes either.
        eco.apply(kai_job("plain", namespace, len(NODES) - len(pooled) + 1, "train"))
        says = eco.wait_pending([f"plain-{index}" for index in range(len(NODES) - len(pooled) + 1)], namespace)
        assert all("outside KAI node pool default" in message for message in says.values()), says
    finally:
        eco.delete_namespace_objects(namespace)
        eco.wait_for(lambda: not eco.objects("pods", namespace), what="the pods gone")
        eco.kubectl.run("label", "nodes", *pooled, "kai.scheduler/node-pool-")


def test_a_kai_pod_group_tried_once_per_pool_waits_for_a_move_and_runs_in_the_pool_it_is_moved_to(
        eco: Ecosystem) -> None:
    # Run:ai's node-pool assigner writes schedulingBackoff 1 (and markUnschedulable false) on a PodGroup that
    # may run in several pools, and moves it to its next pool when the pool it is in says it could not place
    # it. KAI's scheduler tries such a PodGroup once per pool, and so does toposched: room coming free in that
    # pool does not bring it back; a move does.
    namespace = "kai-backoff"
    pooled = NODES[-3:]
    eco.kubectl.run("label", "nodes", *pooled, "kai.scheduler/node-pool=gpu-nodes")
    try:
        eco.apply(stream(priority_classes_yaml(train=50), namespace_yaml(namespace),
                         kai_job("once", namespace, 4, "train", "\n  schedulingBackoff: 1\n  markUnschedulable: false",
                                 node_pool="gpu-nodes")))
        eco.wait_for(lambda: bool(scheduling_conditions(eco, "once", namespace)), what="the job refused in its pool")
        [condition] = scheduling_conditions(eco, "once", namespace)
        assert (condition["type"], condition["nodePool"]) == ("UnschedulableOnNodePool", "gpu-nodes")
        assert condition["message"].startswith("Node-Pool 'gpu-nodes': "), condition  # as KAI's reads with it
        eco.wait_for(lambda: any("not tried in node pool 'gpu-nodes' again" in event.get("message", "")
                                 for event in eco.events(namespace, "once", "PodGroup")),
                     what="the PodGroup's Event saying it is not tried in that pool again")
        eco.kubectl.run("label", "nodes", NODES[-4], "kai.scheduler/node-pool=gpu-nodes")  # room for all 4 there
        time.sleep(3)
        assert not any(pod["spec"].get("nodeName") for pod in eco.objects("pods", namespace)), \
            "placed in the pool that had refused it"
        # the assigner's move, to the default pool (the 4 nodes left without the label)
        eco.kubectl.run("label", "podgroups.scheduling.run.ai", "once", "-n", namespace, "kai.scheduler/node-pool-")
        where = eco.wait_bound([f"once-{index}" for index in range(4)], namespace)
        assert set(where.values()) == set(NODES[:4])
        eco.wait_for(lambda: not scheduling_conditions(eco, "once", namespace),
                     what="its scheduling condition removed once it is scheduled")
    finally:
        eco.delete_namespace_objects(namespace)
        eco.wait_for(lambda: not eco.objects("pods", namespace), what="the pods gone")
        eco.kubectl.run("label", "nodes", *NODES[-4:], "kai.scheduler/node-pool-")


def test_a_kai_job_waiting_on_the_nodes_its_preemption_freed_gets_no_unschedulable_condition(eco: Ecosystem) -> None:
    # KAI pipelines a job onto the room its preemption frees and marks it unschedulable no more: a condition
    # there would send a job tried once per pool (schedulingBackoff 1) to another pool while its victims leave.
    namespace = "kai-pipelined"
    low = kai_job("low", namespace, len(NODES), "train").replace("terminationGracePeriodSeconds: 0",
                                                                 "terminationGracePeriodSeconds: 3")
    eco.apply(stream(priority_classes_yaml(train=50, urgent=1000), namespace_yaml(namespace), low))
    eco.wait_bound([f"low-{index}" for index in range(len(NODES))], namespace)
    eco.apply(kai_job("high", namespace, 2, "urgent", "\n  schedulingBackoff: 1\n  markUnschedulable: false"))
    eco.wait_for(lambda: any(e["reason"] == "Unschedulable" and "preempting" in e["message"]
                             for e in eco.events(namespace, "high", "PodGroup")),
                 what="the job's report of its preemption")
    assert all(((eco.find("pods", f"high-{index}", namespace) or {}).get("status") or {}).get("nominatedNodeName")
               for index in range(2))
    assert not scheduling_conditions(eco, "high", namespace)
    eco.wait_bound(["high-0", "high-1"], namespace)
    assert not scheduling_conditions(eco, "high", namespace)
    eco.delete_namespace_objects(namespace)
    eco.wait_for(lambda: not eco.objects("pods", namespace), what="the pods gone")


def test_a_daemon_configured_with_kai_s_other_pool_label_keeps_pools_by_that_label(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    # KAI's nodePoolLabelKey changed to example.com/pool, and the daemon's kai_node_pool_label with it: the nodes
    # labelled so form the pools, and KAI's default key means nothing (pool-0 carries it).
    names = [f"pool-{index}" for index in range(4)]
    pooled = names[2:]

    def pool_labels(index: int) -> dict[str, str]:
        return ({"example.com/pool": "gpu-nodes"} if index >= 2 else
                {"kai.scheduler/node-pool": "gpu-nodes"} if index == 0 else {})

    namespace = "kai-other-key"
    with running(tmp_path_factory.mktemp("kai-key"), gpu_nodes(names, pool_labels),
                 kai_node_pool_label="example.com/pool") as other:
        other.apply(stream(priority_classes_yaml(train=50), namespace_yaml(namespace),
                           kai_job("gpu", namespace, 2, "train", node_pool="gpu-nodes", pool_label="example.com/pool")))
        assert set(other.wait_bound(["gpu-0", "gpu-1"], namespace).values()) == set(pooled)
        other.apply(kai_job("plain", namespace, 3, "train"))
        says = other.wait_pending([f"plain-{index}" for index in range(3)], namespace)
        assert all("2 node(s) were outside KAI node pool default" in message for message in says.values()), says
