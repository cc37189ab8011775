"""Pod garbage collection: when a node is deleted, the pods bound to it are deleted too.

On a real cluster the controller manager's PodGC force-deletes pods whose node no longer exists
(the machine is lost, and its pods with it). This does the same, `delay` seconds after the node's
DELETED event, with grace period 0 so the pods disappear at once. It never touches pods on nodes that
still exist, nor unbound pods.

Runs on the store's event loop; it only deletes through the store.
"""

from __future__ import annotations

import asyncio

from devcluster.controller import StoreController
from devcluster.errors import ApiError
from devcluster.store import Store
from devcluster.watch import WatchEvent


class PodGarbageCollector(StoreController):
    """Deletes the pods of deleted nodes until `stop()`."""

    def __init__(self, store: Store, delay: float = 0.0) -> None:
        super().__init__(store)
        self.delay = delay
        self.collected = 0

    def _on_event(self, event: WatchEvent) -> None:
        if event.key == "nodes" and event.type == "DELETED":
            asyncio.get_running_loop().call_later(self.delay, self._collect, str(event.obj["metadata"]["name"]))

    def _collect(self, node: str) -> None:
        if not self.running or self.store.find("nodes", node) is not None:
            return
        for pod in self.store.list("pods", predicate=lambda p: (p.get("spec") or {}).get("nodeName") == node):
            meta = pod["metadata"]
            try:
                self.store.delete("pods", meta["name"], meta["namespace"], grace_period_seconds=0)
                self.collected += 1
            except ApiError:
                continue
