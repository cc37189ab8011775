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


# ----------------------------------------------------------------------------- other gang modes

TOPOSCHED = training_operator.GangScheduler("toposched")
NO_GANG = training_operator.GangScheduler("")


def test_the_gang_scheduler_name_picks_volcano_in_any_case_scheduler_plugins_for_another_name_none_when_empty() -> None:
    volcano = training_operator.GangScheduler("Volcano")
    assert volcano.volcano and volcano.enabled and volcano.scheduler_name == "volcano"
    assert volcano.pod_group_api_version == "scheduling.volcano.sh/v1beta1"
    assert not TOPOSCHED.volcano and TOPOSCHED.enabled and TOPOSCHED.scheduler_name == "toposched"
    assert TOPOSCHED.pod_group_api_version == "scheduling.x-k8s.io/v1alpha1"
    assert not NO_GANG.enabled and not training_operator.GangScheduler("None").enabled
    assert TOPOSCHED.delays_pods(None) is False and volcano.delays_pods({"status": {"phase": "Pending"}})


def test_a_scheduler_plugins_pod_group_has_min_member_min_resources_and_the_timeout_but_no_queue_or_priority() -> None:
    job = pytorch_job({"schedulingPolicy": {"queue": "q", "priorityClass": "hi", "scheduleTimeoutSeconds": 30}},
                      Master=replica(1, requests={"cpu": "1", "memory": "1Gi"}),
                      Worker=replica(3, requests={"cpu": "500m", "nvidia.com/gpu": "1"}))
    group = training_operator.pod_group_for(job, {}, TOPOSCHED)
    assert group["apiVersion"] == "scheduling.x-k8s.io/v1alpha1" and group["kind"] == "PodGroup"
    assert group["metadata"] == {
        "name": "mnist", "namespace": "default", "annotations": {"a": "b"},
        "ownerReferences": [{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "mnist", "uid": "u-1",
                             "controller": True, "blockOwnerDeletion": True}]}
    assert group["spec"] == {"minMember": 4, "minResources": {"cpu": "2500m", "memory": "1Gi", "nvidia.com/gpu": "3"},
                             "scheduleTimeoutSeconds": 30}


def test_a_scheduler_plugins_pod_group_leaves_out_empty_min_resources_and_keeps_a_zero_timeout() -> None:
    job = pytorch_job({"schedulingPolicy": {"scheduleTimeoutSeconds": 0}}, Worker=replica(2))
    assert training_operator.scheduler_plugins_pod_group_spec(job, {}) == {"minMember": 2, "scheduleTimeoutSeconds": 0}
    assert training_operator.pod_group_spec(job, {})["minResources"] == {}  # Volcano's is a pointer: written


def test_given_min_resources_are_written_as_gos_quantities_write_them() -> None:
    job = pytorch_job({"schedulingPolicy": {"minResources": {"memory": "1024Mi", "cpu": "1000m"}}}, Worker=replica(1))
    assert training_operator.scheduler_plugins_pod_group_spec(job, {}) == {
        "minMember": 1, "minResources": {"cpu": "1", "memory": "1Gi"}}
    assert training_operator.pod_group_spec(job, {})["minResources"] == {"cpu": "1", "memory": "1Gi"}


def test_a_scheduler_plugins_pod_groups_spec_is_rewritten_whole() -> None:
    job = pytorch_job(Worker=replica(2, requests={"cpu": "1"}))
    group = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "metadata": {"name": "mnist"},
             "spec": {"minMember": 9, "scheduleTimeoutSeconds": 5}, "status": {"phase": "Scheduling"}}
    updated = training_operator.pod_group_updated(group, job, {}, TOPOSCHED)
    assert updated is not None
    assert updated["spec"] == {"minMember": 2, "minResources": {"cpu": "2"}}
    assert updated["status"] == {"phase": "Scheduling"}
    assert training_operator.pod_group_updated(updated, job, {}, TOPOSCHED) is None


def test_a_scheduler_plugins_pod_is_labelled_with_its_pod_group_and_gets_the_gang_schedulers_name() -> None:
    job = pytorch_job(Master=replica(1), Worker=replica(2))
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["metadata"] = {
        "labels": {"app": "mnist", "scheduling.x-k8s.io/pod-group": "other"}, "annotations": {"note": "kept"}}
    worker = training_operator.pod_for(job, "Worker", 1, TOPOSCHED)
    assert worker["metadata"]["labels"] == {
        "app": "mnist", "scheduling.x-k8s.io/pod-group": "mnist",
        "training.kubeflow.org/operator-name": "pytorchjob-controller", "training.kubeflow.org/job-name": "mnist",
        "training.kubeflow.org/replica-type": "worker", "training.kubeflow.org/replica-index": "1"}
    assert worker["metadata"]["annotations"] == {"note": "kept"}
    assert worker["spec"]["schedulerName"] == "toposched"
    master = training_operator.pod_for(job, "Master", 0, TOPOSCHED)
    assert "annotations" not in master["metadata"]
    assert master["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == "mnist"
    named = pytorch_job(Worker=replica(1, schedulerName="scheduler-plugins-scheduler"))
    assert training_operator.pod_for(named, "Worker", 0, TOPOSCHED)["spec"]["schedulerName"] == \
        "scheduler-plugins-scheduler"


def test_without_gang_scheduling_a_pod_is_left_undecorated() -> None:
    pod = training_operator.pod_for(pytorch_job(Worker=replica(1)), "Worker", 0, NO_GANG)
    assert "schedulerName" not in pod["spec"] and "annotations" not in pod["metadata"]
    assert "scheduling.x-k8s.io/pod-group" not in pod["metadata"]["labels"]
