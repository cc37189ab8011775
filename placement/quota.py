"""Quota admission: may these pods be placed, as far as their quotas (`state/quota.py`) go?

Checked before any node is looked at (kube-scheduler's PreFilter), all or nothing: a gang is placed
only if its whole minMember fits its quota, as it is placed only if it fits the cluster. For every
quota the pods belong to and each of its ancestors (their usage `used` counts bound, assumed and
nominated pods, minus the asking pods themselves and the pods the caller treats as gone):
- a Volcano queue that is Closed or Closing admits no new job (pods of a job already running in it
  may still be placed);
- used + asked <= max, per resource the quota's max names ("quota team-a: nvidia.com/gpu 40 used +
  16 asked > max 48"), at the quota and every ancestor;
- at the quota itself, used + asked <= runtime (Koordinator's runtime: min plus a weighted share of
  idle capacity; the same for Volcano queues, by weight): borrowing beyond min goes only as far as
  the runtime share. Not for KAI queues: KAI admits a preemptible job up to its queues' limits
  whatever their fair share (its capacity policy checks the limits and, for non-preemptible jobs, the
  quota; the fair share only orders the queues and decides reclaim), so a queue with no quota and no
  overQuotaWeight (KAI's documented burst queue) still runs on idle GPUs;
- Koordinator: pods labelled `quota.scheduling.koordinator.sh/preemptible: "false"` count against
  min only (non-preemptible used + asked <= min, at the quota itself); KAI likewise for the pods of a
  non-preemptible PodGroup (within quota);
- capacity scheduling ElasticQuotas: what one borrows beyond its min must fit in the unused part of
  the sum of all their mins (first come, first served); within its min a quota is always admitted.
A pod naming a missing quota or a parent quota is refused with its membership's reason.

`admitted_pending` applies this to a gang's pending pods with the subset rule of `plan_gang`: all of
them when they fit, else the pods minMember needs plus the longest prefix of the rest that fits; if
even those minMember needs do not fit, the gang is `Unschedulable` with constraint `quota`.

Pure: no I/O, no clock; reads `ClusterState`, never mutates it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet

from placement.plan import (
    QUOTA,
    QUOTA_CLOSED,
    QUOTA_MEMBERSHIP,
    QUOTA_NON_PREEMPTIBLE,
    QUOTA_OVER_MAX,
    QUOTA_OVER_POOL,
    QUOTA_OVER_RUNTIME,
    QuotaShortfall,
    Unschedulable,
)
from state.cluster import ClusterState
from state.quota import CAPACITY, KAI_DIALECT, KOORDINATOR, Quota, QuotaBook, counted_requests, shown_amount
from state.resources import Resources, format_quantity

# The dialects whose non-preemptible pods must stay within min, and how each says which pods those are.
_NON_PREEMPTIBLE_WITHIN_MIN = {KOORDINATOR: ' (pods labelled preemptible "false" stay within min)',
                               KAI_DIALECT: " (non-preemptible jobs stay within quota)"}


def admit(state: ClusterState, pods: Sequence[str], *, ignore_pods: AbstractSet[str] = frozenset(),
          starting: bool = True) -> str:
    """"" when `pods` (pending pods of one job) fit their quotas, else why not (naming quota and
    resource). `starting`: the job has no running member (a Closed queue refuses it)."""
    shortfall = admission(state, pods, ignore_pods=ignore_pods, starting=starting)
    return shortfall.message if shortfall is not None else ""


def admission(state: ClusterState, pods: Sequence[str], *, ignore_pods: AbstractSet[str] = frozenset(),
              starting: bool = True) -> QuotaShortfall | None:
    """As `admit`, the refusal in structure (None when the quotas admit the pods)."""
    book = state.quotas
    if not book.active:
        return None
    asked: dict[str, Resources] = {}
    asked_np: dict[str, Resources] = {}
    np_why: dict[str, str] = {}  # KAI: why the first non-preemptible pod of each quota is so
    for key in pods:
        pod = state.pods.get(key)
        if pod is None:
            continue
        member = book.members.get(key)
        if member is None:
            continue
        if member.refusal:
            return QuotaShortfall(QUOTA_MEMBERSHIP, member.refusal)
        quota = book.quotas.get(member.quota)
        if quota is None:
            continue
        counted = counted_requests(quota.dialect, pod.requests)
        _add(asked.setdefault(quota.id, {}), counted)
        if quota.dialect in _NON_PREEMPTIBLE_WITHIN_MIN and not book.preemptible(pod):
            _add(asked_np.setdefault(quota.id, {}), counted)
            if quota.dialect == KAI_DIALECT and quota.id not in np_why:
                np_why[quota.id] = state.kai_non_preemptible_why(pod)
    if not asked:
        return None
    minus, minus_np = book.usage_of([*pods, *ignore_pods])  # the asking pods' nominations, the pods gone
    for quota_id in sorted(asked):
        quota = book.quotas[quota_id]
        shortfall = _check(state, book, quota, asked[quota_id], asked_np.get(quota_id, {}), minus, minus_np,
                           starting, np_why.get(quota_id, ""))
        if shortfall is not None:
            return shortfall
    return None


def admitted_pending(state: ClusterState, group: tuple[str, ...], label: str, minimum: list[str],
                     extras: list[str], *, ignore_pods: AbstractSet[str], starting: bool
                     ) -> tuple[list[str], str] | Unschedulable:
    """Which of the pending pods beyond the gangs' `minimum` (the pods minMember needs, which must
    all be admitted) the quotas admit: the longest prefix of `extras`, and a note on the pods left
    waiting ("" when all are admitted). Unschedulable when not even the minimum fits."""
    why = admit(state, minimum + extras, ignore_pods=ignore_pods, starting=starting)
    if not why:
        return list(extras), ""
    # the smallest job worth placing: minMember's share, or one pod when running members meet minMember
    low = 0 if minimum else 1
    refusal = admission(state, minimum + extras[:low], ignore_pods=ignore_pods, starting=starting)
    if refusal is not None:
        return Unschedulable(gangs=group, constraint=QUOTA, needed=len(minimum) + low, fit=0,
                             reason=f"{label}: {refusal.message}", quota=refusal)
    high = len(extras) - 1  # all of them did not fit
    while low < high:
        middle = (low + high + 1) // 2
        if admit(state, minimum + extras[:middle], ignore_pods=ignore_pods, starting=starting):
            high = middle - 1
        else:
            low = middle
    return extras[:low], f"{len(extras) - low} pending pod(s) wait for quota ({why})"


def reclaim_floor(state: ClusterState, quota: Quota) -> Resources:
    """The level reclaim measures `quota` against, per resource: its guarded level (min; Volcano:
    deserved, else guarantee; KAI: quota); for a KAI queue its fair share where that is higher (the
    runtime, shared by overQuotaWeight), as KAI reclaims by both its GuaranteeDeservedQuota and its
    MaintainFairShare strategies: a queue under its quota or fair share takes back what queues over
    theirs use, never below it."""
    guarded = quota.guarded
    if quota.dialect != KAI_DIALECT:
        return guarded
    fair = state.quotas.runtime(state, quota)
    return {resource: max(guarded.get(resource, 0), fair.get(resource, 0)) for resource in {*guarded, *fair}}


def reclaim_headroom(state: ClusterState, quota: Quota, asked: Mapping[str, int], *,
                     released: Mapping[str, Resources]) -> list[Quota]:
    """The quotas on `quota`'s path (itself first, then up) that stay within their reclaim floor
    (`reclaim_floor`: min; Volcano: deserved; KAI: quota or fair share) with `asked` added
    (`released`: per quota, usage of the asking pods themselves, e.g. their nominations); stops at the
    first that would not. Those are the levels at which the job may reclaim what others borrow (see
    `preemption/reclaim.py`)."""
    out: list[Quota] = []
    for level in quota.path():
        gone = released.get(level.id, {})
        floor = reclaim_floor(state, level)
        for resource, amount in asked.items():
            if amount <= 0 or resource not in level.constrained:
                continue
            if level.used.get(resource, 0) - gone.get(resource, 0) + amount > floor.get(resource, 0):
                return out
        out.append(level)
    return out


def _add(total: Resources, requests: Mapping[str, int]) -> None:
    for resource, amount in requests.items():
        if amount:
            total[resource] = total.get(resource, 0) + amount


def _check(state: ClusterState, book: QuotaBook, quota: Quota, asked: Resources, asked_np: Resources,
           minus: dict[str, Resources], minus_np: dict[str, Resources], starting: bool, np_why: str = ""
           ) -> QuotaShortfall | None:
    """Why `quota` does not admit `asked` (None when it does). Max is checked up the whole path (a
    parent's max limits its subtree); the runtime and the non-preemptible min only at the quota
    itself, as Koordinator does: a parent over its share because a child borrows too much is put
    right by reclaim, not by refusing the child that is owed its min."""
    released = minus.get(quota.id, {})
    if asked_np:
        released_np = minus_np.get(quota.id, {})
        for resource in sorted(asked_np):
            amount = asked_np[resource]
            if amount <= 0 or resource not in quota.constrained:
                continue
            used = quota.used_np.get(resource, 0) - released_np.get(resource, 0)
            floor = quota.min.get(resource, 0)
            if used + amount > floor:
                note = _NON_PREEMPTIBLE_WITHIN_MIN[quota.dialect]
                if np_why:  # KAI: say why the job counts as non-preemptible (often its priority class alone)
                    note = f"{note[:-1]}: {np_why})"
                return QuotaShortfall(QUOTA_NON_PREEMPTIBLE, _words(
                    quota, resource, used, amount, quota.guarded_word, floor, note, "used by non-preemptible pods"),
                    quota.id, asked, asked_np)
    for level in quota.path():
        if level.closed and starting:
            return QuotaShortfall(QUOTA_CLOSED, f"{level.label} is Closed: it admits no new job", level.id, asked,
                                  asked_np)
        gone = minus.get(level.id, {})
        for resource in sorted(asked):
            amount = asked[resource]
            cap = level.max.get(resource)
            if amount <= 0 or cap is None:
                continue
            used = level.used.get(resource, 0) - gone.get(resource, 0)
            if used + amount > cap:
                return QuotaShortfall(QUOTA_OVER_MAX, _words(level, resource, used, amount, level.max_word, cap),
                                      level.id, asked, asked_np)
    if quota.dialect == CAPACITY:
        pool = _capacity_pool(book, quota, asked, released, minus)
        return QuotaShortfall(QUOTA_OVER_POOL, pool, quota.id, asked, asked_np) if pool else None
    if quota.dialect == KAI_DIALECT:
        return None  # KAI: limits and (non-preemptible) quota only; the runtime is its fair share, not a cap
    runtime = book.runtime(state, quota)
    for resource in sorted(asked):
        amount = asked[resource]
        share = runtime.get(resource)
        if amount <= 0 or share is None or resource not in quota.constrained:
            continue
        used = quota.used.get(resource, 0) - released.get(resource, 0)
        if used + amount > share:
            return QuotaShortfall(QUOTA_OVER_RUNTIME, _words(
                quota, resource, used, amount, "runtime", share,
                f" ({quota.guarded_word} {shown_amount(resource, quota.min.get(resource, 0))} "
                "plus its share of idle capacity)"), quota.id, asked, asked_np)
    return None


def _capacity_pool(book: QuotaBook, quota: Quota, asked: Resources, released: Resources,
                   minus: dict[str, Resources]) -> str:
    """Capacity scheduling: what a quota borrows beyond its min comes out of the unused part of the
    other quotas' mins (all of them together use at most the sum of their mins). Within its own min a
    quota is always admitted: that is its guarantee, taken back by reclaim if others borrowed it."""
    borrowing = any(quota.used.get(r, 0) - released.get(r, 0) + a > quota.min.get(r, 0)
                    for r, a in asked.items() if a > 0 and r in quota.constrained)
    if not borrowing:
        return ""
    root = book.root_of(quota)
    pool = book.capacity_pool()
    gone = minus.get(root.id, {})
    for resource in sorted(asked):
        amount = asked[resource]
        if amount <= 0 or resource not in pool:
            continue
        used = root.used.get(resource, 0) - gone.get(resource, 0)
        if used + amount > pool[resource]:
            return (f"{quota.label}: {resource} {format_quantity(resource, used)} used by all ElasticQuotas + "
                    f"{format_quantity(resource, amount)} asked > {format_quantity(resource, pool[resource])}, "
                    "the sum of their mins (capacity scheduling lends only unused min)")
    return ""


def _words(quota: Quota, resource: str, used: int, asked: int, what: str, limit: int, note: str = "",
           used_what: str = "used") -> str:
    return (f"{quota.label}: {resource} {format_quantity(resource, used)} {used_what} + "
            f"{format_quantity(resource, asked)} asked > {what} {format_quantity(resource, limit)}{note}")
