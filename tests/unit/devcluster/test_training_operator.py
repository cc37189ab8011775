"""What Kubeflow's training-operator writes for a kubeflow.org/v1 job, computed without a cluster: the Volcano
PodGroup's spec (minMember, queue, minResources as CalcPGMinResources sums them) and the pods' shape."""

from __future__ import annotations

from typing import Any

from devcluster import training_operator

Obj = dict[str, Any]


def replica(replicas: int | None, *, requests: Obj | None = None, limits: Obj | None = None,
            priority_class: str = "", **template_spec: Any) -> Obj:
    resources: Obj = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    spec: Obj = {"containers": [{"name": "pytorch", "image": "x", "resources": resources}], **template_spec}
    if priority_class:
        spec["priorityClassName"] = priority_class
    made: Obj = {"restartPolicy": "OnFailure", "template": {"spec": spec}}
    if replicas is not None:
        made["replicas"] = replicas
    return made


def pytorch_job(run_policy: Obj | None = None, **specs: Obj) -> Obj:
    spec: Obj = {"pytorchReplicaSpecs": specs}
    if run_policy is not None:
        spec["runPolicy"] = run_policy
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": "mnist", "namespace": "default", "uid": "u-1", "annotations": {"a": "b"}},
            "spec": spec}


def test_the_pod_group_counts_every_replica_and_sums_their_containers_requests() -> None:
    job = pytorch_job(Master=replica(1, requests={"cpu": "1", "memory": "1Gi"}),
                      Worker=replica(3, requests={"cpu": "500m", "nvidia.com/gpu": "1"}))
    group = training_operator.pod_group_for(job, {})
    assert group["metadata"] == {
        "name": "mnist", "namespace": "default", "annotations": {"a": "b"},
        "ownerReferences": [{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "mnist", "uid": "u-1",
                             "controller": True, "blockOwnerDeletion": True}]}
    assert group["spec"] == {"minMember": 4, "queue": "default",
                             "minResources": {"cpu": "2500m", "memory": "1Gi", "nvidia.com/gpu": "3"}}


def test_min_resources_take_the_first_min_available_pods_of_the_highest_priority_replicas() -> None:
    job = pytorch_job({"schedulingPolicy": {"minAvailable": 2, "queue": "q", "priorityClass": "hi"}},
                      Worker=replica(3, requests={"cpu": "1"}),
                      Master=replica(1, requests={"cpu": "10"}, priority_class="high"))
    spec = training_operator.pod_group_spec(job, {"high": 1000})
    assert spec == {"minMember": 2, "queue": "q", "priorityClassName": "hi", "minResources": {"cpu": "11"}}


def test_a_container_without_requests_counts_its_limits_and_a_missing_replicas_counts_one() -> None:
    job = pytorch_job(Master=replica(None, limits={"cpu": "2"}), Worker=replica(2, requests={}, limits={"cpu": "4"}))
    assert training_operator.pod_group_spec(job, {}) == {"minMember": 3, "queue": "default",
                                                         "minResources": {"cpu": "2"}}


def test_scheduling_policys_min_resources_are_written_as_given_and_an_existing_queue_is_kept() -> None:
    job = pytorch_job({"schedulingPolicy": {"minResources": {"cpu": "7"}, "queue": "mine"}}, Worker=replica(1))
    group = {"spec": {"minMember": 1, "queue": "theirs", "minResources": {"cpu": "1"}, "minTaskMember": {"w": 1}}}
    updated = training_operator.pod_group_updated(group, job, {})
    assert updated is not None
    assert updated["spec"] == {"minMember": 1, "queue": "theirs", "minResources": {"cpu": "7"}}
    assert training_operator.pod_group_updated(updated, job, {}) is None


def test_a_pod_carries_the_training_labels_the_volcano_annotations_and_the_replicas_restart_policy() -> None:
    job = pytorch_job(Master=replica(1, requests={"cpu": "1"}),
                      Worker={**replica(3, requests={"cpu": "1"}), "restartPolicy": "ExitCode"})
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["metadata"] = {"labels": {"app": "mnist"}}
    pod = training_operator.pod_for(job, "Worker", 2)
    assert pod["metadata"]["name"] == "mnist-worker-2"
    assert pod["metadata"]["labels"] == {
        "app": "mnist", "training.kubeflow.org/operator-name": "pytorchjob-controller",
        "training.kubeflow.org/job-name": "mnist", "training.kubeflow.org/replica-type": "worker",
        "training.kubeflow.org/replica-index": "2"}
    assert pod["metadata"]["annotations"] == {"scheduling.k8s.io/group-name": "mnist", "volcano.sh/task-spec": "worker"}
    assert pod["spec"]["restartPolicy"] == "Never" and pod["spec"]["schedulerName"] == "volcano"
    master = training_operator.pod_for(job, "Master", 0)
    assert master["metadata"]["labels"]["training.kubeflow.org/job-role"] == "master"
    assert master["spec"]["restartPolicy"] == "OnFailure"


def test_tfjob_master_role_is_chief_or_master_else_worker_zero() -> None:
    tf = training_operator.BY_KIND["TFJob"].master_role
    assert tf({"Chief": {}, "Worker": {}}, "Chief", 0) and not tf({"Chief": {}, "Worker": {}}, "Worker", 0)
    assert tf({"PS": {}, "Worker": {}}, "Worker", 0) and not tf({"PS": {}, "Worker": {}}, "Worker", 1)


def test_an_mpijob_wants_no_pods_here() -> None:
    job = {**pytorch_job(), "kind": "MPIJob", "spec": {"mpiReplicaSpecs": {"Launcher": replica(1)}}}
    assert training_operator.wanted_pods(job) == []
    assert training_operator.pod_group_spec(job, {})["minMember"] == 1
