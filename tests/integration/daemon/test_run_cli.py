"""`toposched run` as a process: it schedules, and SIGTERM stops it cleanly with the lease released."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import anyio

from devcluster.cluster import DevCluster
from tests.integration.daemon.harness import bound_count, gang, nodes, pod_names, wait_until


async def test_run_schedules_and_stops_cleanly_on_sigterm_releasing_its_lease(tmp_path: Path) -> None:
    async with DevCluster() as cluster:
        cluster.load_objects(nodes(4))
        kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
        command = [sys.executable, "-m", "daemon", "run", "--kubeconfig", str(kubeconfig),
                   "--log-dir", str(tmp_path / "log"), "--address", "127.0.0.1:0",
                   "--lease-namespace", "kube-system", "--identity", "cli-test", "--log-level", "warning"]
        async with await anyio.open_process(command) as process:
            try:
                job = gang("cli", 2)
                cluster.load_objects(job)
                await wait_until(lambda: bound_count(cluster, pod_names(job)) == 2, within=20, what="gang bound")
                lease = cluster.store.get("leases.coordination.k8s.io", "toposched", "kube-system")
                assert lease["spec"]["holderIdentity"] == "cli-test"
                process.send_signal(signal.SIGTERM)
                with anyio.fail_after(20):
                    code = await process.wait()
                assert code == 0
            finally:
                if process.returncode is None:
                    process.kill()
        lease = cluster.store.get("leases.coordination.k8s.io", "toposched", "kube-system")
        assert lease["spec"].get("holderIdentity", "") == ""
