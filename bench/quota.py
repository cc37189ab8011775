"""Multi-tenant quota benchmark: `python -m bench.quota [--hours H] [--runs N]`.

Part 1, fairness and reclaim latency (the real loop on the virtual clock, as `toposched simulate`):
1,000 nodes of 8 GPUs (5 spines > 5 blocks > 5 NVLink domains > 8 nodes) shared by four teams with
Koordinator ElasticQuotas of different mins (team-a 40 %, team-b 30 %, team-c 20 %, team-d 10 % of
the GPUs; max: the whole cluster). Arrivals are bursty (seeded): each team sends bursts of 3-8 gangs
(8-64 whole-node pods, PreferGather at BlockLayer, running 1-3 hours) at exponential gaps (mean 20
minutes), far more than the cluster holds, and team-d stays idle for the first two hours while the
others borrow its min. Printed: each team's
share of the GPU-hours used against its min, how many reclaims happened, and for every gang that
reclaimed, the simulated time from its arrival to its pods running (victims keep their room for
their 30 s grace period, so about 30 s is the floor).

Part 2, planning cost per reclaim at 5,000 nodes (the bench.preemption fabric): teams a-c fill the
whole cluster with 2- and 3-node gangs, far beyond their mins; team-d (under its min) asks for a
4-pod MustGather-block gang, a 64-pod gang and a 256-pod gang. Each run times one
`JobPreemptor.plan` call (the reclaim, validation by placement included). Target: < 300 ms p50 on 2
cores. Wall-clock p50/p90 and CPU-time p50 are printed (CPU time is steadier on a shared machine).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from typing import Any

import anyio

from bench import targets
from bench.fabric import add_fabric
from daemon.offline.simulator import Simulation
from daemon.scheduling.ports import Preemptee
from events.builders import bound, elastic_quota, gpus, node, pod, pod_group
from events.ingest import KIND_BY_NAME
from events.model import ElasticQuotaUpserted, PodGroupUpserted, PodUpserted, PreemptionPlanned
from events.scenario import Scenario, ScenarioObject
from placement import Unschedulable, plan_gang
from preemption import JobPreemptor, PreemptionPlan
from state.cluster import ClusterState

TEAMS = (("team-a", 0.40), ("team-b", 0.30), ("team-c", 0.20), ("team-d", 0.10))
PREFER_BLOCK: list[dict[str, object]] = [{"layer": "BlockLayer", "strategy": "PreferGather"}]
MUST_BLOCK: list[dict[str, object]] = [{"layer": "BlockLayer", "strategy": "MustGather"}]
GPU = "nvidia.com/gpu"
SIZES = (8, 16, 16, 32, 32, 64)  # whole-node pods per gang


# --------------------------------------------------------------------------- part 1


def workload(hours: float, seed: int = 5) -> tuple[Scenario, int]:
    """The 1,000-node cluster, the four quotas and the bursty gangs, as scenario objects."""
    rng = random.Random(seed)
    scenario = Scenario()

    def add(kind: str, obj: Any, at: float = 0.0, runtime: float | None = None) -> None:
        meta = obj.metadata
        key = f"{meta.namespace}/{meta.name}" if meta.namespace else meta.name
        scenario.objects.append(ScenarioObject(info=KIND_BY_NAME[kind], obj=obj, key=key,
                                               index=len(scenario.objects), source="bench", at=at, runtime=runtime))

    nodes = 0
    for s in range(5):
        for b in range(5):
            for a in range(5):
                for i in range(8):
                    add("Node", node(f"n-{s}-{b}-{a}-{i}", spine=f"s{s}", block=f"s{s}-b{b}",
                                     accelerator=f"s{s}-b{b}-a{a}"))
                    nodes += 1
    total = nodes * 8
    for team, share in TEAMS:
        add("ElasticQuota", elastic_quota(team, namespace=team, minimum=gpus(int(total * share)),
                                          maximum=gpus(total)))
    end = hours * 3600
    arrivals: list[tuple[float, str, int, float]] = []
    for team, _ in TEAMS:
        at = 7200.0 if team == "team-d" else rng.uniform(0, 600)
        while at < end:
            for _ in range(rng.randint(3, 8)):
                arrivals.append((at, team, rng.choice(SIZES), rng.uniform(3600, 10800)))
            at += rng.expovariate(1 / 1200)
    arrivals.sort(key=lambda a: (a[0], a[1]))
    for number, (at, team, size, runtime) in enumerate(arrivals):
        name = f"job-{number}"
        add("PodGroup", pod_group(name, namespace=team, min_member=size, gather=PREFER_BLOCK), at=at)
        for i in range(size):
            add("Pod", pod(f"{name}-{i}", namespace=team, gang=name, gpus=8), at=at, runtime=runtime)
    return scenario, len(arrivals)


def fairness(hours: float) -> None:
    scenario, gangs = workload(hours)
    simulation = Simulation(scenario, until=hours * 3600)
    reclaims: list[PreemptionPlanned] = []

    def note(event: Any) -> None:
        if isinstance(event, PreemptionPlanned) and event.reclaim_from:
            reclaims.append(event)

    simulation.journal.subscribe(note)
    started = time.perf_counter()
    report = anyio.run(simulation.run)
    wall = time.perf_counter() - started
    quotas = {q.quota: q for q in report.quotas} if isinstance(report.quotas, list) else {}
    used = {team: quotas[f"quota {team}"].resource_seconds.get(GPU, 0.0) / 3600 for team, _ in TEAMS}
    total = sum(used.values()) or 1.0
    print(f"part 1: 1,000 nodes (8,000 GPUs), 4 teams, {gangs} gangs over {hours:g} h of simulated time; "
          f"{len(report.bindings)} bindings; simulated in {wall:.1f} s wall")
    for team, share in TEAMS:
        q = quotas[f"quota {team}"]
        print(f"  {team}: min {share:4.0%} of GPUs; used {used[team]:9.0f} GPU-h = {used[team] / total:5.1%} of the "
              f"GPU-hours used; longest wait {q.longest_wait:7.0f} s; reclaimed for it {q.reclaims}, "
              f"its pods reclaimed {q.reclaimed}")
    arrival = {f"{o.obj.metadata.namespace}/{o.obj.metadata.name}": o.at for o in scenario.objects
               if o.info.name == "PodGroup"}
    first_bound: dict[str, float] = {}
    for binding in report.bindings:
        gang = binding.pod.rsplit("-", 1)[0]
        first_bound.setdefault(gang, binding.at)
    waits = sorted(first_bound[e.gang] - arrival[e.gang] for e in reclaims if e.gang in first_bound)
    if waits:
        print(f"  reclaims: {len(reclaims)}; arrival -> running of the reclaiming gang: p50 "
              f"{statistics.median(waits):.0f} s, max {waits[-1]:.0f} s (simulated; victims' grace period 30 s)")
    else:
        print(f"  reclaims: {len(reclaims)}")


# --------------------------------------------------------------------------- part 2

CASES: list[tuple[str, int, list[dict[str, object]] | None]] = [
    ("d-gang4-mustgather-block", 4, MUST_BLOCK),
    ("d-gang64", 64, None),
    ("d-gang256", 256, None),
]


def full_cluster(seed: int = 11) -> ClusterState:
    rng = random.Random(seed)
    state = ClusterState()
    names = add_fabric(state)
    total = len(names) * 8
    for team, share in TEAMS:
        state.apply(ElasticQuotaUpserted(quota=elastic_quota(team, namespace=team, minimum=gpus(int(total * share)),
                                                             maximum=gpus(total))))
    cursor = 0
    number = 0
    while cursor < len(names):
        team = ("team-a", "team-b", "team-c")[number % 3]
        size = min(3 if number % 2 else 2, len(names) - cursor)
        gang = f"run-{number}"
        state.apply(PodGroupUpserted(pod_group=pod_group(gang, namespace=team, min_member=size)))
        started = float(rng.randrange(0, 10_000))
        priority = rng.choice((10, 20, 30))
        for i in range(size):
            state.apply(PodUpserted(pod=bound(pod(f"{gang}-{i}", namespace=team, gang=gang, priority=priority),
                                              names[cursor]), time=started))
            cursor += 1
        number += 1
    for gang, size, gather in CASES:
        state.apply(PodGroupUpserted(pod_group=pod_group(gang, namespace="team-d", min_member=size, gather=gather)))
        for i in range(size):
            state.apply(PodUpserted(pod=pod(f"{gang}-{i}", namespace="team-d", gang=gang, priority=0),
                                    time=20_000.0))
    return state


def planning_cost(runs: int) -> None:
    started = time.perf_counter()
    state = full_cluster()
    print(f"part 2: {len(state.nodes)} nodes full of {len(state.gangs) - len(CASES)} borrowing gangs of teams a-c, "
          f"built in {time.perf_counter() - started:.1f} s")
    hook = JobPreemptor()
    for gang, size, _ in CASES:
        key = f"team-d/{gang}"
        failure = plan_gang(state, key)
        if not isinstance(failure, Unschedulable):
            raise SystemExit(f"{gang}: expected placement to fail on a full cluster")
        preemptee = Preemptee(key=key, gangs=(key,), pods=tuple(sorted(state.gangs[key].members)), priority=0,
                              now=state.last_time)
        times: list[float] = []
        cpu: list[float] = []
        plan = None
        for _ in range(runs):
            t0, c0 = time.perf_counter(), time.process_time()
            plan = hook.plan(state, preemptee, failure)
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        times.sort()
        p50 = statistics.median(times) * 1000
        p90 = times[min(len(times) - 1, round(0.9 * (len(times) - 1)))] * 1000
        if isinstance(plan, PreemptionPlan) and plan.victims:
            outcome = (f"reclaims {len(plan.victim_jobs)} job(s) / {len(plan.victims)} pod(s) from "
                       f"{', '.join(plan.reclaim_from)}; lands in {plan.level} {plan.domain or '-'}")
        else:
            outcome = f"no reclaim: {plan.explanation if plan is not None else '-'}"
        print(f"  {gang:<26} pods={size:<4} p50={p50:8.1f} ms  p90={p90:8.1f} ms  "
              f"cpu p50={statistics.median(cpu) * 1000:6.1f} ms  ({outcome})")
        targets.line(f"reclaim plan, {size}-pod gang on a full {len(state.nodes):,}-node cluster", f"{p50:.0f} ms p50",
                     "< 300 ms", p50 < 300)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.quota")
    parser.add_argument("--hours", type=float, default=6.0, help="simulated hours of part 1")
    parser.add_argument("--runs", type=int, default=9, help="timed runs per case of part 2")
    args = parser.parse_args()
    fairness(args.hours)
    planning_cost(args.runs)


if __name__ == "__main__":
    main()
