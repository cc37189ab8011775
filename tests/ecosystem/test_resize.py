"""In-place pod resize as a 1.33+ cluster does it, end to end: `kubectl patch --subresource resize` on a running
pod, devcluster's kubelet allocating the new requests at once and applying them a few seconds later, and the
daemon counting the pod as kube-scheduler does meanwhile (the larger of its spec's requests and what the kubelet
allocated and applied): a pod of ours waits for the cpu a resize down gives back until the kubelet has
really given it back, and is placed the moment it has."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.ecosystem.harness import Ecosystem, ecosystem, namespace_yaml, pod_scheduled, running, stream

pytestmark = ecosystem

RESIZE_SECONDS = 3.0  # how long the kubelet takes to apply a resize here: the window the daemon must wait out


@pytest.fixture(scope="module")
def eco(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ecosystem]:
    resources = {"cpu": "8", "memory": "64Gi", "pods": "110"}
    nodes = [{"apiVersion": "v1", "kind": "Node",
              "metadata": {"name": "cpu-0", "labels": {"kubernetes.io/hostname": "cpu-0"}},
              "status": {"capacity": resources, "allocatable": resources,
                         "conditions": [{"type": "Ready", "status": "True"}]}}]
    with running(tmp_path_factory.mktemp("resize"), nodes, kubelet_resize_delay=RESIZE_SECONDS) as started:
        yield started


def pod_yaml(name: str, namespace: str, cpu: str, *, node: str = "", scheduler: str = "toposched") -> str:
    placed = f"\n  nodeName: {node}" if node else ""
    return f"""apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: {namespace}
spec:
  schedulerName: {scheduler}{placed}
  containers:
  - name: main
    image: registry.k8s.io/pause:3.10
    resources:
      requests:
        cpu: "{cpu}"
        memory: 1Gi
      limits:
        memory: 1Gi
"""


def container_status(pod: dict[str, Any] | None) -> dict[str, Any]:
    statuses = ((pod or {}).get("status") or {}).get("containerStatuses") or [{}]
    return dict(statuses[0])


def test_a_pod_of_ours_waits_for_the_cpu_a_resize_down_gives_back_until_the_kubelet_has_applied_it(
        eco: Ecosystem) -> None:
    namespace = "resize-down"
    eco.apply(stream(namespace_yaml(namespace), pod_yaml("inference", namespace, "6", node="cpu-0",
                                                         scheduler="default-scheduler")))
    eco.wait_for(lambda: "allocatedResources" in container_status(eco.find("pods", "inference", namespace)),
                 what="the kubelet running the pod with its allocation")
    eco.kubectl.run("patch", "pod", "inference", "-n", namespace, "--subresource", "resize", "--patch",
                    json.dumps({"spec": {"containers": [{"name": "main", "resources": {"requests": {"cpu": "2"}}}]}}))
    resized_at = time.monotonic()
    eco.apply(pod_yaml("trainer", namespace, "4"))
    # The kubelet has allocated 2 cpus at once but still applies 6 (for RESIZE_SECONDS): toposched counts 6,
    # as kube-scheduler does, tries the pod and says it does not fit.
    eco.wait_for(lambda: pod_scheduled(eco.find("pods", "trainer", namespace)).get("reason") == "Unschedulable",
                 what="the pod refused while the resize is applied")
    inference = eco.find("pods", "inference", namespace)
    assert container_status(inference)["allocatedResources"]["cpu"] == "2"
    assert container_status(inference)["resources"]["requests"]["cpu"] == "6"
    placed = eco.wait_bound(["trainer"], namespace)
    assert placed == {"trainer": "cpu-0"}
    assert time.monotonic() - resized_at >= RESIZE_SECONDS * 0.9
    assert container_status(eco.find("pods", "inference", namespace))["resources"]["requests"]["cpu"] == "2"
    eco.wait_for(lambda: ((eco.find("pods", "trainer", namespace) or {}).get("status") or {}).get("phase") == "Running",
                 what="the kubelet admitting the pod placed")
    eco.delete_namespace_objects(namespace)
