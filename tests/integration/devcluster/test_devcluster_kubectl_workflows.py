"""kubectl workflows users run against real clusters, against devcluster: re-apply of a changed custom resource,
`kubectl diff`, `apply --server-side` with field ownership and conflicts, `apply -f` of a `kind: List`."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from devcluster import BackgroundDevCluster

from .kubectl import Kubectl, needs_kubectl

pytestmark = needs_kubectl

HYPERNODE = """
apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata: {name: WHO}
spec:
  tier: 1
  members: [{type: Node, selector: {exactMatch: {name: gpu-0}}}]
"""
POD = """
apiVersion: v1
kind: Pod
metadata: {name: WHO, namespace: ssa, labels: {team: a}}
spec:
  schedulerName: toposched
  containers: [{name: main, image: trainer:1, resources: {limits: {nvidia.com/gpu: 8}}}]
"""


def test_reapplying_a_changed_custom_resource_configures_it(background: tuple[BackgroundDevCluster, Kubectl]) -> None:
    cluster, kubectl = background
    manifest = HYPERNODE.replace("WHO", "reapplied")
    assert "created" in kubectl.run("apply", "-f", "-", stdin=manifest).stdout
    changed = kubectl.run("apply", "-f", "-", stdin=manifest.replace("tier: 1", "tier: 2"))
    assert changed.stdout.strip() == "hypernode.topology.volcano.sh/reapplied configured"
    assert cluster.call(lambda c: c.store.get("hypernodes.topology.volcano.sh", "reapplied"))["spec"]["tier"] == 2


def test_diff_shows_the_change_a_reapply_would_make_and_stores_nothing(
        background: tuple[BackgroundDevCluster, Kubectl]) -> None:
    cluster, kubectl = background
    manifest = HYPERNODE.replace("WHO", "diffed")
    kubectl.run("apply", "-f", "-", stdin=manifest)
    before = cluster.call(lambda c: c.store.get("hypernodes.topology.volcano.sh", "diffed"))
    for extra in ((), ("--server-side",)):
        diff = kubectl.run("diff", *extra, "-f", "-", stdin=manifest.replace("tier: 1", "tier: 3"), check=False)
        assert diff.returncode == 1, diff.stderr  # 1: differences found (>1 would be an error)
        assert "-  tier: 1" in diff.stdout and "+  tier: 3" in diff.stdout
    assert kubectl.run("diff", "-f", "-", stdin=manifest).returncode == 0
    assert cluster.call(lambda c: c.store.get("hypernodes.topology.volcano.sh", "diffed")) is before


def test_server_side_apply_owns_fields_reports_conflicts_and_takes_them_with_force(
        background: tuple[BackgroundDevCluster, Kubectl]) -> None:
    cluster, kubectl = background
    manifest = POD.replace("WHO", "owned")
    assert kubectl.run("apply", "--server-side", "-f", "-", stdin=manifest).stdout.strip() == \
        "pod/owned serverside-applied"
    stored = cluster.call(lambda c: c.store.get("pods", "owned", "ssa"))
    assert stored["spec"]["containers"][0]["resources"]["requests"] == {"nvidia.com/gpu": "8"}
    (entry,) = stored["metadata"]["managedFields"]
    assert (entry["manager"], entry["operation"]) == ("kubectl", "Apply")
    assert 'k:{"name":"main"}' in entry["fieldsV1"]["f:spec"]["f:containers"]
    kubectl.run("label", "pod", "owned", "-n", "ssa", "team=b", "--overwrite")
    conflict = kubectl.run("apply", "--server-side", "-f", "-", stdin=manifest.replace("team: a", "team: c"),
                           check=False)
    assert conflict.returncode != 0
    assert 'Apply failed with 1 conflict: conflict with "kubectl-label" using v1: .metadata.labels.team' in \
        conflict.stderr
    forced = kubectl.run("apply", "--server-side", "--force-conflicts", "-f", "-",
                         stdin=manifest.replace("team: a", "team: c"))
    assert "serverside-applied" in forced.stdout
    shown = json.loads(kubectl.run("get", "pod", "owned", "-n", "ssa", "-o", "json", "--show-managed-fields").stdout)
    assert shown["metadata"]["labels"] == {"team": "c"}
    assert [m["manager"] for m in shown["metadata"]["managedFields"]] == ["kubectl"]


def test_server_side_apply_removes_what_the_manager_stopped_applying(
        background: tuple[BackgroundDevCluster, Kubectl]) -> None:
    cluster, kubectl = background
    manifest = HYPERNODE.replace("WHO", "pruned").replace("tier: 1", "tier: 1\n  tierName: rack")
    kubectl.run("apply", "--server-side", "-f", "-", stdin=manifest)
    kubectl.run("apply", "--server-side", "-f", "-", stdin=manifest.replace("\n  tierName: rack", ""))
    spec = cluster.call(lambda c: c.store.get("hypernodes.topology.volcano.sh", "pruned"))["spec"]
    assert "tierName" not in spec and spec["tier"] == 1
    again = kubectl.run("apply", "--server-side", "-f", "-", stdin=manifest.replace("\n  tierName: rack", ""))
    assert "serverside-applied" in again.stdout


def test_apply_of_a_list_creates_every_item(background: tuple[BackgroundDevCluster, Kubectl], tmp_path: Path) -> None:
    cluster, kubectl = background
    items = [yaml.safe_load(HYPERNODE.replace("WHO", f"listed-{i}")) for i in range(2)]
    listed = tmp_path / "list.yaml"
    listed.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    out = kubectl.run("apply", "-f", str(listed)).stdout
    assert "hypernode.topology.volcano.sh/listed-0 created" in out and "listed-1 created" in out
    items[1]["spec"]["tierNmae"] = "typo"  # still validated, item by item, by the server
    listed.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    refused = kubectl.run("apply", "-f", str(listed), check=False)
    assert refused.returncode != 0 and "spec.tierNmae" in refused.stderr
    assert cluster.call(lambda c: c.store.find("hypernodes.topology.volcano.sh", "listed-1")) is not None
