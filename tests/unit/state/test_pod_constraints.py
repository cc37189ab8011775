"""A pod of ours that asks for a placement rule toposched does not place by (a pod affinity or anti-affinity
term's namespaceSelector, a DoNotSchedule spread, an init container's host port) is reported by field, and
still placed; one with
resource claims (dynamic resource allocation) is reported and not placed, since the kubelet would not
start it; preferences and other schedulers' pods are not reported."""

from __future__ import annotations

from typing import Any

import pytest

from events.ingest import kind_of, upsert_event
from placement import GangPlan, Unschedulable, plan_pod
from placement.plan import INVALID
from state.cluster import ClusterState
from state.gangs import UNSUPPORTED_FIELD
from tests.unit.placement.builders import fabric

TERM = {"labelSelector": {"matchLabels": {"app": "trainer"}}, "topologyKey": "kubernetes.io/hostname"}


def apply_pod(state: ClusterState, name: str, scheduler: str = "toposched",
              annotations: dict[str, str] | None = None, **spec: Any) -> str:
    manifest = {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": "default", "uid": f"u-{name}", "labels": {"app": "trainer"},
                             "annotations": annotations or {}},
                "spec": {"schedulerName": scheduler, "containers": [
                    {"name": "main", "resources": {"requests": {"nvidia.com/gpu": "1"}}}], **spec}}
    info = kind_of("v1", "Pod")
    assert info is not None
    state.apply(upsert_event(info, manifest))
    return f"default/{name}"


@pytest.mark.parametrize(("spec", "field", "says"), [
    ({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        TERM, {**TERM, "namespaceSelector": {"matchLabels": {"team": "ml"}}}]}}},
     "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[1].namespaceSelector",
     "the term is read as looking in every namespace (the pod keeps away from"),
    ({"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {**TERM, "topologyKey": "network.topology.nvidia.com/block",
         "namespaceSelector": {"matchExpressions": [{"key": "team", "operator": "Exists"}]}}]}}},
     "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].namespaceSelector",
     "pods of any namespace that its selector matches satisfy it"),
    ({"topologySpreadConstraints": [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {}},
        {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule",
         "nodeTaintsPolicy": "Sometimes"}]},
     "spec.topologySpreadConstraints[1].nodeTaintsPolicy", "nodeTaintsPolicy 'Sometimes' is not Honor or Ignore"),
    ({"initContainers": [{"name": "warmup", "ports": [{"containerPort": 8080},
                                                     {"containerPort": 29500, "hostPort": 29500}]}]},
     "spec.initContainers[0].ports[1].hostPort", "host port 29500 of an init container is not considered"),
])
def test_a_rule_toposched_does_not_place_by_is_reported_on_the_pod_by_field_and_the_pod_is_still_placed(
        spec: dict[str, Any], field: str, says: str) -> None:
    state = fabric(blocks=1, nvlinks=1, nodes=2)
    key = apply_pod(state, "asks", **spec)
    problems = state.problems_of("Pod", key)
    assert [(p.field, p.reason) for p in problems] == [(field, UNSUPPORTED_FIELD)]
    assert says in problems[0].message
    assert key in state.pending and isinstance(plan_pod(state, key), GangPlan)


def test_a_pod_with_resource_claims_is_reported_and_not_placed_as_the_kubelet_would_not_start_it() -> None:
    state = fabric(blocks=1, nvlinks=1, nodes=2)
    key = apply_pod(state, "claims", resourceClaims=[{"name": "gpus", "resourceClaimTemplateName": "eight-gpus"}])
    problems = state.problems_of("Pod", key)
    assert [(p.field, p.reason) for p in problems] == [("spec.resourceClaims", UNSUPPORTED_FIELD)]
    assert "dynamic resource allocation is not supported by toposched" in problems[0].message
    plan = plan_pod(state, key)
    assert isinstance(plan, Unschedulable) and plan.constraint == INVALID
    assert plan.reason.startswith(f"pod {key}: spec.resourceClaims: dynamic resource allocation is not supported")


@pytest.mark.parametrize(("requests", "annotations", "field", "says"), [
    ({"koordinator.sh/gpu-core": "50", "koordinator.sh/gpu-memory-ratio": "50"}, {},
     "spec.containers[0].resources.requests[koordinator.sh/gpu-core]",
     "Koordinator's DeviceShare allocates in koord-scheduler"),
    ({"koordinator.sh/rdma": "1", "nvidia.com/gpu": "8"}, {},
     "spec.containers[0].resources.requests[koordinator.sh/rdma]", "leave the pod to koord-scheduler"),
    ({"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": "4096"}, {},
     "spec.containers[0].resources.requests[volcano.sh/vgpu-number]", "Volcano's deviceshare plugin"),
    ({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000"}, {},
     "spec.containers[0].resources.requests[nvidia.com/gpumem]", "HAMi's scheduler allocates"),
    ({"cpu": "2"}, {"gpu-fraction": "0.5"}, "metadata.annotations[gpu-fraction]",
     "a fractional GPU is a device KAI Scheduler allocates"),
    ({"cpu": "2"}, {"gpu-memory": "2000"}, "metadata.annotations[gpu-memory]", "leave the pod to kai-scheduler"),
])
def test_a_pod_asking_for_a_device_another_scheduler_allocates_is_reported_and_not_placed(
        requests: dict[str, str], annotations: dict[str, str], field: str, says: str) -> None:
    # Koordinator's DeviceShare, Volcano's vGPU, HAMi and KAI's fractional GPUs choose the device in their
    # scheduler and write it on the pod for the node: bound by toposched, the pod would start without it.
    state = fabric(blocks=1, nvlinks=1, nodes=2)
    for node in state.nodes.values():  # as their node agents advertise the device resources
        node.allocatable.update({name: 100_000 for name in requests if "/" in name})
    key = apply_pod(state, "shares", annotations=annotations,
                    containers=[{"name": "main", "resources": {"requests": requests}}])
    problems = state.problems_of("Pod", key)
    assert [(p.field, p.reason) for p in problems] == [(field, UNSUPPORTED_FIELD)]
    assert says in problems[0].message
    assert "it is not placed (ask for whole GPUs as nvidia.com/gpu" in problems[0].message
    plan = plan_pod(state, key)
    assert isinstance(plan, Unschedulable) and plan.constraint == INVALID
    assert plan.reason.startswith(f"pod {key}: {field}: ")
    # another scheduler's pod asking for it is that scheduler's business: counted where it runs, not reported
    theirs = apply_pod(state, "theirs", scheduler="koord-scheduler",
                       containers=[{"name": "main", "resources": {"requests": requests}}])
    assert not state.problems_of("Pod", theirs)


def test_preferences_plain_ports_placed_by_terms_and_other_schedulers_pods_are_not_reported() -> None:
    state = fabric(blocks=1, nvlinks=1, nodes=2)
    preferred = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 10, "podAffinityTerm": TERM}]}}
    keys = [
        apply_pod(state, "prefers", affinity=preferred),
        apply_pod(state, "spreads-softly", topologySpreadConstraints=[
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}]),
        apply_pod(state, "serves", containers=[{"name": "main", "ports": [{"containerPort": 8080}]}]),
        apply_pod(state, "apart", affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {**TERM, "namespaces": ["default", "ml"]}, {**TERM, "namespaceSelector": {}}]}}),
        apply_pod(state, "theirs", scheduler="default-scheduler",
                  affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [TERM]}}),
    ]
    assert not [p for key in keys for p in state.problems_of("Pod", key)]


def test_pods_with_init_container_host_ports_of_one_shape_are_each_reported() -> None:
    state = fabric(blocks=1, nvlinks=1, nodes=2)
    ports = [{"name": "warmup", "ports": [{"containerPort": 29500, "hostPort": 29500}]}]
    keys = [apply_pod(state, f"worker-{index}", initContainers=ports) for index in range(3)]
    assert [p.key for key in keys for p in state.problems_of("Pod", key)] == keys


def test_a_containers_host_port_is_no_problem_it_is_placed_by() -> None:
    state = fabric(blocks=1, nvlinks=1, nodes=2)
    key = apply_pod(state, "serves", hostNetwork=True, containers=[
        {"name": "main", "ports": [{"containerPort": 29500, "hostPort": 29500}]}])
    assert not state.problems_of("Pod", key)
    assert state.pods[key].requests["hostport:TCP/29500"] == 1000
