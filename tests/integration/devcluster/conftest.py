"""Fixtures: a DevCluster per test and a kubernetes-asyncio client configured from its kubeconfig."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import config

from devcluster import DevCluster


@pytest.fixture
async def cluster() -> AsyncIterator[DevCluster]:
    async with DevCluster(port=0, history=1000, kubelet_delay=0.01, bookmark_interval=0.2) as started:
        yield started


@pytest.fixture
async def api(cluster: DevCluster, tmp_path: Path) -> AsyncIterator[Any]:
    path = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    api_client = await config.new_client_from_config(config_file=str(path))
    try:
        yield api_client
    finally:
        await api_client.close()

