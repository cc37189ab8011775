"""Volcano's enqueue: which jobs' Volcano PodGroups may move from `Pending` to `Inqueue` now.

Two controllers make a `scheduling.volcano.sh` PodGroup for a job and create the job's pods only once that
PodGroup's `status.phase` is set and not `Pending`:

- Volcano's job controller (vc-controller-manager), for each `batch.volcano.sh` Job (its PodGroup
  `<job>-<uid>`); the Job's `spec.schedulerName` is its pods' (Volcano's webhook writes `volcano` into an
  empty one).
- Kubeflow's training-operator v1 started with `--gang-scheduler-name=volcano`, for each PyTorchJob, TFJob,
  MPIJob, XGBoostJob, PaddleJob and JAXJob (`kubeflow.org/v1`; its PodGroup is named as the job): a
  replica's pods take its template's `schedulerName`, `volcano` where it sets none.

Moving the PodGroup to `Inqueue` is the scheduler's `enqueue` action: without it such a job never gets a
pod. toposched enqueues the PodGroups whose job (the one that controls the PodGroup, `ClusterState.job_of`)
names toposched for its pods (any replica, for a Kubeflow job), as Volcano's scheduler does with its
default configuration (read, no code copied: its enqueue action and the overcommit and proportion plugins):

- A PodGroup without `spec.minResources` is enqueued at once ("best effort").
- Otherwise it is enqueued when, for every resource it names, what the PodGroups already `Inqueue` ask
  (their `minResources`) plus what it asks fits in the cluster's idle room with the overcommit factor
  (1.2, Volcano's default): every node's allocatable times 1.2, less what is in use (overcommit plugin).
- And, when its Volcano Queue sets `spec.capability` for a resource it names, when the queue's usage plus
  its PodGroups `Inqueue` plus this one stay within that capability (proportion plugin; a queue's elastic
  part is not subtracted).
- A PodGroup naming a queue that does not exist (but `default`) or is Closed is not enqueued: Volcano's
  enqueue skips the first and rejects the second, and toposched would not place their pods either.
- Candidates are tried highest priority first (the PodGroup's `priorityClassName`), then oldest (when
  toposched first saw them); one that does not fit does not hold the others back, as in Volcano.
- cpu, memory, pods, ephemeral-storage and extended resources (a name with a `/`, `hugepages-*`) are
  compared, as Volcano's resource type counts them; the quota names Volcano's job controller also writes
  there (`count/pods`, `requests.*`, `limits.*`) are not.

Not done: the downgrade of a PodGroup `Inqueue` too long (5 min) back to `Pending` in Volcano's newest
code, and its `capacity` plugin's hierarchical queues (only a queue's own capability is checked).

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Set

from events.objects import KubeflowJob, VolcanoJob, VolcanoPodGroup
from state.cluster import ClusterState
from state.quota import VOLCANO
from state.resources import QuantityError, Resources, parse_quantity

PENDING = "Pending"
INQUEUE = "Inqueue"
DEFAULT_VOLCANO_SCHEDULER = "volcano"  # what Volcano's admission webhook writes into an empty spec.schedulerName
OVERCOMMIT_FACTOR = 1.2  # Volcano's overcommit plugin's default overcommit-factor
DEFAULT_QUEUE = "default"


def counted(resource: str) -> bool:
    """Whether Volcano's resource type counts `resource`: cpu, memory, pods, ephemeral-storage, extended,
    hugepages and attachable-volume resources; not the quota names its job controller also writes into
    minResources (`count/pods`, `requests.cpu`, `limits.memory`, `requests.nvidia.com/gpu`, ...)."""
    if resource in ("cpu", "memory", "pods", "ephemeral-storage"):
        return True
    if resource.startswith(("requests.", "limits.", "count/")):
        return False
    return "/" in resource or resource.startswith(("hugepages-", "attachable-volumes-"))


def min_resources(group: VolcanoPodGroup) -> Resources | None:
    """The PodGroup's `spec.minResources` in milli-units, the resources Volcano counts only (None: it sets
    none, or none that can be read: it is best effort)."""
    wanted: Resources = {}
    for resource, text in group.spec.min_resources.items():
        if not counted(resource):
            continue
        try:
            wanted[resource] = parse_quantity(text)
        except QuantityError:
            continue  # reported with the PodGroup's other problems (state/gangs.py)
    return wanted or None


def pod_scheduler_names(job: VolcanoJob | KubeflowJob) -> list[str]:
    """The schedulerName the job's controller gives its pods: the Volcano Job's, or each Kubeflow replica
    template's; `volcano` where none is set (Volcano's webhook, training-operator's DecoratePodTemplateSpec)."""
    names = ([job.spec.scheduler_name] if isinstance(job, VolcanoJob)
             else [name for _, _, name in job.replica_schedulers()])
    return [name or DEFAULT_VOLCANO_SCHEDULER for name in names]


def ours(state: ClusterState, group: VolcanoPodGroup) -> bool:
    """Whether the PodGroup is a job's some of whose pods will be toposched's to place."""
    job = state.job_of(group)
    return job is not None and state.scheduler_name in pod_scheduler_names(job)


def to_enqueue(state: ClusterState, in_flight: Set[str] = frozenset()) -> list[str]:
    """The keys of the PodGroups to move to `Inqueue` now, in the order they were admitted. `in_flight`:
    PodGroups already moved whose new phase the watch has not shown yet (they count as `Inqueue`)."""
    groups = state.volcano_pod_groups
    candidates: list[tuple[int, float, str]] = []
    for key, group in groups.items():
        if key in in_flight or group.status.phase not in ("", PENDING) or group.metadata.deletion_timestamp:
            continue
        if not ours(state, group) or not _queue_open(state, group.spec.queue or DEFAULT_QUEUE):
            continue
        info = state.gangs.get(key)
        candidates.append((-state.group_priority(group.spec.priority_class_name),
                           info.first_seen if info is not None else 0.0, key))
    if not candidates:
        return []
    candidates.sort()
    inqueue: Resources = {}  # what the PodGroups in Inqueue ask, cluster-wide
    by_queue: dict[str, Resources] = {}  # the same per queue
    for key, group in groups.items():
        if group.status.phase == INQUEUE or key in in_flight:
            wanted = min_resources(group)
            if wanted:
                _add(inqueue, wanted)
                _add(by_queue.setdefault(group.spec.queue or DEFAULT_QUEUE, {}), wanted)
    idle = _idle(state)
    admitted: list[str] = []
    for _, _, key in candidates:
        group = groups[key]
        wanted = min_resources(group)
        if wanted is not None:
            queue_name = group.spec.queue or DEFAULT_QUEUE
            in_queue = by_queue.setdefault(queue_name, {})
            if not _fits(wanted, inqueue, lambda resource: idle.get(resource, 0)):
                continue
            if not _within_capability(state, queue_name, wanted, in_queue):
                continue
            _add(inqueue, wanted)
            _add(in_queue, wanted)
        admitted.append(key)
    return admitted


def _queue_open(state: ClusterState, queue_name: str) -> bool:
    """Whether Volcano would consider the job's queue: one that does not exist is skipped by its enqueue action
    (but `default`, which Volcano always has and toposched reads as no quota), one Closed (or Closing) rejected
    by its proportion plugin. toposched refuses to place the pods of either, so creating them would only leave
    them pending."""
    queue = state.quotas.by_name[VOLCANO].get(queue_name)
    if queue is None:
        return queue_name == DEFAULT_QUEUE
    return not queue.closed


def _idle(state: ClusterState) -> Resources:
    """Every node's allocatable times the overcommit factor, less what is in use (overcommit plugin)."""
    total: Resources = {}
    used: Resources = {}
    for node in state.nodes.values():
        _add(total, node.allocatable)
        _add(used, node.used)
    return {resource: int(amount * OVERCOMMIT_FACTOR) - used.get(resource, 0) for resource, amount in total.items()}


def _fits(wanted: Mapping[str, int], already: Mapping[str, int], room: Callable[[str], int]) -> bool:
    return all(already.get(resource, 0) + amount <= room(resource) for resource, amount in wanted.items())


def _within_capability(state: ClusterState, queue_name: str, wanted: Mapping[str, int],
                       in_queue: Mapping[str, int]) -> bool:
    """Volcano's proportion plugin: the queue's allocated + inqueue + this job within its capability, for the
    resources both the capability and the job name."""
    queue = state.quotas.by_name[VOLCANO].get(queue_name)
    if queue is None or not queue.max:
        return True
    return all(queue.used.get(resource, 0) + in_queue.get(resource, 0) + amount <= queue.max[resource]
               for resource, amount in wanted.items() if resource in queue.max)


def _add(into: Resources, amounts: Mapping[str, int]) -> None:
    for resource, amount in amounts.items():
        into[resource] = into.get(resource, 0) + amount
