"""The daemon's HTTP endpoints: /metrics (Prometheus text), /healthz (alive) and /readyz (ready).

- /healthz answers 200 while the process is alive and its event loop is not wedged: a ticker task
  stamps a monotonic heartbeat every second, and a heartbeat older than `wedged_after` seconds (or
  no answer at all, since the server runs on the same loop) fails the probe.
- /readyz answers 200 once every watched kind has been listed and folded (caches synced) and the
  replica knows its role (leader, or standby following the lease). Body says which.

A small aiohttp server on the configured address; started and stopped by `serve()` inside the
caller's task group. Must never: touch the scheduler's state or the API.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import anyio
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from daemon.telemetry.metrics import Metrics


class Health:
    """What the probes report; set by the daemon, read by the endpoints."""

    def __init__(self, wedged_after: float = 30.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.wedged_after = wedged_after
        self.last_beat = clock()
        self.synced = False
        self.role = "starting"  # starting | standby | leader | stopping

    def beat(self) -> None:
        self.last_beat = self.clock()

    @property
    def alive(self) -> bool:
        return self.clock() - self.last_beat < self.wedged_after

    @property
    def ready(self) -> bool:
        return self.synced and self.role in ("leader", "standby")

    async def tick(self, every: float = 1.0) -> None:
        while True:
            self.beat()
            await anyio.sleep(every)


def make_app(health: Health, metrics: Metrics) -> web.Application:
    async def healthz(_: web.Request) -> web.Response:
        if health.alive:
            return web.Response(text="ok\n")
        return web.Response(status=503, text=f"event loop wedged for {health.clock() - health.last_beat:.1f}s\n")

    async def readyz(_: web.Request) -> web.Response:
        detail = f"synced={str(health.synced).lower()} role={health.role}\n"
        return web.Response(status=200 if health.ready else 503, text=detail)

    async def metrics_handler(_: web.Request) -> web.Response:
        response = web.Response(body=metrics.exposition())
        response.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return response

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/livez", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics_handler)
    return app


class EndpointServer:
    """The running server; `port` is the bound port (useful with port 0)."""

    def __init__(self, health: Health, metrics: Metrics, host: str, port: int) -> None:
        self.app = make_app(health, metrics)
        self.host = host
        self.requested_port = port
        self.port = port
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        self._runner = web.AppRunner(self.app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.requested_port, reuse_address=True)
        await site.start()
        sockets = getattr(site._server, "sockets", None)  # the only way to learn the port chosen for port 0
        if sockets:
            self.port = int(sockets[0].getsockname()[1])

    async def stop(self) -> None:
        if self._runner is not None:
            with anyio.CancelScope(shield=True):
                await self._runner.cleanup()
            self._runner = None


async def serve(health: Health, metrics: Metrics, host: str, port: int,
                task_status: anyio.abc.TaskStatus[EndpointServer] = anyio.TASK_STATUS_IGNORED) -> None:
    """Run the endpoints (and the heartbeat) until cancelled."""
    server = EndpointServer(health, metrics, host, port)
    await server.start()
    try:
        task_status.started(server)
        await health.tick()
    finally:
        await server.stop()
