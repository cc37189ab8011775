"""What devcluster's controllers share: running on the store's events, as kube-controller-manager's do.

A `StoreController` subscribes `_on_event` to the store on `start()` (then `_started()` catches up with
what the store already holds) and unsubscribes on `stop()`. `_schedule()` runs `_sync()` once, one
step of the event loop later, however many events asked for it meanwhile: a write made from inside a
store listener would publish while the store is still publishing, and a burst of events needs one pass.
`_delete_dependents()` is the garbage collector's part for the controllers whose objects own others
(devcluster has no general garbage collector).

Runs on the store's event loop; it acts only through the store.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Any

from devcluster.errors import ApiError
from devcluster.resources import ResourceDef
from devcluster.store import Store
from devcluster.watch import WatchEvent


class StoreController:
    # Each controller's own: what one store event asks of it (the events it reads, and what it does).
    _on_event: Callable[[WatchEvent], None]

    def __init__(self, store: Store) -> None:
        self.store = store
        self._unsubscribe: Callable[[], None] | None = None
        self._pass: asyncio.Handle | None = None

    @property
    def running(self) -> bool:
        return self._unsubscribe is not None

    def start(self) -> None:
        if self._unsubscribe is None:
            self._unsubscribe = self.store.subscribe(self._on_event)
            self._started()

    def stop(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if self._pass is not None:
            self._pass.cancel()
            self._pass = None
        self._stopped()

    def _schedule(self) -> None:
        if self._pass is None:
            self._pass = asyncio.get_running_loop().call_soon(self._run_pass)

    def _run_pass(self) -> None:
        self._pass = None
        if self._unsubscribe is not None:
            self._sync()

    def _started(self) -> None:
        """What the store holds already, once subscribed (nothing by default)."""

    def _stopped(self) -> None:
        """What to drop once stopped, besides the pass not run yet (nothing by default)."""

    def _sync(self) -> None:
        """The pass `_schedule()` asks for (nothing by default)."""

    def _write_status(self, resource: ResourceDef, obj: dict[str, Any], status: dict[str, Any], manager: str) -> None:
        """Write `status` through the object's status subresource when it differs from what it holds; an object
        changed or gone meanwhile is left to the event that change brings (another pass)."""
        if status == obj.get("status"):
            return
        meta = obj["metadata"]
        try:
            self.store.update_in(resource, str(meta["name"]), str(meta.get("namespace", "")), {**obj, "status": status},
                                 subresource="status", manager=manager)
        except ApiError:
            return

    def _delete_dependents(self, namespace: str, resources: Iterable[ResourceDef],
                           dependent: Callable[[dict[str, Any]], bool]) -> None:
        """The garbage collector's part: an owner gone, its dependents (in `namespace`, of `resources`, those
        `dependent` says) go, in the background propagation's order-free way."""
        for resource in resources:
            for obj in self.store.list(resource, namespace, dependent):
                meta = obj["metadata"]
                try:
                    self.store.delete(resource, str(meta["name"]), namespace, preconditions={"uid": meta["uid"]})
                except ApiError:  # gone meanwhile
                    continue
