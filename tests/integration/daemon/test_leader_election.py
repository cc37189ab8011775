"""Two daemons with leader election against one devcluster: one binds, the other takes over when it dies."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from devcluster.cluster import DevCluster
from devcluster.watch import WatchEvent
from tests.integration.daemon.harness import bindings_in_logs, bound_count, daemons, gang, nodes, pod_names, wait_until
from tests.integration.daemon.processes import LEASE, lease_time


def lease_writes(cluster: DevCluster) -> list[dict[str, Any]]:
    """A live list of the Lease's spec after every write of it, in order."""
    writes: list[dict[str, Any]] = []

    def seen(event: WatchEvent) -> None:
        if event.key == LEASE[0] and event.obj["metadata"]["name"] == LEASE[1]:
            writes.append(dict(event.obj.get("spec") or {}))

    cluster.store.subscribe(seen)
    return writes


async def test_only_the_leader_binds_and_the_standby_takes_over_when_it_dies(tmp_path: Path) -> None:
    async with DevCluster() as cluster:
        cluster.load_objects(nodes(16))
        lease = lease_writes(cluster)
        async with daemons(cluster, tmp_path, count=2, election=True) as pair:
            await wait_until(lambda: any(d.is_leader for d in pair), what="a leader")
            leader = next(d for d in pair if d.is_leader)
            standby = next(d for d in pair if d is not leader)
            assert standby.daemon.health.role == "standby"
            leader_bound, standby_bound = leader.recorded_bound(), standby.recorded_bound()
            first = gang("first", 4)
            cluster.load_objects(first)
            await wait_until(lambda: bound_count(cluster, pod_names(first)) == 4, what="first gang bound")
            # The server holds the bindings (and the watch may show them) before the leader has their
            # answers and logs PodBound: kill it only once it has logged all four.
            await wait_until(lambda: leader_bound >= {f"default/{name}" for name in pod_names(first)},
                             what="the leader to record the first gang bound")
            assert standby.daemon.metrics.binds.labels("bound").value == 0
            assert not standby.is_leader

            leader.kill()
            await wait_until(lambda: standby.is_leader, within=30, what="the standby to take over")
            old = leader.daemon.elector.identity  # type: ignore[union-attr]
            new = standby.daemon.elector.identity  # type: ignore[union-attr]
            assert cluster.store.get(*LEASE)["spec"]["holderIdentity"] == new
            # Not before the dead leader's lease (1 s) ran out from its last renewal, whenever that was.
            renewed = max(lease_time(w["renewTime"]) for w in lease if w.get("holderIdentity") == old)
            acquired = min(lease_time(w["acquireTime"]) for w in lease if w.get("holderIdentity") == new)
            assert acquired - renewed >= 0.95, f"taken {acquired - renewed:.3f}s after the last renewal"

            second = gang("second", 4)
            cluster.load_objects(second)
            await wait_until(lambda: standby_bound >= {f"default/{name}" for name in pod_names(second)},
                             what="the new leader to record the second gang bound")
        counts = bindings_in_logs([tmp_path / "log-0", tmp_path / "log-1"])
        assert {pod: n for pod, n in counts.items() if n != 1} == {}
        assert sorted(counts) == sorted(f"default/{name}" for name in pod_names(first) + pod_names(second))


async def test_a_clean_shutdown_releases_the_lease_for_an_immediate_takeover(tmp_path: Path) -> None:
    async with DevCluster() as cluster:
        cluster.load_objects(nodes(4))
        async with daemons(cluster, tmp_path, count=2, election=True,
                           leader_election={"enabled": True, "lease_namespace": "kube-system",
                                            "lease_duration_seconds": 15, "renew_deadline_seconds": 10,
                                            "retry_period_seconds": 0.1}) as pair:
            await wait_until(lambda: any(d.is_leader for d in pair), what="a leader")
            leader = next(d for d in pair if d.is_leader)
            standby = next(d for d in pair if d is not leader)
            stopped_at = time.monotonic()
            leader.stop.set()
            await wait_until(lambda: standby.is_leader, within=10, what="the standby to take over")
            # Sooner than the 15 s lease: the lease was released, not left to expire.
            assert time.monotonic() - stopped_at < 10.0
            await wait_until(leader.finished.is_set, what="the old leader to exit")
            assert leader.exit_code == 0
