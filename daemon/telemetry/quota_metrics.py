"""Per-quota gauges from the quota book: used, min, max, runtime per resource, and pending gangs.

`QuotaGauges.refresh()` (called on the daemon's gauge timer, every replica) sets one series per
quota and resource it counts, labelled `dialect` (koordinator, scheduler-plugins, volcano, kai), `quota`
(the quota's name; a capacity scheduling quota's namespace/name) and `resource`; quantities in the
resource's own unit (cores, bytes, GPUs). `used` is what its placed pods request, as its status
says (`daemon.kube.quota_status`); `max` has no series for a resource the quota does not limit. A
gang counts as pending in a quota while one of its pods waits there. Series of quotas or resources
that are gone are removed, so a deleted quota does not linger on a dashboard.

Observes only: never read to decide anything.
"""

from __future__ import annotations

import math

from prometheus_client import Gauge

from daemon.telemetry.metrics import Metrics
from state.cluster import ClusterState
from state.quota import UNLIMITED_MIN, constrained_in
from state.resources import MILLI

_Series = tuple[str, ...]


class QuotaGauges:
    """Keeps the per-quota gauges of `metrics` equal to `state`'s quota book (see the module docstring)."""

    def __init__(self, metrics: Metrics, state: ClusterState) -> None:
        self.metrics = metrics
        self.state = state
        self._set: dict[int, set[_Series]] = {}  # id(gauge) -> label tuples set by the last refresh

    def refresh(self) -> None:
        book = self.state.quotas
        m = self.metrics
        values: dict[int, dict[_Series, float]] = {id(gauge): {} for gauge in self._gauges()}
        pending: dict[str, set[str]] = {}
        if book.active:
            for key in self.state.pending:
                quota = book.quota_of(key)
                pod = self.state.pods.get(key)
                if quota is not None and pod is not None and pod.gang:
                    pending.setdefault(quota.id, set()).add(pod.gang)
            for quota in book.in_order():
                runtime = book.runtime(self.state, quota)
                for resource in sorted(constrained_in(quota)):
                    labels: _Series = (quota.dialect, quota.name, resource)
                    values[id(m.quota_used)][labels] = quota.running.get(resource, 0) / MILLI
                    low = quota.min.get(resource, 0)  # a KAI quota of -1 deserves all: +Inf
                    values[id(m.quota_min)][labels] = math.inf if low >= UNLIMITED_MIN else low / MILLI
                    if resource in quota.max:
                        values[id(m.quota_max)][labels] = quota.max[resource] / MILLI
                    if resource in runtime:
                        values[id(m.quota_runtime)][labels] = runtime[resource] / MILLI
                values[id(m.quota_pending_gangs)][(quota.dialect, quota.name)] = len(pending.get(quota.id, ()))
        for gauge in self._gauges():
            now = values[id(gauge)]
            for labels in self._set.get(id(gauge), set()) - now.keys():
                gauge.remove(*labels)
            for labels, value in now.items():
                gauge.labels(*labels).set(value)
            self._set[id(gauge)] = set(now)

    def _gauges(self) -> tuple[Gauge, ...]:
        m = self.metrics
        return (m.quota_used, m.quota_min, m.quota_max, m.quota_runtime, m.quota_pending_gangs)
