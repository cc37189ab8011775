"""In-place pod resize (KEP-1287): a pod on a node counts as kube-scheduler counts it while a resize is
under way, the larger of its spec's requests and the kubelet's figures, so nothing is placed into room
the kubelet has not given back yet, and room it has is used at once.

The pods are decoded from the JSON a 1.33+ API server serves (`events.ingest.decode_object`), so what
`events.objects.slim` keeps of their status is what the fold sees.
"""

from __future__ import annotations

from typing import Any

import msgspec

from events.builders import node, node_event
from events.ingest import KIND_BY_NAME, decode_object
from events.model import Event, PodUpserted
from events.objects import Pod, PodStatus
from state.cluster import ClusterState

CORE = 1000  # millicores


def running(name: str, cpu: str, *, allocated: str | None = None, applied: str | None = None,
            infeasible: bool = False, sidecar: dict[str, str] | None = None, scheduler: str = "someone-else",
            node_name: str = "n0") -> dict[str, Any]:
    """A running pod of one container asking `cpu` (spec), as the API server serves it, with the
    kubelet's allocation and applied requests (the spec's when not given)."""
    allocated, applied = allocated or cpu, applied or allocated or cpu
    containers = [{"name": "main", "image": "trainer:1", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"},
                                                                       "limits": {"memory": "1Gi"}}}]
    statuses = [{"name": "main", "ready": True, "restartCount": 0, "image": "trainer:1",
                 "containerID": f"containerd://{name}", "state": {"running": {"startedAt": "2026-11-26T10:00:00Z"}},
                 "allocatedResources": {"cpu": allocated, "memory": "1Gi"},
                 "resources": {"requests": {"cpu": applied, "memory": "1Gi"}, "limits": {"memory": "1Gi"}}}]
    conditions: list[dict[str, Any]] = [
        {"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-26T10:00:01Z"},
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-11-26T10:00:00Z"}]
    if infeasible:
        conditions.append({"type": "PodResizePending", "status": "True", "reason": "Infeasible",
                           "message": "Node didn't have enough capacity: cpu, requested: 100000, capacity: 96000",
                           "lastTransitionTime": "2026-11-26T10:05:00Z"})
    pod: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "resourceVersion": "7"},
        "spec": {"schedulerName": scheduler, "nodeName": node_name, "containers": containers},
        "status": {"phase": "Running", "podIP": "10.0.0.7", "hostIP": "192.168.0.1", "conditions": conditions,
                   "containerStatuses": statuses, "qosClass": "Burstable"},
    }
    if sidecar is not None:
        pod["spec"]["initContainers"] = [{"name": "proxy", "restartPolicy": "Always",
                                          "resources": {"requests": {"cpu": sidecar["spec"]}}}]
        pod["status"]["initContainerStatuses"] = [
            {"name": "proxy", "allocatedResources": {"cpu": sidecar.get("allocated", sidecar["spec"])},
             "resources": {"requests": {"cpu": sidecar.get("applied", sidecar["spec"])}}}]
    return pod


def decoded(raw: dict[str, Any]) -> Pod:
    obj = decode_object(KIND_BY_NAME["Pod"], msgspec.json.encode(raw))
    assert isinstance(obj, Pod), obj
    return obj


def cluster() -> ClusterState:
    state = ClusterState()
    state.apply(node_event(node("n0", cpu="8", gpus=0)))
    return state


def cpu_used(state: ClusterState, node_name: str = "n0") -> int:
    return state.nodes[node_name].used.get("cpu", 0)


def test_a_running_pod_whose_kubelet_figures_equal_its_spec_keeps_no_status_but_its_phase() -> None:
    obj = decoded(running("steady", "6"))
    assert obj.status == PodStatus(phase="Running")  # as small, and as shareable, as before 1.33
    state = cluster()
    state.apply(PodUpserted(pod=obj))
    assert cpu_used(state) == 6 * CORE


def test_a_pod_resized_down_holds_its_old_requests_until_the_kubelet_has_applied_the_new_ones() -> None:
    state = cluster()
    state.apply(PodUpserted(pod=decoded(running("shrinking", "6"))))
    # The resize is written (spec 2); the kubelet has allocated it but still applies 6 cpus.
    in_progress = decoded(running("shrinking", "2", allocated="2", applied="6"))
    assert [status.name for status in in_progress.status.container_statuses] == ["main"]
    released = state.requests_released
    state.apply(PodUpserted(pod=in_progress))
    assert cpu_used(state) == 6 * CORE
    assert state.requests_released == released
    state.apply(PodUpserted(pod=decoded(running("shrinking", "2"))))  # applied: the status says 2 as well
    assert cpu_used(state) == 2 * CORE
    assert state.requests_released == released + 1  # the loop retries what waits for room


def test_a_resize_up_waiting_for_room_already_holds_the_new_requests() -> None:
    state = cluster()
    state.apply(PodUpserted(pod=decoded(running("growing", "7", allocated="6"))))  # Deferred by the kubelet
    assert cpu_used(state) == 7 * CORE


def test_an_infeasible_resize_counts_what_the_kubelet_allocated_not_the_spec() -> None:
    obj = decoded(running("too-big", "100", allocated="6", infeasible=True))
    assert [(c.type, c.reason) for c in obj.status.conditions] == [("PodResizePending", "Infeasible")]
    state = cluster()
    state.apply(PodUpserted(pod=obj))
    assert cpu_used(state) == 6 * CORE


def test_a_sidecar_resized_down_counts_with_the_containers_at_its_applied_figure() -> None:
    state = cluster()
    state.apply(PodUpserted(pod=decoded(running("meshed", "4", sidecar={"spec": "1", "allocated": "1",
                                                                        "applied": "3"}))))
    assert cpu_used(state) == (4 + 3) * CORE


def test_a_pod_of_ours_waits_for_a_resize_down_to_be_applied_then_fits() -> None:
    from events.builders import pod, pod_event
    from placement import plan_pod

    state = cluster()
    state.apply(PodUpserted(pod=decoded(running("shrinking", "2", allocated="2", applied="6"))))
    state.apply(pod_event(pod("new", cpu="4", gpus=0, memory="1Gi")))
    key = "default/new"
    assert not hasattr(plan_pod(state, key), "assignments")  # 6 of 8 cpus are still in use
    state.apply(PodUpserted(pod=decoded(running("shrinking", "2"))))
    plan = plan_pod(state, key)
    assert [(a.pod, a.node) for a in plan.assignments] == [(key, "n0")]  # type: ignore[union-attr]


def test_restoring_a_snapshot_counts_a_resize_under_way_as_the_fold_did() -> None:
    state = cluster()
    state.apply(PodUpserted(pod=decoded(running("shrinking", "2", allocated="2", applied="6"))))
    restored = ClusterState.restore(state.snapshot())
    assert cpu_used(restored) == 6 * CORE
    assert restored.canonical() == state.canonical()


def test_a_log_folded_record_by_record_counts_each_pod_of_one_spec_at_its_own_resize() -> None:
    from events.model import encode_event

    pods = [decoded(running(name, "2", allocated="2", applied=applied))
            for name, applied in (("a", "6"), ("b", "2"), ("c", "3"))]
    events: list[Event] = [node_event(node("n0", cpu="64", gpus=0)), *(PodUpserted(pod=obj) for obj in pods)]
    state = ClusterState()
    state.fold_records((seq, encode_event(event)) for seq, event in enumerate(events, start=1))
    assert {key: info.requests["cpu"] for key, info in state.pods.items()} == {
        "default/a": 6 * CORE, "default/b": 2 * CORE, "default/c": 3 * CORE}
    assert cpu_used(state) == 11 * CORE


def test_a_pod_too_large_to_log_keeps_what_its_resize_counts_in_its_core() -> None:
    from events.objects import pod_core

    obj = decoded(running("huge", "100", allocated="6", infeasible=True))
    state = cluster()
    state.apply(PodUpserted(pod=pod_core(obj, "too large")))
    assert cpu_used(state) == 6 * CORE
