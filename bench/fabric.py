"""The synthetic spine > block > NVLink > node fabric the placement and preemption benchmarks share."""

from __future__ import annotations

from events.builders import node
from events.model import NodeUpserted
from state.cluster import ClusterState

SPINES, BLOCKS, NVLINKS, NODES = 5, 25, 5, 8  # 5,000 nodes of 8 GPUs in 4 layers


def add_fabric(state: ClusterState, spines: int = SPINES, blocks: int = BLOCKS, nvlinks: int = NVLINKS,
               nodes: int = NODES) -> list[str]:
    """Fold `spines x blocks x nvlinks x nodes` 8-GPU nodes with topograph labels; return their names in order."""
    names: list[str] = []
    for s in range(spines):
        for b in range(blocks):
            for a in range(nvlinks):
                for i in range(nodes):
                    name = f"n-{s}-{b}-{a}-{i}"
                    names.append(name)
                    state.apply(NodeUpserted(node=node(name, spine=f"s{s}", block=f"s{s}-b{b}",
                                                       accelerator=f"s{s}-b{b}-a{a}")))
    return names
