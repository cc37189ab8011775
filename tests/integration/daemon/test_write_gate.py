"""The write gate over real HTTP: a write refused at the last moment leaves nothing at the API server,
and one waiting for its answer is cancelled the moment the lease runs out."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest

from daemon.config import decode_config
from daemon.kube.client import connect, user_agent
from daemon.kube.cluster_api import KubeClusterAPI
from daemon.kube.leader import NotLeader, WriteGate
from devcluster.cluster import DevCluster
from tests.integration.daemon.harness import config_for, nodes, pod

BINDING = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p", "namespace": "default"},
           "target": {"apiVersion": "v1", "kind": "Node", "name": "node-000"}}
BINDING_PATH = "/api/v1/namespaces/default/pods/p/binding"


class ClosesAfterChecks(WriteGate):
    """A gate that says yes `opens` times, then no: the lease runs out between two of its questions."""

    def __init__(self, opens: int) -> None:
        super().__init__(renew_deadline=3600.0)
        self.renewed(time.monotonic())
        self.opens = opens

    def check(self) -> None:
        self.opens -= 1
        if self.opens < 0:
            raise NotLeader("not the leader (no valid lease): refusing to write")


async def test_a_request_whose_gate_closes_before_its_bytes_leave_reaches_nothing(tmp_path: Path) -> None:
    async with DevCluster(kubelet=False) as cluster:
        cluster.load_objects([*nodes(1), pod("p")])
        config = decode_config(config_for(cluster.write_kubeconfig(tmp_path / "kubeconfig"), tmp_path / "log",
                                          election=True, identity="replica-x"))
        async with connect(config) as client:
            # `request` itself asks nothing up front: only the hooks on the socket writes can refuse.
            with pytest.raises(NotLeader):
                await client.request("POST", BINDING_PATH, body=BINDING, gate=ClosesAfterChecks(0))
            assert cluster.audit.since() == []
            # Headers built while the lease was held, the body about to be written after it ran out.
            with pytest.raises(NotLeader):
                await client.request("POST", BINDING_PATH, body=BINDING, gate=ClosesAfterChecks(1))
            assert cluster.audit.since() == []
            assert not cluster.store.get("pods", "p", "default")["spec"].get("nodeName")
            # The same request under an open gate goes out, and the server learns who sent it.
            response = await client.request("POST", BINDING_PATH, body=BINDING, gate=ClosesAfterChecks(100))
            assert response.ok
            (record,) = cluster.audit.since()
            assert (record.path, record.status) == (BINDING_PATH, 201)
            assert record.user_agent == user_agent(config) and record.user_agent.endswith("(replica-x)")


async def test_a_binding_waiting_for_its_answer_is_cancelled_when_the_lease_runs_out(tmp_path: Path) -> None:
    async with DevCluster(kubelet=False) as cluster:
        cluster.load_objects([*nodes(1), pod("p")])
        cluster.faults.add_latency(30.0, verb="create", path="/binding")  # the answer would take 30 s
        config = decode_config(config_for(cluster.write_kubeconfig(tmp_path / "kubeconfig"), tmp_path / "log",
                                          election=True))
        gate = WriteGate(renew_deadline=2.0)  # ample for the request to be sent first, even on a loaded machine
        async with connect(config) as client:
            api = KubeClusterAPI(client, gate, bind_concurrency=4)
            gate.renewed(time.monotonic())
            uid = str(cluster.store.get("pods", "p", "default")["metadata"]["uid"])
            with anyio.fail_after(10):
                outcome = await api.bind("default/p", uid, "node-000")
            assert outcome.status == "failed" and outcome.retriable
            assert "lease ran out while the write was in flight" in outcome.reason
