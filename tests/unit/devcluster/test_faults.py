"""Fault rules written as text (`toposched devcluster --fault`): what is accepted, what is refused and why."""

from __future__ import annotations

import asyncio

import pytest

from devcluster.faults import FaultInjector, FaultSpec, FaultSpecError, parse_fault


def test_a_rule_is_read_from_key_value_text() -> None:
    spec = parse_fault("status=429, verb=create, path=/binding, fraction=1, retry-after=2")
    assert spec == FaultSpec(status=429, verb="create", path="/binding", fraction=1.0, retry_after=2)
    assert parse_fault("latency=0.25,verb=list") == FaultSpec(latency=0.25, verb="list")


@pytest.mark.parametrize(("text", "named"), [
    ("status=429,bogus=1", "bogus"),
    ("status=abc,count=1", "status"),
    ("status=200,count=1", "status"),
    ("status=500,count=0", "count"),
    ("status=500,count=2,fraction=0.5", "count and fraction"),
    ("status=500,fraction=1.5", "fraction"),
    ("status=500,count=1,verb=post", "verb"),
    ("status=500", "does nothing"),
    ("status", "key=value"),
])
def test_a_rule_that_cannot_be_used_is_refused_naming_the_key(text: str, named: str) -> None:
    with pytest.raises(FaultSpecError, match=named):
        parse_fault(text)


def test_added_rules_get_ids_and_a_counted_rule_that_also_delays_stops_when_it_runs_out() -> None:
    faults = FaultInjector(lambda: 0)
    counted = faults.add(FaultSpec(status=503, count=1, latency=0.5, verb="get"))
    always = faults.add(FaultSpec(status=500, fraction=1.0, verb="create", path="/binding"))
    assert [rule.id for rule in faults.rules] == [counted.id, always.id]
    assert faults.latency("get", "/api/v1/nodes") == 0.5
    error = faults.decide("get", "/api/v1/nodes")
    assert error is not None and error.code == 503
    assert faults.decide("get", "/api/v1/nodes") is None
    assert faults.latency("get", "/api/v1/nodes") == 0.0
    assert faults.rules == [always]
    assert faults.remove_id(always.id) and not faults.remove_id(always.id)
    assert not faults.active


async def test_requests_held_by_latency_are_counted_while_held_and_the_most_at_once_kept() -> None:
    faults = FaultInjector(lambda: 0)
    await asyncio.gather(faults.delay(0.01), faults.delay(0.01), faults.delay(0.01))
    await faults.delay(0.001)
    assert faults.delaying == 0 and faults.most_delaying == 3
