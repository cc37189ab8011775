"""Placement honours where a pod's claims let it go, on any cluster, for any gang.

Random zonal clusters (some nodes without zone labels, which VolumeZone lets through), gangs and lone
pods whose claims are bound to volumes in random zones or pinned to random nodes, of WaitForFirstConsumer
classes limited to random zones, or not usable (missing, unbound Immediate). The expected reach of each
claim is computed here from what the test made, not by state/volumes.py.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.offline.simulator import Simulation
from events.builders import group_event, pod_group
from events.ingest import KIND_BY_NAME, upsert_event
from events.model import Event, NodeUpserted, PodAssumed, PodDeleted, VolumeDeleted, VolumeUpserted
from events.objects import ClaimReference, PersistentVolumeClaim
from events.scenario import load_scenario
from placement import GangPlan, Unschedulable, plan_gang, plan_pod
from placement.plan import VOLUME
from placement.volume_binding import choose_volumes
from state.cluster import ClusterState
from state.volumes import static_match

ZONE = "topology.kubernetes.io/zone"
ZONES = ["z1", "z2", "z3"]


@dataclass
class Reach:
    """Where one claim lets a pod go: nodes in `nodes` (None: any), zones in `zones` (None: any), or nowhere."""

    nodes: frozenset[str] | None = None
    zones: frozenset[str] | None = None
    blocked: bool = False
    volume_zone: bool = False  # VolumeZone: a node without zone labels is let through

    def admits(self, name: str, zone: str | None) -> bool:
        if self.blocked or (self.nodes is not None and name not in self.nodes):
            return False
        if self.zones is None:
            return True
        if zone is None:
            return self.volume_zone
        return zone in self.zones


@dataclass
class Case:
    events: list[Event]
    zone_of: dict[str, str | None]
    reach: dict[str, list[Reach]] = field(default_factory=dict)  # pod key -> its claims' reach
    gang: str = ""


def _obj(kind: str, document: dict[str, Any]) -> Event:
    return upsert_event(KIND_BY_NAME[kind], document)


@st.composite
def cases(draw: st.DrawFn) -> Case:
    events: list[Event] = [_obj("StorageClass", {
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "immediate"},
        "provisioner": "ebs.csi.aws.com"})]
    zone_of: dict[str, str | None] = {}
    for index in range(draw(st.integers(2, 8))):
        name = f"n{index}"
        zone = draw(st.sampled_from([*ZONES, None]))
        zone_of[name] = zone
        labels = {"kubernetes.io/hostname": name, "network.topology.nvidia.com/block": f"b{index % 2}"}
        if zone is not None:
            labels[ZONE] = zone
        events.append(_obj("Node", {"apiVersion": "v1", "kind": "Node",
                                    "metadata": {"name": name, "uid": f"uid-{name}", "labels": labels},
                                    "status": {"allocatable": {"cpu": "8", "memory": "64Gi", "pods": "110",
                                                               "nvidia.com/gpu": "8"}}}))
    case = Case(events, zone_of)
    gang = draw(st.booleans())
    size = draw(st.integers(1, 4))
    if gang:
        case.gang = "default/job"
        events.append(group_event(pod_group("job", min_member=size)))
    gpus = draw(st.sampled_from([1, 4, 8]))
    for index in range(size):
        pod_name = f"p{index}"
        volumes: list[dict[str, Any]] = []
        reaches: list[Reach] = []
        for number in range(draw(st.integers(0, 2))):
            claim = f"{pod_name}-c{number}"
            kind = draw(st.sampled_from(["zonal", "local", "wffc", "missing", "unbound"]))
            claim_doc: dict[str, Any] = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                         "metadata": {"name": claim, "namespace": "default", "uid": f"uid-{claim}"},
                                         "spec": {"storageClassName": "immediate"}}
            if kind in ("zonal", "local"):
                volume: dict[str, Any] = {"apiVersion": "v1", "kind": "PersistentVolume",
                                          "metadata": {"name": f"pv-{claim}"}, "spec": {}}
                if kind == "zonal":
                    zones = draw(st.lists(st.sampled_from(ZONES), min_size=1, max_size=2, unique=True))
                    volume["metadata"]["labels"] = {ZONE: "__".join(zones)}
                    reaches.append(Reach(zones=frozenset(zones), volume_zone=True))
                else:
                    pinned = draw(st.lists(st.sampled_from(sorted(zone_of)), min_size=1, max_size=2, unique=True))
                    volume["spec"]["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                        {"key": "kubernetes.io/hostname", "operator": "In", "values": pinned}]}]}}
                    reaches.append(Reach(nodes=frozenset(pinned)))
                events.append(_obj("PersistentVolume", volume))
                claim_doc["metadata"]["annotations"] = {"pv.kubernetes.io/bind-completed": "yes"}
                claim_doc["spec"]["volumeName"] = f"pv-{claim}"
                events.append(_obj("PersistentVolumeClaim", claim_doc))
            elif kind == "wffc":
                zones = draw(st.lists(st.sampled_from(ZONES), min_size=1, max_size=2, unique=True))
                events.append(_obj("StorageClass", {
                    "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": f"sc-{claim}"},
                    "provisioner": "ebs.csi.aws.com", "volumeBindingMode": "WaitForFirstConsumer",
                    "allowedTopologies": [{"matchLabelExpressions": [{"key": ZONE, "values": zones}]}]}))
                claim_doc["spec"]["storageClassName"] = f"sc-{claim}"
                events.append(_obj("PersistentVolumeClaim", claim_doc))
                reaches.append(Reach(zones=frozenset(zones)))  # allowedTopologies: a node needs the label
            elif kind == "unbound":
                events.append(_obj("PersistentVolumeClaim", claim_doc))
                reaches.append(Reach(blocked=True))
            else:
                reaches.append(Reach(blocked=True))
            volumes.append({"name": f"v{number}", "persistentVolumeClaim": {"claimName": claim}})
        labels = {"pod-group.scheduling.sigs.k8s.io": "job"} if gang else {}
        events.append(_obj("Pod", {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": pod_name, "namespace": "default", "uid": f"uid-{pod_name}", "labels": labels},
            "spec": {"schedulerName": "toposched", "volumes": volumes, "containers": [
                {"name": "main", "resources": {"requests": {"nvidia.com/gpu": str(gpus)}}}]}}))
        case.reach[f"default/{pod_name}"] = reaches
    return case


def _plan(case: Case) -> tuple[ClusterState, list[GangPlan | Unschedulable]]:
    state = ClusterState()
    state.apply_all(case.events)
    if case.gang:
        return state, [plan_gang(state, case.gang)]
    return state, [plan_pod(state, key) for key in sorted(case.reach)]


@settings(max_examples=150, deadline=None)
@given(cases())
def test_every_pod_goes_only_where_each_of_its_claims_lets_it(case: Case) -> None:
    _, plans = _plan(case)
    for plan in plans:
        if isinstance(plan, GangPlan):
            for assignment in plan.assignments:
                node = assignment.node
                assert all(reach.admits(node, case.zone_of[node]) for reach in case.reach[assignment.pod]), (
                    assignment, case.reach[assignment.pod])


@settings(max_examples=150, deadline=None)
@given(cases())
def test_a_claim_that_is_not_usable_holds_its_pod_and_its_whole_gang(case: Case) -> None:
    _, plans = _plan(case)
    blocked = {key for key, reaches in case.reach.items() if any(reach.blocked for reach in reaches)}
    for plan in plans:
        if isinstance(plan, GangPlan):
            assert not {a.pod for a in plan.assignments} & blocked
            if case.gang:
                assert not blocked  # all or nothing: one held member holds the gang
    if case.gang and blocked:
        (plan,) = plans
        assert isinstance(plan, Unschedulable) and plan.constraint == VOLUME


@settings(max_examples=150, deadline=None)
@given(cases())
def test_a_lone_pod_whose_claims_some_empty_node_reaches_is_placed(case: Case) -> None:
    if case.gang:
        return
    _, plans = _plan(case)
    for key, plan in zip(sorted(case.reach), plans, strict=True):
        # every node is empty (8 GPUs free) and pods are planned one at a time on the same state
        reachable = [name for name, zone in case.zone_of.items()
                     if all(reach.admits(name, zone) for reach in case.reach[key])]
        assert isinstance(plan, GangPlan) == bool(reachable), (key, plan, reachable)


# ReadWriteOncePod: the index of a claim's users follows every pod event, through a snapshot too, and no two
# pods that could run at once ever hold one such claim.
CLAIMS = ["c0", "c1", "c2"]


def _pod_using(name: str, claims: list[str], node: str, phase: str, deleting: bool, uid: str) -> Event:
    meta: dict[str, Any] = {"name": name, "namespace": "default", "uid": uid}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-26T10:00:00Z"
    spec: dict[str, Any] = {"schedulerName": "toposched",
                            "volumes": [{"name": f"v{index}", "persistentVolumeClaim": {"claimName": claim}}
                                        for index, claim in enumerate(claims)],
                            "containers": [{"name": "main", "resources": {"requests": {"cpu": "1"}}}]}
    if node:
        spec["nodeName"] = node
    return _obj("Pod", {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec,
                        "status": {"phase": phase}})


pod_events = st.builds(
    _pod_using, st.sampled_from([f"p{i}" for i in range(5)]), st.lists(st.sampled_from(CLAIMS), max_size=2,
                                                                           unique=True),
    st.sampled_from(["", "", "n0"]), st.sampled_from(["Pending", "Running", "Succeeded"]), st.booleans(),
    st.sampled_from(["u1", "u1", "u2"]))
deletions = st.builds(lambda name: PodDeleted(key=f"default/{name}", uid=""),
                      st.sampled_from([f"p{i}" for i in range(5)]))


def _users(state: ClusterState) -> dict[str, set[str]]:
    """Who names each claim, computed from the pods held."""
    users: dict[str, set[str]] = {}
    for key, pod in state.pods.items():
        for volume in pod.obj.spec.volumes:
            if volume.persistent_volume_claim is not None:
                users.setdefault(f"default/{volume.persistent_volume_claim.claim_name}", set()).add(key)
    return users


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(pod_events, pod_events, deletions), max_size=30))
def test_the_users_of_each_claim_are_the_pods_that_name_it_after_any_history_and_a_restore(
        events: list[Event]) -> None:
    state = ClusterState()
    state.apply(_obj("Node", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n0"},
                              "status": {"allocatable": {"cpu": "8", "pods": "110"}}}))
    for claim in CLAIMS:
        state.apply(_obj("PersistentVolumeClaim", {
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": claim, "namespace": "default", "annotations": {
                "pv.kubernetes.io/bind-completed": "yes"}},
            "spec": {"accessModes": ["ReadWriteOncePod"], "volumeName": f"pv-{claim}"}}))
        state.apply(_obj("PersistentVolume", {"apiVersion": "v1", "kind": "PersistentVolume",
                                              "metadata": {"name": f"pv-{claim}"}}))
    for event in events:
        state.apply(event)
        assert state.volumes.users == _users(state)
    restored = ClusterState.restore(state.snapshot())
    assert restored.volumes.users == _users(state)
    # Of the pods that may run (placed, not finished) at most one per claim; a pending pod is told to wait
    # for each other that is.
    for claim in CLAIMS:
        key = f"default/{claim}"
        running = sorted(user for user in _users(state).get(key, ())
                         if state.pods[user].placed_node and not state.pods[user].terminal)
        for user in _users(state).get(key, ()):
            pod = state.pods[user]
            if user in state.pending and running:
                assert state.volume_needs(pod).blocked


# Volumes made in advance (a class without provisioner): whatever the volumes, their sizes and where they
# reach, no volume is given to two claims, each claim gets one that reaches its pod's node and is big
# enough, and a lone pod waits only when no volume left for it reaches any node.

STATIC_SIZES = [50, 100, 200]  # Gi


@dataclass
class StaticCase:
    events: list[Event]
    volumes: dict[str, tuple[int, frozenset[str] | None]]  # name -> (Gi, the nodes it reaches; None: any)
    requests: dict[str, int]  # pod key -> the Gi its one claim asks
    gang: bool


@st.composite
def static_cases(draw: st.DrawFn) -> StaticCase:
    events: list[Event] = [_obj("StorageClass", {
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "local"},
        "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "WaitForFirstConsumer"})]
    names = [f"n{index}" for index in range(draw(st.integers(1, 5)))]
    for name in names:
        events.append(_obj("Node", {"apiVersion": "v1", "kind": "Node",
                                    "metadata": {"name": name, "uid": f"uid-{name}",
                                                 "labels": {"kubernetes.io/hostname": name,
                                                            "network.topology.nvidia.com/block": "b0"}},
                                    "status": {"allocatable": {"cpu": "64", "memory": "64Gi", "pods": "110"}}}))
    volumes: dict[str, tuple[int, frozenset[str] | None]] = {}
    for index in range(draw(st.integers(0, 8))):
        size = draw(st.sampled_from(STATIC_SIZES))
        how = draw(st.sampled_from(["hostname", "name", "two", "any"]))
        spec: dict[str, Any] = {"storageClassName": "local", "capacity": {"storage": f"{size}Gi"},
                                "accessModes": ["ReadWriteOnce"]}
        reach: frozenset[str] | None = None
        if how != "any":
            pinned = draw(st.lists(st.sampled_from(names), min_size=1, max_size=1 if how != "two" else 2,
                                   unique=True))
            reach = frozenset(pinned)
            requirement = ({"matchFields": [{"key": "metadata.name", "operator": "In", "values": pinned}]}
                           if how == "name" else
                           {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In",
                                                  "values": pinned}]})
            spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [requirement]}}
        volumes[f"pv{index}"] = (size, reach)
        events.append(_obj("PersistentVolume", {"apiVersion": "v1", "kind": "PersistentVolume",
                                                "metadata": {"name": f"pv{index}"}, "spec": spec,
                                                "status": {"phase": "Available"}}))
    gang = draw(st.booleans())
    size = draw(st.integers(1, 4))
    if gang:
        events.append(group_event(pod_group("job", min_member=size)))
    requests: dict[str, int] = {}
    for index in range(size):
        asked = draw(st.sampled_from(STATIC_SIZES))
        claim = f"data-p{index}"
        events.append(_obj("PersistentVolumeClaim", {
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": claim, "namespace": "default", "uid": f"uid-{claim}"},
            "spec": {"storageClassName": "local", "accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": f"{asked}Gi"}}}}))
        labels = {"pod-group.scheduling.sigs.k8s.io": "job"} if gang else {}
        events.append(_obj("Pod", {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"p{index}", "namespace": "default", "uid": f"uid-p{index}", "labels": labels},
            "spec": {"schedulerName": "toposched",
                     "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}],
                     "containers": [{"name": "main", "resources": {"requests": {"cpu": "1"}}}]}}))
        requests[f"default/p{index}"] = asked
    return StaticCase(events, volumes, requests, gang)


def _pre_bind(state: ClusterState, chosen: dict[str, str]) -> None:
    """What the API and the PV controller leave once each chosen volume was pre-bound to its claim."""
    for claim_key, volume_name in chosen.items():
        volume = state.volumes.volumes[volume_name]
        namespace, _, name = claim_key.partition("/")
        state.apply(VolumeUpserted(volume=msgspec.structs.replace(volume, spec=msgspec.structs.replace(
            volume.spec, claim_ref=ClaimReference(namespace=namespace, name=name, uid=f"uid-{name}")))))


def _check_given(case: StaticCase, state: ClusterState, placed: dict[str, str], chosen: dict[str, str]) -> None:
    assert len(set(chosen.values())) == len(chosen), chosen  # no volume given twice
    for pod_key, node in placed.items():
        volume_name = chosen[f"default/data-{pod_key.partition('/')[2]}"]
        size, reach = case.volumes[volume_name]
        assert size >= case.requests[pod_key] and (reach is None or node in reach), (pod_key, node, volume_name)


@settings(max_examples=200, deadline=None)
@given(static_cases())
def test_claims_get_distinct_volumes_made_in_advance_that_reach_their_pods_and_are_big_enough(
        case: StaticCase) -> None:
    state = ClusterState()
    state.apply_all(case.events)
    placed: dict[str, str] = {}
    chosen: dict[str, str] = {}
    if case.gang:
        plan = plan_gang(state, "default/job")
        if isinstance(plan, GangPlan):
            pairs = [(a.pod, a.node) for a in plan.assignments]
            chosen, why = choose_volumes(state, pairs)
            assert not why, why  # a plan made is one whose claims all get a volume
            placed = dict(pairs)
        _check_given(case, state, placed, chosen)
        return
    for key in sorted(case.requests):
        plan = plan_pod(state, key)
        free = {name for name in case.volumes if name not in chosen.values()}
        could = any(case.volumes[name][0] >= case.requests[key] for name in free)
        if not isinstance(plan, GangPlan):
            assert not could, (key, plan, free)  # every node has room: only the volumes can refuse it
            continue
        (assignment,) = plan.assignments
        state.apply(PodAssumed(pod=key, uid=f"uid-{key.partition('/')[2]}", node=assignment.node))
        got, why = choose_volumes(state, [(key, assignment.node)], frozenset(chosen.values()))
        assert not why, why
        placed[key] = assignment.node
        chosen.update(got)
        if len(chosen) % 2:  # the watch shows the claimRef of some at once, of others not yet
            _pre_bind(state, got)
    _check_given(case, state, placed, chosen)


# The candidates of a claim are kept as volumes change (`static_match` follows the changes): after any
# sequence of volume upserts and deletions they equal those derived afresh from the volumes held.

@st.composite
def volume_changes(draw: st.DrawFn) -> list[Event]:
    events: list[Event] = []
    for _ in range(draw(st.integers(1, 25))):
        name = f"pv{draw(st.integers(0, 6))}"
        if draw(st.integers(0, 5)) == 0:
            events.append(VolumeDeleted(name=name))
            continue
        spec: dict[str, Any] = {"storageClassName": draw(st.sampled_from(["local", "local", "other"])),
                                "capacity": {"storage": f"{draw(st.sampled_from(STATIC_SIZES))}Gi"},
                                "accessModes": ["ReadWriteOnce"]}
        pin = draw(st.sampled_from(["n0", "n1", "n2", None]))
        if pin is not None:
            spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": [pin]}]}]}}
        if draw(st.integers(0, 3)) == 0:
            spec["claimRef"] = {"namespace": "default", "name": draw(st.sampled_from(["data", "other"]))}
        phase = draw(st.sampled_from(["Available", "Available", "Bound", "Released"]))
        events.append(_obj("PersistentVolume", {"apiVersion": "v1", "kind": "PersistentVolume",
                                                "metadata": {"name": name}, "spec": spec, "status": {"phase": phase}}))
    return events


@settings(max_examples=300, deadline=None)
@given(volume_changes(), st.lists(st.integers(0, 24), max_size=6))
def test_a_claims_candidates_followed_through_volume_changes_equal_those_derived_afresh(
        events: list[Event], looks: list[int]) -> None:
    claim = msgspec.convert({"metadata": {"name": "data", "namespace": "default", "uid": "uid-data"},
                             "spec": {"storageClassName": "local", "accessModes": ["ReadWriteOnce"],
                                      "resources": {"requests": {"storage": "100Gi"}}}}, PersistentVolumeClaim)
    kept = ClusterState()
    for index, event in enumerate(events):
        kept.apply(event)
        if index in looks or index == len(events) - 1:  # looked at now and then: the changes pile up between
            fresh = ClusterState()
            fresh.apply_all([VolumeUpserted(volume=volume) for volume in kept.volumes.volumes.values()])
            followed = static_match(kept.volumes, claim, "default/data")
            derived = static_match(fresh.volumes, claim, "default/data")
            assert [name for _, name, _ in followed.entries] == [name for _, name, _ in derived.entries]
            assert followed.reach.by_hostname == derived.reach.by_hostname
            assert followed.reach.by_name == derived.reach.by_name
            assert followed.reach.elsewhere == derived.reach.elsewhere
            for node in ("n0", "n1", "n2", "n3"):
                labels = {"kubernetes.io/hostname": node}
                assert ([v.metadata.name for v in followed.reaching(node, labels)]
                        == [v.metadata.name for v in derived.reaching(node, labels)])


# End to end through `toposched simulate` (the scheduler loop, its pre-binding and the world's PV controller):
# pods arriving over time, lone or in a gang, each with a claim of a class without provisioner, on random
# local, two-node and unpinned volumes. At the end every bound pod's claim is bound to a volume that reaches
# its node and is big enough, no volume serves two claims, and a lone pod still pending has no volume left
# that it could get.

@st.composite
def static_scenarios(draw: st.DrawFn) -> tuple[str, StaticCase]:
    case = draw(static_cases())
    docs: list[str] = []
    for event in case.events:
        if isinstance(event, NodeUpserted):
            name = event.node.metadata.name
            docs.append(f"apiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\n  labels:\n"
                        f"    kubernetes.io/hostname: {name}\n    network.topology.nvidia.com/block: b0\n"
                        "status:\n  allocatable: {cpu: \"64\", memory: 64Gi, pods: \"110\"}\n")
    docs.append("apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata:\n  name: local\n"
                "provisioner: kubernetes.io/no-provisioner\nvolumeBindingMode: WaitForFirstConsumer\n")
    for name, (size, reach) in sorted(case.volumes.items()):
        affinity = ""
        if reach is not None:
            values = ", ".join(sorted(reach))
            affinity = ("  nodeAffinity:\n    required:\n      nodeSelectorTerms:\n      - matchExpressions:\n"
                        f"        - {{key: kubernetes.io/hostname, operator: In, values: [{values}]}}\n")
        docs.append(f"apiVersion: v1\nkind: PersistentVolume\nmetadata:\n  name: {name}\nspec:\n"
                    f"  storageClassName: local\n  capacity: {{storage: {size}Gi}}\n  accessModes: [ReadWriteOnce]\n"
                    f"{affinity}status:\n  phase: Available\n")
    if case.gang:
        docs.append(f"apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata:\n  name: job\n"
                    f"  namespace: default\nspec:\n  minMember: {len(case.requests)}\n")
    for key, asked in sorted(case.requests.items()):
        name = key.partition("/")[2]
        docs.append(f"apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: data-{name}\n"
                    f"  namespace: default\nspec:\n  storageClassName: local\n  accessModes: [ReadWriteOnce]\n"
                    f"  resources: {{requests: {{storage: {asked}Gi}}}}\n")
        at = draw(st.sampled_from([0, 0, 10, 20]))
        labels = "  labels: {scheduling.x-k8s.io/pod-group: job}\n" if case.gang else ""
        docs.append(f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\n{labels}"
                    f"  annotations: {{sim.toposched.io/at: \"{at}\"}}\nspec:\n  schedulerName: toposched\n"
                    "  containers:\n  - name: main\n    resources: {requests: {cpu: \"1\"}}\n"
                    f"  volumes:\n  - name: data\n    persistentVolumeClaim: {{claimName: data-{name}}}\n")
    return "---\n" + "---\n".join(docs), case


@settings(max_examples=60, deadline=None)
@given(static_scenarios())
def test_simulated_claims_end_bound_to_distinct_volumes_that_reach_their_pods(
        scenario: tuple[str, StaticCase]) -> None:
    text, case = scenario
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "scenario.yaml"
        path.write_text(text)
        simulation = Simulation(load_scenario(path))
        anyio.run(simulation.run)
    state = simulation.state
    bound_to: dict[str, str] = {}
    for key in case.requests:
        pod = state.pods[key]
        claim = state.volumes.claims[f"default/data-{key.partition('/')[2]}"]
        node = pod.node_name
        if node:
            volume_name = claim.spec.volume_name
            assert volume_name, (key, node)  # no pod bound before its claim
            size, reach = case.volumes[volume_name]
            assert size >= case.requests[key] and (reach is None or node in reach), (key, node, volume_name)
            assert volume_name not in bound_to, (volume_name, bound_to[volume_name], key)
            bound_to[volume_name] = key
    if not case.gang:
        taken = {claim.spec.volume_name for claim in state.volumes.claims.values() if claim.spec.volume_name}
        for key, asked in case.requests.items():
            if not state.pods[key].node_name:  # every node has room: only the volumes can keep it out
                assert not any(size >= asked for name, (size, _) in case.volumes.items() if name not in taken), key
