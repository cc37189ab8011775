"""Pure job-level preemption planning: whom to evict so that a gang fits, and where it then goes.

State and the placement's failure in, a `PreemptionPlan` (or a `NoPreemption` saying why not) out.
`JobPreemptor` is the same planner shaped as the scheduler loop's preemption hook.
No I/O, no clock, no globals: the scheduler loop carries plans out and records them as events.
"""

from preemption.hook import JobPreemptor
from preemption.plan import NoPreemption, PreemptionPlan, VictimJob
from preemption.planner import plan_preemption

__all__ = ["JobPreemptor", "NoPreemption", "PreemptionPlan", "VictimJob", "plan_preemption"]
