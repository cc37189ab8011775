"""Storage object in use protection as a cluster keeps it: a claim a scheduled pod names, or a volume still
bound, is only marked when deleted, and goes once it is free (the pvc-protection and pv-protection
finalizers: the admission plugin puts them on, the controllers take them off)."""

from __future__ import annotations

from typing import Any

from devcluster import DevCluster
from devcluster.store import resolve

from .manifests import node, pod
from .storage_api import PATHS, claim, create, eventually, found, phase, request, storage_class, volume

PVC_PROTECTION = "kubernetes.io/pvc-protection"
PV_PROTECTION = "kubernetes.io/pv-protection"


def _uses(claim_name: str) -> dict[str, Any]:
    return {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim_name}}]}


async def test_created_claims_and_volumes_carry_their_protection_finalizer(cluster: DevCluster) -> None:
    made = await create(cluster, claim("data", storageClassName=""))
    assert made["metadata"]["finalizers"] == [PVC_PROTECTION]
    assert (await create(cluster, volume("disk", "1Gi")))["metadata"]["finalizers"] == [PV_PROTECTION]
    # One loaded without the API server's admission (an object older than the plugin) gets it from the controller.
    cluster.load_objects([{**claim("older", storageClassName=""), "metadata": {"name": "older",
                                                                                "namespace": "default"}}])
    await eventually(lambda: found(cluster, "persistentvolumeclaims", "older", "default")["metadata"].get(
        "finalizers") == [PVC_PROTECTION])


async def test_a_claim_a_scheduled_pod_uses_stays_until_the_pod_is_gone_then_its_volume_goes_too(
        cluster: DevCluster) -> None:
    cluster.load_objects([node("n0")])
    await create(cluster, storage_class("drop"))
    made = await create(cluster, claim("data", storageClassName="drop"))
    await eventually(lambda: phase(cluster, "persistentvolumeclaims", "data", "default") == "Bound")
    await create(cluster, pod("writer", nodeName="n0", **_uses("data")))
    await create(cluster, pod("waiting", **_uses("data")))  # not scheduled: it does not hold the claim
    status, _ = await request(cluster, "DELETE", f"{PATHS['PersistentVolumeClaim']}/data")
    assert status == 200
    await eventually(lambda: found(cluster, "persistentvolumeclaims", "data", "default")["metadata"].get(
        "deletionTimestamp") is not None)
    volume_name = f"pvc-{made['metadata']['uid']}"
    assert phase(cluster, "persistentvolumes", volume_name) == "Bound"
    cluster.store.delete("pods", "writer", "default", grace_period_seconds=0)
    await eventually(lambda: cluster.store.find("persistentvolumeclaims", "data", "default") is None)
    # Released, then deleted by its reclaim policy: bound no more, the pv-protection finalizer comes off.
    await eventually(lambda: cluster.store.find("persistentvolumes", volume_name) is None)


async def test_a_claim_held_only_by_a_finished_pod_still_waits_for_the_pod_object(cluster: DevCluster) -> None:
    cluster.load_objects([node("n0")])
    await create(cluster, claim("logs", storageClassName=""))
    await create(cluster, pod("job", nodeName="n0", **_uses("logs")))
    done = found(cluster, "pods", "job", "default")
    cluster.store.update_in(resolve("pods"), "job", "default", {**done, "status": {"phase": "Succeeded"}},
                            subresource="status")
    await request(cluster, "DELETE", f"{PATHS['PersistentVolumeClaim']}/logs")
    await eventually(lambda: found(cluster, "persistentvolumeclaims", "logs", "default")["metadata"].get(
        "deletionTimestamp") is not None)
    assert cluster.store.find("persistentvolumeclaims", "logs", "default") is not None
    cluster.store.delete("pods", "job", "default")
    await eventually(lambda: cluster.store.find("persistentvolumeclaims", "logs", "default") is None)
