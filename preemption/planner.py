"""`plan_preemption`: the cheapest set of whole lower-priority jobs whose eviction lets a job fit.

How a plan is found (state and the placement failure in, a plan out):
1. Eligibility (`preemption/eligibility.py`): preemptionPolicy Never, or victims of an earlier
   preemption still terminating on the job's nominated nodes, mean no preemption. A failure that
   is not about room (missing members, an invalid spec, pods no node can ever take) neither.
2. Candidates (`preemption/victims.py`): units of lower-priority pods, job-aware.
3. Candidate domains: the levels the job may span (MustGather / hard tier: that level and below;
   otherwise every level, bottom-up), only domains that hold the job's running members, and only
   those whose upper bound of room once every candidate there is gone (`preemption/room.py`, summed
   up the tree) covers the job: pruned by aggregates before any victim is looked at.
4. Per domain, a greedy by cost picks victims until the pods fit by count, then drops the unneeded
   (`preemption/selection.py`). Where required pod anti-affinity keeps the job off nodes of the
   domain (`preemption/terms.py`), the units lifting it go first and the greedy completes the room;
   the set made for room alone is weighed too, and not grown (the plan may keep off those nodes).
   Candidate sets are ranked by the cost order (`preemption/cost.py`);
   identical sets found at several levels are weighed once, at the tightest.
5. Validation: the cheapest sets are checked with placement itself (`plan_gang(..., ignore_pods=
   victims)`), which applies gather strategies, tier limits and podCountMultiple exactly; a set
   placement rejects is grown by the shortfall and tried again (a bounded number of times). Victims
   on none of the plan's nodes are dropped when placement agrees. Placement runs at most
   `MAX_VALIDATIONS` times per call.
6. The plan names the victims, the victim jobs, the nominated node of each preemptor pod (from the
   validating placement plan), the lower-priority nominations to clear there, and the explanation.

A `VictimRule` (`preemption/victims.py`) says who may be a victim: by default every running pod of
lower priority; `preemption/reclaim.py` builds the rule for priority preemption inside one quota and
the one for a quota reclaim (pods of quotas borrowing beyond their min, taken back within a
borrowing budget that the rule's gate keeps during selection). Everything else is the same steps.

Pure: no I/O, no clock, no globals; reads `ClusterState`, never mutates it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet

from placement.constraints import InvalidConstraint, planning_tree, resolve
from placement.fit import Shape, shape_in
from placement.gang import plan_gang
from placement.lone import plan_pod
from placement.members import domain_label, is_running, where
from placement.plan import INVALID, MEMBERS, POD_FIT, QUOTA, VOLUME, GangPlan, Unschedulable
from preemption.budgets import budget_violations
from preemption.cost import Cost, cost_of
from preemption.eligibility import Preemptor, check_eligibility, minimum_pending, preemptor_of
from preemption.explain import Considered, explain
from preemption.plan import (
    NO_CANDIDATES,
    NO_LOWER_PRIORITY,
    NOT_PREEMPTABLE,
    SURPLUS,
    NoPreemption,
    PreemptionPlan,
    VictimJob,
)
from preemption.room import Room
from preemption.selection import Selection, select
from preemption.terms import Lifts, blockers
from preemption.victim_index import victim_index
from preemption.victims import Candidates, VictimRule, VictimUnit
from state.cluster import ClusterState
from state.topology import Domain, TopologyError, TopologyTree

Validate = Callable[[AbstractSet[str]], GangPlan | Unschedulable]

MAX_VALIDATIONS = 8
MAX_GROWTH = 2


class _Need:
    """The pods to make room for, grouped by shape: all pending pods, or the minMember subset."""

    __slots__ = ("counts", "pods", "shapes")

    def __init__(self, shapes: list[Shape], counts: list[int], pods: int) -> None:
        self.shapes = shapes
        self.counts = counts
        self.pods = pods


def plan_preemption(state: ClusterState, preemptor_key: str, failure: Unschedulable, *,
                    validate: Validate | None = None,
                    rule: Callable[[Preemptor], VictimRule] | None = None) -> PreemptionPlan | NoPreemption:
    """Plan job-level preemption for the gang (or lone pod) `preemptor_key` that placement could
    not place (`failure`). `validate` defaults to placement's own `plan_gang` for that gang; `rule`
    builds the victim rule for the preemptor (default: every running pod of lower priority)."""
    not_room = f"no preemption: evicting pods cannot help ({failure.constraint})"
    if failure.constraint in (INVALID, MEMBERS, POD_FIT, VOLUME):
        return NoPreemption(preemptor_key, NOT_PREEMPTABLE, not_room)
    preemptor = preemptor_of(state, preemptor_key)
    if isinstance(preemptor, NoPreemption):
        return preemptor
    victim_rule = rule(preemptor) if rule is not None else VictimRule.lower_priority(preemptor.priority)
    if failure.constraint == QUOTA and victim_rule.forced is None:
        return NoPreemption(preemptor_key, NOT_PREEMPTABLE, not_room)  # only a reclaim freeing quota helps
    refusal = check_eligibility(state, preemptor)
    if refusal is not None:
        return refusal
    if validate is None:
        lone = not preemptor.gangs

        def validate_job(ignore: AbstractSet[str]) -> GangPlan | Unschedulable:
            if lone:
                return plan_pod(state, preemptor_key, ignore_pods=ignore)
            return plan_gang(state, preemptor_key, ignore_pods=ignore)

        validate = validate_job
    return _Planner(state, preemptor, failure, validate, victim_rule).run()


class _Planner:
    def __init__(self, state: ClusterState, preemptor: Preemptor, failure: Unschedulable,
                 validate: Validate, rule: VictimRule) -> None:
        self.state = state
        specs = [info.spec for g in preemptor.gangs if (info := state.gangs.get(g)) is not None
                 and info.spec is not None]
        # The tree placement plans the job on (a Kubernetes topology key's label tree, or the cluster's).
        self.tree: TopologyTree = planning_tree(state, specs)
        self.preemptor = preemptor
        self.failure = failure
        self.validate = validate
        self.rule = rule
        self.validations = 0
        self.considered: list[Considered] = []
        self._by_domain: dict[int, list[VictimUnit]] | None = None  # domain id -> `_units_in`, when asked
        self._over_budget: dict[int, bool] = {}  # unit index -> `_violating`, when asked
        self._lifts: Lifts | None = None  # when required anti-affinity keeps the job out somewhere
        self._spared: dict[str, float] = {}  # job -> until when the rule keeps it (`VictimRule.spared`)

    def _violating(self, unit: VictimUnit) -> bool:
        """Whether evicting the unit alone goes beyond one of its PodDisruptionBudgets."""
        found = self._over_budget.get(unit.index)
        if found is None:
            found = self._over_budget[unit.index] = budget_violations(self.state, unit.pods) > 0
        return found

    # ------------------------------------------------------------------ the steps

    def run(self) -> PreemptionPlan | NoPreemption:
        result = self._run()
        if not self._spared or not isinstance(result, NoPreemption):
            return result
        # Jobs kept for now (a KAI queue's min runtime) may be taken later: say so, and when to try again.
        rule, earliest = self.rule, min(self._spared.values())
        kept = (f"{len(self._spared)} job(s) kept as {rule.spared_word} has not passed since they started "
                f"(the first may go in {max(earliest - rule.now, 0.0):.0f}s)")
        reason = result.reason if result.kind not in (NO_LOWER_PRIORITY, NOT_PREEMPTABLE) else f"no {rule.action}"
        return NoPreemption(result.preemptor, NO_CANDIDATES, f"{reason}; {kept}", retry_at=earliest)

    def _spare(self, candidates: Candidates) -> None:
        """Take the units the rule keeps for now out of the candidates (`VictimRule.spared`)."""
        spared = self.rule.spared
        if spared is None or not candidates.units:
            return
        kept: list[VictimUnit] = []
        for unit in candidates.units:
            until = spared(unit)
            if until is None:
                kept.append(unit)
            else:
                self._spared[unit.job] = min(until, self._spared.get(unit.job, until))
        if self._spared:
            candidates.units = kept
            candidates.index()

    def _run(self) -> PreemptionPlan | NoPreemption:
        p = self.preemptor
        own_gangs = frozenset(p.gangs)
        own_pods = frozenset(m for g in p.gangs if (info := self.state.gangs.get(g)) is not None
                             for m in info.members) | {p.key}
        rule = self.rule
        candidates = victim_index(self.state).candidates(p.priority, own_gangs, own_pods, rule.eligible, rule.below)
        self._spare(candidates)
        if not candidates.units and not candidates.leaving:
            if candidates.protected and rule.action == "preemption":
                return NoPreemption(p.key, NO_CANDIDATES,
                                    f"no preemption: the {len(candidates.protected)} running pod(s) of priority below "
                                    f"{p.priority} may not be evicted (marked volcano.sh/preemptable: false, "
                                    "or non-preemptible KAI jobs)")
            return NoPreemption(p.key, NO_LOWER_PRIORITY, f"no {rule.action}: no running {rule.pods}")
        forced: list[VictimUnit] = []
        if rule.forced is not None:
            picked = rule.forced(candidates.units)
            if isinstance(picked, str):
                return NoPreemption(p.key, NO_CANDIDATES, f"no {rule.action}: {picked}")
            forced = picked
            candidates.set_aside(forced)
        blocked = blockers(self.state, p.pending)
        if blocked:
            self._lifts = Lifts(self.state, self.tree, blocked, candidates)
        top_level, anchor = self._limits()
        if isinstance(top_level, NoPreemption):
            return top_level
        everything, minimum = self._needs()
        shapes = everything.shapes
        domains = self._domains(top_level, anchor)
        levels = self._levels_text(top_level)
        if not domains:  # running members span more than the job may: no domain can hold it
            return self._nowhere(minimum if minimum is not None else everything, levels)
        # the room model over the nodes the job may go on: below its anchor when it has one, else everywhere
        room = Room(self.state, shapes, own_gangs, candidates, self.tree, domains[-1] if anchor is not None else None)
        need = everything
        viable = [d for d in domains if self._could_fit(room, d, need.counts)]
        if not viable and minimum is not None:
            need = minimum
            viable = [d for d in domains if self._could_fit(room, d, need.counts)]
        if not viable:
            return self._nowhere(need, levels)
        # Domains grouped by the lowest priority tier that could make room there: a group is only
        # looked at while it could still beat the best plan on the highest victim priority.
        groups: dict[int, list[Domain]] = {}
        for domain in viable:
            tier = room.lowest_tier(domain.id, need.counts)
            if tier is not None:
                groups.setdefault(tier, []).append(domain)
        best: tuple[list[VictimUnit], GangPlan, Considered] | None = None
        weighed = 0
        for tier in sorted(groups):
            if best is not None and tier > 0 and best[2].cost.top_priority <= room.tiers[tier - 1]:
                break
            ranked = self._rank(room, candidates, groups[tier], need)
            weighed += len(ranked)
            best = self._choose(room, candidates, ranked, need, best)
        if best is None:
            return NoPreemption(p.key, NO_CANDIDATES,
                                f"no {rule.action}: no set of {rule.jobs} lets it fit within its constraints "
                                f"({weighed} candidate set(s) in {len(viable)} domain(s) tried)")
        units, plan, chosen = best
        if forced:  # the plan's cost counts the victims chosen for quota too
            units = forced + units
            cost = cost_of(self.state, units, self._level_of(plan), plan.domain)
        else:
            cost = chosen.cost
        for index, item in enumerate(self.considered):
            if item is chosen:
                chosen = self.considered[index] = Considered(item.where, cost, "chosen")
        jobs = _victim_jobs(units)
        victims = tuple(sorted({pod.key for unit in units for pod in unit.pods}))
        nodes = {a.node for a in plan.assignments}
        # Lower-priority nominations on those nodes no longer hold (kube-scheduler clears them too), in
        # the order the loop records them: by node, then pod. Strictly below every preemptor pod
        # (p.priority is the lowest), as victims are: a nomination that outranks one of them is kept.
        clear = [key for name in sorted(nodes) if (node := self.state.nodes.get(name)) is not None
                 for key in sorted(node.nominated) if (pod := node.nominated[key]).priority < p.priority
                 and pod.gang not in own_gangs and key not in own_pods]
        explanation = explain(
            p.key, p.priority, len(p.pending), self.failure,
            unit_count=len(candidates.units), job_count=len({u.job for u in candidates.units}),
            levels=levels, domains_seen=len(domains), domains_viable=len(viable),
            considered=self.considered, chosen=chosen, jobs=jobs,
            where=where(self._domain_named(plan)), placement_line=plan.explanation, rule=rule,
            victim_keys=victims)
        return PreemptionPlan(
            preemptor=p.key, gangs=p.gangs, priority=p.priority, victims=victims,
            victim_jobs=tuple(job.key for job in jobs), jobs=tuple(jobs),
            nominations=plan.assignments, clear_nominations=tuple(clear), domain=plan.domain,
            level=plan.level, explanation=explanation, reclaim_from=rule.sources(victims))

    def _nowhere(self, need: _Need, levels: str) -> NoPreemption:
        rule = self.rule
        return NoPreemption(self.preemptor.key, NO_CANDIDATES,
                            f"no {rule.action}: even with every {rule.pods} gone, no domain "
                            f"at {levels} could hold its {need.pods} pod(s)")

    def _limits(self) -> tuple[int | NoPreemption, Domain | None]:
        """The highest level the job may span, and the domain its running members already anchor."""
        p = self.preemptor
        specs = [info.spec for g in p.gangs if (info := self.state.gangs.get(g)) is not None
                 and info.spec is not None]
        top_level = 0
        if specs:
            resolved = resolve(self.tree, specs)
            if isinstance(resolved, InvalidConstraint):
                return NoPreemption(p.key, NOT_PREEMPTABLE, f"no preemption: {resolved.message}"), None
            top_level = resolved.top_level
        running = [pod.placed_node for g in p.gangs if (info := self.state.gangs.get(g)) is not None
                   for m in sorted(info.members) if (pod := self.state.pods.get(m)) is not None and is_running(pod)]
        known = [node for node in running if self.tree.domain_of(node) is not None]
        return top_level, (self.tree.lca(known) if known else None)

    def _needs(self) -> tuple[_Need, _Need | None]:
        p = self.preemptor
        pods = [self.state.pods[key] for key in p.pending]
        shapes: dict[bytes, Shape] = {}
        for pod in pods:
            shape = shape_in(self.state, pod)
            shapes.setdefault(shape.key, shape)
        order = sorted(shapes)
        shape_list = [shapes[k] for k in order]
        index = {k: i for i, k in enumerate(order)}

        def counts_of(keys: Sequence[str]) -> list[int]:
            counts = [0] * len(order)
            for key in keys:
                counts[index[shape_in(self.state, self.state.pods[key]).key]] += 1
            return counts

        everything = _Need(shape_list, counts_of(p.pending), len(p.pending))
        minimum_keys = minimum_pending(self.state, p)
        if not minimum_keys or len(minimum_keys) >= len(p.pending):
            return everything, None
        return everything, _Need(shape_list, counts_of(minimum_keys), len(minimum_keys))

    def _domains(self, top_level: int, anchor: Domain | None) -> list[Domain]:
        """Candidate domains, deepest level first (then by name)."""
        deepest = len(self.tree.levels) - 1
        if anchor is not None:
            return [d for d in reversed(anchor.path) if d.level >= top_level]
        out: list[Domain] = []
        for level in range(deepest, top_level - 1, -1):
            out.extend(self.tree.domains_at(level))
        return out

    @staticmethod
    def _could_fit(room: Room, domain: Domain, counts: Sequence[int]) -> bool:
        bound = room.domain_max.get(domain.id)
        return bound is not None and all(b >= c for b, c in zip(bound, counts, strict=True))

    def _rank(self, room: Room, candidates: Candidates, viable: Sequence[Domain],
              need: _Need) -> list[tuple[Cost, Selection]]:
        ranked: dict[tuple[str, ...], tuple[Cost, Selection]] = {}
        violating = self._violating if self.state.budgets else None
        lifts = self._lifts
        for domain in viable:
            units = self._units_in(candidates, domain)
            lift = lifts.of(domain) if lifts is not None else None
            found: list[Selection] = []
            if lift is None or (not lift[0] and not lift[1]):  # nothing blocks, or only pods already leaving
                selection = select(room, domain, units, need.counts, self.rule.gate, violating)
                if selection is not None:
                    found.append(selection)
            elif not lift[1]:  # (every node here shut by pods that may not be evicted: no set helps)
                # Some node here is kept out by anti-affinity that evictions lift. The set made for room
                # alone is weighed too (the plan may keep off those nodes), but not grown if placement
                # rejects it: the set lifting the terms grows instead.
                plain = select(room, domain, units, need.counts, self.rule.gate, violating)
                if plain is not None:
                    plain.grows = False
                    found.append(plain)
                if lift[0]:
                    lifted = select(room, domain, units, need.counts, self.rule.gate, violating, lift[0])
                    if lifted is not None:
                        found.append(lifted)
            for selection in found:
                cost = cost_of(self.state, selection.units, domain.level, domain_label(domain))
                known = ranked.get(cost.victims)
                if known is None or cost < known[0]:
                    ranked[cost.victims] = (cost, selection)
        return sorted(ranked.values(), key=lambda item: item[0])

    def _units_in(self, candidates: Candidates, domain: Domain) -> list[VictimUnit]:
        """The candidate units with a pod on a node of `domain`, in unit order."""
        if domain.parent is None:
            return candidates.units
        by_domain = self._by_domain
        if by_domain is None:
            # each unit listed under every domain above its nodes (which the unit keeps between calls),
            # not a walk over every node of each domain asked
            by_domain = self._by_domain = {}
            tree = self.tree
            for unit in candidates.units:
                for ident in unit.domains_above(tree):
                    found = by_domain.get(ident)
                    if found is None:
                        by_domain[ident] = [unit]
                    else:
                        found.append(unit)
        return list(by_domain.get(domain.id, ()))

    def _choose(self, room: Room, candidates: Candidates, ranked: Sequence[tuple[Cost, Selection]],
                need: _Need, best: tuple[list[VictimUnit], GangPlan, Considered] | None
                ) -> tuple[list[VictimUnit], GangPlan, Considered] | None:
        leaving = frozenset(candidates.leaving)
        for position, (estimate, selection) in enumerate(ranked):
            if best is not None:
                chosen = best[2].cost
                head = (estimate.top_priority, estimate.budget_violations, estimate.jobs, estimate.pods)
                best_head = (chosen.top_priority, chosen.budget_violations, chosen.jobs, chosen.pods)
                if head > best_head or (head == best_head and estimate.span >= chosen.span):
                    # ranked by cost: neither this set nor any after it can beat the chosen one
                    rest = len(ranked) - position - 1
                    more = f" (nor {rest} costlier set(s) after it)" if rest else ""
                    self.considered.append(Considered(_where(selection.domain), estimate,
                                                      f"not validated: cannot beat the chosen set{more}"))
                    break
            if self.validations >= MAX_VALIDATIONS:
                self.considered.append(Considered(_where(selection.domain), estimate,
                                                  "not validated: validation budget spent"))
                continue
            found = self._validate(room, candidates, selection, need, leaving)
            if found is None:
                continue
            if best is None or found[2].cost < best[2].cost:
                best = found
        return best

    def _validate(self, room: Room, candidates: Candidates, selection: Selection, need: _Need,
                  leaving: frozenset[str]) -> tuple[list[VictimUnit], GangPlan, Considered] | None:
        domain = selection.domain
        units = selection.units
        counts = list(need.counts)
        for attempt in range(MAX_GROWTH + 1):
            if self.validations >= MAX_VALIDATIONS:
                return None
            victims = frozenset(pod.key for unit in units for pod in unit.pods)
            # no victims: only pods already leaving can make the room (a re-nomination after giving up)
            result = self.validate(victims | leaving) if units or leaving else self.failure
            if units or leaving:
                self.validations += 1
            if isinstance(result, GangPlan):
                return self._settle(units, result, leaving)
            self.considered.append(Considered(_where(domain),
                                              cost_of(self.state, units, domain.level, domain_label(domain)),
                                              f"placement rejected it: {result.reason}"))
            if attempt == MAX_GROWTH or not selection.grows:
                break
            shortfall = max(1, result.needed - result.fit) if result.needed else 1
            widest = max(range(len(counts)), key=lambda i: counts[i])
            counts[widest] += shortfall
            grown = select(room, domain, self._units_in(candidates, domain), counts, self.rule.gate,
                           self._violating if self.state.budgets else None, selection.lifted)
            if grown is None or {u.index for u in grown.units} == {u.index for u in units}:
                break
            units = grown.units
        return None

    def _settle(self, units: list[VictimUnit], plan: GangPlan,
                leaving: frozenset[str]) -> tuple[list[VictimUnit], GangPlan, Considered]:
        """Drop victims on none of the plan's nodes when placement still agrees; record the result."""
        nodes = {a.node for a in plan.assignments}
        lifts = self._lifts
        # a unit blocking a plan node through anti-affinity is needed wherever in the term's domain it runs
        needed = [u for u in units if any(pod.counted_on in nodes for pod in u.pods)
                  or (lifts is not None and lifts.needed_on(u, nodes))]
        if needed and len(needed) < len(units) and self.validations < MAX_VALIDATIONS:
            self.validations += 1
            again = self.validate(frozenset(pod.key for u in needed for pod in u.pods) | leaving)
            if isinstance(again, GangPlan):
                units, plan = needed, again
        level = self._level_of(plan)
        cost = cost_of(self.state, units, level, plan.domain)
        item = Considered(where(self._domain_named(plan)), cost, f"valid: {plan.explanation}")
        self.considered.append(item)
        return units, plan, item

    # ------------------------------------------------------------------ small lookups

    def _level_of(self, plan: GangPlan) -> int:
        if not plan.domain:
            return 0
        try:
            return self.tree.resolve_level(plan.level)
        except TopologyError:
            return 0

    def _domain_named(self, plan: GangPlan) -> Domain:
        if plan.domain:
            found = self.tree.domain(self._level_of(plan), plan.domain)
            if found is not None:
                return found
        return self.tree.root

    def _levels_text(self, top_level: int) -> str:
        levels = self.tree.levels
        deepest = len(levels) - 1
        if top_level >= deepest:
            return f"level {levels[deepest].layer}"
        return f"levels {levels[deepest].layer} up to {levels[top_level].layer}"


def _where(domain: Domain) -> str:
    return where(domain)


def _victim_jobs(units: Sequence[VictimUnit]) -> list[VictimJob]:
    whole = {u.job for u in units if u.broken}
    surplus: dict[str, list[VictimUnit]] = {}
    jobs: list[VictimJob] = []
    for unit in units:
        if unit.kind == SURPLUS:
            if unit.job not in whole:
                surplus.setdefault(unit.job, []).append(unit)
            continue
        jobs.append(VictimJob(key=unit.job, kind=unit.kind, pods=tuple(sorted(p.key for p in unit.pods)),
                              priority=unit.priority, broken=True, started_at=unit.started_at))
    for job, parts in surplus.items():
        pods = sorted(p.key for u in parts for p in u.pods)
        jobs.append(VictimJob(key=job, kind=SURPLUS, pods=tuple(pods), priority=max(u.priority for u in parts),
                              broken=False, started_at=max(u.started_at for u in parts)))
    jobs.sort(key=lambda j: (not j.broken, j.key))
    return jobs
