"""A gang parked because of the topology tree comes back when the tree changes under it.

The lost wake-up of the README's "gang stuck after a topology change": a MustGather gang whose layer
was missing (its node labels, its ClusterNetworkTopology layer, its HyperNode tier gone) waits with
"is not a layer" as its reason, parked as structural. When the layer comes back, the structure change
brings it back, but the queueing hint (it needs more than any domain of its layer holds now) skipped
the attempt, so the reason said "is not a layer" for ever and the gang was never attempted again
until its PodGroup was touched. These tests replay that order on the virtual clock: after the layer
returns, a gang that fits binds and one that never fits says so, with no change to its PodGroup.
Hints still spare the attempts that cannot change anything (an event that leaves the tree as it was).
"""

from __future__ import annotations

from events.builders import TOPOGRAPH, bound, group_event, node, node_event, pod, pod_event, pod_group
from events.model import (
    Event,
    HyperNodeUpserted,
    NetworkTopologyUpserted,
    NodeUpserted,
    VolcanoPodGroupUpserted,
)
from events.objects import (
    VOLCANO_GROUP_ANNOTATION,
    ClusterNetworkTopology,
    ClusterNetworkTopologySpec,
    ExactMatch,
    HyperNode,
    HyperNodeMember,
    HyperNodeSpec,
    MemberSelector,
    NetworkTopologyLayer,
    NetworkTopologySpec,
    ObjectMeta,
    OwnedMeta,
    VolcanoPodGroup,
    VolcanoPodGroupSpec,
)
from tests.unit.daemon.test_scheduler import Harness
from tests.unit.daemon.test_scheduler_membership import MUST_GATHER_BLOCK, blocks_of_four, reasons


def spine_only(count: int) -> list[NodeUpserted]:
    """`count` nodes that lost their block label (the BlockLayer is gone from the tree)."""
    return [node_event(node(f"n{i}", spine="s0")) for i in range(count)]


def gang(name: str, size: int, at: float = 0.0) -> list[Event]:
    return [group_event(pod_group(name, min_member=size, gather=MUST_GATHER_BLOCK)),
            *[pod_event(pod(f"{name}-{i}", gang=name), at) for i in range(size)]]


def last_reason(h: Harness, gang_key: str) -> str:
    return h.state.gangs[gang_key].last_reason


async def test_a_gang_that_never_fits_says_so_once_its_layer_labels_are_back() -> None:
    h = Harness()
    h.add(*spine_only(8), *gang("wide", 6))
    await h.settle()
    assert "'BlockLayer': is not a layer" in last_reason(h, "default/wide")

    h.add(*blocks_of_four(8))  # the labels are back: blocks of 4 nodes, the gang needs 6 in one
    await h.settle(1.0)

    last = last_reason(h, "default/wide")
    assert "is not a layer" not in last
    assert "it can never fit: MustGather at BlockLayer" in last and "4 of the 6 pods" in last
    assert [r[2] for r in h.api.reports if r[0] == "default/wide"][-1] == last  # and it was reported


async def test_a_gang_that_fits_binds_once_its_layer_labels_are_back_one_node_at_a_time() -> None:
    h = Harness()
    h.add(*spine_only(8), *gang("job", 4))
    await h.settle()
    assert "is not a layer" in last_reason(h, "default/job")
    for i, labelled in enumerate(blocks_of_four(8)):  # `kubectl label` patches the nodes one by one
        h.add(labelled)
        await h.settle(float(i + 1))
    assert sorted(h.bound_pods()) == [f"default/job-{i}" for i in range(4)]
    assert len({h.bound_pods()[f"default/job-{i}"] for i in range(4)}) == 4


async def test_a_gang_that_never_fits_says_so_once_its_cluster_network_topology_layer_is_back() -> None:
    h = Harness()

    def cnt(*layers: tuple[str, str, str]) -> NetworkTopologyUpserted:
        spec = [NetworkTopologyLayer(topology_layer=layer, label_key=[key] if key else [], parent_topology_layer=parent)
                for layer, key, parent in layers]
        return NetworkTopologyUpserted(topology=ClusterNetworkTopology(
            metadata=ObjectMeta(name="default"), spec=ClusterNetworkTopologySpec(network_topology_spec=spec)))

    spine = ("SpineLayer", TOPOGRAPH + "spine", "")
    h.add(*blocks_of_four(8), cnt(spine, ("NodeTopologyLayer", "", "SpineLayer")))
    h.add(*gang("wide", 6), *gang("job", 4))
    await h.settle()
    assert "is not a layer" in last_reason(h, "default/wide") and "is not a layer" in last_reason(h, "default/job")

    h.add(cnt(spine, ("BlockLayer", TOPOGRAPH + "block", "SpineLayer"), ("NodeTopologyLayer", "", "BlockLayer")))
    await h.settle(1.0)

    assert sorted(h.bound_pods()) == [f"default/job-{i}" for i in range(4)]
    assert "it can never fit: MustGather at BlockLayer" in last_reason(h, "default/wide")


def hypernode(name: str, tier: int, tier_name: str, kind: str, members: list[str]) -> HyperNodeUpserted:
    return HyperNodeUpserted(hyper_node=HyperNode(
        metadata=ObjectMeta(name=name), spec=HyperNodeSpec(tier=tier, tier_name=tier_name, members=[
            HyperNodeMember(type=kind, selector=MemberSelector(exact_match=ExactMatch(name=n))) for n in members])))


def volcano_gang(name: str, size: int, *, tier: int | None = None, tier_name: str = "") -> list[Event]:
    topology = NetworkTopologySpec(mode="hard", highest_tier_allowed=tier, highest_tier_name=tier_name)
    group = VolcanoPodGroup(metadata=OwnedMeta(name=name, namespace="default", uid=f"uid-vpg-{name}"),
                            spec=VolcanoPodGroupSpec(min_member=size, network_topology=topology))
    return [VolcanoPodGroupUpserted(pod_group=group),
            *[pod_event(pod(f"{name}-{i}", annotations={VOLCANO_GROUP_ANNOTATION: name})) for i in range(size)]]


async def test_volcano_hard_tier_gangs_come_back_when_a_hypernode_of_their_tier_appears() -> None:
    h = Harness()
    h.add(*[node_event(node(f"n{i}")) for i in range(8)], hypernode("spine", 2, "spine", "Node",
                                                                     [f"n{i}" for i in range(8)]))
    h.add(*volcano_gang("by-number", 4, tier=1), *volcano_gang("by-name", 2, tier_name="leaf"),
          *volcano_gang("wide", 6, tier=1))
    await h.settle()
    for name in ("by-number", "by-name", "wide"):
        assert last_reason(h, f"default/{name}"), name  # each waits, saying its tier is missing
    assert not h.bound_pods()

    # The tier-1 HyperNodes appear: leaves of 4 nodes.
    h.add(hypernode("leaf-a", 1, "leaf", "Node", [f"n{i}" for i in range(4)]),
          hypernode("leaf-b", 1, "leaf", "Node", [f"n{i}" for i in range(4, 8)]))
    await h.settle(1.0)

    bound = h.bound_pods()
    assert sorted(k for k in bound if "by-" in k) == sorted(
        [f"default/by-number-{i}" for i in range(4)] + [f"default/by-name-{i}" for i in range(2)])
    assert "it can never fit" in last_reason(h, "default/wide") and "4 of the 6 pods" in last_reason(h, "default/wide")


async def test_a_node_event_that_leaves_the_tree_as_it_was_does_not_bring_back_a_gang_that_never_fits() -> None:
    h = Harness()
    h.add(*blocks_of_four(8), *gang("wide", 6))
    await h.settle()
    assert "it can never fit" in last_reason(h, "default/wide")
    attempts = h.scheduler.stats.attempts
    said = reasons(h, "default/wide")

    relabelled = node("n0", block="b0", spine="s0", labels={"team": "ml"})  # a label that is no topology layer
    h.add(node_event(relabelled), pod_event(pod("lone"), 1.0))
    await h.settle(1.0)

    assert h.scheduler.stats.attempts == attempts + 1  # the lone pod only
    assert h.scheduler.stats.skipped == 1  # the hint spared the gang: its layer and blocks are as they were
    assert reasons(h, "default/wide") == said


async def test_a_gang_that_never_fits_says_what_is_true_when_its_blocks_grow() -> None:
    h = Harness()
    h.add(*blocks_of_four(8), *gang("wide", 6))
    await h.settle()
    assert "4 of the 6 pods" in last_reason(h, "default/wide")
    h.add(*[node_event(node(f"n{i}", block="b0", spine="s0")) for i in range(8, 10)])  # b0 grows to 6 nodes
    h.add(*[pod_event(pod(f"filler-{i}", gpus=8), 1.0) for i in range(8)])  # ... but the cluster is full
    await h.settle(1.0)
    assert "it can never fit" not in last_reason(h, "default/wide")


async def test_a_gang_parked_for_room_says_its_layer_is_gone_when_its_labels_are_removed() -> None:
    h = Harness()
    h.add(*blocks_of_four(4), *[pod_event(pod(f"filler-{i}", gpus=8), 0.0) for i in range(4)])
    await h.settle()
    h.add(*gang("job", 4, at=1.0))
    await h.settle(1.0)
    assert "is not a layer" not in last_reason(h, "default/job")
    h.add(pod_event(pod("small", gpus=0, cpu="1"), 1.5))
    await h.settle(1.5)
    small = h.bound_pods()["default/small"]
    h.add(pod_event(bound(pod("small", gpus=0, cpu="1"), small, phase="Succeeded"), 2.0))
    await h.settle(2.0)  # room freed elsewhere: the hint works out (and keeps) the gang's need, and spares it
    assert h.scheduler.stats.skipped == 1

    h.add(*spine_only(4))  # the block labels are removed
    await h.settle(3.0)

    assert "'BlockLayer': is not a layer" in last_reason(h, "default/job")
    assert h.scheduler.stats.internal_errors == 0
