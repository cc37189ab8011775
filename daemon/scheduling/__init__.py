"""The scheduling loop: which unit is tried next, what is decided for it, and how that is carried out.

Owns the loop (`loop`: FirstPod/NextPod cycles, Permit, binds in flight, gang timeouts), the queue
(`queue`: units, order, parking, backoff), the queueing hints (`hints`: bounds that prove a unit
still cannot fit), the journal (`journal`: the one door into the state, log first then fold) and the
ports the loop is written against (`ports`: clock, cluster API, preemption hook).

Must never import the Kubernetes adapter (`daemon.kube`), the offline tools (`daemon.offline`) or
the command line (`daemon.cli`), nor any HTTP library: the loop reaches the cluster only through
its `ClusterAPI` port, so `run`, `simulate` and `replay --verify` share it.
"""
