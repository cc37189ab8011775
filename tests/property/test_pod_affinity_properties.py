"""Whatever pods run, whatever terms they and the pods being placed carry, a plan never breaks a required
pod affinity or anti-affinity term, as kube-scheduler reads them (checked here pair by pair, with none of
placement's indexes): placing the plan's pods one by one in some order, each passes the filter."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from events.builders import bound, group_event, pod, pod_event, pod_group
from events.model import PodDeleted
from events.objects import Affinity, Pod
from placement import GangPlan, plan_gang, plan_pod
from state.cluster import ClusterState
from tests.unit.placement.builders import fabric

KEYS = ("kubernetes.io/hostname", "network.topology.nvidia.com/accelerator", "network.topology.nvidia.com/block")
APPS = ("a", "b", "c")


NAMESPACES = ("default", "other")


@st.composite
def selectors(draw: st.DrawFn) -> dict[str, Any]:
    app = draw(st.sampled_from(APPS))
    return draw(st.sampled_from((
        {"matchLabels": {"app": app}},
        {"matchExpressions": [{"key": "app", "operator": "In", "values": sorted({app, draw(st.sampled_from(APPS))})}]},
        {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": [app]}]},
        {"matchExpressions": [{"key": "app", "operator": "Exists"}]},
        {"matchLabels": {"app": app}, "matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]},
    )))


@st.composite
def terms(draw: st.DrawFn) -> list[dict[str, Any]]:
    found = []
    for _ in range(draw(st.integers(0, 2))):
        term: dict[str, Any] = {"labelSelector": draw(selectors()), "topologyKey": draw(st.sampled_from(KEYS))}
        where = draw(st.sampled_from(("own", "listed", "all")))
        if where == "listed":
            term["namespaces"] = [draw(st.sampled_from(NAMESPACES))]
        elif where == "all":
            term["namespaceSelector"] = {}
        found.append(term)
    return found


@dataclass(frozen=True)
class Spec:
    app: str
    namespace: str
    gpus: int
    together: list[dict[str, Any]]
    apart: list[dict[str, Any]]


@st.composite
def specs(draw: st.DrawFn) -> Spec:
    together = draw(terms()) if draw(st.booleans()) else []
    return Spec(draw(st.sampled_from(APPS)), draw(st.sampled_from(NAMESPACES)), draw(st.sampled_from((1, 2, 4, 8))),
                together, draw(terms()))


def build(name: str, spec: Spec, gang: str | None = None) -> Pod:
    raw: dict[str, Any] = {}
    if spec.together:
        raw["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": spec.together}
    if spec.apart:
        raw["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": spec.apart}
    namespace = "default" if gang else spec.namespace  # a gang's pods sit in its PodGroup's namespace
    obj = pod(name, namespace=namespace, gpus=spec.gpus, gang=gang, labels={"app": spec.app})
    return msgspec.structs.replace(obj, spec=msgspec.structs.replace(obj.spec, affinity=msgspec.convert(raw, Affinity)))


def selects(raw: Mapping[str, Any], owner: Pod, other: Pod) -> bool:
    """Whether the term `raw` of pod `owner` selects pod `other` (namespaces, then the selector)."""
    if "namespaceSelector" not in raw and other.metadata.namespace not in (
            raw.get("namespaces") or [owner.metadata.namespace]):
        return False
    selector, labels = raw.get("labelSelector"), other.metadata.labels
    if selector is None:
        return False
    if any(labels.get(key) != value for key, value in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
        if ((operator == "In" and labels.get(key) not in values) or (operator == "NotIn" and labels.get(key) in values)
                or (operator == "Exists" and key not in labels) or (operator == "DoesNotExist" and key in labels)):
            return False
    return True


def passes(incoming: Pod, node: str, placed: Sequence[tuple[Pod, str]],
           labels_of: Mapping[str, dict[str, str]]) -> bool:
    """kube-scheduler's InterPodAffinity filter for `incoming` on `node`, next to `placed`, pair by pair."""
    here = labels_of[node]
    spec = incoming.spec.affinity

    def terms_of(obj: Pod, which: str) -> list[dict[str, Any]]:
        affinity = obj.spec.affinity
        part = getattr(affinity, which) if affinity is not None else None
        return [msgspec.to_builtins(t) for t in part.required_during_scheduling_ignored_during_execution] \
            if part is not None else []

    for other, other_node in placed:
        there = labels_of[other_node]
        for raw in terms_of(incoming, "pod_anti_affinity"):
            key = raw["topologyKey"]
            if selects(raw, incoming, other) and key in here and here.get(key) == there.get(key):
                return False
        for raw in terms_of(other, "pod_anti_affinity"):
            key = raw["topologyKey"]
            if selects(raw, other, incoming) and key in there and here.get(key) == there.get(key):
                return False
    together = terms_of(incoming, "pod_affinity") if spec is not None else []
    if not together:
        return True
    if any(raw["topologyKey"] not in here for raw in together):
        return False
    matching = [(other, other_node) for other, other_node in placed
                if all(selects(raw, incoming, other) for raw in together)]
    if not any(any(raw["topologyKey"] in labels_of[other_node] for raw in together) for _, other_node in matching):
        return all(selects(raw, incoming, incoming) for raw in together)
    return all(any(labels_of[other_node].get(raw["topologyKey"]) == here[raw["topologyKey"]]
                   for _, other_node in matching) for raw in together)


Filter = Callable[[Pod, str, Sequence[tuple[Pod, str]], Mapping[str, dict[str, str]]], bool]


def some_order_passes(plan: Sequence[tuple[Pod, str]], running: Sequence[tuple[Pod, str]],
                      labels_of: Mapping[str, dict[str, str]], fits: Filter = passes) -> bool:
    """Whether the plan's pods can be placed one at a time, in some order, each passing the filter `fits`
    when it is placed (every order is tried: placing a pod can take away another's right to be the first
    of its series, so no greedy order is exact)."""
    for order in itertools.permutations(plan):
        placed = list(running)
        for item in order:
            if not fits(item[0], item[1], placed, labels_of):
                break
            placed.append(item)
        else:
            return True
    return False


@st.composite
def cases(draw: st.DrawFn) -> tuple[list[tuple[Spec, int]], list[Spec], bool]:
    running = draw(st.lists(st.tuples(specs(), st.integers(0, 7)), max_size=5))
    pending = draw(st.lists(specs(), min_size=1, max_size=4))
    return running, pending, draw(st.booleans())


@settings(max_examples=150, deadline=None)
@given(cases())
def test_a_plan_never_breaks_a_required_pod_affinity_or_anti_affinity_term(
        case: tuple[list[tuple[Spec, int]], list[Spec], bool]) -> None:
    running, pending, as_gang = case
    state: ClusterState = fabric(blocks=2, nvlinks=2, nodes=2)
    names = sorted(state.nodes)
    labels_of = {name: dict(state.nodes[name].labels) for name in names}
    placed: list[tuple[Pod, str]] = []
    gpus_used: dict[str, int] = {}
    for index, (spec, where) in enumerate(running):
        if index == len(running) // 2:  # placement's index, made now, must follow what runs from here on
            probe = Spec("a", "default", 1, [], [{"labelSelector": {}, "topologyKey": KEYS[0]}])
            state.apply(pod_event(build("probe", probe)))
            plan_pod(state, "default/probe")
            state.apply(PodDeleted(key="default/probe"))
        node, obj = names[where], build(f"run-{index}", spec)
        if gpus_used.get(node, 0) + spec.gpus > 8 or not passes(obj, node, placed, labels_of):
            continue  # only what kube-scheduler could have placed runs
        gpus_used[node] = gpus_used.get(node, 0) + spec.gpus
        state.apply(pod_event(bound(obj, node)))
        placed.append((obj, node))
    if as_gang:
        state.apply(group_event(pod_group("job", min_member=len(pending))))
    made = [build(f"new-{index}", spec, gang="job" if as_gang else None) for index, spec in enumerate(pending)]
    objs = {f"{obj.metadata.namespace}/{obj.metadata.name}": obj for obj in made}
    for obj in objs.values():
        state.apply(pod_event(obj))
    results = [plan_gang(state, "default/job")] if as_gang else [plan_pod(state, key) for key in objs]
    for result in results:
        if isinstance(result, GangPlan):
            plan = [(objs[a.pod], a.node) for a in result.assignments]
            assert some_order_passes(plan, placed, labels_of), (result, placed)
