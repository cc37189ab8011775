"""One devcluster and one toposched daemon per test module, driven with the real kubectl.

The ecosystem tests apply manifests written the way each project's own documentation writes them
(Koordinator, Volcano, scheduler-plugins, upstream Kubernetes, NVIDIA) with `kubectl apply -f`, and
read back what a user, a controller or cluster-autoscaler would read: where the pods landed, their
conditions, the PodGroup's status, the Events. Starting a cluster and a daemon costs about a second,
so a module shares one (`running`): each test uses its own namespace and deletes its objects before
it returns, so the next test finds the nodes free.

devcluster is served from a thread (`BackgroundDevCluster`), the daemon runs in another thread on
its own event loop (`BackgroundDaemon`), and the tests themselves are plain synchronous functions,
as a user at a shell would be. Waiting is on a condition with a deadline (`Ecosystem.wait_for`).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.lowlevel
import pytest

from daemon.cli.run import Daemon
from daemon.config import decode_config
from devcluster import BackgroundDevCluster
from devcluster.cluster import DevCluster
from tests.integration.daemon.harness import config_for
from tests.integration.devcluster.kubectl import KUBECTL, Kubectl

T = TypeVar("T")

# `make test` runs these (they are under tests/); `pytest -m ecosystem` runs them alone.
ecosystem = [pytest.mark.ecosystem, pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")]


class BackgroundDaemon:
    """`toposched run` in-process, on its own thread and event loop, until `stop()`."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.daemon = Daemon(decode_config(config), shutdown_grace_seconds=5.0)
        self._thread: threading.Thread | None = None
        self._token: anyio.lowlevel.EventLoopToken | None = None
        self._stop: anyio.Event | None = None
        self._started = threading.Event()
        self.error: BaseException | None = None

    def start(self, within: float = 30.0) -> None:
        def serve() -> None:
            async def main() -> None:
                self._token = anyio.lowlevel.current_token()
                self._stop = anyio.Event()
                async with anyio.create_task_group() as group:
                    await group.start(self.daemon.run, self._stop)
                    self._started.set()

            try:
                anyio.run(main)
            except BaseException as error:  # surfaced by `start` or `stop`
                self.error = error
            finally:
                self._started.set()

        self._thread = threading.Thread(target=serve, name="toposched", daemon=True)
        self._thread.start()
        if not self._started.wait(within) or self.error is not None:
            raise RuntimeError(f"the daemon did not start: {self.error!r}")
        deadline = time.monotonic() + within
        while not self.daemon.leading.is_set():
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError(f"the daemon did not start scheduling: {self.error!r}")
            time.sleep(0.02)

    def stop(self) -> None:
        if self._thread is None or self._token is None or self._stop is None:
            return
        if self._thread.is_alive():
            anyio.from_thread.run_sync(self._stop.set, token=self._token)
        self._thread.join(30)
        self._thread = None
        if self.error is not None:
            raise RuntimeError("the daemon failed") from self.error


class Ecosystem:
    """What a test reaches: kubectl, the cluster's objects, and a wait with a deadline."""

    def __init__(self, cluster: BackgroundDevCluster, kubectl: Kubectl, daemon: BackgroundDaemon) -> None:
        self.cluster = cluster
        self.kubectl = kubectl
        self.daemon = daemon

    def apply(self, manifests: str) -> str:
        """`kubectl apply -f -` of a YAML stream; its stdout."""
        return self.kubectl.run("apply", "-f", "-", stdin=manifests).stdout

    def delete(self, manifests: str) -> None:
        self.kubectl.run("delete", "--wait=false", "--ignore-not-found", "-f", "-", stdin=manifests)

    def delete_namespace_objects(self, namespace: str) -> None:
        """Delete every pod and gang object in `namespace` (graceful period 0), so the nodes are free again."""
        self.kubectl.run("delete", "pods", "--all", "-n", namespace, "--grace-period=0", "--force", "--wait=false")
        for kind in ("podgroups.scheduling.volcano.sh", "podgroups.scheduling.sigs.k8s.io",
                     "podgroups.scheduling.x-k8s.io", "podgroups.scheduling.k8s.io", "workloads.scheduling.k8s.io",
                     "podgroups.scheduling.run.ai"):
            self.kubectl.run("delete", kind, "--all", "-n", namespace, "--wait=false", "--ignore-not-found")
        self.wait_for(lambda: not self.objects("pods", namespace), what=f"the pods of {namespace} gone")

    def call(self, fn: Callable[[DevCluster], T]) -> T:
        return self.cluster.call(fn)

    def objects(self, resource: str, namespace: str = "") -> list[dict[str, Any]]:
        return self.call(lambda c: c.store.list(resource, namespace))

    def find(self, resource: str, name: str, namespace: str = "") -> dict[str, Any] | None:
        return self.call(lambda c: c.store.find(resource, name, namespace))

    def events(self, namespace: str, name: str = "", kind: str = "") -> list[dict[str, Any]]:
        """Events about one object (or every one in the namespace), as `kubectl get events` lists them."""
        return [e for e in self.objects("events", namespace)
                if (not name or e["involvedObject"]["name"] == name)
                and (not kind or e["involvedObject"]["kind"] == kind)]

    def node_of(self, pod: str, namespace: str) -> str:
        found = self.find("pods", pod, namespace)
        return str(((found or {}).get("spec") or {}).get("nodeName") or "")

    def wait_bound(self, names: list[str], namespace: str) -> dict[str, str]:
        """Wait until every pod is bound; where each landed."""
        self.wait_for(lambda: all(self.node_of(name, namespace) for name in names), what=f"{names} bound")
        return {name: self.node_of(name, namespace) for name in names}

    def wait_pending(self, names: list[str], namespace: str, says: str = "",
                     reason: str = "Unschedulable") -> dict[str, str]:
        """Wait until the scheduler has marked every pod PodScheduled=False with `reason` (its message
        containing `says`), then check none is bound; each pod's message. A gang short of members is
        marked NotReadyForScheduling (but scheduler-plugins' Unschedulable)."""
        def marked() -> bool:
            for name in names:
                condition = pod_scheduled(self.find("pods", name, namespace))
                if condition.get("reason") != reason or says not in condition.get("message", ""):
                    return False
            return True

        self.wait_for(marked, what=f"{names} marked unschedulable ({says!r})")
        assert not [name for name in names if self.node_of(name, namespace)], "a pod bound while it must wait"
        return {name: pod_scheduled(self.find("pods", name, namespace))["message"] for name in names}

    def wait_for(self, condition: Callable[[], bool], within: float = 20.0, what: str = "condition") -> None:
        deadline = time.monotonic() + within
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {within}s waiting for {what}")
            time.sleep(0.05)


@contextmanager
def running(root: Path, nodes: list[dict[str, Any]], topology: str = "", *, kubelet_resize_delay: float = 0.05,
            cluster_options: dict[str, Any] | None = None, **overrides: Any) -> Iterator[Ecosystem]:
    """A devcluster with `nodes` (registered as kubelets register them) and `topology` (a YAML stream
    applied with kubectl, e.g. HyperNodes), and a daemon scheduling on it. `kubelet_resize_delay`: how
    long devcluster's kubelet takes to apply an in-place resize it has allocated; `cluster_options`: more
    `DevCluster` options (e.g. the gang scheduler its training-operator is started with)."""
    with BackgroundDevCluster(kubelet_delay=0.01, kubelet_resize_delay=kubelet_resize_delay,
                              **(cluster_options or {})) as cluster:
        kubeconfig = cluster.write_kubeconfig(root / "kubeconfig")
        kubectl = Kubectl(kubeconfig, root / "kubectl-cache")
        cluster.call(lambda c: c.load_objects(nodes))
        if topology:
            kubectl.run("apply", "-f", "-", stdin=topology)
        daemon = BackgroundDaemon(config_for(kubeconfig, root / "log", election=False, **overrides))
        daemon.start()
        try:
            yield Ecosystem(cluster, kubectl, daemon)
        finally:
            daemon.stop()


def gpu_nodes(names: list[str], labels: Callable[[int], dict[str, str]] = lambda _: {},
              gpus: int = 8) -> list[dict[str, Any]]:
    """Nodes as a GPU cluster's kubelets register them: allocatable with `nvidia.com/gpu`, Ready."""
    resources = {"cpu": "96", "memory": "1Ti", "pods": "110", "nvidia.com/gpu": str(gpus)}
    return [{"apiVersion": "v1", "kind": "Node",
             "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels(index)}},
             "status": {"capacity": resources, "allocatable": resources,
                        "conditions": [{"type": "Ready", "status": "True"}]}}
            for index, name in enumerate(names)]


def pod_yaml(name: str, namespace: str, *, gpus: str = "8", labels: dict[str, str] | None = None,
             annotations: dict[str, str] | None = None, spec: str = "", image: str = "registry.k8s.io/pause:3.10",
             request: bool = False) -> str:
    """One pod the way GPU jobs write theirs: the GPU asked for in `limits` only (as NVIDIA's device
    plugin docs write it; the API server defaults the request from the limit), unless `request`.
    `spec` is extra YAML under `spec:` (indented two spaces), e.g. a protocol's join field."""
    meta = ""
    if labels:
        meta += "\n  labels:" + "".join(f"\n    {key}: {json.dumps(value)}" for key, value in labels.items())
    if annotations:
        meta += "\n  annotations:" + "".join(f"\n    {key}: {json.dumps(value)}" for key, value in annotations.items())
    resources = f"""
      limits:
        nvidia.com/gpu: {gpus}"""
    if request:
        resources += f"""
      requests:
        nvidia.com/gpu: {gpus}"""
    return f"""apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: {namespace}{meta}
spec:
  schedulerName: toposched{spec}
  containers:
  - name: worker
    image: {image}
    resources:{resources}
"""


def priority_classes_yaml(**values: int) -> str:
    """PriorityClasses named by the keywords (underscores as dashes), each of its value."""
    return stream(*(f"apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata:\n  name: "
                    f"{name.replace('_', '-')}\nvalue: {value}\n" for name, value in values.items()))


def namespace_yaml(namespace: str) -> str:
    return f"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {namespace}\n"


def stream(*documents: str) -> str:
    return "---\n".join(documents)


def pod_scheduled(pod: dict[str, Any] | None) -> dict[str, Any]:
    """The pod's PodScheduled condition ({} when it has none)."""
    conditions = ((pod or {}).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == "PodScheduled"), {})
