"""Kubeflow's training-operator (v1) with toposched, in both of its gang modes, with PyTorchJobs shaped as
Kubeflow's docs write them (pytorch-simple, with GPUs), each applied as it is with `kubectl apply -f`.

devcluster runs a training-operator (devcluster/training_operator_controller.py) started with
`--gang-scheduler-name`:
- `volcano`: a Volcano PodGroup named as the job; the job's pods only once it is `Inqueue`, which
  toposched does for a job whose pod templates name toposched (state/volcano_enqueue.py);
- `toposched` (scheduler-plugins gang scheduling under toposched's name): a `scheduling.x-k8s.io`
  PodGroup and the pods at once, labelled `scheduling.x-k8s.io/pod-group` and given `schedulerName:
  toposched` where their template names none.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.ecosystem.harness import Ecosystem, ecosystem, gpu_nodes, namespace_yaml, running, stream

pytestmark = ecosystem

NODES = [f"gpu-{index}" for index in range(4)]


def pytorch_job(name: str, namespace: str, workers: int, *, scheduler: str = "", timeout: int = 0) -> str:
    """A PyTorchJob of one Master and `workers` Workers, 8 GPUs each. `scheduler`: the schedulerName its
    pod templates say ("" none: training-operator writes its gang scheduler's name); `timeout`:
    runPolicy.schedulingPolicy.scheduleTimeoutSeconds."""
    named = f"\n          schedulerName: {scheduler}" if scheduler else ""
    replica = """      replicas: {replicas}
      restartPolicy: OnFailure
      template:
        spec:{named}
          containers:
            - name: pytorch
              image: docker.io/kubeflowkatib/pytorch-mnist:v1beta1-45c5727
              command: ["python3", "/opt/pytorch-mnist/mnist.py", "--epochs=1"]
              resources:
                limits:
                  nvidia.com/gpu: 8
"""
    policy = f"\n      scheduleTimeoutSeconds: {timeout}" if timeout else ""
    return f"""apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: {name}
  namespace: {namespace}
spec:
  runPolicy:
    schedulingPolicy:
      queue: default{policy}
  pytorchReplicaSpecs:
    Master:
{replica.format(replicas=1, named=named)}    Worker:
{replica.format(replicas=workers, named=named)}"""


def pod_names(job: str, workers: int) -> list[str]:
    return [f"{job}-master-0", *(f"{job}-worker-{index}" for index in range(workers))]


def remove_jobs(eco: Ecosystem, namespace: str) -> None:
    eco.kubectl.run("delete", "pytorchjobs.kubeflow.org", "--all", "-n", namespace, "--wait=false")
    eco.delete_namespace_objects(namespace)
    eco.wait_for(lambda: not eco.objects("pods", namespace), what="the jobs' pods gone")


@pytest.fixture(scope="module")
def volcano_mode(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ecosystem]:
    with running(tmp_path_factory.mktemp("kubeflow-volcano"), gpu_nodes(NODES),
                 cluster_options={"training_operator": "volcano"}) as started:
        yield started


@pytest.fixture(scope="module")
def plugins_mode(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ecosystem]:
    with running(tmp_path_factory.mktemp("kubeflow-plugins"), gpu_nodes(NODES),
                 cluster_options={"training_operator": "toposched"}) as started:
        yield started


def volcano_group(eco: Ecosystem, name: str, namespace: str) -> dict[str, Any]:
    found = eco.find("podgroups.scheduling.volcano.sh", name, namespace)
    assert found is not None, name
    return found


def test_volcano_mode_a_job_naming_toposched_is_enqueued_gets_its_pods_and_is_placed(volcano_mode: Ecosystem) -> None:
    # training-operator creates a job's pods only once its Volcano PodGroup is Inqueue: toposched enqueues
    # it for a job whose replicas name toposched, never for one whose pods will be Volcano's.
    eco, namespace = volcano_mode, "kubeflow-volcano"
    eco.apply(stream(namespace_yaml(namespace), pytorch_job("bert", namespace, 3, scheduler="toposched"),
                     pytorch_job("theirs", namespace, 1)))
    names = pod_names("bert", 3)
    eco.wait_for(lambda: all(eco.find("pods", name, namespace) for name in names), what="the job's pods created")
    eco.wait_bound(names, namespace)
    eco.wait_for(lambda: (volcano_group(eco, "bert", namespace).get("status") or {}).get("phase") == "Running",
                 what="the job's PodGroup Running")
    theirs = volcano_group(eco, "theirs", namespace)
    assert (theirs.get("status") or {}).get("phase", "") in ("", "Pending")
    assert not any(pod["metadata"]["name"].startswith("theirs-") for pod in eco.objects("pods", namespace))
    remove_jobs(eco, namespace)


def test_scheduler_plugins_mode_under_toposcheds_name_places_a_job_whole_and_none_of_one_too_big(
        plugins_mode: Ecosystem) -> None:
    # --gang-scheduler-name=toposched: the pods come at once, named toposched's, in a scheduling.x-k8s.io
    # gang of minMember = all replicas. 4 nodes of 8 GPUs: a job of 4 pods lands whole; one of 5 gets no
    # node at all (all or nothing) and does not hold the first back.
    eco, namespace = plugins_mode, "kubeflow-plugins"
    eco.apply(stream(namespace_yaml(namespace), pytorch_job("fits", namespace, 3, timeout=600),
                     pytorch_job("too-big", namespace, 4, timeout=600)))
    where = eco.wait_bound(pod_names("fits", 3), namespace)
    assert sorted(where.values()) == NODES
    for name in pod_names("fits", 3):
        pod = eco.find("pods", name, namespace)
        assert pod is not None and pod["spec"]["schedulerName"] == "toposched"
        assert pod["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == "fits"
    group = eco.find("podgroups.scheduling.x-k8s.io", "too-big", namespace)
    assert group is not None and group["spec"]["minMember"] == 5
    eco.wait_pending(pod_names("too-big", 4), namespace)  # marked Unschedulable, none bound
    remove_jobs(eco, namespace)
