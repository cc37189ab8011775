"""Benchmark the event log on a cluster of 10,000 GPU nodes and 100,000 pods.

Run `python -m bench.eventlog` (`--nodes`, `--pods`, `--dir` to pick the disk). Prints events/s
for append with fsync every 10 ms (one call per event, and in batches), for a raw read (framing and
checksums only) and for read+decode, the time to open (scan) the log, and the cost of an append
under fsync=always. Target on the 2-core reference machine: append >= 200,000 events/s.

Other benchmarks build on the pieces here: `generate_cluster_events` gives the event stream,
`write_log` a log on disk, `measure_*` one figure each, `print_figure` the output format; the fold
(decode+fold, restart from snapshot) is measured by the state benchmark on top of them.
Prints figures only; no asserts.
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import msgspec

from daemon.replay import fold_log
from events.log import EventLog, FsyncPolicy
from events.model import Event, NodeUpserted, PodBound, PodGroupUpserted, PodUpserted, decode_event
from events.objects import (
    POD_GROUP_LABEL,
    Container,
    Node,
    NodeSpec,
    NodeStatus,
    ObjectMeta,
    OwnerReference,
    Pod,
    PodGroup,
    PodGroupSpec,
    PodSpec,
    PodStatus,
    ResourceRequirements,
    Taint,
    Toleration,
)
from state.cluster import ClusterState

NODES = 10_000
PODS = 100_000
GPUS_PER_NODE = 8
GANG_SIZE = 8
TOPOGRAPH = "network.topology.nvidia.com/"


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
        status=NodeStatus(capacity=allocatable, allocatable=allocatable),
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
            owner_references=[OwnerReference(api_version="batch/v1", kind="Job", name=gang, uid=f"job-{gang}")],
        ),
        spec=PodSpec(
            scheduler_name="toposched",
            priority_class_name="training",
            priority=1000,
            tolerations=[Toleration(key="nvidia.com/gpu", operator="Exists", effect="NoSchedule")],
            containers=[
                Container(
                    name="trainer",
                    image="registry.example.com/ml/trainer:2026.11",
                    resources=ResourceRequirements(requests=requests, limits=requests),
                )
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


# --------------------------------------------------------------------------- measurements


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


def measure_read_decode(directory: Path) -> Measurement:
    with _quiet_gc(), EventLog.open_readonly(directory) as log:
        started = time.perf_counter()
        count = 0
        for _seq, payload in log.read_raw(1):
            decode_event(payload)
            count += 1
        seconds = time.perf_counter() - started
    return Measurement("read + decode", count, seconds, _log_bytes(directory))


def measure_read_tail(directory: Path, tail: int) -> Measurement:
    """Read only the last `tail` events: what a restart from a recent snapshot costs in the log."""
    with EventLog.open_readonly(directory) as log:
        start = max(log.last_seq - tail + 1, 1)
        started = time.perf_counter()
        count = sum(1 for _ in log.read(start))
        seconds = time.perf_counter() - started
    return Measurement(f"read + decode of the last {tail:,} events (seek, no scan)", count, seconds)


def measure_decode_fold(directory: Path) -> tuple[Measurement, ClusterState]:
    """Read, decode and fold the whole log into a fresh state: a cold restart with no snapshot."""
    with _quiet_gc(), EventLog.open_readonly(directory) as log:
        started = time.perf_counter()
        result = fold_log(log, use_snapshot=False)
        seconds = time.perf_counter() - started
    return Measurement("read + decode + fold (no snapshot)", result.events_folded, seconds), result.state


def write_snapshot_and_tail(directory: Path, state: ClusterState, tail: Sequence[Event]) -> Measurement:
    """Write a snapshot of `state` into the log at `directory`, then append `tail` after it."""
    with EventLog.open(directory, fsync=FsyncPolicy.never()) as log:
        started = time.perf_counter()
        payload = state.snapshot()
        log.write_snapshot(log.last_seq, payload)
        written = Measurement(f"write snapshot ({len(payload) / 1e6:.1f} MB)", 1, time.perf_counter() - started)
        for event in tail:
            log.append(event)
    return written


def measure_restart(directory: Path) -> Measurement:
    """What a restart does, in a new process as a restart is: open the log, load the newest snapshot,
    fold the tail. Call it with this process's big objects already freed: measured here, a parent
    holding a few GB made the child's restore twice as slow (2.5 s against 1.2 s)."""
    code = (
        "import time, sys\n"
        "started = time.perf_counter()\n"
        "from daemon.replay import fold_log\n"
        "from events.log import EventLog, FsyncPolicy\n"
        "with EventLog.open(sys.argv[1], fsync=FsyncPolicy.never()) as log:\n"
        "    result = fold_log(log)\n"
        "print(time.perf_counter() - started, result.events_folded, result.snapshot_seq)\n"
    )
    os.sync()  # the writer is gone before a restart: its writeback is not the restart's cost
    output = subprocess.run([sys.executable, "-c", code, str(directory)], check=True, capture_output=True,
                            text=True).stdout.split()
    seconds, folded = float(output[0]), int(output[1])
    return Measurement(f"restart (new process): open + load snapshot + fold {folded:,} tail events", 1, seconds)


# --------------------------------------------------------------------------- output


def print_figure(measurement: Measurement) -> None:
    extra = f"  {measurement.nbytes / 1e6:8.1f} MB" if measurement.nbytes else ""
    print(
        f"  {measurement.label:<58} {measurement.per_second:>12,.0f} events/s"
        f"  ({measurement.count:,} in {measurement.seconds * 1000:,.0f} ms){extra}"
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.eventlog", description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=NODES)
    parser.add_argument("--pods", type=int, default=PODS)
    parser.add_argument("--dir", type=Path, default=None, help="where to write logs (default: a temporary directory)")
    args = parser.parse_args(argv)

    root = Path(tempfile.mkdtemp(prefix="toposched-bench-", dir=args.dir))
    try:
        started = time.perf_counter()
        events = generate_cluster_events(args.nodes, args.pods)
        print(
            f"event log benchmark: {args.nodes:,} nodes, {args.pods:,} pods -> {len(events):,} events"
            f" (generated in {time.perf_counter() - started:.1f} s), logs in {root}"
        )
        directory = root / "log"
        interval = FsyncPolicy.interval(10)
        print_figure(measure_append(events, interval, directory))
        print_figure(measure_append(events, interval, directory, batch=256))
        print_figure(measure_append(events, FsyncPolicy.never(), directory))
        print_figure(measure_open(directory))
        print_figure(measure_read_raw(directory))
        print_figure(measure_read_decode(directory))
        print_figure(measure_read_tail(directory, 10_000))
        folded, state = measure_decode_fold(directory)
        print_figure(folded)
        tail = [msgspec.structs.replace(event, seq=0) for event in events[-10_000:]]
        sample = events[: min(len(events), 2_000)]
        written = write_snapshot_and_tail(directory, state, tail)
        del state, tail, events
        gc.collect()
        for measurement in (written, measure_restart(directory)):
            print(f"  {measurement.label:<58} {measurement.seconds * 1000:>12,.0f} ms")
        print_figure(measure_append(sample, FsyncPolicy.always(), root / "always", label="append, fsync always"))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
