"""The simulator: the real scheduler loop on a virtual clock, against an in-memory cluster.

`simulate(scenario)` plays a scenario (docs/scenarios.md) and returns its `Report`. The world's
rules, exactly as that contract states them:

- Objects are created at their `sim.toposched.io/at` time, in document order; a pod with
  `spec.nodeName` runs there from then on. Pods without a uid get a deterministic one, so a pod
  re-created under the same name is a new pod.
- At one virtual time: releases first (pods whose `runtime` is over, `delete-at` deletions, lost
  nodes with their pods, preemption victims whose grace period ended), then creations, then the
  scheduler runs until it settles (`Scheduler.run_until_idle`).
- A bind makes the pod Running on its node at once (and starts its runtime); an eviction marks the
  victim terminating, and it keeps its resources for its terminationGracePeriodSeconds (default 30)
  before it is removed.
- Volumes (v1 PersistentVolumeClaim, PersistentVolume, storage.k8s.io/v1 StorageClass): the world is
  its own PV controller and provisioner. A claim of an Immediate class with a provisioner is bound at
  its creation (or its class's, if that comes later) to a new volume every node reaches; a
  WaitForFirstConsumer claim is provisioned when the scheduler binds a pod that uses it, on a volume
  pinned to that node's `topology.kubernetes.io/zone` (its name when it has no zone), as a zonal disk
  or a local one would be. Nothing else binds a claim. It is the ephemeral volume controller too: a
  pod's generic ephemeral volume gets its claim when the pod is created.
- The simulation ends when no release or creation is due and the loop wants no more time (no Permit
  or nomination deadline, no backoff), or at `until`.

The report is read off the journal's decisions (`PodBound`, `PreemptionPlanned`, `PodNominated`)
and the final state, so it holds nothing the scheduler did not record. It holds no wall-clock figure.
When the scenario has quotas (ElasticQuotas, Volcano Queues), the report gains a `quotas` section:
per quota, what its pods used over time (resource-seconds of bound pods), its peak, and how long
its pods waited (`QuotaReport`); without quotas the key is absent, so existing reports are unchanged.

`progress` (optional) is called after every virtual instant with a `SimulationProgress` (virtual
time, objects created of all the scenario's, binds, pending pods, events): `toposched simulate`
shows it on a terminal, or as a line now and then otherwise. It is called with virtual figures only;
pacing by the wall clock is the caller's business.

Must never: decide anything the scheduler decides, or read the wall clock into the report.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from typing import Any, NamedTuple

import anyio
import msgspec

from daemon.offline.bulk import paused_gc
from daemon.offline.quota_report import QuotaReport, QuotaWatch
from daemon.scheduling.journal import Journal
from daemon.scheduling.kai_status import kai_scheduling_conditions
from daemon.scheduling.loop import Scheduler, SchedulerConfig
from daemon.scheduling.ports import ALREADY_BOUND, BOUND, FAILED, OK, ApiOutcome, BindOutcome, GangPhase, Preemptor
from events.dispatch import each, exhaustive
from events.ingest import KubeObject
from events.log import EventLog
from events.model import (
    BUDGET_EVENTS,
    COMPOSITE_EVENTS,
    JOB_OBJECT_EVENTS,
    POD_GROUP_EVENTS,
    PRIORITY_CLASS_EVENTS,
    QUOTA_OBJECT_EVENTS,
    TOPOLOGY_OBJECT_EVENTS,
    VOLUME_EVENTS,
    BindFailed,
    BindRequested,
    ClaimUpserted,
    Event,
    EvictionRequested,
    GangPending,
    GangPlanned,
    GangTimedOut,
    KaiPodGroupUpserted,
    NodeDeleted,
    NodeUpserted,
    NominationCleared,
    ObjectUndecodable,
    PodAssumed,
    PodBound,
    PodDeleted,
    PodForgotten,
    PodNominated,
    PodUpserted,
    PreemptionPlanned,
    VolcanoPodGroupUpserted,
    VolumeUpserted,
    WorkloadDeleted,
    WorkloadUpserted,
)
from events.objects import (
    BIND_COMPLETED_ANNOTATION,
    ClaimReference,
    Condition,
    CSIPersistentVolumeSource,
    KaiSchedulingCondition,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    ObjectMeta,
    OwnedMeta,
    OwnerReference,
    PersistentVolume,
    PersistentVolumeClaim,
    PersistentVolumeClaimSpec,
    PersistentVolumeSpec,
    PersistentVolumeStatus,
    Pod,
    StorageClass,
    VolumeNodeAffinity,
)
from events.scenario import Scenario, ScenarioObject
from placement.plan import QuotaShortfall
from preemption.hook import JobPreemptor
from state.cluster import ClusterState
from state.volcano_enqueue import INQUEUE
from state.volumes import MIGRATED_DRIVERS, NO_PROVISIONER, WAIT_FOR_FIRST_CONSUMER, ZONE_LABELS, claim_class

DEFAULT_GRACE_SECONDS = 30
ZONE_LABEL = ZONE_LABELS[0]  # topology.kubernetes.io/zone
RELEASE = 0
CREATION = 1


class SimulationError(Exception):
    """The simulation cannot go on (a world that never settles at one instant)."""


class VirtualClock:
    """Virtual seconds, moved only by the simulator (or by a sleeper, which jumps it forward)."""

    def __init__(self, start: float = 0.0) -> None:
        self.time = start

    def now(self) -> float:
        return self.time

    def advance_to(self, time: float) -> None:
        if time < self.time:
            raise SimulationError(f"the virtual clock cannot go back from {self.time} to {time}")
        self.time = time

    async def sleep_until(self, deadline: float) -> None:
        await anyio.lowlevel.checkpoint()
        if deadline > self.time:
            self.time = deadline


# --------------------------------------------------------------------------- report


class Binding(msgspec.Struct, frozen=True):
    pod: str
    node: str
    at: float


class Preemption(msgspec.Struct, frozen=True):
    preemptor: str
    victims: list[str]
    at: float


class Nomination(msgspec.Struct, frozen=True):
    pod: str
    node: str
    at: float


class PendingPod(msgspec.Struct, frozen=True):
    pod: str
    reason: str


class Report(msgspec.Struct, frozen=True):
    """The `--out REPORT.json` document (docs/scenarios.md); field order is the file's key order."""

    bindings: list[Binding]
    preemptions: list[Preemption]
    nominations: list[Nomination]
    pending: list[PendingPod]
    finished_at: float
    quotas: list[QuotaReport] | msgspec.UnsetType = msgspec.UNSET  # only when the scenario has quotas

    def to_json(self) -> str:
        return json.dumps(msgspec.to_builtins(self), indent=2) + "\n"


# --------------------------------------------------------------------------- the world


class _Happening(NamedTuple):
    """Ordered as a tuple (in C, not by a generated `__lt__`): `scheduled` is unique, so `action` is never compared."""

    time: float
    phase: int  # RELEASE before CREATION at one time
    order: int  # document order for creations, scheduling order for releases
    scheduled: int  # the counter when it was scheduled
    action: Callable[[], None]


class World:
    """What happens in the virtual cluster by itself: creations, runtimes, deletions, grace periods."""

    def __init__(self, journal: Journal) -> None:
        self.journal = journal
        self.state: ClusterState = journal.state
        self._heap: list[_Happening] = []
        self._counter = 0
        self.runtimes: dict[str, float] = {}  # pod uid -> runtime after binding
        self.reports: list[tuple[str, str, str, str]] = []  # (gang or pod, phase, reason, message)
        self.created = 0  # scenario objects created so far

    def at(self, time: float, phase: int, action: Callable[[], None], order: int | None = None) -> None:
        self._counter += 1
        count = self._counter
        heapq.heappush(self._heap, _Happening(time, phase, count if order is None else order, count, action))

    def next_time(self) -> float | None:
        return self._heap[0].time if self._heap else None

    def run_due(self, time: float) -> int:
        """Carry out everything due at or before `time`, releases before creations; returns how many."""
        done = 0
        while self._heap and self._heap[0].time <= time:
            heapq.heappop(self._heap).action()
            done += 1
        return done

    # ------------------------------------------------------------------ scenario objects

    def schedule_scenario(self, scenario: Scenario) -> None:
        for item in scenario.objects:
            obj = _with_uid(item)
            self.at(item.at, CREATION, partial(self._create, item, obj), order=item.index)
            if item.delete_at is not None:
                self.at(item.delete_at, RELEASE, partial(self._delete, item, obj))

    def _create(self, item: ScenarioObject, obj: KubeObject) -> None:
        self.created += 1
        if isinstance(obj, Pod):
            if item.runtime is not None:
                self.runtimes[obj.metadata.uid] = item.runtime
            if obj.spec.node_name:
                if not obj.status.phase:
                    obj = msgspec.structs.replace(obj, status=msgspec.structs.replace(obj.status, phase="Running"))
                if item.runtime is not None:
                    self._finish_later(item.key, obj.metadata.uid, self.journal.clock.now() + item.runtime)
        self.journal.record(item.info.upsert(obj))
        if isinstance(obj, PersistentVolumeClaim):
            self._provision_immediate(obj)
        elif isinstance(obj, StorageClass):  # the claims that came before their class, as the PV controller resyncs
            for claim in [c for c in self.state.volumes.claims.values() if claim_class(c) == obj.metadata.name]:
                self._provision_immediate(claim)
        elif isinstance(obj, Pod) and obj.spec.volumes and not obj.spec.node_name:
            self._create_ephemeral_claims(obj)

    def _create_ephemeral_claims(self, pod: Pod) -> None:
        """The ephemeral volume controller: each generic ephemeral volume's claim, `<pod>-<volume>`,
        controlled by the pod (a claim of that name already there is left alone, as the controller does)."""
        meta = pod.metadata
        for volume in pod.spec.volumes:
            if volume.ephemeral is None:
                continue
            name = f"{meta.name}-{volume.name}"
            if f"{meta.namespace}/{name}" in self.state.volumes.claims:
                continue
            claim = PersistentVolumeClaim(
                metadata=OwnedMeta(name=name, namespace=meta.namespace, uid=f"{meta.uid}-{volume.name}",
                                   owner_references=[OwnerReference(uid=meta.uid, controller=True)]),
                spec=PersistentVolumeClaimSpec(
                    storage_class_name=volume.ephemeral.volume_claim_template.spec.storage_class_name))
            self.journal.record(ClaimUpserted(claim=claim))
            self._provision_immediate(claim)

    def _delete(self, item: ScenarioObject, obj: KubeObject) -> None:
        uid = obj.metadata.uid
        if item.info.name == "Node":
            self.lose_node(item.key)
            return
        self.journal.record(item.info.delete(item.key, uid))

    def lose_node(self, name: str) -> None:
        """The machine is gone, and every pod bound to it with it."""
        if name not in self.state.nodes:
            return
        self.journal.record(NodeDeleted(name=name))
        for key in sorted(self.state.pods_by_node.get(name, ())):
            pod = self.state.pods.get(key)
            if pod is not None and pod.node_name == name:
                self.journal.record(PodDeleted(key=key, uid=pod.uid))

    def _finish_later(self, key: str, uid: str, time: float) -> None:
        self.at(time, RELEASE, partial(self._remove, key, uid))

    def _remove(self, key: str, uid: str) -> None:
        pod = self.state.pods.get(key)
        if pod is not None and pod.uid == uid:
            self.journal.record(PodDeleted(key=key, uid=uid))

    # ------------------------------------------------------------------ reactions to the API

    def pod_bound(self, key: str, node: str) -> None:
        pod = self.state.pods[key]
        obj = pod.obj
        running = msgspec.structs.replace(obj, spec=msgspec.structs.replace(obj.spec, node_name=node),
                                          status=msgspec.structs.replace(obj.status, phase="Running"))
        self.journal.record(PodUpserted(pod=running))
        runtime = self.runtimes.get(obj.metadata.uid)
        if runtime is not None:
            self._finish_later(key, obj.metadata.uid, self.journal.clock.now() + runtime)

    def _provision_immediate(self, claim: PersistentVolumeClaim) -> None:
        """The PV controller and provisioner of an Immediate class: the claim is bound at once."""
        if claim.spec.volume_name:
            return
        storage_class = self.state.volumes.classes.get(claim_class(claim))
        if (storage_class is None or storage_class.volume_binding_mode == WAIT_FOR_FIRST_CONSUMER
                or storage_class.provisioner in ("", NO_PROVISIONER)):
            return
        self._bind_claim(claim, None)

    def provision(self, claims: tuple[str, ...], node: str) -> None:
        """The provisioner of a WaitForFirstConsumer class, once the scheduler chose `node`: each claim is
        bound to a new volume pinned to the node's zone (or to the node, when it has no zone label)."""
        info = self.state.nodes.get(node)
        zone = info.labels.get(ZONE_LABEL) if info is not None else None
        term = (NodeSelectorTerm(match_expressions=[NodeSelectorRequirement(key=ZONE_LABEL, operator="In",
                                                                            values=[zone])])
                if zone is not None else
                NodeSelectorTerm(match_fields=[NodeSelectorRequirement(key="metadata.name", operator="In",
                                                                       values=[node])]))
        for key in claims:
            claim = self.state.volumes.claims.get(key)
            if claim is not None and not claim.spec.volume_name:
                self._bind_claim(claim, term)

    def bind_volume(self, volume_name: str, key: str) -> None:
        """The PV controller, once the scheduler pre-bound a volume made in advance to a claim: both are bound."""
        volume = self.state.volumes.volumes[volume_name]
        claim = self.state.volumes.claims[key]
        meta = claim.metadata
        ref = ClaimReference(namespace=meta.namespace, name=meta.name, uid=meta.uid)
        self.journal.record(VolumeUpserted(volume=msgspec.structs.replace(
            volume, spec=msgspec.structs.replace(volume.spec, claim_ref=ref),
            status=PersistentVolumeStatus(phase="Bound"))))
        self._claim_bound(claim, volume_name)

    def _bind_claim(self, claim: PersistentVolumeClaim, term: NodeSelectorTerm | None) -> None:
        meta = claim.metadata
        name = f"pvc-{meta.uid or meta.namespace + '-' + meta.name}"
        affinity = VolumeNodeAffinity(required=NodeSelector(node_selector_terms=[term])) if term is not None else None
        storage_class = self.state.volumes.classes.get(claim_class(claim))
        provisioner = storage_class.provisioner if storage_class is not None else ""
        driver = MIGRATED_DRIVERS.get(provisioner, provisioner)
        # A CSI driver's volume (the in-tree plugins that did not migrate are named "kubernetes.io/..."), counted
        # against the driver's attach limit by its handle, as devcluster's provisioner makes it.
        csi = (CSIPersistentVolumeSource(driver=driver, volume_handle=name)
               if driver and not driver.startswith("kubernetes.io/") else None)
        self.journal.record(VolumeUpserted(volume=PersistentVolume(
            metadata=ObjectMeta(name=name),
            spec=PersistentVolumeSpec(storage_class_name=claim_class(claim), node_affinity=affinity, csi=csi,
                                      claim_ref=ClaimReference(namespace=meta.namespace, name=meta.name, uid=meta.uid)),
            status=PersistentVolumeStatus(phase="Bound"))))
        self._claim_bound(claim, name)

    def _claim_bound(self, claim: PersistentVolumeClaim, name: str) -> None:
        meta = claim.metadata
        bound = msgspec.structs.replace(
            claim, metadata=msgspec.structs.replace(meta, annotations={**meta.annotations,
                                                                       BIND_COMPLETED_ANNOTATION: "yes"}),
            spec=msgspec.structs.replace(claim.spec, volume_name=name),
            status=msgspec.structs.replace(claim.status, phase="Bound"))
        self.journal.record(ClaimUpserted(claim=bound))

    def evict(self, key: str, grace_seconds: int | None) -> None:
        pod = self.state.pods[key]
        obj = pod.obj
        if obj.metadata.deletion_timestamp is not None:
            return  # already terminating: the first grace period stands
        grace = grace_seconds if grace_seconds is not None else obj.spec.termination_grace_period_seconds
        grace = DEFAULT_GRACE_SECONDS if grace is None else max(0, grace)
        now = self.journal.clock.now()
        terminating = msgspec.structs.replace(obj, metadata=msgspec.structs.replace(
            obj.metadata, deletion_timestamp=_timestamp(now), deletion_grace_period_seconds=grace))
        self.journal.record(PodUpserted(pod=terminating))
        self._finish_later(key, obj.metadata.uid, now + grace)

    def add_condition(self, key: str, condition: Condition) -> None:
        obj = self.state.pods[key].obj
        conditions = [c for c in obj.status.conditions if c.type != condition.type] + [condition]
        self.journal.record(PodUpserted(pod=msgspec.structs.replace(
            obj, status=msgspec.structs.replace(obj.status, conditions=conditions))))


BindHook = Callable[[str, str, str], BindOutcome | None]


class InMemoryCluster:
    """The `ClusterAPI` of the virtual world: every call takes effect at once, at the current virtual time.

    `bind_hook(pod, uid, node)` may answer a bind instead of the world (tests inject failures with it).
    """

    def __init__(self, world: World, bind_hook: BindHook | None = None) -> None:
        self.world = world
        self.bind_hook = bind_hook
        self.calls: list[tuple[str, str]] = []  # (method, pod or gang key), in call order

    async def select_node(self, claim: str, node: str) -> ApiOutcome:
        """The world's provisioner takes the node at once (`World.provision`)."""
        self.calls.append(("select_node", claim))
        if claim not in self.world.state.volumes.claims:
            return ApiOutcome(ok=False, reason=f'persistentvolumeclaims "{claim}" not found', retriable=False)
        self.world.provision((claim,), node)
        return OK

    async def bind_volume(self, volume: str, claim: str) -> ApiOutcome:
        """The world's PV controller binds the claim to the volume at once (`World.bind_volume`)."""
        self.calls.append(("bind_volume", claim))
        held = self.world.state.volumes
        if claim not in held.claims or volume not in held.volumes:
            return ApiOutcome(ok=False, reason=f'persistentvolume "{volume}" or claim "{claim}" not found',
                              retriable=False)
        self.world.bind_volume(volume, claim)
        return OK

    async def bind(self, pod: str, uid: str, node: str) -> BindOutcome:
        self.calls.append(("bind", pod))
        if self.bind_hook is not None:
            answer = self.bind_hook(pod, uid, node)
            if answer is not None:
                return answer
        state = self.world.state
        info = state.pods.get(pod)
        if info is None or (uid and info.uid != uid):
            return BindOutcome(status=FAILED, reason=f"pods \"{pod}\" not found", retriable=False)
        if info.node_name:
            return BindOutcome(status=ALREADY_BOUND, node=info.node_name,
                               reason=f"pod {pod} is already assigned to node {info.node_name}")
        if node not in state.nodes:
            return BindOutcome(status=FAILED, reason=f"nodes \"{node}\" not found", retriable=False)
        self.world.pod_bound(pod, node)
        return BindOutcome(status=BOUND, node=node)

    def hold_scheduled_events(self) -> None:
        """Nothing to hold: the virtual world writes no Events (`ClusterAPI.hold_scheduled_events`)."""

    def release_scheduled_events(self) -> None:
        """Nothing was held (`hold_scheduled_events`)."""

    async def evict(self, pod: str, uid: str, *, preemptor: str, message: str,
                    grace_seconds: int | None) -> ApiOutcome:
        self.calls.append(("evict", pod))
        info = self.world.state.pods.get(pod)
        if info is None or (uid and info.uid != uid):
            return ApiOutcome(ok=False, reason=f"pods \"{pod}\" not found", retriable=False)
        self.world.evict(pod, grace_seconds)
        return OK

    async def set_nominated_node(self, pod: str, uid: str, node: str | None) -> ApiOutcome:
        self.calls.append(("nominate" if node else "unnominate", pod))
        return OK

    async def set_disruption_condition(self, pod: str, uid: str, *, preemptor: str, message: str) -> ApiOutcome:
        self.calls.append(("disrupt", pod))
        info = self.world.state.pods.get(pod)
        if info is None or (uid and info.uid != uid):
            return ApiOutcome(ok=False, reason=f"pods \"{pod}\" not found", retriable=False)
        self.world.add_condition(pod, Condition(type="DisruptionTarget", status="True",
                                                reason="PreemptionByScheduler", message=message))
        return OK

    async def report_gang(self, gang: str, phase: GangPhase, reason: str, message: str,
                          quota: QuotaShortfall | None = None) -> ApiOutcome:
        self.calls.append(("report_gang", gang))
        self.world.reports.append((gang, phase, reason, message))
        world = self.world
        group = world.state.kai_pod_groups.get(gang)
        if group is not None:  # its scheduling conditions, as the cluster's adapter writes them (placement reads them)
            conditions = kai_scheduling_conditions(world.state, gang, phase, reason, message, quota,
                                                   _timestamp(world.journal.clock.now()))
            if conditions is not None:
                status = msgspec.structs.replace(group.status, scheduling_conditions=msgspec.convert(
                    conditions, list[KaiSchedulingCondition]))
                world.journal.record(KaiPodGroupUpserted(pod_group=msgspec.structs.replace(group, status=status)))
        return OK

    async def report_pod(self, pod: str, uid: str, reason: str, message: str) -> ApiOutcome:
        self.calls.append(("report_pod", pod))
        self.world.reports.append((pod, "Pending", reason, message))
        return OK

    async def enqueue_pod_group(self, gang: str) -> ApiOutcome:
        self.calls.append(("enqueue", gang))
        group = self.world.state.volcano_pod_groups.get(gang)
        if group is None:
            return ApiOutcome(ok=False, reason=f"podgroups \"{gang}\" not found", retriable=False)
        self.world.journal.record(VolcanoPodGroupUpserted(pod_group=msgspec.structs.replace(
            group, status=msgspec.structs.replace(group.status, phase=INQUEUE))))
        return OK


# --------------------------------------------------------------------------- the simulation


class SimulationProgress(msgspec.Struct, frozen=True):
    """Where a running simulation stands (see `Simulation(progress=...)`)."""

    time: float  # virtual seconds
    created: int  # scenario objects created so far
    objects: int  # scenario objects in all
    binds: int
    pending: int  # pods waiting to be placed now
    events: int  # recorded through the journal so far


ProgressHook = Callable[[SimulationProgress], None]


class SimulationStats(msgspec.Struct, frozen=True):
    events: int  # recorded through the journal: observations and decisions
    gangs: int  # PodGroups known at the end
    pods: int  # Pod documents in the scenario
    binds: int
    bind_failures: int
    preemptions: int
    plans: int
    attempts: int
    cycles: int


class Simulation:
    """One run of a scenario. Build it, `await run()`, read `report` and `stats`."""

    def __init__(self, scenario: Scenario, *, until: float | None = None, log: EventLog | None = None,
                 config: SchedulerConfig | None = None, preemptor: Preemptor | None = None,
                 bind_hook: BindHook | None = None, progress: ProgressHook | None = None) -> None:
        self.scenario = scenario
        self.progress = progress
        self.until = until
        self.clock = VirtualClock()
        self.state = ClusterState()
        self.journal = Journal(self.state, self.clock, log)
        self.world = World(self.journal)
        self.api = InMemoryCluster(self.world, bind_hook)
        base = config or SchedulerConfig()
        # job-level preemption by default, as in `toposched run`;
        # pass `daemon.scheduling.ports.NeverPreempt()` to turn it off
        self.scheduler = Scheduler(self.journal, self.api,
                                   preemptor=preemptor if preemptor is not None else JobPreemptor(),
                                   config=msgspec.structs.replace(base, retry_parked_seconds=None))
        self._bindings: list[Binding] = []
        self._preemptions: list[Preemption] = []
        self._nominations: list[Nomination] = []
        self._quota_watch = QuotaWatch(self.state)
        self.journal.subscribe(self._note)
        self.journal.subscribe(self._quota_watch.note)
        self.report: Report | None = None

    def _note(self, event: Event) -> None:
        noter = _REPORTED[type(event)]
        if noter is not None:
            noter(self, event)

    def _bound(self, event: PodBound) -> None:
        self._bindings.append(Binding(pod=event.pod, node=event.node, at=event.time))

    def _preempted(self, event: PreemptionPlanned) -> None:
        self._preemptions.append(Preemption(preemptor=event.gang, victims=list(event.victims), at=event.time))

    def _nominated(self, event: PodNominated) -> None:
        self._nominations.append(Nomination(pod=event.pod, node=event.node, at=event.time))

    async def run(self) -> Report:
        with paused_gc(freeze=False):  # the run makes next to no cyclic garbage (daemon.offline.bulk)
            return await self._run()

    async def _run(self) -> Report:
        world, clock, scheduler = self.world, self.clock, self.scheduler
        world.schedule_scenario(self.scenario)
        ended_by_until = False
        same_instant = 0
        while True:
            upcoming = [t for t in (world.next_time(), scheduler.next_deadline()) if t is not None]
            if not upcoming:
                break
            time = max(min(upcoming), clock.now())
            if self.until is not None and time > self.until:
                ended_by_until = True
                clock.advance_to(max(self.until, clock.now()))
                break
            same_instant = same_instant + 1 if time == clock.now() else 0
            if same_instant > 100_000:
                raise SimulationError(f"the world does not settle at t={time}")
            clock.advance_to(time)
            world.run_due(time)
            await scheduler.run_until_idle()
            if self.progress is not None:
                self.progress(self._progress())
        finished_at = clock.now() if ended_by_until else self.state.last_time
        pending = self._pending()
        self.report = Report(
            bindings=self._bindings,
            preemptions=self._preemptions,
            nominations=self._nominations,
            pending=pending,
            finished_at=finished_at,
            quotas=self._quota_watch.report(finished_at, [p.pod for p in pending]),
        )
        return self.report

    def _progress(self) -> SimulationProgress:
        return SimulationProgress(time=self.clock.now(), created=self.world.created, objects=len(self.scenario.objects),
                                  binds=self.scheduler.stats.binds, pending=len(self.state.pending),
                                  events=self.journal.recorded)

    def _pending(self) -> list[PendingPod]:
        state = self.state
        keys = set(state.pending)
        # assumed, not bound yet; and ours held by scheduling gates (a scenario cannot remove them)
        keys.update(key for key, pod in state.pods.items() if (pod.assumed_node or (
            pod.ours and pod.gated and not (pod.terminal or pod.terminating))) and not pod.node_name)
        return [PendingPod(pod=key, reason=self.scheduler.explain_pending(key)) for key in sorted(keys)]

    @property
    def stats(self) -> SimulationStats:
        s = self.scheduler.stats
        gangs = {key for key, info in self.state.gangs.items() if info.spec is not None}
        return SimulationStats(events=self.journal.recorded, gangs=len(gangs), pods=len(self.scenario.of_kind("Pod")),
                               binds=s.binds, bind_failures=s.bind_failures, preemptions=s.preemptions,
                               plans=s.plans, attempts=s.attempts, cycles=s.cycles)


# Event type -> what the report keeps of it (exhaustive, events.dispatch): bindings, preemptions, nominations.
_REPORTED: dict[type, Callable[[Simulation, Any], None] | None] = exhaustive("the simulation report", {
    PodBound: Simulation._bound,
    PreemptionPlanned: Simulation._preempted,
    PodNominated: Simulation._nominated,
    **each((*POD_GROUP_EVENTS, *TOPOLOGY_OBJECT_EVENTS, *PRIORITY_CLASS_EVENTS, NodeUpserted, NodeDeleted,
            PodUpserted, PodDeleted, WorkloadUpserted, WorkloadDeleted, ObjectUndecodable, PodAssumed, PodForgotten,
            *COMPOSITE_EVENTS, BindRequested, BindFailed, NominationCleared, EvictionRequested, GangTimedOut,
            GangPending, GangPlanned), None),
    # the quotas section: daemon/offline/quota_report.py
    **each((*QUOTA_OBJECT_EVENTS, *VOLUME_EVENTS, *BUDGET_EVENTS, *JOB_OBJECT_EVENTS), None),
})


async def simulate(scenario: Scenario, *, until: float | None = None, log: EventLog | None = None,
                   config: SchedulerConfig | None = None, preemptor: Preemptor | None = None) -> Report:
    return await Simulation(scenario, until=until, log=log, config=config, preemptor=preemptor).run()


def _with_uid(item: ScenarioObject) -> KubeObject:
    """The object as created: a scenario pod without a uid gets one from its place in the scenario."""
    obj = item.obj
    if obj.metadata.uid:
        return obj
    meta = msgspec.structs.replace(obj.metadata, uid=f"sim-{item.index}")
    return msgspec.structs.replace(obj, metadata=meta)


def _timestamp(seconds: float) -> str:
    """A deterministic RFC 3339 stamp for a virtual time (seconds after the epoch)."""
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
