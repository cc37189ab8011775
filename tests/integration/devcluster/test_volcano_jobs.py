"""Volcano's Job (vcjob) as a cluster running Volcano serves it: admitted by Volcano's webhook defaults and
ValidatingAdmissionPolicy, given a PodGroup by the job controller, and pods only once the PodGroup is enqueued
(what toposched's enqueue does). Driven with kubernetes-asyncio's CustomObjectsApi and CoreV1Api, and kubectl."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from devcluster import BackgroundDevCluster, DevCluster

from .kubectl import Kubectl, needs_kubectl
from .storage_api import eventually

Obj = dict[str, Any]
GROUP, VERSION = "batch.volcano.sh", "v1alpha1"
JOBS = "jobs.batch.volcano.sh"
POD_GROUPS = "podgroups.scheduling.volcano.sh"
NAMESPACE = "default"

# Shaped as Volcano's docs write a training job (the tensorflow example's ps / worker tasks): no queue, no
# minAvailable, the scheduler named.
TRAINING_JOB = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: tf-dist
spec:
  schedulerName: volcano
  plugins:
    env: []
    svc: []
  policies:
    - event: PodEvicted
      action: RestartJob
  tasks:
    - replicas: 1
      name: ps
      template:
        spec:
          containers:
            - name: tensorflow
              image: volcanosh/dist-mnist-tf-example:0.0.1
              resources:
                requests:
                  cpu: 500m
                  memory: 1Gi
          restartPolicy: Never
    - replicas: 2
      name: worker
      policies:
        - event: TaskCompleted
          action: CompleteJob
      template:
        metadata:
          labels:
            role: worker
        spec:
          containers:
            - name: tensorflow
              image: volcanosh/dist-mnist-tf-example:0.0.1
              resources:
                requests:
                  cpu: "1"
                  nvidia.com/gpu: "1"
                limits:
                  cpu: "2"
                  nvidia.com/gpu: "1"
          restartPolicy: Never
"""


def training_job(name: str = "tf-dist", **spec: Any) -> Obj:
    job: Obj = yaml.safe_load(TRAINING_JOB)
    job["metadata"]["name"] = name
    job["spec"].update(spec)
    return job


def custom(api: Any) -> Any:
    """kubernetes-asyncio's CustomObjectsApi, untyped: its type hints do not declare `_content_type`."""
    return client.CustomObjectsApi(api)


def job_pods(cluster: DevCluster, job: str = "tf-dist") -> list[Obj]:
    return cluster.store.list("pods", NAMESPACE,
                              lambda p: (p["metadata"].get("labels") or {}).get("volcano.sh/job-name") == job)


def the_group(cluster: DevCluster) -> Obj | None:
    groups = cluster.store.list(POD_GROUPS, NAMESPACE)
    return groups[0] if groups else None


async def create(api: Any, job: Obj) -> Obj:
    created: Obj = await custom(api).create_namespaced_custom_object(
        GROUP, VERSION, NAMESPACE, "jobs", job)
    return created


async def enqueue(api: Any, group: Obj) -> None:
    """What the scheduler's enqueue action writes."""
    await custom(api).patch_namespaced_custom_object_status(
        "scheduling.volcano.sh", "v1beta1", NAMESPACE, "podgroups", group["metadata"]["name"],
        {"status": {"phase": "Inqueue"}}, _content_type="application/merge-patch+json")


async def test_a_new_vcjob_is_defaulted_and_gets_a_pending_pod_group_but_no_pods(cluster: DevCluster, api: Any) -> None:
    job = await create(api, training_job())
    spec = job["spec"]
    defaults = (spec["queue"], spec["schedulerName"], spec["maxRetry"], spec["minAvailable"])
    assert defaults == ("default", "volcano", 3, 3)
    assert [(t["minAvailable"], t["maxRetry"]) for t in spec["tasks"]] == [(1, 3), (2, 3)]
    group = await eventually(lambda: the_group(cluster))
    uid = job["metadata"]["uid"]
    assert group["metadata"]["name"] == f"tf-dist-{uid}"
    assert group["metadata"]["ownerReferences"] == [{
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "tf-dist", "uid": uid, "controller": True,
        "blockOwnerDeletion": True}]
    assert group["spec"] == {
        "minMember": 3, "minTaskMember": {"ps": 1, "worker": 2}, "queue": "default",
        "minResources": {"count/pods": "3", "cpu": "2500m", "limits.cpu": "4", "memory": "1Gi",
                         "nvidia.com/gpu": "2", "pods": "3", "requests.cpu": "2500m", "requests.memory": "1Gi",
                         "requests.nvidia.com/gpu": "2"}}
    assert "status" not in group  # the scheduler writes it
    status = (await custom(api).get_namespaced_custom_object_status(
        GROUP, VERSION, NAMESPACE, "jobs", "tf-dist"))["status"]
    assert status["state"]["phase"] == "Pending" and status["minAvailable"] == 3
    assert (await client.CoreV1Api(api).list_namespaced_pod(NAMESPACE)).items == []


async def test_pods_appear_once_the_pod_group_is_enqueued(cluster: DevCluster, api: Any) -> None:
    job = await create(api, training_job(priorityClassName="system-cluster-critical"))
    group = await eventually(lambda: the_group(cluster))
    await enqueue(api, group)
    pods = await eventually(lambda: len(job_pods(cluster)) == 3 and job_pods(cluster))
    assert [p["metadata"]["name"] for p in pods] == ["tf-dist-ps-0", "tf-dist-worker-0", "tf-dist-worker-1"]
    worker = pods[2]
    name, uid = group["metadata"]["name"], job["metadata"]["uid"]
    assert worker["metadata"]["annotations"] == {
        "volcano.sh/task-index": "1", "volcano.sh/task-spec": "worker", "scheduling.k8s.io/group-name": name,
        "volcano.sh/job-name": "tf-dist", "volcano.sh/queue-name": "default", "volcano.sh/job-version": "0",
        "volcano.sh/template-uid": "tf-dist-worker", "volcano.sh/job-retry-count": "0"}
    assert worker["metadata"]["labels"] == {
        "role": "worker", "volcano.sh/task-index": "1", "volcano.sh/job-name": "tf-dist",
        "volcano.sh/task-spec": "worker", "volcano.sh/job-namespace": "default", "volcano.sh/queue-name": "default"}
    assert worker["metadata"]["ownerReferences"][0]["uid"] == uid
    assert worker["spec"]["schedulerName"] == "volcano"
    assert worker["spec"]["priorityClassName"] == "system-cluster-critical"
    assert worker["spec"]["priority"] == 2_000_000_000  # the pods go through the Priority admission plugin
    status = await eventually(lambda: cluster.store.get(JOBS, "tf-dist", NAMESPACE)["status"].get("pending") == 3
                              and cluster.store.get(JOBS, "tf-dist", NAMESPACE)["status"])
    assert status["taskStatusCount"] == {"ps": {"phase": {"Pending": 1}}, "worker": {"phase": {"Pending": 2}}}
    assert status["state"]["phase"] == "Pending"


async def test_a_deleted_pod_is_recreated(cluster: DevCluster, api: Any) -> None:
    await create(api, training_job())
    await enqueue(api, await eventually(lambda: the_group(cluster)))
    await eventually(lambda: len(job_pods(cluster)) == 3)
    old_uid = cluster.store.get("pods", "tf-dist-worker-1", NAMESPACE)["metadata"]["uid"]
    await client.CoreV1Api(api).delete_namespaced_pod("tf-dist-worker-1", NAMESPACE)
    back = await eventually(lambda: (pod := cluster.store.find("pods", "tf-dist-worker-1", NAMESPACE)) is not None
                            and pod["metadata"]["uid"] != old_uid and pod)
    assert back["metadata"]["annotations"]["volcano.sh/task-index"] == "1"


async def test_the_job_runs_once_min_available_pods_run_and_completes_when_all_succeed(cluster: DevCluster) -> None:
    cluster.store.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n0"},
                          "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110",
                                                     "nvidia.com/gpu": "8"}}})
    cluster.store.create(training_job(), keep_status=False)
    group = await eventually(lambda: the_group(cluster))
    cluster.store.patch(POD_GROUPS, group["metadata"]["name"], {"status": {"phase": "Inqueue"}}, NAMESPACE,
                        subresource="status")
    pods = await eventually(lambda: len(job_pods(cluster)) == 3 and job_pods(cluster))
    for pod in pods:
        cluster.store.bind(NAMESPACE, pod["metadata"]["name"], "n0")

    def phase() -> str:
        return str(cluster.store.get(JOBS, "tf-dist", NAMESPACE)["status"]["state"]["phase"])

    await eventually(lambda: phase() == "Running")
    assert cluster.store.get(JOBS, "tf-dist", NAMESPACE)["status"]["running"] == 3
    for pod in pods:
        cluster.store.patch("pods", pod["metadata"]["name"], {"status": {"phase": "Succeeded"}}, NAMESPACE,
                            subresource="status")
    await eventually(lambda: phase() == "Completed")
    status = cluster.store.get(JOBS, "tf-dist", NAMESPACE)["status"]
    assert status["succeeded"] == 3
    assert [c["status"] for c in status["conditions"]] == ["Pending", "Running", "Completed"]


async def test_deleting_the_job_removes_its_pods_and_pod_group(cluster: DevCluster, api: Any) -> None:
    await create(api, training_job())
    await enqueue(api, await eventually(lambda: the_group(cluster)))
    await eventually(lambda: len(job_pods(cluster)) == 3)
    await custom(api).delete_namespaced_custom_object(GROUP, VERSION, NAMESPACE, "jobs", "tf-dist")
    await eventually(lambda: not job_pods(cluster) and the_group(cluster) is None)


async def test_a_cluster_without_the_job_controller_only_stores_jobs(api: Any) -> None:
    del api
    async with DevCluster(port=0, volcano_jobs=False) as bare:
        bare.store.create(training_job(), keep_status=False)
        await asyncio.sleep(0)  # one loop step: when the controller would have acted
        await asyncio.sleep(0)
        assert bare.store.list(POD_GROUPS) == [] and "status" not in bare.store.get(JOBS, "tf-dist", NAMESPACE)


@pytest.mark.parametrize(("change", "message"), [
    ({"minAvailable": 4}, "job 'minAvailable' should not be greater than total replicas in tasks"),
    ({"tasks": []}, "No task specified in job spec"),
    ({"maxRetry": -1}, "'maxRetry' cannot be less than zero"),
    ({"tasks": [{"name": "w", "replicas": 1}, {"name": "w", "replicas": 1}]}, "duplicated task name found"),
    ({"tasks": [{"name": "Worker", "replicas": 1}]},
     "a lowercase RFC 1123 label must consist of lower case alphanumeric characters"),
    ({"tasks": [{"name": "w", "replicas": 1, "minAvailable": 2}]}, "'minAvailable' is greater than 'replicas' in task"),
    ({"minAvailable": 1, "tasks": [{"name": "w", "replicas": -1}]}, "'replicas' < 0 in task"),
    ({"tasks": [{"name": "w", "replicas": -1}]}, "job 'minAvailable' must be >= 0"),  # defaulted to -1 first
    ({"policies": [{"event": "PodEvicted", "exitCode": 3, "action": "RestartJob"}]},
     "must not specify event and exitCode simultaneously"),
])
async def test_volcanos_validation_policy_refuses_a_bad_job(api: Any, change: Obj, message: str) -> None:
    with pytest.raises(ApiException) as refused:
        await create(api, training_job("bad", **change))
    assert refused.value.status == 422
    status = json.loads(refused.value.body or "{}")
    denial = ("ValidatingAdmissionPolicy 'job-validation-policy' with binding 'job-validation-policy-binding' "
              f"denied request: {message}")
    assert status["reason"] == "Invalid"
    assert status["message"] == f'jobs.batch.volcano.sh "bad" is forbidden: {denial}'
    assert status["details"] == {"name": "bad", "group": GROUP, "kind": "jobs", "causes": [{"message": denial}]}


async def test_an_update_may_not_change_the_queue(cluster: DevCluster, api: Any) -> None:
    await create(api, training_job())
    with pytest.raises(ApiException) as refused:
        await custom(api).patch_namespaced_custom_object(
            GROUP, VERSION, NAMESPACE, "jobs", "tf-dist", {"spec": {"queue": "other"}},
            _content_type="application/merge-patch+json")
    assert refused.value.status == 422
    assert "job updates may not change fields other than" in json.loads(refused.value.body or "{}")["message"]
    assert cluster.store.get(JOBS, "tf-dist", NAMESPACE)["spec"]["queue"] == "default"


@pytest.fixture(scope="module")
def served(background: tuple[BackgroundDevCluster, Kubectl]) -> tuple[BackgroundDevCluster, Kubectl]:
    return background


@needs_kubectl
def test_kubectl_applies_a_vcjob_and_refuses_an_unknown_field(served: tuple[BackgroundDevCluster, Kubectl]) -> None:
    cluster, kubectl = served
    out = kubectl.run("apply", "-f", "-", stdin=TRAINING_JOB.replace("tf-dist", "applied")).stdout
    assert "job.batch.volcano.sh/applied created" in out
    assert "applied" in kubectl.run("get", "vcjob", "applied", "-o", "name").stdout
    misspelt = TRAINING_JOB.replace("tf-dist", "misspelt").replace("replicas: 1", "replicaz: 1")
    refused = kubectl.run("apply", "-f", "-", stdin=misspelt, check=False)
    assert refused.returncode != 0 and 'unknown field "spec.tasks[0].replicaz"' in refused.stderr
    assert cluster.call(lambda c: c.store.find(JOBS, "misspelt", NAMESPACE)) is None
