"""The loop-lag monitor sees how long something held the event loop."""

from __future__ import annotations

import time

import anyio

from daemon.telemetry.looplag import LoopLagMonitor
from daemon.telemetry.metrics import Metrics


def hold_the_loop(seconds: float) -> None:
    """Blocking work on the loop's thread (a snapshot written inline, say)."""
    time.sleep(seconds)


async def test_a_blocked_loop_shows_up_as_a_lag_at_least_as_long_as_the_block() -> None:
    metrics = Metrics()
    enough = anyio.Event()
    seen: list[float] = []

    def observe(lag: float) -> None:
        metrics.loop_lag.observe(lag)
        seen.append(lag)
        if len(seen) >= 6:
            enough.set()

    monitor = LoopLagMonitor(observe, interval=0.005)
    async with anyio.create_task_group() as group:
        group.start_soon(monitor.run)
        await anyio.sleep(0.02)
        hold_the_loop(0.05)
        with anyio.fail_after(5):
            await enough.wait()
        group.cancel_scope.cancel()
    assert max(seen) >= 0.04 and monitor.worst >= 0.04
    count = metrics.registry.get_sample_value("toposched_event_loop_lag_seconds_count")
    assert count is not None and count >= 6
    under = metrics.registry.get_sample_value("toposched_event_loop_lag_seconds_bucket", {"le": "0.02"})
    assert under is not None and under < count  # the long one is above 20 ms
