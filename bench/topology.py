"""Benchmark the topology tree: build for 10,000 nodes in 4 layers, LCA of a 3,000-node set.

Run `python -m bench.topology`. Targets on the 2-core reference machine: build < 200 ms,
LCA < 20 ms. Also reports the per-call cost of `usage_changed` (the fold's hot path).
Prints figures only; no asserts.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from functools import partial

from events.objects import ClusterNetworkTopology, ClusterNetworkTopologySpec, NetworkTopologyLayer, ObjectMeta
from state.resources import Resources
from state.topology import TOPOGRAPH_PREFIX, TopologyTree

NODES = 10_000
LCA_SET = 3_000
ROUNDS = 7


def _labels(index: int) -> dict[str, str]:
    # 4 layers: datacenter (2) > spine (10) > block (50) > accelerator (1,250 NVLink domains of 8)
    return {
        "kubernetes.io/hostname": f"node-{index:05d}",
        TOPOGRAPH_PREFIX + "datacenter": f"dc{index // 5000}",
        TOPOGRAPH_PREFIX + "spine": f"spine{index // 1000}",
        TOPOGRAPH_PREFIX + "block": f"block{index // 200}",
        TOPOGRAPH_PREFIX + "accelerator": f"nvl{index // 8}",
    }


def _cnt() -> ClusterNetworkTopology:
    layers = [
        NetworkTopologyLayer(topology_layer="DatacenterLayer", label_key=[TOPOGRAPH_PREFIX + "datacenter"]),
        NetworkTopologyLayer(topology_layer="SpineLayer", label_key=[TOPOGRAPH_PREFIX + "spine"],
                             parent_topology_layer="DatacenterLayer"),
        NetworkTopologyLayer(topology_layer="BlockLayer", label_key=[TOPOGRAPH_PREFIX + "block"],
                             parent_topology_layer="SpineLayer"),
        NetworkTopologyLayer(topology_layer="AcceleratorLayer", label_key=[TOPOGRAPH_PREFIX + "accelerator"],
                             parent_topology_layer="BlockLayer"),
        NetworkTopologyLayer(topology_layer="NodeTopologyLayer", parent_topology_layer="AcceleratorLayer"),
    ]
    return ClusterNetworkTopology(metadata=ObjectMeta(name="default"),
                                  spec=ClusterNetworkTopologySpec(network_topology_spec=layers))


def _fed_tree() -> TopologyTree:
    tree = TopologyTree()
    tree.network_topology_upserted(_cnt())
    allocatable: Resources = {"cpu": 96_000, "memory": 2**40 * 1000, "pods": 110_000, "nvidia.com/gpu": 8_000}
    for index in range(NODES):
        tree.node_upserted(f"node-{index:05d}", _labels(index), allocatable)
    for index in range(0, NODES, 3):
        tree.usage_changed(f"node-{index:05d}", {"cpu": 8_000, "nvidia.com/gpu": 4_000}, 1)
    return tree


def _timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return (time.perf_counter() - start) * 1000


def main() -> None:
    builds: list[float] = []
    tree = _fed_tree()
    for _ in range(ROUNDS):
        fed = _fed_tree()  # feeding only records nodes; the structure is built by the first query
        builds.append(_timed(partial(getattr, fed, "root")))
        tree = fed
    rng = random.Random(7)
    names = tree.node_names
    lcas: list[float] = []
    for _ in range(ROUNDS):
        subset = rng.sample(names, LCA_SET)
        lcas.append(_timed(partial(tree.lca, subset)))
    block = rng.randrange(50)
    block_set = [f"node-{i:05d}" for i in range(block * 200, block * 200 + 200)] * 15
    block_lcas = [_timed(lambda: tree.lca(block_set)) for _ in range(ROUNDS)]
    calls = 200_000
    delta = {"cpu": 1_000, "nvidia.com/gpu": 1_000}
    start = time.perf_counter()
    for index in range(calls):
        tree.usage_changed(names[index % NODES], delta, 1 if index % 2 == 0 else -1)
    per_call_us = (time.perf_counter() - start) / calls * 1e6
    flush_ms = _timed(partial(getattr, tree.root, "used"))  # carries the pending deltas up every path
    feed = [_timed(_fed_tree) for _ in range(3)]
    print(f"topology tree: {NODES} nodes, {len(tree.levels) - 1} layers, {len(tree.domains)} domains")
    print(f"  feed {NODES} nodes (node_upserted + usage):  median {statistics.median(feed):7.2f} ms")
    print(f"  build structure + aggregates:           median {statistics.median(builds):7.2f} ms"
          f"  (min {min(builds):.2f}, target < 200)")
    print(f"  LCA of {LCA_SET} random nodes:             median {statistics.median(lcas):7.3f} ms"
          f"  (max {max(lcas):.3f}, target < 20)")
    print(f"  LCA of {len(block_set)} nodes in one block:      median {statistics.median(block_lcas):7.3f} ms")
    print(f"  usage_changed (fold hot path):          {per_call_us:7.3f} us/call")
    print(f"  first read of used after {calls} changes:  {flush_ms:7.2f} ms (aggregates brought up to date)")


if __name__ == "__main__":
    main()
