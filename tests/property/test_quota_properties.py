"""Properties of quotas on random multi-team workloads, played by the simulator (the real loop).

Whatever the teams, their quotas (flat, or two of them under a parent whose max they share) and
their bursts of gangs, at every event of the run:
- no quota runs more than its max (pods bound or assumed, parents included);
- reclaim victims are only borrowers: every victim runs in a quota that used more than its min of
  a resource the reclaimer asked for, is preemptible, and is not in the reclaimer's quota;
- so a quota at or under its min never loses a pod to reclaim;
- the quota that reclaims stays within its own min with the gang it reclaims for;
- priority preemption (also when the preemptor's quota, at its max, is what keeps it out) takes
  only pods of the preemptor's own quota, of strictly lower priority.
The same teams written as KAI Queues and PodGroups (priorities 0, 100, 200; preemptibility stated or
not): no queue runs more than its limit, nor non-preemptible jobs beyond its quota; no victim is a
non-preemptible job; a priority victim is of lower priority in the preemptor's queue; a reclaim victim's
queue uses more than its quota and fair share, and the reclaiming queue stays within its own.
And for one team at its max whose high-priority gang arrives, the plan evicts whole lower-priority
gangs of that team only, lets the quota admit the gang once they are gone, and no victim gang could
be spared.
"""

from __future__ import annotations

from collections.abc import Callable

import anyio
import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from daemon.offline.simulator import Simulation
from events.builders import elastic_quota, gpus, node, pod, pod_group
from events.ingest import KIND_BY_NAME, KindInfo
from events.model import Event, PreemptionPlanned
from events.objects import QUOTA_PREEMPTIBLE_LABEL
from events.scenario import Scenario, ScenarioObject
from state.cluster import ClusterState
from state.quota import Quota

GPU = "nvidia.com/gpu"
TEAMS = 3


class Gang(msgspec.Struct, frozen=True):
    team: int
    pods: int
    gpus: int
    at: float
    runtime: float | None
    preemptible: bool
    priority: int


class Workload(msgspec.Struct, frozen=True):
    mins: list[int]
    maxes: list[int]
    gangs: list[Gang]
    parent_max: int = 0  # > 0: team-0 and team-1 are children of a parent quota with this max


@st.composite
def workloads(draw: st.DrawFn) -> Workload:
    """A team floods the idle cluster with gangs at t=0 (borrowing the others' mins), then gangs of
    any team arrive in bursts: the pattern that makes quotas borrow, refuse and reclaim."""
    mins = list(draw(st.permutations(draw(st.sampled_from([[0, 8, 16], [8, 8, 16], [16, 16, 0], [8, 8, 8]])))))
    maxes = [draw(st.sampled_from([m for m in (8, 16, 24, 32) if m >= max(low, 8)])) for low in mins]
    parent_max = draw(st.sampled_from([0, max(8, mins[0] + mins[1]), 24]))
    flooder = draw(st.integers(0, 1 if parent_max else TEAMS - 1))
    flood = draw(st.lists(st.builds(
        Gang, team=st.just(flooder), pods=st.integers(1, 2), gpus=st.just(8), at=st.just(0.0),
        runtime=st.sampled_from([None, None, 300.0]), preemptible=st.sampled_from([True, True, False]),
        priority=st.sampled_from([0, 100])), min_size=2, max_size=5))
    claimant = 1 - flooder if parent_max else st.integers(0, TEAMS - 1)
    later = draw(st.lists(st.builds(
        Gang, team=st.just(claimant) if isinstance(claimant, int) else claimant, pods=st.integers(1, 2),
        gpus=st.sampled_from([4, 8]), at=st.sampled_from([50.0, 100.0, 150.0]),
        runtime=st.sampled_from([None, 60.0, 200.0]), preemptible=st.booleans(), priority=st.sampled_from([0, 100])),
        min_size=1, max_size=5))
    return Workload(mins=mins, maxes=maxes, gangs=flood + later, parent_max=parent_max)


Add = Callable[..., None]


def _adding(out: Scenario) -> Add:
    """`add(kind, obj, at=0.0, runtime=None)`: the object appended to `out` as a scenario document would be."""
    def add(kind: str, obj: object, at: float = 0.0, runtime: float | None = None) -> None:
        info: KindInfo = KIND_BY_NAME[kind]
        meta = obj.metadata  # type: ignore[attr-defined]
        key = f"{meta.namespace}/{meta.name}" if meta.namespace else meta.name
        out.objects.append(ScenarioObject(info=info, obj=obj, key=key, index=len(out.objects),  # type: ignore[arg-type]
                                          source="generated", at=at, runtime=runtime))
    return add


def _four_nodes(add: Add) -> None:
    for index in range(4):
        add("Node", node(f"n{index}", block=f"b{index // 2}", spine="s0"))


def _over_max(state: ClusterState, event: Event, failures: list[str], word: str) -> None:
    """Every quota running more than its max (KAI: limit) of a resource, as a failure."""
    for quota in state.quotas.in_order():
        for resource, cap in quota.max.items():
            if quota.running.get(resource, 0) > cap:
                failures.append(f"seq {event.seq}: {quota.label} runs {quota.running[resource]} > {word} {cap}")


def scenario(w: Workload) -> Scenario:
    out = Scenario()
    add = _adding(out)
    _four_nodes(add)
    if w.parent_max:
        add("ElasticQuota", elastic_quota("dept", namespace="quotas", is_parent=True,
                                          minimum=gpus(min(w.parent_max, w.mins[0] + w.mins[1])),
                                          maximum=gpus(w.parent_max)))
    for team in range(TEAMS):
        parent = "dept" if w.parent_max and team < 2 else None
        add("ElasticQuota", elastic_quota(f"team-{team}", namespace=f"team-{team}", minimum=gpus(w.mins[team]),
                                          maximum=gpus(w.maxes[team]), parent=parent))
    for number, gang in enumerate(w.gangs):
        namespace, name = f"team-{gang.team}", f"g{number}"
        add("PodGroup", pod_group(name, namespace=namespace, min_member=gang.pods), at=gang.at)
        labels = {} if gang.preemptible else {QUOTA_PREEMPTIBLE_LABEL: "false"}
        for i in range(gang.pods):
            add("Pod", pod(f"{name}-{i}", namespace=namespace, gang=name, gpus=gang.gpus, priority=gang.priority,
                           labels=labels), at=gang.at, runtime=gang.runtime)
    return out


def _borrowing(quota: Quota, asked: set[str]) -> bool:
    return any(quota.used.get(r, 0) > quota.guarded.get(r, 0) for r in asked if r in quota.constrained)


def watch(state: ClusterState, failures: list[str]) -> Callable[[Event], None]:
    def check(event: Event) -> None:
        book = state.quotas
        _over_max(state, event, failures, "max")
        if isinstance(event, PreemptionPlanned) and not event.reclaim_from:
            gang = state.gangs[event.gang]
            asking = [key for key in sorted(gang.members) if key in state.pending]
            preemptor_quota = book.quota_of(asking[0]) if asking else None
            lowest = min(state.pods[key].priority for key in asking) if asking else 0
            for victim in event.victims:
                if book.quota_of(victim) is not preemptor_quota:
                    failures.append(f"seq {event.seq}: priority victim {victim} outside the preemptor's quota")
                if state.pods[victim].priority >= lowest:
                    failures.append(f"seq {event.seq}: priority victim {victim} not of lower priority")
        if isinstance(event, PreemptionPlanned) and event.reclaim_from:
            gang = state.gangs[event.gang]
            asking_pods = [key for key in gang.members if key in state.pending]
            reclaimer = book.quota_of(asking_pods[0]) if asking_pods else None
            asked = {r for key in asking_pods for r, a in state.pods[key].requests.items() if a > 0}
            if reclaimer is not None:
                own = sum(dict(share.requests).get(GPU, 0) for k in asking_pods
                          if (share := book.shares.get(k)) is not None and share.used)
                ask = sum(state.pods[k].requests.get(GPU, 0) for k in asking_pods)
                if reclaimer.used.get(GPU, 0) - own + ask > reclaimer.guarded.get(GPU, 0):
                    failures.append(f"seq {event.seq}: {reclaimer.label} reclaims beyond its min")
            for victim in event.victims:
                source = book.quota_of(victim)
                pod_info = state.pods[victim]
                if source is None or not _borrowing(source, asked):
                    failures.append(f"seq {event.seq}: victim {victim} of a quota not borrowing")
                elif source is reclaimer:
                    failures.append(f"seq {event.seq}: victim {victim} in the reclaimer's own quota")
                if not book.preemptible(pod_info):
                    failures.append(f"seq {event.seq}: non-preemptible victim {victim}")
    return check


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads())
def test_quotas_hold_and_reclaim_takes_only_from_borrowers(w: Workload) -> None:
    simulation = Simulation(scenario(w))
    failures: list[str] = []
    simulation.journal.subscribe(watch(simulation.state, failures))
    report = anyio.run(simulation.run)
    assert not failures, failures[:5]
    victims = {v for p in report.preemptions for v in p.victims}
    assert not victims & {p.pod for p in report.pending}


class Crowd(msgspec.Struct, frozen=True):
    """Gangs (GPUs of 8-GPU pods, priority) running in team-a, which is at its max."""

    running: list[tuple[int, int]]
    urgent_pods: int
    urgent_priority: int
    spare_nodes: int


@st.composite
def crowds(draw: st.DrawFn) -> Crowd:
    running = draw(st.lists(st.tuples(st.integers(1, 2), st.sampled_from([0, 10, 100, 1000])), min_size=1,
                            max_size=4))
    return Crowd(running=running, urgent_pods=draw(st.integers(1, 3)), urgent_priority=draw(st.sampled_from([10, 500])),
                 spare_nodes=draw(st.integers(0, 3)))


@settings(max_examples=150, deadline=None)
@given(crowds())
def test_a_job_kept_out_by_its_quota_preempts_only_lower_priority_gangs_of_it_and_only_what_it_must(
        crowd: Crowd) -> None:
    from events.builders import bound, gpu_nodes, pod_event
    from events.model import ElasticQuotaUpserted, PodGroupUpserted
    from placement import Unschedulable, plan_gang
    from placement.quota import admit
    from preemption import JobPreemptor
    from preemption.plan import PreemptionPlan

    used_nodes = sum(pods for pods, _ in crowd.running)
    events: list[Event] = [*gpu_nodes(used_nodes + crowd.spare_nodes + crowd.urgent_pods, per_block=2)]
    events.append(ElasticQuotaUpserted(quota=elastic_quota("team-a", namespace="team-a", minimum=gpus(8),
                                                           maximum=gpus(8 * used_nodes))))
    index = 0
    priorities: dict[str, int] = {}
    for number, (pods, priority) in enumerate(crowd.running):
        name = f"r{number}"
        priorities[f"team-a/{name}"] = priority
        events.append(PodGroupUpserted(pod_group=pod_group(name, namespace="team-a", min_member=pods)))
        for i in range(pods):
            events.append(pod_event(bound(pod(f"{name}-{i}", namespace="team-a", gang=name, priority=priority),
                                          f"n{index}"), time=float(number)))
            index += 1
    events.append(PodGroupUpserted(pod_group=pod_group("urgent", namespace="team-a", min_member=crowd.urgent_pods)))
    events += [pod_event(pod(f"urgent-{i}", namespace="team-a", gang="urgent", priority=crowd.urgent_priority),
                         time=50.0) for i in range(crowd.urgent_pods)]
    state = ClusterState()
    state.apply_all(events)
    failure = plan_gang(state, "team-a/urgent")
    assert isinstance(failure, Unschedulable) and failure.constraint == "quota", failure
    from daemon.scheduling.ports import Preemptee
    urgent = tuple(f"team-a/urgent-{i}" for i in range(crowd.urgent_pods))
    plan = JobPreemptor().plan(state, Preemptee(key="team-a/urgent", gangs=("team-a/urgent",), pods=urgent,
                                                priority=crowd.urgent_priority, now=state.last_time), failure)
    lower = sum(pods for pods, priority in crowd.running if priority < crowd.urgent_priority)
    if lower < crowd.urgent_pods:  # not enough of lower priority in the quota: nobody is evicted
        assert plan is None or not plan.victims
        return
    assert isinstance(plan, PreemptionPlan) and plan.victims, plan
    jobs = set(plan.victim_jobs)
    assert all(priorities[job] < crowd.urgent_priority for job in jobs)
    assert {v.rsplit("-", 1)[0] for v in plan.victims} == jobs  # whole gangs (minMember = all their pods)
    assert not admit(state, list(urgent), ignore_pods=set(plan.victims))
    for job in jobs:  # no victim gang could be spared
        spared = {v for v in plan.victims if not v.startswith(f"{job}-")}
        assert admit(state, list(urgent), ignore_pods=spared), f"{job} was not needed"


# --------------------------------------------------------------------------- the same teams as KAI queues

KAI_CLASSES = {0: "train", 100: "build", 200: "urgent"}  # PriorityClass values; 100 and up: non-preemptible


class KaiWorkload(msgspec.Struct, frozen=True):
    teams: Workload
    weights: list[float]  # each queue's gpu overQuotaWeight
    stated: list[str]  # per gang, its PodGroup's spec.preemptibility ("": its priority decides)


@st.composite
def kai_workloads(draw: st.DrawFn) -> KaiWorkload:
    """`workloads()` without a parent, the gangs of priorities 0, 100 or 200 and stating their
    preemptibility or not, and the queues' overQuotaWeights."""
    teams = draw(workloads().filter(lambda w: not w.parent_max))
    gangs = [msgspec.structs.replace(gang, priority=draw(st.sampled_from(sorted(KAI_CLASSES)))) for gang in teams.gangs]
    stated = [draw(st.sampled_from(["", "", "preemptible", "non-preemptible"])) for _ in gangs]
    weights = draw(st.lists(st.sampled_from([0.0, 1.0, 2.0]), min_size=TEAMS, max_size=TEAMS))
    return KaiWorkload(teams=msgspec.structs.replace(teams, gangs=gangs), weights=weights, stated=stated)


def kai_scenario(k: KaiWorkload) -> Scenario:
    """The teams written as KAI writes them: each a KAI Queue (gpu quota = the team's min, limit = its max,
    or -1 for the last team, overQuotaWeight as drawn); each gang a KAI PodGroup of the PriorityClass of
    its priority (`KAI_CLASSES`), its pods of that priority."""
    from events.builders import kai_pod_group, kai_queue
    from events.objects import KAI_POD_GROUP_ANNOTATION, ObjectMeta, PriorityClass

    w = k.teams
    out = Scenario()
    add = _adding(out)
    for value, name in KAI_CLASSES.items():
        add("PriorityClass", PriorityClass(metadata=ObjectMeta(name=name), value=value))
    _four_nodes(add)
    deserves_all = (-1.0, -1.0, 1.0)
    for team in range(TEAMS):
        limit = -1.0 if team == TEAMS - 1 else float(w.maxes[team])
        add("KaiQueue", kai_queue(f"team-{team}", cpu=deserves_all, memory=deserves_all,
                                  gpu=(float(w.mins[team]), limit, k.weights[team])))
    for number, (gang, stated) in enumerate(zip(w.gangs, k.stated, strict=True)):
        namespace, name = f"team-{gang.team}", f"g{number}"
        add("KaiPodGroup", kai_pod_group(name, namespace=namespace, min_member=gang.pods, queue=f"team-{gang.team}",
                                         priority_class_name=KAI_CLASSES[gang.priority], preemptibility=stated),
            at=gang.at)
        for i in range(gang.pods):
            add("Pod", pod(f"{name}-{i}", namespace=namespace, gpus=gang.gpus, priority=gang.priority,
                           annotations={KAI_POD_GROUP_ANNOTATION: name}), at=gang.at, runtime=gang.runtime)
    return out


def kai_watch(state: ClusterState, failures: list[str]) -> Callable[[Event], None]:
    from placement.quota import reclaim_floor

    def check(event: Event) -> None:
        book = state.quotas
        _over_max(state, event, failures, "limit")
        for quota in book.in_order():
            if quota.used_np.get(GPU, 0) > quota.min.get(GPU, 0):
                failures.append(f"seq {event.seq}: {quota.label} runs non-preemptible jobs over its quota")
        if not isinstance(event, PreemptionPlanned):
            return
        gang = state.gangs[event.gang]
        asking = [key for key in sorted(gang.members) if key in state.pending]
        preemptor_quota = book.quota_of(asking[0]) if asking else None
        lowest = min(state.pods[key].priority for key in asking) if asking else 0
        for victim in event.victims:
            pod_info = state.pods[victim]
            if not book.preemptible(pod_info):
                failures.append(f"seq {event.seq}: non-preemptible victim {victim}")
            source = book.quota_of(victim)
            if not event.reclaim_from:
                if source is not preemptor_quota or pod_info.priority >= lowest:
                    failures.append(f"seq {event.seq}: priority victim {victim} not of lower priority in the "
                                    "preemptor's queue")
            elif source is None or source is preemptor_quota:
                failures.append(f"seq {event.seq}: reclaim victim {victim} of no queue or the reclaimer's own")
            elif source.used.get(GPU, 0) <= reclaim_floor(state, source).get(GPU, 0):
                failures.append(f"seq {event.seq}: reclaim victim {victim} of a queue within its quota and fair share")
        if event.reclaim_from and preemptor_quota is not None:
            own = sum(dict(share.requests).get(GPU, 0) for k in asking
                      if (share := book.shares.get(k)) is not None and share.used)
            ask = sum(state.pods[k].requests.get(GPU, 0) for k in asking)
            if preemptor_quota.used.get(GPU, 0) - own + ask > reclaim_floor(state, preemptor_quota).get(GPU, 0):
                failures.append(f"seq {event.seq}: {preemptor_quota.label} reclaims beyond its quota and fair share")
    return check


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kai_workloads())
def test_kai_queues_hold_their_limits_keep_non_preemptible_jobs_and_reclaim_only_from_queues_over_their_share(
        k: KaiWorkload) -> None:
    simulation = Simulation(kai_scenario(k))
    failures: list[str] = []
    simulation.journal.subscribe(kai_watch(simulation.state, failures))
    report = anyio.run(simulation.run)
    assert not failures, failures[:5]
    victims = {v for p in report.preemptions for v in p.victims}
    assert not victims & {p.pod for p in report.pending}
