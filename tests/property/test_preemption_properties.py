"""Properties of job-level preemption plans on random small clusters full of running gangs.

Whatever the cluster: a plan never evicts a pod of equal or higher priority, never leaves a victim
gang running below its minMember, and once its victims are gone the gang really fits within its
strategy (placement, given the victims as gone, plans it; MustGather keeps it in one domain). And
when evicting every lower-priority pod would let the gang fit, a plan is found.

The same clusters with required pod anti-affinity in play (JobSet's exclusive placement per block on
some running jobs and on the preemptor, or anti-affinity per host between "web" pods): a plan still
never evicts a pod of equal or higher priority, and once its victims are really deleted placement
places the gang.
"""

from __future__ import annotations

from typing import Any

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from events.builders import bound, group_event, node, node_event, pod, pod_event, pod_group
from events.model import PodDeleted
from events.objects import Affinity, Pod
from placement import GangPlan, Unschedulable, plan_gang
from preemption import PreemptionPlan, plan_preemption
from state.cluster import ClusterState

GATHERS: list[list[dict[str, object]] | None] = [
    None,
    [{"layer": "BlockLayer", "strategy": "MustGather"}],
    [{"layer": "SpineLayer", "strategy": "MustGather"}],
    [{"layer": "BlockLayer", "strategy": "PreferGather"}],
]


class Running(msgspec.Struct, frozen=True):
    size: int
    min_member: int
    priority: int
    gpus: int
    started: float
    lone: bool = False  # a pod without a gang (size 1)
    terms: str = ""  # "": none; "exclusive": JobSet exclusive placement per block; "web": one web pod per host


class Scenario(msgspec.Struct, frozen=True):
    nodes_per_block: int
    running: list[Running]
    order: list[int]
    size: int
    priority: int
    gpus: int
    gather: int
    terms: str = ""  # the preemptor's pods, as `Running.terms`


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    per_block = draw(st.integers(2, 4))
    node_count = 4 * per_block
    running = draw(st.lists(
        st.builds(lambda size, extra, priority, gpus, started, lone: Running(
                      1 if lone else size, max(1, size - extra), priority, gpus, float(started), lone),
                  st.integers(1, 4), st.integers(0, 2), st.sampled_from([1, 5, 10, 50]), st.sampled_from([2, 4, 8]),
                  st.integers(0, 100), st.booleans()),
        min_size=1, max_size=10))
    order = draw(st.permutations(list(range(node_count))))
    return Scenario(nodes_per_block=per_block, running=running, order=list(order),
                    size=draw(st.integers(1, 2 * per_block)), priority=draw(st.sampled_from([10, 50, 100])),
                    gpus=draw(st.sampled_from([4, 8])), gather=draw(st.integers(0, len(GATHERS) - 1)))


BLOCK = "network.topology.nvidia.com/block"
JOB_KEY = "jobset.sigs.k8s.io/job-key"


def with_terms(obj: Pod, terms: str, job: str) -> Pod:
    """`obj` with the required terms `terms` names (see `Running.terms`) for its job `job`."""
    if not terms:
        return obj
    raw: dict[str, Any]
    if terms == "exclusive":
        labels = {**obj.metadata.labels, JOB_KEY: job}
        raw = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                   {"labelSelector": {"matchExpressions": [{"key": JOB_KEY, "operator": "In", "values": [job]}]},
                    "topologyKey": BLOCK, "namespaceSelector": {}}]},
               "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                   {"labelSelector": {"matchExpressions": [{"key": JOB_KEY, "operator": "Exists"},
                                                           {"key": JOB_KEY, "operator": "NotIn", "values": [job]}]},
                    "topologyKey": BLOCK, "namespaceSelector": {}}]}}
    else:
        labels = {**obj.metadata.labels, "app": "web"}
        raw = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                   {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}]}}
    meta = msgspec.structs.replace(obj.metadata, labels=labels)
    spec = msgspec.structs.replace(obj.spec, affinity=msgspec.convert(raw, Affinity))
    return msgspec.structs.replace(obj, metadata=meta, spec=spec)


TERMS = ["", "exclusive", "web"]


@st.composite
def term_scenarios(draw: st.DrawFn) -> Scenario:
    base = draw(scenarios())
    running = [msgspec.structs.replace(job, terms=draw(st.sampled_from(TERMS))) for job in base.running]
    return msgspec.structs.replace(base, running=running, terms=draw(st.sampled_from(TERMS[1:])))


def build(s: Scenario) -> ClusterState:
    state = ClusterState()
    names: list[str] = []
    for spine in range(2):
        for block in range(2):
            for i in range(s.nodes_per_block):
                name = f"n{spine}{block}{i}"
                names.append(name)
                state.apply(node_event(node(name, spine=f"s{spine}", block=f"s{spine}b{block}")))
    free = {name: 8 for name in names}
    for g, job in enumerate(s.running):
        placed: list[str] = []
        for index in s.order:
            name = names[index]
            while free[name] >= job.gpus and len(placed) < job.size:
                free[name] -= job.gpus
                placed.append(name)
            if len(placed) == job.size:
                break
        if not placed:
            continue
        gang = f"run{g}"
        if job.lone:
            lone = with_terms(pod(gang, priority=job.priority, gpus=job.gpus), job.terms, gang)
            state.apply(pod_event(bound(lone, placed[0]), time=job.started))
            continue
        state.apply(group_event(pod_group(gang, min_member=min(job.min_member, len(placed)))))
        for i, name in enumerate(placed):
            member = with_terms(pod(f"{gang}-{i}", gang=gang, priority=job.priority, gpus=job.gpus), job.terms, gang)
            state.apply(pod_event(bound(member, name), time=job.started))
    state.apply(group_event(pod_group("pre", min_member=s.size, gather=GATHERS[s.gather])))
    for i in range(s.size):
        pending = with_terms(pod(f"pre-{i}", gang="pre", priority=s.priority, gpus=s.gpus), s.terms, "pre")
        state.apply(pod_event(pending, time=200.0))
    return state


@given(scenarios())
def test_preemption_plans_respect_priority_min_member_and_the_gather_strategy(s: Scenario) -> None:
    planned = _planned(s)
    if planned is None:
        return
    state, result = planned
    victims = set(result.victims)
    assert victims, "a plan evicts someone"
    _lower_and_placeable(state, s, result)
    # never a victim gang half-alive below minMember
    for gang_key in {state.pods[key].gang for key in victims} - {""}:
        info = state.gangs[gang_key]
        assert info.spec is not None
        left = [m for m in info.members if m not in victims]
        assert not left or len(left) >= info.spec.min_member, (gang_key, left)
    nominated = [a.node for a in result.nominations]
    assert all(a.pod.startswith("default/pre-") for a in result.nominations)
    gather = GATHERS[s.gather]
    if gather is not None and gather[0]["strategy"] == "MustGather":
        level = state.topology.resolve_level(str(gather[0]["layer"]))
        assert len({state.topology.domain_at(n, level) for n in nominated}) == 1


def _planned(s: Scenario) -> tuple[ClusterState, PreemptionPlan] | None:
    """The scenario's state and the preemption plan for its gang; None when the gang fits or no plan is made."""
    state = build(s)
    failure = plan_gang(state, "default/pre")
    if not isinstance(failure, Unschedulable):
        return None
    result = plan_preemption(state, "default/pre", failure)
    return (state, result) if isinstance(result, PreemptionPlan) else None


def _lower_and_placeable(state: ClusterState, s: Scenario, result: PreemptionPlan) -> None:
    """Never a victim (pod or job) of equal or higher priority; with the victims gone the gang fits in its
    strategy, exactly where it was nominated."""
    for key in result.victims:
        assert state.pods[key].priority < s.priority, key
    for job in result.jobs:
        assert job.priority < s.priority
    after = plan_gang(state, "default/pre", ignore_pods=frozenset(result.victims))
    assert isinstance(after, GangPlan), after
    assert result.nominations == after.assignments


@given(scenarios())
def test_preemption_finds_a_plan_whenever_evicting_every_lower_priority_pod_would_let_the_gang_fit(
        s: Scenario) -> None:
    state = build(s)
    failure = plan_gang(state, "default/pre")
    if not isinstance(failure, Unschedulable):
        return
    lower = frozenset(key for key, p in state.pods.items() if p.node_name and p.priority < s.priority)
    if not isinstance(plan_gang(state, "default/pre", ignore_pods=lower), GangPlan):
        return
    assert isinstance(plan_preemption(state, "default/pre", failure), PreemptionPlan)


@given(term_scenarios())
def test_preemption_lifting_anti_affinity_evicts_only_lower_priority_pods_and_lets_the_gang_be_placed(
        s: Scenario) -> None:
    planned = _planned(s)
    if planned is None:
        return
    state, result = planned
    victims = set(result.victims)
    _lower_and_placeable(state, s, result)
    for key in sorted(victims):  # the victims really gone, not only ignored: placement places the gang
        state.apply(PodDeleted(key=key))
    placed = plan_gang(state, "default/pre")
    assert isinstance(placed, GangPlan), placed
