"""Two daemons with leader election against one devcluster: one binds, the other takes over when it dies."""

from __future__ import annotations

import time
from pathlib import Path

from devcluster.cluster import DevCluster
from tests.integration.daemon.harness import bindings_in_logs, bound_count, daemons, gang, nodes, pod_names, wait_until


async def test_only_the_leader_binds_and_the_standby_takes_over_when_it_dies(tmp_path: Path) -> None:
    async with DevCluster() as cluster:
        cluster.load_objects(nodes(16))
        async with daemons(cluster, tmp_path, count=2, election=True) as pair:
            await wait_until(lambda: any(d.is_leader for d in pair), what="a leader")
            leader = next(d for d in pair if d.is_leader)
            standby = next(d for d in pair if d is not leader)
            assert standby.daemon.health.role == "standby"
            first = gang("first", 4)
            cluster.load_objects(first)
            await wait_until(lambda: bound_count(cluster, pod_names(first)) == 4, what="first gang bound")
            # The server holds the bindings before the leader logs PodBound: kill it only once it has.
            leader_state = leader.daemon.state
            assert leader_state is not None
            await wait_until(lambda: all(leader_state.pods[f"default/{name}"].node_name for name in pod_names(first)),
                             what="the leader to record the first gang bound")
            assert standby.daemon.metrics.binds.labels("bound")._value.get() == 0
            assert not standby.is_leader

            killed_at = time.monotonic()
            leader.kill()
            await wait_until(lambda: standby.is_leader, within=30, what="the standby to take over")
            took_over = time.monotonic() - killed_at
            lease = cluster.store.get("leases.coordination.k8s.io", "toposched", "kube-system")
            assert lease["spec"]["holderIdentity"] == standby.daemon.elector.identity  # type: ignore[union-attr]
            # Not before the dead leader's lease ran out (1 s); how soon after is a matter of load, not correctness.
            assert took_over >= 0.8

            second = gang("second", 4)
            cluster.load_objects(second)
            await wait_until(lambda: bound_count(cluster, pod_names(second)) == 4, what="second gang bound")
        counts = bindings_in_logs([tmp_path / "log-0", tmp_path / "log-1"])
        assert {pod: n for pod, n in counts.items() if n != 1} == {}
        assert len(counts) == 8


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
