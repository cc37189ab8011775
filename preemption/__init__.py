"""Pure job-level preemption planning: whom to evict so that a gang fits, and where it then goes.

State and the placement's failure in, a `PreemptionPlan` (or a `NoPreemption` saying why not) out.
No I/O, no clock, no globals: the scheduler loop carries plans out and records them as events.
"""

from preemption.plan import NoPreemption, PreemptionPlan, VictimJob
from preemption.planner import plan_preemption

__all__ = ["NoPreemption", "PreemptionPlan", "VictimJob", "plan_preemption"]
