"""Volcano's job controller (vc-controller-manager, pkg/controllers/job) as far as scheduling sees it: for every
`batch.volcano.sh/v1alpha1` Job, its status, its PodGroup, and its pods once the scheduler has enqueued it.

A sync of a job (`syncJob`, what each of its events ends in when no lifecycle policy matches):
1. a job being deleted is left alone;
2. a new job (no status phase) gets its initial status: phase Pending, minAvailable, a Pending condition
   (`initJobStatus`);
3. while the job is Pending, its PodGroup `<job>-<uid>` is created, or brought back to the job's spec
   (`createOrUpdatePodGroup`; see volcano_job.py for what is written);
4. the pods are created only once the PodGroup's `status.phase` is set and not Pending (the scheduler's
   enqueue action sets Inqueue; devcluster has no Volcano scheduler: toposched, or a test, writes it);
   then every pod `<job>-<task>-<index>` missing is created (so a deleted or evicted pod comes back, as
   the PodEvicted event's default SyncJob action recreates it), and the pods of a task beyond its replicas
   are deleted;
5. the status counts the pods (pending, running, succeeded, failed, unknown, terminating, taskStatusCount)
   and moves the phase: Pending -> Running once minAvailable pods run or ran, Running -> Completed / Failed
   once every replica has finished (state/pending.go, running.go); Completed and Failed jobs are no
   longer synced. It is written (status subresource) only when it changes; a phase change stamps the
   state's lastTransitionTime and appends a condition (Volcano appends one on every status write).

A job is synced when it changes, when its PodGroup changes, when one of its pods (controlled by it) changes
or goes; at start, every job. When a job is deleted, what it controls (its PodGroup and pods) is deleted,
as the garbage collector deletes an owner's dependents (devcluster has no general garbage collector).

Not emulated: the lifecycle policies (an event's RestartJob, AbortJob, TerminateJob, CompleteJob,
RestartTask, RestartPod actions and their timeouts: every event is a plain sync), maxRetry and retries,
Restarting / Aborting / Terminating / Completing phases, the plugins (svc, ssh, env, mpi, pytorch, ...: no
Services, ConfigMaps, Secrets or env), spec.volumes (not served), dependsOn ordering, ttlSecondsAfterFinished,
the queue's `extendClusters` forwarding, task partitionPolicy (not served), runningDuration, and the
controller's Events. A pod that cannot be created (e.g. an unknown PriorityClass: 403) is retried at the
job's next event.

Runs on the store's event loop; acts only through the store, as an API client would.
"""

from __future__ import annotations

from typing import Any

from devcluster import volcano_job
from devcluster.controller import StoreController
from devcluster.errors import ApiError
from devcluster.store import Store, now_rfc3339, resolve
from devcluster.watch import WatchEvent

Obj = dict[str, Any]
JobKey = tuple[str, str]  # (namespace, name)

JOBS = resolve("jobs.batch.volcano.sh")
_POD_GROUPS = resolve("podgroups.scheduling.volcano.sh")
_PODS = resolve("pods")
_MANAGER = "vc-controller-manager"
_FINISHED = frozenset({volcano_job.COMPLETED, volcano_job.FAILED})


def _uid(obj: Obj) -> str:
    return str(obj["metadata"]["uid"])


class VolcanoJobController(StoreController):
    """Keeps every Volcano Job's status, PodGroup and pods until `stop()` (see the module docstring)."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.syncs = 0  # jobs synced, for tests
        self.failed_creates = 0  # pods or PodGroups the API server refused
        self._dirty: set[JobKey] = set()
        self._jobs_by_uid: dict[str, JobKey] = {}

    def _started(self) -> None:
        for job in self.store.list(JOBS):
            meta = job["metadata"]
            self._jobs_by_uid[_uid(job)] = (str(meta["namespace"]), str(meta["name"]))
            self._mark(str(meta["namespace"]), str(meta["name"]))

    def _stopped(self) -> None:
        self._dirty.clear()
        self._jobs_by_uid.clear()

    # ----------------------------------------------------------------------- events

    def _on_event(self, event: WatchEvent) -> None:
        if event.key == JOBS.key:
            meta = event.obj["metadata"]
            key = (event.namespace, str(meta["name"]))
            if event.type == "DELETED":
                self._jobs_by_uid.pop(str(meta["uid"]), None)
                self._dirty.discard(key)
                uid = str(meta["uid"])
                self._delete_dependents(event.namespace, (_PODS, _POD_GROUPS),
                                        lambda o: volcano_job.controller_uid(o) == uid)
            else:
                self._jobs_by_uid[str(meta["uid"])] = key
                self._mark(*key)
        elif event.key in (_PODS.key, _POD_GROUPS.key):
            owner = volcano_job.controller_uid(event.obj)
            if owner is None:
                return
            owning = self._jobs_by_uid.get(owner)
            if owning is not None:
                self._mark(*owning)

    def _mark(self, namespace: str, name: str) -> None:
        self._dirty.add((namespace, name))
        self._schedule()

    # ----------------------------------------------------------------------- syncing

    def _sync(self) -> None:
        dirty, self._dirty = sorted(self._dirty), set()
        for namespace, name in dirty:
            job = self.store.find(JOBS, name, namespace)
            if job is not None and not job["metadata"].get("deletionTimestamp"):
                self.syncs += 1
                self._sync_job(job)

    def _sync_job(self, job: Obj) -> None:
        namespace = str(job["metadata"]["namespace"])
        stamp = now_rfc3339(self.store.clock)
        status = dict(job.get("status") or {})
        phase = str((status.get("state") or {}).get("phase") or "")
        if phase in _FINISHED:
            return
        if not phase:
            status = volcano_job.initial_status(job, stamp)
            phase = volcano_job.PENDING
        group = self.store.find(_POD_GROUPS, volcano_job.pod_group_name(job), namespace)
        if phase == volcano_job.PENDING:
            group = self._create_or_update_group(job, group)
        if volcano_job.pod_group_admits_pods(group):
            status = volcano_job.counted_status({**job, "status": status}, self._own_pods(job))
        wanted = volcano_job.next_phase(job, status)
        if wanted != phase:
            status = volcano_job.with_phase(status, wanted, stamp)
        self._write_status(JOBS, job, status, _MANAGER)

    def _create_or_update_group(self, job: Obj, group: Obj | None) -> Obj | None:
        priorities = {name: int(pc.get("value") or 0) for name, pc in self.store.priority_classes.items()}
        if group is None:
            try:
                return self.store.create(volcano_job.pod_group_for(job, priorities), keep_status=False)
            except ApiError:
                self.failed_creates += 1
                return None
        updated = volcano_job.pod_group_updated(group, job, priorities)
        if updated is None:
            return group
        try:
            return self.store.update_in(_POD_GROUPS, str(group["metadata"]["name"]),
                                        str(group["metadata"]["namespace"]), updated, manager=_MANAGER)
        except ApiError:
            return group

    def _own_pods(self, job: Obj) -> list[Obj]:
        """The job's pods once the wanted ones missing are created and those beyond the replicas deleted."""
        namespace, uid = str(job["metadata"]["namespace"]), _uid(job)
        existing = {str(pod["metadata"]["name"]): pod
                    for pod in self.store.list(_PODS, namespace, lambda p: volcano_job.controller_uid(p) == uid)}
        wanted_names = set()
        pods: list[Obj] = []
        for task, index in volcano_job.wanted_pods(job):
            name = volcano_job.pod_name(job, str(task.get("name") or "default"), index)
            wanted_names.add(name)
            found = existing.get(name)
            if found is None:
                try:
                    found = self.store.create(volcano_job.pod_for(job, task, index), keep_status=False)
                except ApiError:
                    self.failed_creates += 1
                    continue
            pods.append(found)
        task_names = {str(task.get("name") or "") for task in volcano_job.tasks(job)}
        for name, pod in existing.items():
            task_name = (pod["metadata"].get("annotations") or {}).get(volcano_job.TASK_SPEC)
            if name in wanted_names or task_name not in task_names:
                continue
            try:  # a task scaled down: counted terminating, as syncJob counts a pod it deleted
                gone = self.store.delete(_PODS, name, namespace)
            except ApiError:
                continue
            gone_meta = gone["metadata"]
            pods.append({**gone, "metadata": {**gone_meta, "deletionTimestamp": gone_meta.get("deletionTimestamp")
                                              or now_rfc3339(self.store.clock)}})
        return pods
