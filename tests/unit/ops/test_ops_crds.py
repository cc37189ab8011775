"""The CRDs under ops/crds: served where the daemon looks for them, structural, with the fields it
reads, and with HyperNode's CEL rules accepting good members and refusing bad ones.

Every example object shipped with the repository (examples/topology/, ops/examples/) must be
accepted by these CRDs, so what the README tells users to apply is what the CRDs admit.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from events.ingest import KINDS

from .crdcheck import served_schema, untyped_nodes, violations
from .opsfiles import CRDS, OPS, REPO, Manifest, component_objects, kustomization, load_documents

COMPONENTS = ("scheduler-plugins", "scheduler-plugins-x-k8s", "koordinator", "volcano", "kueue", "kai")
# CRDs of kinds toposched only reads: no status subresource (Kueue's and KAI's Topology have no status).
READ_ONLY_CRDS = frozenset({"topologies.kueue.x-k8s.io", "topologies.kai.scheduler"})


def all_crds() -> dict[str, Manifest]:
    found: dict[str, Manifest] = {}
    for component in COMPONENTS:
        for (kind, name), doc in component_objects(component).items():
            assert kind == "CustomResourceDefinition"
            found[name] = doc
    return found


def crd_for(api_version: str, kind: str) -> Manifest:
    group, _, version = api_version.partition("/")
    for crd in all_crds().values():
        names = [v["name"] for v in crd["spec"]["versions"]]
        if crd["spec"]["group"] == group and crd["spec"]["names"]["kind"] == kind and version in names:
            return crd
    raise AssertionError(f"no CRD serves {api_version} {kind}")


def test_components_are_kustomize_components_holding_only_crds() -> None:
    for component in COMPONENTS:
        assert kustomization(CRDS / component)["kind"] == "Component"
        assert component_objects(component)


def test_the_koordinator_and_volcano_crds_live_in_their_own_components() -> None:
    assert set(component_objects("scheduler-plugins")) == {
        ("CustomResourceDefinition", "podgroups.scheduling.sigs.k8s.io")}
    assert set(component_objects("scheduler-plugins-x-k8s")) == {
        ("CustomResourceDefinition", "podgroups.scheduling.x-k8s.io"),
        ("CustomResourceDefinition", "elasticquotas.scheduling.x-k8s.io")}
    assert set(component_objects("koordinator")) == {
        ("CustomResourceDefinition", "clusternetworktopologies.scheduling.koordinator.sh"),
        ("CustomResourceDefinition", "elasticquotas.scheduling.sigs.k8s.io")}
    assert set(component_objects("volcano")) == {
        ("CustomResourceDefinition", "hypernodes.topology.volcano.sh"),
        ("CustomResourceDefinition", "jobs.batch.volcano.sh"),
        ("CustomResourceDefinition", "podgroups.scheduling.volcano.sh"),
        ("CustomResourceDefinition", "queues.scheduling.volcano.sh")}
    assert set(component_objects("kueue")) == {("CustomResourceDefinition", "topologies.kueue.x-k8s.io")}
    assert set(component_objects("kai")) == {("CustomResourceDefinition", "topologies.kai.scheduler"),
                                             ("CustomResourceDefinition", "podgroups.scheduling.run.ai"),
                                             ("CustomResourceDefinition", "queues.scheduling.run.ai")}
    for name, crd in all_crds().items():
        text = (CRDS / next(c for c in COMPONENTS if ("CustomResourceDefinition", name) in component_objects(c))
                / f"{name}.yaml").read_text(encoding="utf-8")
        assert "DO NOT APPLY" in text, f"{name} must warn clusters that already run its project"
        assert crd["metadata"]["name"] == f"{crd['spec']['names']['plural']}.{crd['spec']['group']}"


def test_every_custom_kind_the_daemon_watches_has_a_crd_with_the_same_scope_and_plural() -> None:
    # Kubeflow's job kinds come with training-operator, which installs their CRDs: without it there are no such
    # jobs, and the daemon lists a kind whose CRD is missing again later (daemon/kube/watch.py).
    custom = [info for info in KINDS
              if info.group not in ("", "scheduling.k8s.io", "storage.k8s.io", "policy", "kubeflow.org")]
    assert len(custom) == 13
    for info in custom:
        crd = crd_for(info.api_version, info.kind)
        for older in info.older_api_versions:
            assert crd_for(older, info.kind) == crd
        assert crd["spec"]["names"]["plural"] == info.plural
        assert crd["spec"]["scope"] == ("Namespaced" if info.namespaced else "Cluster")


@pytest.mark.parametrize("name", sorted(all_crds()))
def test_crd_is_structural_with_one_storage_version_and_a_status_subresource(name: str) -> None:
    crd = all_crds()[name]
    versions = crd["spec"]["versions"]
    assert [v["storage"] for v in versions].count(True) == 1
    for version in versions:
        if name in READ_ONLY_CRDS:
            assert "subresources" not in version and "status" not in served_schema(crd, version["name"])["properties"]
            continue
        assert version["subresources"] == {"status": {}}, "the daemon writes status through /status"
        schema = served_schema(crd, version["name"])
        assert not list(untyped_nodes(schema)), f"untyped schema nodes: {list(untyped_nodes(schema))}"
        assert schema["properties"]["metadata"] == {"type": "object"}


def test_hypernode_prints_tier_tiername_nodecount_and_age() -> None:
    crd = all_crds()["hypernodes.topology.volcano.sh"]
    columns = crd["spec"]["versions"][0]["additionalPrinterColumns"]
    assert [(c["name"], c["jsonPath"]) for c in columns] == [
        ("Tier", ".spec.tier"), ("TierName", ".spec.tierName"), ("NodeCount", ".status.nodeCount"),
        ("Age", ".metadata.creationTimestamp")]


def _schema_paths(schema: Manifest, prefix: str = "") -> set[str]:
    paths = set()
    for key, child in schema.get("properties", {}).items():
        paths.add(f"{prefix}{key}")
        paths |= _schema_paths(child, f"{prefix}{key}.")
        if "items" in child:
            paths |= _schema_paths(child["items"], f"{prefix}{key}[].")
    return paths


@pytest.mark.parametrize(("api_version", "kind", "fields"), [
    ("scheduling.sigs.k8s.io/v1alpha1", "PodGroup", [
        "spec.minMember", "spec.scheduleTimeoutSeconds", "spec.minResources", "status.phase",
        "status.conditions", "status.scheduled", "status.running"]),
    ("scheduling.x-k8s.io/v1alpha1", "PodGroup", [
        "spec.minMember", "spec.scheduleTimeoutSeconds", "spec.minResources", "status.phase", "status.occupiedBy",
        "status.running", "status.succeeded", "status.failed", "status.scheduleStartTime"]),
    ("scheduling.koordinator.sh/v1alpha1", "ClusterNetworkTopology", [
        "spec.networkTopologySpec[].topologyLayer", "spec.networkTopologySpec[].labelKey",
        "spec.networkTopologySpec[].parentTopologyLayer", "status.detailStatus[].topologyInfo.topologyName",
        "status.detailStatus[].parentTopologyInfo.topologyLayer", "status.detailStatus[].childTopologyLayer",
        "status.detailStatus[].childTopologyNames", "status.detailStatus[].nodeNum"]),
    ("topology.volcano.sh/v1alpha1", "HyperNode", [
        "spec.tier", "spec.tierName", "spec.members[].type", "spec.members[].selector.exactMatch.name",
        "spec.members[].selector.regexMatch.pattern", "spec.members[].selector.labelMatch.matchLabels",
        "spec.members[].selector.labelMatch.matchExpressions", "status.nodeCount"]),
    ("scheduling.volcano.sh/v1beta1", "PodGroup", [
        "spec.minMember", "spec.queue", "spec.priorityClassName", "spec.minResources",
        "spec.networkTopology.mode", "spec.networkTopology.highestTierAllowed", "spec.networkTopology.highestTierName",
        "spec.subGroupPolicy[].subGroupSize", "spec.subGroupPolicy[].minSubGroups",
        "spec.subGroupPolicy[].matchLabelKeys", "spec.subGroupPolicy[].networkTopology.mode",
        "status.phase", "status.conditions"]),
    ("kueue.x-k8s.io/v1beta2", "Topology", ["spec.levels[].nodeLabel"]),
    ("kueue.x-k8s.io/v1beta1", "Topology", ["spec.levels[].nodeLabel"]),
    ("kai.scheduler/v1alpha1", "Topology", ["spec.levels[].nodeLabel", "spec.levels[].alias"]),
    ("scheduling.run.ai/v2alpha2", "PodGroup", [
        "spec.minMember", "spec.minSubGroup", "spec.queue", "spec.priorityClassName", "spec.preemptibility",
        "spec.topologyConstraint.topology", "spec.topologyConstraint.requiredTopologyLevel",
        "spec.topologyConstraint.preferredTopologyLevel", "spec.subGroups[].name"]),
    ("scheduling.sigs.k8s.io/v1alpha1", "ElasticQuota", ["spec.min", "spec.max", "status.used"]),
    ("scheduling.x-k8s.io/v1alpha1", "ElasticQuota", ["spec.min", "spec.max", "status.used"]),
    ("scheduling.volcano.sh/v1beta1", "Queue", [
        "spec.weight", "spec.capability", "spec.deserved", "spec.guarantee.resource", "spec.reclaimable",
        "spec.parent", "spec.state", "status.state"]),
    ("scheduling.run.ai/v2", "Queue", [
        "spec.parentQueue", "spec.priority", "spec.preemptMinRuntime", "spec.reclaimMinRuntime",
        *(f"spec.resources.{resource}.{field}" for resource in ("cpu", "memory", "gpu")
          for field in ("quota", "limit", "overQuotaWeight", "lendingLimit"))]),
])
def test_crd_schema_declares_the_fields_toposched_reads_and_writes(api_version: str, kind: str,
                                                                   fields: list[str]) -> None:
    paths = _schema_paths(served_schema(crd_for(api_version, kind), api_version.partition("/")[2]))
    assert not [f for f in fields if f not in paths]


def _custom_objects(paths: list[Path]) -> list[tuple[str, Manifest]]:
    kinds = {(info.api_version, info.kind) for info in KINDS if info.group not in ("", "scheduling.k8s.io")}
    found = []
    for path in paths:
        for doc in load_documents(path):
            if (doc.get("apiVersion"), doc.get("kind")) in kinds:
                found.append((f"{path.relative_to(REPO)}:{doc['kind']}/{doc['metadata']['name']}", doc))
    return found


SHIPPED_EXAMPLES = _custom_objects(
    sorted((REPO / "examples" / "topology").glob("*.yaml")) + sorted((OPS / "examples").glob("*.yaml"))
    + [REPO / "examples" / "demo-cluster.yaml"])
INVALID_EXAMPLES = {"examples/topology/invalid.yaml"}


VALID_EXAMPLES = [e for e in SHIPPED_EXAMPLES if e[0].split(":")[0] not in INVALID_EXAMPLES]


@pytest.mark.parametrize(("where", "obj"), VALID_EXAMPLES, ids=[where for where, _ in VALID_EXAMPLES])
def test_shipped_example_objects_are_admitted_by_the_crds(where: str, obj: Manifest) -> None:
    assert violations(crd_for(obj["apiVersion"], obj["kind"]), obj) == []


def _hypernode(*members: dict[str, Any], tier: int = 1) -> Manifest:
    return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": "h"},
            "spec": {"tier": tier, "members": list(members)}}


HYPERNODE = "hypernodes.topology.volcano.sh"
ONE_OF = "exactly one of exactMatch, regexMatch or labelMatch must be set"
NODES_ONLY = "regexMatch and labelMatch select nodes only; a HyperNode member must use exactMatch"


@pytest.mark.parametrize("member", [
    {"type": "Node", "selector": {"exactMatch": {"name": "gpu-0"}}},
    {"type": "Node", "selector": {"regexMatch": {"pattern": "^gpu-[0-3]$"}}},
    {"type": "Node", "selector": {"labelMatch": {"matchLabels": {"network.topology.nvidia.com/block": "b0"}}}},
    {"type": "HyperNode", "selector": {"exactMatch": {"name": "b0"}}},
])
def test_hypernode_cel_rules_admit_each_valid_member_form(member: Manifest) -> None:
    assert violations(all_crds()[HYPERNODE], _hypernode(member, tier=2)) == []


@pytest.mark.parametrize(("member", "message"), [
    ({"type": "Node", "selector": {}}, ONE_OF),
    ({"type": "Node", "selector": {"exactMatch": {"name": "a"}, "regexMatch": {"pattern": "a"}}}, ONE_OF),
    ({"type": "Node", "selector": {"regexMatch": {"pattern": "a"}, "labelMatch": {"matchLabels": {"k": "v"}}}},
     ONE_OF),
    ({"type": "HyperNode", "selector": {"regexMatch": {"pattern": "^b"}}}, NODES_ONLY),
    ({"type": "HyperNode", "selector": {"labelMatch": {"matchLabels": {"k": "v"}}}}, NODES_ONLY),
])
def test_hypernode_cel_rules_refuse_bad_selectors(member: Manifest, message: str) -> None:
    found = violations(all_crds()[HYPERNODE], _hypernode({"type": "Node", "selector": {"exactMatch": {"name": "n"}}},
                                                         member, tier=2))
    assert found == [f"<root>.spec.members[1]{'' if message == NODES_ONLY else '.selector'}: {message}"]


def test_hypernode_schema_refuses_unknown_member_types_and_negative_tiers() -> None:
    crd = all_crds()[HYPERNODE]
    bad_type = _hypernode({"type": "Switch", "selector": {"exactMatch": {"name": "n"}}})
    assert any("Switch" in v for v in violations(crd, bad_type))
    negative = copy.deepcopy(_hypernode({"type": "Node", "selector": {"exactMatch": {"name": "n"}}}))
    negative["spec"]["tier"] = -1
    assert any("spec.tier" in v for v in violations(crd, negative))


def test_volcano_network_topology_mode_is_hard_or_soft() -> None:
    crd = crd_for("scheduling.volcano.sh/v1beta1", "PodGroup")

    def pod_group(mode: str) -> Manifest:
        return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": "p"},
                "spec": {"minMember": 2, "networkTopology": {"mode": mode, "highestTierAllowed": 1}}}

    assert any("strict" in v for v in violations(crd, pod_group("strict")))
    assert violations(crd, pod_group("soft")) == []


def test_fields_toposched_does_not_read_are_preserved_not_pruned() -> None:
    for crd in all_crds().values():
        for version in crd["spec"]["versions"]:
            schema = served_schema(crd, version["name"])
            for part in ("spec", "status") if crd["metadata"]["name"] not in READ_ONLY_CRDS else ("spec",):
                assert schema["properties"][part].get("x-kubernetes-preserve-unknown-fields") is True, (
                    f"{crd['metadata']['name']} {part}: fields of the upstream CRD would be pruned")


def test_the_x_k8s_podgroup_crd_declares_exactly_the_fields_devcluster_serves() -> None:
    """devcluster serves scheduling.x-k8s.io PodGroups as a cluster with scheduler-plugins does: same fields."""
    from devcluster.schemas import KIND_SCHEMAS

    served = _schema_paths(KIND_SCHEMAS[("scheduling.x-k8s.io/v1alpha1", "PodGroup")][1])
    shipped = _schema_paths(served_schema(crd_for("scheduling.x-k8s.io/v1alpha1", "PodGroup"), "v1alpha1"))
    assert {p for p in served if not p.startswith("metadata")} == {p for p in shipped if not p.startswith("metadata")}


TOPOLOGY = "topologies.kueue.x-k8s.io"


def _kueue_topology(*labels: str) -> Manifest:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": "t"},
            "spec": {"levels": [{"nodeLabel": label} for label in labels]}}


def test_kueue_topology_crd_admits_levels_ending_with_the_hostname() -> None:
    crd = all_crds()[TOPOLOGY]
    assert violations(crd, _kueue_topology("cloud.provider.com/topology-block", "cloud.provider.com/topology-rack",
                                           "kubernetes.io/hostname")) == []


@pytest.mark.parametrize("labels", [
    (), ("a/b",) * 2, ("kubernetes.io/hostname", "a/rack"), ("",), ("-bad",), tuple(f"l/{i}" for i in range(17)),
], ids=["none", "repeated", "hostname-above", "empty", "not-a-key", "seventeen"])
def test_kueue_topology_crd_refuses_what_kueue_refuses(labels: tuple[str, ...]) -> None:
    assert violations(all_crds()[TOPOLOGY], _kueue_topology(*labels)) != []


KAI_TOPOLOGY = "topologies.kai.scheduler"


def _kai_topology(*labels: str) -> Manifest:
    return {"apiVersion": "kai.scheduler/v1alpha1", "kind": "Topology", "metadata": {"name": "t"},
            "spec": {"levels": [{"nodeLabel": label} for label in labels]}}


def test_kai_topology_crd_admits_levels_ending_with_the_hostname() -> None:
    assert violations(all_crds()[KAI_TOPOLOGY], _kai_topology(
        "cloud.provider.com/topology-block", "cloud.provider.com/topology-rack", "kubernetes.io/hostname")) == []


@pytest.mark.parametrize("labels", [
    (), ("a/b",) * 2, ("kubernetes.io/hostname", "a/rack"), ("",), ("-bad",), tuple(f"l/{i}" for i in range(17)),
], ids=["none", "repeated", "hostname-above", "empty", "not-a-key", "seventeen"])
def test_kai_topology_crd_refuses_what_kai_refuses(labels: tuple[str, ...]) -> None:
    assert violations(all_crds()[KAI_TOPOLOGY], _kai_topology(*labels)) != []


@pytest.mark.parametrize(("spec", "refused"), [
    ({"minMember": 2, "preemptibility": "non-preemptible"}, False),
    ({"minMember": 0}, True),
    ({"preemptibility": "sometimes"}, True),
    ({"subGroups": [{"name": ""}]}, True),
], ids=["valid", "min-member-0", "unknown-preemptibility", "unnamed-subgroup"])
def test_kai_pod_group_crd_applies_kais_value_rules(spec: Manifest, refused: bool) -> None:
    group = {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": {"name": "g"}, "spec": spec}
    assert (violations(crd_for("scheduling.run.ai/v2alpha2", "PodGroup"), group) != []) == refused
