"""The offerslot table kept between planning calls (`placement/slots.py`) always says what a recount says.

A random fabric (2 blocks x 2 NVLink domains x 2 nodes) goes through random events: nodes re-upserted
with other GPUs, taints, spec.unschedulable or KAI node pool, deleted and re-added; pods bound, assumed, nominated,
forgotten and deleted. After every event a planning view (`Solver`) over the same state, with the
table carried over from the previous step, must give for a few pod shapes the same node offerslots,
domain offerslots (with and without a podCountMultiple) and refusal counts as a count made from
scratch by the rules of `placement/fit.py`, with random pods treated as gone.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from events.builders import bound, node, node_event, pod, pod_event
from events.model import (
    Event,
    NodeDeleted,
    NominationCleared,
    PodAssumed,
    PodDeleted,
    PodForgotten,
    PodNominated,
    with_seq,
)
from events.objects import KAI_NODE_POOL_LABEL, Taint, Toleration
from placement.fit import Capacity, Shape, admits, shape_of
from placement.gather import Solver
from state.cluster import ClusterState
from state.topology import Domain

NODES = [f"n-b{b}a{a}-{i}" for b in range(2) for a in range(2) for i in range(2)]
PODS = [f"p{i}" for i in range(4)]
TAINT = Taint(key="dedicated", value="x", effect="NoSchedule")


def _node_event(name: str, gpus: int, tainted: bool, unschedulable: bool, pool: str | None = None) -> Event:
    block, accelerator = name.split("-")[1][:2], name.split("-")[1]
    return node_event(node(name, gpus=gpus, spine="s0", block=block, accelerator=accelerator,
                           taints=[TAINT] if tainted else None, unschedulable=unschedulable,
                           labels={KAI_NODE_POOL_LABEL: pool} if pool is not None else None))


def _pod_event(name: str, gpus: int, where: str, priority: int) -> Event:
    obj = pod(name, gpus=gpus, priority=priority)
    return pod_event(bound(obj, where) if where else obj)


def _decision(kind: str, key: str, where: str, priority: int) -> Event:
    if kind == "assume":
        return PodAssumed(pod=key, uid=f"uid-{key.replace('/', '-')}", node=where)
    if kind == "nominate":
        return PodNominated(pod=key, uid=f"uid-{key.replace('/', '-')}", node=where, priority=priority)
    if kind == "clear":
        return NominationCleared(pod=key)
    if kind == "forget":
        return PodForgotten(pod=key, uid=f"uid-{key.replace('/', '-')}")
    return PodDeleted(key=key, uid=f"uid-{key.replace('/', '-')}")


events_strategy = st.lists(
    st.one_of(
        st.builds(_node_event, st.sampled_from(NODES), st.sampled_from([0, 4, 8, 16]), st.booleans(),
                  st.booleans(), st.sampled_from([None, None, "gpu-nodes", "other"])),
        st.builds(lambda n: NodeDeleted(name=n), st.sampled_from(NODES)),
        st.builds(_pod_event, st.sampled_from(PODS), st.sampled_from([1, 2, 4, 8]), st.sampled_from(["", *NODES]),
                  st.integers(0, 2)),
        st.builds(_decision, st.sampled_from(["assume", "nominate", "clear", "forget", "delete"]),
                  st.sampled_from([f"default/{p}" for p in PODS]), st.sampled_from(NODES), st.integers(0, 2)),
    ),
    min_size=1, max_size=40,
).map(lambda evs: [with_seq(e, i + 1) for i, e in enumerate(
    [_node_event(name, 8, False, False) for name in NODES] + [_pod_event(name, 4, "", 1) for name in PODS] + evs)])


def _shapes() -> list[Shape]:
    probes = ClusterState()
    for gpus, priority, tolerate in ((1, 0, False), (8, 2, False), (4, 1, True)):
        obj = pod(f"probe-{gpus}", gpus=gpus, priority=priority)
        if tolerate:
            obj = msgspec.structs.replace(obj, spec=msgspec.structs.replace(
                obj.spec, tolerations=[Toleration(key="dedicated", operator="Exists")]))
        probes.apply(pod_event(obj))
    shapes = [shape_of(info) for info in probes.pods.values()]
    # Shapes differing only in their KAI node pool (the default pool, "", is the nodes without the label)
    first = probes.pods["default/probe-1"]
    return [*shapes, shape_of(first, node_pool=(KAI_NODE_POOL_LABEL, "gpu-nodes")),
            shape_of(first, node_pool=(KAI_NODE_POOL_LABEL, ""))]


SHAPES = _shapes()


def _recount(capacity: Capacity, shape: Shape, name: str) -> int:
    info = capacity.state.nodes.get(name)
    if info is None or admits(shape, info):
        return 0
    return capacity.slots(shape, info)


def _offer(count: Callable[[str], int], multiples: dict[int, int], domain: Domain) -> tuple[int, int]:
    raw = sum(count(name) for name in domain.direct_nodes)
    strict = raw
    for child in domain.children:
        child_raw, child_strict = _offer(count, multiples, child)
        raw += child_raw
        k = multiples.get(child.level, 1)
        strict += child_strict - child_strict % k
    return raw, strict


def _refusals(capacity: Capacity, shape: Shape) -> dict[str, int]:
    counts: dict[str, int] = {}
    for info in capacity.state.nodes.values():
        why = admits(shape, info)
        if not why:
            short = capacity.short_of(shape, info)
            why = ("Too many pods" if short == "pods" else f"Insufficient {short}") if short else ""
        if why:
            counts[why] = counts.get(why, 0) + 1
    return counts


@settings(max_examples=150, deadline=None)
@given(events_strategy, st.lists(st.sampled_from([f"default/{p}" for p in PODS]), max_size=2), st.data())
def test_the_slot_table_always_equals_a_recount(events: list[Event], ignored: list[str], data: st.DataObject) -> None:
    state = ClusterState()
    for event in events:
        state.apply(event)
        ignore = frozenset(ignored) if data.draw(st.booleans()) else frozenset()
        capacity = Capacity(state, frozenset(), ignore)
        solver = Solver(state, capacity)  # the table carried over from the last step, brought up to date
        tree = state.topology
        for shape in SHAPES:
            for name in state.nodes:
                assert solver.node_slots(shape, name) == _recount(capacity, shape, name), name
            for multiples in ({}, {2: 2}):
                for domain in tree.domains:
                    assert solver.offer(shape, multiples, domain) == _offer(
                        partial(_recount, capacity, shape), multiples, domain)
            assert solver.rejections(shape, state.nodes) == _refusals(capacity, shape)
            assert solver.rejections(shape, tree.root.nodes) == _refusals(capacity, shape)
        # A tentative commit of this call: the nodes it fills are counted from what is left on them.
        shape = data.draw(st.sampled_from(SHAPES))
        where = data.draw(st.sampled_from(NODES))
        if where in state.nodes and solver.node_slots(shape, where) > 0:
            before = solver.offer(shape, {}, tree.root)
            solver.commit(shape, [(where, 1)])
            for domain in tree.domains:
                assert solver.offer(shape, {}, domain) == _offer(partial(solver.node_slots, shape), {}, domain)
            assert solver.offer(shape, {}, tree.root)[0] == before[0] - 1
