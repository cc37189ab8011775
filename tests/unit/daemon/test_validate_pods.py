"""`toposched validate` on Pod manifests: read as the API server stores them, a pod of this scheduler
asking for a rule toposched does not place by is reported in the daemon's words; others pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.cli.validate import main


def validated(path: Path, manifests: str, capsys: pytest.CaptureFixture[str]) -> list[str]:
    """What `toposched validate` prints for `manifests` written to `path` (it must find problems: exit 1)."""
    path.write_text(manifests)
    assert main([str(path)]) == 1
    return capsys.readouterr().out.splitlines()


def test_a_pod_asking_for_rules_toposched_does_not_place_by_is_reported_before_it_is_applied(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "job.yaml"
    lines = validated(path, """
apiVersion: v1
kind: Pod
metadata: {name: worker-0, namespace: ml, labels: {app: trainer}}
spec:
  schedulerName: toposched
  hostNetwork: true
  affinity:
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - {labelSelector: {matchLabels: {app: trainer}}, namespaceSelector: {matchLabels: {team: ml}},
         topologyKey: kubernetes.io/hostname}
  containers:
  - name: trainer
    image: trainer:1.0
    ports: [{containerPort: 29500}]
    resources: {limits: {nvidia.com/gpu: "8"}}
---
apiVersion: v1
kind: Pod
metadata: {name: theirs}
spec:
  hostNetwork: true
  containers: [{name: main, image: web:1.0, ports: [{containerPort: 80}]}]
---
apiVersion: v1
kind: Pod
metadata: {name: plain}
spec: {schedulerName: toposched, containers: [{name: main, image: web:1.0, ports: [{containerPort: 80}]}]}
""", capsys)
    assert lines == [
        f"{path}#1: Pod ml/worker-0: spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]"
        ".namespaceSelector: a namespaceSelector chooses namespaces by their labels, and toposched reads no Namespace "
        "objects: the term is read as looking in every namespace (the pod keeps away from the pods its selector "
        "matches in every namespace)",
        "1 problem in 2 objects",
    ]


def test_a_host_port_of_a_container_is_placed_by_and_only_an_init_containers_is_reported(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "job.yaml"
    lines = validated(path, """
apiVersion: v1
kind: Pod
metadata: {name: worker-0, namespace: ml}
spec:
  schedulerName: toposched
  hostNetwork: true
  initContainers: [{name: warmup, image: trainer:1.0, ports: [{containerPort: 8080}]}]
  containers: [{name: trainer, image: trainer:1.0, ports: [{containerPort: 29500}]}]
""", capsys)
    assert lines == [
        f"{path}#1: Pod ml/worker-0: spec.initContainers[0].ports[0].hostPort: host port 8080 of an init container "
        "is not considered by toposched (nor by kube-scheduler): a pod holding it may be placed on the same node",
        "1 problem in 1 object",
    ]


def test_a_pod_quantity_the_api_server_cannot_decode_is_a_problem_naming_the_field(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.yaml"
    [line, summary] = validated(path, """
apiVersion: v1
kind: Pod
metadata: {name: p}
spec: {schedulerName: toposched, containers: [{name: main, resources: {limits: {cpu: lots}}}]}
""", capsys)
    assert line.startswith(f"{path}#1: Pod default/p: spec.containers[0].resources.limits[cpu]: ")
    assert line.endswith("(the API server refuses it)") and summary == "1 problem in 0 objects"


def test_placement_rules_the_api_server_refuses_are_reported_in_its_words_and_merged_keys_pass(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "web.yaml"
    lines = validated(path, """
apiVersion: v1
kind: Pod
metadata: {name: web-0, labels: {app: web, pod-template-hash: 5d8f9c}}
spec:
  schedulerName: toposched
  topologySpreadConstraints:
  - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule,
     labelSelector: {matchLabels: {app: web}}, matchLabelKeys: [pod-template-hash]}
  - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule}
  affinity:
    podAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - labelSelector: {matchLabels: {app: cache}}
  containers: [{name: main, image: web:1.0}]
""", capsys)
    refuses = "(the API server refuses it)"
    assert lines == [
        f"{path}#1: Pod default/web-0: spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]"
        f".topologyKey: Required value: can not be empty {refuses}",
        f"{path}#1: Pod default/web-0: spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]"
        f'.topologyKey: Invalid value: "": name part must be non-empty {refuses}',
        f"{path}#1: Pod default/web-0: spec.topologySpreadConstraints[0].{{topologyKey, whenUnsatisfiable}}: "
        f'Duplicate value: "{{topology.kubernetes.io/zone, DoNotSchedule}}" {refuses}',
        "3 problems in 1 object",
    ]


def test_a_pod_asking_for_a_gpu_share_another_scheduler_allocates_is_reported_before_it_is_applied(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Koordinator's documented GPU share (limits, which the API server copies to requests) and KAI's
    # documented fractional GPU: their schedulers pick the GPU; toposched would bind the pod without one.
    path = tmp_path / "share.yaml"
    lines = validated(path, """
apiVersion: v1
kind: Pod
metadata: {name: half-gpu, namespace: ml}
spec:
  schedulerName: toposched
  containers:
  - name: main
    image: trainer:1.0
    resources: {limits: {koordinator.sh/gpu-core: "50", koordinator.sh/gpu-memory-ratio: "50"}}
---
apiVersion: v1
kind: Pod
metadata: {name: fraction, namespace: ml, annotations: {gpu-fraction: "0.5"}}
spec:
  schedulerName: toposched
  containers: [{name: main, image: trainer:1.0}]
""", capsys)
    assert lines[0].startswith(f"{path}#1: Pod ml/half-gpu: spec.containers[0].resources.requests"
                               "[koordinator.sh/gpu-core]: koordinator.sh/gpu-core is a device Koordinator's "
                               "DeviceShare allocates in koord-scheduler"), lines
    assert lines[1].startswith(f"{path}#2: Pod ml/fraction: metadata.annotations[gpu-fraction]: a fractional GPU is "
                               "a device KAI Scheduler allocates"), lines
    assert lines[2] == "2 problems in 2 objects"
