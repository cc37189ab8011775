"""The API client's retry loop asks the leader's write gate before every attempt and while backing off;
every attempt of a write is counted with its outcome (retries and refusals included)."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from daemon.config import TimeoutConfig
from daemon.kube.client import KubeApiError, KubeClient
from daemon.kube.cluster_api import KubeClusterAPI
from daemon.kube.leader import AlwaysOpen, NotLeader, WriteGate
from daemon.telemetry.metrics import Metrics

TOO_MANY = b'{"kind":"Status","code":429,"reason":"TooManyRequests","message":"Too many requests"}'
TIMEOUTS = TimeoutConfig(request_seconds=5, backoff_initial_seconds=0.01, backoff_max_seconds=60,
                         bind_retry_attempts=5)


class Answer:
    def __init__(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        self.status = status
        self.body = body
        self.headers = headers

    async def read(self) -> bytes:
        return self.body

    def release(self) -> None:
        pass


class ApiClientAnswering429:
    """Stands in for kubernetes-asyncio's ApiClient: every call is answered 429 with `retry_after`."""

    def __init__(self, retry_after: str, after_each_call: Callable[[], None] = lambda: None) -> None:
        self.configuration = SimpleNamespace(host="http://127.0.0.1:1")
        self.retry_after = retry_after
        self.after_each_call = after_each_call
        self.calls = 0

    async def call_api(self, path: str, method: str, **_: Any) -> Answer:
        self.calls += 1
        self.after_each_call()
        return Answer(429, TOO_MANY, {"Retry-After": self.retry_after})


BINDING = "/api/v1/namespaces/default/pods/p/binding"


async def test_without_a_gate_every_attempt_is_sent() -> None:
    api = ApiClientAnswering429("0")
    with pytest.raises(KubeApiError) as raised:
        await KubeClient(api, TIMEOUTS).call("POST", BINDING, body={})
    assert raised.value.status == 429
    assert api.calls == TIMEOUTS.bind_retry_attempts


async def test_a_retry_is_not_sent_once_the_gate_has_closed() -> None:
    now = [0.0]
    gate = WriteGate(renew_deadline=10.0, clock=lambda: now[0])
    gate.renewed(0.0)

    def stopped_past_the_deadline() -> None:
        now[0] = 60.0  # SIGSTOP after the answer, SIGCONT a minute later: the retry must not go out

    api = ApiClientAnswering429("0", stopped_past_the_deadline)
    with pytest.raises(NotLeader):
        await KubeClient(api, TIMEOUTS).call("POST", BINDING, body={}, gate=gate)
    assert api.calls == 1


async def test_a_closed_gate_sends_nothing_at_all() -> None:
    api = ApiClientAnswering429("0")
    with pytest.raises(NotLeader):
        await KubeClient(api, TIMEOUTS).call("POST", BINDING, body={}, gate=WriteGate(renew_deadline=10.0))
    assert api.calls == 0


async def test_a_retry_waiting_out_retry_after_is_cancelled_when_the_lease_is_lost() -> None:
    gate = WriteGate(renew_deadline=3600.0)
    gate.renewed(anyio.current_time())
    api = ApiClientAnswering429("30")  # the server asks for 30 s before the next try
    refused: list[str] = []

    async def bind() -> None:
        try:
            await KubeClient(api, TIMEOUTS).call("POST", BINDING, body={}, gate=gate)
        except NotLeader as error:
            refused.append(str(error))

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(bind)
            while api.calls == 0:  # noqa: ASYNC110 (polling a plain condition under a deadline)
                await anyio.sleep(0.01)
            gate.revoke()  # the renew task found the lease taken
    assert len(refused) == 1 and "in flight" in refused[0]
    assert api.calls == 1


# --------------------------------------------------------------------------- every attempt counted


class ScriptedApiClient:
    """Answers each call with the next status of `statuses` (the last one from then on)."""

    def __init__(self, *statuses: int, hold: anyio.Event | None = None) -> None:
        self.configuration = SimpleNamespace(host="http://127.0.0.1:1")
        self.statuses = list(statuses)
        self.hold = hold
        self.calls = 0

    async def call_api(self, path: str, method: str, **_: Any) -> Answer:
        self.calls += 1
        if self.hold is not None:
            await self.hold.wait()
        status = self.statuses.pop(0) if len(self.statuses) > 1 else self.statuses[0]
        body = b'{"kind":"Status","code":%d}' % status
        return Answer(status, body, {"Retry-After": "0"} if status == 429 else {})


def api_requests(metrics: Metrics) -> dict[str, float]:
    return {s.labels["code"]: s.value for family in metrics.registry.collect()
            if family.name == "toposched_api_requests" for s in family.samples if s.name.endswith("_total")
            and s.labels["resource"] == "pods/binding"}


async def test_every_attempt_of_a_write_is_counted_with_its_outcome_retries_included() -> None:
    metrics = Metrics()
    api = ScriptedApiClient(500, 429, 201)
    kube = KubeClusterAPI(KubeClient(api, TIMEOUTS), AlwaysOpen(), metrics=metrics)
    outcome = await kube.bind("default/p", "u", "n1")
    assert outcome.status == "bound" and api.calls == 3
    assert api_requests(metrics) == {"500": 1, "429": 1, "201": 1}
    duration = metrics.registry.get_sample_value("toposched_api_request_duration_seconds_count",
                                                 {"verb": "create", "resource": "pods/binding"})
    assert duration == 1  # one write, however many attempts it took


async def test_attempts_the_lease_gate_refuses_are_counted_and_nothing_is_sent() -> None:
    metrics = Metrics()
    api = ScriptedApiClient(201)
    closed = WriteGate(renew_deadline=10.0)  # never renewed: this replica does not hold the lease
    outcome = await KubeClusterAPI(KubeClient(api, TIMEOUTS), closed, metrics=metrics).bind("default/p", "u", "n1")
    assert outcome.status == "failed" and api.calls == 0
    assert api_requests(metrics) == {"refused": 1}

    now = [0.0]
    gate = WriteGate(renew_deadline=10.0, clock=lambda: now[0])
    gate.renewed(0.0)

    class Frozen(ScriptedApiClient):
        async def call_api(self, path: str, method: str, **kwargs: Any) -> Answer:
            now[0] = 60.0  # frozen after the answer, woken a minute later: the retry is refused
            return await super().call_api(path, method, **kwargs)

    metrics = Metrics()
    await KubeClusterAPI(KubeClient(Frozen(503), TIMEOUTS), gate, metrics=metrics).bind("default/p", "u", "n1")
    assert api_requests(metrics) == {"503": 1, "refused": 1}


async def test_an_attempt_in_flight_when_the_lease_is_lost_is_counted_cancelled() -> None:
    metrics = Metrics()
    gate = WriteGate(renew_deadline=3600.0)
    gate.renewed(anyio.current_time())
    api = ScriptedApiClient(201, hold=anyio.Event())  # the answer never comes
    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(KubeClusterAPI(KubeClient(api, TIMEOUTS), gate, metrics=metrics).bind, "default/p", "u",
                             "n1")
            while api.calls == 0:  # noqa: ASYNC110 (polling a plain condition under a deadline)
                await anyio.sleep(0.01)
            gate.revoke()
    assert api_requests(metrics) == {"cancelled": 1}
