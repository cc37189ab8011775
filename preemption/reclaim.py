"""Quota-aware victim rules: priority preemption inside one quota, and quota reclaim across quotas.

With quotas (`state/quota.py`), whom a job may evict depends on its quota, as in capacity
scheduling (and Koordinator, whose priorities are compared only inside one quota group):

- Priority preemption stays inside the preemptor's quota: only pods of the same quota (or, for a
  job in no quota, pods in no quota) of lower priority are candidates. Without any quota object
  this is exactly priority preemption as it always was. When the job's quota (at its max, or at
  its runtime) and not room is what keeps it out, the cheapest lower-priority units of that quota
  whose eviction lets the quota admit the job are chosen first (the rule's `forced`, as a reclaim
  frees a parent's max), and the planner then adds what room still requires.
- Reclaim: a job whose quota stays within its guarded level (min; Volcano: deserved, else
  guarantee) with the job's pending pods added may take back what other quotas borrow. Victims:
  preemptible pods (Koordinator: not labelled `preemptible: "false"`; Volcano: marked
  `volcano.sh/preemptable: "true"`, in a `reclaimable` queue) of any priority, in quotas of the same
  tree that use more than their guarded level of a resource the job asks for. In a hierarchy the
  comparison is made where the two branches meet: below the lowest common ancestor, the
  preemptor's side must stay within its guarded level at every level (so a team under its own min
  inside a department that is over its min reclaims from its siblings, not from other
  departments), and every quota on the victim's side must be borrowing.
  A KAI queue is measured against its quota or, where higher, its fair share (the runtime, shared by
  queue priority, then overQuotaWeight: `placement.quota.reclaim_floor`), as KAI reclaims: a queue
  within its quota or fair share with the job takes back what queues over theirs use, down to it and
  no further.
  Whole gangs are taken (or surplus pods above minMember), never part of a job: the gang's last
  victim may take its quota below its guarded level, but no unit is taken from a quota that the
  units already chosen have brought down to it (the `BorrowGate`), so a quota at or under its min
  never loses a pod to reclaim, and the reclaimer gets no more than its own min back.
- A KAI queue's `preemptMinRuntime` / `reclaimMinRuntime` keep its jobs that started less than that
  long ago from being taken whole by priority preemption inside it / by a reclaim (`keep_min_runtimes`,
  KAI's minruntime plugin): the planner leaves them out and says until when (`retry_at`).
- A job that may reclaim tries reclaim first; when reclaim finds no plan it falls back to priority
  preemption inside its quota. Everything else (candidate domains, gather strategy and tier limits,
  the cost order, validation by placement, nominations, DisruptionTarget, Events) is the planner's
  (`preemption/planner.py`): reclaim is a victim rule, not a second planner.

Pure: no I/O, no clock; reads `ClusterState`, never mutates it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from placement.quota import admit, reclaim_floor, reclaim_headroom
from preemption.eligibility import Preemptor, has_running_member, minimum_pending
from preemption.plan import SURPLUS
from preemption.victims import VictimRule, VictimUnit
from state.cluster import ClusterState, PodInfo
from state.quota import (
    KAI_DIALECT,
    Quota,
    QuotaBook,
    counted_requests,
    preempt_min_runtime,
    reclaim_min_runtime,
)
from state.resources import Resources, format_quantity


def quota_of_job(state: ClusterState, pods: Sequence[str]) -> tuple[Quota | None, bool]:
    """The one quota every pending pod of a job belongs to (None: no quota), and whether they agree."""
    book = state.quotas
    found: set[str] = set()
    for key in pods:
        quota = book.quota_of(key)
        found.add(quota.id if quota is not None else "")
    if len(found) != 1:
        return None, False
    only = next(iter(found))
    return (book.quotas.get(only) if only else None), True


def priority_rule(state: ClusterState, preemptor: Preemptor, *, quota_blocks: str = "") -> VictimRule:
    """Priority preemption, limited to the preemptor's own quota once quotas exist. `quota_blocks`
    (the refusal, when the job's quota and not room is what keeps it out): the victims must first
    free enough of that quota, whatever room they make (see `_free_own_quota`)."""
    book = state.quotas
    priority = preemptor.priority
    if not book.active:
        return VictimRule.lower_priority(priority)
    quota, single = quota_of_job(state, preemptor.pending)
    if not single:
        return VictimRule.lower_priority(priority, where=" of the job's quotas",
                                         eligible=lambda pod: False)
    own = quota.id if quota is not None else ""

    def same_quota(pod: PodInfo) -> bool:
        other = book.quota_of(pod.key)
        return pod.priority < priority and (other.id if other is not None else "") == own

    where = f" in {quota.label}" if quota is not None else " in no quota"
    rule = VictimRule.lower_priority(priority, where=where, eligible=same_quota)
    if quota_blocks and quota is not None:
        rule.forced = lambda units: _free_own_quota(state, preemptor, quota, units)
        rule.note = (f"its quota keeps it out ({quota_blocks}): lower-priority jobs of {quota.label} are "
                     "evicted first to free that quota, then as room requires")
    return rule


def _free_own_quota(state: ClusterState, preemptor: Preemptor, quota: Quota,
                    units: list[VictimUnit]) -> list[VictimUnit] | str:
    """The cheapest units (in the cost order of `VictimUnit.sort_key`) of the job's own quota whose
    eviction lets its quotas admit the pods its minimum needs (placement's own admission,
    `placement.quota.admit`); then the ones not needed dropped, last taken first. Pods already on
    their way out count as gone."""
    need = minimum_pending(state, preemptor) or list(preemptor.pending[:1])
    starting = not has_running_member(state, preemptor)
    leaving = frozenset(key for key in state.quotas.shares if (pod := state.pods.get(key)) is not None
                        and (pod.terminating or pod.eviction_requested))
    ordered = sorted(units, key=VictimUnit.sort_key)

    def refusal(taken: Sequence[VictimUnit]) -> str:
        gone = leaving | {pod.key for unit in taken for pod in unit.pods}
        return admit(state, need, ignore_pods=gone, starting=starting)

    why = refusal(ordered)
    if why:
        return f"even with every lower-priority job of {quota.label} gone, {why}"
    low, high = 0, len(ordered)  # admission only gets easier as usage goes: the shortest prefix that admits
    while low < high:
        middle = (low + high) // 2
        if refusal(ordered[:middle]):
            low = middle + 1
        else:
            high = middle
    chosen = ordered[:low]
    for unit in reversed(list(chosen)):
        rest = [u for u in chosen if u is not unit]
        if not refusal(rest):
            chosen = rest
    return chosen


def keep_min_runtimes(state: ClusterState, rule: VictimRule, preemptor: Preemptor, now: float, *,
                      reclaim: bool) -> VictimRule:
    """`rule`, keeping out (`VictimRule.spared`) the jobs of KAI queues that started less than their queue's
    `preemptMinRuntime` (`reclaimMinRuntime`, for a reclaim) before `now`, as KAI's minruntime plugin does:
    such a job is not taken whole, while its pods above minMember may still go. A job's start is when its
    last pod was seen bound (`VictimUnit.started_at`; a job already running when toposched first listed the
    cluster counts from then). The min runtime is resolved up the victim's queue tree (`state.quota`); a
    preemptor in no KAI queue resolves a victim's as a preemption inside its queue would."""
    book = state.quotas
    kai = book.by_name[KAI_DIALECT]
    if not any(q.preempt_min_runtime or q.reclaim_min_runtime for q in kai.values()):
        return rule  # no KAI queue says any: nothing is kept (the usual case, a scan of the queues)
    own, _ = quota_of_job(state, preemptor.pending)
    reclaimer = own if reclaim and own is not None and own.dialect == KAI_DIALECT else None

    def spared(unit: VictimUnit) -> float | None:
        if unit.kind == SURPLUS:
            return None
        quota = book.quota_of(unit.pods[0].key)
        if quota is None or quota.dialect != KAI_DIALECT:
            return None
        runtime = reclaim_min_runtime(reclaimer, quota) if reclaimer is not None else preempt_min_runtime(quota)
        if runtime <= 0.0:
            return None
        until = unit.started_at + runtime  # every candidate is bound: its pods' `bound_at` are all known
        return until if now < until else None

    rule.spared = spared
    rule.spared_word = f"their KAI queue's {'reclaimMinRuntime' if reclaimer is not None else 'preemptMinRuntime'}"
    rule.now = now
    return rule


def may_reclaim(state: ClusterState, pods: Sequence[str]) -> bool:
    """Could a job of these pending pods reclaim from other quotas now (its quota within min with them)?"""
    return _reclaimer(state, pods) is not None


def _reclaimer(state: ClusterState, pods: Sequence[str]
               ) -> tuple[Quota, Resources, dict[str, Resources], list[Quota]] | None:
    """The job's quota, what it asks (resources its quota counts), its own pods' current usage per
    quota, and the levels of its path within their guarded level with it added; None if it may not reclaim."""
    book = state.quotas
    if not book.active:
        return None
    quota, single = quota_of_job(state, pods)
    if quota is None or not single:
        return None
    asked: Resources = {}
    for key in pods:
        for resource, amount in counted_requests(quota.dialect, state.pods[key].requests).items():
            if amount > 0 and resource in quota.constrained:
                asked[resource] = asked.get(resource, 0) + amount
    if not asked:
        return None
    own, _ = book.usage_of(pods)
    headroom = reclaim_headroom(state, quota, asked, released=own)
    if not headroom:
        return None
    return quota, asked, own, headroom


def reclaim_rule(state: ClusterState, preemptor: Preemptor) -> VictimRule | None:
    """The reclaim rule for the job, or None when it may not reclaim (see the module docstring)."""
    found = _reclaimer(state, preemptor.pending)
    if found is None:
        return None
    book = state.quotas
    quota, asked, own, headroom = found
    allowed_sides = {level.id for level in headroom}
    path_ids = {level.id for level in quota.path()}
    asked_names = frozenset(asked)

    levels_of: dict[str, list[Quota] | None] = {}
    open_quotas: dict[str, bool] = {}  # quota id -> its pods may be victims at all
    floors: dict[str, Resources] = {}  # quota id -> `reclaim_floor`, while this rule is asked

    def floor_of(level: Quota) -> Resources:
        found = floors.get(level.id)
        if found is None:
            found = floors[level.id] = reclaim_floor(state, level)
        return found

    def victim_levels(victim: Quota) -> list[Quota] | None:
        """The victim's quotas below where its branch meets the preemptor's, if that is allowed."""
        if victim.id in levels_of:
            return levels_of[victim.id]
        found = _levels(victim)
        levels_of[victim.id] = found
        return found

    def _levels(victim: Quota) -> list[Quota] | None:
        levels: list[Quota] = []
        node: Quota | None = victim
        while node is not None and not node.is_root and node.id not in path_ids:
            levels.append(node)
            node = node.parent
        if not levels:
            return None  # the victim's quota is the preemptor's or one of its ancestors
        meet = node  # the lowest common ancestor (a tree root when the branches meet only there)
        side = next((level for level in quota.path() if level.parent is meet), None)
        if side is None or side.id not in allowed_sides:
            return None
        return levels

    def eligible(pod: PodInfo) -> bool:
        victim = book.quota_of(pod.key)
        if victim is None or victim.dialect != quota.dialect:
            return False
        allowed = open_quotas.get(victim.id)
        if allowed is None:
            levels = victim_levels(victim)
            allowed = levels is not None and all(level.reclaimable and _borrowing(level, floor_of(level),
                                                                                  asked_names, {})
                                                 for level in levels)
            open_quotas[victim.id] = allowed
        if not allowed or not book.preemptible(pod):
            return False
        share = book.shares.get(pod.key)
        return share is not None and share.used

    def source_of(key: str) -> str:
        victim = book.quota_of(key)
        return victim.label if victim is not None else ""

    shortfalls = _shortfalls(quota, asked, own, _leaving_usage(state)) if len(quota.path()) > 1 else []
    gate = BorrowGate(book, asked_names, victim_levels, floor_of)

    def forced(units: list[VictimUnit]) -> list[VictimUnit] | str:
        return _free_quota(book, shortfalls, units, gate)

    top = headroom[-1]
    used = top.used.get(_main(asked), 0) - own.get(top.id, {}).get(_main(asked), 0)
    resource = _main(asked)
    note = (f"reclaim: {top.label} {resource} {format_quantity(resource, used)} used + "
            f"{format_quantity(resource, asked[resource])} asked <= {_guarded_word(top, resource, floor_of(top))} "
            f"{format_quantity(resource, floor_of(top).get(resource, 0))}: it takes back what other quotas "
            f"borrow beyond theirs (preemptible pods only, any priority)")
    return VictimRule(eligible, pods=f"preemptible pod that a quota borrowing beyond its {_floor_word(quota)} "
                                     f"runs (for {quota.label})",
                      job="borrowing job", jobs="borrowing jobs", action="reclaim", verb="reclaims", note=note,
                      gate=gate, source_of=source_of, forced=forced if shortfalls else None)


def _leaving_usage(state: ClusterState) -> dict[str, Resources]:
    """Per quota (every level), the usage of pods already on their way out (victims of an earlier
    reclaim still terminating): it is freed without choosing them again."""
    leaving = [key for key in state.quotas.shares if (pod := state.pods.get(key)) is not None
               and (pod.terminating or pod.eviction_requested)]
    return state.quotas.usage_of(leaving)[0]


def _shortfalls(quota: Quota, asked: Resources, own: dict[str, Resources],
                leaving: dict[str, Resources]) -> list[tuple[Quota, Resources]]:
    """The ancestors whose max the job's pods would overrun, and by how much (a sibling borrows the
    parent's room): reclaim must free that much quota below them, whatever room there is on nodes.
    The job's own usage and pods already leaving count as gone."""
    out: list[tuple[Quota, Resources]] = []
    for level in quota.path()[1:]:
        gone = own.get(level.id, {})
        freed = leaving.get(level.id, {})
        short = {resource: over for resource, amount in asked.items() if resource in level.max
                 and (over := level.used.get(resource, 0) - gone.get(resource, 0) - freed.get(resource, 0)
                      + amount - level.max[resource]) > 0}
        if short:
            out.append((level, short))
    return out


def _free_quota(book: QuotaBook, shortfalls: list[tuple[Quota, Resources]], units: list[VictimUnit],
                gate: BorrowGate) -> list[VictimUnit] | str:
    """The cheapest borrowing units (in the cost order of `VictimUnit.sort_key`) whose eviction brings every
    overrun ancestor back within max for the job, keeping to what their quotas borrow; then the ones
    not needed dropped again, last taken first. The gate holds them for the rest of the plan."""
    gate.clear()
    left = {level.id: dict(short) for level, short in shortfalls}
    below = {level.id: level for level, _ in shortfalls}

    def frees(unit: VictimUnit) -> dict[str, Resources]:
        out: dict[str, Resources] = {}
        for pod in unit.pods:
            share = book.shares.get(pod.key)
            victim = book.quota_of(pod.key)
            if share is None or victim is None:
                continue
            for level in victim.path():
                if level.id in below:
                    bucket = out.setdefault(level.id, {})
                    for resource, amount in share.requests:
                        bucket[resource] = bucket.get(resource, 0) + amount
        return out

    def covered(taken: list[VictimUnit]) -> bool:
        freed: dict[str, Resources] = {}
        for unit in taken:
            for level_id, amounts in frees(unit).items():
                bucket = freed.setdefault(level_id, {})
                for resource, amount in amounts.items():
                    bucket[resource] = bucket.get(resource, 0) + amount
        return all(freed.get(level_id, {}).get(resource, 0) >= need
                   for level_id, short in left.items() for resource, need in short.items())

    chosen: list[VictimUnit] = []
    for unit in sorted(units, key=VictimUnit.sort_key):
        if covered(chosen):
            break
        if not frees(unit) or not gate.admits(unit):
            continue
        gate.take(unit)
        chosen.append(unit)
    if not covered(chosen):
        gate.clear()
        names = ", ".join(level.label for level, _ in shortfalls)
        return f"not enough borrowed capacity under {names} can be taken back to stay within its max"
    for unit in reversed(list(chosen)):
        rest = [u for u in chosen if u is not unit]
        if covered(rest):
            chosen = rest
    gate.clear()
    for unit in chosen:
        gate.take(unit)
    gate.hold()
    return chosen


class BorrowGate:
    """Keeps a reclaim's victim set within what the victims' quotas borrow: a unit is admitted only
    while every quota it draws from still uses more than its reclaim floor (`reclaim_floor`) of an asked
    resource, counting the units already taken. Any subset of an admitted set is admitted again."""

    __slots__ = ("asked", "book", "floor_of", "held", "levels_of", "taken")

    def __init__(self, book: QuotaBook, asked: frozenset[str],
                 levels_of: Callable[[Quota], list[Quota] | None],
                 floor_of: Callable[[Quota], Resources]) -> None:
        self.book = book
        self.asked = asked
        self.levels_of = levels_of
        self.floor_of = floor_of
        self.taken: dict[str, Resources] = {}
        self.held: dict[str, Resources] = {}  # units already decided (freeing quota): counted in every selection

    def clear(self) -> None:
        self.taken = {}
        self.held = {}

    def hold(self) -> None:
        """Keep what is taken now for the rest of the plan (selection takes and releases on top of it)."""
        self.held = {quota: dict(amounts) for quota, amounts in self.taken.items()}

    def _draws(self, unit: VictimUnit) -> list[tuple[Quota, Sequence[tuple[str, int]]]]:
        out: list[tuple[Quota, Sequence[tuple[str, int]]]] = []
        for pod in unit.pods:
            share = self.book.shares.get(pod.key)
            victim = self.book.quota_of(pod.key)
            if share is None or victim is None or not share.used:
                continue
            node: Quota | None = victim
            while node is not None and not node.is_root:
                out.append((node, share.requests))
                node = node.parent
        return out

    def admits(self, unit: VictimUnit) -> bool:
        for pod in unit.pods:
            victim = self.book.quota_of(pod.key)
            if victim is None:
                return False
            levels = self.levels_of(victim)
            if levels is None:
                return False
            for level in levels:
                if not _borrowing(level, self.floor_of(level), self.asked, self.taken.get(level.id, {})):
                    return False
        return True


    def take(self, unit: VictimUnit) -> None:
        for quota, requests in self._draws(unit):
            bucket = self.taken.setdefault(quota.id, {})
            for resource, amount in requests:
                bucket[resource] = bucket.get(resource, 0) + amount

    def release(self, unit: VictimUnit) -> None:
        for quota, requests in self._draws(unit):
            bucket = self.taken.setdefault(quota.id, {})
            for resource, amount in requests:
                bucket[resource] = bucket.get(resource, 0) - amount


def _borrowing(quota: Quota, floor: Resources, asked: frozenset[str], taken: Resources) -> bool:
    """Does `quota` (less what is already taken from it) use more than `floor` (its reclaim floor) of an
    asked resource?"""
    for resource in asked:
        if resource in quota.constrained and \
                quota.used.get(resource, 0) - taken.get(resource, 0) > floor.get(resource, 0):
            return True
    return False


def _main(asked: Resources) -> str:
    """The resource a reclaim is about, for its words: an extended resource (a GPU) if asked, else the largest."""
    extended = sorted(r for r in asked if "/" in r)
    if extended:
        return extended[0]
    return max(sorted(asked), key=lambda r: asked[r])


def _guarded_word(quota: Quota, resource: str, floor: Resources) -> str:
    """What the floor of `resource` is, in the quota's dialect: a KAI queue's fair share when that is
    above its quota."""
    if floor.get(resource, 0) > quota.guarded.get(resource, 0):
        return "fair share"
    return quota.guarded_word


def _floor_word(quota: Quota) -> str:
    return f"{quota.guarded_word} or fair share" if quota.dialect == KAI_DIALECT else quota.guarded_word
