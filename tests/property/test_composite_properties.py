"""Properties of a Kubernetes 1.37 CompositePodGroup hierarchy's plans on any cluster: random spine > block >
NVLink fabrics with random work running, and random hierarchies (a root over PodGroups and middle
CompositePodGroups, each with or without a topology key, random minGroupCount and minCount).

Whatever placement returns, a plan never overfills a node, places only the hierarchy's pending pods, keeps
every group's pods (placed and running) inside one domain of its key's layer, and satisfies the root (each
composite its minGroupCount of children, each PodGroup its minCount); and the hierarchy read does not depend
on the order its objects come in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from events.builders import TOPOGRAPH, bound, node, node_event, pod, pod_event
from events.ingest import kind_of, upsert_event
from events.model import Event
from placement import GangPlan, plan_gang
from state.cluster import ClusterState
from state.resources import MILLI

KEYS = {"spine": TOPOGRAPH + "spine", "block": TOPOGRAPH + "block", "nvlink": TOPOGRAPH + "accelerator"}
DEPTH = {"spine": 1, "block": 2, "nvlink": 3}  # the layer's level in the fabric's tree


@dataclass
class Group:
    name: str
    key: str  # "" for none, else one of KEYS
    minimum: int  # a composite's minGroupCount, a PodGroup's minCount
    children: list[Group]
    pods: int = 0  # a PodGroup's pods


def _domain(node_name: str, key: str) -> str:
    """n-s0b1a0-1 -> its spine s0, block s0b1 or NVLink domain s0b1a0."""
    part = node_name.split("-")[1]
    return {"spine": part[:2], "block": part[:4], "nvlink": part}[key]


@st.composite
def hierarchies(draw: st.DrawFn) -> Group:
    counter = iter(range(100))

    def leaf() -> Group:
        minimum = draw(st.integers(1, 3))
        return Group(f"pg-{next(counter)}", draw(st.sampled_from(["", "block", "nvlink"])), minimum, [],
                     pods=minimum + draw(st.integers(0, 1)))

    def composite(level: int) -> Group:
        count = draw(st.integers(1, 3 if level == 0 else 2))
        children = [composite(level + 1) if level == 0 and draw(st.booleans()) else leaf() for _ in range(count)]
        keys = ["", "spine", "block"] if level == 0 else ["", "block"]
        return Group(f"cpg-{next(counter)}", draw(st.sampled_from(keys)), draw(st.integers(1, count)), children)

    return composite(0)


def _manifests(group: Group, parent: str = "") -> list[dict[str, Any]]:
    spec: dict[str, Any] = {"workloadRef": {"workloadName": "job", "templateName": group.name}}
    if parent:
        spec["parentCompositePodGroupName"] = parent
    if group.key:
        spec["schedulingConstraints"] = {"topology": [{"key": KEYS[group.key]}]}
    meta = {"name": group.name, "namespace": "default", "uid": f"u-{group.name}"}
    if not group.children:
        spec["schedulingPolicy"] = {"gang": {"minCount": group.minimum}}
        out: list[dict[str, Any]] = [{"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                                      "metadata": meta, "spec": spec}]
        for i in range(group.pods):
            out.append({"apiVersion": "v1", "kind": "Pod",
                        "metadata": {"name": f"{group.name}-{i}", "namespace": "default", "uid": f"u-{group.name}-{i}"},
                        "spec": {"schedulerName": "toposched", "schedulingGroup": {"podGroupName": group.name},
                                 "containers": [{"name": "main", "resources": {"requests": {"nvidia.com/gpu": "4"}}}]}})
        return out
    spec["schedulingPolicy"] = {"gang": {"minGroupCount": group.minimum}}
    out = [{"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "CompositePodGroup", "metadata": meta, "spec": spec}]
    for child in group.children:
        out += _manifests(child, group.name)
    return out


def _events(manifests: list[dict[str, Any]]) -> list[Event]:
    events = []
    for manifest in manifests:
        info = kind_of(manifest["apiVersion"], manifest["kind"])
        assert info is not None
        events.append(upsert_event(info, manifest))
    return events


@st.composite
def clusters(draw: st.DrawFn) -> tuple[ClusterState, dict[str, int]]:
    """A fabric of 8-GPU nodes, some of them partly or wholly busy; and each node's free GPUs."""
    state = ClusterState()
    free: dict[str, int] = {}
    for s in range(draw(st.integers(1, 2))):
        for b in range(draw(st.integers(1, 2))):
            for a in range(2):
                for i in range(draw(st.integers(1, 3))):
                    name = f"n-s{s}b{b}a{a}-{i}"
                    state.apply(node_event(node(name, gpus=8, spine=f"s{s}", block=f"s{s}b{b}",
                                                accelerator=f"s{s}b{b}a{a}")))
                    busy = draw(st.sampled_from([0, 0, 4, 8]))
                    if busy:
                        state.apply(pod_event(bound(pod(f"busy-{name}", namespace="other", gpus=busy,
                                                        scheduler="someone-else"), name)))
                    free[name] = 8 - busy
    return state, free


def _leaves(group: Group) -> list[Group]:
    return [group] if not group.children else [leaf for child in group.children for leaf in _leaves(child)]


def _ready(group: Group, placed: dict[str, str]) -> bool:
    if not group.children:
        return sum(1 for key in placed if key.startswith(f"default/{group.name}-")) >= group.minimum
    return sum(1 for child in group.children if _ready(child, placed)) >= group.minimum


def _kept_together(group: Group, placed: dict[str, str]) -> bool:
    nodes = [node_name for leaf in _leaves(group) for key, node_name in placed.items()
             if key.startswith(f"default/{leaf.name}-")]
    if group.key and len({_domain(node_name, group.key) for node_name in nodes}) > 1:
        return False
    return all(_kept_together(child, placed) for child in group.children)


@settings(max_examples=150, deadline=None)
@given(clusters(), hierarchies())
def test_a_hierarchys_plan_fits_keeps_each_group_in_one_domain_and_satisfies_the_root(
        cluster: tuple[ClusterState, dict[str, int]], root: Group) -> None:
    state, free = cluster
    for event in _events(_manifests(root)):
        state.apply(event)
    first = _leaves(root)[0]
    result = plan_gang(state, f"default/{first.name}")
    if not isinstance(result, GangPlan):
        return
    placed = {assignment.pod: assignment.node for assignment in result.assignments}
    assert set(placed) <= state.pending
    assert all(state.pods[key].gang.startswith("default/pg-") for key in placed)
    used: dict[str, int] = {}
    for key, node_name in placed.items():
        used[node_name] = used.get(node_name, 0) + state.pods[key].requests["nvidia.com/gpu"] // MILLI
    assert all(used[name] <= free[name] for name in used), (used, free)
    assert _kept_together(root, placed)
    assert _ready(root, placed)


@settings(max_examples=100, deadline=None)
@given(hierarchies(), st.randoms(use_true_random=False))
def test_the_hierarchy_read_does_not_depend_on_the_order_its_objects_come_in(root: Group, shuffler: Any) -> None:
    events = _events(_manifests(root))
    orders = [events, list(reversed(events)), shuffler.sample(events, len(events))]
    states = []
    for order in orders:
        state = ClusterState()
        for event in order:
            state.apply(event)
        states.append({key: gang.spec for key, gang in sorted(state.gangs.items())})
    assert states[0] == states[1] == states[2]
    assert all(spec is not None and spec.composite is not None and not spec.composite.invalid
               for spec in states[0].values())
