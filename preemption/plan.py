"""What job-level preemption answers: a `PreemptionPlan` (whom to evict, where the preemptor's pods
are nominated, and why this choice) or a `NoPreemption` (why preemption will not help now).

These types cross package boundaries (the scheduler loop records them as PreemptionPlanned /
EvictionRequested / PodNominated events, `replay --explain` prints `explanation`), so they are frozen
msgspec Structs of plain data. Pure data: no I/O, nothing computed here.
"""

from __future__ import annotations

import msgspec

from placement.plan import Assignment

# Why no preemption was planned (`NoPreemption.kind`).
NEVER_POLICY = "never"  # the preemptor's preemptionPolicy is Never
WAITING = "waiting"  # victims chosen earlier are still terminating on the gang's nominated nodes
# the failure is not about capacity (missing members, invalid spec, filters no eviction lifts)
NOT_PREEMPTABLE = "not-preemptable"
NO_LOWER_PRIORITY = "no-lower-priority"  # no running pod of lower priority exists at all
NO_CANDIDATES = "no-candidates"  # no set of lower-priority pods lets the gang fit within its constraints
DELAYED = "delayed"  # the preemptor is within its preemption delay (KAI's spec.preemptionDelay)

# What kind of victim job (`VictimJob.kind`).
WHOLE_GANG = "gang"  # every running pod of a gang: the job is broken
SURPLUS = "surplus"  # pods of a gang above its minMember: the job keeps running
LONE_POD = "pod"  # a pod without a gang: it is its own job


class VictimJob(msgspec.Struct, frozen=True):
    """One job the plan disrupts: the pods it loses and whether it is broken by that."""

    key: str  # gang key (namespace/podgroup) or, for a lone pod, the pod key
    kind: str  # WHOLE_GANG | SURPLUS | LONE_POD
    pods: tuple[str, ...]
    priority: int  # the highest priority among `pods`
    broken: bool  # True when the job stops (whole gang, lone pod); False for surplus pods
    started_at: float  # when its most recently started victim pod started running (0.0 if unknown)


class PreemptionPlan(msgspec.Struct, frozen=True):
    """Evict `victims`, nominate each preemptor pod on its node, and wait for the victims to go.

    `preemptor` is the gang key the loop asked about (or a lone pod's key); `gangs` the GangGroup
    the plan makes room for. `nominations` come from the validating placement plan, so once the
    victims are gone the gang fits exactly there, within its gather strategy and tier limits.
    `clear_nominations` are pods of lower priority nominated on those nodes: their nominations
    no longer hold (kube-scheduler clears them too). `domain`/`level` is where the gang will run.
    """

    preemptor: str
    gangs: tuple[str, ...]
    priority: int
    victims: tuple[str, ...]  # pod keys, sorted
    victim_jobs: tuple[str, ...]  # keys of the jobs losing pods (gang keys, lone pod keys), as in `jobs`
    jobs: tuple[VictimJob, ...]  # the same jobs in detail: kind, pods, priority, broken or not
    nominations: tuple[Assignment, ...]
    clear_nominations: tuple[str, ...]
    domain: str
    level: str
    explanation: str
    reclaim_from: tuple[str, ...] = ()  # a quota reclaim: the quotas whose borrowed capacity it takes back
    # When jobs a KAI queue's min runtime keeps may be taken (the earliest): worth trying again then.
    retry_at: float | None = None

    @property
    def nodes(self) -> tuple[str, ...]:
        """The nominated nodes, sorted, without repeats."""
        return tuple(sorted({a.node for a in self.nominations}))


class NoPreemption(msgspec.Struct, frozen=True):
    """Why no preemption is planned; `reason` is one human line for the PodGroup condition / log."""

    preemptor: str
    kind: str  # NEVER_POLICY | WAITING | NOT_PREEMPTABLE | NO_LOWER_PRIORITY | NO_CANDIDATES | DELAYED
    reason: str
    retry_at: float | None = None  # as `PreemptionPlan.retry_at`
