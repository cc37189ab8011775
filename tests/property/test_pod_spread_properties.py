"""Whatever pods run, whatever DoNotSchedule spread constraints the pods being placed carry, a plan never
breaks one as kube-scheduler's PodTopologySpread filter reads it (computed here from scratch, pod by
pod, with none of placement's indexes): placing the plan's pods one by one in some order, each passes
the filter; and a lone pod is refused only when no node with room for it passes."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from events.builders import bound, group_event, node, node_event, pod, pod_event, pod_group
from events.model import PodAssumed, PodDeleted
from events.objects import Pod, TopologySpreadConstraint
from placement import GangPlan, plan_gang, plan_pod
from state.cluster import ClusterState
from tests.property.test_pod_affinity_properties import selects as term_selects
from tests.property.test_pod_affinity_properties import some_order_passes
from tests.unit.placement.builders import fabric

KEYS = ("kubernetes.io/hostname", "network.topology.nvidia.com/accelerator", "network.topology.nvidia.com/block")
BLOCK = KEYS[2]
APPS = ("a", "b")
NAMESPACES = ("default", "other")


@st.composite
def constraints(draw: st.DrawFn) -> list[dict[str, Any]]:
    found = []
    for key in draw(st.lists(st.sampled_from(KEYS), max_size=2, unique=True)):
        app = draw(st.sampled_from(APPS))
        constraint: dict[str, Any] = {
            "maxSkew": draw(st.integers(1, 3)), "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": draw(st.sampled_from(({"matchLabels": {"app": app}}, {"matchExpressions": [
                {"key": "app", "operator": "Exists"}]}, {}, None))),
        }
        if draw(st.booleans()):
            constraint["minDomains"] = draw(st.integers(1, 6))
        if draw(st.booleans()):
            constraint["nodeAffinityPolicy"] = draw(st.sampled_from(("Honor", "Ignore")))
        if draw(st.booleans()) and constraint["labelSelector"] is not None:
            constraint["matchLabelKeys"] = ["rev"]
        found.append(constraint)
    return found


@dataclass(frozen=True)
class Spec:
    app: str
    rev: str
    namespace: str
    gpus: int
    block: str | None  # a nodeSelector on the block, or none
    spreads: list[dict[str, Any]]
    terminating: bool = False


@st.composite
def specs(draw: st.DrawFn) -> Spec:
    return Spec(draw(st.sampled_from(APPS)), draw(st.sampled_from(("1", "2"))), draw(st.sampled_from(NAMESPACES)),
                draw(st.sampled_from((1, 2, 4, 8))), draw(st.sampled_from((None, "s0b0", "s0b1"))),
                draw(constraints()), draw(st.integers(0, 5)) == 0)


def build(name: str, spec: Spec, gang: str | None = None) -> Pod:
    namespace = "default" if gang else spec.namespace
    obj = pod(name, namespace=namespace, gpus=spec.gpus, gang=gang, labels={"app": spec.app, "rev": spec.rev})
    parsed = msgspec.convert(spec.spreads, list[TopologySpreadConstraint])
    new_spec = msgspec.structs.replace(obj.spec, topology_spread_constraints=parsed,
                                       node_selector={BLOCK: spec.block} if spec.block else {})
    meta = obj.metadata
    if spec.terminating:
        meta = msgspec.structs.replace(meta, deletion_timestamp="2026-11-26T00:00:00Z")
    return msgspec.structs.replace(obj, spec=new_spec, metadata=meta)


def passes(incoming: Pod, node_name: str, placed: Sequence[tuple[Pod, str]],
           labels_of: Mapping[str, dict[str, str]]) -> bool:
    """kube-scheduler's PodTopologySpread filter for `incoming` on `node_name`, from scratch."""
    spreads = [msgspec.to_builtins(c) for c in incoming.spec.topology_spread_constraints
               if c.when_unsatisfiable == "DoNotSchedule"]
    here = labels_of[node_name]
    if any(c["topologyKey"] not in here for c in spreads):
        return False
    namespace, own = incoming.metadata.namespace, incoming.metadata.labels
    for raw in spreads:
        selector = raw.get("labelSelector")
        if selector is not None and raw.get("matchLabelKeys"):
            selector = {**selector, "matchExpressions": [*(selector.get("matchExpressions") or []), *(
                {"key": key, "operator": "In", "values": [own[key]]} for key in raw["matchLabelKeys"] if key in own)]}
        term = {"labelSelector": selector}
        counting = selector is not None and bool(selector.get("matchLabels") or selector.get("matchExpressions"))
        counts: dict[str, int] = {}
        for name, labels in labels_of.items():
            if any(c["topologyKey"] not in labels for c in spreads):
                continue
            if raw.get("nodeAffinityPolicy", "Honor") == "Honor" and any(
                    labels.get(key) != value for key, value in incoming.spec.node_selector.items()):
                continue
            value = labels[raw["topologyKey"]]
            counts[value] = counts.get(value, 0) + sum(
                1 for other, there in placed if counting and there == name and other.metadata.namespace == namespace
                and other.metadata.deletion_timestamp is None and term_selects(term, incoming, other))
        minimum = min(counts.values()) if counts else None
        if len(counts) < raw.get("minDomains", 1):
            minimum = 0
        if minimum is None:
            continue
        self_match = 1 if term_selects(term, incoming, incoming) else 0
        if counts.get(here[raw["topologyKey"]], 0) + self_match - minimum > raw["maxSkew"]:
            return False
    return True


@st.composite
def cases(draw: st.DrawFn) -> tuple[list[tuple[Spec, int]], list[Spec], bool]:
    running = draw(st.lists(st.tuples(specs(), st.integers(0, 8)), max_size=8))
    pending = draw(st.lists(specs(), min_size=1, max_size=4))
    return running, pending, draw(st.booleans())


@settings(max_examples=150, deadline=None)
@given(cases())
def test_a_plan_never_breaks_a_do_not_schedule_spread_and_a_lone_pod_waits_only_when_no_node_lets_it(
        case: tuple[list[tuple[Spec, int]], list[Spec], bool]) -> None:
    running, pending, as_gang = case
    state: ClusterState = fabric(blocks=2, nvlinks=2, nodes=2)
    state.apply(node_event(node("bare", gpus=8)))  # no topology label but its hostname
    names = sorted(state.nodes)
    labels_of = {name: dict(state.nodes[name].labels) for name in names}
    placed: list[tuple[Pod, str]] = []
    gpus_used: dict[str, int] = {}
    for index, (spec, where) in enumerate(running):
        node_name, obj = names[where], build(f"run-{index}", dataclasses.replace(spec, spreads=[]))
        if gpus_used.get(node_name, 0) + spec.gpus > 8:
            continue
        gpus_used[node_name] = gpus_used.get(node_name, 0) + spec.gpus
        state.apply(pod_event(bound(obj, node_name)))
        placed.append((obj, node_name))
    if as_gang:
        state.apply(group_event(pod_group("job", min_member=len(pending))))
    made = [build(f"new-{index}", dataclasses.replace(spec, terminating=False), gang="job" if as_gang else None)
            for index, spec in enumerate(pending)]
    objs = {f"{obj.metadata.namespace}/{obj.metadata.name}": obj for obj in made}
    for obj in objs.values():
        state.apply(pod_event(obj))
    if as_gang:
        result = plan_gang(state, "default/job")
        if isinstance(result, GangPlan):
            plan = [(objs[a.pod], a.node) for a in result.assignments]
            assert some_order_passes(plan, placed, labels_of, passes), (result, placed)
        return
    for key, obj in objs.items():  # one after the other, each placed before the next is planned
        result = plan_pod(state, key)
        if isinstance(result, GangPlan):
            (assignment,) = result.assignments
            assert passes(obj, assignment.node, placed, labels_of), (result, placed)
            state.apply(PodAssumed(pod=key, uid=obj.metadata.uid, node=assignment.node))
            placed.append((obj, assignment.node))
            requested = int(obj.spec.containers[0].resources.requests["nvidia.com/gpu"])
            gpus_used[assignment.node] = gpus_used.get(assignment.node, 0) + requested
        else:
            wanted = int(obj.spec.containers[0].resources.requests["nvidia.com/gpu"])
            free = [name for name in names if gpus_used.get(name, 0) + wanted <= 8
                    and all(labels_of[name].get(key) == value for key, value in obj.spec.node_selector.items())]
            assert not any(passes(obj, name, placed, labels_of) for name in free), (result, placed, free)


@settings(max_examples=100, deadline=None)
@given(cases(), st.data())
def test_pods_a_plan_ignores_count_in_no_spread_as_if_they_were_deleted(
        case: tuple[list[tuple[Spec, int]], list[Spec], bool], data: st.DataObject) -> None:
    """Preemption validates a plan with its victims ignored (`ignore_pods`): their spread counts must be gone
    too, as kube-scheduler's preemption removes them from the node and its PodTopologySpread state."""
    running, pending, as_gang = case

    def build_state() -> ClusterState:
        state: ClusterState = fabric(blocks=2, nvlinks=2, nodes=2)
        names = sorted(state.nodes)
        used: dict[str, int] = {}
        for index, (spec, where) in enumerate(running):
            name = names[where % len(names)]
            if used.get(name, 0) + spec.gpus > 8:
                continue
            used[name] = used.get(name, 0) + spec.gpus
            state.apply(pod_event(bound(build(f"run-{index}", dataclasses.replace(spec, spreads=[])), name)))
        if as_gang:
            state.apply(group_event(pod_group("job", min_member=len(pending))))
        for index, spec in enumerate(pending):
            state.apply(pod_event(build(f"new-{index}", dataclasses.replace(spec, terminating=False),
                                        gang="job" if as_gang else None)))
        return state

    state = build_state()
    placed = sorted(key for key, info in state.pods.items() if info.placed_on)
    gone = frozenset(data.draw(st.lists(st.sampled_from(placed), unique=True)) if placed else [])
    deleted = build_state()
    for key in gone:
        deleted.apply(PodDeleted(key=key))
    if as_gang:
        ignoring, without = plan_gang(state, "default/job", ignore_pods=gone), plan_gang(deleted, "default/job")
    else:
        key = next(k for k in state.pods if k.endswith("/new-0"))
        ignoring, without = plan_pod(state, key, ignore_pods=gone), plan_pod(deleted, key)
    # Whether the pods can go, and that where they go keeps every spread with the ignored pods gone (a lone
    # pod's node may differ: a call that ignores pods ranks nodes from the live sums).
    assert type(ignoring) is type(without), (ignoring, without)
    if isinstance(ignoring, GangPlan):
        labels_of = {name: dict(info.labels) for name, info in deleted.nodes.items()}
        staying = [(info.obj, info.placed_on) for info in deleted.pods.values() if info.placed_on]
        plan = [(state.pods[a.pod].obj, a.node) for a in ignoring.assignments]
        assert some_order_passes(plan, staying, labels_of, passes), (ignoring, staying)
