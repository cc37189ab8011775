"""Kubernetes' own gang API (the Workload API), with manifests shaped as its docs write them.

Kubernetes 1.36's `scheduling.k8s.io/v1alpha2` PodGroup (`schedulingPolicy.gang.minCount`,
`schedulingConstraints.topology[].key`), pods joining with `spec.schedulingGroup.podGroupName`; and
1.35's `scheduling.k8s.io/v1alpha1` Workload (`podGroups[].policy.gang.minCount`, a controllerRef to
its Job), pods joining with `spec.workloadRef` (`name`, `podGroup`, `podGroupReplicaKey`: each
replica its own gang). devcluster serves both as a cluster with the feature on does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.ecosystem.harness import (
    Ecosystem,
    ecosystem,
    gpu_nodes,
    namespace_yaml,
    pod_scheduled,
    pod_yaml,
    priority_classes_yaml,
    running,
    stream,
)

pytestmark = ecosystem

NODES = [f"node-{index}" for index in range(8)]
RACK = "topology.example.com/rack"
RACK_OF = {name: ("rack-a" if index in (0, 1, 3, 7) else "rack-b") for index, name in enumerate(NODES)}


@pytest.fixture(scope="module")
def eco(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ecosystem]:
    nodes = gpu_nodes(NODES, lambda index: {RACK: RACK_OF[f"node-{index}"],
                                            "network.topology.nvidia.com/block": f"b{index // 4}"})
    with running(tmp_path_factory.mktemp("kubernetes"), nodes) as started:
        yield started


def test_a_podgroup_with_a_topology_key_binds_its_gang_inside_one_value_of_that_label(eco: Ecosystem) -> None:
    namespace = "k8s-podgroup"
    group = f"""apiVersion: scheduling.k8s.io/v1alpha2
kind: PodGroup
metadata:
  name: example-podgroup
  namespace: {namespace}
spec:
  schedulingPolicy:
    gang:
      minCount: 4
  schedulingConstraints:
    topology:
    - key: {RACK}
"""
    join = "\n  schedulingGroup:\n    podGroupName: example-podgroup"
    names = [f"worker-{i}" for i in range(4)]
    eco.apply(stream(namespace_yaml(namespace), group, *(pod_yaml(name, namespace, spec=join) for name in names)))
    placed = eco.wait_bound(names, namespace)
    assert len({RACK_OF[node] for node in placed.values()}) == 1
    eco.delete_namespace_objects(namespace)


def test_each_replica_of_a_workloads_pod_group_is_a_gang_and_an_incomplete_one_says_why_it_waits(
    eco: Ecosystem,
) -> None:
    namespace = "k8s-workload"
    workload = f"""apiVersion: scheduling.k8s.io/v1alpha1
kind: Workload
metadata:
  name: training-job-workload
  namespace: {namespace}
spec:
  controllerRef:
    apiGroup: batch
    kind: Job
    name: training-job
  podGroups:
  - name: workers
    policy:
      gang:
        minCount: 2
"""

    def member(replica: str, index: int) -> str:
        join = (f"\n  workloadRef:\n    name: training-job-workload\n    podGroup: workers"
                f"\n    podGroupReplicaKey: \"{replica}\"")
        return pod_yaml(f"worker-{replica}-{index}", namespace, spec=join)

    eco.apply(stream(namespace_yaml(namespace), workload, member("0", 0), member("0", 1), member("1", 0)))
    eco.wait_bound(["worker-0-0", "worker-0-1"], namespace)
    message = eco.wait_pending(["worker-1-0"], namespace, says="1 of minMember 2 pods exist",
                               reason="NotReadyForScheduling")["worker-1-0"]
    assert "missing" in message
    eco.apply(member("1", 1))
    eco.wait_bound(["worker-1-0", "worker-1-1"], namespace)
    assert pod_scheduled(eco.find("pods", "worker-1-0", namespace))["status"] == "True"
    eco.delete_namespace_objects(namespace)


# --------------------------------------------------------------------------- 1.37's CompositePodGroups

BLOCK = "network.topology.nvidia.com/block"


def _composite(name: str, namespace: str, min_groups: int, key: str) -> str:
    return f"""apiVersion: scheduling.k8s.io/v1alpha3
kind: CompositePodGroup
metadata:
  name: {name}
  namespace: {namespace}
spec:
  workloadRef:
    workloadName: multi-level-tas-workload
    templateName: root
  schedulingPolicy:
    gang:
      minGroupCount: {min_groups}
  schedulingConstraints:
    topology:
    - key: {key}
"""


def _leaf(name: str, namespace: str, parent: str, min_count: int) -> str:
    return f"""apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata:
  name: {name}
  namespace: {namespace}
spec:
  parentCompositePodGroupName: {parent}
  workloadRef:
    workloadName: multi-level-tas-workload
    templateName: {name}
  schedulingPolicy:
    gang:
      minCount: {min_count}
  schedulingConstraints:
    topology:
    - key: {RACK}
"""


def test_a_composite_pod_groups_leaves_bind_together_in_one_block_each_in_one_rack(eco: Ecosystem) -> None:
    """The 1.37 docs' multi-level example: the root CompositePodGroup keeps the job in one block, each PodGroup
    below it in one rack; the pods wait for the root, which their controller creates before them in the docs
    but which comes last here, and then bind together."""
    namespace = "k8s-composite"
    workers = [f"workers-{i}" for i in range(2)]
    join = "\n  schedulingGroup:\n    podGroupName: {}"
    eco.apply(stream(namespace_yaml(namespace), _leaf("workers", namespace, "tas-workload-root", 2),
                     _leaf("driver", namespace, "tas-workload-root", 1),
                     *(pod_yaml(name, namespace, spec=join.format("workers")) for name in workers),
                     pod_yaml("driver-0", namespace, spec=join.format("driver"))))
    message = eco.wait_pending([*workers, "driver-0"], namespace, says="not found",
                               reason="NotReadyForScheduling")["driver-0"]
    assert f"CompositePodGroup {namespace}/tas-workload-root not found" in message
    eco.apply(_composite("tas-workload-root", namespace, 2, BLOCK))
    placed = eco.wait_bound([*workers, "driver-0"], namespace)
    block_of = {name: f"b{index // 4}" for index, name in enumerate(NODES)}
    assert len({block_of[node] for node in placed.values()}) == 1
    assert len({RACK_OF[placed[name]] for name in workers}) == 1
    eco.delete_namespace_objects(namespace)


def test_a_composite_whose_replicas_fit_no_block_binds_nothing_and_says_why(eco: Ecosystem) -> None:
    """Two replicas of two pods, each in one rack, the job in one block: no block has two racks of two free
    nodes (rack-a holds three nodes of b0 and one of b1, rack-b the others), so no pod binds."""
    namespace = "k8s-composite-tight"
    join = "\n  schedulingGroup:\n    podGroupName: {}"
    pods = [(f"{leaf}-{i}", leaf) for leaf in ("replica-a", "replica-b") for i in range(2)]
    eco.apply(stream(namespace_yaml(namespace), _composite("root", namespace, 2, BLOCK),
                     _leaf("replica-a", namespace, "root", 2), _leaf("replica-b", namespace, "root", 2),
                     *(pod_yaml(name, namespace, spec=join.format(leaf)) for name, leaf in pods)))
    names = [name for name, _ in pods]
    message = eco.wait_pending(names, namespace, says="replica")["replica-a-0"]
    assert "GangGroup" in message
    eco.delete_namespace_objects(namespace)


# --------------------------------------------------------------------------- Pod Scheduling Readiness

# Pods held by `spec.schedulingGates` (GA in Kubernetes 1.30), as Kueue and Volcano's queue admission
# create them: no scheduler may place them (the API server refuses their Binding) until the controller
# that set the gates removes the last one. The API server marks such a pod PodScheduled=False,
# reason SchedulingGated, and that must stay: cluster-autoscaler and Karpenter provision nodes only for
# reason Unschedulable, and must not for pods that wait for a quota.
GATES = "\n  schedulingGates:\n  - name: kueue.x-k8s.io/admission"
UNGATE = '[{"op": "remove", "path": "/spec/schedulingGates"}]'


def _failed_scheduling(eco: Ecosystem, name: str, namespace: str) -> list[str]:
    return [e["message"] for e in eco.events(namespace, name, "Pod") if e["reason"] == "FailedScheduling"]


def test_a_gang_with_a_gated_member_waits_saying_so_and_binds_whole_once_the_gate_is_removed(
    eco: Ecosystem,
) -> None:
    namespace = "k8s-gates-gang"
    group = f"""apiVersion: scheduling.k8s.io/v1alpha2
kind: PodGroup
metadata:
  name: gated-job
  namespace: {namespace}
spec:
  schedulingPolicy:
    gang:
      minCount: 4
"""
    join = "\n  schedulingGroup:\n    podGroupName: gated-job"
    names = [f"worker-{i}" for i in range(4)]
    eco.apply(stream(namespace_yaml(namespace), group,
                     *(pod_yaml(name, namespace, spec=join + (GATES if name == "worker-3" else "")) for name in names)))
    # kube-scheduler's GangScheduling holds them at PreEnqueue: NotReadyForScheduling, which no autoscaler
    # provisions for.
    messages = eco.wait_pending(names[:3], namespace, says="1 more held by their scheduling gates",
                                reason="NotReadyForScheduling")
    assert all("3 of minMember 4 pods exist" in message for message in messages.values())
    gated = pod_scheduled(eco.find("pods", "worker-3", namespace))
    assert (gated["status"], gated["reason"]) == ("False", "SchedulingGated")
    assert not eco.node_of("worker-3", namespace) and not _failed_scheduling(eco, "worker-3", namespace)
    eco.kubectl.run("patch", "pod", "worker-3", "-n", namespace, "--type=json", "-p", UNGATE)
    eco.wait_bound(names, namespace)
    eco.delete_namespace_objects(namespace)


def test_a_lone_gated_pod_is_left_to_its_gate_then_bound_once_it_is_removed(eco: Ecosystem) -> None:
    namespace = "k8s-gates-lone"
    eco.apply(stream(namespace_yaml(namespace), pod_yaml("waits", namespace, spec=GATES),
                     pod_yaml("free", namespace)))
    eco.wait_bound(["free"], namespace)  # the daemon has seen both: it placed the one it may
    eco.wait_for(lambda: bool(eco.events(namespace, "free", "Pod")), what="the Scheduled Event of free")
    gated = pod_scheduled(eco.find("pods", "waits", namespace))
    assert (gated["status"], gated["reason"]) == ("False", "SchedulingGated")
    assert not eco.node_of("waits", namespace) and not _failed_scheduling(eco, "waits", namespace)
    eco.kubectl.run("patch", "pod", "waits", "-n", namespace, "--type=json", "-p", UNGATE)
    eco.wait_bound(["waits"], namespace)
    assert pod_scheduled(eco.find("pods", "waits", namespace))["status"] == "True"
    eco.delete_namespace_objects(namespace)


# --------------------------------------------------------------------------- inter-pod affinity


def test_two_pods_that_must_not_share_a_host_go_to_two_nodes_though_one_would_hold_both(eco: Ecosystem) -> None:
    # One GPU each: lone pods go to the busiest node that fits, so without its required podAntiAffinity
    # the second would join the first. kube-scheduler's InterPodAffinity keeps them apart, and so must we.
    namespace = "k8s-anti-affinity"

    def manifest(name: str) -> str:
        return pod_yaml(name, namespace, gpus="1", labels={"app": "trainer"}, spec="""
  affinity:
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - labelSelector:
          matchLabels:
            app: trainer
        topologyKey: kubernetes.io/hostname""")

    _two_go_apart(eco, namespace, manifest)


def _exclusive_job(job: str, namespace: str, pods: int) -> list[str]:
    """A job of a JobSet with `alpha.jobset.sigs.k8s.io/exclusive-topology: network.topology.nvidia.com/block`,
    its pods as JobSet's webhook writes them (podAffinity to its own job, podAntiAffinity to every other
    job, in every namespace), gang-scheduled as a scheduler-plugins PodGroup."""
    key = f"{namespace}-{job}"
    affinity = f"""
  affinity:
    podAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - labelSelector:
          matchExpressions:
          - {{key: jobset.sigs.k8s.io/job-key, operator: In, values: [{key}]}}
        topologyKey: network.topology.nvidia.com/block
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - labelSelector:
          matchExpressions:
          - {{key: jobset.sigs.k8s.io/job-key, operator: Exists}}
          - {{key: jobset.sigs.k8s.io/job-key, operator: NotIn, values: [{key}]}}
        namespaceSelector: {{}}
        topologyKey: network.topology.nvidia.com/block"""
    group = f"""apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata:
  name: {job}
  namespace: {namespace}
spec:
  minMember: {pods}
"""
    labels = {"scheduling.x-k8s.io/pod-group": job, "jobset.sigs.k8s.io/jobset-name": "pretrain",
              "jobset.sigs.k8s.io/job-key": key}
    return [group, *(pod_yaml(f"{job}-{index}", namespace, gpus="1", labels=labels, spec=affinity)
                     for index in range(pods))]


def test_jobset_exclusive_placement_gives_each_gang_a_block_of_its_own(eco: Ecosystem) -> None:
    # Two jobs of 2 one-GPU pods: each would fit one node, and the second would pack next to the first.
    namespace = "k8s-jobset-exclusive"
    eco.apply(stream(namespace_yaml(namespace), *_exclusive_job("job-a", namespace, 2)))
    first = eco.wait_bound(["job-a-0", "job-a-1"], namespace)
    eco.apply(stream(*_exclusive_job("job-b", namespace, 2)))
    second = eco.wait_bound(["job-b-0", "job-b-1"], namespace)
    block = {name: f"b{int(name.rsplit('-', 1)[1]) // 4}" for name in NODES}
    assert len({block[node] for node in first.values()}) == 1
    assert len({block[node] for node in second.values()}) == 1
    assert {block[node] for node in first.values()} != {block[node] for node in second.values()}
    eco.delete_namespace_objects(namespace)


def test_a_term_with_a_namespace_selector_gets_a_warning_naming_the_field(eco: Ecosystem) -> None:
    namespace = "k8s-namespace-selector"
    anti = """
  affinity:
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - labelSelector:
          matchLabels:
            app: trainer
        namespaceSelector:
          matchLabels:
            team: ml
        topologyKey: kubernetes.io/hostname"""
    eco.apply(stream(namespace_yaml(namespace), pod_yaml("apart", namespace, gpus="1", spec=anti)))
    eco.wait_bound(["apart"], namespace)  # read as looking in every namespace (the warning says so)

    def warnings() -> list[str]:
        return [e["message"] for e in eco.events(namespace, "apart", "Pod")
                if e["type"] == "Warning" and e["reason"] == "UnsupportedField"]

    eco.wait_for(lambda: bool(warnings()), what="the UnsupportedField Event of apart")
    assert warnings()[0].startswith("spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]"
                                    ".namespaceSelector: a namespaceSelector chooses namespaces by their labels")
    eco.delete_namespace_objects(namespace)


def test_two_pods_on_the_host_network_holding_one_port_go_to_two_nodes_though_one_would_hold_both(
        eco: Ecosystem) -> None:
    # torchrun's rendezvous port, on the host network as RDMA setups run: the API server makes every
    # container port a host port of the node, and a node has one of each (kube-scheduler's NodePorts; the
    # kubelet refuses the second pod otherwise). A lone pod goes to the busiest node that fits: without the
    # port the second would join the first.
    namespace = "k8s-host-network"

    def manifest(name: str) -> str:
        return f"""{_pod_of(name, namespace)}
  hostNetwork: true
  containers:
  - name: trainer
    image: registry.k8s.io/pause:3.10
    resources: {{requests: {{cpu: 100m}}}}
    ports:
    - containerPort: 29500
"""

    _two_go_apart(eco, namespace, manifest, lambda stored: stored["spec"]["containers"][0]["ports"][0] == {
        "containerPort": 29500, "hostPort": 29500, "protocol": "TCP"})
    assert not [e for e in eco.events(namespace, "second", "Pod") if e["reason"] == "UnsupportedField"]


# --------------------------------------------------------------------------- native sidecars


def _pod_of(name: str, namespace: str) -> str:
    """A pod's manifest up to its spec's first line, for a test to write the rest of the spec."""
    return f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: {namespace}\nspec:\n" \
           "  schedulerName: toposched"


# --------------------------------------------------------------------------- topology spread constraints


def test_replicas_with_a_do_not_schedule_spread_over_blocks_land_two_per_block(eco: Ecosystem) -> None:
    # Four one-GPU replicas, as a Deployment's template writes them (matchLabelKeys pod-template-hash,
    # merged by the API server): lone pods pack the busiest node, so without the spread all four would
    # share one node of one block. kube-scheduler's PodTopologySpread keeps the blocks within maxSkew 1.
    namespace = "k8s-spread"
    spread = """
  topologySpreadConstraints:
  - maxSkew: 1
    topologyKey: network.topology.nvidia.com/block
    whenUnsatisfiable: DoNotSchedule
    labelSelector:
      matchLabels:
        app: server
    matchLabelKeys: [pod-template-hash]"""
    labels = {"app": "server", "pod-template-hash": "7c9f8b"}
    names = [f"server-{index}" for index in range(4)]
    eco.apply(stream(namespace_yaml(namespace), *(pod_yaml(name, namespace, gpus="1", labels=labels, spec=spread)
                                                  for name in names)))
    placed = eco.wait_bound(names, namespace)
    blocks = [f"b{int(node.rsplit('-', 1)[1]) // 4}" for node in placed.values()]
    assert sorted(blocks) == ["b0", "b0", "b1", "b1"]
    stored = (eco.find("pods", "server-0", namespace) or {})["spec"]["topologySpreadConstraints"][0]
    assert {"key": "pod-template-hash", "operator": "In", "values": ["7c9f8b"]} in \
        stored["labelSelector"]["matchExpressions"]
    refused = eco.kubectl.run("apply", "-f", "-", check=False, stdin=pod_yaml("skewless", namespace, gpus="1", spec="""
  topologySpreadConstraints:
  - maxSkew: 0
    topologyKey: network.topology.nvidia.com/block
    whenUnsatisfiable: DoNotSchedule"""))
    assert refused.returncode != 0
    assert "spec.topologySpreadConstraints[0].maxSkew: Invalid value: 0: must be greater than zero" in refused.stderr
    eco.delete_namespace_objects(namespace)


def _two_go_apart(eco: Ecosystem, namespace: str, manifest: Callable[[str], str],
                  stored: Callable[[dict[str, Any]], bool] = lambda _: True) -> None:
    """Two pods, each more than half a node: the second, created once the first is bound, goes to another
    node (lone pods go to the busiest node that fits: next to the first, had it fitted there). `stored`
    checks the first as the API server stored it."""
    eco.apply(stream(namespace_yaml(namespace), manifest("first")))
    eco.wait_bound(["first"], namespace)
    eco.apply(manifest("second"))
    placed = eco.wait_bound(["first", "second"], namespace)
    assert placed["first"] != placed["second"]
    assert stored(eco.find("pods", "first", namespace) or {})
    eco.delete_namespace_objects(namespace)


def test_a_sidecars_requests_add_to_its_pods_so_two_pods_that_would_overfill_a_node_go_apart(eco: Ecosystem) -> None:
    # A trainer of 40 CPUs with a log shipper of 20 as a native sidecar (restartPolicy Always, GA in 1.33)
    # takes 60 of a node's 96 (KEP-753, as kube-scheduler and the kubelet's admission count it). Counted as
    # an init container (the larger of 40 and 20) two would share a node, and the kubelet would refuse one.
    namespace = "k8s-sidecars"

    def trainer(name: str) -> str:
        return _pod_of(name, namespace) + """
  initContainers:
  - name: log-shipper
    image: registry.k8s.io/pause:3.10
    restartPolicy: Always
    resources:
      requests:
        cpu: "20"
  containers:
  - name: trainer
    image: registry.k8s.io/pause:3.10
    resources:
      requests:
        cpu: "40"
"""

    _two_go_apart(eco, namespace, trainer)


def test_pod_level_requests_are_what_a_pod_takes_so_two_that_would_overfill_a_node_go_apart(eco: Ecosystem) -> None:
    # Pod-level resources (KEP-2837, beta and on since 1.34): a pod-level limit of 60 CPUs (its request
    # defaults to it) is the pod's, though its container asks for 10.
    namespace = "k8s-pod-level"

    def pod(name: str) -> str:
        return _pod_of(name, namespace) + """
  resources:
    limits:
      cpu: "60"
  containers:
  - name: trainer
    image: registry.k8s.io/pause:3.10
    resources:
      requests:
        cpu: "10"
"""

    _two_go_apart(eco, namespace, pod, stored=lambda first: first["spec"]["resources"]["requests"] == {"cpu": "60"})


# --------------------------------------------------------------------------- disruption budgets


def test_a_victim_whose_disruption_budget_allows_no_disruption_is_still_preempted(eco: Ecosystem) -> None:
    # An inference service fills every node, its PodDisruptionBudget allowing no disruption; a pod of a
    # higher priority needs a node. As kube-scheduler's, toposched's preemption outranks the budget: the
    # API server refuses the eviction (429), and the victim is deleted instead.
    namespace = "k8s-budgets"
    classes = priority_classes_yaml(eco_k8s_serving=10, eco_k8s_training=1000)
    budget = f"""apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: inference
  namespace: {namespace}
spec:
  minAvailable: {len(NODES)}
  selector:
    matchLabels:
      app: inference
"""
    serving = [f"inference-{index}" for index in range(len(NODES))]
    low = "\n  priorityClassName: eco-k8s-serving\n  terminationGracePeriodSeconds: 0"
    eco.apply(stream(classes, namespace_yaml(namespace), budget,
                     *(pod_yaml(name, namespace, labels={"app": "inference"}, spec=low) for name in serving)))
    eco.wait_bound(serving, namespace)
    eco.wait_for(lambda: all(pod_scheduled(eco.find("pods", name, namespace)).get("status") == "True"
                             and (eco.find("pods", name, namespace) or {}).get("status", {}).get("phase") == "Running"
                             for name in serving), what="the inference pods running (healthy for their budget)")
    eco.apply(pod_yaml("trainer", namespace, spec="\n  priorityClassName: eco-k8s-training"))
    eco.wait_bound(["trainer"], namespace)
    assert sum(1 for name in serving if eco.find("pods", name, namespace) is None) == 1
    refused = [r for r in eco.call(lambda c: c.audit.since()) if r.path.endswith("/eviction") and r.status == 429]
    assert refused, "the budget refused the eviction"
    eco.delete_namespace_objects(namespace)


def test_preemption_takes_the_victims_whose_budget_allows_the_disruption(eco: Ecosystem) -> None:
    # Two inference services fill one block each; the budget of the second (started last: without budgets,
    # the cheaper victims, less work lost) allows no disruption, as the disruption controller's status says.
    # A training gang that must sit in one block preempts the first, as kube-scheduler picks the node whose
    # victims violate no budget.
    namespace = "k8s-budget-choice"
    classes = priority_classes_yaml(eco_k8s_choice_serving=10, eco_k8s_choice_training=1000)
    budget = f"""apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: serving-b
  namespace: {namespace}
spec:
  minAvailable: 4
  selector:
    matchLabels:
      app: serving-b
"""
    group = f"""apiVersion: scheduling.k8s.io/v1alpha2
kind: PodGroup
metadata:
  name: trainer
  namespace: {namespace}
spec:
  schedulingPolicy:
    gang:
      minCount: 4
  schedulingConstraints:
    topology:
    - key: network.topology.nvidia.com/block
"""
    low = "\n  priorityClassName: eco-k8s-choice-serving\n  terminationGracePeriodSeconds: 0"
    serving = {f"serving-{app}-{index}": (app, f"node-{index + (0 if app == 'a' else 4)}")
               for app in ("a", "b") for index in range(4)}
    eco.apply(stream(classes, namespace_yaml(namespace), budget,
                     *(pod_yaml(name, namespace, labels={"app": f"serving-{app}"},
                                spec=f"{low}\n  nodeSelector:\n    kubernetes.io/hostname: {node}")
                       for name, (app, node) in serving.items())))
    eco.wait_bound(list(serving), namespace)
    eco.wait_for(lambda: ((eco.find("poddisruptionbudgets.policy", "serving-b", namespace) or {}).get("status") or {})
                 .get("currentHealthy") == 4, what="the budget's status counting the four healthy pods")
    join = "\n  priorityClassName: eco-k8s-choice-training\n  schedulingGroup:\n    podGroupName: trainer"
    trainers = [f"trainer-{index}" for index in range(4)]
    eco.apply(stream(group, *(pod_yaml(name, namespace, spec=join) for name in trainers)))
    placed = eco.wait_bound(trainers, namespace)
    assert sorted(placed.values()) == [f"node-{index}" for index in range(4)]
    assert all(eco.find("pods", name, namespace) is not None for name, (app, _) in serving.items() if app == "b")
    eco.delete_namespace_objects(namespace)
