"""The scheduler loop's ports: the clock it reads, the cluster API it writes to, the preemption hook.

The loop (`daemon/scheduling/loop.py`) is written once against these Protocols, and two sets of adapters
stand behind them: the real ones (wall clock; kubernetes-asyncio over HTTP) for `toposched run`, and
the virtual ones (a virtual clock; an in-memory world) for `simulate` and `replay`. Nothing here
knows how a call is carried out.

Contract of `ClusterAPI` (what an HTTP adapter must honour):
- Every method is a coroutine that may be slow; the loop calls several concurrently, bounded by its
  `bind_concurrency`, and never holds a lock across one. The adapter puts its own timeout and retry
  policy on each call (429 / 5xx / transport errors) and *returns* the outcome of expected failures
  (`BindOutcome`, `ApiOutcome`); raising is reserved for bugs, and the loop treats an exception as a
  retriable failure so one broken call never strands a gang's assumed pods.
- `bind` answers `bound` (the Binding was accepted), `already-bound` (409: the pod already has a
  node; `node` says which, read back from the API) or `failed` with `retriable` saying whether
  trying again later can help (a 404 pod or a node that no longer exists cannot).
- `report_gang` writes the PodGroup's status/conditions and a Kubernetes Event; `report_pod` the
  PodScheduled=False condition and an Event of a pod without a gang. Both are best effort.

`Instruments` is what the loop tells telemetry about work that leaves no event of its own: when an
attempt, a preemption plan and each Binding call start and end, so spans and durations are timed
around the real work (the decisions themselves reach telemetry as events, through the journal).
`NO_INSTRUMENTS` (the default: `simulate`, `replay`, tests) does nothing.

`Preemptor` is the hook job-level preemption plugs into (`preemption/` plans, the loop carries the
plan out). Its plan is `preemption.plan.PreemptionPlan`, the very Struct the planner returns: whom to
evict, where the preemptor's pods are nominated, and which lower-priority nominations to clear.

Must never: import an adapter, a socket library or the event log.
"""

from __future__ import annotations

from typing import Final, Literal, Protocol

import msgspec

from placement.plan import QuotaShortfall, Unschedulable
from preemption.plan import PreemptionPlan
from state.cluster import ClusterState

BOUND: Final = "bound"
ALREADY_BOUND: Final = "already-bound"
FAILED: Final = "failed"

GangPhase = Literal["Pending", "Scheduled", "TimedOut", "Preempted"]


# --------------------------------------------------------------------------- clock


class Clock(Protocol):
    """Seconds as a float: wall time since the epoch in the daemon, virtual seconds in `simulate`."""

    def now(self) -> float: ...

    async def sleep_until(self, deadline: float) -> None:
        """Return once `now() >= deadline` (at once if it already is); cancellable."""
        ...


# --------------------------------------------------------------------------- cluster API


class BindOutcome(msgspec.Struct, frozen=True):
    """What became of one Binding. `node` is where the pod now is (for `already-bound`, read back)."""

    status: Literal["bound", "already-bound", "failed"]
    node: str = ""
    reason: str = ""
    retriable: bool = True

    @property
    def placed(self) -> bool:
        return self.status != FAILED


class ApiOutcome(msgspec.Struct, frozen=True):
    """What became of an eviction, a status patch or a report."""

    ok: bool
    reason: str = ""
    retriable: bool = True


OK = ApiOutcome(ok=True)


class ClusterAPI(Protocol):
    """The writes the scheduler makes. Keys are `namespace/name`; `uid` guards against a re-created pod."""

    async def bind(self, pod: str, uid: str, node: str) -> BindOutcome: ...

    async def select_node(self, claim: str, node: str) -> ApiOutcome:
        """Mark a WaitForFirstConsumer claim (`namespace/name`) to be provisioned for `node`
        (`volume.kubernetes.io/selected-node`), as kube-scheduler's VolumeBinding PreBind does."""
        ...

    async def bind_volume(self, volume: str, claim: str) -> ApiOutcome:
        """Pre-bind PersistentVolume `volume`, made in advance, to WaitForFirstConsumer claim `claim`
        (`namespace/name`): its `spec.claimRef` names the claim (with its uid) and, unless it named it
        already, `pv.kubernetes.io/bound-by-controller: "yes"`, as kube-scheduler's VolumeBinding PreBind
        writes them; the PV controller then binds the claim. Refused when the volume changed since it was
        read (another writer may have taken it)."""
        ...

    def hold_scheduled_events(self) -> None:
        """A gang's Bindings start: hold the `Scheduled` Events of the pods bound from now on until the
        matching `release_scheduled_events` (holds nest). Binding is the gang's critical path; the Events
        about it can wait the fraction of a second its Bindings take."""
        ...

    def release_scheduled_events(self) -> None:
        """One hold is over: once none is left, the Events held are written, in the order of the binds."""
        ...

    async def evict(self, pod: str, uid: str, *, preemptor: str, message: str,
                    grace_seconds: int | None) -> ApiOutcome:
        """Evict through the Eviction API with `grace_seconds` (None: the pod's own; delete if no Eviction API)."""
        ...

    async def set_nominated_node(self, pod: str, uid: str, node: str | None) -> ApiOutcome:
        """Patch `status.nominatedNodeName` (None clears it)."""
        ...

    async def set_disruption_condition(self, pod: str, uid: str, *, preemptor: str, message: str) -> ApiOutcome:
        """Add condition DisruptionTarget=True, reason PreemptionByScheduler, with `message`."""
        ...

    async def report_gang(self, gang: str, phase: GangPhase, reason: str, message: str,
                          quota: QuotaShortfall | None = None) -> ApiOutcome:
        """PodGroup status/condition + an Event: Pending (with the placement reason), Scheduled, TimedOut,
        Preempted (a victim job: some of its pods are being evicted for a higher-priority one). `quota`: the
        quota refusal `message` tells of, in structure (a KAI PodGroup's condition lists it as KAI does)."""
        ...

    async def report_pod(self, pod: str, uid: str, reason: str, message: str) -> ApiOutcome:
        """A pod without a gang: condition PodScheduled=False (`reason`, `message`) + an Event."""
        ...

    async def enqueue_pod_group(self, gang: str) -> ApiOutcome:
        """Move a Volcano Job's PodGroup from Pending to Inqueue (`status.phase`), so that Volcano's job
        controller creates its pods (state/volcano_enqueue.py)."""
        ...


# --------------------------------------------------------------------------- instruments

AttemptOutcome = Literal["planned", "unschedulable", "error"]


class Instruments(Protocol):
    """Called by the loop at the edges of its real work (module docstring). Keys are the queue unit's
    (a GangGroup's first gang, or a lone pod). Called on the loop's path: must be quick, must not
    raise, and must not change anything the loop reads."""

    def attempt_started(self, unit: str, gangs: tuple[str, ...], pods: tuple[str, ...]) -> None:
        """The loop starts planning `unit` (its pending `pods`)."""
        ...

    def attempt_finished(self, unit: str, outcome: AttemptOutcome, constraint: str) -> None:
        """The attempt's decision is made (its events are recorded): a plan was found (binds may have
        started, or it waits at Permit), none was (`constraint`: the one that failed, from
        `placement.plan.CONSTRAINTS`), or handling it raised."""
        ...

    def preemption_started(self, unit: str) -> None:
        """The preemption planner is asked for room for `unit`."""
        ...

    def preemption_finished(self, unit: str) -> None:
        """The preemption planner answered (its plan, if any, is recorded next)."""
        ...

    def bind_started(self, unit: str, pod: str, node: str) -> None:
        """The Binding call for `pod` is being sent (concurrency slot taken)."""
        ...

    def bind_finished(self, unit: str, pod: str, node: str, outcome: BindOutcome) -> None:
        """The Binding call for `pod` came back."""
        ...

    def binds_settled(self, unit: str, failure: str) -> None:
        """Every Binding of the unit's bind came back: all placed (`failure` ""), or one failed."""
        ...

    def unit_failed(self, unit: str, stage: str) -> None:
        """Handling the unit raised at `stage` outside an attempt (Permit, nominations): it is parked."""
        ...


class NoInstruments:
    """Instruments that record nothing (the simulator, replay, tests)."""

    def attempt_started(self, unit: str, gangs: tuple[str, ...], pods: tuple[str, ...]) -> None:
        return None

    def attempt_finished(self, unit: str, outcome: AttemptOutcome, constraint: str) -> None:
        return None

    def preemption_started(self, unit: str) -> None:
        return None

    def preemption_finished(self, unit: str) -> None:
        return None

    def bind_started(self, unit: str, pod: str, node: str) -> None:
        return None

    def bind_finished(self, unit: str, pod: str, node: str, outcome: BindOutcome) -> None:
        return None

    def binds_settled(self, unit: str, failure: str) -> None:
        return None

    def unit_failed(self, unit: str, stage: str) -> None:
        return None


NO_INSTRUMENTS: Final = NoInstruments()


# --------------------------------------------------------------------------- preemption hook


class Preemptee(msgspec.Struct, frozen=True):
    """Who needs room: a GangGroup (`gangs` non-empty) or a lone pod, with its pods still to place."""

    key: str  # the queue unit: the GangGroup's first gang key, or the lone pod's key
    gangs: tuple[str, ...]
    pods: tuple[str, ...]  # pending pods, sorted
    priority: int
    now: float  # the time of the decision (a KAI queue's min runtime keeps jobs that started since)


class Preemptor(Protocol):
    """Called by the loop when a plan fails; None means no preemption (not eligible, or nothing helps).

    Pure like placement: reads `state`, never mutates it, never touches the clock or the API. The
    loop calls it only for preemptees whose pods may preempt (preemptionPolicy is checked by the
    planner, which knows the rules) and records + carries out whatever it returns.
    """

    def plan(self, state: ClusterState, preemptee: Preemptee, failure: Unschedulable) -> PreemptionPlan | None: ...


class NeverPreempt:
    """The preemptor that never preempts (`simulate` and tests without job-level preemption)."""

    def plan(self, state: ClusterState, preemptee: Preemptee, failure: Unschedulable) -> PreemptionPlan | None:
        return None
