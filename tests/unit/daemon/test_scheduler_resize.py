"""The loop and in-place pod resize: a pod waiting for cpu that a resize down is giving back is placed
as soon as the kubelet reports the new requests applied, with nothing else changing in the cluster."""

from __future__ import annotations

from events.builders import node, node_event, pod, pod_event
from events.model import PodUpserted
from tests.unit.state.test_resize import decoded, running

from .test_scheduler import Harness


async def test_a_pod_parked_for_cpu_is_placed_once_a_resize_down_is_applied() -> None:
    h = Harness()
    h.add(node_event(node("n0", cpu="8", gpus=0)),
          PodUpserted(pod=decoded(running("shrinking", "2", allocated="2", applied="6"))),
          pod_event(pod("new", cpu="4", gpus=0, memory="1Gi")))
    await h.settle()
    assert h.bound_pods() == {}  # 6 of 8 cpus are still in use: it waits
    attempts = h.scheduler.stats.attempts
    await h.settle(10.0)
    assert h.scheduler.stats.attempts == attempts  # parked, not retried while nothing changes
    h.clock.advance_to(20.0)
    h.add(PodUpserted(pod=decoded(running("shrinking", "2"))))  # the kubelet applied the resize
    await h.settle()
    assert h.bound_pods() == {"default/new": "n0"}
