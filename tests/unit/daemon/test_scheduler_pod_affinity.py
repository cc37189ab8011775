"""The loop and required podAffinity: a pod waiting for the pods its terms select is placed as soon as
one of them runs, with no other change in the cluster (kube-scheduler requeues it on that pod's add)."""

from __future__ import annotations

import msgspec

from events.builders import bound, node, node_event, pod, pod_event
from events.objects import Affinity

from .test_scheduler import Harness


async def test_a_pod_waiting_for_its_affinity_partner_is_placed_once_the_partner_runs() -> None:
    h = Harness()
    waiter = pod("reader", cpu="1", gpus=0, memory="1Gi")
    affinity = msgspec.convert({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "cache"}}, "topologyKey": "kubernetes.io/hostname"}]}}, Affinity)
    waiter = msgspec.structs.replace(waiter, spec=msgspec.structs.replace(waiter.spec, affinity=affinity))
    h.add(node_event(node("n0", cpu="8", gpus=0)), node_event(node("n1", cpu="8", gpus=0)), pod_event(waiter))
    await h.settle()
    assert h.bound_pods() == {}  # no cache pod runs anywhere
    attempts = h.scheduler.stats.attempts
    await h.settle(10.0)
    assert h.scheduler.stats.attempts == attempts  # parked, not retried while nothing changes
    h.clock.advance_to(20.0)
    partner = pod("cache", cpu="1", gpus=0, memory="1Gi", scheduler="default-scheduler", labels={"app": "cache"})
    h.add(pod_event(bound(partner, "n1")))
    await h.settle()
    assert h.bound_pods() == {"default/reader": "n1"}
