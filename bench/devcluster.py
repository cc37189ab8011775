"""Benchmark devcluster: list latency, watch fan-out and bindings per second over real HTTP.

    python -m bench.devcluster [--nodes 5000] [--pods 10000] [--in-flight 64] [--watchers 4] [--no-kubelet]
                               [--via aiohttp|kubernetes-asyncio]

The server runs in a child process (its own core, as a real API server would), pre-loaded with
`--nodes` nodes and `--pods` pending pods through the store. This process is the client (aiohttp,
the transport kubernetes-asyncio uses) and prints:
- list latency (median / p95 of repeated full lists of pods and nodes, and a field-selected list);
- bindings/s: half of the pods bound by one client with `--in-flight` requests in flight, and the
  server's CPU time per binding (read from /proc; a figure that does not depend on machine load);
- watch fan-out: the other half bound while `--watchers` watchers stream pods; events/s delivered
  (summed over the watchers, from the first binding until every watcher has seen every event).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiohttp

from bench import targets


def _node(index: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": f"node-{index}", "labels": {
            "network.topology/block": f"block-{index // 64}", "network.topology/spine": f"spine-{index // 1024}"}},
        "status": {"allocatable": {"cpu": "96", "memory": "768Gi", "nvidia.com/gpu": "8", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True"}]},
    }


def _pod(index: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"pod-{index}", "namespace": "bench",
                     "labels": {"pod-group.scheduling.sigs.k8s.io": f"gang-{index // 16}"}},
        "spec": {"schedulerName": "toposched", "containers": [{"name": "main", "image": "trainer:latest", "resources": {
            "requests": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "1"}}}]},
    }


async def _serve(nodes: int, pods: int, kubelet: bool, port_file: Path) -> None:
    from devcluster import DevCluster

    async with DevCluster(history=50_000, kubelet=kubelet, kubelet_delay=0.05) as cluster:
        cluster.load_objects(_node(i) for i in range(nodes))
        cluster.load_objects(_pod(i) for i in range(pods))
        await asyncio.to_thread(port_file.write_text, cluster.url)
        await asyncio.Event().wait()


def _percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]


async def _list_latency(session: aiohttp.ClientSession, path: str, repeats: int) -> tuple[float, float, int]:
    samples: list[float] = []
    count = 0
    for _ in range(repeats):
        started = time.perf_counter()
        async with session.get(path) as response:
            body = await response.read()
        samples.append(time.perf_counter() - started)
        count = len(json.loads(body)["items"])
    return statistics.median(samples), _percentile(samples, 0.95), count


async def _bind_all(session: aiohttp.ClientSession, names: list[str], nodes: int, in_flight: int,
                    node_name: str = "node-{}") -> float:
    queue = iter(enumerate(names))

    async def worker() -> None:
        for index, name in queue:
            body = json.dumps({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
                               "target": {"apiVersion": "v1", "kind": "Node",
                                          "name": node_name.format(index % nodes)}})
            async with session.post(f"/api/v1/namespaces/bench/pods/{name}/binding", data=body,
                                    headers={"Content-Type": "application/json"}) as response:
                await response.read()
                if response.status != 201:
                    raise RuntimeError(f"binding {name}: HTTP {response.status}")

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(in_flight)))
    return time.perf_counter() - started


async def _bind_all_kubernetes_asyncio(url: str, names: list[str], nodes: int, in_flight: int) -> float:
    """The same bindings through kubernetes-asyncio, the client the daemon uses."""
    from kubernetes_asyncio import client

    configuration = client.Configuration(host=url)
    configuration.connection_pool_maxsize = in_flight
    async with client.ApiClient(configuration) as api:
        core: Any = client.CoreV1Api(api)
        queue = iter(enumerate(names))

        async def worker() -> None:
            for index, name in queue:
                body = client.V1Binding(metadata=client.V1ObjectMeta(name=name),
                                        target=client.V1ObjectReference(kind="Node", name=f"node-{index % nodes}"))
                response = await core.create_namespaced_pod_binding(name, "bench", body, _preload_content=False)
                if response.status != 201:
                    raise RuntimeError(f"binding {name}: HTTP {response.status}")

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(in_flight)))
        return time.perf_counter() - started


async def _watch(session: aiohttp.ClientSession, since: str, expected: int, done: asyncio.Event,
                 counts: list[int], slot: int) -> None:
    async with session.get(f"/api/v1/namespaces/bench/pods?watch=true&resourceVersion={since}",
                           timeout=aiohttp.ClientTimeout(total=None)) as response:
        async for _line in response.content:
            counts[slot] += 1
            if counts[slot] >= expected:
                break
    if all(c >= expected for c in counts):
        done.set()


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux /proc), to report server cost independent of machine load."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _client(url: str, args: argparse.Namespace, server_pid: int) -> None:
    connector = aiohttp.TCPConnector(limit=args.in_flight + args.watchers + 4)
    async with aiohttp.ClientSession(base_url=url, connector=connector) as session:
        print(f"devcluster bench: {args.nodes} nodes, {args.pods} pods, kubelet {'on' if args.kubelet else 'off'}")
        for label, path in (("list pods (all)", "/api/v1/pods"), ("list nodes (all)", "/api/v1/nodes"),
                            ("list pending pods (fieldSelector spec.nodeName=)",
                             "/api/v1/pods?fieldSelector=spec.nodeName%3D")):
            median, p95, count = await _list_latency(session, path, args.repeats)
            print(f"  {label:<50} {count:>6} items  median {median * 1000:7.1f} ms  p95 {p95 * 1000:7.1f} ms")
        names = [f"pod-{i}" for i in range(args.pods)]
        half = len(names) // 2
        cpu_before = _cpu_seconds(server_pid)
        if args.via == "kubernetes-asyncio":
            elapsed = await _bind_all_kubernetes_asyncio(url, names[:half], args.nodes, args.in_flight)
        else:
            elapsed = await _bind_all(session, names[:half], args.nodes, args.in_flight)
        cpu = _cpu_seconds(server_pid) - cpu_before
        print(f"  bindings, 1 {args.via} client, {args.in_flight} in flight: {half} in {elapsed:.2f} s = "
              f"{half / elapsed:,.0f} bindings/s (server CPU {cpu / half * 1e6:.0f} us per binding"
              f"{', kubelet writes included' if args.kubelet else ''})")
        targets.line(f"devcluster bindings/s, {args.in_flight} in flight", f"{half / elapsed:,.0f}/s "
                     f"({cpu / half * 1e6:.0f} us server CPU per binding)", ">= 3,000/s", half / elapsed >= 3000)
        async with session.get("/api/v1/namespaces/bench/pods?limit=1") as response:
            since = json.loads(await response.read())["metadata"]["resourceVersion"]
        # One MODIFIED per binding, plus one per kubelet start when the kubelet is on.
        expected = (len(names) - half) * (2 if args.kubelet else 1)
        if args.kubelet:
            await asyncio.sleep(0.5)  # let the kubelet finish starting the first half
            async with session.get("/api/v1/namespaces/bench/pods?limit=1") as response:
                since = json.loads(await response.read())["metadata"]["resourceVersion"]
        counts = [0] * args.watchers
        done = asyncio.Event()
        watchers = [asyncio.create_task(_watch(session, since, expected, done, counts, i))
                    for i in range(args.watchers)]
        await asyncio.sleep(0.2)
        started = time.perf_counter()
        bind_elapsed = await _bind_all(session, names[half:], args.nodes, args.in_flight)
        await asyncio.wait_for(done.wait(), 120)
        elapsed = time.perf_counter() - started
        await asyncio.gather(*watchers)
        delivered = sum(counts)
        print(f"  watch fan-out to {args.watchers} watchers during {len(names) - half} bindings "
              f"({(len(names) - half) / bind_elapsed:,.0f} bindings/s): {delivered} events in {elapsed:.2f} s = "
              f"{delivered / elapsed:,.0f} events/s delivered")


async def bind_ceiling(url: str, names: list[str], nodes: int, in_flight: int, node_name: str) -> float:
    """Bind `names` (pending pods of namespace bench) as fast as one client can: seconds taken.
    `bench.daemon` runs this in a child process for the ceiling its own figures are compared to."""
    connector = aiohttp.TCPConnector(limit=in_flight + 4)
    async with aiohttp.ClientSession(base_url=url, connector=connector) as session:
        return await _bind_all(session, names, nodes, in_flight, node_name)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.devcluster")
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--in-flight", type=int, default=64)
    parser.add_argument("--watchers", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--no-kubelet", dest="kubelet", action="store_false")
    parser.add_argument("--via", choices=("aiohttp", "kubernetes-asyncio"), default="aiohttp",
                        help="client for the first half of the bindings (default: raw aiohttp)")
    parser.add_argument("--serve", metavar="PORT_FILE", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        asyncio.run(_serve(args.nodes, args.pods, args.kubelet, Path(args.serve)))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        port_file = Path(tmp) / "url"
        command = [sys.executable, "-m", "bench.devcluster", "--serve", str(port_file), "--nodes", str(args.nodes),
                   "--pods", str(args.pods)] + ([] if args.kubelet else ["--no-kubelet"])
        server = subprocess.Popen(command, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            deadline = time.monotonic() + 120
            while not port_file.exists() or not port_file.read_text():
                if server.poll() is not None or time.monotonic() > deadline:
                    print("devcluster bench: the server did not start", file=sys.stderr)
                    return 1
                time.sleep(0.05)
            asyncio.run(_client(port_file.read_text(), args, server.pid))
        finally:
            server.terminate()
            server.wait(30)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
