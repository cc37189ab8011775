"""Properties of preemption's room model on random small clusters full of running gangs.

The model is built over thousands of nodes at each attempt of a job that cannot fit, so it keeps
free room as vectors over the requested resources and walks the tree's domains rather than the
nodes. Whatever the cluster, it must say what the definition says, node by node with placement's
own dicts (`Capacity.free`, `slots_in`): the slots a node offers now and with victims gone, every
domain's bound at every priority tier, and what evicting one victim unit alone adds node by node;
and a model limited to one domain's subtree (an anchored job's) must agree with the whole one there.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from events.builders import pod, pod_event
from events.model import EvictionRequested, PodDeleted, PodNominated
from placement.fit import Capacity, admits, shape_of, slots_in
from preemption.room import Room
from preemption.victims import Candidates, collect
from state.cluster import ClusterState
from tests.property.test_preemption_properties import Scenario, build, scenarios


def _model(state: ClusterState, s: Scenario) -> tuple[list[str], Candidates]:
    pre = [f"default/pre-{i}" for i in range(s.size)]
    candidates = collect(state, s.priority, frozenset({"default/pre"}), frozenset(pre))
    return pre, candidates


def _definition(state: ClusterState, room: Room, pre: list[str], candidates: Candidates) -> dict[int, list[list[int]]]:
    """Every domain's bound per tier, node by node from the definition (dicts, placement's rules)."""
    shape = shape_of(state.pods[pre[0]])
    capacity = Capacity(state, frozenset({"default/pre"}), frozenset(candidates.leaving))
    tree = state.topology
    sums: dict[int, list[list[int]]] = {}
    for name, info in state.nodes.items():
        leaf = tree.domain_of(name)
        if leaf is None or admits(shape, info):
            continue
        free = capacity.free(info, shape.priority)
        victims = {p.key: p for unit in candidates.units_on.get(name, ()) for p in unit.pods if p.counted_on == name}
        slots = []
        for tier in room.tiers:
            most = dict(free)
            for victim in victims.values():
                if victim.priority <= tier:
                    for resource, amount in victim.requests.items():
                        most[resource] = most.get(resource, 0) + amount
            slots.append(slots_in(most, shape.requests))
        if name in room.base_slots:  # modelled (the rest is read from placement's table, checked by the sums)
            assert room.base_slots[name] == [slots_in(free, shape.requests)]
        if not any(slots):
            continue
        for domain in leaf.path:
            total = sums.setdefault(domain.id, [[0] for _ in room.tiers])
            for t, count in enumerate(slots):
                total[t][0] += count
    return sums


@given(scenarios(), st.integers(0, 3), st.booleans(), st.booleans())
def test_room_bounds_are_the_node_by_node_definition_summed_up_the_tree(s: Scenario, held: int, leaving: bool,
                                                                        gone: bool) -> None:
    state = build(s)
    pre, candidates = _model(state, s)
    Room(state, [shape_of(state.pods[pre[0]])], frozenset({"default/pre"}), candidates)  # what it keeps must follow
    if held:  # a higher-priority nomination holds room on one node: the model takes it off
        holder = pod("holder", priority=1000, gpus=2 * held)
        state.apply(pod_event(holder))
        state.apply(PodNominated(pod="default/holder", uid=holder.metadata.uid, node="n000", priority=1000))
    if leaving:  # a pod asked to leave: its room comes for free, it is no candidate
        busy = sorted(key for key, p in state.pods.items() if p.node_name)
        if busy:
            state.apply(EvictionRequested(pod=busy[0], uid=state.pods[busy[0]].uid, preemptor="default/pre"))
    if gone:  # a running pod finished: its room is free now
        busy = sorted(key for key, p in state.pods.items() if p.node_name)
        if busy:
            state.apply(PodDeleted(key=busy[-1]))
    pre, candidates = _model(state, s)
    room = Room(state, [shape_of(state.pods[pre[0]])], frozenset({"default/pre"}), candidates)
    expected = _definition(state, room, pre, candidates)
    assert {ident: bounds for ident, bounds in room.domain_tiers.items() if any(any(b) for b in bounds)} == {
        ident: bounds for ident, bounds in expected.items() if any(any(b) for b in bounds)}
    for ident, bounds in room.domain_tiers.items():
        assert room.domain_max[ident] == bounds[-1]
    # what evicting one unit alone adds on each node: placement's dicts, the unit's pods there given back
    shape = shape_of(state.pods[pre[0]])
    capacity = Capacity(state, frozenset({"default/pre"}), frozenset(candidates.leaving))
    for unit in candidates.units:
        alone: dict[str, int] = {}
        for name in dict.fromkeys(p.counted_on for p in unit.pods):
            info = state.nodes[name]
            if name not in room.base_free or admits(shape, info):
                continue
            free = capacity.free(info, shape.priority)
            more = dict(free)
            for victim in unit.pods:
                if victim.counted_on == name:
                    for resource, amount in victim.requests.items():
                        more[resource] = more.get(resource, 0) + amount
            gained = slots_in(more, shape.requests) - slots_in(free, shape.requests)
            if gained > 0:
                alone[name] = gained
        assert room.alone(unit) == alone, unit


@given(scenarios())
def test_a_room_limited_to_one_domain_agrees_with_the_whole_one_there(s: Scenario) -> None:
    state = build(s)
    pre, candidates = _model(state, s)
    shapes = [shape_of(state.pods[pre[0]])]
    whole = Room(state, shapes, frozenset({"default/pre"}), candidates)
    for spine in state.topology.root.children:
        part = Room(state, shapes, frozenset({"default/pre"}), candidates, within=spine)
        below = {d.id for d in state.topology.domains if spine in d.path}
        # (above the subtree, the limited model's sums are partial: the planner never looks there)
        assert {ident: b for ident, b in part.domain_tiers.items() if ident in below} == {
            ident: b for ident, b in whole.domain_tiers.items() if ident in below}
        for name in spine.nodes:  # what selection reads: the nodes running candidates
            if name in candidates.units_on:
                assert part.base_slots.get(name) == whole.base_slots.get(name)
        for unit in candidates.units:
            assert part.alone(unit) == {n: g for n, g in whole.alone(unit).items() if n in spine.nodes}
