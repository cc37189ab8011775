"""Offline tools: the scheduler run on a virtual clock, and what a recorded event log tells.

Owns the simulator (`simulator`: the very same scheduling loop against an in-memory cluster and a
virtual clock), folding a log back into state (`replay`), re-deciding a log's decisions and checking
they come out the same (`verify`), one gang's story read from a log (`explain`), and the process that
writes the daemon's snapshots by folding its log (`snapshot_writer`).

Must never import the Kubernetes adapter (`daemon.kube`) or the command line (`daemon.cli`), nor
any HTTP library: nothing here talks to a cluster.
"""
