"""A KAI PodGroup's `status.schedulingConditions`, as KAI's scheduler keeps them, for the report of a gang.

Shared by the adapters that report gangs (the Kubernetes API's and the simulator's), so that a KAI gang's
conditions, which placement reads back (`spec.schedulingBackoff`: `placement.gang.backoff_wait`), are the
same in a simulation as in a cluster. Pure: the time to write comes in as an argument.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

import msgspec

from daemon.scheduling.decisions import NOT_READY_REASON, UNSCHEDULABLE_REASON
from daemon.scheduling.ports import GangPhase
from events.objects import KAI_DEFAULT_NODE_POOL
from placement.plan import QUOTA_MEMBERSHIP, QUOTA_NON_PREEMPTIBLE, QUOTA_OVER_MAX, QuotaShortfall
from state.cluster import ClusterState
from state.kai_gangs import SINGLE_SCHEDULING_BACKOFF, latest_condition, transition_number
from state.quota import UNLIMITED_MIN
from state.resources import format_quantity

# The one scheduling condition KAI keeps per node pool, and the reasons it lists (KAI's v2alpha2
# UnschedulableReasons; PodSchedulingErrors: the job's pods found no nodes).
KAI_UNSCHEDULABLE_ON_NODE_POOL = "UnschedulableOnNodePool"
KAI_QUEUE_DOES_NOT_EXIST = "QueueDoesNotExist"
KAI_OVER_LIMIT = "OverLimit"
KAI_NON_PREEMPTIBLE_OVER_QUOTA = "NonPreemptibleOverQuota"
KAI_POD_SCHEDULING_ERRORS = "PodSchedulingErrors"
MESSAGE_LIMIT = 1024


def kai_scheduling_conditions(state: ClusterState, gang: str, phase: GangPhase, reason: str, message: str,
                              quota: QuotaShortfall | None, now: str) -> list[dict[str, Any]] | None:
    """The KAI PodGroup `gang`'s new `status.schedulingConditions` for a report ([]: none left; None: nothing
    to change). While the gang cannot be placed, one `UnschedulableOnNodePool` condition for its node pool (its
    pool label's value, else `default`, as KAI names it), last in the list, its `transitionID` one above the
    latest one's, its `reasons` saying why in KAI's words (`kai_reasons`), written at `now` and rewritten only
    when it says something new; none once the gang is scheduled. A gang still short of members (not ready for
    scheduling), held by its `schedulingBackoff`, preempted, or waiting on the nodes its own preemption
    nominated (KAI's pipelined job) gets none written, as KAI writes none then: the one it has stays. The
    message of a gang with `schedulingBackoff: 1` begins with its pool (`Node-Pool 'a100': `), as KAI's does."""
    group = state.kai_pod_groups.get(gang)
    current = group.status.scheduling_conditions if group is not None else []
    if phase == "Scheduled":
        return [] if current else None
    if phase == "Preempted" or reason == NOT_READY_REASON or _pipelined(state, gang):
        return None
    label = state.kai_node_pool_label
    pool = (group.metadata.labels.get(label) if group is not None and label else None) or KAI_DEFAULT_NODE_POOL
    if group is not None and group.spec.scheduling_backoff == SINGLE_SCHEDULING_BACKOFF:
        message = f"Node-Pool '{pool}': {message}"  # KAI names the pool for a gang tried once per pool
    text = message[:MESSAGE_LIMIT]
    reasons = kai_reasons(state, quota, text)
    wanted = (KAI_UNSCHEDULABLE_ON_NODE_POOL, pool, UNSCHEDULABLE_REASON, text, "True",
              [r["reason"] for r in reasons])
    latest = latest_condition(group) if group is not None else None
    if (latest is not None and current[-1].node_pool == pool
            and (latest.type, latest.node_pool, latest.reason, latest.message, latest.status,
                 [r.reason for r in latest.reasons]) == wanted):
        return None
    number = transition_number(latest.transition_id) if latest is not None else 0
    condition = {"type": KAI_UNSCHEDULABLE_ON_NODE_POOL, "nodePool": pool,
                 "reason": UNSCHEDULABLE_REASON, "message": text, "reasons": reasons, "status": "True",
                 "transitionID": str(max(number, 0) + 1), "lastTransitionTime": now}
    kept = [msgspec.to_builtins(c) for c in current if c.node_pool != pool]
    return [*kept, condition]


def _pipelined(state: ClusterState, gang: str) -> bool:
    """Whether the gang waits on nodes its preemption nominated (KAI's pipelined tasks: no pending task left,
    so KAI marks the job unschedulable no more; a condition written before stays until it is bound)."""
    info = state.gangs.get(gang)
    pods = state.pods
    return info is not None and any((pod := pods.get(key)) is not None and pod.nominated_on for key in info.members)


def kai_reasons(state: ClusterState, quota: QuotaShortfall | None, message: str) -> list[dict[str, Any]]:
    """A KAI condition's `reasons`, as KAI's scheduler writes them (its UnschedulableExplanations, which
    KAI's docs tell clients to read): a queue that does not exist (or, for this pool's scheduler, is
    not there: another pool's) `QueueDoesNotExist`; a queue limit the job would pass `OverLimit`; a
    non-preemptible job past its queue's quota `NonPreemptibleOverQuota`, both with the queue's figures
    (`details.queueDetails`, as they stand when written); anything else `PodSchedulingErrors`, KAI's reason
    for a job whose pods find no nodes. The message is the condition's."""
    kind = quota.kind if quota is not None else ""
    if kind == QUOTA_MEMBERSHIP:
        return [{"reason": KAI_QUEUE_DOES_NOT_EXIST, "message": message}]
    code = {QUOTA_OVER_MAX: KAI_OVER_LIMIT, QUOTA_NON_PREEMPTIBLE: KAI_NON_PREEMPTIBLE_OVER_QUOTA}.get(kind)
    if code is None or quota is None:
        return [{"reason": KAI_POD_SCHEDULING_ERRORS, "message": message}]
    explanation: dict[str, Any] = {"reason": code, "message": message}
    queue = state.quotas.quotas.get(quota.quota)
    if queue is not None:
        kept = queue.constrained  # the queue's own resources (KAI's: cpu, memory, gpu), not every one counted
        explanation["details"] = {"queueDetails": {
            "name": queue.name,
            "queueDeservedResources": resource_list(queue.guarded, kept),
            "queueAllocatedResources": resource_list(queue.used, kept),
            "queueAllocatedNonPreemptibleResources": resource_list(queue.used_np, kept),
            "queueResourceLimits": resource_list(queue.max, kept),
            "podGroupRequestedResources": resource_list(quota.asked, kept),
            "podGroupRequestedNonPreemptibleResources": resource_list(quota.asked_np, kept),
        }}
    return [explanation]


def resource_list(amounts: Mapping[str, int], only: Collection[str]) -> dict[str, str]:
    """Resources in milli-units, of `only` those, as a Kubernetes ResourceList (quantities as users write them);
    a KAI quota of -1 (no bound) is left out."""
    return {resource: format_quantity(resource, amount) for resource, amount in sorted(amounts.items())
            if amount < UNLIMITED_MIN and resource in only}
