"""Pure gang placement: cluster state in, a plan (or a structured reason) out. No clock, no I/O.

`plan_gang(state, gang, ignore_pods=...)` plans a whole GangGroup; `plan_pod(state, pod, ...)`
a pod without a gang (a pod of a gang is planned with its gang). Both return a `GangPlan` or an
`Unschedulable`; see `placement/plan.py`.
"""

from placement.gang import plan_gang
from placement.lone import plan_pod
from placement.plan import Assignment, GangPlan, Unschedulable

__all__ = ["Assignment", "GangPlan", "Unschedulable", "plan_gang", "plan_pod"]
