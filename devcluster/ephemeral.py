"""Generic ephemeral volumes: the ephemeral volume controller (pkg/controller/volume/ephemeral) and the
part of the garbage collector that removes their claims.

For every pod not being deleted, each `spec.volumes[]` with `ephemeral.volumeClaimTemplate` gets a
PersistentVolumeClaim `<pod name>-<volume name>` in the pod's namespace: the template's labels and
annotations, its spec, and an ownerReference to the pod (apiVersion v1, kind Pod, name, uid,
`controller: true`, `blockOwnerDeletion: true`). It is created through the API server's create path,
so the DefaultStorageClass admission applies. A claim of that name that exists already is left alone,
owned by the pod or not (the real controller then reports the conflict on the pod; devcluster records
nothing, and the kubelet would refuse to start the pod).

When a pod is gone (its DELETED event), the claims whose ownerReferences all name pods that no longer
exist, one of them that pod, are deleted, as the garbage collector deletes dependents of deleted owners.

Runs on the store's event loop; acts only through the store, one step after the event that asks for it.
"""

from __future__ import annotations

import asyncio
from typing import Any

from devcluster.controller import StoreController
from devcluster.errors import ApiError
from devcluster.store import Store, resolve
from devcluster.watch import WatchEvent

Obj = dict[str, Any]

_PODS = resolve("pods")
_CLAIMS = resolve("persistentvolumeclaims")


def _dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def claim_templates(pod: Obj) -> list[tuple[str, Obj]]:
    """(volume name, volumeClaimTemplate) of each generic ephemeral volume of the pod."""
    found = []
    for volume in _dict(pod.get("spec")).get("volumes") or []:
        template = _dict(_dict(_dict(volume).get("ephemeral")).get("volumeClaimTemplate"))
        if template:
            found.append((str(volume.get("name") or ""), template))
    return found


def claim_for(pod: Obj, volume_name: str, template: Obj) -> Obj:
    """The PersistentVolumeClaim the controller creates for one ephemeral volume of `pod`."""
    pod_meta, template_meta = pod["metadata"], _dict(template.get("metadata"))
    metadata: Obj = {
        "name": f"{pod_meta['name']}-{volume_name}", "namespace": pod_meta["namespace"],
        "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod_meta["name"], "uid": pod_meta["uid"],
                             "controller": True, "blockOwnerDeletion": True}],
    }
    for field in ("labels", "annotations"):
        if template_meta.get(field):
            metadata[field] = dict(template_meta[field])
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": metadata,
            "spec": dict(_dict(template.get("spec")))}


class EphemeralVolumeController(StoreController):
    """Creates the claims of pods' ephemeral volumes and collects those of deleted pods until `stop()`."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.created = 0
        self.collected = 0

    def _started(self) -> None:
        for pod in self.store.list(_PODS):
            self._on_pod(pod)

    def _on_event(self, event: WatchEvent) -> None:
        if event.key != _PODS.key:
            return
        if event.type == "DELETED":
            meta = event.obj["metadata"]
            asyncio.get_running_loop().call_soon(self._collect, str(meta.get("namespace", "")), str(meta.get("uid")))
        else:
            self._on_pod(event.obj)

    def _on_pod(self, pod: Obj) -> None:
        meta = pod["metadata"]
        if meta.get("deletionTimestamp") or not claim_templates(pod):
            return
        asyncio.get_running_loop().call_soon(self._ensure, str(meta.get("namespace", "")), str(meta["name"]),
                                             str(meta.get("uid")))

    def _ensure(self, namespace: str, name: str, uid: str) -> None:
        pod = self.store.find(_PODS, name, namespace)
        if not self.running or pod is None or pod["metadata"].get("uid") != uid \
                or pod["metadata"].get("deletionTimestamp"):
            return
        for volume_name, template in claim_templates(pod):
            claim = claim_for(pod, volume_name, template)
            if self.store.find(_CLAIMS, claim["metadata"]["name"], namespace) is not None:
                continue
            try:
                self.store.create_in(_CLAIMS, claim, namespace, keep_status=False)
                self.created += 1
            except ApiError:  # refused (an invalid template) or created meanwhile: as the controller, retry later
                continue

    def _collect(self, namespace: str, pod_uid: str) -> None:
        if not self.running:
            return
        owned: list[tuple[Obj, list[Obj]]] = []
        for claim in self.store.list(_CLAIMS, namespace):
            owners = [_dict(ref) for ref in claim["metadata"].get("ownerReferences") or []]
            if any(ref.get("uid") == pod_uid for ref in owners):
                owned.append((claim, owners))
        if not owned:  # the usual case: listing the namespace's pods on every deletion would cost O(pods)
            return
        live_pods = {str(p["metadata"].get("uid")) for p in self.store.list(_PODS, namespace)}
        for claim, owners in owned:
            if all(ref.get("kind") == "Pod" and ref.get("uid") not in live_pods for ref in owners):
                try:
                    self.store.delete(_CLAIMS, str(claim["metadata"]["name"]), namespace)
                    self.collected += 1
                except ApiError:
                    continue
