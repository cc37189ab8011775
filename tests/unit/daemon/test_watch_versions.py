"""A kind served under several apiVersions (Kueue's Topology: v1beta2, or v1beta1 on Kueue before v0.15;
Kubernetes' PodGroup: v1beta1 or v1alpha3 on 1.37, v1alpha2 on 1.36)
is listed and watched at the first one the API server serves, and missing only when none is."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from daemon.config import TimeoutConfig
from daemon.kube.client import Response
from daemon.kube.watch import CrdMissing, KindWatcher
from daemon.offline.simulator import VirtualClock
from daemon.scheduling.journal import Journal
from events.ingest import KIND_BY_NAME
from state.cluster import ClusterState
from state.topology import SOURCE_KUEUE

V1BETA1 = "/apis/kueue.x-k8s.io/v1beta1/topologies"
V1BETA2 = "/apis/kueue.x-k8s.io/v1beta2/topologies"


class Chunks:
    async def readany(self) -> bytes:
        return b""


class OlderKueue:
    """An API server that serves the Topology at the paths given, and answers 404 elsewhere."""

    def __init__(self, *served: str) -> None:
        self.served = served
        self.paths: list[str] = []

    async def call(self, method: str, path: str, query: Any = None) -> Response:
        self.paths.append(path)
        if path not in self.served:
            return Response(404, b'{"kind": "Status", "code": 404}')
        topology = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Topology",
                    "metadata": {"name": "racks", "uid": "u1", "resourceVersion": "3"},
                    "spec": {"levels": [{"nodeLabel": "cloud.provider.com/topology-rack"}]}}
        return Response(200, json.dumps({"metadata": {"resourceVersion": "5"}, "items": [topology]}).encode())

    @contextlib.asynccontextmanager
    async def stream(self, path: str, query: Any, read_timeout: float) -> AsyncIterator[tuple[int, Chunks]]:
        self.paths.append(path)
        yield 200, Chunks()


def watcher(client: OlderKueue, state: ClusterState) -> KindWatcher:
    recorder = Journal(state, VirtualClock()).recorder()
    return KindWatcher(client, KIND_BY_NAME["KueueTopology"], recorder, TimeoutConfig())  # type: ignore[arg-type]


async def test_a_topology_served_only_as_v1beta1_is_listed_and_watched_there() -> None:
    state = ClusterState()
    client = OlderKueue(V1BETA1)
    kind = watcher(client, state)
    await kind.relist()
    assert client.paths == [V1BETA2, V1BETA1] and kind.api_version == "kueue.x-k8s.io/v1beta1"
    assert list(state.kueue_topologies) == ["racks"]
    assert state.kueue_topologies["racks"].spec.levels[0].node_label == "cloud.provider.com/topology-rack"
    await kind.relist()  # the version that answered is asked first from then on
    await kind.watch_once()
    assert client.paths[2:] == [V1BETA1, V1BETA1]
    state.topology.node_upserted("n0", {"cloud.provider.com/topology-rack": "r0"}, {})
    assert state.topology.source == SOURCE_KUEUE


async def test_the_newest_served_version_is_preferred_and_none_served_is_a_missing_crd() -> None:
    both = OlderKueue(V1BETA1, V1BETA2)
    kind = watcher(both, ClusterState())
    await kind.relist()
    assert both.paths == [V1BETA2] and kind.api_version == "kueue.x-k8s.io/v1beta2"
    with pytest.raises(CrdMissing):
        await watcher(OlderKueue(), ClusterState()).relist()


class PodGroupServer(OlderKueue):
    """An API server serving Kubernetes' PodGroup at the paths given (a 1.36 cluster: v1alpha2 only), its list
    items without apiVersion and kind, as kube-apiserver writes the items of a built-in kind."""

    async def call(self, method: str, path: str, query: Any = None) -> Response:
        self.paths.append(path)
        if path not in self.served:
            return Response(404, b'{"kind": "Status", "code": 404}')
        group = {"metadata": {"name": "train", "namespace": "ml", "uid": "u1", "resourceVersion": "3"},
                 "spec": {"schedulingPolicy": {"gang": {"minCount": 4}}, "disruptionMode": "PodGroup"}}
        return Response(200, json.dumps({"metadata": {"resourceVersion": "5"}, "items": [group]}).encode())


POD_GROUPS = {version: f"/apis/scheduling.k8s.io/{version}/podgroups"
              for version in ("v1beta1", "v1alpha3", "v1alpha2")}


async def test_kubernetes_pod_groups_are_read_at_1_37s_version_else_at_1_36s() -> None:
    state = ClusterState()
    client = PodGroupServer(POD_GROUPS["v1alpha2"])
    recorder = Journal(state, VirtualClock()).recorder()
    kind = KindWatcher(client, KIND_BY_NAME["KubernetesPodGroup"], recorder, TimeoutConfig())  # type: ignore[arg-type]
    await kind.relist()
    assert client.paths == [POD_GROUPS["v1beta1"], POD_GROUPS["v1alpha3"], POD_GROUPS["v1alpha2"]]
    group = state.kube_pod_groups["ml/train"]
    assert group.api_version == "scheduling.k8s.io/v1alpha2"  # an Event about it names the version served
    spec = state.gangs["ml/train"].spec
    assert spec is not None and spec.min_member == 4 and spec.disrupt_whole
    newer = PodGroupServer(POD_GROUPS["v1beta1"], POD_GROUPS["v1alpha3"])
    await KindWatcher(newer, KIND_BY_NAME["KubernetesPodGroup"],  # type: ignore[arg-type]
                      Journal(ClusterState(), VirtualClock()).recorder(), TimeoutConfig()).relist()
    assert newer.paths == [POD_GROUPS["v1beta1"]]
