"""`python -m bench.daemon`: the daemon end to end against devcluster, at 5,000 nodes.

Two processes, one per core, as in a real deployment (API server and scheduler apart): this one
serves devcluster (in-process, so pods are created straight into its store and bindings are counted
by a store listener, not by polling over HTTP), and `toposched run` runs as a subprocess talking to it
over HTTP exactly as it would to a real cluster (list+watch, event log, Binding calls). No fake
kubelet: as in kube-scheduler's scheduler_perf, pods stay bound, not Running. Both serving processes
run as `toposched run` does: on uvloop where it is installed (`--server-loop asyncio` for asyncio's
own loop), with the cyclic collector's thresholds raised and the loaded cluster frozen out of it
(`daemon.cli.run.GC_THRESHOLDS`); the ceiling's client process is left as it was (plain asyncio).

Measured:
1. 10,000 single pods (100m CPU each, created in one burst, `CREATE_CHUNK` per loop turn) from creation
   to the last one bound: pods/s.
2. One 3,000-pod gang (minMember 3,000, 8 GPUs per pod) from creation to all bound: seconds, and
   pods/s.
3. The ceiling, in the same run once the daemon is gone: devcluster's own binding rate, the same
   number of pending pods bound by one client process (raw aiohttp, `--bind-concurrency` in flight)
   against the same devcluster, which runs in this process as it did for the daemon. This is the
   machine's physical limit for the figures above: a scheduler can bind no faster than the API
   server accepts bindings.
Targets: single pods >= 50 % of the ceiling, the gang >= 60 % of it (absolute figures differ 2-3x
between machines; the ratio does not). Each phase is also timed against kube-scheduler's own bar
for 5,000 nodes / 10,000 pods (>= 680 pods/s).

Where the time goes: the daemon's own metrics (API write latency, attempts, appends) are read from
its /metrics after each phase; the gang's stages (its pods arriving, the attempt that places it, its
Bindings) are read from the daemon's event log once it has stopped, by the daemon's own clock;
`--profile` runs the daemon under cProfile and prints the functions and packages that took its CPU.
`--nodes 100` shows the pipeline's ceiling when placement is cheap (watch, log, fold, loop, Binding
calls): the difference per pod between the two runs is the cost of placing one pod among 5,000 nodes.
The daemon runs without leader election by default (the figures in the README are so); `--leader-elect`
runs it as its Deployment does, every write (a Binding and an Event per pod) through the Lease's write
gate, and waits for it to take the Lease before the first phase.

    python -m bench.daemon [--nodes 5000] [--pods 10000] [--gang 3000] [--leader-elect] [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import importlib.util
import os
import pstats
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import targets
from bench.devcluster import _cpu_seconds, bind_ceiling
from daemon.cli.run import GC_THRESHOLDS
from devcluster.cluster import DevCluster
from devcluster.watch import WatchEvent
from events.log import EventLog
from events.model import BindRequested, Event, PodBound, PodUpserted
from events.objects import POD_GROUP_LABEL

NAMESPACE = "bench"
NODES_PER_NVL = 8
NODES_PER_BLOCK = 128
NODES_PER_SPINE = 1024


def nodes(count: int) -> list[dict[str, Any]]:
    result = []
    for index in range(count):
        resources = {"cpu": "32", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": "8"}
        labels = {
            "network.topology.nvidia.com/spine": f"spine-{index // NODES_PER_SPINE}",
            "network.topology.nvidia.com/block": f"block-{index // NODES_PER_BLOCK}",
            "network.topology.nvidia.com/accelerator": f"nvl-{index // NODES_PER_NVL}",
            "kubernetes.io/hostname": f"node-{index:05d}",
        }
        result.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"node-{index:05d}", "labels": labels},
                       "status": {"capacity": resources, "allocatable": resources}})
    return result


def pod(name: str, requests: dict[str, str], gang: str = "") -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {POD_GROUP_LABEL: gang} if gang else {}},
        "spec": {"schedulerName": "toposched", "containers": [{"name": "c", "image": "pause",
                                                                "resources": {"requests": requests}}]},
    }


CREATE_CHUNK = 100


async def create(cluster: DevCluster, objects: list[dict[str, Any]]) -> None:
    """Create `objects` in the store (as `load_objects` does) `CREATE_CHUNK` at a time, letting the event
    loop turn in between: an API server serves its watches while pods are being created, it does not
    stop for the length of a 10,000-pod burst (in one call the watch stream stalled 0.3-0.5 s)."""
    for start in range(0, len(objects), CREATE_CHUNK):
        cluster.load_objects(objects[start:start + CREATE_CHUNK])
        await asyncio.sleep(0)


class BindCounter:
    """Counts pods of the bench namespace as they get a nodeName (a store listener)."""

    def __init__(self) -> None:
        self.bound: set[str] = set()
        self.last_bound_at = 0.0
        self.changed = asyncio.Event()

    def __call__(self, event: WatchEvent) -> None:
        obj = event.obj
        meta = obj.get("metadata", {})
        if obj.get("kind") != "Pod" or meta.get("namespace") != NAMESPACE:
            return
        if obj.get("spec", {}).get("nodeName") and meta["name"] not in self.bound:
            self.bound.add(meta["name"])
            self.last_bound_at = time.perf_counter()
            self.changed.set()

    async def wait_for(self, names: set[str], within: float) -> float:
        deadline = time.perf_counter() + within
        while not names <= self.bound:
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                raise TimeoutError(f"{len(names - self.bound)} of {len(names)} pods still unbound after {within}s")
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), timeout=min(remaining, 1.0))
        return self.last_bound_at


def scrape(port: int) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    values: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name, _, value = line.rpartition(" ")
        try:
            values[name] = float(value)
        except ValueError:
            continue
    return values


def _sum(metrics: dict[str, float], prefix: str) -> float:
    return sum(value for name, value in metrics.items() if name.startswith(prefix))


def where_the_time_goes(before: dict[str, float], after: dict[str, float], wall: float) -> list[str]:
    def delta(prefix: str) -> float:
        return _sum(after, prefix) - _sum(before, prefix)

    binds = delta('toposched_api_request_duration_seconds_count{resource="pods/binding"')
    bind_seconds = delta('toposched_api_request_duration_seconds_sum{resource="pods/binding"')
    attempts = delta("toposched_scheduling_attempt_duration_seconds_count")
    appends = delta("toposched_event_log_appends_total")
    watched = delta('toposched_watch_events_total{kind="Pod"')
    calls = {name.split('resource="')[1].split('"')[0] + " " + name.split('verb="')[1].split('"')[0]
             if 'verb="' in name else name.split('resource="')[1].split('"')[0]:
             after[name] - before.get(name, 0.0)
             for name in after if name.startswith("toposched_api_request_duration_seconds_count{")}
    lines = [
        "  API calls: " + ", ".join(f"{what} {count:.0f}" for what, count in sorted(calls.items()) if count),
        f"  binding calls: {binds:.0f}, mean latency {1000 * bind_seconds / max(binds, 1):.1f} ms "
        f"(concurrent; {bind_seconds / max(wall, 1e-9):.1f} calls in flight on average)",
        f"  scheduling attempts: {attempts:.0f}; pod watch events folded: {watched:.0f}; "
        f"log appends: {appends:.0f} ({appends / max(wall, 1e-9):.0f}/s)",
    ]
    return lines


@dataclass(frozen=True)
class GangStages:
    """Where a gang's time went, by the daemon's own clock (its event log): its pods arriving, then the
    attempt that placed it (planning, PodAssumed and BindRequested for every pod), then its Bindings."""

    pods: int
    arriving: float  # the first member's PodUpserted -> the last member's
    placing: float  # the last member's PodUpserted -> the last BindRequested
    binding: float  # the last BindRequested -> the last PodBound

    def words(self) -> str:
        return (f"  where the gang's time went (the daemon's event log): its {self.pods} pods seen over "
                f"{1000 * self.arriving:.0f} ms; the attempt that placed it, {1000 * self.placing:.0f} ms to the last "
                f"BindRequested; then {1000 * self.binding:.0f} ms of Bindings to the last PodBound "
                f"({self.pods / max(self.binding, 1e-9):.0f}/s)")


def gang_stages(events: Iterable[Event], namespace: str, gang: str) -> GangStages | None:
    """`GangStages` of the pods of `namespace` labelled into `gang`, from the events of a log (None when
    none of them was bound)."""
    seen: dict[str, float] = {}  # member -> when first seen
    requested = bound = 0.0
    for event in events:
        if isinstance(event, PodUpserted):
            meta = event.pod.metadata
            if meta.namespace == namespace and meta.labels.get(POD_GROUP_LABEL) == gang:
                seen.setdefault(f"{namespace}/{meta.name}", event.time)
        elif isinstance(event, BindRequested) and event.pod in seen:
            requested = max(requested, event.time)
        elif isinstance(event, PodBound) and event.pod in seen:
            bound = max(bound, event.time)
    if not seen or not requested or not bound:
        return None
    first, last = min(seen.values()), max(seen.values())
    return GangStages(pods=len(seen), arriving=last - first, placing=requested - last, binding=bound - requested)


def profile_summary(path: Path, top: int = 18) -> list[str]:
    stats = pstats.Stats(str(path))
    raw: Any = stats.stats  # type: ignore[attr-defined]
    total = sum(entry[2] for entry in raw.values())
    by_package: dict[str, float] = defaultdict(float)
    rows = []
    for (filename, line, function), entry in raw.items():
        tottime = entry[2]
        package = _package_of(filename)
        by_package[package] += tottime
        rows.append((tottime, f"{package}:{Path(filename).name}:{line}({function})"))
    lines = [f"  daemon CPU by package ({total:.1f} s self time):"]
    for package, seconds in sorted(by_package.items(), key=lambda item: -item[1])[:10]:
        lines.append(f"    {package:<28} {seconds:6.2f} s  {100 * seconds / max(total, 1e-9):5.1f} %")
    lines.append(f"  top {top} functions by self time:")
    for tottime, label in sorted(rows, reverse=True)[:top]:
        lines.append(f"    {tottime:6.2f} s  {label}")
    return lines


def _package_of(filename: str) -> str:
    match = re.search(r"site-packages/([A-Za-z0-9_]+)", filename)
    if match:
        return match.group(1)
    for ours in ("daemon", "events", "state", "placement", "preemption"):
        if f"/{ours}/" in filename:
            return ours
    if filename.startswith("<") or "/lib/python3" in filename or filename == "~":
        return "python (stdlib/builtins)"
    return Path(filename).parent.name or filename


async def run(args: argparse.Namespace) -> int:
    workdir = Path(tempfile.mkdtemp(prefix="bench-daemon-"))
    counter = BindCounter()
    async with DevCluster(history=max(200_000, 4 * (args.pods + args.gang)), kubelet=False,
                          bookmark_interval=5.0) as cluster:
        kubeconfig = cluster.write_kubeconfig(workdir / "kubeconfig")
        started = time.perf_counter()
        cluster.load_objects(nodes(args.nodes))
        gc.freeze()  # as the daemon does after its first list: the loaded cluster is long-lived
        cluster.store.subscribe(counter)
        print(f"devcluster: {args.nodes} nodes loaded in {time.perf_counter() - started:.1f}s", flush=True)
        port = _free_port()
        command = [sys.executable]
        profile_path = workdir / "daemon.prof"
        if args.profile:
            command += ["-m", "cProfile", "-o", str(profile_path)]
        command += ["-m", "daemon", "run", "--kubeconfig", str(kubeconfig), "--log-dir", str(workdir / "log"),
                    "--leader-elect" if args.leader_elect else "--no-leader-elect",
                    "--address", f"127.0.0.1:{port}", "--fsync", "interval:10ms",
                    "--bind-concurrency", str(args.bind_concurrency), "--log-level", "warning"]
        daemon = _start(command, workdir / "daemon.log")
        samplers: list[subprocess.Popen[bytes]] = []
        try:
            ready_at = await _wait_ready(port, daemon, within=120)
            if args.leader_elect:
                ready_at += await _wait_leading(port, daemon, within=60)
            print(f"daemon ready (listed {args.nodes} nodes{', leading' if args.leader_elect else ''}) in "
                  f"{ready_at:.1f}s", flush=True)
            if args.py_spy:  # sampling profiles of the phases (low overhead, unlike cProfile): collapsed stacks
                samplers = [_sampler(pid, f"{args.py_spy}.{who}")
                            for who, pid in (("daemon", daemon.pid), ("devcluster", os.getpid()))]
                await asyncio.sleep(1.0)

            # ---------------------------------------------------------------- 10,000 single pods
            names = {f"single-{index:05d}" for index in range(args.pods)}
            wall, single_cpu = await _phase(
                cluster, counter, daemon.pid, port,
                [pod(name, {"cpu": "100m", "memory": "128Mi"}) for name in sorted(names)], names,
                lambda wall, creation: f"\n{args.pods} single pods on {args.nodes} nodes: {args.pods / wall:.0f} "
                f"pods/s ({wall:.2f} s from creation to the last binding; creating them took {creation:.2f} s of it)")

            # ---------------------------------------------------------------- one 3,000-pod gang
            single_rate = args.pods / wall
            gang_rate = gang_cpu = 0.0
            if args.gang <= 0 or args.gang > args.nodes:
                print(f"\n(skipping the {args.gang}-pod gang: it needs one 8-GPU node per pod, there are {args.nodes})"
                      if args.gang > 0 else "\n(no gang phase: --gang 0)")
            else:
                gang_names = {f"gang-{index:05d}" for index in range(args.gang)}
                group = {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "PodGroup",
                         "metadata": {"name": "big", "namespace": NAMESPACE},
                         "spec": {"minMember": args.gang, "scheduleTimeoutSeconds": 600}}
                wall, gang_cpu = await _phase(
                    cluster, counter, daemon.pid, port,
                    [group, *(pod(name, {"cpu": "4", "nvidia.com/gpu": "8"}, gang="big")
                              for name in sorted(gang_names))], gang_names,
                    lambda wall, creation: f"\none {args.gang}-pod gang: {wall:.2f} s from creation to all bound = "
                    f"{args.gang / wall:.0f} pods/s (creating it took {creation:.2f} s of it)")
                gang_rate = args.gang / wall
        finally:
            for sampler in samplers:
                sampler.send_signal(signal.SIGINT)
                await asyncio.to_thread(sampler.wait, 60)
            # Wait off the event loop: devcluster runs on it and must keep serving the daemon's shutdown.
            daemon.terminate()
            try:
                await asyncio.to_thread(daemon.wait, 60)
            except subprocess.TimeoutExpired:
                daemon.kill()
        if gang_rate:
            with EventLog.open_readonly(workdir / "log") as event_log:
                stages = gang_stages(event_log.read(1), NAMESPACE, "big")
            if stages is not None:
                print(stages.words())
        ceiling, server_cpu = await _ceiling(cluster, args)
        print(f"one core each (from CPU time, whatever the machine's load): devcluster binds at most "
              f"{1 / server_cpu:.0f}/s ({1e6 * server_cpu:.0f} us per binding); the daemon places and binds at most "
              f"{1 / single_cpu:.0f} single pods/s ({1e6 * single_cpu:.0f} us per pod, its Scheduled Event included)"
              + (f", {1 / gang_cpu:.0f} gang pods/s ({1e6 * gang_cpu:.0f} us per pod)" if gang_cpu else ""))
        targets.line(f"single pods end to end ({args.nodes} nodes, {args.pods} pods)",
                     f"{single_rate:.0f} pods/s = {100 * single_rate / ceiling:.0f} % of devcluster's {ceiling:.0f}/s",
                     ">= 50 %", single_rate >= 0.5 * ceiling)
        if gang_rate:
            targets.line(f"{args.gang}-pod gang, creation to all bound",
                         f"{args.gang / gang_rate:.2f} s = {gang_rate:.0f} pods/s = "
                         f"{100 * gang_rate / ceiling:.0f} % of devcluster's {ceiling:.0f}/s",
                         ">= 60 %", gang_rate >= 0.6 * ceiling)
        if args.profile and profile_path.exists():
            print("\nwhere the daemon's CPU went (cProfile, whole run including start-up):")
            for line in profile_summary(profile_path):
                print(line)
    print(f"\n(work files in {workdir})")
    return 0


async def _phase(cluster: DevCluster, counter: BindCounter, daemon_pid: int, port: int,
                 objects: list[dict[str, Any]], names: set[str], headline: Callable[[float, float], str]
                 ) -> tuple[float, float]:
    """Create `objects`, wait until every pod of `names` is bound, and print where the time and the CPU
    went (`headline(wall, creation seconds)` first). Returns the wall seconds from creation to the last
    binding, and the daemon's CPU seconds per pod once its Scheduled Events are written too."""
    before = await asyncio.to_thread(scrape, port)
    cpu = started_cpu = _cpu_pair(daemon_pid)
    created = time.perf_counter()
    await create(cluster, objects)
    creation = time.perf_counter() - created
    last = await counter.wait_for(names, within=600)
    wall = last - created
    cpu = _cpu_pair(daemon_pid, since=cpu)
    after = await asyncio.to_thread(scrape, port)
    print(headline(wall, creation))
    for line in where_the_time_goes(before, after, wall):  # a gang's binds all go out after Permit
        print(line)
    print(_cpu_words(cpu, wall, len(names)))
    print(await _events_written(port, before, after, len(names), last))
    return wall, _cpu_pair(daemon_pid, since=started_cpu)[0] / len(names)


async def _events_written(port: int, before: dict[str, float], after: dict[str, float], pods: int,
                          last_bound_at: float, within: float = 120.0) -> str:
    """Wait until the phase's Scheduled Events (one per pod) are written, so the next phase starts
    clean; say how many were written by the last binding and when the last one was (the daemon writes
    Events in the background, as client-go's recorder does, so bindings do not wait for them)."""
    key = 'toposched_api_request_duration_seconds_count{resource="events",verb="create"}'
    by_last = after.get(key, 0.0) - before.get(key, 0.0)
    deadline = time.perf_counter() + within
    while True:
        written = (await asyncio.to_thread(scrape, port)).get(key, 0.0) - before.get(key, 0.0)
        if written >= pods or time.perf_counter() > deadline:
            break
        await asyncio.sleep(0.1)
    return (f"  Scheduled Events (written in the background): {by_last:.0f} of {pods} by the last binding, "
            f"{written:.0f} {time.perf_counter() - last_bound_at:.1f} s after it")


def _cpu_pair(daemon_pid: int, since: tuple[float, float] = (0.0, 0.0)) -> tuple[float, float]:
    """CPU seconds used by (the daemon, this process: devcluster), minus `since`."""
    return _cpu_seconds(daemon_pid) - since[0], time.process_time() - since[1]


def _cpu_words(cpu: tuple[float, float], wall: float, pods: int) -> str:
    daemon, server = cpu
    return (f"  CPU: daemon {daemon:.2f} s ({100 * daemon / wall:.0f} % of a core, {1e6 * daemon / pods:.0f} us "
            f"per pod), devcluster {server:.2f} s ({100 * server / wall:.0f} %, {1e6 * server / pods:.0f} us per pod)")


async def _ceiling(cluster: DevCluster, args: argparse.Namespace, runs: int = 3) -> tuple[float, float]:
    """devcluster's own binding rate: `args.pods` pending pods bound by a client in a child process,
    the median of `runs` runs (each on pods of its own); and devcluster's CPU seconds per binding."""
    rates = []
    cpu_per_binding = []
    for run in range(runs):
        prefix = f"ceiling{run}-"
        cluster.load_objects(pod(f"{prefix}{index:05d}", {"cpu": "100m", "memory": "128Mi"})
                             for index in range(args.pods))
        command = [sys.executable, "-m", "bench.daemon", "--ceiling-client", cluster.url, "--ceiling-prefix", prefix,
                   "--nodes", str(args.nodes), "--pods", str(args.pods),
                   "--bind-concurrency", str(args.bind_concurrency)]
        cpu = time.process_time()
        process = await asyncio.create_subprocess_exec(*command, stdout=asyncio.subprocess.PIPE)
        output, _ = await process.communicate()
        cpu_per_binding.append((time.process_time() - cpu) / args.pods)
        if process.returncode != 0:
            raise RuntimeError(f"the ceiling client exited with {process.returncode}")
        rates.append(args.pods / float(output.decode().strip().splitlines()[-1]))
    rate = float(statistics.median(rates))
    print(f"\nceiling: devcluster alone binds {rate:.0f} pods/s (median of {runs} runs: "
          f"{', '.join(f'{r:.0f}' for r in rates)}; {args.pods} pending pods each, one client process, "
          f"{args.bind_concurrency} in flight; devcluster CPU {1e6 * statistics.median(cpu_per_binding):.0f} us "
          f"per binding)")
    return rate, statistics.median(cpu_per_binding)


async def _wait_ready(port: int, process: subprocess.Popen[bytes], within: float) -> float:
    """Seconds until the daemon answers /readyz."""
    return await _wait_for(_ready, port, process, within, f"the daemon was not ready after {within}s")


async def _wait_leading(port: int, process: subprocess.Popen[bytes], within: float) -> float:
    """Seconds until the daemon holds the Lease (`toposched_leader` 1 on its /metrics)."""
    return await _wait_for(_leading, port, process, within, f"the daemon did not take the Lease within {within}s")


async def _wait_for(probe: Callable[[int], bool], port: int, process: subprocess.Popen[bytes], within: float,
                    timed_out: str) -> float:
    """Seconds until `probe(port)` (asked every 0.1 s, off the loop) is true; raises if the daemon exits first
    or `within` seconds pass."""
    started = time.perf_counter()
    while time.perf_counter() - started < within:
        if process.poll() is not None:
            raise RuntimeError(f"the daemon exited with {process.returncode}")
        if await asyncio.to_thread(probe, port):
            return time.perf_counter() - started
        await asyncio.sleep(0.1)
    raise TimeoutError(timed_out)


def _leading(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=1) as response:
            return any(line.strip() == b"toposched_leader 1.0" for line in response.read().splitlines())
    except OSError:
        return False


def _start(command: list[str], log_path: Path) -> subprocess.Popen[bytes]:
    """The daemon as a child process (its stderr, the JSON log, kept in the work directory)."""
    with log_path.open("wb") as log_file:
        return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log_file)


def _sampler(pid: int, output: str) -> subprocess.Popen[bytes]:
    """py-spy sampling `pid` into `output` (collapsed stacks) until it gets SIGINT."""
    return subprocess.Popen([str(Path(sys.executable).with_name("py-spy")), "record", "--nonblocking", "--rate", "250",
                             "--format", "raw", "--output", output, "--pid", str(pid)], stdout=subprocess.DEVNULL)


def _ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.daemon", description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--gang", type=int, default=3000)
    parser.add_argument("--bind-concurrency", type=int, default=64)
    parser.add_argument("--leader-elect", action="store_true",
                        help="run the daemon with leader election, as a Deployment of it does (every write then "
                             "goes through the lease's write gate); by default it runs without")
    parser.add_argument("--profile", action="store_true", help="run the daemon under cProfile and summarise")
    parser.add_argument("--py-spy", metavar="OUT", help="sample the daemon and devcluster with py-spy (if installed) "
                        "into OUT.daemon and OUT.devcluster (collapsed stacks, for flame graph tools)")
    parser.add_argument("--server-loop", choices=("uvloop", "asyncio"), default=None,
                        help="devcluster's event loop: uvloop (the default where installed, as `toposched run` does) "
                        "or asyncio's own")
    parser.add_argument("--ceiling-client", metavar="URL", help=argparse.SUPPRESS)
    parser.add_argument("--ceiling-prefix", default="ceiling-", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.pods < 1:
        parser.error(f"--pods {args.pods}: the single-pod phase and the ceiling need at least one pod")
    if args.ceiling_client:
        names = [f"{args.ceiling_prefix}{index:05d}" for index in range(args.pods)]
        seconds = asyncio.run(bind_ceiling(args.ceiling_client, names, args.nodes, args.bind_concurrency,
                                           "node-{:05d}"))
        print(seconds)
        return 0
    use_uvloop = args.server_loop != "asyncio" and importlib.util.find_spec("uvloop") is not None
    print(f"bench.daemon: {os.cpu_count()} CPUs, Python {sys.version.split()[0]}, devcluster on "
          f"{'uvloop' if use_uvloop else 'asyncio'}", flush=True)
    gc.set_threshold(*GC_THRESHOLDS)  # devcluster's heap is the store, long-lived, as the daemon's is its state
    if use_uvloop:
        import uvloop

        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            return runner.run(run(args))
    return asyncio.run(run(args))


if __name__ == "__main__":
    raise SystemExit(main())
