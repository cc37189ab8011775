"""`toposched validate` on quota manifests: each problem with file, document, object and field, and
the rule that then applies; valid quotas of every dialect pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.cli.validate import main

OPS_EXAMPLES = Path(__file__).resolve().parents[3] / "ops" / "examples"


def test_the_quota_examples_of_every_dialect_are_valid(capsys: pytest.CaptureFixture[str]) -> None:
    files = [str(OPS_EXAMPLES / f"quota-{name}.yaml") for name in ("koordinator", "capacity-scheduling", "volcano")]
    assert main(files) == 0
    assert capsys.readouterr().out.startswith("OK: ")


def test_bad_quotas_and_a_pod_naming_a_missing_quota_are_reported(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "quotas.yaml"
    path.write_text("""
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: ElasticQuota
metadata: {name: team-a, namespace: ml, labels: {quota.scheduling.koordinator.sh/parent: research}}
spec: {min: {nvidia.com/gpu: "64"}, max: {nvidia.com/gpu: "32"}}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: q1}
spec: {parent: q1, capability: {nvidia.com/gpu: "-8"}}
---
apiVersion: v1
kind: Pod
metadata: {name: trainer, labels: {quota.scheduling.koordinator.sh/name: team-b}}
spec: {schedulerName: toposched, containers: [{name: main}]}
""")
    assert main([str(path)]) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"{path}#1: ElasticQuota ml/team-a: spec.min[nvidia.com/gpu]: is above spec.max[nvidia.com/gpu]; cut to max",
        f"{path}#1: ElasticQuota ml/team-a: metadata.labels[quota.scheduling.koordinator.sh/parent]: "
        "parent 'research' does not exist; it is a top quota instead",
        f"{path}#2: Queue q1: spec.capability[nvidia.com/gpu]: '-8' is negative; counted as 0",
        f"{path}#2: Queue q1: spec.parent: parent 'q1' is the quota itself; it is a top quota instead",
        f"{path}#3: Pod default/trainer: metadata.labels[quota.scheduling.koordinator.sh/name]: "
        "ElasticQuota 'team-b' not found; the pod is not placed until it exists",
        "5 problems in 3 objects",  # the pod is checked too
    ]


def test_a_bad_kai_queue_and_a_kai_podgroup_naming_a_missing_queue_are_reported(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "kai.yaml"
    path.write_text("""
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: research}
spec:
  parentQueue: research
  resources:
    cpu: {quota: -5, limit: -1, overQuotaWeight: 1}
    memory: {quota: 0, limit: -1, overQuotaWeight: 1}
    gpu: {quota: 8, overQuotaWeight: 1}
---
apiVersion: scheduling.run.ai/v2alpha2
kind: PodGroup
metadata: {name: train, namespace: ml}
spec: {minMember: 2, queue: reserch}
""")
    assert main([str(path)]) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"{path}#1: KaiQueue research: spec.resources.cpu.quota: -5 is negative (only -1 (unlimited) may be); "
        "counted as 0",
        f"{path}#1: KaiQueue research: spec.resources.gpu.limit: is absent, which KAI reads as 0: no pod of this "
        "queue that asks for nvidia.com/gpu is placed (-1 is no limit)",
        f"{path}#1: KaiQueue research: spec.parentQueue: parent 'research' is the quota itself; it is a top quota "
        "instead",
        f"{path}#2: KaiPodGroup ml/train: spec.queue: KAI Queue 'reserch' not found; its pods are not placed until "
        "it exists",
        "4 problems in 2 objects",
    ]


def test_a_kai_job_naming_a_queue_of_another_node_pool_is_reported_by_the_pool_label_given(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "pools.yaml"
    path.write_text("""
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: gpu-team, labels: {example.com/pool: gpu-nodes}}
spec:
  resources:
    cpu: {quota: -1, limit: -1, overQuotaWeight: 1}
    memory: {quota: -1, limit: -1, overQuotaWeight: 1}
    gpu: {quota: 8, limit: -1, overQuotaWeight: 1}
---
apiVersion: scheduling.run.ai/v2alpha2
kind: PodGroup
metadata: {name: train, namespace: ml, labels: {example.com/pool: ""}}
spec: {minMember: 2, queue: gpu-team}
""")
    # by KAI's default key, neither object is in a pool: nothing to say
    assert main([str(path)]) == 0
    capsys.readouterr()
    assert main([str(path), "--kai-node-pool-label", "example.com/pool"]) == 1
    out = capsys.readouterr().out
    assert ("KaiPodGroup ml/train: spec.queue: KAI queue 'gpu-team' is in node pool gpu-nodes (its label "
            "example.com/pool), the job in default") in out, out
    assert "KaiPodGroup ml/train: metadata.labels[example.com/pool]: is empty" in out, out


def test_a_pool_label_that_is_no_label_key_is_a_usage_error(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("")
    assert main([str(path), "--kai-node-pool-label", "pool name"]) == 2
    assert "--kai-node-pool-label: expected a node label key" in capsys.readouterr().err
