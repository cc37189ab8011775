"""While a plan's volumes are provisioned, its pods say where they are going (KEP-5278).

kube-scheduler (NominatedNodeNameForExpectation, beta and on by default since 1.35) writes a pod's
`status.nominatedNodeName` at the start of a binding cycle that has work to do before the Binding, such
as WaitForFirstConsumer volumes to provision: cluster-autoscaler and Karpenter then see where the pod is
going and do not take that node away meanwhile. kube-apiserver clears the field in the Binding.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from devcluster.cluster import DevCluster
from devcluster.watch import WatchEvent
from tests.integration.daemon.harness import NAMESPACE, daemons, gang, nodes, wait_until

STORAGE_CLASS = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "gp3"},
                 "provisioner": "ebs.csi.aws.com", "volumeBindingMode": "WaitForFirstConsumer"}


def with_claims(manifests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The gang's pods, each with a WaitForFirstConsumer claim of its own, and the claims."""
    claims = []
    for manifest in manifests:
        if manifest["kind"] != "Pod":
            continue
        claim = f"data-{manifest['metadata']['name']}"
        manifest["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
        claims.append({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                       "metadata": {"name": claim, "namespace": NAMESPACE},
                       "spec": {"storageClassName": "gp3", "accessModes": ["ReadWriteOnce"],
                                "resources": {"requests": {"storage": "1Gi"}}}})
    return [*claims, *manifests]


async def test_pods_waiting_for_their_volumes_name_their_node_as_nominated_until_the_binding_clears_it(
        tmp_path: Path) -> None:
    versions: dict[str, list[tuple[str, str]]] = {}  # pod -> (nominatedNodeName, nodeName), version by version

    def record(event: WatchEvent) -> None:
        obj = event.obj
        if obj.get("kind") == "Pod" and event.type != "DELETED":
            versions.setdefault(obj["metadata"]["name"], []).append(
                ((obj.get("status") or {}).get("nominatedNodeName", ""), (obj.get("spec") or {}).get("nodeName", "")))

    names = ["train-0", "train-1"]
    async with DevCluster() as cluster:
        labelled = nodes(2)
        for each in labelled:  # as every kubelet labels its node: the provisioned volumes' affinity names it
            each["metadata"]["labels"]["kubernetes.io/hostname"] = each["metadata"]["name"]
        cluster.load_objects([*labelled, STORAGE_CLASS])
        unsubscribe = cluster.store.subscribe(record)
        async with daemons(cluster, tmp_path):
            cluster.load_objects(with_claims(gang("train", 2)))
            await wait_until(lambda: all(any(node for _, node in versions.get(name, [])) for name in names),
                             what="the gang bound")
        unsubscribe()
    for name in names:
        seen = versions[name]
        bound_at = next(index for index, (_, node) in enumerate(seen) if node)
        target = seen[bound_at][1]
        assert (target, "") in seen[:bound_at], seen  # nominated before the Binding
        assert seen[-1] == ("", target), seen  # the Binding cleared it
