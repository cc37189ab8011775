"""The loop and host ports: a pod whose port is held on every node it fits waits with kube-scheduler's
reason, and is tried again as soon as a holder leaves (no periodic retry in these tests)."""

from __future__ import annotations

from events.builders import bound, group_event, pod, pod_event, pod_group
from events.model import PodDeleted
from tests.unit.placement.test_host_ports import NODE_PORTS, with_ports

from .test_scheduler import Harness, nodes


async def test_a_pod_waits_for_its_host_port_and_goes_once_the_holder_leaves() -> None:
    h = Harness()
    h.add(*nodes(2),
          *(pod_event(bound(with_ports(pod(f"agent-{i}", gpus=0, scheduler="other"), (9100, "TCP")), f"n{i}"))
            for i in range(2)),
          pod_event(with_ports(pod("exporter", gpus=1), (9100, "TCP"))))
    await h.settle()
    assert "default/exporter" not in h.bound_pods()
    assert NODE_PORTS in h.scheduler.shown_reason("default/exporter")
    h.add(PodDeleted(key="default/agent-1", uid=""))
    await h.settle()
    assert h.bound_pods()["default/exporter"] == "n1"


async def test_a_host_network_gang_binds_one_pod_per_node_where_its_gpus_alone_would_share_one() -> None:
    h = Harness()
    h.add(*nodes(4), group_event(pod_group("ranks", min_member=4)),
          *(pod_event(with_ports(pod(f"ranks-{i}", gang="ranks", gpus=2), (29500, "TCP"))) for i in range(4)))
    await h.settle()
    placed = h.bound_pods()
    assert len(placed) == 4 and len(set(placed.values())) == 4
