"""Benchmark the event log on a cluster of 10,000 GPU nodes and 100,000 pods.

Run `python -m bench.eventlog` (`--nodes`, `--pods`, `--dir` to pick the disk, `--repeat` runs per
timed figure, `--skip-relist` to leave out the daemon relist, `--before DIR` to time the restart of
the code before the work alongside). It prints, first, the raw log figures
(append with fsync every 10 ms, one call per event and in batches; open; raw read; read+decode;
append under fsync=always), then the four figures of the performance targets, each next to its
ceiling measured in the same run and its target:

- decode + fold of the whole log (no snapshot); ceiling: read + decode of the same log; target:
  >= 70 % of the ceiling.
- restart: open, load the newest snapshot, fold a 10,000-event tail (judged by CPU time, as decode +
  fold is, imports not counted); ceiling: read + decode of the same snapshot and tail; target: 3x
  faster than the code when the performance issue was filed (c06b3d1), timed alike: 1.59 s on the
  2-core dev machine, or measured again in the same run with `--before DIR` (a checkout of c06b3d1,
  whose restart is timed on a log it writes itself, alternately with this code's); < 1 s on the
  README's machine.
- the event loop's longest stall (the largest lag of a 1 ms timer) while a snapshot is written and
  segments rotate and fsync, median and worst over the runs; ceiling: the same loop with no
  snapshot; target: < 20 ms.
- RSS of `toposched run` once it has listed the cluster; ceiling: the same daemon on an empty
  cluster; target: <= 512 MiB, with bytes per pod and per node.

Every fold, restart and stall figure is taken in a fresh process (`--child`), as a restart is: a
parent holding the generated events distorts them (measured: decode + fold 2.8 s in the parent,
1.5 s in a fresh process). Timed figures are the median of `--repeat` runs. The relist runs the real
`toposched run` against devcluster (in this process) over HTTP, three times: on an empty cluster, on
the nodes alone, and on the nodes and pods, so the difference gives bytes per node and per pod; then
restarts the last on its log (snapshot, tail, relist of the unchanged cluster) and says how long that
took to be ready, the daemon's CPU by then, and how many records the restart added to the log.
Prints figures only; no asserts.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import msgspec

from bench import targets
from daemon.offline.bulk import paused_gc
from daemon.offline.replay import fold_log
from daemon.scheduling.clock import WallClock
from daemon.scheduling.journal import Journal
from daemon.telemetry.looplag import LoopLagMonitor
from daemon.telemetry.observability import configure_logging
from events.log import EventLog, FsyncPolicy
from events.model import Event, NodeUpserted, PodBound, PodGroupUpserted, PodUpserted, decode_event
from events.objects import (
    KOORDINATOR_POD_GROUP_API,
    POD_GROUP_LABEL,
    Container,
    Node,
    NodeSpec,
    NodeStatus,
    ObjectMeta,
    Pod,
    PodGroup,
    PodGroupSpec,
    PodSpec,
    PodStatus,
    ResourceRequirements,
    Taint,
    Toleration,
)
from events.snapshot import decode_snapshot
from state.cluster import StateSnapshot

NODES = 10_000
PODS = 100_000
GPUS_PER_NODE = 8
GANG_SIZE = 8
TAIL = 10_000
TOPOGRAPH = "network.topology.nvidia.com/"
MIB = 1024 * 1024
# The restart of the code when the performance issue was filed (c06b3d1: its snapshot held every pod
# whole, 70.7 MB here), timed as this bench times a restart (CPU time from opening the log to the folded
# state, imports not counted), on the 2-core dev machine on 2026-11-26, load 0.3-0.8: the median of
# RESTART_BEFORE_RUNS runs alternating with this code's (1.37-1.80 s). `--before DIR` measures it again
# in the same run.
# (The 1.76 s used before counted the imports and was wall time: against this code's CPU time without
# imports it overstated the factor by a fifth.)
RESTART_BEFORE_COMMIT = "c06b3d1"
RESTART_BEFORE_SECONDS = 1.59
RESTART_BEFORE_RUNS = 16


# --------------------------------------------------------------------------- the workload


def _node(index: int) -> Node:
    name = f"node-{index:05d}"
    allocatable = {
        "cpu": "190",
        "memory": "2000Gi",
        "pods": "110",
        "ephemeral-storage": "3500Gi",
        "nvidia.com/gpu": str(GPUS_PER_NODE),
    }
    return Node(
        metadata=ObjectMeta(
            name=name,
            uid=f"6f1c{index:08x}-node",
            resource_version=str(1000 + index),
            labels={
                "kubernetes.io/hostname": name,
                "kubernetes.io/arch": "amd64",
                "node.kubernetes.io/instance-type": "gpu-h100-8",
                "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                TOPOGRAPH + "accelerator": f"nvl{index // 8}",
                TOPOGRAPH + "block": f"block{index // 200}",
                TOPOGRAPH + "spine": f"spine{index // 1000}",
                TOPOGRAPH + "datacenter": f"dc{index // 5000}",
            },
        ),
        spec=NodeSpec(taints=[Taint(key="nvidia.com/gpu", value="present", effect="NoSchedule")]),
        status=NodeStatus(allocatable=allocatable),
    )


def _pod(index: int) -> Pod:
    gang = f"train-{index // GANG_SIZE:05d}"
    requests = {"cpu": "20", "memory": "200Gi", "nvidia.com/gpu": "1"}
    return Pod(
        metadata=ObjectMeta(
            name=f"{gang}-worker-{index % GANG_SIZE}",
            namespace="ml",
            uid=f"9a3e{index:08x}-pod",
            resource_version=str(20000 + index),
            labels={POD_GROUP_LABEL: gang, "app": "trainer", "job-name": gang},
        ),
        spec=PodSpec(
            scheduler_name="toposched",
            priority_class_name="training",
            priority=1000,
            tolerations=[Toleration(key="nvidia.com/gpu", operator="Exists", effect="NoSchedule")],
            containers=[
                Container(name="trainer", resources=ResourceRequirements(requests=requests))
            ],
        ),
        status=PodStatus(phase="Pending"),
    )


def _pod_group(gang_index: int) -> PodGroup:
    name = f"train-{gang_index:05d}"
    return PodGroup(
        metadata=ObjectMeta(name=name, namespace="ml", uid=f"pg-{name}"),
        spec=PodGroupSpec(min_member=GANG_SIZE, schedule_timeout_seconds=600),
    )


def generate_cluster_events(nodes: int = NODES, pods: int = PODS) -> list[Event]:
    """NodeUpserted for `nodes` 8-GPU nodes, a PodGroup per gang of 8, PodUpserted for `pods` 1-GPU pods,
    then PodBound for as many pods as the GPUs hold (8 per node, in order)."""
    events: list[Event] = []
    clock = 1_700_000_000.0
    events.extend(NodeUpserted(node=_node(i), time=clock) for i in range(nodes))
    gangs = (pods + GANG_SIZE - 1) // GANG_SIZE
    events.extend(PodGroupUpserted(pod_group=_pod_group(g), time=clock + 1) for g in range(gangs))
    pod_objects = [_pod(i) for i in range(pods)]
    events.extend(PodUpserted(pod=p, time=clock + 2) for p in pod_objects)
    for i, p in enumerate(pod_objects[: nodes * GPUS_PER_NODE]):
        node = f"node-{i // GPUS_PER_NODE:05d}"
        events.append(PodBound(pod=f"ml/{p.metadata.name}", uid=p.metadata.uid, node=node, time=clock + 3))
    return events


def cluster_objects(nodes: int = NODES, pods: int = PODS) -> Iterator[dict[str, Any]]:
    """The same cluster as API objects for devcluster: the first 8 pods per node bound and Running. They
    carry what the API sends and toposched does not read: images, limits, owner references, capacity."""
    for index in range(nodes):
        node: dict[str, Any] = {"apiVersion": "v1", "kind": "Node", **msgspec.to_builtins(_node(index))}
        node["status"]["capacity"] = dict(node["status"]["allocatable"])
        yield node
    for gang in range((pods + GANG_SIZE - 1) // GANG_SIZE):
        yield {"apiVersion": KOORDINATOR_POD_GROUP_API, "kind": "PodGroup", **msgspec.to_builtins(_pod_group(gang))}
    for index in range(pods):
        obj = _pod(index)
        if index < nodes * GPUS_PER_NODE:
            spec = msgspec.structs.replace(obj.spec, node_name=f"node-{index // GPUS_PER_NODE:05d}")
            obj = msgspec.structs.replace(obj, spec=spec, status=PodStatus(phase="Running"))
        pod: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", **msgspec.to_builtins(obj)}
        gang_name = pod["metadata"]["labels"][POD_GROUP_LABEL]
        pod["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": gang_name,
                                               "uid": f"job-{gang_name}"}]
        container = pod["spec"]["containers"][0]
        container["image"] = "registry.example.com/ml/trainer:2026.11"
        container["resources"]["limits"] = dict(container["resources"]["requests"])
        yield pod


# --------------------------------------------------------------------------- raw log figures


@dataclass(frozen=True)
class Measurement:
    label: str
    count: int
    seconds: float
    nbytes: int = 0

    @property
    def per_second(self) -> float:
        return self.count / self.seconds if self.seconds > 0 else float("inf")


@contextmanager
def _quiet_gc() -> Iterator[None]:
    """Collect before timing, as a long-running daemon would have by then."""
    gc.collect()
    yield


def _log_bytes(directory: Path) -> int:
    return sum(path.stat().st_size for path in directory.glob("*.seg"))


def measure_append(
    events: Sequence[Event], fsync: FsyncPolicy, directory: Path, *, batch: int = 1, label: str = ""
) -> Measurement:
    """Append `events` into a fresh log at `directory` (one call per event, or `append_many` of `batch`)."""
    shutil.rmtree(directory, ignore_errors=True)
    with _quiet_gc():
        started = time.perf_counter()
        with EventLog.open(directory, fsync=fsync) as log:
            if batch <= 1:
                append = log.append
                for event in events:
                    append(event)
            else:
                for start in range(0, len(events), batch):
                    log.append_many(events[start : start + batch])
        seconds = time.perf_counter() - started
    name = label or f"append, fsync {fsync}" + (f", batches of {batch}" if batch > 1 else "")
    return Measurement(name, len(events), seconds, _log_bytes(directory))


def write_log(events: Sequence[Event], directory: Path) -> None:
    """A log of `events` at `directory` (replacing what was there), for the read and fold benchmarks."""
    measure_append(events, FsyncPolicy.never(), directory, batch=1000)


def measure_open(directory: Path) -> Measurement:
    started = time.perf_counter()
    with EventLog.open_readonly(directory) as log:
        count = log.last_seq
    return Measurement("open read-only (scan last segment, load indexes)", count, time.perf_counter() - started)


def measure_read_raw(directory: Path) -> Measurement:
    with _quiet_gc(), EventLog.open_readonly(directory) as log:
        started = time.perf_counter()
        count = 0
        for _ in log.read_raw(1):
            count += 1
        seconds = time.perf_counter() - started
    return Measurement("read raw (framing + checksums)", count, seconds, _log_bytes(directory))


def print_figure(measurement: Measurement) -> None:
    extra = f"  {measurement.nbytes / 1e6:8.1f} MB" if measurement.nbytes else ""
    print(
        f"  {measurement.label:<58} {measurement.per_second:>12,.0f} events/s"
        f"  ({measurement.count:,} in {measurement.seconds * 1000:,.0f} ms){extra}"
    )


# --------------------------------------------------------------------------- measured in a fresh process


def _read_decode(directory: Path, from_seq: int = 1) -> int:
    count = 0
    with EventLog.open_readonly(directory) as log:
        for _seq, payload in log.read_raw(from_seq):
            decode_event(payload)
            count += 1
    return count


def _child_read(directory: Path) -> dict[str, float]:
    gc.collect()
    started, cpu = time.perf_counter(), time.process_time()
    count = _read_decode(directory)
    return {"seconds": time.perf_counter() - started, "cpu": time.process_time() - cpu, "count": count}


def _child_fold(directory: Path) -> dict[str, float]:
    gc.collect()
    with EventLog.open_readonly(directory) as log:
        started, cpu = time.perf_counter(), time.process_time()
        result = fold_log(log, use_snapshot=False)
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    return {"seconds": seconds, "cpu": cpu, "count": result.events_folded}


def _child_restart(directory: Path) -> dict[str, float]:
    """A restart as the daemon does it (open for writing, newest snapshot, tail), then its ceiling: reading
    and decoding the same snapshot (into its typed records) and tail, without rebuilding the state."""
    started, cpu = time.perf_counter(), time.process_time()
    with EventLog.open(directory, fsync=FsyncPolicy.never()) as log:
        result = fold_log(log)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    del result
    gc.collect()
    started, ceiling_cpu = time.perf_counter(), time.process_time()
    with paused_gc(freeze=True), EventLog.open_readonly(directory) as log:  # the restore runs without the cyclic GC too
        found = log.latest_snapshot()
        assert found is not None
        seq, payload = found
        msgspec.msgpack.decode(payload, type=StateSnapshot)
        tail = _read_decode(directory, seq + 1)
    ceiling, ceiling_cpu = time.perf_counter() - started, time.process_time() - ceiling_cpu
    return {"seconds": seconds, "cpu": cpu, "ceiling": ceiling, "ceiling_cpu": ceiling_cpu, "tail": tail}


def _child_stall(directory: Path, snapshot: bool) -> dict[str, float]:
    """Restore the state, then record pod updates on an asyncio loop (20 every 2 ms, as a busy watch
    would) for a while; with `snapshot`, a snapshot is started after 200 ms, as the daemon writes it
    (`Journal(background=True)`: a writer process). A 1 ms timer's lag is
    sampled throughout; the figures are over the window from the snapshot's start to 200 ms after it
    ended (the whole run without `snapshot`). Segments are 4 MiB, so they rotate and fsync meanwhile."""
    log = EventLog.open(directory, fsync=FsyncPolicy.interval(10), segment_bytes=4 * MIB)
    folded = fold_log(log)
    journal = Journal(folded.state, WallClock(), log, snapshot_every=10**12, snapshot_bytes=10**15, background=True)
    updates = [PodUpserted(pod=pod.obj) for pod in list(folded.state.pods.values())[:20_000]]
    window: dict[str, float] = {}

    async def main() -> list[tuple[float, float]]:
        monitor = LoopLagMonitor(interval=0.001)
        samples = monitor.record()
        async with anyio.create_task_group() as group:
            group.start_soon(monitor.run)
            started = time.perf_counter()
            index = 0
            while True:
                for _ in range(20):
                    journal.record(updates[index % len(updates)])
                    index += 1
                now = time.perf_counter()
                if snapshot and "start" not in window and now - started > 0.2:
                    window["start"] = now
                    journal.write_snapshot()
                    if not journal.snapshot_in_progress:
                        window["end"] = time.perf_counter()
                if snapshot and "start" in window and "end" not in window and not journal.snapshot_in_progress:
                    window["end"] = now
                finished = window.get("end", now + 1) + 0.2 if snapshot else started + 1.5
                if now > finished:
                    break
                await anyio.sleep(0.002)
            group.cancel_scope.cancel()
        window.setdefault("start", started)
        window.setdefault("end", time.perf_counter())
        return samples

    try:
        samples = anyio.run(main)
    finally:
        journal.close()
        log.close()
    inside = sorted(lag for at, lag in samples if window["start"] <= at <= window["end"] + 0.2)
    if not inside:
        inside = [0.0]
    return {"p99": inside[min(len(inside) - 1, int(0.99 * len(inside)))], "max": inside[-1],
            "samples": len(inside), "seconds": window["end"] - window["start"]}


CHILDREN: dict[str, Callable[[Path], dict[str, float]]] = {
    "read": _child_read,
    "fold": _child_fold,
    "restart": _child_restart,
    "stall": lambda directory: _child_stall(directory, snapshot=True),
    "stall-idle": lambda directory: _child_stall(directory, snapshot=False),
}


# A restart as `_child_restart` times it, in either checkout: this code's (daemon.offline.replay) or that of
# c06b3d1 (daemon.replay). Run with the checkout first on the path and as the working directory; it
# refuses to time modules imported from elsewhere (this code's editable install answers for any the
# checkout lacks).
_RESTART_ANY = """
import json, pathlib, sys, time
try:
    from daemon.offline.replay import fold_log
except ImportError:
    from daemon.replay import fold_log
import events.log
from events.log import EventLog, FsyncPolicy
if pathlib.Path.cwd() not in pathlib.Path(events.log.__file__).parents:
    sys.exit(f"imported {events.log.__file__}, not the checkout's")
started, cpu = time.perf_counter(), time.process_time()
with EventLog.open(sys.argv[1], fsync=FsyncPolicy.never()) as log:
    result = fold_log(log)
print(json.dumps({"cpu": time.process_time() - cpu, "seconds": time.perf_counter() - started,
                  "tail": result.events_folded}))
"""

# The log, snapshot and tail of the same cluster written by the code of c06b3d1, with its own bench's
# functions (its snapshot format is not this code's).
_BEFORE_LOG = """
import sys
from pathlib import Path
import msgspec
import bench.eventlog as old
from events.log import FsyncPolicy
directory, nodes, pods, tail = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
events = old.generate_cluster_events(nodes, pods)
old.measure_append(events, FsyncPolicy.never(), directory)
_, state = old.measure_decode_fold(directory)
old.write_snapshot_and_tail(directory, state, [msgspec.structs.replace(event, seq=0) for event in events[-tail:]])
"""


def _in_checkout(tree: Path, code: str, *args: str) -> str:
    done = subprocess.run([sys.executable, "-c", code, *args], cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)},
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"--before {tree}: exited {done.returncode} (is it a checkout of {RESTART_BEFORE_COMMIT}? "
                         f"`git worktree add {tree} {RESTART_BEFORE_COMMIT}`): {done.stderr[-2000:]}")
    return done.stdout


def before_log(tree: Path, directory: Path, nodes: int, pods: int) -> None:
    """The log of `nodes` and `pods` with its snapshot and tail, as the checkout `tree` writes them."""
    if not (tree / "events" / "log.py").is_file():
        raise SystemExit(f"--before {tree}: not a checkout of toposched (no events/log.py)")
    _in_checkout(tree, _BEFORE_LOG, str(directory), str(nodes), str(pods), str(TAIL))


def restart_in(tree: Path, directory: Path) -> dict[str, float]:
    """One restart of the checkout `tree` on its log `directory`, in a new process, timed as `_child_restart`."""
    os.sync()  # as in_children: the writer's writeback is not the restart's cost
    return dict(json.loads(_in_checkout(tree, _RESTART_ANY, str(directory)).strip().splitlines()[-1]))


def in_child(kind: str, directory: Path, repeat: int) -> list[dict[str, float]]:
    """Run one measurement `repeat` times, each in a fresh process."""
    return in_children([kind], directory, repeat)[kind]


def in_children(kinds: Sequence[str], directory: Path, repeat: int) -> dict[str, list[dict[str, float]]]:
    """Run measurements `repeat` times each, interleaved (a figure and its ceiling alternate, so a change
    in the machine's load touches both alike), each in a fresh process."""
    os.sync()  # the writer's writeback is not the reader's cost
    results: dict[str, list[dict[str, float]]] = {kind: [] for kind in kinds}
    for _ in range(repeat):
        for kind in kinds:
            output = subprocess.run([sys.executable, "-m", "bench.eventlog", "--child", kind, str(directory)],
                                    check=True, capture_output=True, text=True).stdout
            results[kind].append(json.loads(output.strip().splitlines()[-1]))
    return results


def median(results: list[dict[str, float]], key: str) -> float:
    return statistics.median(result[key] for result in results)


# --------------------------------------------------------------------------- the daemon's relist


async def _relist_rss(objects: list[dict[str, Any]], workdir: Path, *, restart: bool = False) -> dict[str, float]:
    """`toposched run` against devcluster holding `objects`: its RSS (and peak) once it has listed them; with
    `restart`, then a second `toposched run` on the same log (a restart: the newest snapshot, its tail, and a
    relist of the unchanged cluster): how long until it is ready, its CPU time by then, and how many records
    that added to the log."""
    from devcluster.cluster import DevCluster  # only this figure needs the server

    async with DevCluster(history=max(100_000, len(objects) + 1000), kubelet=False) as cluster:
        cluster.load_objects(objects)
        kubeconfig = cluster.write_kubeconfig(workdir / "kubeconfig")
        log_dir = workdir / f"log-{len(objects)}"
        figures: dict[str, float] = {}
        async with _daemon_on(kubeconfig, log_dir, workdir) as (process, listed):
            await asyncio.sleep(1.0)  # let the last folds and the first GC pass settle
            status = _proc_status(process.pid)
            figures.update(rss=status["VmRSS"], peak=status["VmHWM"], listed=listed)
            await asyncio.sleep(2.0)  # a snapshot due at the end of the list is written meanwhile
        if restart:
            with EventLog.open_readonly(log_dir) as log:
                before = log.last_seq
            async with _daemon_on(kubeconfig, log_dir, workdir) as (process, ready):
                figures.update(restart_ready=ready, restart_cpu=_proc_status(process.pid)["cpu"])
            with EventLog.open_readonly(log_dir) as log:
                figures.update(restart_records=log.last_seq - before)
        shutil.rmtree(log_dir, ignore_errors=True)
    return figures


@contextlib.asynccontextmanager
async def _daemon_on(kubeconfig: Path, log_dir: Path, workdir: Path) -> AsyncIterator[tuple[subprocess.Popen[bytes],
                                                                                               float]]:
    """`toposched run` on `log_dir`, once it is ready, with the seconds that took; terminated after."""
    port = _free_port()
    command = [sys.executable, "-m", "daemon", "run", "--kubeconfig", str(kubeconfig), "--log-dir", str(log_dir),
               "--no-leader-elect", "--address", f"127.0.0.1:{port}", "--fsync", "interval:10ms",
               "--scheduler-name", "bench-relist-only", "--log-level", "warning"]
    process = _start(command, workdir / "daemon.log")
    try:
        started = time.perf_counter()
        while not await asyncio.to_thread(_ready, port):
            if process.poll() is not None:
                raise RuntimeError(f"the daemon exited with {process.returncode}; see {workdir / 'daemon.log'}")
            if time.perf_counter() - started > 600:
                raise TimeoutError("the daemon did not list the cluster in 600 s")
            await asyncio.sleep(0.05)
        yield process, time.perf_counter() - started
    finally:
        process.terminate()
        await asyncio.to_thread(process.wait, 60)


def _start(command: list[str], log_path: Path) -> subprocess.Popen[bytes]:
    with log_path.open("ab") as errors:
        return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=errors)


def _proc_status(pid: int) -> dict[str, float]:
    """RSS and peak RSS (bytes), and CPU time so far (seconds, user + system), of a running process."""
    from bench.devcluster import _cpu_seconds  # with the server it measures (aiohttp): not in the children

    values: dict[str, float] = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = float(rest.split()[0]) * 1024
    values["cpu"] = _cpu_seconds(pid)
    return values


def _ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# --------------------------------------------------------------------------- output


def _row(figure: str, measured: str, ceiling: str, target: str) -> None:
    print(f"  {figure}\n      measured: {measured}\n      ceiling:  {ceiling}\n      target:   {target}")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.eventlog", description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=NODES)
    parser.add_argument("--pods", type=int, default=PODS)
    parser.add_argument("--dir", type=Path, default=None, help="where to write logs (default: a temporary directory)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each timed figure (the median is shown)")
    parser.add_argument("--skip-relist", action="store_true", help="leave out the daemon's relist (RSS)")
    parser.add_argument("--before", metavar="DIR", type=Path,
                        help=f"a checkout of {RESTART_BEFORE_COMMIT} (`git worktree add DIR {RESTART_BEFORE_COMMIT}`): "
                        f"time its restart on its own log alternately with this code's, instead of taking the "
                        f"{RESTART_BEFORE_SECONDS} s measured before")
    parser.add_argument("--child", nargs=2, metavar=("KIND", "DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    configure_logging("warning")
    if args.child:
        kind, directory = args.child
        print(json.dumps(CHILDREN[kind](Path(directory))))
        return

    root = Path(tempfile.mkdtemp(prefix="toposched-bench-", dir=args.dir))
    try:
        started = time.perf_counter()
        events = generate_cluster_events(args.nodes, args.pods)
        load = os.getloadavg()
        print(
            f"event log benchmark: {args.nodes:,} nodes, {args.pods:,} pods -> {len(events):,} events"
            f" (generated in {time.perf_counter() - started:.1f} s), logs in {root}; {os.cpu_count()} CPUs,"
            f" load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; median of {args.repeat} runs"
        )
        directory = root / "log"
        interval = FsyncPolicy.interval(10)
        print_figure(measure_append(events, interval, directory))
        print_figure(measure_append(events, interval, directory, batch=256))
        print_figure(measure_append(events, FsyncPolicy.never(), directory))
        print_figure(measure_open(directory))
        print_figure(measure_read_raw(directory))
        tail = [msgspec.structs.replace(event, seq=0) for event in events[-TAIL:]]
        sample = events[: min(len(events), 2_000)]
        print_figure(measure_append(sample, FsyncPolicy.always(), root / "always", label="append, fsync always"))
        del events
        gc.collect()

        print("\ntargets (each beside its ceiling measured in the same run):")
        paired = in_children(("read", "fold"), directory, args.repeat)
        read, fold = paired["read"], paired["fold"]
        count = int(read[0]["count"])
        read_rate = count / median(read, "cpu")
        fold_rate = count / median(fold, "cpu")
        _row("decode + fold of the whole log, no snapshot (fresh process; CPU time, so other load does not count)",
             f"{fold_rate:,.0f} events/s ({median(fold, 'cpu'):.2f} s CPU, {median(fold, 'seconds'):.2f} s wall) = "
             f"{100 * fold_rate / read_rate:.0f} % of the ceiling",
             f"read + decode {read_rate:,.0f} events/s ({median(read, 'cpu'):.2f} s CPU, "
             f"{median(read, 'seconds'):.2f} s wall)",
             ">= 70 % of read + decode")
        targets.line(f"decode + fold, {args.nodes:,} nodes / {args.pods:,} pods",
                     f"{fold_rate:,.0f} events/s = {100 * fold_rate / read_rate:.0f} % of read + decode "
                     f"({read_rate:,.0f}/s, CPU time)", ">= 70 %", fold_rate >= 0.7 * read_rate)

        write_snapshot_and_tail(directory, tail)
        snapshot_bytes = sum(path.stat().st_size for path in directory.glob("*.snap"))
        before_s = RESTART_BEFORE_SECONDS
        against = (f"{RESTART_BEFORE_SECONDS} s, the code of {RESTART_BEFORE_COMMIT} timed alike on this kind of "
                   f"machine (median of {RESTART_BEFORE_RUNS})")
        befores: list[dict[str, float]] = []
        restart: list[dict[str, float]] = []
        before_directory = root / "before"
        if args.before is not None:
            before_log(args.before, before_directory, args.nodes, args.pods)
        for _ in range(args.repeat):  # alternately, so a change in the machine's load touches both alike
            if args.before is not None:
                befores.append(restart_in(args.before, before_directory))
            restart += in_child("restart", directory, 1)
        if befores:
            before_s = median(befores, "cpu")
            runs = ", ".join(f"{run['cpu']:.2f}" for run in befores)
            against = f"{before_s:.2f} s, the code in {args.before} run alternately ({runs} s)"
        # Judged by CPU time, as decode + fold is: a restart is one CPU-bound process, and on a shared
        # machine its wall time is mostly the other jobs'.
        restart_cpu = median(restart, "cpu")
        _row(f"restart (new process): open + newest snapshot ({snapshot_bytes / 1e6:.1f} MB) + fold "
             f"{int(restart[0]['tail']):,} tail events (CPU time, so other load does not count)",
             f"{restart_cpu:.2f} s CPU, {median(restart, 'seconds'):.2f} s wall "
             f"({before_s / restart_cpu:.1f}x faster than {against})",
             f"read + decode of the same snapshot and tail {median(restart, 'ceiling_cpu'):.2f} s CPU, "
             f"{median(restart, 'ceiling'):.2f} s wall",
             f"<= {before_s / 3:.2f} s here (3x faster); < 1 s on the README's machine")
        targets.line("restart from snapshot + 10k-event tail, new process",
                     f"{restart_cpu:.2f} s CPU = {before_s / restart_cpu:.1f}x faster than {against} (ceiling: "
                     f"read + decode {median(restart, 'ceiling_cpu'):.2f} s CPU; wall "
                     f"{median(restart, 'seconds'):.2f} s)",
                     "3x faster", restart_cpu <= before_s / 3)

        stalls = in_children(("stall", "stall-idle"), directory, args.repeat)
        stall, idle = stalls["stall"], stalls["stall-idle"]
        worst = max(result["max"] for result in stall)
        _row("longest event-loop stall while a snapshot is written (4 MiB segments rotating, fsync every 10 ms)",
             f"{1000 * median(stall, 'max'):.1f} ms (median of the runs; worst {1000 * worst:.1f} ms; p99 of the "
             f"1 ms timer's lag {1000 * median(stall, 'p99'):.1f} ms; window {median(stall, 'seconds'):.2f} s)",
             f"the same loop without a snapshot: longest {1000 * median(idle, 'max'):.1f} ms, "
             f"p99 {1000 * median(idle, 'p99'):.1f} ms",
             "< 20 ms (toposched_event_loop_lag_seconds shows it in the daemon)")
        targets.line("event-loop stall while a snapshot is written, p99",
                     f"{1000 * median(stall, 'p99'):.1f} ms (longest {1000 * median(stall, 'max'):.1f} ms; without a "
                     f"snapshot p99 {1000 * median(idle, 'p99'):.1f} ms)", "< 20 ms p99", median(stall, "p99") < 0.020)

        if not args.skip_relist:
            relist_figures(args.nodes, args.pods, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def write_snapshot_and_tail(directory: Path, tail: Sequence[Event]) -> None:
    """Fold the log, write a snapshot of it through a journal (as the daemon does), then append `tail`."""
    with EventLog.open(directory, fsync=FsyncPolicy.never()) as log:
        journal = Journal(fold_log(log).state, WallClock(), log, snapshot_every=10**12, snapshot_bytes=10**15)
        journal.write_snapshot()
        while journal.snapshot_in_progress:
            time.sleep(0.01)
        for event in tail:
            log.append(event)
    found = [path for path in directory.glob("*.snap") if not isinstance(decode_snapshot(path.read_bytes()), str)]
    assert found, "the snapshot was not written"


def relist_figures(nodes: int, pods: int, root: Path) -> None:
    workdir = root / "relist"
    workdir.mkdir()
    everything = list(cluster_objects(nodes, pods))
    node_objects = everything[:nodes]
    empty = asyncio.run(_relist_rss([], workdir))
    only_nodes = asyncio.run(_relist_rss(node_objects, workdir))
    full = asyncio.run(_relist_rss(everything, workdir, restart=True))
    per_node = (only_nodes["rss"] - empty["rss"]) / max(nodes, 1)
    per_pod = (full["rss"] - only_nodes["rss"]) / max(pods, 1)
    _row(f"RSS of `toposched run` after listing {nodes:,} nodes, {pods:,} pods, "
         f"{(pods + GANG_SIZE - 1) // GANG_SIZE:,} PodGroups (listed in {full['listed']:.1f} s)",
         f"{full['rss'] / MIB:.0f} MiB (peak {full['peak'] / MIB:.0f} MiB): {per_pod:,.0f} bytes per pod, "
         f"{per_node:,.0f} bytes per node",
         f"the same daemon on an empty cluster: {empty['rss'] / MIB:.0f} MiB",
         "<= 512 MiB")
    targets.line(f"daemon RSS after a relist of {nodes:,} nodes / {pods:,} pods",
                 f"{full['rss'] / MIB:.0f} MiB ({per_pod:,.0f} bytes per pod, {per_node:,.0f} per node; empty "
                 f"{empty['rss'] / MIB:.0f} MiB)", "<= 512 MiB", full["rss"] <= 512 * MIB)
    print(f"  a restart of `toposched run` on that log (newest snapshot, its tail, then a relist of the unchanged "
          f"cluster): ready in {full['restart_ready']:.1f} s, {full['restart_cpu']:.2f} s of the daemon's CPU; it "
          f"added {int(full['restart_records']):,} records to the log (the first run: {len(everything):,} objects "
          f"listed in {full['listed']:.1f} s; devcluster serving the lists takes most of the wall time)")


if __name__ == "__main__":
    main()
