"""The real clock behind the loop's `Clock` port: wall time since the epoch; sleeping is anyio's.

Its own module, so that the ports (which the pure decision step reads) import no clock and no
concurrency library; the virtual clock of `simulate` is `daemon.offline.simulator.VirtualClock`.
"""

from __future__ import annotations

import time

import anyio


class WallClock:
    """The real clock: `time.time()`; sleeping is anyio's."""

    def now(self) -> float:
        return time.time()

    async def sleep_until(self, deadline: float) -> None:
        await anyio.sleep(max(0.0, deadline - time.time()))
