"""A gang's story in the daemon's JSON log: what the README's `jq 'select(.gang=="ns/name")'` shows.

The real daemon against devcluster over HTTP, its log captured as `kubectl logs` would show it. Four
gangs live through every step an operator reads: one waits at Permit and times out (a GangGroup whose
second gang has too few pods), one can never fit, one binds and is then preempted by a fourth of
higher priority, which binds once its victims are gone.
"""

from __future__ import annotations

import itertools
import json
import logging
from pathlib import Path
from typing import Any

from devcluster.cluster import DevCluster
from tests.integration.daemon.harness import bound_count, daemons, gang, nodes, pod_names, wait_until
from tests.integration.daemon.logs import Line, jq, json_logs, read_lines, select

GROUPS = "gang.scheduling.koordinator.sh/groups"


def priority_class(name: str, value: int) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value}


def steps(lines: list[Line]) -> list[str]:
    return [line["event"] for line in lines]


def settled(story: list[Line]) -> list[Line]:
    """The story less the attempts made while the gang's pods were still arriving over the watch (and
    their reasons): how many there are depends on how the watch events were batched."""
    early = {line["attempt"] for line in story
             if line["event"] == "gang.attempt" and line.get("constraint") == "members"}
    return [line for line in story if line.get("attempt") not in early]


def logged(path: Path, event: str, gang_key: str) -> bool:
    return any(line.get("event") == event and line.get("gang") == gang_key for line in read_lines(path))


async def test_jq_select_by_gang_returns_each_gangs_story_in_order(tmp_path: Path) -> None:
    log_path = tmp_path / "daemon.log"
    with json_logs(log_path):
        async with DevCluster() as cluster:
            cluster.load_objects([priority_class("low", 100), priority_class("high", 1000), *nodes(4)])
            async with daemons(cluster, tmp_path):
                group = json.dumps(["default/trainer", "default/evaluator"])
                waiting = [*gang("trainer", 3, min_member=2, annotations={GROUPS: group}, timeout=1),
                           *gang("evaluator", 1, min_member=2, annotations={GROUPS: group}, timeout=1)]
                cluster.load_objects(waiting)
                await wait_until(lambda: logged(log_path, "gang.timed_out", "default/evaluator"), within=15,
                                 what="the GangGroup to time out at Permit")
                for manifest in waiting:
                    kind = "pods" if manifest["kind"] == "Pod" else "scheduling.sigs.k8s.io/v1alpha1/PodGroup"
                    cluster.store.delete(kind, manifest["metadata"]["name"], "default", grace_period_seconds=0)

                cluster.load_objects(gang("huge", 5))
                await wait_until(lambda: logged(log_path, "gang.pending", "default/huge"), what="huge pending")

                low = gang("low", 4, priority_class="low")
                cluster.load_objects(low)
                await wait_until(lambda: bound_count(cluster, pod_names(low)) == 4, what="low bound")
                high = gang("high", 4, priority_class="high")
                cluster.load_objects(high)
                await wait_until(lambda: bound_count(cluster, pod_names(high)) == 4, within=20, what="high bound")
                await wait_until(lambda: logged(log_path, "gang.bound", "default/high"), what="high's bound line")
        lines = read_lines(log_path)  # every line is one JSON object, ours or a library's

    # Deleting the GangGroup object by object lets it try again meanwhile: its story goes on after the
    # timeout, as a new gang once its PodGroup is gone, whose attempts are numbered from 1 again.
    for key in ("default/trainer", "default/evaluator"):
        told = select(lines, gang=key)
        timed_out = next(index for index, line in enumerate(told) if line["event"] == "gang.timed_out")
        waited = settled(told[: timed_out + 1])
        assert steps(waited) == ["gang.arrived", "gang.attempt", "gang.placed", "gang.waiting_at_permit",
                                 "gang.timed_out"]
        assert waited[1]["outcome"] == "planned" and waited[1]["group"] == ["default/evaluator", "default/trainer"]
        assert waited[3]["quorum"] == {"default/trainer": "3/2", "default/evaluator": "1/2"}
        assert waited[4]["attempt"] == waited[1]["attempt"] and "scheduleTimeoutSeconds" in waited[4]["reason"]

    huge = select(lines, gang="default/huge")
    assert steps(huge)[:2] in (["gang.arrived", "gang.pending"], ["gang.arrived", "gang.attempt"])
    assert set(steps(huge[1:])) == {"gang.pending", "gang.attempt"}
    tries = [line for line in huge if line["event"] == "gang.attempt"]
    assert [line["attempt"] for line in tries] == list(range(1, len(tries) + 1))
    assert all(line["outcome"] == "unschedulable" and line["constraint"] and line["duration_ms"] > 0
               for line in tries)
    # tried again as its pods came: a reason is written only when it changed, and the last one is final
    said = [line["reason"] for line in huge if line["event"] == "gang.pending"]
    assert all(a != b for a, b in itertools.pairwise(said)) and "never fit" in said[-1]

    low_story = settled(select(lines, gang="default/low"))
    assert steps(low_story) == ["gang.arrived", "gang.attempt", "gang.placed", "gang.bound", "gang.preempted"]
    assert low_story[2]["domain"] and low_story[2]["layer"] and len(low_story[2]["nodes"]) == 4
    assert low_story[3]["pods"] == 4 and low_story[3]["duration_ms"] > 0
    assert low_story[4]["preemptor"] == "default/high" and len(low_story[4]["pods"]) == 4

    everything = select(lines, gang="default/high")
    attempts = [line["attempt"] for line in everything if line["event"] == "gang.attempt"]
    assert attempts == list(range(1, len(attempts) + 1))  # every attempt, numbered without gaps
    reasons = [line["reason"] for line in everything if line["event"] == "gang.pending"]
    assert all(a != b for a, b in itertools.pairwise(reasons))  # written only when it changed
    high_story = settled(everything)
    story = steps(high_story)
    # the first full attempt's decision: victims chosen, the reason, then the attempt's outcome and duration
    assert story[:4] == ["gang.arrived", "gang.preempting", "gang.pending", "gang.attempt"]
    assert high_story[1]["victims"] == 4 and high_story[1]["victim_jobs"] == ["default/low"]
    assert high_story[3]["outcome"] == "unschedulable" and high_story[3]["constraint"] == "capacity"
    assert story[-3:] == ["gang.attempt", "gang.placed", "gang.bound"]
    assert high_story[-3]["outcome"] == "planned" and high_story[-1]["attempt"] == attempts[-1]

    for key in ("default/high", "default/huge"):
        by_jq = jq(log_path, f'select(.gang=="{key}")')
        if by_jq is not None:
            assert by_jq == select(lines, gang=key)


def test_library_records_come_out_as_the_same_json_lines(tmp_path: Path) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

    class Refusing(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            raise ConnectionError("collector unreachable")

    log_path = tmp_path / "daemon.log"
    with json_logs(log_path):
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(Refusing()))
        provider.get_tracer("test").start_span("x").end()  # the SDK logs its exporter's failure
        logging.getLogger("kubernetes_asyncio.client.rest").warning("retrying %s", "GET /api/v1/pods")
        provider.shutdown()
    lines = read_lines(log_path)
    sdk = [line for line in lines if line.get("logger", "").startswith("opentelemetry.sdk")]
    assert sdk and sdk[0]["level"] == "error" and "collector unreachable" in sdk[0]["exception"]
    assert sdk[0]["timestamp"].endswith("Z")
    kube = select(lines, logger="kubernetes_asyncio.client.rest")
    assert kube == [{"event": "retrying GET /api/v1/pods", "level": "warning",
                     "logger": "kubernetes_asyncio.client.rest", "timestamp": kube[0]["timestamp"]}]
