"""Priority preemption inside one quota when the quota, not room, keeps a job out
(preemption/reclaim.py `priority_rule(quota_blocks=...)` through JobPreemptor): the cheapest
lower-priority jobs of the job's own quota that free enough of it, whole gangs, in the cost order;
never another quota's pods, never pods of equal or higher priority, no more than the quota needs."""

from __future__ import annotations

from events.builders import elastic_quota, gpus
from events.model import ElasticQuotaUpserted, Event
from placement.quota import admit
from tests.unit.preemption.test_reclaim import ask, cluster, pending_gang, running_gang


def team(name: str, *, minimum: int, maximum: int, parent: str | None = None, is_parent: bool = False) -> Event:
    return ElasticQuotaUpserted(quota=elastic_quota(name, namespace=name, minimum=gpus(minimum),
                                                    maximum=gpus(maximum), parent=parent, is_parent=is_parent))


def test_a_job_at_its_quotas_max_preempts_the_cheapest_lower_priority_gang_of_its_quota() -> None:
    # team-a is at its max (16) with half the cluster idle; team-b's gang is the most recently started
    # of all, but in another quota: evicting it makes room, not quota.
    state = cluster(team("team-a", minimum=16, maximum=16), team("team-b", minimum=16, maximum=16),
                    *running_gang("old", ["n0"], namespace="team-a", priority=100, started=0.0),
                    *running_gang("new", ["n1"], namespace="team-a", priority=100, started=10.0),
                    *running_gang("other", ["n2"], namespace="team-b", priority=0, started=20.0),
                    *pending_gang("urgent", 1, namespace="team-a", priority=1000), nodes=6)
    plan = ask(state, "team-a/urgent")
    assert plan is not None and plan.victims == ("team-a/new-0",)  # same priority: most recently started
    assert plan.victim_jobs == ("team-a/new",) and plan.reclaim_from == ()
    assert "its quota keeps it out (quota team-a: nvidia.com/gpu 16 used + 8 asked > max 16)" in plan.explanation
    assert not admit(state, ["team-a/urgent-0"], ignore_pods=set(plan.victims))
    assert {a.pod for a in plan.nominations} == {"team-a/urgent-0"}


def test_lower_priority_goes_first_and_only_as_many_gangs_as_the_quota_needs() -> None:
    state = cluster(team("team-a", minimum=32, maximum=32),
                    *running_gang("p50", ["n0"], namespace="team-a", priority=50, started=30.0),
                    *running_gang("p10", ["n1"], namespace="team-a", priority=10, started=0.0),
                    *running_gang("p20", ["n2"], namespace="team-a", priority=20, started=0.0),
                    *running_gang("peer", ["n3"], namespace="team-a", priority=1000, started=40.0),
                    *pending_gang("urgent", 2, namespace="team-a", priority=1000), nodes=8)
    plan = ask(state, "team-a/urgent")
    assert plan is not None and plan.victims == ("team-a/p10-0", "team-a/p20-0")  # 16 GPUs: two, lowest first


def test_when_its_own_lower_priority_jobs_cannot_free_the_quota_nothing_is_evicted() -> None:
    # team-a's parent `dept` is full because team-b (a sibling) uses it; team-a's only lower-priority
    # job frees 8 of the 16 asked: priority preemption stays in team-a, so it says why and evicts nobody.
    state = cluster(team("dept", minimum=32, maximum=32, is_parent=True),
                    team("team-a", minimum=8, maximum=32, parent="dept"),
                    team("team-b", minimum=24, maximum=32, parent="dept"),
                    *running_gang("low", ["n0"], namespace="team-a", priority=0),
                    *running_gang("b", ["n1", "n2", "n3"], namespace="team-b", priority=0),
                    *pending_gang("urgent", 2, namespace="team-a", priority=1000), nodes=8)
    plan = ask(state, "team-a/urgent")
    assert plan is not None and not plan.victims
    assert "even with every lower-priority job of quota team-a gone, quota dept:" in plan.explanation


def test_pods_of_equal_or_higher_priority_in_the_quota_are_never_victims() -> None:
    state = cluster(team("team-a", minimum=16, maximum=16),
                    *running_gang("same", ["n0"], namespace="team-a", priority=1000),
                    *running_gang("higher", ["n1"], namespace="team-a", priority=2000),
                    *pending_gang("urgent", 1, namespace="team-a", priority=1000), nodes=6)
    assert ask(state, "team-a/urgent") is None  # nothing of lower priority: nothing to say either
