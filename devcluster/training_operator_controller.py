"""Kubeflow's training-operator (v1.8 / v1.9) as far as scheduling sees it: for every kubeflow.org/v1 PyTorchJob,
TFJob, XGBoostJob, PaddleJob, JAXJob and MPIJob, its Created condition, its PodGroup and its pods, in the gang mode
its `--gang-scheduler-name` chooses (the constructor's `gang_scheduler`, default "volcano"; training_operator.py
`GangScheduler`): `volcano`, a Volcano PodGroup and the pods once the scheduler has enqueued it; another name N
(e.g. scheduler-plugins, toposched), a scheduling.x-k8s.io PodGroup and the pods at once, labelled with it,
schedulerName N unless the template names one; "", no PodGroup and the pods at once.

A reconcile of a job (common/job.go `ReconcileJobs`, what each of its events ends in):
1. a job being deleted is left alone;
2. a new job gets its Created condition (the controllers' create event sets it);
3. a suspended job (runPolicy.suspend) has its pods and (with gang scheduling) its PodGroup deleted
   (`CleanUpResources`), and nothing more;
4. otherwise, with gang scheduling, its PodGroup `<job>` is created, or its spec rewritten to the job's
   (`SyncPodGroup`; see training_operator.py for what is written); if that fails, no pods this time;
5. in volcano mode the pods are created only once the PodGroup's `status.phase` is set and not Pending
   (`DelayPodCreationDueToPodGroup`: devcluster has no Volcano scheduler; toposched's enqueue, or a test, writes
   Inqueue); then every pod `<job>-<replica type>-<index>` missing is created (a deleted pod comes back, as
   `ReconcilePods` recreates it) and the pods of a replica type beyond its replicas are deleted;
6. the status's replicaStatuses count the pods; the status is written (status subresource) only when it changes.

A job is reconciled when it changes, when its PodGroup changes, when one of its pods (controlled by it) changes
or goes; at start, every job. When a job is deleted, what it controls (its pods and PodGroups of either kind) is
deleted, as the garbage collector deletes an owner's dependents.

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
_VOLCANO_POD_GROUPS = resolve("podgroups.scheduling.volcano.sh")
_SCHEDULER_PLUGINS_POD_GROUPS = resolve("podgroups.scheduling.x-k8s.io")
_PODS = resolve("pods")
_DEPENDENTS = (_PODS, _VOLCANO_POD_GROUPS, _SCHEDULER_PLUGINS_POD_GROUPS)
_MANAGER = "training-operator"


def _controller_uid(obj: Obj) -> str | None:
    return volcano_job.controller_uid(obj, training_operator.API_VERSION, _KIND_NAMES)


class TrainingOperatorController(StoreController):
    """Keeps every kubeflow.org/v1 job's Created condition, PodGroup and pods until `stop()`, as training-operator
    started with `--gang-scheduler-name=<gang_scheduler>` does (see the module docstring)."""

    def __init__(self, store: Store, gang_scheduler: str = training_operator.VOLCANO) -> None:
        super().__init__(store)
        self.gang = training_operator.GangScheduler(gang_scheduler)
        # The PodGroups this mode writes (None: no gang scheduling).
        self._pod_groups: ResourceDef | None = None
        if self.gang.enabled:
            self._pod_groups = _VOLCANO_POD_GROUPS if self.gang.volcano else _SCHEDULER_PLUGINS_POD_GROUPS
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
                self._delete_dependents(event.namespace, _DEPENDENTS, lambda o: _controller_uid(o) == uid)
            else:
                self._jobs_by_uid[uid] = key
                self._mark(key)
        elif event.key == _PODS.key or (self._pod_groups is not None and event.key == self._pod_groups.key):
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
            cleaned = (_PODS,) if self._pod_groups is None else (_PODS, self._pod_groups)
            self._delete_dependents(namespace, cleaned, lambda o: _controller_uid(o) == uid)
        else:
            synced = True
            if self._pod_groups is not None:
                group = self._sync_pod_group(self._pod_groups, job, self.store.find(self._pod_groups, name, namespace))
                synced = group is not None and not self.gang.delays_pods(group)
            if synced and training_operator.kind_of(job).creates_pods:
                pods = self._own_pods(job)
                status["replicaStatuses"] = training_operator.replica_statuses(job, pods)
        self._write_status(resource, job, status, _MANAGER)

    def _sync_pod_group(self, resource: ResourceDef, job: Obj, group: Obj | None) -> Obj | None:
        """SyncPodGroup: the PodGroup created or its spec rewritten; None if the API server refused."""
        priorities = {name: int(pc.get("value") or 0) for name, pc in self.store.priority_classes.items()}
        if group is None:
            try:
                return self.store.create(training_operator.pod_group_for(job, priorities, self.gang), keep_status=False)
            except ApiError:
                self.failed_creates += 1
                return None
        updated = training_operator.pod_group_updated(group, job, priorities, self.gang)
        if updated is None:
            return group
        try:
            return self.store.update_in(resource, str(group["metadata"]["name"]), str(group["metadata"]["namespace"]),
                                        updated, manager=_MANAGER)
        except ApiError:  # changed or gone meanwhile: its own event brings another reconcile
            return None

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
                    found = self.store.create(training_operator.pod_for(job, rtype, index, self.gang),
                                              keep_status=False)
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
