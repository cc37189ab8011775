"""`python -m bench.simulate`: simulate a generated 512-node, 300-job trace end to end; print the wall time.

The cluster: 512 nodes of 8 GPUs, NVIDIA topograph labels, 2 spines x 8 blocks x 4 NVLink domains x 8
nodes. The trace (seeded, so every run is the same): 300 jobs arriving over about two hours (exponential
gaps, mean 25 s), mostly gangs of 2-64 pods of 8 GPUs with a mix of MustGather / PreferGather at
BlockLayer or SpineLayer or no topology spec at all, and some lone 1-GPU pods; each runs 10-60 minutes.
One gang in five is `production` (priority 1000) and may preempt `batch` (100) jobs. The load is
well above what the cluster holds, so gangs queue for capacity, parked gangs come back whenever room
is freed, and production gangs preempt; a few 64-pod MustGather-block gangs can never fit.

"End to end" means what `toposched simulate` does: write the YAML, load it, run the loop on the
virtual clock, build the report. Target on the 2-core machine: < 10 s.

Then the same generator at 5,000 nodes, 1,000 jobs and 30,000 pods (gang sizes scaled up, arrivals
paced to the cluster's size), once by default (`--large-repeat`): target 6x faster than before the
work on it. Every pod carries an image and its GPUs as a limit, as real manifests write them.

"Before" is 57.0 s, measured on the 2-core machine when the work began (commit 1ccf0dd). A shared
machine's speed drifts over hours, so `--before DIR` measures it again in the same run: DIR is a
checkout of the code to compare with (`git worktree add /tmp/before 1ccf0dd`), whose `toposched
simulate` runs on the same trace in a new process, alternating with this code's runs, and so does
this code's own `toposched simulate` (both then count the interpreter's start and writing the
report); the factor is the ratio of those two medians, and the reports are compared.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import anyio
import yaml

from bench import targets
from daemon.offline.bulk import paused_gc
from daemon.offline.simulator import Simulation
from events.scenario import load_scenario

SPINES, BLOCKS_PER_SPINE, NVL_PER_BLOCK, NODES_PER_NVL = 2, 8, 4, 8
# The large trace, and what `toposched simulate` took for it before the work on it (commit
# 1ccf0dd, 2-core dev machine at load 1: 57.0 s wall, 56.8 s CPU); the target is 6x faster.
LARGE_NODES, LARGE_JOBS, LARGE_PODS = 5000, 1000, 30_000
LARGE_BEFORE_SECONDS = 57.0
GANG_SIZES = (2, 4, 4, 8, 8, 8, 16, 16, 32, 64)
STRATEGIES = (
    '{"gatherStrategy":[{"layer":"BlockLayer","strategy":"MustGather"}]}',
    '{"gatherStrategy":[{"layer":"BlockLayer","strategy":"PreferGather"}]}',
    '{"gatherStrategy":[{"layer":"SpineLayer","strategy":"MustGather"}]}',
    "",
)


def _node(index: int) -> str:
    nvl = index // NODES_PER_NVL
    block = nvl // NVL_PER_BLOCK
    spine = block // BLOCKS_PER_SPINE
    return (f"---\napiVersion: v1\nkind: Node\nmetadata:\n  name: node-{index:05d}\n  labels:\n"
            f"    network.topology.nvidia.com/spine: s{spine}\n    network.topology.nvidia.com/block: b{block}\n"
            f"    network.topology.nvidia.com/accelerator: nvl{nvl}\n"
            f'status:\n  allocatable:\n    cpu: "96"\n    memory: 1Ti\n    pods: "110"\n    nvidia.com/gpu: "8"\n')


def _pod(name: str, at: float, runtime: float, gpus: int, gang: str = "", index: int | None = None,
         priority: str = "batch") -> str:
    """A pod as a training job's manifest writes it: an image, and the GPUs as a limit (Kubernetes
    requires extended resources in limits; the API server copies them into requests)."""
    labels = f"\n  labels:\n    pod-group.scheduling.sigs.k8s.io: {gang}" if gang else ""
    extra = f'\n    gang.scheduling.koordinator.sh/network-topology-index: "{index}"' if index is not None else ""
    return (f"---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: bench{labels}\n"
            f'  annotations:\n    sim.toposched.io/at: "{at:.1f}"\n    sim.toposched.io/runtime: "{runtime:.0f}"'
            f"{extra}\nspec:\n  schedulerName: toposched\n  priorityClassName: {priority}\n"
            f"  containers:\n  - name: main\n    image: nvcr.io/nvidia/pytorch:24.05-py3\n    resources:\n"
            f'      requests:\n        cpu: "8"\n        memory: 64Gi\n'
            f'      limits:\n        nvidia.com/gpu: "{gpus}"\n')


def generate(jobs: int = 300, seed: int = 7, nodes: int = 512, pods: int | None = None) -> str:
    """The trace as multi-document YAML. `pods` (default: whatever the 300-job mix gives) scales every
    gang's size so that the trace holds about that many pods; arrivals come faster on a bigger cluster
    (the mean gap is 25 s at 512 nodes) so that the load stays above what the cluster holds."""
    rng = random.Random(seed)
    documents = [_node(i) for i in range(nodes)]
    documents += [f"---\napiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata:\n  name: {name}\n"
                  f"value: {value}\n" for name, value in (("batch", 100), ("production", 1000))]
    jobs_drawn = []  # (at, runtime, lone, size, priority, strategy), drawn first so that `pods` can scale sizes
    at = 0.0
    for _ in range(jobs):
        at += rng.expovariate(1 / 25.0)
        runtime = rng.uniform(600, 3600)
        if rng.random() < 0.15:
            jobs_drawn.append((at, runtime, True, 1, "batch", ""))
            continue
        size = rng.choice(GANG_SIZES)
        priority = "production" if rng.random() < 0.2 else "batch"
        jobs_drawn.append((at, runtime, False, size, priority, rng.choice(STRATEGIES)))
    lone = sum(1 for job in jobs_drawn if job[2])
    in_gangs = sum(job[3] for job in jobs_drawn if not job[2])
    scale = 1.0 if pods is None else max(0.0, pods - lone) / max(in_gangs, 1)
    pace = 512 / nodes * scale  # arrival gaps shrink on a bigger cluster and grow with the gangs
    for job, (at, runtime, alone, size, priority, strategy) in enumerate(jobs_drawn):
        at *= pace
        if alone:
            documents.append(_pod(f"svc-{job}", at, runtime, gpus=1))
            continue
        size = max(1, round(size * scale))
        name = f"job-{job}"
        topology = f"\n    gang.scheduling.koordinator.sh/network-topology-spec: '{strategy}'" if strategy else ""
        documents.append(f"---\napiVersion: scheduling.sigs.k8s.io/v1alpha1\nkind: PodGroup\nmetadata:\n"
                         f'  name: {name}\n  namespace: bench\n  annotations:\n    sim.toposched.io/at: "{at:.1f}"'
                         f"{topology}\nspec:\n  minMember: {size}\n")
        documents += [_pod(f"{name}-{i}", at, runtime, gpus=8, gang=name, index=i, priority=priority)
                      for i in range(size)]
    return "".join(documents)


async def _run(path: Path) -> tuple[Simulation, float, float, float]:
    started, cpu_started = time.perf_counter(), time.process_time()
    with paused_gc(freeze=True):  # as `toposched simulate` loads it
        scenario = load_scenario(path)
    loaded = time.perf_counter()
    simulation = Simulation(scenario)
    await simulation.run()
    return simulation, loaded - started, time.perf_counter() - loaded, time.process_time() - cpu_started


def as_ndjson(trace: str) -> str:
    """The same trace as NDJSON, one object per line (what `toposched simulate` reads at msgspec's speed)."""
    return "".join(json.dumps(document, separators=(",", ":")) + "\n"
                   for document in yaml.safe_load_all(trace) if document)


class Before(NamedTuple):
    """One run of the code to compare with (`--before`): wall and CPU seconds, and its report."""

    wall: float
    cpu: float
    report: str


# The checkout's own `toposched` (its directory first on the path; this code's editable install would
# otherwise answer for any module the checkout lacks).
_BEFORE_MAIN = ("import pathlib, sys, daemon.cli.main as cli; "
                "sys.exit(f'imported {cli.__file__}') if pathlib.Path.cwd() not in pathlib.Path(cli.__file__).parents "
                "else cli.main()")


def _run_before(tree: Path, trace_path: Path) -> Before:
    """`toposched simulate` of the checkout `tree` on the trace, in a new process (as a user runs it)."""
    if not (tree / "daemon" / "cli" / "main.py").is_file():
        raise SystemExit(f"--before {tree}: not a checkout of toposched (no daemon/cli/main.py)")
    report_path = trace_path.with_suffix(".before.json")
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", _BEFORE_MAIN, "simulate",
                           str(trace_path), "--out", str(report_path)],
                          cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)}, capture_output=True, text=True,
                          check=False)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"--before {tree}: toposched simulate exited {done.returncode}: {done.stderr[-2000:]}")
    now = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = now.ru_utime - used.ru_utime + now.ru_stime - used.ru_stime
    return Before(wall, cpu, report_path.read_text())


THIS_CHECKOUT = Path(__file__).resolve().parents[1]


def _measure(trace: str, repeat: int, suffix: str = ".yaml", before: Path | None = None
             ) -> tuple[tuple[float, float, float, float, Simulation], list[Before], list[Before]]:
    """(wall, load, simulate, CPU) seconds of the median run and that run's simulation; with `before`,
    that code's runs on the same trace too, then this code's own as a new process, beside each of ours."""
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / f"trace{suffix}"
        path.write_text(trace)
        runs, befores, ours = [], [], []
        for _ in range(repeat):
            if before is not None:
                befores.append(_run_before(before, path))
                ours.append(_run_before(THIS_CHECKOUT, path))
            simulation, load_s, simulate_s, cpu_s = anyio.run(_run, path)
            runs.append((load_s + simulate_s, load_s, simulate_s, cpu_s, simulation))
    runs.sort(key=lambda run: run[0])
    return runs[len(runs) // 2], befores, ours


def _describe(nodes: int, jobs: int, simulation: Simulation) -> str:
    stats = simulation.stats
    report = simulation.report
    assert report is not None
    return (f"simulate {nodes} nodes, {jobs} jobs, {stats.pods} pods: {stats.events} events, "
            f"{stats.gangs} gangs, {stats.binds} binds, {len(report.pending)} pending at the end, "
            f"{stats.attempts} attempts in {stats.cycles} cycles, virtual end t={report.finished_at:.0f}s")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.simulate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--nodes", type=int, default=512)
    parser.add_argument("--pods", type=int, help="scale gang sizes so that the trace holds about this many pods")
    parser.add_argument("--repeat", type=int, default=3, help="runs; the median is reported")
    parser.add_argument("--large-repeat", type=int, default=1,
                        help=f"runs of the {LARGE_NODES:,}-node trace after the small one (0: skip it)")
    parser.add_argument("--write", metavar="PATH", help="only write the trace (for `toposched simulate PATH`)")
    parser.add_argument("--before", metavar="DIR", type=Path,
                        help="a checkout of the code to compare the large trace with (e.g. commit 1ccf0dd), run "
                             "alternately with this code's runs instead of taking the 57.0 s measured before")
    args = parser.parse_args(argv)
    trace = generate(args.jobs, nodes=args.nodes, pods=args.pods)
    if args.write:
        Path(args.write).write_text(trace)
        return
    (total, load_s, simulate_s, cpu_s, simulation), _, _ = _measure(trace, args.repeat)
    print(_describe(args.nodes, args.jobs, simulation))
    print(f"wall (median of {args.repeat}): {total:.2f} s end to end (load {load_s:.2f} s, "
          f"simulate {simulate_s:.2f} s; {cpu_s:.2f} s of CPU); target < 10 s")
    targets.line(f"simulate {args.nodes} nodes / {args.jobs} jobs end to end", f"{total:.2f} s", "< 10 s", total < 10)
    if args.large_repeat < 1:
        return
    large = generate(LARGE_JOBS, nodes=LARGE_NODES, pods=LARGE_PODS)
    (total, load_s, simulate_s, cpu_s, simulation), befores, ours = _measure(large, args.large_repeat,
                                                                              before=args.before)
    print(_describe(LARGE_NODES, LARGE_JOBS, simulation))
    print(f"wall (median of {args.large_repeat}): {total:.2f} s end to end (load {load_s:.2f} s, "
          f"simulate {simulate_s:.2f} s; {cpu_s:.2f} s of CPU); before: {LARGE_BEFORE_SECONDS} s")
    before_s, against = LARGE_BEFORE_SECONDS, f"{LARGE_BEFORE_SECONDS} s"
    if befores:
        assert simulation.report is not None
        report = simulation.report.to_json()
        for name, measured in ((f"the code in {args.before}", befores), ("this code", ours)):
            same = all(run.report == report for run in measured)
            print(f"{name}: toposched simulate on the same trace, alternately (median of {len(measured)}): "
                  f"{statistics.median(run.wall for run in measured):.2f} s wall "
                  f"({', '.join(f'{run.wall:.1f}' for run in measured)}), "
                  f"{statistics.median(run.cpu for run in measured):.2f} s of CPU, "
                  f"{'the same' if same else 'A DIFFERENT'} report")
        before_s, total = statistics.median(run.wall for run in befores), statistics.median(run.wall for run in ours)
        against = f"{before_s:.1f} s, the code in {args.before}, both as toposched simulate run alternately"
    targets.line(f"simulate {LARGE_NODES:,} nodes / {LARGE_JOBS:,} jobs / {LARGE_PODS:,} pods",
                 f"{total:.1f} s = {before_s / total:.1f}x faster than {against}",
                 "6x faster", total <= before_s / 6)
    # The same trace written as NDJSON: only the loading differs (the report is the same).
    (total, load_s, simulate_s, cpu_s, json_simulation), _, _ = _measure(as_ndjson(large), args.large_repeat,
                                                                         ".ndjson")
    same = json_simulation.report == simulation.report
    print(f"the same trace as NDJSON (median of {args.large_repeat}): {total:.2f} s end to end (load {load_s:.2f} s, "
          f"simulate {simulate_s:.2f} s; {cpu_s:.2f} s of CPU), {'the same' if same else 'A DIFFERENT'} report")


if __name__ == "__main__":
    main()
