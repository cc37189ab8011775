"""What devcluster's controllers share: running on the store's events, as kube-controller-manager's do.

A `StoreController` subscribes `_on_event` to the store on `start()` (then `_started()` catches up with
what the store already holds) and unsubscribes on `stop()`. `_schedule()` runs `_sync()` once, one
step of the event loop later, however many events asked for it meanwhile: a write made from inside a
store listener would publish while the store is still publishing, and a burst of events needs one pass.

Runs on the store's event loop; it acts only through the store.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

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
