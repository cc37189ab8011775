"""Telemetry: what the daemon tells its operators, and nothing it decides.

Owns the Prometheus metrics and the metered event log (`metrics`), a gang's story in the log, its
spans and the scheduling metrics (`tracing`: the journal's events say what was decided, the loop's
`Instruments` port when the work around it started and ended; the loop carries no other telemetry
code), the logging set-up and the OpenTelemetry exporter (`observability`), the /metrics, /healthz
and /readyz endpoints (`health`) and the event-loop lag monitor (`looplag`).

Must never import the scheduling loop (`daemon.scheduling`), the Kubernetes adapter
(`daemon.kube`), the offline tools (`daemon.offline`) or the command line (`daemon.cli`): it
observes events and state, it never decides or writes to the cluster.
"""
