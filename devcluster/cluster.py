"""`DevCluster`: the store, the HTTP server, the fake kubelet, pod GC, the volume controllers, the protection
controllers (storage objects, PodGroups), the disruption controller, the node lifecycle and taint eviction
controllers, Volcano's job controller, Kubeflow's training-operator and the fault injector, together.

    async with DevCluster(port=0, history=10_000) as cluster:
        cluster.write_kubeconfig(path)      # for kubernetes-asyncio or kubectl
        cluster.store.create({...})         # direct writes, no HTTP
        cluster.faults.fail_next(2, 429)
        cluster.audit.since(0)              # every write request answered, with its User-Agent

`BackgroundDevCluster` runs one in a daemon thread with its own event loop, for synchronous callers
(kubectl-driven tests, scripts); `call(fn)` runs `fn(cluster)` on that loop and returns its result.

Binds 127.0.0.1 only. Owns the lifecycle; the semantics live in the store and the server.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import socket
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import yaml
from aiohttp import web

from devcluster.audit import AuditLog
from devcluster.controller import StoreController
from devcluster.disruption_controller import DisruptionController
from devcluster.ephemeral import EphemeralVolumeController
from devcluster.faults import FaultInjector
from devcluster.kubelet import FakeKubelet, running_status
from devcluster.node_lifecycle import NodeLifecycleController, TaintEvictionController
from devcluster.podgc import PodGarbageCollector
from devcluster.protection import PodGroupProtectionController, StorageProtectionController
from devcluster.server import ApiServer
from devcluster.store import Store, now_rfc3339
from devcluster.training_operator_controller import TrainingOperatorController
from devcluster.volcano_job_controller import VolcanoJobController
from devcluster.volumes import VolumeController

T = TypeVar("T")
HOST = "127.0.0.1"


def kubeconfig(url: str, namespace: str = "default") -> dict[str, Any]:
    """A kubeconfig (as a dict) whose current context talks to `url` without credentials."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "clusters": [{"name": "devcluster", "cluster": {"server": url}}],
        "users": [{"name": "devcluster", "user": {}}],
        "contexts": [{"name": "devcluster", "context": {"cluster": "devcluster", "user": "devcluster",
                                                         "namespace": namespace}}],
        "current-context": "devcluster",
    }


class DevCluster:
    """An embedded Kubernetes API server on 127.0.0.1 (use as `async with`)."""

    def __init__(
        self,
        *,
        port: int = 0,
        history: int = 10_000,
        kubelet: bool = True,
        kubelet_delay: float = 0.05,
        kubelet_resize_delay: float = 0.05,
        pod_gc: bool = True,
        volumes: bool = True,
        disruption: bool = True,
        node_lifecycle: bool = True,
        volcano_jobs: bool = True,
        training_operator: str | bool = "volcano",
        bookmark_interval: float = 1.0,
        autocreate_namespaces: bool = True,
        fault_seed: int = 0,
    ) -> None:
        self.store = Store(history, autocreate_namespaces=autocreate_namespaces)
        self.faults = FaultInjector(self.store.close_watches, seed=fault_seed)
        self.audit = AuditLog()
        self.kubelet: FakeKubelet | None = \
            FakeKubelet(self.store, kubelet_delay, kubelet_resize_delay) if kubelet else None
        self.pod_gc: PodGarbageCollector | None = PodGarbageCollector(self.store) if pod_gc else None
        # The PV controller with its provisioners, and the ephemeral volume controller (volumes=False: neither).
        self.volumes: VolumeController | None = VolumeController(self.store) if volumes else None
        self.ephemeral_volumes: EphemeralVolumeController | None = \
            EphemeralVolumeController(self.store) if volumes else None
        # The pvc-protection and pv-protection finalizers (volumes=False: not kept).
        self.protection: StorageProtectionController | None = \
            StorageProtectionController(self.store) if volumes else None
        # The podgroup-protection finalizer taken off deleted Workload API PodGroups no pod runs in.
        self.pod_group_protection = PodGroupProtectionController(self.store)
        # PodDisruptionBudget status (disruption=False: none written but by evictions' bookkeeping).
        self.disruption: DisruptionController | None = DisruptionController(self.store) if disruption else None
        # The node lifecycle controller's taints (conditions, spec.unschedulable, not-ready / unreachable NoExecute)
        # and the taint eviction controller that deletes the pods not tolerating NoExecute taints
        # (node_lifecycle=False: neither).
        self.node_lifecycle: NodeLifecycleController | None = \
            NodeLifecycleController(self.store) if node_lifecycle else None
        self.taint_eviction: TaintEvictionController | None = \
            TaintEvictionController(self.store) if node_lifecycle else None
        # Volcano's job controller: a vcjob's PodGroup, and its pods once the PodGroup is enqueued
        # (volcano_jobs=False: jobs are stored only).
        self.volcano_jobs: VolcanoJobController | None = VolcanoJobController(self.store) if volcano_jobs else None
        # Kubeflow's training-operator (v1 jobs) started with --gang-scheduler-name=<training_operator>: "volcano"
        # (True too) a job's Volcano PodGroup, and its pods once the PodGroup is enqueued; another name, a
        # scheduling.x-k8s.io PodGroup and the pods at once, for that scheduler; "" no gang scheduling
        # (training_operator=False: not run, jobs are stored only).
        gang_scheduler = "volcano" if training_operator is True else training_operator
        self.training_operator: TrainingOperatorController | None = \
            TrainingOperatorController(self.store, gang_scheduler) if isinstance(gang_scheduler, str) else None
        self._requested_port = port
        self._bookmark_interval = bookmark_interval
        self._runner: web.ServerRunner | None = None
        self.server: ApiServer | None = None
        self.port = 0
        self._loaded_ips = itertools.count(1)

    def _controllers(self) -> list[StoreController]:
        """The controllers turned on, in the order they start."""
        found: list[StoreController | None] = [self.pod_gc, self.volumes, self.ephemeral_volumes, self.protection,
                                               self.pod_group_protection, self.disruption, self.node_lifecycle,
                                               self.taint_eviction, self.volcano_jobs, self.training_operator]
        return [controller for controller in found if controller is not None]

    @property
    def url(self) -> str:
        if not self.port:
            raise RuntimeError("the cluster is not started")
        return f"http://{HOST}:{self.port}"

    async def start(self) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((HOST, self._requested_port))
        self.port = sock.getsockname()[1]
        self.server = ApiServer(self.store, self.faults, bookmark_interval=self._bookmark_interval,
                                address=f"{HOST}:{self.port}", audit=self.audit)
        self._runner = web.ServerRunner(self.server.http_server(), handle_signals=False, shutdown_timeout=1.0)
        await self._runner.setup()
        await web.SockSite(self._runner, sock).start()
        if self.kubelet is not None:
            self.kubelet.start()
        for controller in self._controllers():
            controller.start()

    async def stop(self) -> None:
        if self.kubelet is not None:
            self.kubelet.stop()
        for controller in self._controllers():
            controller.stop()
        self.store.close_watches()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> DevCluster:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.stop()

    def kubeconfig(self, namespace: str = "default") -> dict[str, Any]:
        return kubeconfig(self.url, namespace)

    def write_kubeconfig(self, path: str | Path, namespace: str = "default") -> Path:
        """Write a kubeconfig for this cluster to `path`; returns the path."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(yaml.safe_dump(self.kubeconfig(namespace), sort_keys=False))
        return target

    def load_objects(self, objects: Iterable[dict[str, Any]],
                     warnings: list[str] | None = None) -> list[dict[str, Any]]:
        """Create each object in order as a cluster holds it (`Store.create`); pods with spec.nodeName and no
        phase are created Running there. `warnings` receives what a real API server would have refused."""
        stored = []
        for obj in objects:
            spec = obj.get("spec") or {}
            if obj.get("kind") == "Pod" and obj.get("apiVersion") == "v1" and spec.get("nodeName") \
                    and not (obj.get("status") or {}).get("phase"):
                number = next(self._loaded_ips)
                pod_ip = f"10.{128 + ((number >> 16) & 127)}.{(number >> 8) & 255}.{number & 255}"
                obj = {**obj, "status": running_status(obj, "192.168.0.1", pod_ip, now_rfc3339())}
            stored.append(self.store.create(obj, warnings=warnings))
        return stored


class BackgroundDevCluster:
    """A `DevCluster` served from a daemon thread (use as `with`); for synchronous callers."""

    def __init__(self, **options: Any) -> None:
        self._options = options
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._cluster: DevCluster | None = None

    @property
    def cluster(self) -> DevCluster:
        """The cluster; touch its store or faults only through `call` (they belong to its loop)."""
        if self._cluster is None:
            raise RuntimeError("the cluster is not started")
        return self._cluster

    @property
    def url(self) -> str:
        return self.cluster.url

    def write_kubeconfig(self, path: str | Path, namespace: str = "default") -> Path:
        return self.cluster.write_kubeconfig(path, namespace)

    def start(self) -> None:
        started: concurrent.futures.Future[DevCluster] = concurrent.futures.Future()
        self._loop = asyncio.new_event_loop()

        def serve() -> None:
            assert self._loop is not None
            asyncio.set_event_loop(self._loop)

            async def boot() -> DevCluster:
                cluster = DevCluster(**self._options)
                await cluster.start()
                return cluster

            try:
                started.set_result(self._loop.run_until_complete(boot()))
            except BaseException as exc:  # surfaced to the starting thread
                started.set_exception(exc)
                return
            self._loop.run_forever()

        self._thread = threading.Thread(target=serve, name="devcluster", daemon=True)
        self._thread.start()
        self._cluster = started.result(timeout=30)

    def call(self, fn: Callable[[DevCluster], T], timeout: float = 30.0) -> T:
        """Run `fn(cluster)` on the cluster's loop and return its result (or raise its exception)."""
        if self._loop is None:
            raise RuntimeError("the cluster is not started")
        cluster = self.cluster

        async def run() -> T:
            return fn(cluster)

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(timeout)

    def stop(self) -> None:
        if self._loop is None or self._cluster is None:
            return
        asyncio.run_coroutine_threadsafe(self._cluster.stop(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(30)
        self._loop.close()
        self._loop = None
        self._cluster = None

    def __enter__(self) -> BackgroundDevCluster:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
