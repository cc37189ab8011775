"""The real daemon against devcluster over HTTP: gangs bind all-or-nothing, once, whatever the API does."""

from __future__ import annotations

from pathlib import Path

from devcluster.cluster import DevCluster
from events.log import EventLog
from events.model import NodeUpserted, PodDeleted, PodUpserted, decode_event
from state.cluster import ClusterState
from tests.integration.daemon.harness import (
    bindings_in_logs,
    bound_count,
    daemons,
    gang,
    node_of,
    nodes,
    pod,
    pod_names,
    wait_until,
)


async def test_gang_binds_all_or_nothing_and_waits_for_room(tmp_path: Path) -> None:
    async with DevCluster() as cluster:
        cluster.load_objects(nodes(3))
        async with daemons(cluster, tmp_path) as (running,):
            big = gang("big", 4)
            cluster.load_objects(big)
            small = gang("small", 2)
            cluster.load_objects(small)
            await wait_until(lambda: bound_count(cluster, pod_names(small)) == 2, what="small gang bound")
            state = running.daemon.state
            assert state is not None
            await wait_until(lambda: state.gangs["default/big"].last_reason != "", what="big gang reason")
            assert bound_count(cluster, pod_names(big)) == 0
            # Room for the big gang arrives: all four bind together.
            cluster.load_objects(nodes(6)[3:])
            await wait_until(lambda: bound_count(cluster, pod_names(big)) == 4, what="big gang bound")
            assert len({node_of(cluster, name) for name in pod_names(big)}) == 4
        counts = bindings_in_logs([tmp_path / "log-0"])
        assert all(counts[f"default/{name}"] == 1 for name in pod_names(big) + pod_names(small))


async def test_binding_storms_of_429_and_500_are_ridden_out(tmp_path: Path) -> None:
    async with DevCluster() as cluster:
        cluster.load_objects(nodes(8))
        cluster.faults.fail_next(6, 429, verb="create", path="/binding", retry_after=0)
        storm = cluster.faults.fail_fraction(0.4, 500, verb="create", path="/binding")
        async with daemons(cluster, tmp_path):
            job = gang("stormy", 8)
            cluster.load_objects(job)
            await wait_until(lambda: bound_count(cluster, pod_names(job)) == 8, within=20, what="gang bound")
            assert storm.fired > 0
        counts = bindings_in_logs([tmp_path / "log-0"])
        assert sorted(counts.values()) == [1] * 8


async def test_a_dropped_watch_and_a_410_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    async with DevCluster() as cluster:
        cluster.load_objects(nodes(8))
        async with daemons(cluster, tmp_path) as (running,):
            first = gang("first", 2)
            cluster.load_objects(first)
            await wait_until(lambda: bound_count(cluster, pod_names(first)) == 2, what="first gang bound")
            state = running.daemon.state
            assert state is not None
            # The pod watch cannot come back for a while; meanwhile a pod is deleted and a gang arrives.
            outage = cluster.faults.fail_fraction(1.0, 503, verb="watch", path="/pods")
            cluster.faults.drop_watches()
            cluster.store.delete("pods", "first-1", "default", grace_period_seconds=0)
            second = gang("second", 3)
            cluster.load_objects(second)
            await wait_until(lambda: outage.fired >= 2, what="watch reconnects refused")
            cluster.faults.remove(outage)
            cluster.faults.fail_next(1, 410, verb="watch", path="/pods")
            await wait_until(lambda: bound_count(cluster, pod_names(second)) == 3, what="second gang bound")
            await wait_until(lambda: "default/first-1" not in state.pods, what="deletion seen after the relist")
            assert "default/first-0" in state.pods
            watchers = running.daemon.watchers
            assert watchers is not None
            pod_watcher = next(w for w in watchers.watchers if w.info.name == "Pod")
            assert pod_watcher.relists >= 2  # the first list, then the relist after 410 (or the long outage)
        counts = bindings_in_logs([tmp_path / "log-0"])
        assert all(value == 1 for value in counts.values())
        assert set(counts) >= {f"default/{name}" for name in pod_names(first) + pod_names(second)}


async def test_a_missing_crd_is_not_fatal_and_is_picked_up_when_it_appears(tmp_path: Path) -> None:
    async with DevCluster() as cluster:
        cluster.load_objects(nodes(4))
        missing = cluster.faults.fail_fraction(1.0, 404, verb="list", path="/hypernodes")
        async with daemons(cluster, tmp_path) as (running,):
            watchers = running.daemon.watchers
            assert watchers is not None
            hypernodes = next(w for w in watchers.watchers if w.info.name == "HyperNode")
            await wait_until(lambda: running.daemon.health.ready, what="ready without the CRD")
            assert hypernodes.missing_crd
            job = gang("despite", 2)
            cluster.load_objects(job)
            await wait_until(lambda: bound_count(cluster, pod_names(job)) == 2, what="gang bound")
            cluster.faults.remove(missing)
            await wait_until(lambda: not hypernodes.missing_crd, within=5, what="the CRD picked up")


async def test_a_pod_of_several_megabytes_comes_through_the_watch(tmp_path: Path) -> None:
    async with DevCluster() as cluster:
        cluster.load_objects(nodes(2))
        async with daemons(cluster, tmp_path) as (running,):
            heavy = pod("heavy", 1)
            heavy["metadata"]["annotations"] = {"example.com/blob": "x" * (3 * 1024 * 1024)}
            cluster.load_objects([heavy])
            await wait_until(lambda: bool(node_of(cluster, "heavy")), what="the large pod bound")
            state = running.daemon.state
            assert state is not None and "default/heavy" in state.pods


async def test_a_watch_resumed_after_its_history_was_compacted_relists_and_goes_on(tmp_path: Path) -> None:
    async with DevCluster(history=20) as cluster:
        cluster.load_objects(nodes(8))
        async with daemons(cluster, tmp_path) as (running,):
            watchers = running.daemon.watchers
            assert watchers is not None
            pod_watcher = next(w for w in watchers.watchers if w.info.name == "Pod")
            await wait_until(lambda: pod_watcher.relists == 1 and bool(pod_watcher.resource_version),
                             what="the first list")
            outage = cluster.faults.fail_fraction(1.0, 503, verb="watch", path="/pods")
            cluster.faults.drop_watches()
            await wait_until(lambda: outage.fired >= 1, what="a refused watch")
            job = gang("after-compaction", 4)
            cluster.load_objects(job)
            for index in range(30):  # push the history window past the version the watcher holds
                cluster.load_objects([pod(f"other-{index}", 0, scheduler="someone-else")])
            cluster.faults.remove(outage)
            await wait_until(lambda: bound_count(cluster, pod_names(job)) == 4, what="gang bound after the relist")
            assert pod_watcher.relists >= 2


async def test_a_gang_whose_binds_partly_fail_is_completed_later_without_binding_anyone_twice(
    tmp_path: Path,
) -> None:
    async with DevCluster() as cluster:
        cluster.load_objects(nodes(8))
        # One member's Binding fails more times than a bind retries (6): that bind fails, the others land.
        failing = cluster.faults.fail_next(6, 500, verb="create", path="/pods/partial-2/binding")
        async with daemons(cluster, tmp_path) as (running,):
            job = gang("partial", 4)
            cluster.load_objects(job)
            await wait_until(lambda: bound_count(cluster, pod_names(job)) == 4, within=20, what="gang completed")
            assert failing.fired == 6
            scheduler = running.daemon.scheduler
            assert scheduler is not None and scheduler.stats.bind_failures >= 1
        counts = bindings_in_logs([tmp_path / "log-0"])
        assert sorted(counts[f"default/{name}"] for name in pod_names(job)) == [1, 1, 1, 1]


async def test_a_restart_records_again_only_what_changed_while_the_daemon_was_down(tmp_path: Path) -> None:
    async with DevCluster() as cluster:
        cluster.load_objects(nodes(8))
        first = gang("first", 4)
        cluster.load_objects(first)
        first_keys = [f"default/{name}" for name in pod_names(first)]

        def version(plural: str, name: str) -> str:
            return str((cluster.store.find(plural, name, "default") or {}).get("metadata", {}).get("resourceVersion"))

        def caught_up(state: ClusterState | None) -> bool:
            """The daemon holds the gang's pods (bound, Running) and its PodGroup (its status written) as the
            API shows them now."""
            group = state.pod_groups.get("default/first") if state is not None else None
            return (state is not None and group is not None and group.metadata.resource_version == version(
                "podgroups.scheduling.sigs.k8s.io", "first") and all(
                key in state.pods and state.pods[key].obj.status.phase == "Running"
                and state.pods[key].obj.metadata.resource_version == version("pods", key.split("/")[1])
                for key in first_keys))

        async with daemons(cluster, tmp_path) as (running,):
            await wait_until(lambda: caught_up(running.daemon.state), what="the daemon caught up with the first gang")
        with EventLog.open_readonly(tmp_path / "log-0") as log:
            stopped_at = log.last_seq
        # While the daemon is down, one pod goes and another gang comes.
        cluster.store.delete("pods", "first-3", "default", grace_period_seconds=0)
        second = gang("second", 2)
        cluster.load_objects(second)
        async with daemons(cluster, tmp_path) as (running,):
            await wait_until(lambda: bound_count(cluster, pod_names(second)) == 2, what="second gang bound")
            watchers = running.daemon.watchers
            assert watchers is not None
            held = {watcher.info.name: watcher.unchanged_listed for watcher in watchers.watchers}
            assert held["Node"] == 8 and held["Pod"] == 3 and held["PodGroup"] == 1  # as they were: left out
            state = running.daemon.state
            assert state is not None
            assert "default/first-3" not in state.pods and all(key in state.pods for key in first_keys[:3])
        with EventLog.open_readonly(tmp_path / "log-0") as log:
            after = [decode_event(payload) for _, payload in log.read_raw(stopped_at + 1)]
        upserted = {event.pod.metadata.name for event in after if isinstance(event, PodUpserted)}
        assert upserted >= set(pod_names(second)) and not upserted & set(pod_names(first)[:3])
        assert not any(isinstance(event, NodeUpserted) for event in after)
        assert any(isinstance(event, PodDeleted) and event.key == "default/first-3" for event in after)
