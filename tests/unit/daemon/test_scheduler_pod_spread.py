"""The loop and DoNotSchedule spread constraints: a pod refused for the skew its domain would make is
placed as soon as a pod it counts lands in another domain, or leaves its own, with no other change in
the cluster (kube-scheduler requeues it on those pods' events)."""

from __future__ import annotations

import msgspec

from events.builders import bound, node, node_event, pod, pod_event
from events.model import Event, PodDeleted
from events.objects import Pod, TopologySpreadConstraint

from .test_scheduler import Harness

ZONE = "topology.kubernetes.io/zone"


def spreading(name: str) -> Pod:
    obj = pod(name, cpu="1", gpus=0, memory="1Gi", labels={"app": "web"})
    constraints = msgspec.convert([{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
                                    "labelSelector": {"matchLabels": {"app": "web"}}}], list[TopologySpreadConstraint])
    return msgspec.structs.replace(obj, spec=msgspec.structs.replace(obj.spec, topology_spread_constraints=constraints))


def zone_nodes() -> list[Event]:
    # Zone b's only node is full (of another scheduler's pod that the spread does not count).
    return [node_event(node("a0", cpu="8", gpus=0, labels={ZONE: "a"})),
            node_event(node("b0", cpu="8", gpus=0, labels={ZONE: "b"})),
            pod_event(bound(pod("full", cpu="8", gpus=0, memory="1Gi", scheduler="default-scheduler"), "b0"))]


async def refused_for_skew() -> Harness:
    """web-1 waits: zone a holds web-0, zone b none (and no room): 1 + 1 - 0 is past maxSkew 1."""
    h = Harness()
    h.add(*zone_nodes())
    h.add(pod_event(bound(pod("web-0", cpu="1", gpus=0, memory="1Gi", labels={"app": "web"},
                              scheduler="default-scheduler"), "a0")))
    h.add(pod_event(spreading("web-1")))
    await h.settle()
    assert h.bound_pods() == {}
    return h


async def test_a_pod_refused_for_skew_is_placed_once_a_pod_it_counts_lands_in_the_emptier_zone() -> None:
    h = await refused_for_skew()
    attempts = h.scheduler.stats.attempts
    await h.settle(10.0)
    assert h.scheduler.stats.attempts == attempts  # parked, not retried while nothing changes
    h.clock.advance_to(20.0)
    h.add(pod_event(bound(pod("web-b", cpu="0", gpus=0, memory="0", labels={"app": "web"},
                              scheduler="default-scheduler"), "b0")))
    await h.settle()
    assert h.bound_pods() == {"default/web-1": "a0"}


async def test_a_pod_refused_for_skew_is_placed_once_a_pod_it_counts_leaves_its_zone() -> None:
    h = await refused_for_skew()
    h.clock.advance_to(20.0)
    h.add(PodDeleted(key="default/web-0"))
    await h.settle()
    assert h.bound_pods() == {"default/web-1": "a0"}


async def test_a_pod_refused_everywhere_is_woken_by_a_deletion_that_moves_a_count_and_by_no_other() -> None:
    # Zones a and b hold one web pod each; with minDomains 3 the global minimum is 0, so every node is
    # past maxSkew (1 + 1 - 0) whatever its room: refused as kube-scheduler refuses it, on no capacity.
    h = Harness()
    h.add(node_event(node("a0", cpu="8", gpus=0, labels={ZONE: "a"})),
          node_event(node("b0", cpu="8", gpus=0, labels={ZONE: "b"})))
    for name, where in (("web-a", "a0"), ("web-b", "b0")):
        h.add(pod_event(bound(pod(name, cpu="1", gpus=0, memory="1Gi", labels={"app": "web"},
                                  scheduler="default-scheduler"), where)))
    waiter = spreading("web-1")
    constraints = [msgspec.structs.replace(c, min_domains=3) for c in waiter.spec.topology_spread_constraints]
    h.add(pod_event(msgspec.structs.replace(waiter, spec=msgspec.structs.replace(
        waiter.spec, topology_spread_constraints=constraints))))
    h.add(pod_event(pod("never-placed", cpu="64", gpus=0, memory="1Gi")))  # ours, fits nowhere
    await h.settle()
    assert h.bound_pods() == {}
    attempts = h.scheduler.stats.attempts
    h.clock.advance_to(20.0)
    h.add(PodDeleted(key="default/never-placed"))  # pending: it was counted nowhere
    await h.settle()
    assert h.scheduler.stats.attempts == attempts
    h.clock.advance_to(40.0)
    h.add(PodDeleted(key="default/web-a"))  # zone a holds none now: 0 + 1 - 0 fits there
    await h.settle()
    assert h.bound_pods() == {"default/web-1": "a0"}
