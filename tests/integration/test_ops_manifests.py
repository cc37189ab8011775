"""The shipped manifests with the real tools: `kubectl kustomize` renders every entry point under
ops/, every rendered object passes `kubectl apply --dry-run=client` against devcluster, and
`kubectl apply -k` of each entry point (and `kubectl apply -f` of each documented example) really
creates the objects, through devcluster's server-side strict field validation.

kubectl needs the API server to serve a kind to map it (discovery) and to validate it (OpenAPI v3).
devcluster serves every kind the manifests use; should it stop serving one, the dry-run test fails
naming the kind.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster import BackgroundDevCluster

REPO = Path(__file__).resolve().parents[2]
OPS = REPO / "ops"
KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")

SIGS = {"podgroups.scheduling.sigs.k8s.io"}
X_K8S = {"podgroups.scheduling.x-k8s.io", "elasticquotas.scheduling.x-k8s.io"}
KOORDINATOR = {"clusternetworktopologies.scheduling.koordinator.sh", "elasticquotas.scheduling.sigs.k8s.io"}
VOLCANO = {"hypernodes.topology.volcano.sh", "jobs.batch.volcano.sh", "podgroups.scheduling.volcano.sh",
           "queues.scheduling.volcano.sh"}
ENTRY_POINTS = {
    "ops": SIGS | X_K8S | KOORDINATOR | VOLCANO,
    "ops/overlays/on-koordinator": VOLCANO | X_K8S,
    "ops/overlays/on-volcano": SIGS | X_K8S | KOORDINATOR,
    "ops/overlays/scheduler-only": set(),
}


def kustomize(directory: str) -> list[dict[str, Any]]:
    result = subprocess.run([str(KUBECTL), "kustomize", str(REPO / directory)], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, f"kubectl kustomize {directory} failed: {result.stderr}"
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def _rendered() -> list[dict[str, Any]]:
    return kustomize("ops") if KUBECTL else []


RENDERED = _rendered()
EXAMPLES = [doc for path in sorted((OPS / "examples").glob("*.yaml"))
            for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]


def _id(doc: dict[str, Any]) -> str:
    return f"{doc['kind']}/{doc['metadata']['name']}"


class Kubectl:
    def __init__(self, kubeconfig: Path, cache: Path) -> None:
        self.base = [str(KUBECTL), "--kubeconfig", str(kubeconfig), "--cache-dir", str(cache)]

    def run(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*self.base, *args], input=stdin, capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Kubectl, set[tuple[str, str]]]]:
    workdir = tmp_path_factory.mktemp("ops-kubectl")
    with BackgroundDevCluster(kubelet=False) as cluster:
        kubectl = Kubectl(cluster.write_kubeconfig(workdir / "kubeconfig"), workdir / "cache")
        listed = kubectl.run("api-resources", "--no-headers", "-o", "wide")
        assert listed.returncode == 0, listed.stderr
        kinds = set()
        for line in listed.stdout.splitlines():
            columns = line.split()
            # NAME [SHORTNAMES] APIVERSION NAMESPACED KIND VERBS [CATEGORIES]
            at = next(i for i, c in enumerate(columns) if c in ("true", "false"))
            kinds.add((columns[at - 1], columns[at + 1]))
        yield kubectl, kinds


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_kustomize_renders_each_entry_point_with_the_crds_it_promises(entry: str) -> None:
    docs = kustomize(entry)
    crds = {d["metadata"]["name"] for d in docs if d["kind"] == "CustomResourceDefinition"}
    assert crds == ENTRY_POINTS[entry]
    others = sorted(_id(d) for d in docs if d["kind"] != "CustomResourceDefinition")
    assert others == sorted(_id(d) for d in RENDERED if d["kind"] != "CustomResourceDefinition")


def test_rendered_deployment_mounts_the_generated_config_map() -> None:
    config_map = next(d for d in RENDERED if d["kind"] == "ConfigMap")
    assert config_map["metadata"]["name"].startswith("toposched-config-")
    assert "config.yaml" in config_map["data"]
    deployment = next(d for d in RENDERED if d["kind"] == "Deployment")
    volumes = deployment["spec"]["template"]["spec"]["volumes"]
    assert {"name": "config", "configMap": {"name": config_map["metadata"]["name"]}} in volumes
    assert all(d["metadata"].get("namespace", "toposched-system") == "toposched-system" for d in RENDERED)


def _dry_run(served: tuple[Kubectl, set[tuple[str, str]]], doc: dict[str, Any]) -> None:
    kubectl, kinds = served
    assert (doc["apiVersion"], doc["kind"]) in kinds, (
        f"devcluster does not serve {doc['apiVersion']} {doc['kind']}: kubectl cannot map or validate it there")
    result = kubectl.run("apply", "--dry-run=client", "-f", "-", stdin=yaml.safe_dump(doc))
    assert result.returncode == 0, f"kubectl apply --dry-run=client {_id(doc)}: {result.stderr}"
    assert "(dry run)" in result.stdout


@pytest.mark.parametrize("doc", RENDERED, ids=[_id(d) for d in RENDERED])
def test_rendered_manifest_passes_kubectl_apply_dry_run_client(
        served: tuple[Kubectl, set[tuple[str, str]]], doc: dict[str, Any]) -> None:
    _dry_run(served, doc)


@pytest.mark.parametrize("doc", EXAMPLES, ids=[_id(d) for d in EXAMPLES])
def test_documented_example_passes_kubectl_apply_dry_run_client(
        served: tuple[Kubectl, set[tuple[str, str]]], doc: dict[str, Any]) -> None:
    _dry_run(served, doc)


def test_grafana_kustomization_renders_the_dashboard_as_a_sidecar_config_map() -> None:
    docs = kustomize("ops/grafana")
    assert [(d["kind"], d["metadata"]["name"]) for d in docs] == [("ConfigMap", "toposched-dashboard")]
    assert docs[0]["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert docs[0]["data"]["toposched-dashboard.json"] == (OPS / "grafana" / "toposched-dashboard.json").read_text(
        encoding="utf-8")


@pytest.fixture(scope="module")
def applied(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kubectl]:
    workdir = tmp_path_factory.mktemp("ops-apply")
    with BackgroundDevCluster(kubelet=False) as cluster:
        yield Kubectl(cluster.write_kubeconfig(workdir / "kubeconfig"), workdir / "cache")


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_kubectl_apply_k_creates_every_object_with_server_side_validation(applied: Kubectl, entry: str) -> None:
    result = applied.run("apply", "-k", str(REPO / entry))
    assert result.returncode == 0, f"kubectl apply -k {entry}: {result.stderr}"
    for doc in kustomize(entry):
        namespace = doc["metadata"].get("namespace")
        args = ["get", f"{doc['kind'].lower()}.{doc['apiVersion'].split('/')[0]}"
                if "/" in doc["apiVersion"] else doc["kind"].lower(), doc["metadata"]["name"], "-o", "name"]
        if namespace:
            args += ["-n", namespace]
        got = applied.run(*args)
        assert got.returncode == 0, f"{_id(doc)} was not created by apply -k {entry}: {got.stderr}"


def test_kubectl_apply_creates_the_documented_examples(applied: Kubectl) -> None:
    # The classes first, as a user must: a real API server refuses a pod whose PriorityClass does not exist.
    first = OPS / "examples" / "priority-classes.yaml"
    for path in [first, *sorted(p for p in (OPS / "examples").glob("*.yaml") if p != first)]:
        result = applied.run("apply", "-f", str(path))
        assert result.returncode == 0, f"kubectl apply -f {path.name}: {result.stderr}"
    listed = applied.run("get", "hypernodes", "-o", "name")
    assert sorted(listed.stdout.split()) == [f"hypernode.topology.volcano.sh/{n}" for n in
                                             ("block-0", "block-1", "block-2", "block-3", "spine-0", "spine-1")]
