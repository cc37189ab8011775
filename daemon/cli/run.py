"""`toposched run`: the scheduler daemon against a Kubernetes API server.

`Daemon` puts the pieces together, in this order, inside one anyio task group:

1. Open the event log (`events.log`), fold it back into state (newest snapshot + tail): a restart
   resumes from what was acknowledged, then a relist brings it up to date. A damaged log
   (`LogDamagedError`: damage that is not a torn tail, a record that does not decode, a snapshot that
   cannot be restored) never crash-loops the pod: with `event_log.on_corruption: recover` (the
   default) the directory is moved aside as `<log_dir>.damaged-<UTC time>` (the newest two are kept,
   for `toposched replay`), a new log starts empty and the relist rebuilds the state; this is logged
   (`daemon.log_recovered`, error), counted (`toposched_event_log_recoveries_total`) and, once the API
   client is up, posted as a Warning Event `EventLogRecovered` on the daemon's own Pod
   (`POD_NAMESPACE`/`POD_NAME`, set by ops/base/deployment.yaml) or, outside a pod, on its Lease.
   With `refuse` the daemon exits 3 naming the damage.
2. Serve /metrics, /healthz, /readyz (`daemon.telemetry.health`).
3. List+watch every kind (`daemon.kube.watch`), each event appended to the log before it is folded
   (`daemon.scheduling.journal`). Standbys do this too, so a takeover starts warm.
4. Once every kind is listed: with leader election, wait for the Lease (`daemon.kube.leader`); then run
   the one scheduler loop (`daemon.scheduling.loop`; created only now, so the plans it adopts from the log
   are checked against the relisted cluster) behind the real adapter (`daemon.kube.cluster_api`), whose
   writes are refused the moment the lease is not valid, and beside it the keeper of the topology
   objects' status and problem Events (`daemon.kube.topology_status`), the writer of the pending gang
   members' `PodScheduled=False` condition (`daemon.kube.pod_conditions`), the writer of each quota's
   usage (`daemon.kube.quota_status`) and the background writer of Events (`daemon.kube.event_recorder`).
   Losing the lease cancels the loop at once and the daemon exits 1 (like kube-scheduler): a fresh
   process folds the log and campaigns again.
5. SIGTERM/SIGINT (or `stop` set by an embedding caller): the loop stops taking new gangs, lets
   in-flight binds finish and rolls waiting gangs back (bounded by `shutdown_grace_seconds`); the
   lease is released so a standby takes over at once; the log is flushed, fsynced and closed. A
   second signal stops at once (in-flight binds are abandoned; the log is still closed), exit 0.

What the environment refuses stops the daemon with one line on standard error, `toposched run: ...`,
a `daemon.failed` log line and exit 3 (`daemon.cli.exits`): the /metrics address in use, a log
directory that is a file or read-only, the disk full while writing the log (the log refuses every
write after an I/O error; a restart resumes from what it acknowledged), the log's lock held by another
process, a damaged log under `refuse`. No usable API configuration (no kubeconfig, a bad context) is
a configuration error, exit 2; an API server that does not answer is waited for (the watches retry).

`run_daemon(config, stop)` is the embeddable form (the demo, integration tests and the benchmark
run the daemon in-process with it); `main(argv)` parses flags, loads the config and runs until a
signal. Must never: schedule without a synced cache, or write without the lease.
"""

from __future__ import annotations

import argparse
import datetime
import errno
import gc
import importlib.util
import os
import signal
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.abc
import structlog

from daemon.cli.exits import (
    EXIT_ENVIRONMENT,
    EXIT_FINDING,
    EXIT_OK,
    EXIT_USAGE,
    CommandError,
    describe_os_error,
    exit_codes_epilog,
    report,
    reporting,
)
from daemon.config import ConfigError, DaemonConfig, load_config
from daemon.kube.client import KubeApiError, KubeClient, KubeConnectError, connect
from daemon.kube.cluster_api import KubeClusterAPI
from daemon.kube.leader import AlwaysOpen, LeaderElector, LeadershipLost, NotLeader, WriteGate
from daemon.kube.lease_store import KubeLeaseStore
from daemon.kube.pod_conditions import PendingPodConditions
from daemon.kube.quota_status import QuotaStatus
from daemon.kube.topology_status import TopologyStatus
from daemon.kube.watch import Watchers, known_from_state
from daemon.offline.replay import FoldResult, fold_log
from daemon.scheduling.clock import WallClock
from daemon.scheduling.journal import FOLD_STAGE, Journal
from daemon.scheduling.loop import Scheduler, SchedulerConfig
from daemon.telemetry.health import EndpointServer, Health, serve
from daemon.telemetry.looplag import LoopLagMonitor
from daemon.telemetry.metrics import MeteredEventLog, Metrics
from daemon.telemetry.observability import Tracing, configure_logging, trace_export_from_env
from daemon.telemetry.quota_metrics import QuotaGauges
from daemon.telemetry.tracing import SchedulingObserver
from events.log import EventLog, EventLogError, LogDamagedError, LogLockedError, move_aside
from preemption.hook import JobPreemptor
from state.cluster import ClusterState, subject_of

log = structlog.get_logger("toposched.daemon")

EXIT_LOST_LEASE = EXIT_FINDING
LOG_LEVELS = ("debug", "info", "warning", "error")

EVENT_LOG_RECOVERED = "EventLogRecovered"
EVENT_DRAIN_SECONDS = 2.0  # at a graceful stop, Events still queued get this long
KEPT_DAMAGED_LOGS = 2  # damaged log directories kept beside log_dir (the oldest beyond go)


@dataclass(frozen=True)
class LogRecovery:
    """A damaged log found at start and moved aside."""

    damage: str
    moved_to: str


class Daemon:
    """One scheduler process (see the module docstring). Attributes are for embedding callers to read."""

    def __init__(self, config: DaemonConfig, *, metrics: Metrics | None = None, tracing: Tracing | None = None,
                 shutdown_grace_seconds: float = 20.0, freeze_heap: bool = False) -> None:
        self.config = config
        self.freeze_heap = freeze_heap  # the process is ours (`main`): `gc.freeze()` once the cache is synced
        self.metrics = metrics or Metrics()
        self.tracing = tracing or Tracing()
        self.health = Health()
        self.shutdown_grace_seconds = shutdown_grace_seconds
        self.event_log: EventLog | None = None
        self.journal: Journal | None = None
        self.scheduler: Scheduler | None = None
        self.watchers: Watchers | None = None
        self.elector: LeaderElector | None = None
        self.endpoints: EndpointServer | None = None
        self.api: KubeClusterAPI | None = None
        self.topology_status: TopologyStatus | None = None
        self.pod_conditions: PendingPodConditions | None = None
        self.quota_status: QuotaStatus | None = None
        self.observer: SchedulingObserver | None = None
        self.leading = anyio.Event()
        self.exit_code = EXIT_OK
        self.recovery: LogRecovery | None = None  # set when a damaged log was moved aside at start
        self.recovery_reported = False
        self.lost_lease = ""  # why, when the lease was lost while leading (exit 1)

    @property
    def state(self) -> ClusterState | None:
        return self.journal.state if self.journal is not None else None

    async def run(self, stop: anyio.Event, *, task_status: anyio.abc.TaskStatus[Daemon] = anyio.TASK_STATUS_IGNORED,
                  ) -> int:
        """Run until `stop` is set (graceful) or the lease is lost; returns the exit code.

        What the environment refuses (see the module docstring) is raised, possibly inside an exception
        group; `environment_failure` turns it into the one line and exit code 3.
        """
        config = self.config
        try:
            event_log, folded = self._restore()
        except BaseException as failure:
            self._failed(failure)
            raise
        self.event_log = event_log
        try:
            state = folded.state
            log.info("daemon.restored", log_dir=config.log_dir, events=folded.events_folded,
                     snapshot_seq=folded.snapshot_seq, last_seq=event_log.last_seq)
            journal = Journal(state, WallClock(), event_log, policy=config.event_log, metrics=self.metrics,
                              background=True)
            for event, fold_error in folded.failures:  # the state marked these objects; say so as a live fold would
                kind, key = subject_of(event)
                journal.report_error(FOLD_STAGE, f"{kind} {key} (event seq {event.seq}, folding the log)", fold_error)
            self.journal = journal
            observer = self.observer = SchedulingObserver(state, self.metrics, self.tracing.tracer)
            journal.subscribe(observer)
            async with connect(config) as client:
                return await self._serve(client, journal, observer, stop, task_status)
        except BaseException as failure:
            self._failed(failure)
            raise
        finally:
            self.health.role = "stopping"
            if self.journal is not None:
                self.journal.close()  # a snapshot being written finishes first (bounded)
            event_log.close()
            self.tracing.shutdown()
            log.info("daemon.stopped", exit_code=self.exit_code)

    def _failed(self, error: BaseException) -> None:
        failure = environment_failure(error, self.config)
        if failure is not None:
            self.exit_code = failure.code
            log.error("daemon.failed", error=failure.message, exit_code=failure.code)

    def _restore(self) -> tuple[MeteredEventLog, FoldResult]:
        """Open the log and fold it back; a damaged log is recovered or refused (module docstring, step 1)."""
        try:
            return self._open_and_fold()
        except LogDamagedError as error:
            if self.config.event_log.on_corruption == "refuse":
                raise
            damage = str(error)
        moved_to = move_aside(self.config.log_dir, stamp=datetime.datetime.now(datetime.UTC).strftime(
            "%Y%m%dT%H%M%S.%fZ"), keep=KEPT_DAMAGED_LOGS)
        self.recovery = LogRecovery(damage=damage, moved_to=str(moved_to))
        self.metrics.log_recoveries.inc()
        log.error("daemon.log_recovered", log_dir=self.config.log_dir, damage=damage, moved_to=str(moved_to),
                  action="a new log starts empty; the relist rebuilds the state")
        return self._open_and_fold()

    def _open_and_fold(self) -> tuple[MeteredEventLog, FoldResult]:
        config = self.config
        try:
            event_log = MeteredEventLog.open(config.log_dir, fsync=config.fsync_policy())
        except OSError as error:
            raise CommandError(f"event log directory {config.log_dir}: {_unusable(config.log_dir, error)}",
                               EXIT_ENVIRONMENT) from error
        assert isinstance(event_log, MeteredEventLog)  # `open` builds the class it is called on
        event_log.metrics = self.metrics
        try:
            return event_log, fold_log(event_log, scheduler_name=config.scheduler_name,
                                       kai_node_pool_label=config.kai_node_pool_label)
        except BaseException:
            event_log.close()
            raise

    async def _report_recovery(self, client: KubeClient) -> None:
        """The Warning Event of a recovery, posted once the client is up (any replica: it is not a decision)."""
        if self.recovery is None:
            return
        election = self.config.leader_election
        pod_name, pod_namespace = os.environ.get("POD_NAME", ""), os.environ.get("POD_NAMESPACE", "")
        if pod_name and pod_namespace:
            target = (f"{pod_namespace}/{pod_name}", "v1", "Pod")
        else:
            target = (f"{election.lease_namespace}/{election.lease_name}", "coordination.k8s.io/v1", "Lease")
        message = (f"event log {self.config.log_dir} was damaged ({self.recovery.damage}); moved to "
                   f"{self.recovery.moved_to} and rebuilt from a relist")
        reporter = KubeClusterAPI(client, AlwaysOpen(), metrics=self.metrics)
        try:
            await reporter.record_event(*target, "", "Warning", EVENT_LOG_RECOVERED, message)
        except (KubeApiError, NotLeader) as error:
            log.warning("daemon.recovery_event_failed", object=target[0], error=str(error))
            return
        self.recovery_reported = True

    async def _serve(self, client: KubeClient, journal: Journal, observer: SchedulingObserver, stop: anyio.Event,
                     task_status: anyio.abc.TaskStatus[Daemon]) -> int:
        config = self.config
        election = config.leader_election
        gate: WriteGate
        if election.enabled:
            store = KubeLeaseStore(client, election.lease_namespace, election.lease_name)
            self.elector = LeaderElector(store, election, election.holder_identity())
            gate = self.elector.gate
        else:
            gate = AlwaysOpen()
        self.api = KubeClusterAPI(client, gate, journal.state, self.metrics, bind_concurrency=config.bind_concurrency)
        self.watchers = Watchers(client, journal.recorder(), config.timeouts, known_from_state(journal.state),
                                 metrics=self.metrics)
        host, port = config.host_port()
        async with anyio.create_task_group() as group:
            try:
                self.endpoints = await group.start(serve, self.health, self.metrics, host, port)
            except OSError as error:
                reason = "address already in use" if error.errno == errno.EADDRINUSE else describe_os_error(error)
                raise CommandError(f"cannot serve /metrics, /healthz and /readyz on {config.address} (--address, "
                                   f"or `address` in the config): {reason}", EXIT_ENVIRONMENT) from error
            task_status.started(self)
            group.start_soon(self._report_recovery, client)
            group.start_soon(self.watchers.run)
            group.start_soon(self._gauges, observer)
            group.start_soon(LoopLagMonitor(self.metrics.loop_lag.observe).run)
            group.start_soon(self._stop_when, stop, group.cancel_scope)
            await self.watchers.synced.wait()
            if self.freeze_heap:
                gc.freeze()  # the listed cluster is long-lived: full collections need not walk it again
            self.health.synced = True
            self.metrics.cache_synced.set(1)
            try:
                if self.elector is not None:
                    self.health.role = "standby"
                    await self.elector.lead(lambda: self._schedule(stop))
                else:
                    await self._schedule(stop)
            except LeadershipLost as error:
                log.error("daemon.lost_lease", error=str(error))
                self.exit_code = EXIT_LOST_LEASE
                self.lost_lease = str(error)
            finally:
                self.metrics.leader.set(0)
            group.cancel_scope.cancel()
        return self.exit_code

    async def _schedule(self, stop: anyio.Event) -> None:
        """The leader's work: the scheduler loop until `stop`, then a bounded graceful drain."""
        assert self.journal is not None and self.api is not None
        self.health.role = "leader"
        self.metrics.leader.set(1)
        self.leading.set()
        timeouts = self.config.timeouts
        scheduler = Scheduler(
            self.journal, self.api,
            config=SchedulerConfig(bind_concurrency=self.config.bind_concurrency,
                                   backoff_initial_seconds=timeouts.backoff_initial_seconds,
                                   backoff_max_seconds=timeouts.backoff_max_seconds,
                                   volume_binding_timeout_seconds=timeouts.volume_binding_seconds),
            preemptor=JobPreemptor(), instruments=self.observer,
        )
        self.scheduler = scheduler
        # The topology objects' status and problem Events: the leader's too, stopped with the lease.
        topology_status = TopologyStatus(self.journal.state, self.api, metrics=self.metrics)
        self.journal.subscribe_batches(topology_status.notice_all)
        self.topology_status = topology_status
        # PodScheduled=False on every pending gang member, as cluster-autoscaler and Karpenter read it.
        pod_conditions = PendingPodConditions(self.journal.state, self.api,
                                              not_ready_delay_seconds=self.config.timeouts.not_ready_report_seconds)
        self.journal.subscribe_batches(pod_conditions.notice_all)
        self.pod_conditions = pod_conditions
        # Each quota's usage where its dialect keeps it (status.used, status.allocated, runtime).
        quota_status = QuotaStatus(self.journal.state, self.api)
        self.journal.subscribe_batches(quota_status.notice_all)
        self.quota_status = quota_status
        log.info("daemon.leading", scheduler_name=self.config.scheduler_name)
        async with anyio.create_task_group() as group:

            async def stop_on_request() -> None:
                await stop.wait()
                log.info("daemon.stopping", waiting_gangs=scheduler.has_waiting())
                scheduler.request_stop()  # run() returns once in-flight binds finish; waiting gangs roll back
                await anyio.sleep(self.shutdown_grace_seconds)
                log.warning("daemon.drain_timeout", seconds=self.shutdown_grace_seconds)
                group.cancel_scope.cancel()

            group.start_soon(stop_on_request)
            group.start_soon(topology_status.run)
            group.start_soon(self.api.events.run)  # Events: correlated, written in the background
            group.start_soon(pod_conditions.run)
            group.start_soon(quota_status.run)
            await scheduler.run()
            with anyio.move_on_after(EVENT_DRAIN_SECONDS):
                await self.api.events.flush()  # what the last binds reported, before the lease goes
            group.cancel_scope.cancel()

    async def _stop_when(self, stop: anyio.Event, scope: anyio.CancelScope) -> None:
        """Hold the endpoints and watches up until the work is done; `stop` alone does not cancel them."""
        await stop.wait()
        if not self.leading.is_set():
            scope.cancel()  # a standby (or a daemon still syncing) has nothing to drain

    async def _gauges(self, observer: SchedulingObserver) -> None:
        quotas = QuotaGauges(self.metrics, observer.state)
        while True:
            observer.refresh_gauges(self.scheduler)  # None until leading: a standby has no queue
            quotas.refresh()
            await anyio.sleep(1.0)


def _unusable(directory: str, error: OSError) -> str:
    """Why a log directory cannot be opened, in the user's terms."""
    path = Path(directory)
    for ancestor in (path, *path.parents):
        if ancestor.exists() and not ancestor.is_dir():
            return "is a file, not a directory" if ancestor == path else f"{ancestor} is a file, not a directory"
    if error.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"cannot be written ({error.strerror}); give a writable directory"
    return describe_os_error(error)


def environment_failure(error: BaseException, config: DaemonConfig) -> CommandError | None:
    """What the environment refused, from an exception (or a group of them, as task groups raise): the one
    line and its exit code (3; 2 for no usable API configuration); None for anything else (a cancellation,
    or a bug, which keeps its traceback)."""
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            found = environment_failure(inner, config)
            if found is not None:
                return found
        return None
    if isinstance(error, CommandError):
        return error
    if isinstance(error, KubeConnectError):  # no kubeconfig, a bad context, not in a cluster: configuration
        return CommandError(f"no usable API server configuration: {error}", EXIT_USAGE)
    if isinstance(error, LogDamagedError):
        return CommandError(f"event log {config.log_dir}: {error} (event_log.on_corruption: recover, or "
                            "--on-log-corruption recover, moves it aside and rebuilds it from a relist)",
                            EXIT_ENVIRONMENT)
    if isinstance(error, LogLockedError):
        return CommandError(str(error), EXIT_ENVIRONMENT)
    if isinstance(error, EventLogError) and isinstance(error.__cause__, OSError):
        return CommandError(f"event log {config.log_dir}: cannot write: {describe_os_error(error.__cause__)}; "
                            "stopped (what the log acknowledged is kept, a restart resumes from it)",
                            EXIT_ENVIRONMENT)
    if isinstance(error, EventLogError):
        return CommandError(f"event log {config.log_dir}: {error}", EXIT_ENVIRONMENT)
    if isinstance(error, OSError):
        return CommandError(describe_os_error(error), EXIT_ENVIRONMENT)
    return None


async def run_daemon(config: DaemonConfig, stop: anyio.Event, *,
                     task_status: anyio.abc.TaskStatus[Daemon] = anyio.TASK_STATUS_IGNORED) -> int:
    daemon = Daemon(config)
    return await daemon.run(stop, task_status=task_status)


# --------------------------------------------------------------------------- the command line


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="toposched run",
        description="Run the topology-aware gang scheduler against a Kubernetes API server. "
        "Flags override the config file.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=exit_codes_epilog(
            ok="stopped by SIGTERM or SIGINT (a second signal stops at once)",
            finding="the Lease was lost (a fresh process folds the log and campaigns again)",
            usage="a bad flag or config file (the message names the key), no usable kubeconfig",
            environment="the /metrics address in use, the log dir unusable (a file, "
                        "read-only), the disk full, the log's lock held by another process, or a damaged log with "
                        "--on-log-corruption refuse"),
    )
    parser.add_argument("--config", metavar="FILE", help="YAML config file (see daemon/config.py for keys)")
    parser.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig path (default: in-cluster or ~/.kube/config)")
    parser.add_argument("--context", help="kubeconfig context")
    parser.add_argument("--in-cluster", action="store_const", const=True, help="use the pod's service account")
    parser.add_argument("--scheduler-name", help="spec.schedulerName this scheduler serves (default toposched)")
    parser.add_argument("--log-dir", metavar="DIR", help="event log directory")
    parser.add_argument("--fsync", help="always | never | interval:<N>ms")
    parser.add_argument("--on-log-corruption", choices=("recover", "refuse"),
                        help="a damaged event log at start: move it aside and rebuild from a relist (recover), "
                             "or exit 3 (refuse)")
    parser.add_argument("--bind-concurrency", type=int, metavar="N", help="Binding calls in flight at most")
    parser.add_argument("--address", metavar="HOST:PORT", help="/metrics, /healthz, /readyz address")
    election = parser.add_mutually_exclusive_group()
    election.add_argument("--leader-elect", dest="leader_elect", action="store_const", const=True,
                          help="campaign for the Lease before scheduling (default)")
    election.add_argument("--no-leader-elect", dest="leader_elect", action="store_const", const=False,
                          help="schedule at once (a single replica)")
    parser.add_argument("--lease-name", help="Lease name (default toposched)")
    parser.add_argument("--lease-namespace", help="Lease namespace (default kube-system)")
    parser.add_argument("--identity", help="holderIdentity (default hostname_pid)")
    parser.add_argument("--log-level", default="info", choices=LOG_LEVELS, help="default info")
    parser.add_argument("--event-loop", choices=("uvloop", "asyncio"), default=None,
                        help="uvloop (the default where it is installed: ~10%% less CPU per pod) or asyncio's own")
    return parser


_FLAG_KEYS = {
    "kubeconfig": "kubeconfig",
    "context": "context",
    "in_cluster": "in_cluster",
    "scheduler_name": "scheduler_name",
    "log_dir": "log_dir",
    "fsync": "fsync",
    "on_log_corruption": "event_log.on_corruption",
    "bind_concurrency": "bind_concurrency",
    "address": "address",
    "leader_elect": "leader_election.enabled",
    "lease_name": "leader_election.lease_name",
    "lease_namespace": "leader_election.lease_namespace",
    "identity": "leader_election.identity",
}


def config_from_args(args: argparse.Namespace) -> DaemonConfig:
    overrides = {key: getattr(args, flag) for flag, key in _FLAG_KEYS.items() if getattr(args, flag) is not None}
    return load_config(args.config, overrides)


async def _run_until_signal(config: DaemonConfig) -> int:
    stop = anyio.Event()
    daemon = Daemon(config, freeze_heap=True)
    failure: CommandError | None = None
    async with anyio.create_task_group() as group:

        async def on_signal() -> None:
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for signum in signals:
                    log.info("daemon.signal", signal=signal.Signals(signum).name)
                    if stop.is_set():
                        log.warning("daemon.stopping_now", signal=signal.Signals(signum).name)
                        group.cancel_scope.cancel()  # a second signal: stop now (daemon.run's cleanup still runs)
                        return
                    stop.set()

        group.start_soon(on_signal)
        try:
            await daemon.run(stop)
        except BaseException as error:  # a cancellation (the second signal) or a bug passes through
            failure = environment_failure(error, config)
            if failure is None:
                raise
        group.cancel_scope.cancel()
    if failure is not None:
        return report("run", failure)
    if daemon.lost_lease:
        return report("run", CommandError(
            f"{daemon.lost_lease} (not renewed in time, or taken by another replica: the leader.lost log line says "
            "which); exiting so that a fresh process folds the log and campaigns again", EXIT_LOST_LEASE))
    return daemon.exit_code


# The cyclic collector's thresholds: a young collection every 10,000 allocations instead of 700, a full
# one after 50 x 100 of them (and, as always, only once the heap grew by a quarter). The daemon's heap is
# mostly long-lived state; with the defaults a full collection walked it every few thousand pods
# (measured at 5,000 nodes / 10,000 pods: 0.8 s of the daemon's 7 s of CPU in the collector, 0.3 s with
# these). Memory is still freed by reference counting at once; only garbage in cycles waits longer.
GC_THRESHOLDS = (10_000, 50, 100)


@reporting("run")
def main(argv: Sequence[str]) -> int:
    args = parser().parse_args(list(argv))
    try:
        config = config_from_args(args)
        trace_export_from_env(os.environ)  # the OTEL_* variables: a value we cannot honour is a config error
    except ConfigError as error:
        print(f"toposched run: bad configuration: {error}", file=sys.stderr)
        return EXIT_USAGE
    use_uvloop = args.event_loop != "asyncio" and importlib.util.find_spec("uvloop") is not None
    if args.event_loop == "uvloop" and not use_uvloop:
        print("toposched run: --event-loop uvloop: uvloop is not installed on this platform", file=sys.stderr)
        return EXIT_USAGE
    configure_logging(args.log_level)
    gc.set_threshold(*GC_THRESHOLDS)
    return anyio.run(_run_until_signal, config, backend_options={"use_uvloop": use_uvloop})
