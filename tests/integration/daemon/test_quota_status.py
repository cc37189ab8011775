"""The leader writes each quota's usage back where its dialect keeps it, against devcluster over HTTP:
Koordinator's ElasticQuota status.used with the runtime and request annotations (and the same
figures on /metrics), capacity
scheduling's ElasticQuota status.used, Volcano's Queue status.allocated (the queue `root` too);
only when it changes, and through the status subresource, which a real API server (and devcluster)
keeps apart from the object: a patch of the object cannot write status, a status patch cannot
write anything else."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp

from daemon.config import decode_config
from daemon.kube.client import connect
from daemon.kube.cluster_api import KubeClusterAPI
from daemon.kube.leader import AlwaysOpen
from devcluster.cluster import DevCluster
from events.objects import (
    QUOTA_IS_PARENT_LABEL,
    QUOTA_NAME_LABEL,
    QUOTA_PARENT_LABEL,
    QUOTA_REQUEST_ANNOTATION,
    QUOTA_RUNTIME_ANNOTATION,
    QUOTA_SHARED_WEIGHT_ANNOTATION,
    VOLCANO_GROUP_ANNOTATION,
)
from tests.integration.daemon.harness import (
    NAMESPACE,
    bound_count,
    config_for,
    daemons,
    gang,
    nodes,
    pod,
    wait_until,
)

EQ = "elasticquotas.scheduling.sigs.k8s.io"
CEQ = "elasticquotas.scheduling.x-k8s.io"
QUEUES = "queues.scheduling.volcano.sh"
GPU = "nvidia.com/gpu"


def elastic_quota(name: str, *, minimum: int, maximum: int, parent: str = "", is_parent: bool = False,
                  annotations: dict[str, str] | None = None) -> dict[str, Any]:
    labels = {QUOTA_PARENT_LABEL: parent or "root", QUOTA_IS_PARENT_LABEL: "true" if is_parent else "false"}
    return {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels, "annotations": annotations or {}},
            "spec": {"min": {GPU: str(minimum)}, "max": {GPU: str(maximum)}}}


def capacity_quota(namespace: str, *, minimum: int, maximum: int) -> dict[str, Any]:
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "ElasticQuota",
            "metadata": {"name": "quota", "namespace": namespace},
            "spec": {"min": {GPU: str(minimum)}, "max": {GPU: str(maximum)}}}


def queue(name: str, capability: int | None = None, parent: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"weight": 1, "reclaimable": True}
    if capability is not None:
        spec["capability"] = {GPU: str(capability)}
    if parent:
        spec["parent"] = parent
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def namespace(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def volcano_job(name: str, queue_name: str, size: int) -> list[dict[str, Any]]:
    group = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
             "metadata": {"name": name, "namespace": NAMESPACE}, "spec": {"minMember": size, "queue": queue_name}}
    pods = [pod(f"{name}-{index}") for index in range(size)]
    for manifest in pods:
        manifest["metadata"]["annotations"] = {VOLCANO_GROUP_ANNOTATION: name}
    return [group, *pods]


def in_quota(manifests: list[dict[str, Any]], quota: str) -> list[dict[str, Any]]:
    for manifest in manifests:
        if manifest["kind"] == "Pod":
            manifest["metadata"]["labels"][QUOTA_NAME_LABEL] = quota
    return manifests


def stored(cluster: DevCluster, resource: str, name: str, namespace_name: str = "") -> dict[str, Any]:
    return cluster.store.get(resource, name, namespace_name)


def used(cluster: DevCluster, resource: str, name: str, namespace_name: str = NAMESPACE) -> dict[str, str]:
    return dict((stored(cluster, resource, name, namespace_name).get("status") or {}).get("used") or {})


def annotation(cluster: DevCluster, name: str, key: str) -> dict[str, str]:
    raw = stored(cluster, EQ, name, NAMESPACE)["metadata"].get("annotations", {}).get(key)
    return dict(json.loads(raw)) if raw else {}


def allocated(cluster: DevCluster, name: str) -> dict[str, str]:
    return dict((stored(cluster, QUEUES, name).get("status") or {}).get("allocated") or {})


async def test_koordinator_quota_gets_used_runtime_and_request_as_koord_scheduler_writes_them(
        tmp_path: Path) -> None:
    async with DevCluster() as cluster:
        cluster.load_objects([*nodes(4),
                              elastic_quota("org", minimum=32, maximum=32, is_parent=True),
                              elastic_quota("team-a", minimum=16, maximum=32, parent="org",
                                            annotations={QUOTA_SHARED_WEIGHT_ANNOTATION: json.dumps({GPU: "1"})})])
        async with daemons(cluster, tmp_path) as (running,):
            await wait_until(lambda: running.daemon.quota_status is not None, what="leading")
            writer = running.daemon.quota_status
            assert writer is not None
            job = in_quota(gang("job", 3), "team-a")
            cluster.load_objects(job)
            await wait_until(lambda: bound_count(cluster, ["job-0", "job-1", "job-2"]) == 3, what="gang bound")
            await wait_until(lambda: used(cluster, EQ, "team-a") == {GPU: "24"}
                             and annotation(cluster, "team-a", QUOTA_RUNTIME_ANNOTATION) == {GPU: "24"},
                             what="team-a's used and runtime")
            assert annotation(cluster, "team-a", QUOTA_REQUEST_ANNOTATION) == {GPU: "24"}
            # and the same on /metrics (the gauges follow the fold once a second)
            series = {"dialect": "koordinator", "quota": "team-a", "resource": GPU}
            registry = running.daemon.metrics.registry
            await wait_until(lambda: registry.get_sample_value("toposched_quota_used", series) == 24,
                             what="toposched_quota_used")
            assert registry.get_sample_value("toposched_quota_min", series) == 16
            assert used(cluster, EQ, "org") == {GPU: "24"}  # a parent holds its children's
            assert annotation(cluster, "org", QUOTA_RUNTIME_ANNOTATION) == {GPU: "24"}
            # the user's own annotation and labels are untouched by ours
            meta = stored(cluster, EQ, "team-a", NAMESPACE)["metadata"]
            assert json.loads(meta["annotations"][QUOTA_SHARED_WEIGHT_ANNOTATION]) == {GPU: "1"}
            assert meta["labels"][QUOTA_PARENT_LABEL] == "org"

            # once our writes have come back by watch, a pass writes nothing
            state = running.daemon.state
            assert state is not None
            await wait_until(lambda: state.quotas.elastic_quotas[f"{NAMESPACE}/team-a"].status.used == {GPU: "24"},
                             what="the write folded back")
            writes = writer.writes
            assert await writer.sync_once()
            assert writer.writes == writes

            for name in ("job-0", "job-1", "job-2"):
                cluster.store.delete("pods", name, NAMESPACE)
            await wait_until(lambda: used(cluster, EQ, "team-a") == {GPU: "0"}, what="used back to 0")
            await wait_until(lambda: annotation(cluster, "team-a", QUOTA_REQUEST_ANNOTATION) == {GPU: "0"},
                             what="request back to 0")


async def test_capacity_quota_used_and_volcano_queue_allocated_up_to_the_root_queue(tmp_path: Path) -> None:
    async with DevCluster() as cluster:
        cluster.load_objects([*nodes(4), namespace("team-b"), capacity_quota("team-b", minimum=8, maximum=16),
                              queue("root"), queue("research", capability=32), queue("q1", 16, parent="research")])
        # Volcano's queue controller owns the queue's state: ours is a merge patch of `allocated` only
        cluster.store.patch(QUEUES, "q1", {"status": {"state": "Open"}}, subresource="status")
        async with daemons(cluster, tmp_path):
            lone = pod("lone")
            lone["metadata"]["namespace"] = "team-b"
            cluster.load_objects([lone, *volcano_job("vj", "q1", 2)])
            await wait_until(lambda: used(cluster, CEQ, "quota", "team-b") == {GPU: "8"},
                             what="the capacity quota's used")
            await wait_until(lambda: allocated(cluster, "q1") == {GPU: "16"}, what="q1's allocated")
            await wait_until(lambda: allocated(cluster, "research") == {GPU: "16"}
                             and allocated(cluster, "root") == {GPU: "16"}, what="the parents' allocated")
            assert stored(cluster, QUEUES, "q1")["status"]["state"] == "Open"


async def test_status_of_a_quota_is_a_subresource_as_on_a_real_api_server() -> None:
    async with DevCluster() as cluster, aiohttp.ClientSession() as session:
        cluster.load_objects([queue("q1", 16), elastic_quota("team-a", minimum=8, maximum=16)])

        async def merge(url: str, body: dict[str, Any]) -> dict[str, Any]:
            async with session.patch(cluster.url + url, data=json.dumps(body),
                                     headers={"Content-Type": "application/merge-patch+json"}) as response:
                assert response.status == 200, await response.text()
                return dict(await response.json())

        for path, field in (("/apis/scheduling.volcano.sh/v1beta1/queues/q1", "allocated"),
                            (f"/apis/scheduling.sigs.k8s.io/v1alpha1/namespaces/{NAMESPACE}/elasticquotas/team-a",
                             "used")):
            written = await merge(f"{path}/status", {"metadata": {"labels": {"x": "y"}},
                                                    "status": {field: {GPU: "8"}}})
            assert written["status"][field] == {GPU: "8"} and "x" not in written["metadata"].get("labels", {})
            # a patch of the object: its metadata changes, its status does not
            written = await merge(path, {"metadata": {"labels": {"x": "y"}}, "status": {field: {GPU: "99"}}})
            assert written["metadata"]["labels"]["x"] == "y" and written["status"][field] == {GPU: "8"}


async def test_without_a_status_subresource_the_quota_object_itself_is_patched(tmp_path: Path) -> None:
    # Koordinator's own ElasticQuota CRD has no status subresource: /status answers 404 naming no object
    async with DevCluster(kubelet=False) as cluster:
        cluster.load_objects([elastic_quota("team-a", minimum=8, maximum=16),
                              elastic_quota("team-b", minimum=8, maximum=16)])
        cluster.faults.fail_next(1, 404, verb="patch", path="/status")
        kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
        async with connect(decode_config(config_for(kubeconfig, tmp_path / "log", election=False))) as client:
            api = KubeClusterAPI(client, AlwaysOpen())
            base = f"/apis/scheduling.sigs.k8s.io/v1alpha1/namespaces/{NAMESPACE}/elasticquotas"
            for name in ("team-a", "team-b"):
                outcome = await api.set_quota_status("scheduling.sigs.k8s.io/v1alpha1", "elasticquotas",
                                                     f"{NAMESPACE}/{name}", status={"used": {GPU: "8"}},
                                                     annotations={QUOTA_RUNTIME_ANNOTATION: json.dumps({GPU: "8"})})
                assert outcome.ok
            assert [(r.path, r.status) for r in cluster.audit.since() if r.method == "PATCH"] == [
                (f"{base}/team-a", 200), (f"{base}/team-a/status", 404), (f"{base}/team-a", 200),
                (f"{base}/team-b", 200), (f"{base}/team-b", 200)]  # known now: no /status asked again
            assert annotation(cluster, "team-b", QUOTA_RUNTIME_ANNOTATION) == {GPU: "8"}
            gone = await api.set_quota_status("scheduling.sigs.k8s.io/v1alpha1", "elasticquotas",
                                              f"{NAMESPACE}/absent", status={"used": {GPU: "8"}}, annotations=None)
            assert not gone.ok and not gone.retriable


def warnings_on(cluster: DevCluster, kind: str, name: str, namespace_name: str = NAMESPACE) -> list[dict[str, Any]]:
    return [e for e in cluster.store.list("events", namespace_name) if e["type"] == "Warning"
            and e["involvedObject"]["kind"] == kind and e["involvedObject"]["name"] == name]


async def test_bad_quotas_get_a_warning_naming_the_field_and_the_documented_rule_applies(tmp_path: Path) -> None:
    greedy = elastic_quota("greedy", minimum=64, maximum=16)  # min > max: cut to max
    orphan = elastic_quota("orphan", minimum=8, maximum=8, parent="nowhere")  # unknown parent: a top quota
    async with DevCluster() as cluster:
        cluster.load_objects([*nodes(4), greedy, orphan])
        async with daemons(cluster, tmp_path):
            lost = pod("lost")
            lost["metadata"]["labels"][QUOTA_NAME_LABEL] = "missing"
            first = in_quota(gang("first", 2), "greedy")
            cluster.load_objects([lost, *first, *in_quota([pod("alone")], "orphan")])
            await wait_until(lambda: bound_count(cluster, ["first-0", "first-1", "alone"]) == 3,
                             what="the gangs the rules admit")
            second = in_quota(gang("second", 1), "greedy")  # 16 used + 8 asked > max 16 (min 64 cut to it)
            cluster.load_objects(second)
            await wait_until(lambda: all(any(e["reason"] in ("InvalidQuota", "QuotaNotFound")
                                                 for e in warnings_on(cluster, kind, name)) for kind, name in (
                ("ElasticQuota", "greedy"), ("ElasticQuota", "orphan"), ("Pod", "lost"))), what="the Warnings")
            (cut,) = warnings_on(cluster, "ElasticQuota", "greedy")
            assert cut["reason"] == "InvalidQuota"
            assert cut["message"] == "spec.min[nvidia.com/gpu]: is above spec.max[nvidia.com/gpu]; cut to max"
            (top,) = warnings_on(cluster, "ElasticQuota", "orphan")
            assert top["message"].startswith(f"metadata.labels[{QUOTA_PARENT_LABEL}]: parent 'nowhere' does not")
            (missing,) = [e for e in warnings_on(cluster, "Pod", "lost") if e["reason"] == "QuotaNotFound"]
            assert missing["message"].startswith(f"metadata.labels[{QUOTA_NAME_LABEL}]: ElasticQuota 'missing'")

            def reason_of(name: str) -> str:
                conditions = (stored_pod(cluster, name).get("status") or {}).get("conditions") or []
                return next((c.get("message", "") for c in conditions if c["type"] == "PodScheduled"), "")

            await wait_until(lambda: "quota missing not found" in reason_of("lost")
                             and "nvidia.com/gpu 16 used + 8 asked > max 16" in reason_of("second-0"),
                             what="the waiting pods' reasons")
            assert not any(node for node in (stored_pod(cluster, "lost")["spec"].get("nodeName"),
                                             stored_pod(cluster, "second-0")["spec"].get("nodeName")))


def stored_pod(cluster: DevCluster, name: str) -> dict[str, Any]:
    return cluster.store.get("pods", name, NAMESPACE)
