"""Pure gang placement: cluster state in, a plan (or a structured reason) out. No clock, no I/O."""

from placement.plan import Assignment, GangPlan, Unschedulable

__all__ = ["Assignment", "GangPlan", "Unschedulable"]
