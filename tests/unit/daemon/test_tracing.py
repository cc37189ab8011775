"""Spans of the scheduler loop: timed around the real work, numbered without gaps, linked across a
preemption, named after the OpenTelemetry semantic conventions (the loop against an in-memory API,
the observer as its instruments and journal listener, spans in an in-memory exporter)."""

from __future__ import annotations

from collections.abc import Iterator

import msgspec
import pytest
import structlog
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from daemon.telemetry.metrics import Metrics
from daemon.telemetry.tracing import SchedulingObserver
from events.builders import bound, group_event, node, node_event, pod, pod_event, pod_group
from events.model import GangPending, PodDeleted, PodGroupDeleted, PodUpserted
from events.objects import PersistentVolumeClaimVolumeSource, Volume
from state.cluster import ClusterState
from tests.unit.daemon.test_scheduler import FixedPreemptor, Harness, evict_low_0_for_high_0, gang, nodes


@pytest.fixture(autouse=True)
def observer_never_fails() -> Iterator[None]:
    """A failure inside the observer is swallowed (logged) so the loop goes on: here it fails the test."""
    with structlog.testing.capture_logs() as logs:
        yield
    assert [entry for entry in logs if entry["event"] == "telemetry.observer_failed"] == []


class Traced:
    """The scheduler loop with the observer wired in as the daemon wires it."""

    def __init__(self, *, preemptor: object | None = None) -> None:
        self.exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.metrics = Metrics()
        state = ClusterState()
        self.observer = SchedulingObserver(state, self.metrics, provider.get_tracer("test"))
        self.h = Harness(preemptor=preemptor, instruments=self.observer)
        # The observer reads the harness's state: swap it in before anything is recorded.
        self.observer.state = self.h.state
        self.h.journal.subscribe(self.observer)

    def spans(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.exporter.get_finished_spans() if s.name == name]

    def children(self, parent: ReadableSpan, name: str) -> list[ReadableSpan]:
        return [s for s in self.spans(name) if s.parent is not None and s.parent.span_id == parent.context.span_id]


def number(span: ReadableSpan) -> int:
    value = (span.attributes or {}).get("toposched.attempt")
    assert isinstance(value, int)
    return value


def duration(span: ReadableSpan) -> int:
    assert span.start_time is not None and span.end_time is not None
    return span.end_time - span.start_time


async def test_plan_and_bind_spans_time_the_work_and_use_semantic_convention_names() -> None:
    t = Traced()
    t.h.add(*nodes(4), *gang("train", 4))
    await t.h.settle()
    (attempt,) = t.spans("gang.attempt")
    assert attempt.attributes is not None
    assert attempt.attributes["toposched.gang"] == "default/train"
    assert attempt.attributes["k8s.namespace.name"] == "default"
    assert attempt.attributes["toposched.attempt"] == 1 and attempt.attributes["toposched.result"] == "scheduled"
    (plan,) = t.children(attempt, "gang.plan")
    assert duration(plan) > 0  # from the attempt's start to the plan: placement itself
    assert plan.attributes is not None and plan.attributes["toposched.placement.layer"]
    (permit,) = t.children(attempt, "gang.permit")
    (binding,) = t.children(attempt, "gang.bind")
    assert permit.end_time is not None and binding.start_time is not None
    assert permit.end_time <= binding.start_time
    pod_binds = t.children(binding, "pod.bind")
    assert len(pod_binds) == 4
    for span in pod_binds:
        assert duration(span) > 0  # around the Binding call itself
        attributes = span.attributes
        assert attributes is not None
        assert attributes["k8s.namespace.name"] == "default"
        name = str(attributes["k8s.pod.name"])
        assert name.startswith("train-") and str(attributes["k8s.node.name"]).startswith("n")
        assert attributes["k8s.pod.uid"] == f"uid-default-{name}"
    assert duration(attempt) >= duration(plan) + duration(binding)
    assert t.metrics.registry.get_sample_value("toposched_schedule_attempts_total", {"result": "scheduled"}) == 1


async def test_attempt_numbers_count_every_attempt_even_when_the_reason_stays() -> None:
    t = Traced()
    filler = bound(pod("filler", gpus=0, cpu="1"), "n0")
    t.h.add(*nodes(3), pod_event(filler), *gang("train", 4))
    await t.h.settle()
    t.h.add(PodDeleted(key="default/filler", uid=filler.metadata.uid))  # room freed, not enough: same reason
    await t.h.settle()
    t.h.add(node_event(node("n3", block="b0", spine="s0")))  # now it fits
    await t.h.settle()
    numbers = sorted(number(s) for s in t.spans("gang.attempt"))
    assert numbers == list(range(1, t.h.scheduler.stats.attempts + 1)) and len(numbers) >= 2
    results = [s.attributes["toposched.result"] for s in sorted(t.spans("gang.attempt"),
                                                                key=lambda s: s.start_time or 0) if s.attributes]
    assert results[-1] == "scheduled" and set(results[:-1]) == {"unschedulable"}
    # the journal said why only when the reason changed: numbering from it would skip attempts
    assert len([e for e in t.h.events if isinstance(e, GangPending)]) < len(numbers)


async def test_the_attempt_that_binds_after_a_preemption_links_to_the_preemption() -> None:
    t = Traced(preemptor=FixedPreemptor(evict_low_0_for_high_0()))
    low = bound(pod("low-0", gang="low", priority=1), "n0")
    t.h.add(*nodes(1), pod_event(low), group_event(pod_group("low", min_member=1)), *gang("high", 1, priority=100))
    await t.h.settle()
    (preempt,) = t.spans("gang.preempt")
    assert preempt.attributes is not None and preempt.attributes["toposched.preemption.victims"] == 1
    assert duration(preempt) > 0  # the planner's call
    t.h.add(PodDeleted(key="default/low-0", uid=low.metadata.uid))  # the victim is gone
    await t.h.settle()
    attempts = {number(s): s for s in t.spans("gang.attempt")
                if s.attributes and s.attributes.get("toposched.gang") == "default/high"}
    assert sorted(attempts) == [1, 2]
    first, binding = attempts[1], attempts[2]
    assert preempt.parent is not None and preempt.parent.span_id == first.context.span_id
    assert binding.attributes is not None and binding.attributes["toposched.result"] == "scheduled"
    assert [link.context.span_id for link in binding.links] == [preempt.context.span_id]
    assert binding.links[0].attributes == {"toposched.link": "preempted-for"}
    assert first.links == ()


async def test_pending_gauges_say_which_queue_and_why() -> None:
    t = Traced()
    members = ["default/a", "default/b"]
    t.h.add(*nodes(4), *gang("a", 3, min_member=2, gang_group=members),
            group_event(pod_group("b", min_member=2, gang_group=members)), pod_event(pod("b-0", gang="b")),
            *gang("huge", 6))
    await t.h.settle()
    t.observer.refresh_gauges(t.h.scheduler)

    def pending(kind: str, queue: str, reason: str) -> float | None:
        return t.metrics.registry.get_sample_value(f"toposched_pending_{kind}", {"queue": queue, "reason": reason})

    assert pending("gangs", "permit", "permit") == 2 and pending("pods", "permit", "permit") == 4
    assert pending("gangs", "unschedulable", "capacity") == 1 and pending("pods", "unschedulable", "capacity") == 6
    t.h.add(*gang("fresh", 1))  # not tried yet
    t.observer.refresh_gauges(t.h.scheduler)
    assert pending("gangs", "active", "new") == 1
    # Short of members: held untried, as kube-scheduler's PreEnqueue holds it (its `gated` queue).
    t.h.add(*gang("short", 2, min_member=3))
    await t.h.settle()
    t.observer.refresh_gauges(t.h.scheduler)
    assert pending("gangs", "gated", "waiting-for-members") == 1
    assert pending("pods", "gated", "waiting-for-members") == 2
    assert pending("pods", "unschedulable", "waiting-for-members") is None
    t.observer.refresh_gauges(None)  # a standby has no queue: nothing is pending in it
    assert pending("gangs", "unschedulable", "capacity") == 0 and pending("pods", "permit", "permit") == 0


async def test_what_the_observer_holds_of_gangs_and_pods_is_released_when_they_are_deleted() -> None:
    t = Traced()
    members = ["default/wa", "default/wb"]
    t.h.add(*nodes(8), *gang("wa", 3, min_member=2, gang_group=members),  # waits at Permit: an open attempt
            group_event(pod_group("wb", min_member=2, gang_group=members)), pod_event(pod("wb-0", gang="wb")))
    await t.h.settle()
    gangs = [f"g{i}" for i in range(40)]
    for name in gangs:  # a few bind, the rest wait for room
        t.h.add(*gang(name, 2))
    lone = [pod(f"lone-{i}", gpus=1) for i in range(20)]
    t.h.add(*(pod_event(p) for p in lone))
    await t.h.settle()
    held = t.observer.tracked()
    assert held["attempts"] >= 1 and held["numbers"] > 40 and held["reasons"] > 0 and held["arrived"] > 40
    assert held["gang_done"] > 0 and held["bound_count"] > 0
    everything = [*gangs, "wa", "wb"]
    for index, name in enumerate(everything):
        member_keys = sorted(t.h.state.gangs[f"default/{name}"].members)
        if index % 2:  # its PodGroup first, then its pods: the gang leaves with its last member
            t.h.add(PodGroupDeleted(key=f"default/{name}"))
        for key in member_keys:
            t.h.add(PodDeleted(key=key, uid=t.h.state.pods[key].uid))
        if not index % 2:
            t.h.add(PodGroupDeleted(key=f"default/{name}"))
    for p in lone:
        t.h.add(PodDeleted(key=f"default/{p.metadata.name}", uid=p.metadata.uid))
    await t.h.settle()
    t.observer.refresh_gauges(t.h.scheduler)  # the daemon's gauge tick: sweeps gangs that left with their last pod
    assert t.observer.tracked() == dict.fromkeys(held, 0)
    deleted = [s for s in t.spans("gang.attempt") if (s.attributes or {}).get("toposched.result") == "deleted"]
    assert deleted  # the GangGroup's attempt, open at Permit, ended with the gang


async def test_a_lone_pod_that_binds_writes_one_info_line_and_its_details_at_debug() -> None:
    t = Traced()
    with structlog.testing.capture_logs() as logs:
        t.h.add(*nodes(1), pod_event(pod("solo", gpus=1)))
        await t.h.settle()
    mine = [entry for entry in logs if entry.get("pod") == "default/solo"]
    assert [e["event"] for e in mine if e["log_level"] == "info"] == ["pod.bound"]
    assert [e["event"] for e in mine if e["log_level"] == "debug"] == ["pod.arrived", "pod.attempt", "pod.placed"]
    assert mine[1]["attempt"] == 1 and mine[1]["outcome"] == "planned" and mine[-1]["node"] == "n0"


async def test_a_gang_waiting_for_a_claim_is_pending_for_volumes() -> None:
    t = Traced()
    volume = Volume(name="data", persistent_volume_claim=PersistentVolumeClaimVolumeSource(claim_name="absent"))
    events = gang("stateful", 2)
    with_claim = [PodUpserted(pod=msgspec.structs.replace(e.pod, spec=msgspec.structs.replace(e.pod.spec,
                                                                                            volumes=[volume])))
                  if isinstance(e, PodUpserted) else e for e in events]
    t.h.add(*nodes(4), *with_claim)
    await t.h.settle()
    t.observer.refresh_gauges(t.h.scheduler)
    sample = t.metrics.registry.get_sample_value(
        "toposched_pending_pods", {"queue": "unschedulable", "reason": "waiting-for-volumes"})
    assert sample == 2


def _rejected(event: PodUpserted, reason: str, message: str) -> PodUpserted:
    """The pod as its kubelet writes it after refusing it at admission (rejectPod)."""
    status = msgspec.structs.replace(event.pod.status, phase="Failed", reason=reason,
                                     message=f"Pod was rejected: {message}")
    return PodUpserted(pod=msgspec.structs.replace(event.pod, status=status), time=event.time)


async def test_a_pod_of_ours_its_kubelet_refuses_is_counted_by_reason_and_logged_once() -> None:
    t = Traced()
    t.h.add(*nodes(1), pod_event(pod("solo", gpus=1)), pod_event(bound(pod("theirs", scheduler="x", gpus=0), "n0")))
    await t.h.settle()
    placed = pod_event(bound(pod("solo", gpus=1), t.h.bound_pods()["default/solo"]))
    message = "Node didn't have enough resource: nvidia.com/gpu, requested: 1, used: 8, capacity: 8"
    with structlog.testing.capture_logs() as logs:
        t.h.add(_rejected(placed, "OutOfnvidia.com/gpu", message))
        t.h.add(_rejected(placed, "OutOfnvidia.com/gpu", message))  # a later write of the same status: once
        theirs = pod_event(bound(pod("theirs", scheduler="x", gpus=0), "n0"))
        t.h.add(_rejected(theirs, "NodePorts", "Predicate NodePorts failed"))  # not ours: not told
        await t.h.settle()
    [line] = [entry for entry in logs if entry["event"] == "pod.rejected_by_kubelet"]
    assert line["log_level"] == "warning" and line["pod"] == "default/solo" and line["node"] == "n0"
    assert line["reason"] == "OutOfnvidia.com/gpu" and line["message"] == f"Pod was rejected: {message}"
    counted = t.metrics.registry.get_sample_value
    assert counted("toposched_kubelet_rejections_total", {"reason": "OutOfnvidia.com/gpu"}) == 1
    assert counted("toposched_kubelet_rejections_total", {"reason": "NodePorts"}) is None
    # A new observer (a restart: the state restored) does not report it again; the pod made anew does.
    again = SchedulingObserver(t.h.state, Metrics())
    with structlog.testing.capture_logs() as logs:
        again(_rejected(placed, "OutOfnvidia.com/gpu", message))
        recreated = msgspec.structs.replace(placed.pod, metadata=msgspec.structs.replace(
            placed.pod.metadata, uid="a-new-uid"))
        t.h.state.apply(_rejected(PodUpserted(pod=recreated, time=5.0), "OutOfcpu", "Node didn't have enough"))
        again(_rejected(PodUpserted(pod=recreated, time=5.0), "OutOfcpu", "Node didn't have enough"))
        again(_rejected(PodUpserted(pod=recreated, time=5.0), "Some made-up reason!", "Node didn't"))
    assert [entry["reason"] for entry in logs if entry["event"] == "pod.rejected_by_kubelet"] == ["OutOfcpu"]
