"""`toposched quota show --scenario`: each quota tree with min, max, usage, runtime and pending pods."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from daemon.cli.quota import main

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def test_the_tree_of_a_hierarchical_scenario_with_runtime_shares(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", "--scenario", str(SCENARIOS / "quota-hierarchical-min.yaml"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    [tree] = doc["trees"]
    assert tree["dialect"] == "koordinator"
    by_name = {q["name"]: q for q in tree["quotas"]}
    research = by_name["research"]
    assert [c["name"] for c in research["children"]] == ["nlp", "vision"]
    assert research["min"] == {"nvidia.com/gpu": "16"} and research["max"] == {"nvidia.com/gpu": "32"}
    # every gang pending (nothing runs before the simulation): runtime follows the requests and mins
    assert research["pending"] == 6 and by_name["prod"]["pending"] == 4
    nlp = research["children"][0]
    assert nlp["runtime"] == {"nvidia.com/gpu": "8"} and nlp["used"] == {}


def test_running_pods_count_as_used_and_problems_are_listed(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    objects = [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n0"},
         "status": {"allocatable": {"cpu": "8", "pods": "110", "nvidia.com/gpu": "8"}}},
        {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "ElasticQuota",
         "metadata": {"name": "quota", "namespace": "team-a"},
         "spec": {"min": {"nvidia.com/gpu": "6"}, "max": {"nvidia.com/gpu": "4"}}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "team-a"},
         "spec": {"nodeName": "n0", "containers": [{"name": "c", "image": "x", "resources": {
             "requests": {"nvidia.com/gpu": "2"}, "limits": {"nvidia.com/gpu": "2"}}}]}},
    ]
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump_all(objects))
    assert main(["show", "--scenario", str(scenario), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    [quota] = doc["trees"][0]["quotas"]
    assert quota["used"] == {"nvidia.com/gpu": "2"} and quota["min"] == {"nvidia.com/gpu": "4"}
    assert any("spec.min[nvidia.com/gpu]: is above spec.max" in p for p in doc["problems"])
    assert main(["show", "--scenario", str(scenario)]) == 0
    text = capsys.readouterr().out
    assert "ElasticQuota team-a/quota" in text and "used 2" in text and "problem" in text


def test_a_scenario_without_quotas_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", "--scenario", str(SCENARIOS / "gang-all-or-nothing.yaml")]) == 0
    assert "no quota objects" in capsys.readouterr().out


def test_kai_queues_of_a_node_pool_share_that_pool_s_nodes(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    # Two 8-GPU nodes, one in pool gpu-a by the label the daemon is configured with; a queue in that pool
    # (overQuotaWeight 1) and one in the default pool (3) both ask for 16 GPUs: each gets its own pool's 8.
    def node(name: str, labels: dict[str, str]) -> dict[str, object]:
        return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
                "status": {"allocatable": {"cpu": "8", "memory": "64Gi", "pods": "110", "nvidia.com/gpu": "8"}}}

    def queue(name: str, labels: dict[str, str], weight: int) -> dict[str, object]:
        unlimited = {"quota": -1, "limit": -1, "overQuotaWeight": 1}
        return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name, "labels": labels},
                "spec": {"resources": {"cpu": unlimited, "memory": unlimited,
                                       "gpu": {"quota": 0, "limit": -1, "overQuotaWeight": weight}}}}

    def job(name: str, labels: dict[str, str]) -> list[dict[str, object]]:
        group: dict[str, object] = {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
                                    "metadata": {"name": name, "namespace": "ml", "labels": labels},
                                    "spec": {"minMember": 2, "queue": name}}
        limits = {"limits": {"nvidia.com/gpu": "8"}, "requests": {"nvidia.com/gpu": "8"}}
        pods: list[dict[str, object]] = [
            {"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": f"{name}-{index}", "namespace": "ml", "annotations": {"pod-group-name": name}},
             "spec": {"schedulerName": "toposched", "containers": [{"name": "c", "image": "x", "resources": limits}]}}
            for index in range(2)]
        return [group, *pods]

    pooled = {"example.com/pool": "gpu-a"}
    objects = [node("n0", pooled), node("n1", {}), queue("qa", pooled, 1), queue("qd", {}, 3),
               *job("qa", pooled), *job("qd", {})]
    scenario = tmp_path / "pools.yaml"
    scenario.write_text(yaml.safe_dump_all(objects))

    def runtimes(*flags: str) -> dict[str, object]:
        assert main(["show", "--scenario", str(scenario), "--json", *flags]) == 0
        [tree] = json.loads(capsys.readouterr().out)["trees"]
        return {q["name"]: q["runtime"].get("nvidia.com/gpu") for q in tree["quotas"]}

    assert runtimes("--kai-node-pool-label", "example.com/pool") == {"qa": "8", "qd": "8"}
    # by KAI's default key there are no pools: the labels mean nothing, and the two share all 16 GPUs by weight
    assert runtimes() == {"qa": "4", "qd": "12"}


def test_a_pool_label_that_is_no_label_key_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    scenario = str(SCENARIOS / "quota-hierarchical-min.yaml")
    assert main(["show", "--scenario", scenario, "--kai-node-pool-label", "pool name"]) == 2
    assert "--kai-node-pool-label: expected a node label key" in capsys.readouterr().err
