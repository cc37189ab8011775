"""The answer placement gives: a `GangPlan` (which pod goes to which node, and why there) or an
`Unschedulable` (which constraint failed, the best domain found and how close it came).

These types cross package boundaries (the scheduler loop, preemption, the event log), so they are
frozen msgspec Structs and carry only plain data. Pure data: no I/O, nothing computed here.
"""

from __future__ import annotations

import msgspec

CAPACITY = "capacity"
MUST_GATHER = "must-gather"
HARD_TIER = "hard-tier"
SUB_GROUP = "sub-group"
MEMBERS = "members"
INVALID = "invalid"
POD_FIT = "pod-fit"
QUOTA = "quota"  # its quota (ElasticQuota, Volcano Queue) does not admit it: see placement/quota.py
VOLUME = "volume"  # a claim of a pod is not usable yet (missing, unbound, ...): see state/volumes.py
POD_AFFINITY = "pod-affinity"  # the plan breaks required pod (anti-)affinity among its pods (pod_affinity.py)
POD_SPREAD = "pod-topology-spread"  # the plan breaks a DoNotSchedule spread constraint of its pods (pod_spread.py)
# a scheduler-plugins PodGroup's spec.minResources exceed the cluster's free room (placement/gang.py resource_gap);
# no preemption is tried for it, as its Coscheduling's PreFilter rejects the pod as unresolvable
MIN_RESOURCES = "min-resources"
# a KAI PodGroup with spec.schedulingBackoff 1 that its node pool has refused once: it is not tried there again
# (placement/gang.py backoff_wait); it waits for a move to another pool, which Run:ai's node-pool assigner makes
BACKOFF = "scheduling-backoff"

CONSTRAINTS = (CAPACITY, MUST_GATHER, HARD_TIER, SUB_GROUP, MEMBERS, INVALID, POD_FIT, QUOTA, VOLUME, POD_AFFINITY,
               POD_SPREAD, MIN_RESOURCES, BACKOFF)


class Assignment(msgspec.Struct, frozen=True):
    """One pending pod (`namespace/name`) and the node it should go to."""

    pod: str
    node: str


class GangPlan(msgspec.Struct, frozen=True):
    """Where a GangGroup (or a lone pod) goes.

    `gangs` is the GangGroup planned together (sorted gang keys; () for a lone pod). `assignments`
    places pending pods only: running members stay where they are. `domain` is the topology domain
    that holds the whole job, running members included ("" when only the cluster root does), and
    `level` is that domain's layer name. `explanation` is one human line saying where and why.
    """

    gangs: tuple[str, ...]
    assignments: tuple[Assignment, ...]
    domain: str
    level: str
    explanation: str


# How a quota refused a job (`QuotaShortfall.kind`), as placement/quota.py checks it:
QUOTA_MEMBERSHIP = "membership"  # a pod names a quota (or one above it) that is missing or cannot be its quota
QUOTA_CLOSED = "closed"  # a Volcano queue Closed or Closing
QUOTA_OVER_MAX = "over-max"  # used + asked > max (Volcano: capability; KAI: limit) at the quota or above it
QUOTA_NON_PREEMPTIBLE = "non-preemptible"  # non-preemptible pods past min (KAI: quota)
QUOTA_OVER_RUNTIME = "over-runtime"  # past min plus its share of idle capacity (Koordinator, Volcano)
QUOTA_OVER_POOL = "over-pool"  # capacity scheduling: borrowing past the unused part of all mins


class QuotaShortfall(msgspec.Struct, frozen=True):
    """A quota refusal as structure, for the dialects whose status says it so (KAI's PodGroup `reasons`):
    its `kind` (QUOTA_* above), `message` (what `Unschedulable.reason` says of it), the quota at fault
    (its `state.quota.Quota.id`; "" for a membership refusal) and what the job asks of that quota (all,
    and its non-preemptible part), in the quota's units."""

    kind: str
    message: str
    quota: str = ""
    asked: dict[str, int] = {}
    asked_np: dict[str, int] = {}


class Unschedulable(msgspec.Struct, frozen=True):
    """Why no plan exists.

    `constraint` is one of CONSTRAINTS; `level` the layer of the failed constraint; `best_domain`
    the candidate that came closest, `fit` how many pods it could take and `needed` how many had to
    be placed. `reason` says all of that in one line for a PodGroup condition / Event. `quota`: the
    refusal in structure when the constraint is QUOTA.
    """

    gangs: tuple[str, ...]
    reason: str
    constraint: str
    level: str = ""
    best_domain: str = ""
    fit: int = 0
    needed: int = 0
    quota: QuotaShortfall | None = None
