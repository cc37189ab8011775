"""Fixtures: a DevCluster per test, a kubernetes-asyncio client configured from its kubeconfig, and a plain
HTTP session on it (`http`, for what a typed client would not send: raw bodies, any content type)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import config

from devcluster import BackgroundDevCluster, DevCluster

from .kubectl import Kubectl


@pytest.fixture
async def cluster() -> AsyncIterator[DevCluster]:
    async with DevCluster(port=0, history=1000, kubelet_delay=0.01, bookmark_interval=0.2) as started:
        yield started


@pytest.fixture
async def http(cluster: DevCluster) -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(base_url=cluster.url) as session:
        yield session


@pytest.fixture
async def api(cluster: DevCluster, tmp_path: Path) -> AsyncIterator[Any]:
    path = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    api_client = await config.new_client_from_config(config_file=str(path))
    try:
        yield api_client
    finally:
        await api_client.close()



@pytest.fixture(scope="module")
def background(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BackgroundDevCluster, Kubectl]]:
    """A devcluster served from a thread for one test module, and kubectl configured for it."""
    root = tmp_path_factory.mktemp("kubectl")
    with BackgroundDevCluster(kubelet_delay=0.01) as started:
        yield started, Kubectl(started.write_kubeconfig(root / "kubeconfig"), root / "cache")
