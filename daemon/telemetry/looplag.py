"""The event loop's lag: how late a timer fires is how long something else held the loop.

Everything the daemon does runs on one asyncio loop, so anything slow on it (a long fold, a
snapshot, an fsync, a big plan) delays every watch, bind and probe behind it. `LoopLagMonitor`
sleeps `interval` seconds again and again and records how much later than asked each wake-up came:
a wake-up `lag` seconds late means the loop was held for at least that long. The daemon exports the
samples as the histogram `toposched_event_loop_lag_seconds`; `bench.eventlog` uses the same monitor
to measure the stall while a snapshot is written.

Must never: do work of its own on the loop beyond one timer per interval.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import anyio

DEFAULT_INTERVAL = 0.05


class LoopLagMonitor:
    """Samples the loop's lag; `observe` gets each sample in seconds (e.g. a Prometheus histogram)."""

    def __init__(self, observe: Callable[[float], None] | None = None, *, interval: float = DEFAULT_INTERVAL,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.observe = observe
        self.interval = interval
        self.clock = clock
        self.samples: list[tuple[float, float]] | None = None  # (when, lag), only while recording (benchmarks)
        self.worst = 0.0

    def record(self) -> list[tuple[float, float]]:
        """Keep every sample as (clock time of the wake-up, lag) from now on in the returned list."""
        self.samples = []
        self.worst = 0.0
        return self.samples

    async def run(self) -> None:
        clock, interval = self.clock, self.interval
        while True:
            asked = clock()
            await anyio.sleep(interval)
            woke = clock()
            lag = max(0.0, woke - asked - interval)
            if lag > self.worst:
                self.worst = lag
            if self.samples is not None:
                self.samples.append((woke, lag))
            if self.observe is not None:
                self.observe(lag)
