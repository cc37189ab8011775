"""Kubeflow's training-operator (v1.8 / v1.9, `--gang-scheduler-name=volcano`) as far as scheduling sees it: for
every kubeflow.org/v1 PyTorchJob, TFJob, XGBoostJob, PaddleJob, JAXJob and MPIJob, its Created condition, its
Volcano PodGroup, and its pods once the scheduler has enqueued that PodGroup.

A reconcile of a job (common/job.go `ReconcileJobs`, what each of its events ends in):
1. a job being deleted is left alone;
2. a new job gets its Created condition (the controllers' create event sets it);
3. a suspended job (runPolicy.suspend) has its pods and PodGroup deleted (`CleanUpResources`), and nothing more;
4. otherwise its PodGroup `<job>` is created, or its spec rewritten to the job's (`SyncPodGroup`; see
   training_operator.py for what is written);
5. the pods are created only once the PodGroup's `status.phase` is set and not Pending
   (`DelayPodCreationDueToPodGroup`: devcluster has no Volcano scheduler; toposched's enqueue, or a test, writes
   Inqueue); then every pod `<job>-<replica type>-<index>` missing is created (a deleted pod comes back, as
   `ReconcilePods` recreates it) and the pods of a replica type beyond its replicas are deleted;
6. the status's replicaStatuses count the pods; the status is written (status subresource) only when it changes.

A job is reconciled when it changes, when its PodGroup changes, when one of its pods (controlled by it) changes
or goes; at start, every job. When a job is deleted, what it controls (its PodGroup and pods) is deleted, as
the garbage collector deletes an owner's dependents.

Not emulated: the Running / Restarting / Succeeded / Failed / Suspended conditions and what follows a finished
job (cleanPodPolicy, ttlSecondsAfterFinished), restarts of failed pods by restartPolicy, backoffLimit and
activeDeadlineSeconds, status.startTime, completionTime, lastReconcileTime and the replicas' selectors,
runPolicy.managedBy, the defaulting and validating webhooks, the environment, init containers and headless
Services, PyTorch's elastic HPA, MPIJob's pods (its launcher, workers, ConfigMap and RBAC: an MPIJob gets its
PodGroup only), and the controllers' Events. A pod that cannot be created is retried at the job's next event.

Runs on the store's event loop; acts only through the store, as an API client would.
"""

from __future__ import annotations

from typing import Any

from devcluster import training_operator, volcano_job
from devcluster.controller import StoreController
from devcluster.errors import ApiError
from devcluster.resources import ResourceDef
from devcluster.store import Store, now_rfc3339, resolve
from devcluster.watch import WatchEvent

Obj = dict[str, Any]
JobKey = tuple[str, str, str]  # (resource key, namespace, name)

JOBS: tuple[ResourceDef, ...] = tuple(resolve(f"{kind.plural}.kubeflow.org") for kind in training_operator.KINDS)
_JOBS_BY_KEY = {resource.key: resource for resource in JOBS}
_KIND_NAMES = frozenset(kind.kind for kind in training_operator.KINDS)
_POD_GROUPS = resolve("podgroups.scheduling.volcano.sh")
_PODS = resolve("pods")
_MANAGER = "training-operator"


def _controller_uid(obj: Obj) -> str | None:
    return volcano_job.controller_uid(obj, training_operator.API_VERSION, _KIND_NAMES)


class TrainingOperatorController(StoreController):
    """Keeps every kubeflow.org/v1 job's Created condition, PodGroup and pods until `stop()` (see the module
    docstring)."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.syncs = 0  # jobs reconciled, for tests
        self.failed_creates = 0  # pods or PodGroups the API server refused
        self._dirty: set[JobKey] = set()
        self._jobs_by_uid: dict[str, JobKey] = {}

    def _started(self) -> None:
        for resource in JOBS:
            for job in self.store.list(resource):
                meta = job["metadata"]
                key = (resource.key, str(meta["namespace"]), str(meta["name"]))
                self._jobs_by_uid[str(meta["uid"])] = key
                self._mark(key)

    def _stopped(self) -> None:
        self._dirty.clear()
        self._jobs_by_uid.clear()

    # ----------------------------------------------------------------------- events

    def _on_event(self, event: WatchEvent) -> None:
        if event.key in _JOBS_BY_KEY:
            meta = event.obj["metadata"]
            key = (event.key, event.namespace, str(meta["name"]))
            uid = str(meta["uid"])
            if event.type == "DELETED":
                self._jobs_by_uid.pop(uid, None)
                self._dirty.discard(key)
                self._delete_dependents(event.namespace, (_PODS, _POD_GROUPS), lambda o: _controller_uid(o) == uid)
            else:
                self._jobs_by_uid[uid] = key
                self._mark(key)
        elif event.key in (_PODS.key, _POD_GROUPS.key):
            owner = _controller_uid(event.obj)
            owning = self._jobs_by_uid.get(owner) if owner is not None else None
            if owning is not None:
                self._mark(owning)

    def _mark(self, key: JobKey) -> None:
        self._dirty.add(key)
        self._schedule()

    # ----------------------------------------------------------------------- reconciling

    def _sync(self) -> None:
        dirty, self._dirty = sorted(self._dirty), set()
        for resource_key, namespace, name in dirty:
            resource = _JOBS_BY_KEY[resource_key]
            job = self.store.find(resource, name, namespace)
            if job is not None and not job["metadata"].get("deletionTimestamp"):
                self.syncs += 1
                self._reconcile(resource, job)

    def _reconcile(self, resource: ResourceDef, job: Obj) -> None:
        meta = job["metadata"]
        namespace, name, uid = str(meta["namespace"]), str(meta["name"]), str(meta["uid"])
        status = training_operator.with_created(job, now_rfc3339(self.store.clock))
        if training_operator.suspended(job):
            self._delete_dependents(namespace, (_PODS, _POD_GROUPS), lambda o: _controller_uid(o) == uid)
        else:
            group = self._sync_pod_group(job, self.store.find(_POD_GROUPS, name, namespace))
            if volcano_job.pod_group_admits_pods(group) and training_operator.kind_of(job).creates_pods:
                pods = self._own_pods(job)
                status["replicaStatuses"] = training_operator.replica_statuses(job, pods)
        if status != job.get("status"):
            try:
                self.store.update_in(resource, name, namespace, {**job, "status": status}, subresource="status",
                                     manager=_MANAGER)
            except ApiError:  # changed or gone meanwhile: its own event brings another reconcile
                return

    def _sync_pod_group(self, job: Obj, group: Obj | None) -> Obj | None:
        priorities = {name: int(pc.get("value") or 0) for name, pc in self.store.priority_classes.items()}
        if group is None:
            try:
                return self.store.create(training_operator.pod_group_for(job, priorities), keep_status=False)
            except ApiError:
                self.failed_creates += 1
                return None
        updated = training_operator.pod_group_updated(group, job, priorities)
        if updated is None:
            return group
        try:
            return self.store.update_in(_POD_GROUPS, str(group["metadata"]["name"]),
                                        str(group["metadata"]["namespace"]), updated, manager=_MANAGER)
        except ApiError:
            return group

    def _own_pods(self, job: Obj) -> list[Obj]:
        """The job's pods once the wanted ones missing are created and those beyond the replicas deleted."""
        namespace, uid = str(job["metadata"]["namespace"]), str(job["metadata"]["uid"])
        existing = {str(pod["metadata"]["name"]): pod
                    for pod in self.store.list(_PODS, namespace, lambda p: _controller_uid(p) == uid)}
        pods: list[Obj] = []
        wanted_names = set()
        for rtype, index in training_operator.wanted_pods(job):
            name = training_operator.pod_name(job, rtype, index)
            wanted_names.add(name)
            found = existing.get(name)
            if found is None:
                try:
                    found = self.store.create(training_operator.pod_for(job, rtype, index), keep_status=False)
                except ApiError:
                    self.failed_creates += 1
                    continue
            pods.append(found)
        types = {rtype.lower() for rtype in training_operator.replica_specs(job)}
        for name, pod in existing.items():
            labels = pod["metadata"].get("labels") or {}
            if name in wanted_names or labels.get(training_operator.REPLICA_TYPE) not in types:
                continue
            try:  # an index beyond the replicas: ReconcilePods deletes it
                self.store.delete(_PODS, name, namespace)
            except ApiError:
                continue
        return pods
