"""Placement benchmark: `python -m bench.placement [--runs N]`, prints p50 / p90 per case.

The cluster: 5,000 nodes of 8 GPUs in 4 layers (5 spines > 25 blocks each > 5 NVLink domains
each > 8 nodes), a seeded third of the nodes partly or fully busy with other work. Cases:
- one 3,000-pod gang (8 GPUs per pod), no topology spec (as tight as capacity allows),
- the same gang with PreferGather at SpineLayer,
- a 4-pod gang, MustGather at BlockLayer,
- a 4-pod gang with no spec,
- a 2-pod gang of 4-GPU pods (one node holds it: the node layer is searched first),
- a 50-pod gang with MustGather at BlockLayer (blocks hold 40 nodes: refused; the failure path),
- a 4,500-pod gang, more than the free GPUs (refused: capacity, with kube-scheduler-style counts),
- a Volcano job of 64 replicas x 8 pods (4 GPUs), each replica in one NVLink domain (hard tier 1),
  the job in one spine (hard tier 3); and the same job with 8-GPU pods, which cannot fit (refused),
- a lone 1-GPU pod.
Then required pod (anti-)affinity, on the same fabric with 2,000 pods of a service spread one per node
(podAntiAffinity over the host), 500 more services of 2 such pods, and 24 JobSet jobs of 32 pods placed
with JobSet's exclusive placement (podAffinity to their own job, podAntiAffinity to every other job,
over the block label):
- a 256-pod job with exclusive placement (a free block of its own),
- a 512-pod gang of 1-GPU pods excluding one another per host (one node each),
- a lone pod of that service (kept off its 2,000 nodes),
- a 3,000-pod gang of 1-GPU pods without terms (each pod's shape asks which of the 525 anti-affinity
  terms of running pods select it).
Then DoNotSchedule topology spread constraints, on the same fabric with 2,000 replicas of a service
spread over the 125 blocks (maxSkew 1, 16 per block):
- a lone replica more (any block; the counts are derived from the 2,000),
- a 512-pod gang of 1-GPU pods spread one per host (hostname, maxSkew 1, selecting its own pods).
Then local volumes made in advance (a WaitForFirstConsumer class without provisioner), one of 1 TiB
on each of the 5,000 nodes, pinned to it:
- a lone pod whose claim must get one, planned after a volume changed (as each pre-binding changes one),
- a 512-pod gang of 1-GPU pods, each with such a claim (one pod per node: one volume each).
Then CSI attach limits: a CSINode on each of the 5,000 nodes limiting EBS volumes to 25, a third of the nodes
running pods of another scheduler with 1, 4 or 25 EBS volumes each (those with 25 are at their limit):
- a lone pod with a gp3 claim not provisioned yet (planned after a pod changed, as in the loop),
- a 512-pod gang of 1-GPU pods, each with such a claim,
- a 3,000-pod gang without volumes on that cluster (what CSINodes cost a pod that has none).
Targets (issue 7): 3,000-pod gang < 250 ms p50; 4-pod gang < 6 ms p50, on 2 cores.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

import msgspec

from bench import targets
from bench.fabric import add_fabric
from events.builders import bound, pod, pod_group
from events.ingest import KIND_BY_NAME, upsert_event
from events.model import PodGroupUpserted, PodUpserted, VolcanoPodGroupUpserted
from events.objects import (
    VOLCANO_GROUP_ANNOTATION,
    Affinity,
    NetworkTopologySpec,
    OwnedMeta,
    PersistentVolumeClaimVolumeSource,
    SubGroupPolicy,
    TopologySpreadConstraint,
    VolcanoPodGroup,
    VolcanoPodGroupSpec,
    Volume,
)
from placement import GangPlan, plan_gang, plan_pod
from state.cluster import ClusterState


def build(seed: int = 7) -> ClusterState:
    rng = random.Random(seed)
    state = ClusterState()
    names = add_fabric(state)
    for index, name in enumerate(names):
        if rng.random() < 1 / 3:
            gpus = rng.choice((2, 4, 8))
            state.apply(PodUpserted(pod=bound(pod(f"busy-{index}", namespace="other", gpus=gpus, scheduler="x"),
                                              name)))
    cases: list[tuple[str, int, list[dict[str, object]] | None]] = [
        ("big", 3000, None),
        ("big-spine", 3000, [{"layer": "SpineLayer", "strategy": "PreferGather"}]),
        ("small", 4, [{"layer": "BlockLayer", "strategy": "MustGather"}]),
        ("small-free", 4, None),
        ("too-big-for-a-block", 50, [{"layer": "BlockLayer", "strategy": "MustGather"}]),
        ("too-big-for-the-cluster", 4500, None),
    ]
    for gang, size, gather in cases:
        state.apply(PodGroupUpserted(pod_group=pod_group(gang, min_member=size, gather=gather)))
        for i in range(size):
            state.apply(PodUpserted(pod=pod(f"{gang}-{i}", gang=gang, annotations={
                "gang.scheduling.koordinator.sh/network-topology-index": str(i)})))
    # A Volcano job: 64 replicas of 8 pods (4 GPUs each), each replica inside one NVLink domain (tier 1),
    # the whole job inside one spine (tier 3).
    policy = SubGroupPolicy(name="replica", sub_group_size=8, match_label_keys=["replica"],
                            network_topology=NetworkTopologySpec(mode="hard", highest_tier_allowed=1))
    state.apply(VolcanoPodGroupUpserted(pod_group=VolcanoPodGroup(
        metadata=OwnedMeta(name="sharded", namespace="default", uid="uid-sharded"),
        spec=VolcanoPodGroupSpec(min_member=512, sub_group_policy=[policy],
                                 network_topology=NetworkTopologySpec(mode="hard", highest_tier_allowed=3)))))
    for r in range(64):
        for i in range(8):
            state.apply(PodUpserted(pod=pod(f"sharded-{r}-{i}", gpus=4, labels={"replica": f"r{r}"},
                                            annotations={VOLCANO_GROUP_ANNOTATION: "sharded"})))
    # The same shape of job with 8-GPU pods needs 64 fully free NVLink domains in one spine: refused.
    state.apply(VolcanoPodGroupUpserted(pod_group=VolcanoPodGroup(
        metadata=OwnedMeta(name="sharded-full-nodes", namespace="default", uid="uid-sharded-full-nodes"),
        spec=VolcanoPodGroupSpec(min_member=512, sub_group_policy=[policy],
                                 network_topology=NetworkTopologySpec(mode="hard", highest_tier_allowed=3)))))
    for r in range(64):
        for i in range(8):
            state.apply(PodUpserted(pod=pod(f"sharded-full-nodes-{r}-{i}", gpus=8, labels={"replica": f"r{r}"},
                                            annotations={VOLCANO_GROUP_ANNOTATION: "sharded-full-nodes"})))
    state.apply(PodGroupUpserted(pod_group=pod_group("pair", min_member=2)))
    for i in range(2):
        state.apply(PodUpserted(pod=pod(f"pair-{i}", gang="pair", gpus=4)))
    state.apply(PodUpserted(pod=pod("lone", gpus=1)))
    return state


JOB_KEY = "jobset.sigs.k8s.io/job-key"
BLOCK_KEY = "network.topology.nvidia.com/block"
HOST_KEY = "kubernetes.io/hostname"


def _with_affinity(name: str, gpus: int, labels: dict[str, str], *, gang: str | None = None,
                   together: list[dict[str, Any]] | None = None,
                   apart: list[dict[str, Any]] | None = None) -> Any:
    raw: dict[str, Any] = {}
    if together:
        raw["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": together}
    if apart:
        raw["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": apart}
    obj = pod(name, gpus=gpus, gang=gang, labels=labels)
    return msgspec.structs.replace(obj, spec=msgspec.structs.replace(obj.spec, affinity=msgspec.convert(raw, Affinity)))


def _exclusive(name: str, gpus: int, job: str, gang: str | None = None) -> Any:
    """A pod of `job` with JobSet's exclusive placement over the block label, as its webhook writes it."""
    together = [{"labelSelector": {"matchExpressions": [{"key": JOB_KEY, "operator": "In", "values": [job]}]},
                 "topologyKey": BLOCK_KEY}]
    apart = [{"labelSelector": {"matchExpressions": [{"key": JOB_KEY, "operator": "Exists"},
                                                     {"key": JOB_KEY, "operator": "NotIn", "values": [job]}]},
              "topologyKey": BLOCK_KEY}]
    return _with_affinity(name, gpus, {JOB_KEY: job}, gang=gang, together=together, apart=apart)


def build_affinity() -> ClusterState:
    """The fabric with pods carrying required pod (anti-)affinity (the module docstring)."""
    state = ClusterState()
    names = add_fabric(state)
    spread = [{"labelSelector": {"matchLabels": {"app": "serve"}}, "topologyKey": HOST_KEY}]
    for index, name in enumerate(names[2000:4000]):
        state.apply(PodUpserted(pod=bound(_with_affinity(f"serve-{index}", 1, {"app": "serve"}, apart=spread), name)))
    for index, name in enumerate(names[4000:]):  # 500 more services of 2 replicas, each spread per host
        app = f"svc-{index // 2}"
        apart_of_app = [{"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": HOST_KEY}]
        state.apply(PodUpserted(pod=bound(_with_affinity(f"{app}-{index % 2}", 0, {"app": app},
                                                         apart=apart_of_app), name)))
    per_block = len(names) // 125
    for job in range(24):  # 32 pods of 8 GPUs, in the first 32 nodes of block `job`
        key = f"placed-{job}"
        for i in range(32):
            state.apply(PodUpserted(pod=bound(_exclusive(f"{key}-{i}", 8, key), names[job * per_block + i])))
    state.apply(PodGroupUpserted(pod_group=pod_group("exclusive", min_member=256)))
    for i in range(256):
        state.apply(PodUpserted(pod=_exclusive(f"exclusive-{i}", 1, "exclusive", gang="exclusive")))
    state.apply(PodGroupUpserted(pod_group=pod_group("one-per-host", min_member=512)))
    apart = [{"labelSelector": {"matchLabels": {"job": "one-per-host"}}, "topologyKey": HOST_KEY}]
    for i in range(512):
        state.apply(PodUpserted(pod=_with_affinity(f"one-per-host-{i}", 1, {"job": "one-per-host"},
                                                   gang="one-per-host", apart=apart)))
    state.apply(PodUpserted(pod=_with_affinity("serve-new", 1, {"app": "serve"}, apart=spread)))
    state.apply(PodGroupUpserted(pod_group=pod_group("plain", min_member=3000)))
    for i in range(3000):
        state.apply(PodUpserted(pod=pod(f"plain-{i}", gpus=1, gang="plain", labels={"job": "plain"})))
    return state


def _spreading(name: str, gpus: int, labels: dict[str, str], key: str, *, gang: str | None = None) -> Any:
    """A pod with a DoNotSchedule spread (maxSkew 1) over `key` among the pods of its labels."""
    constraints = [{"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": labels}}]
    obj = pod(name, gpus=gpus, gang=gang, labels=labels)
    parsed = msgspec.convert(constraints, list[TopologySpreadConstraint])
    return msgspec.structs.replace(obj, spec=msgspec.structs.replace(obj.spec, topology_spread_constraints=parsed))


def build_spread() -> ClusterState:
    """The fabric with 2,000 replicas of a service spread over the blocks (the module docstring)."""
    state = ClusterState()
    names = add_fabric(state)
    per_block = len(names) // 125
    for index in range(2000):  # 16 per block, on its first nodes
        block, slot = index % 125, index // 125
        state.apply(PodUpserted(pod=bound(_spreading(f"web-{index}", 1, {"app": "web"}, BLOCK_KEY),
                                          names[block * per_block + slot])))
    state.apply(PodUpserted(pod=_spreading("web-new", 1, {"app": "web"}, BLOCK_KEY)))
    state.apply(PodGroupUpserted(pod_group=pod_group("spread-per-host", min_member=512)))
    for i in range(512):
        state.apply(PodUpserted(pod=_spreading(f"spread-per-host-{i}", 1, {"job": "spread-per-host"}, HOST_KEY,
                                               gang="spread-per-host")))
    return state


LOCAL_CLASS = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "local"},
               "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "WaitForFirstConsumer"}


def _local_volume(name: str, node_name: str, claim: str = "") -> dict[str, Any]:
    document: dict[str, Any] = {
        "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
        "spec": {"storageClassName": "local", "capacity": {"storage": "1Ti"}, "accessModes": ["ReadWriteOnce"],
                 "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                     {"key": HOST_KEY, "operator": "In", "values": [node_name]}]}]}}},
        "status": {"phase": "Bound" if claim else "Available"}}
    if claim:
        document["spec"]["claimRef"] = {"namespace": "default", "name": claim}
    return document


def _with_local_claim(obj: Any, claim: str) -> Any:
    volume = Volume(name="data", persistent_volume_claim=PersistentVolumeClaimVolumeSource(claim_name=claim))
    return msgspec.structs.replace(obj, spec=msgspec.structs.replace(obj.spec, volumes=[volume]))


def build_local() -> tuple[ClusterState, list[str]]:
    """The fabric with a local volume made in advance on every node (the module docstring); its node names."""
    state = ClusterState()
    names = add_fabric(state)
    state.apply(upsert_event(KIND_BY_NAME["StorageClass"], LOCAL_CLASS))
    for name in names:
        state.apply(upsert_event(KIND_BY_NAME["PersistentVolume"], _local_volume(f"local-{name}", name)))
    claims = ["data-lone", *(f"data-local-gang-{i}" for i in range(512))]
    for claim in claims:
        state.apply(upsert_event(KIND_BY_NAME["PersistentVolumeClaim"], {
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": claim, "namespace": "default", "uid": f"uid-{claim}"},
            "spec": {"storageClassName": "local", "accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": "500Gi"}}}}))
    state.apply(PodUpserted(pod=_with_local_claim(pod("local-lone", gpus=1), "data-lone")))
    state.apply(PodGroupUpserted(pod_group=pod_group("local-gang", min_member=512)))
    for i in range(512):
        state.apply(PodUpserted(pod=_with_local_claim(pod(f"local-gang-{i}", gpus=1, gang="local-gang"),
                                                      f"data-local-gang-{i}")))
    return state, names


EBS = "ebs.csi.aws.com"
GP3_CLASS = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "gp3"},
             "provisioner": EBS, "volumeBindingMode": "WaitForFirstConsumer"}


def _ebs_claim(state: ClusterState, name: str, *, volume: str = "") -> None:
    """A gp3 claim: bound to the EBS volume `volume` (made here), or not yet provisioned."""
    meta: dict[str, Any] = {"name": name, "namespace": "default", "uid": f"uid-{name}"}
    spec: dict[str, Any] = {"storageClassName": "gp3", "accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": "100Gi"}}}
    if volume:
        state.apply(upsert_event(KIND_BY_NAME["PersistentVolume"], {
            "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": volume},
            "spec": {"storageClassName": "gp3", "capacity": {"storage": "100Gi"}, "accessModes": ["ReadWriteOnce"],
                     "claimRef": {"namespace": "default", "name": name},
                     "csi": {"driver": EBS, "volumeHandle": f"vol-{volume}"}}, "status": {"phase": "Bound"}}))
        meta["annotations"] = {"pv.kubernetes.io/bind-completed": "yes"}
        spec["volumeName"] = volume
    state.apply(upsert_event(KIND_BY_NAME["PersistentVolumeClaim"], {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": spec}))


def build_attach(seed: int = 11) -> ClusterState:
    """The fabric with a CSINode on every node limiting EBS volumes to 25, a third of the nodes running pods of
    another scheduler with 1 to 25 EBS volumes each (the module docstring)."""
    rng = random.Random(seed)
    state = ClusterState()
    names = add_fabric(state)
    state.apply(upsert_event(KIND_BY_NAME["StorageClass"], GP3_CLASS))
    for index, name in enumerate(names):
        state.apply(upsert_event(KIND_BY_NAME["CSINode"], {
            "apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": name},
            "spec": {"drivers": [{"name": EBS, "nodeID": f"i-{index}", "allocatable": {"count": 25}},
                                 {"name": "efs.csi.aws.com", "nodeID": f"i-{index}"}]}}))
        if rng.random() < 1 / 3:
            claims = [f"busy-{index}-{number}" for number in range(rng.choice((1, 4, 25)))]
            for claim in claims:
                _ebs_claim(state, claim, volume=f"pv-{claim}")
            busy = pod(f"busy-{index}", namespace="default", gpus=rng.choice((2, 4, 8)), scheduler="x")
            volumes = [Volume(name=f"v{number}", persistent_volume_claim=PersistentVolumeClaimVolumeSource(
                claim_name=claim)) for number, claim in enumerate(claims)]
            state.apply(PodUpserted(pod=bound(msgspec.structs.replace(
                busy, spec=msgspec.structs.replace(busy.spec, volumes=volumes)), name)))
    _ebs_claim(state, "data-ebs-lone")
    state.apply(PodUpserted(pod=_with_local_claim(pod("ebs-lone", gpus=1), "data-ebs-lone")))
    state.apply(PodGroupUpserted(pod_group=pod_group("ebs-gang", min_member=512)))
    for i in range(512):
        _ebs_claim(state, f"data-ebs-gang-{i}")
        state.apply(PodUpserted(pod=_with_local_claim(pod(f"ebs-gang-{i}", gpus=1, gang="ebs-gang"),
                                                      f"data-ebs-gang-{i}")))
    state.apply(PodGroupUpserted(pod_group=pod_group("no-volumes", min_member=3000)))
    for i in range(3000):
        state.apply(PodUpserted(pod=pod(f"no-volumes-{i}", gang="no-volumes")))
    return state


def measure(label: str, runs: int, call: Callable[[], object]) -> float:
    result = call()
    times: list[float] = []
    for _ in range(runs):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    p50 = statistics.median(times)
    p90 = times[min(len(times) - 1, int(len(times) * 0.9))]
    what = (f"{len(result.assignments)} pods -> {result.level} {result.domain or '(cluster)'}"
            if isinstance(result, GangPlan) else f"unschedulable: {getattr(result, 'constraint', '?')}")
    print(f"{label:<44} p50 {p50:8.2f} ms   p90 {p90:8.2f} ms   ({what})")
    return p50


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    started = time.perf_counter()
    state = build()
    print(f"cluster: {len(state.nodes)} nodes, {len(state.topology.levels)} levels, "
          f"{len(state.pods)} pods, built in {time.perf_counter() - started:.1f} s")
    big = measure("3,000-pod gang, no spec", max(args.runs // 3, 5), lambda: plan_gang(state, "default/big"))
    measure("3,000-pod gang, PreferGather SpineLayer", max(args.runs // 3, 5),
            lambda: plan_gang(state, "default/big-spine"))
    small = measure("4-pod gang, MustGather BlockLayer", args.runs * 5, lambda: plan_gang(state, "default/small"))
    measure("4-pod gang, no spec", args.runs * 5, lambda: plan_gang(state, "default/small-free"))
    measure("2-pod gang, 4 GPUs each (one node)", args.runs * 5, lambda: plan_gang(state, "default/pair"))
    measure("50-pod gang, MustGather BlockLayer (refused)", args.runs,
            lambda: plan_gang(state, "default/too-big-for-a-block"))
    measure("4,500-pod gang (refused: capacity)", max(args.runs // 3, 5),
            lambda: plan_gang(state, "default/too-big-for-the-cluster"))
    measure("512-pod Volcano job, 64 sub-groups in tier 1", max(args.runs // 3, 5),
            lambda: plan_gang(state, "default/sharded"))
    measure("512-pod Volcano job, 8-GPU pods (refused)", 5,
            lambda: plan_gang(state, "default/sharded-full-nodes"))
    measure("lone 1-GPU pod", args.runs, lambda: plan_pod(state, "default/lone"))
    started = time.perf_counter()
    state = build_affinity()
    print(f"cluster with pod (anti-)affinity: {len(state.pods)} pods, built in {time.perf_counter() - started:.1f} s")
    measure("256-pod job, JobSet exclusive placement", max(args.runs // 3, 5),
            lambda: plan_gang(state, "default/exclusive"))
    measure("512-pod gang, one pod per host", max(args.runs // 3, 5), lambda: plan_gang(state, "default/one-per-host"))
    measure("lone pod kept off 2,000 nodes", args.runs, lambda: plan_pod(state, "default/serve-new"))
    measure("3,000-pod gang without terms, 501 anti groups", max(args.runs // 3, 5),
            lambda: plan_gang(state, "default/plain"))
    started = time.perf_counter()
    state = build_spread()
    print(f"cluster with topology spread: {len(state.pods)} pods, built in {time.perf_counter() - started:.1f} s")
    # Each run after a pod changed, as in the loop (a placement changes the counts): the rules are derived
    # afresh; the counts follow the changed pod, and the eligible nodes stay known while no node changes.
    first_node = next(iter(state.nodes))
    churn = [PodUpserted(pod=bound(pod("churn", gpus=0, labels={"turn": str(turn)}, scheduler="other"), first_node))
             for turn in range(2)]
    turns = iter(range(1 << 30))

    def spread_lone() -> object:
        state.apply(churn[next(turns) % 2])
        return plan_pod(state, "default/web-new")

    measure("lone pod spread over blocks, 2,000 replicas", args.runs, spread_lone)
    measure("512-pod gang spread one per host", max(args.runs // 3, 5),
            lambda: plan_gang(state, "default/spread-per-host"))
    started = time.perf_counter()
    state, names = build_local()
    print(f"cluster with local volumes: {len(state.volumes.volumes)} volumes, built in "
          f"{time.perf_counter() - started:.1f} s")
    # Each run after a volume changed, as in the loop: each pre-binding names a claim on one volume.
    taken = [upsert_event(KIND_BY_NAME["PersistentVolume"], _local_volume(f"local-{names[0]}", names[0], claim))
             for claim in ("elsewhere-a", "elsewhere-b")]

    def local_lone() -> object:
        state.apply(taken[next(turns) % 2])
        return plan_pod(state, "default/local-lone")

    measure("lone pod, a local volume of 5,000", args.runs, local_lone)
    measure("512-pod gang, a local volume each", max(args.runs // 3, 5), lambda: plan_gang(state, "default/local-gang"))
    started = time.perf_counter()
    state = build_attach()
    print(f"cluster with CSI attach limits: {len(state.volumes.csi_nodes)} CSINodes, {len(state.volumes.volumes)} "
          f"EBS volumes, built in {time.perf_counter() - started:.1f} s")
    # Each run after a pod changed, as in the loop: the nodes' attach rooms are counted afresh where read.
    churn_attach = [PodUpserted(pod=bound(pod("churn", gpus=0, labels={"turn": str(turn)}, scheduler="other"),
                                          names[0])) for turn in range(2)]

    def attach_lone() -> object:
        state.apply(churn_attach[next(turns) % 2])
        return plan_pod(state, "default/ebs-lone")

    measure("lone pod, an EBS volume, 25 per node", args.runs, attach_lone)
    measure("512-pod gang, an EBS volume each", max(args.runs // 3, 5), lambda: plan_gang(state, "default/ebs-gang"))
    measure("3,000-pod gang without volumes, CSINodes", max(args.runs // 3, 5),
            lambda: plan_gang(state, "default/no-volumes"))
    targets.line(f"plan a 3,000-pod gang, {len(state.nodes):,} nodes", f"{big:.1f} ms p50", "< 250 ms", big < 250)
    targets.line("plan a 4-pod MustGather gang", f"{small:.2f} ms p50", "< 6 ms", small < 6)


if __name__ == "__main__":
    main()
