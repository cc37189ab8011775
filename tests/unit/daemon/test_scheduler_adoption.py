"""After a crash mid-bind, a plan is checked against the cluster as it is now before any of it is bound.

Each test runs the real loop against the in-memory cluster until it binds part of a gang, keeps the
log a kill -9 leaves, changes the cluster as an operator or another scheduler would while the daemon
is down, and starts a new loop on that log (`tests/unit/daemon/restart.py`).
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from events.builders import bound, group_event, node, node_event, pod, pod_event, pod_group
from events.model import (
    BindRequested,
    Event,
    NodeDeleted,
    NominationCleared,
    PodAssumed,
    PodForgotten,
    PodGroupDeleted,
    PodNominated,
    PodUpserted,
)
from events.objects import Affinity, Pod, Toleration, TopologySpreadConstraint
from tests.unit.daemon.restart import (
    Run,
    assumed_nodes,
    bound_nodes,
    cordoned,
    cut_after_binds,
    decide,
    filler,
    over_committed,
    pending_reasons,
    refused_binds,
    restart,
    tainted,
    tolerating,
)
from tests.unit.placement.test_host_ports import with_ports

NODES = [node(f"n{i}", block=f"b{i // 4}", spine="s0") for i in range(12)]
MUST_GATHER_BLOCK: list[dict[str, object]] = [{"layer": "BlockLayer", "strategy": "MustGather"}]


def gang(name: str, size: int, *, min_member: int | None = None, priority: int | None = None, gpus: int = 8,
         gather: list[dict[str, object]] | None = None) -> list[Event]:
    group = pod_group(name, min_member=size if min_member is None else min_member, gather=gather)
    return [group_event(group),
            *(pod_event(pod(f"{name}-{i}", gang=name, priority=priority, gpus=gpus)) for i in range(size))]


def with_affinity(obj: Pod, affinity: dict[str, object]) -> Pod:
    return msgspec.structs.replace(obj, spec=msgspec.structs.replace(obj.spec,
                                                                     affinity=msgspec.convert(affinity, Affinity)))


def members(name: str, size: int) -> list[str]:
    return [f"default/{name}-{i}" for i in range(size)]


async def crashed(*setup: Event, binds: int) -> tuple[list[Event], dict[str, str], dict[str, str]]:
    """The log left by a kill after `binds` binds, the pods assumed then but not bound, and the bound ones."""
    log = cut_after_binds(await decide([*(node_event(n) for n in NODES), *setup]), binds)
    bound = bound_nodes(log)
    waiting = {key: n for key, n in assumed_nodes(log).items() if key not in bound}
    return log, waiting, bound


async def test_a_plan_that_still_holds_is_bound_as_planned_after_a_restart() -> None:
    log, waiting, bound = await crashed(*gang("train", 4), binds=1)
    assert len(bound) == 1 and len(waiting) == 3
    run = await restart(log)
    assert run.bound_since_start() == waiting
    assert not [e for e in run.since_start if isinstance(e, PodForgotten)]


async def test_planned_nodes_filled_while_down_are_not_over_committed_and_the_gang_completes_elsewhere() -> None:
    log, waiting, bound = await crashed(*gang("train", 4), binds=1)
    full = sorted(set(waiting.values()))[:2]
    run = await restart(log, [filler(f"other-{n}", n, 8) for n in full])
    assert over_committed(run.state) == []
    placed = {**bound, **run.bound_since_start()}
    assert sorted(placed) == members("train", 4)
    assert not set(run.bound_since_start().values()) & set(full)
    released = [e for e in run.since_start if isinstance(e, PodForgotten)]
    assert sorted(e.pod for e in released) == sorted(waiting)  # the whole plan, not only the pods that lost room
    assert "no longer holds" in released[0].reason and "no room" in released[0].reason
    assert "nvidia.com/gpu" in released[0].reason


async def test_cordoned_and_tainted_planned_nodes_get_none_of_the_old_plan() -> None:
    log, waiting, bound = await crashed(*gang("train", 4), binds=1)
    first, second = sorted(set(waiting.values()))[:2]
    by_name = {n.metadata.name: n for n in NODES}
    run = await restart(log, [cordoned(by_name[first]), tainted(by_name[second])])
    assert refused_binds(run) == []
    assert not {first, second} & set(run.bound_since_start().values())
    assert sorted({**bound, **run.bound_since_start()}) == members("train", 4)
    reasons = " ".join(e.reason for e in run.since_start if isinstance(e, PodForgotten))
    assert "unschedulable" in reasons or "untolerated taint" in reasons


async def test_a_taint_the_pods_tolerate_does_not_break_the_plan() -> None:
    tolerate = Toleration(key="maintenance", operator="Exists")
    tolerant: list[Event] = [group_event(pod_group("train", min_member=4))]
    tolerant += [pod_event(tolerating(pod(f"train-{i}", gang="train"), tolerate)) for i in range(4)]
    log, waiting, _ = await crashed(*tolerant, binds=1)
    by_name = {n.metadata.name: n for n in NODES}
    run = await restart(log, [tainted(by_name[n]) for n in sorted(set(waiting.values()))])
    assert run.bound_since_start() == waiting


async def test_a_partly_bound_gang_is_completed_next_to_its_bound_members() -> None:
    log, waiting, bound = await crashed(*gang("train", 3), binds=2)
    block = {n.metadata.name: n.metadata.labels["network.topology.nvidia.com/block"] for n in NODES}
    home = block[next(iter(bound.values()))]
    victim = sorted(waiting.values())[0]
    run = await restart(log, [filler("other", victim, 8)])
    new = run.bound_since_start()
    assert sorted({**bound, **new}) == members("train", 3)
    assert victim not in new.values()
    # Its block had one node free besides the plan's: the replacement lands there, next to the bound ones
    # (a gang of one pod planned afresh would take the emptiest fit anywhere, by bin-packing the same block too,
    # so the other blocks are filled to leave this block's free node the only tight choice for the anchor).
    assert {block[n] for n in new.values()} == {home}
    assert over_committed(run.state) == []


async def test_a_mustgather_gang_whose_block_filled_waits_with_a_reason_and_binds_nothing_more() -> None:
    log, waiting, bound = await crashed(*gang("train", 4, gather=MUST_GATHER_BLOCK), binds=2)
    block = {n.metadata.name: n.metadata.labels["network.topology.nvidia.com/block"] for n in NODES}
    home = block[next(iter(bound.values()))]
    others = sorted(n for n in block if block[n] == home and n not in bound.values())
    run = await restart(log, [filler(f"other-{n}", n, 8) for n in others])
    assert run.bound_since_start() == {}
    assert over_committed(run.state) == []
    assert all(key in run.state.pending for key in waiting)
    reason = pending_reasons(run)["default/train"]
    assert "MustGather" in reason or "BlockLayer" in reason


async def test_a_gang_with_nothing_bound_is_placed_whole_in_another_block() -> None:
    log, waiting, bound = await crashed(*gang("train", 4, gather=MUST_GATHER_BLOCK), binds=0)
    assert bound == {} and len(waiting) == 4
    by_name = {n.metadata.name: n for n in NODES}
    planned = sorted(set(waiting.values()))
    run = await restart(log, [cordoned(by_name[planned[0]])])
    assert over_committed(run.state) == []
    assert refused_binds(run) == []
    new = run.bound_since_start()
    assert sorted(new) == members("train", 4) and planned[0] not in new.values()
    assert len({by_name[n].metadata.labels["network.topology.nvidia.com/block"] for n in new.values()}) == 1


async def test_when_two_adopted_plans_compete_for_room_the_higher_priority_keeps_its_own() -> None:
    setup = [*gang("high", 1, priority=100, gpus=4), *gang("low", 1, priority=1, gpus=4)]
    log = await decide([*(node_event(n) for n in NODES), *setup])
    # Killed before any bind was answered: the prefix ends at the last BindRequested.
    last_request = max(i for i, e in enumerate(log) if isinstance(e, BindRequested))
    log = log[:last_request + 1]
    assert not bound_nodes(log)
    assumed = assumed_nodes(log)
    assert assumed["default/high-0"] == assumed["default/low-0"]  # bin-packed onto one node
    shared = assumed["default/high-0"]
    run = await restart(log, [filler("other", shared, 4)])  # room for one of them now
    assert over_committed(run.state) == []
    new = run.bound_since_start()
    assert new["default/high-0"] == shared
    assert new["default/low-0"] != shared
    assert [e.pod for e in run.since_start if isinstance(e, PodForgotten)] == ["default/low-0"]


async def test_a_plan_on_a_node_deleted_while_down_is_replanned() -> None:
    log, waiting, bound = await crashed(*gang("train", 4), binds=1)
    gone = sorted(set(waiting.values()))[0]
    run = await restart(log, [NodeDeleted(name=gone)])
    new = run.bound_since_start()
    assert sorted({**bound, **new}) == members("train", 4) and gone not in new.values()
    assert any("no longer exists" in e.reason for e in run.since_start if isinstance(e, PodForgotten))


async def test_a_plan_whose_podgroup_was_deleted_while_down_is_released_not_bound() -> None:
    log, waiting, _ = await crashed(*gang("train", 4), binds=1)
    run = await restart(log, [PodGroupDeleted(key="default/train")])
    assert run.bound_since_start() == {}
    assert all(key in run.state.pending for key in waiting)
    assert any("PodGroup default/train no longer exists" in e.reason
               for e in run.since_start if isinstance(e, PodForgotten))


async def test_a_mustgather_plan_split_by_relabelling_while_down_is_replanned_in_one_block() -> None:
    log, waiting, bound = await crashed(*gang("train", 3, gather=MUST_GATHER_BLOCK), binds=1)
    moved = sorted(set(waiting.values()))[0]
    by_name = {n.metadata.name: n for n in NODES}
    home = by_name[moved].metadata.labels["network.topology.nvidia.com/block"]
    elsewhere = "b2" if home != "b2" else "b0"
    relabelled = node(moved, block=elsewhere, spine="s0")
    run = await restart(log, [node_event(relabelled)])
    assert any("above its MustGather" in e.reason for e in run.since_start if isinstance(e, PodForgotten))
    blocks = {run.state.nodes[n].labels["network.topology.nvidia.com/block"]
              for n in {**bound, **run.bound_since_start()}.values()}
    assert len(run.bound_since_start()) == 2 and blocks == {home}


async def test_a_nomination_on_a_node_that_no_longer_admits_its_pod_is_cleared_in_the_state_and_the_api() -> None:
    setup: list[Event] = [*(node_event(n) for n in NODES)]
    # Two pending gangs that cannot fit now (every node is busy), each holding a nomination.
    setup += [filler(f"busy-{n.metadata.name}", n.metadata.name, 8) for n in NODES]
    setup += [*gang("kept", 1), *gang("lost", 1)]
    setup += [PodNominated(pod="default/kept-0", uid="uid-default-kept-0", node="n0", gang="default/kept"),
              PodNominated(pod="default/lost-0", uid="uid-default-lost-0", node="n1", gang="default/lost")]
    log = await decide(setup)
    run = await restart(log, [tainted(NODES[1])])
    cleared = [e for e in run.since_start if isinstance(e, NominationCleared)]
    assert [e.pod for e in cleared] == ["default/lost-0"]
    assert "untolerated taint" in cleared[0].reason
    assert ("unnominate", "default/lost-0") in run.api.calls
    assert run.state.pods["default/kept-0"].nominated_node == "n0"
    assert run.state.pods["default/lost-0"].nominated_node == ""



async def test_a_plan_killed_between_two_of_its_assumptions_is_planned_again_whole() -> None:
    log = await decide([*(node_event(n) for n in NODES), *gang("train", 2, gather=MUST_GATHER_BLOCK)])
    first = next(i for i, e in enumerate(log) if isinstance(e, PodAssumed))
    log = log[:first + 1]  # one of its two pods assumed: the plan never reached minMember
    held = assumed_nodes(log)["default/train-0"]
    by_name = {n.metadata.name: n for n in NODES}
    home = by_name[held].metadata.labels["network.topology.nvidia.com/block"]
    # Nothing else in its block can take a pod any more: holding the half plan would strand the gang.
    run = await restart(log, [cordoned(n) for n in NODES
                              if n.metadata.labels["network.topology.nvidia.com/block"] == home
                              and n.metadata.name != held])
    new = run.bound_since_start()
    assert sorted(new) == members("train", 2)
    assert len({by_name[n].metadata.labels["network.topology.nvidia.com/block"] for n in new.values()}) == 1
    assert not [k for k, p in run.state.pods.items() if p.assumed_node and not p.node_name]
    assert any("1 of minMember 2" in e.reason for e in run.since_start if isinstance(e, PodForgotten))


async def test_assumptions_of_an_earlier_term_whose_pods_another_leader_bound_are_dropped_not_bound() -> None:
    # This replica led, was killed mid-bind, and another replica took over and bound the rest elsewhere.
    # When this one leads again, its log still holds the old assumptions; the relist shows them bound.
    log, waiting, _ = await crashed(*gang("train", 4), binds=1)
    taken = sorted(n.metadata.name for n in NODES if n.metadata.name not in set(assumed_nodes(log).values()))
    elsewhere = dict(zip(sorted(waiting), taken, strict=False))
    state = Run(log).state
    run = await restart(log, [PodUpserted(pod=bound(state.pods[key].obj, node)) for key, node in elsewhere.items()])
    assert run.bound_since_start() == {}
    assert over_committed(run.state) == []
    assert {key: run.state.pods[key].node_name for key in waiting} == elsewhere
    assert not [k for k, p in run.state.pods.items() if p.assumed_node]


async def _one_per_node_plan_holds_unless(ranks: list[Event], intruder: Callable[[str], Event], reason: str) -> None:
    """A 4-pod plan of one pod per node, killed after one Binding: adopted and bound as planned on a restart;
    released with `reason` once `intruder(node)` came to one of its planned nodes while the daemon was down."""
    log, waiting, done = await crashed(*ranks, binds=1)
    assert len(set(waiting.values()) | set(done.values())) == 4  # one per node
    run = await restart(log)
    assert run.bound_since_start() == waiting
    assert not [e for e in run.since_start if isinstance(e, PodForgotten)]  # the plan held
    taken = sorted(waiting.values())[0]
    run = await restart(log, [intruder(taken)])
    assert taken not in run.bound_since_start().values()
    released = [e for e in run.since_start if isinstance(e, PodForgotten)]
    assert released and reason in released[0].reason


async def test_a_host_network_plan_is_bound_as_planned_unless_another_pod_took_its_port_while_down() -> None:
    # Its own assumed pods hold the port on their nodes: that is no conflict with themselves. A node agent
    # takes the port on one planned node while the daemon is down: the plan goes.
    ranks: list[Event] = [group_event(pod_group("ranks", min_member=4))]
    ranks += [pod_event(with_ports(pod(f"ranks-{i}", gang="ranks", gpus=2), (29500, "TCP"))) for i in range(4)]
    await _one_per_node_plan_holds_unless(
        ranks, lambda taken: PodUpserted(pod=bound(with_ports(pod("agent", gpus=0, cpu="100m", memory="64Mi",
                                                                  scheduler="default-scheduler"), (29500, "TCP")),
                                                   taken)),
        "another pod holds its host port 29500/TCP")


async def test_a_one_per_host_plan_is_bound_as_planned_unless_a_pod_its_terms_exclude_came_while_down() -> None:
    # Its own assumed pods select one another, each on its own node: no conflict with themselves. Another
    # scheduler binds a pod of the same job on one planned node while the daemon is down.
    spread: dict[str, object] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"job": "ranks"}}, "topologyKey": "kubernetes.io/hostname"}]}}
    ranks: list[Event] = [group_event(pod_group("ranks", min_member=4))]
    ranks += [pod_event(with_affinity(pod(f"ranks-{i}", gang="ranks", gpus=2, labels={"job": "ranks"}), spread))
              for i in range(4)]
    await _one_per_node_plan_holds_unless(
        ranks, lambda taken: PodUpserted(pod=bound(pod("stray", gpus=0, cpu="100m", memory="64Mi",
                                                       labels={"job": "ranks"}, scheduler="default-scheduler"),
                                                   taken)),
        "node(s) didn't match pod anti-affinity rules")


async def test_a_plan_spread_one_per_host_is_bound_as_planned_unless_a_pod_it_counts_came_while_down() -> None:
    # A DoNotSchedule spread over the host (maxSkew 1) selecting the job's own pods: one per node, and
    # empty nodes left, so the plan keeps the skew. Another scheduler binds a pod of the job on one
    # planned node while the daemon is down: that node would hold two, against empty ones.
    constraints = msgspec.convert([{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                                    "whenUnsatisfiable": "DoNotSchedule",
                                    "labelSelector": {"matchLabels": {"job": "ranks"}}}],
                                  list[TopologySpreadConstraint])
    ranks: list[Event] = [group_event(pod_group("ranks", min_member=4))]
    for i in range(4):
        obj = pod(f"ranks-{i}", gang="ranks", gpus=2, labels={"job": "ranks"})
        ranks.append(pod_event(msgspec.structs.replace(obj, spec=msgspec.structs.replace(
            obj.spec, topology_spread_constraints=constraints))))
    await _one_per_node_plan_holds_unless(
        ranks, lambda taken: PodUpserted(pod=bound(pod("stray", gpus=0, cpu="100m", memory="64Mi",
                                                       labels={"job": "ranks"}, scheduler="default-scheduler"),
                                                   taken)),
        "node(s) didn't match pod topology spread constraints")
