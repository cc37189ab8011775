"""`toposched simulate` and `toposched devcluster --load` read a scenario through one loader: the same files
(YAML documents, `kind: List`, JSON, NDJSON, directories) give the same objects, defaulted the same way,
and the same problems."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml

from devcluster import DevCluster
from devcluster.cli import _load
from events.ingest import decode_object, kind_of
from events.scenario import load_scenario

GPU = "nvidia.com/gpu"
OBJECTS: list[dict[str, Any]] = [
    {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 1000},
    {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-0", "labels": {"block": "b0"}},
     "status": {"allocatable": {"cpu": 96, GPU: 8, "memory": "1024Gi", "pods": "110"}}},
    {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "PodGroup",
     "metadata": {"name": "train", "namespace": "ml"}, "spec": {"minMember": 2}},
    *[{"apiVersion": "v1", "kind": "Pod",
       "metadata": {"name": f"train-{i}", "namespace": "ml", "labels": {"pod-group.scheduling.sigs.k8s.io": "train"}},
       "spec": {"schedulerName": "toposched", "priorityClassName": "high",
                "containers": [{"name": "main", "image": "trainer:1", "resources": {"limits": {GPU: 4}}}]}}
      for i in range(2)],
    {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "running"},
     "spec": {"nodeName": "gpu-0", "containers": [{"name": "main", "image": "svc:1",
                                                   "resources": {"requests": {"cpu": "1500m", GPU: "1"}}}]}},
    {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "stated", "namespace": "ml"},
     "spec": {"priority": 7, "containers": [{"name": "main", "image": "x:1"}]}},
    {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "unknown-class", "namespace": "ml"},
     "spec": {"priorityClassName": "gold", "containers": [{"name": "main", "image": "x:1"}]}},
    {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "undecodable", "namespace": "ml"},
     "spec": {"containers": [{"name": "main", "image": "x:1", "resources": {"limits": {GPU: "eight"}}}]}},
]


def write_forms(root: Path) -> dict[str, Path]:
    forms = {
        "yaml": root / "scenario.yaml",
        "list": root / "list.yaml",
        "json": root / "scenario.json",
        "ndjson": root / "scenario.ndjson",
        "directory": root / "split",
    }
    forms["yaml"].write_text(yaml.safe_dump_all(OBJECTS, sort_keys=False))
    forms["list"].write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": OBJECTS}))
    forms["json"].write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": OBJECTS}))
    forms["ndjson"].write_text("".join(json.dumps(obj) + "\n" for obj in OBJECTS))
    forms["directory"].mkdir()
    (forms["directory"] / "1-cluster.yaml").write_text(yaml.safe_dump_all(OBJECTS[:3]))
    (forms["directory"] / "2-work.ndjson").write_text("".join(json.dumps(obj) + "\n" for obj in OBJECTS[3:]))
    return forms


def _seen(info_name: str, obj: Any) -> dict[str, Any]:
    """What the scheduler reads of an object: its slim shape without what the server assigns (uid, versions,
    times) and without status (devcluster starts a bound pod Running; a simulation binds it at load)."""
    shape = msgspec.to_builtins(obj)
    meta = {k: v for k, v in shape.get("metadata", {}).items()
            if k not in ("uid", "resourceVersion", "creationTimestamp", "generation")}
    kept = {k: v for k, v in shape.items() if k not in ("apiVersion", "kind")}  # known from the key
    return {**{k: v for k, v in kept.items() if k != "status" or info_name not in ("Pod", "PodGroup")},
            "metadata": meta}


def simulated(path: Path) -> tuple[dict[str, dict[str, Any]], list[str]]:
    scenario = load_scenario(path)
    return ({f"{o.info.name} {o.key}": _seen(o.info.name, o.obj) for o in scenario.objects},
            [problem.split(": ", 1)[1] for problem in scenario.problems])


def loaded_by_devcluster(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[dict[str, dict[str, Any]], list[str]]:
    from manifests import read_manifests

    cluster = DevCluster()  # not started: `--load` fills the store before serving
    capsys.readouterr()
    for source, obj in read_manifests(path):
        _load(cluster, source, obj)
    problems = [line.split(": ", 1)[1] for line in capsys.readouterr().err.splitlines()]
    seen: dict[str, dict[str, Any]] = {}
    for obj in OBJECTS:
        info = kind_of(obj["apiVersion"], obj["kind"])
        assert info is not None
        namespace = obj["metadata"].get("namespace") or ("default" if info.namespaced else "")
        stored = cluster.store.find(f"{info.api_version}/{info.kind}", obj["metadata"]["name"], namespace)
        if stored is not None:
            decoded = decode_object(info, stored)
            key = f"{namespace}/{obj['metadata']['name']}" if info.namespaced else obj["metadata"]["name"]
            seen[f"{info.name} {key}"] = _seen(info.name, decoded)
    return seen, problems


def test_every_form_of_the_same_scenario_loads_the_same_objects_in_simulate_and_devcluster(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = {name: (simulated(path), loaded_by_devcluster(path, capsys))
               for name, path in write_forms(tmp_path).items()}
    (objects, problems), _ = results["yaml"]
    for name, (simulate, devcluster) in results.items():
        assert simulate == (objects, problems), f"simulate reads the {name} form differently"
        assert devcluster == (objects, problems), f"devcluster --load reads the {name} form differently"
    pod = objects["Pod ml/train-0"]["spec"]
    # requests defaulted from the GPU limit; the limit itself is not decoded (fit reads requests)
    assert pod["containers"][0]["resources"] == {"requests": {GPU: "4"}}
    assert (pod["priority"], pod["preemptionPolicy"], pod["schedulerName"]) == (1000, "PreemptLowerPriority",
                                                                                 "toposched")
    assert objects["Node gpu-0"]["status"]["allocatable"] == {"cpu": "96", GPU: "8", "memory": "1Ti", "pods": "110"}
    assert objects["Pod default/running"]["spec"]["schedulerName"] == "default-scheduler"
    assert objects["Pod ml/stated"]["spec"]["priority"] == 7
    assert "Pod ml/undecodable" not in objects
    assert problems == [
        "Pod running: a real API server refuses it: spec.containers[0].resources.limits: Required value: "
        "Limit must be set for non overcommitable resources",
        "Pod ml/unknown-class: a real API server refuses it: no PriorityClass with name gold was found",
        "Pod ml/undecodable: Pod in version \"v1\" cannot be handled as a Pod: "
        "spec.containers[0].resources.limits[nvidia.com/gpu]: quantities must match the regular expression "
        "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'; skipped",
    ]
