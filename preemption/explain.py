"""The explanation a preemption plan carries: what was considered, and why this choice.

Written as plain text lines (the first is a one-line summary) so that the event log keeps it inside
PreemptionPlanned and `replay --explain` can print it as is. Pure: builds strings, nothing else.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import msgspec

from placement.plan import Unschedulable
from preemption.cost import Cost, why_better
from preemption.plan import VictimJob
from preemption.victims import VictimRule

MAX_LISTED = 5


class Considered(msgspec.Struct, frozen=True):
    """One candidate victim set that was weighed: where, its cost, and what became of it."""

    where: str
    cost: Cost
    outcome: str  # "chosen", "placement rejected it: ...", "not validated (costlier)", ...


def _when(seconds: float) -> str:
    """Event times are wall-clock seconds in the daemon and virtual seconds in a simulation."""
    if seconds >= 1e9:  # a Unix time: say it as a date a person can read
        return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"at t={seconds:g}s"


def describe_jobs(jobs: Sequence[VictimJob]) -> str:
    parts: list[str] = []
    for job in jobs[:MAX_LISTED]:
        what = {"gang": "whole gang", "surplus": "surplus pods of gang", "pod": "pod"}.get(job.kind, job.kind)
        parts.append(f"{what} {job.key} ({len(job.pods)} pod(s), priority {job.priority}, "
                     f"started {_when(job.started_at)})")
    if len(jobs) > MAX_LISTED:
        parts.append(f"and {len(jobs) - MAX_LISTED} more")
    return "; ".join(parts)


def explain(preemptor: str, priority: int, pending: int, failure: Unschedulable, *, unit_count: int,
            job_count: int, levels: str, domains_seen: int, domains_viable: int,
            considered: Sequence[Considered], chosen: Considered, jobs: Sequence[VictimJob],
            where: str, placement_line: str, rule: VictimRule | None = None,
            victim_keys: Sequence[str] = ()) -> str:
    cost = chosen.cost
    rule = rule or VictimRule.lower_priority(priority)
    lines = [
        f"{preemptor} (priority {priority}, {pending} pending pod(s)) {rule.verb} {cost.jobs} job(s) / {cost.pods} "
        f"pod(s) (highest victim priority {cost.top_priority}) to run in {where}",
        f"placement failed: {failure.reason}",
    ]
    if rule.note:
        lines.append(rule.note)
    sources = rule.sources(victim_keys)
    if sources:
        lines.append(f"taken back from: {', '.join(sources)}")
    lines += [
        f"candidates: {job_count} {rule.job}(s) as {unit_count} victim unit(s) (whole gangs, surplus pods "
        f"above minMember, lone pods); {domains_seen} domain(s) at {levels}, {domains_viable} with enough "
        f"{'lower-priority' if rule.action == 'preemption' else 'reclaimable'} capacity",
        f"victims: {describe_jobs(jobs)}",
        f"placement after eviction: {placement_line}",
    ]
    others = [c for c in considered if c is not chosen]
    if others:
        lines.append(f"weighed {len(considered)} candidate set(s):")
        for item in considered[:MAX_LISTED + 1]:
            mark = "*" if item is chosen else "-"
            detail = item.outcome
            if item is not chosen and item.outcome.startswith("valid"):
                detail = f"{item.outcome}; lost on {why_better(cost, item.cost)}"
            over = item.cost.budget_violations
            budgets = f", {over} beyond their PodDisruptionBudgets" if over else ""
            lines.append(f"  {mark} {item.where}: priority<={item.cost.top_priority}, {item.cost.jobs} job(s), "
                         f"{item.cost.pods} pod(s){budgets}: {detail}")
        runner = next((c for c in others if c.cost > cost), None)
        if runner is not None:
            lines.append(f"why this one: {why_better(cost, runner.cost)} than {runner.where}")
    else:
        lines.append(f"why this one: the only set of {rule.jobs} that makes room within the gang's constraints")
    return "\n".join(lines)
