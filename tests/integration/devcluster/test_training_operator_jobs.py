"""Kubeflow training-operator's v1 jobs as a cluster running training-operator serves them: with Volcano gang
scheduling, a PodGroup named as the job, and the pods only once that PodGroup is enqueued (what toposched's enqueue
does); with another gang scheduler's name, a scheduling.x-k8s.io PodGroup and the pods at once, labelled with it;
with none, the pods only. Driven with kubernetes-asyncio's CustomObjectsApi and CoreV1Api."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import yaml
from kubernetes_asyncio import client, config

from devcluster import DevCluster

from .storage_api import eventually

Obj = dict[str, Any]
GROUP, VERSION = "kubeflow.org", "v1"
POD_GROUPS = "podgroups.scheduling.volcano.sh"
X_K8S_POD_GROUPS = "podgroups.scheduling.x-k8s.io"
NAMESPACE = "default"

# Shaped as training-operator's PyTorch example (a Master and Workers), with the scheduler named in the template.
PYTORCH_JOB = """
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: mnist
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      restartPolicy: OnFailure
      template:
        spec:
          schedulerName: toposched
          containers:
            - name: pytorch
              image: docker.io/kubeflowkatib/pytorch-mnist:v1beta1-45c5727
              resources:
                requests:
                  cpu: "1"
                  memory: 2Gi
    Worker:
      replicas: 3
      restartPolicy: OnFailure
      template:
        metadata:
          labels:
            app: mnist
        spec:
          schedulerName: toposched
          containers:
            - name: pytorch
              image: docker.io/kubeflowkatib/pytorch-mnist:v1beta1-45c5727
              resources:
                requests:
                  cpu: "2"
                  nvidia.com/gpu: "1"
                limits:
                  nvidia.com/gpu: "1"
"""


def pytorch_job(name: str = "mnist", scheduler: str | None = "toposched") -> Obj:
    job: Obj = yaml.safe_load(PYTORCH_JOB)
    job["metadata"]["name"] = name
    for spec in job["spec"]["pytorchReplicaSpecs"].values():
        if scheduler is None:
            del spec["template"]["spec"]["schedulerName"]
    return job


def custom(api: Any) -> Any:
    return client.CustomObjectsApi(api)


def job_pods(cluster: DevCluster, job: str = "mnist") -> list[Obj]:
    return cluster.store.list(
        "pods", NAMESPACE, lambda p: (p["metadata"].get("labels") or {}).get("training.kubeflow.org/job-name") == job)


async def create(api: Any, job: Obj) -> Obj:
    created: Obj = await custom(api).create_namespaced_custom_object(GROUP, VERSION, NAMESPACE, "pytorchjobs", job)
    return created


async def enqueue(api: Any, name: str) -> None:
    """What the scheduler's enqueue action writes."""
    await custom(api).patch_namespaced_custom_object_status(
        "scheduling.volcano.sh", "v1beta1", NAMESPACE, "podgroups", name, {"status": {"phase": "Inqueue"}},
        _content_type="application/merge-patch+json")


async def test_a_pytorchjob_gets_a_pod_group_and_its_pods_only_once_the_pod_group_is_enqueued(
        cluster: DevCluster, api: Any) -> None:
    job = await create(api, pytorch_job())
    group = await eventually(lambda: cluster.store.find(POD_GROUPS, "mnist", NAMESPACE))
    assert group["metadata"]["ownerReferences"] == [{
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "mnist", "uid": job["metadata"]["uid"],
        "controller": True, "blockOwnerDeletion": True}]
    assert group["spec"] == {"minMember": 4, "queue": "default",
                             "minResources": {"cpu": "7", "memory": "2Gi", "nvidia.com/gpu": "3"}}
    status = await eventually(lambda: cluster.store.get("pytorchjobs.kubeflow.org", "mnist", NAMESPACE).get("status"))
    assert [(c["type"], c["status"], c["reason"]) for c in status["conditions"]] == [
        ("Created", "True", "PyTorchJobCreated")]
    assert (await client.CoreV1Api(api).list_namespaced_pod(NAMESPACE)).items == []  # Pending: delayed

    await enqueue(api, "mnist")
    pods = await eventually(lambda: len(job_pods(cluster)) == 4 and job_pods(cluster))
    assert sorted(p["metadata"]["name"] for p in pods) == ["mnist-master-0", "mnist-worker-0", "mnist-worker-1",
                                                           "mnist-worker-2"]
    worker = cluster.store.get("pods", "mnist-worker-2", NAMESPACE)
    assert worker["metadata"]["labels"] == {
        "app": "mnist", "training.kubeflow.org/operator-name": "pytorchjob-controller",
        "training.kubeflow.org/job-name": "mnist", "training.kubeflow.org/replica-type": "worker",
        "training.kubeflow.org/replica-index": "2"}
    assert worker["metadata"]["annotations"] == {"scheduling.k8s.io/group-name": "mnist",
                                                 "volcano.sh/task-spec": "worker"}
    assert worker["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
    assert worker["spec"]["schedulerName"] == "toposched" and worker["spec"]["restartPolicy"] == "OnFailure"
    master = cluster.store.get("pods", "mnist-master-0", NAMESPACE)
    assert master["metadata"]["labels"]["training.kubeflow.org/job-role"] == "master"
    assert master["metadata"]["annotations"]["volcano.sh/task-spec"] == "master"


async def test_a_template_without_a_scheduler_gets_volcano(cluster: DevCluster, api: Any) -> None:
    await create(api, pytorch_job("plain", scheduler=None))
    await eventually(lambda: cluster.store.find(POD_GROUPS, "plain", NAMESPACE))
    await enqueue(api, "plain")
    pods = await eventually(lambda: len(job_pods(cluster, "plain")) == 4 and job_pods(cluster, "plain"))
    assert {p["spec"]["schedulerName"] for p in pods} == {"volcano"}


async def test_a_deleted_pod_comes_back(cluster: DevCluster, api: Any) -> None:
    await create(api, pytorch_job())
    await eventually(lambda: cluster.store.find(POD_GROUPS, "mnist", NAMESPACE))
    await enqueue(api, "mnist")
    await eventually(lambda: len(job_pods(cluster)) == 4)
    old_uid = cluster.store.get("pods", "mnist-worker-1", NAMESPACE)["metadata"]["uid"]
    await client.CoreV1Api(api).delete_namespaced_pod("mnist-worker-1", NAMESPACE)
    await eventually(lambda: (pod := cluster.store.find("pods", "mnist-worker-1", NAMESPACE)) is not None
                     and pod["metadata"]["uid"] != old_uid)


async def test_deleting_the_job_removes_its_pod_group_and_pods(cluster: DevCluster, api: Any) -> None:
    await create(api, pytorch_job())
    await eventually(lambda: cluster.store.find(POD_GROUPS, "mnist", NAMESPACE))
    await enqueue(api, "mnist")
    await eventually(lambda: len(job_pods(cluster)) == 4)
    await custom(api).delete_namespaced_custom_object(GROUP, VERSION, NAMESPACE, "pytorchjobs", "mnist")
    await eventually(lambda: not job_pods(cluster) and cluster.store.find(POD_GROUPS, "mnist", NAMESPACE) is None)


async def test_a_cluster_without_the_training_operator_only_stores_jobs(api: Any) -> None:
    del api
    async with DevCluster(port=0, training_operator=False) as bare:
        assert bare.training_operator is None
        bare.store.create(pytorch_job(), keep_status=False)
        assert bare.store.list(POD_GROUPS) == []
        assert "status" not in bare.store.get("pytorchjobs.kubeflow.org", "mnist", NAMESPACE)


@asynccontextmanager
async def operating(gang_scheduler: str, tmp_path: Path) -> AsyncIterator[tuple[DevCluster, Any]]:
    """A devcluster whose training-operator runs with `--gang-scheduler-name=<gang_scheduler>`, and a client."""
    async with DevCluster(port=0, kubelet=False, training_operator=gang_scheduler) as started:
        api = await config.new_client_from_config(config_file=str(started.write_kubeconfig(tmp_path / "kubeconfig")))
        try:
            yield started, api
        finally:
            await api.close()


async def test_with_another_gang_scheduler_a_pytorchjob_gets_a_scheduler_plugins_pod_group_and_its_pods_at_once(
        tmp_path: Path) -> None:
    async with operating("toposched", tmp_path) as (cluster, api):
        job = pytorch_job(scheduler=None)
        job["spec"]["runPolicy"] = {"schedulingPolicy": {"queue": "ignored", "scheduleTimeoutSeconds": 60}}
        created = await create(api, job)
        pods = await eventually(lambda: len(job_pods(cluster)) == 4 and job_pods(cluster))  # no enqueue needed
        group = await custom(api).get_namespaced_custom_object("scheduling.x-k8s.io", "v1alpha1", NAMESPACE,
                                                               "podgroups", "mnist")
        assert group["metadata"]["ownerReferences"] == [{
            "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "mnist",
            "uid": created["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}]
        assert group["spec"] == {"minMember": 4, "minResources": {"cpu": "7", "memory": "2Gi", "nvidia.com/gpu": "3"},
                                 "scheduleTimeoutSeconds": 60}
        assert "status" not in group and cluster.store.list(POD_GROUPS) == []
        assert sorted(p["metadata"]["name"] for p in pods) == ["mnist-master-0", "mnist-worker-0", "mnist-worker-1",
                                                               "mnist-worker-2"]
        labelled = await client.CoreV1Api(api).list_namespaced_pod(
            NAMESPACE, label_selector="scheduling.x-k8s.io/pod-group=mnist")
        assert len(labelled.items) == 4
        assert {pod.spec.scheduler_name for pod in labelled.items} == {"toposched"}
        assert all(not pod.metadata.annotations for pod in labelled.items)  # no Volcano annotations
        worker = cluster.store.get("pods", "mnist-worker-0", NAMESPACE)
        assert worker["metadata"]["labels"]["app"] == "mnist"
        assert worker["metadata"]["labels"]["training.kubeflow.org/replica-type"] == "worker"

        await custom(api).delete_namespaced_custom_object(GROUP, VERSION, NAMESPACE, "pytorchjobs", "mnist")
        await eventually(lambda: not job_pods(cluster) and not cluster.store.list(X_K8S_POD_GROUPS))


async def test_without_gang_scheduling_a_pytorchjob_gets_its_pods_at_once_and_no_pod_group(tmp_path: Path) -> None:
    async with operating("", tmp_path) as (cluster, api):
        await create(api, pytorch_job(scheduler=None))
        pods = await eventually(lambda: len(job_pods(cluster)) == 4 and job_pods(cluster))
        assert cluster.store.list(POD_GROUPS) == [] and cluster.store.list(X_K8S_POD_GROUPS) == []
        assert {p["spec"].get("schedulerName") for p in pods} == {"default-scheduler"}
        assert all("scheduling.x-k8s.io/pod-group" not in p["metadata"]["labels"] for p in pods)
