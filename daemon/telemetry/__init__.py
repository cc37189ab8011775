"""Telemetry: what the daemon tells its operators, and nothing it decides.

Owns the Prometheus metrics and the metered event log (`metrics`), the spans and metrics derived
from journal events (`tracing`: the loop itself carries no telemetry code), structured logs and the
OpenTelemetry exporter (`observability`), the /metrics, /healthz and /readyz endpoints (`health`)
and the event-loop lag monitor (`looplag`).

Must never import the scheduling loop (`daemon.scheduling`), the Kubernetes adapter
(`daemon.kube`), the offline tools (`daemon.offline`) or the command line (`daemon.cli`): it
observes events and state, it never decides or writes to the cluster.
"""
