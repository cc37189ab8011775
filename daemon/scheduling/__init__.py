"""The scheduling loop: which unit is tried next, what is decided for it, and how that is carried out.

Owns the decision step (`decisions`: state + unit + time + config in, decision events and effects
out; pure, and the one place anything is decided, which `replay --verify` re-runs), the loop
(`loop`: FirstPod/NextPod cycles, the waits at Permit, binds in flight; it carries out the step's
effects), the queue
(`queue`: units, order, parking, backoff), the queueing hints (`hints`: bounds that prove a unit
still cannot fit), the journal (`journal`: the one door into the state, log first then fold; `snapshots`: how it writes
snapshots, inline or by a writer process) and the
ports the loop is written against (`ports`: clock, cluster API, preemption hook).

Must never import the Kubernetes adapter (`daemon.kube`), the offline tools (`daemon.offline`) or
the command line (`daemon.cli`), nor any HTTP library: the loop reaches the cluster only through
its `ClusterAPI` port, so `run`, `simulate` and `replay --verify` share it. The decision step
imports no clock, no I/O and no concurrency library at all (import contracts in pyproject.toml).
"""
