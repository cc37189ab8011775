"""What Volcano's job controller writes, computed without a cluster: the PodGroup's minResources
(calcPGMinResources over tasks ordered by priority), its minTaskMember, and the job's phase."""

from __future__ import annotations

from typing import Any

from devcluster import volcano_job

Obj = dict[str, Any]


def task(name: str, replicas: int, cpu: str, *, min_available: int | None = None, priority_class: str = "",
         **resources: str) -> Obj:
    spec: Obj = {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu, **resources}}}]}
    if priority_class:
        spec["priorityClassName"] = priority_class
    made: Obj = {"name": name, "replicas": replicas, "template": {"spec": spec}}
    if min_available is not None:
        made["minAvailable"] = min_available
    return made


def job(min_available: int, *tasks: Obj) -> Obj:
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": "j", "namespace": "default", "uid": "u-1"},
            "spec": {"minAvailable": min_available, "queue": "default", "tasks": list(tasks)}}


def test_min_resources_counts_the_first_min_available_pods_of_the_highest_priority_tasks() -> None:
    found = volcano_job.min_resources(
        job(3, task("low", 4, "1", min_available=4), task("high", 2, "10", min_available=2, priority_class="hi")),
        {"hi": 1000})
    assert found["cpu"] == "21" and found["pods"] == "3"  # 2 high (10 each), then 1 low: minAvailable < 6


def test_min_resources_fills_up_with_spare_replicas_after_each_tasks_minimum() -> None:
    found = volcano_job.min_resources(
        job(4, task("a", 3, "1", min_available=1), task("b", 2, "100m", min_available=1)), {})
    assert found["cpu"] == "3100m"  # a's 1 and b's 1, then 2 of a's spare replicas (job order among equals)


def test_pod_usage_names_extended_resources_twice_and_hugepages_twice() -> None:
    usage = volcano_job.pod_usage({"containers": [{"resources": {
        "requests": {"cpu": "1", "nvidia.com/gpu": "2", "hugepages-2Mi": "4Mi"}, "limits": {"memory": "1Gi"}}}]})
    assert sorted(usage) == ["count/pods", "cpu", "hugepages-2Mi", "limits.memory", "nvidia.com/gpu", "pods",
                             "requests.cpu", "requests.hugepages-2Mi", "requests.nvidia.com/gpu"]


def test_min_task_member_is_each_tasks_min_available_else_its_replicas() -> None:
    spec = volcano_job.pod_group_spec(job(2, task("a", 3, "1", min_available=1), task("b", 2, "1")), {})
    assert spec["minTaskMember"] == {"a": 1, "b": 2}


def test_a_running_job_fails_when_fewer_than_min_available_pods_succeeded() -> None:
    finished = job(2, task("a", 2, "1"))
    status = {"state": {"phase": "Running"}, "succeeded": 1, "failed": 1}
    assert volcano_job.next_phase(finished, status) == "Failed"
    assert volcano_job.next_phase(finished, {**status, "succeeded": 2, "failed": 0}) == "Completed"
    assert volcano_job.next_phase(finished, {**status, "succeeded": 1, "failed": 0}) == "Running"
