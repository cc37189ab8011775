"""`toposched validate` and the daemon apply one rule set: the same objects give the same problems.

Random HyperNodes, Koordinator / Volcano PodGroups, quotas of every dialect (Koordinator's
ElasticQuota tree, capacity scheduling's ElasticQuota, Volcano Queues) and pods naming quotas
(well-formed and not) with a few labelled nodes go, as the same documents, once through `toposched
validate` (a YAML file) and once through the daemon's path (decoded as the watch decodes them,
folded into a `ClusterState`, and collected by `daemon.kube.topology_status.object_problems`, which
turns them into Warning Events). Every problem, with its object, field and message, must be found by
both.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from daemon.cli.validate import validate_documents
from daemon.kube.topology_status import object_problems
from events.builders import TOPOGRAPH
from events.ingest import kind_of, upsert_event
from events.objects import (
    GANG_GROUPS_ANNOTATION,
    NETWORK_TOPOLOGY_SPEC_ANNOTATION,
    QUOTA_IS_PARENT_LABEL,
    QUOTA_NAME_LABEL,
    QUOTA_PARENT_LABEL,
    QUOTA_SHARED_WEIGHT_ANNOTATION,
    VOLCANO_GROUP_ANNOTATION,
)
from state.cluster import ClusterState

Document = dict[str, Any]


def _node(index: int) -> Document:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": f"gpu-{index}", "labels": {TOPOGRAPH + "spine": f"s{index // 4}",
                                                           TOPOGRAPH + "block": f"b{index // 2}"}},
            "status": {"allocatable": {"cpu": "8", "nvidia.com/gpu": "8"}}}


NODES = [_node(i) for i in range(8)]

scalar = st.sampled_from(["", "x", 5, True, 2.5, None])
layer_st = st.one_of(st.sampled_from(["BlockLayer", "SpineLayer", "RackLayer", "block", "2", ""]), scalar)
gather_entry = st.one_of(
    st.fixed_dictionaries({}, optional={
        "layer": layer_st,
        "strategy": st.one_of(st.sampled_from(["MustGather", "PreferGather", "Maybe"]), scalar),
        "podCountMultiple": st.one_of(st.integers(-1, 9), scalar),
    }),
    scalar,
)
gather_annotation = st.one_of(
    st.builds(lambda rules: json.dumps({"gatherStrategy": rules}), st.lists(gather_entry, max_size=3)),
    st.sampled_from(["{", "[]", '{"gatherStrategy": 3}', "null"]),
)
groups_annotation = st.one_of(
    st.builds(json.dumps, st.lists(st.one_of(st.sampled_from(["team/a", "b", "", "x/y/z", "/c"]), scalar),
                                   max_size=4)),
    st.sampled_from(["[", '{"a": 1}']),
)


@st.composite
def koordinator_group(draw: st.DrawFn, index: int) -> Document:
    annotations = draw(st.fixed_dictionaries({}, optional={NETWORK_TOPOLOGY_SPEC_ANNOTATION: gather_annotation,
                                                           GANG_GROUPS_ANNOTATION: groups_annotation}))
    spec = draw(st.fixed_dictionaries({}, optional={"minMember": st.integers(-2, 9),
                                                    "scheduleTimeoutSeconds": st.integers(-5, 60)}))
    return {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": f"koord-{index}", "namespace": "team", "annotations": annotations}, "spec": spec}


network_topology = st.fixed_dictionaries({}, optional={
    "mode": st.sampled_from(["hard", "soft", "strict", ""]),
    "highestTierAllowed": st.integers(-1, 5),
    "highestTierName": st.sampled_from(["block", "spine", "rack", "BlockLayer"]),
})
requirement = st.fixed_dictionaries({
    "key": st.sampled_from(["role", "bad key", "example.com/slot", ""]),
    "operator": st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Near"]),
}, optional={"values": st.lists(st.sampled_from(["a", "b", "-bad-"]), max_size=2)})
label_selector = st.fixed_dictionaries({}, optional={
    "matchLabels": st.dictionaries(st.sampled_from(["role", "bad key"]), st.sampled_from(["w", "", "-x"]),
                                   max_size=2),
    "matchExpressions": st.lists(requirement, max_size=2),
})
policy = st.fixed_dictionaries({}, optional={
    "name": st.sampled_from(["", "a", "b"]),
    "subGroupSize": st.integers(-1, 10),
    "minSubGroups": st.integers(-1, 4),
    "labelSelector": label_selector,
    "matchLabelKeys": st.lists(st.sampled_from(["role", "slot"]), max_size=2),
    "networkTopology": network_topology,
})


@st.composite
def volcano_group(draw: st.DrawFn, index: int) -> Document:
    spec = draw(st.fixed_dictionaries({}, optional={"minMember": st.integers(-2, 9),
                                                    "networkTopology": network_topology,
                                                    "subGroupPolicy": st.lists(policy, max_size=3),
                                                    "queue": st.sampled_from(["", "default", "q1", "q2", "ghost"])}))
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": f"volcano-{index}", "namespace": "team"}, "spec": spec}


HYPERNODE_NAMES = ["h1", "h2", "h3", "h4"]
selector = st.one_of(
    st.builds(lambda name: {"exactMatch": {"name": name}}, st.sampled_from([*HYPERNODE_NAMES, "gpu-1", "", "ghost"])),
    st.builds(lambda pattern: {"regexMatch": {"pattern": pattern}},
              st.sampled_from(["^gpu-[0-3]$", "gpu-1", "(", "(?=x)", "", "^(a+)+$"])),
    st.builds(lambda labels: {"labelMatch": labels}, label_selector),
    st.just({"exactMatch": {"name": "gpu-2"}, "regexMatch": {"pattern": "gpu"}}),
    st.just({}),
)
member = st.fixed_dictionaries({"type": st.sampled_from(["Node", "HyperNode", "Pod"]), "selector": selector})


@st.composite
def hypernode(draw: st.DrawFn, name: str) -> Document:
    return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
            "spec": {"tier": draw(st.integers(-1, 3)), "members": draw(st.lists(member, max_size=3))}}


QUOTA_NAMES = ["a", "b", "c", "d"]
QUEUE_NAMES = ["root", "default", "q1", "q2", "q3"]
quantity = st.sampled_from(["0", "4", "8", "16", "500m", "-2", "x", "1e1", "2Ki"])
resources = st.dictionaries(st.sampled_from(["nvidia.com/gpu", "cpu"]), quantity, max_size=2)


@st.composite
def elastic_quota(draw: st.DrawFn, name: str, namespace: str) -> Document:
    labels = draw(st.fixed_dictionaries({}, optional={
        QUOTA_PARENT_LABEL: st.sampled_from(["", "root", *QUOTA_NAMES, "ghost"]),
        QUOTA_IS_PARENT_LABEL: st.sampled_from(["true", "false"]),
    }))
    annotations = draw(st.fixed_dictionaries({}, optional={
        QUOTA_SHARED_WEIGHT_ANNOTATION: st.sampled_from(['{"nvidia.com/gpu": "2"}', "{", '{"cpu": "-1"}'])}))
    return {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
            "metadata": {"name": name, "namespace": namespace, "labels": labels,
                         "annotations": annotations},
            "spec": {"min": draw(resources), "max": draw(resources)}}


@st.composite
def capacity_quota(draw: st.DrawFn, index: int) -> Document:
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "ElasticQuota",
            "metadata": {"name": f"quota-{index}", "namespace": draw(st.sampled_from(["team", "other"]))},
            "spec": {"min": draw(resources), "max": draw(resources)}}


@st.composite
def volcano_queue(draw: st.DrawFn, name: str) -> Document:
    spec = draw(st.fixed_dictionaries({}, optional={
        "parent": st.sampled_from(["", "root", *QUEUE_NAMES, "ghost"]), "capability": resources,
        "deserved": resources, "guarantee": st.builds(lambda r: {"resource": r}, resources),
        "weight": st.integers(-1, 3), "reclaimable": st.booleans(), "state": st.sampled_from(["Open", "Closed"]),
    }))
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name}, "spec": spec}


@st.composite
def quota_pod(draw: st.DrawFn, index: int) -> Document:
    labels = draw(st.fixed_dictionaries({}, optional={QUOTA_NAME_LABEL: st.sampled_from([*QUOTA_NAMES, "ghost"])}))
    annotations = draw(st.fixed_dictionaries({}, optional={VOLCANO_GROUP_ANNOTATION: st.just("volcano-0")}))
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"pod-{index}", "namespace": "team", "labels": labels, "annotations": annotations},
            "spec": {"schedulerName": draw(st.sampled_from(["toposched", "default-scheduler"])),
                     "containers": [{"name": "main", "resources": {"requests": {"nvidia.com/gpu": "1"}}}]}}


@st.composite
def documents(draw: st.DrawFn) -> list[Document]:
    names = draw(st.lists(st.sampled_from(HYPERNODE_NAMES), unique=True, max_size=4))
    found: list[Document] = [draw(hypernode(name)) for name in names]
    found += [draw(koordinator_group(i)) for i in range(draw(st.integers(0, 2)))]
    found += [draw(volcano_group(i)) for i in range(draw(st.integers(0, 2)))]
    # each object once (a second document of one object replaces the first, by arrival order)
    quotas = st.lists(st.tuples(st.sampled_from(QUOTA_NAMES), st.sampled_from(["team", "other"])), unique=True,
                      max_size=4)
    found += [draw(elastic_quota(name, namespace)) for name, namespace in draw(quotas)]
    found += [draw(capacity_quota(i)) for i in range(draw(st.integers(0, 2)))]
    found += [draw(volcano_queue(name)) for name in draw(st.lists(st.sampled_from(QUEUE_NAMES), unique=True,
                                                                   max_size=4))]
    found += [draw(quota_pod(i)) for i in range(draw(st.integers(0, 3)))]
    return found


def daemon_problems(docs: list[Document]) -> set[tuple[str, str, str, str]]:
    state = ClusterState()
    for doc in [*NODES, *docs]:
        info = kind_of(doc["apiVersion"], doc["kind"])
        assert info is not None
        state.apply(upsert_event(info, doc))
    return {(p.kind, p.key, p.field, p.message) for p in object_problems(state)}


def validate_problems(docs: list[Document], directory: Path) -> set[tuple[str, str, str, str]]:
    path = directory / "objects.yaml"
    path.write_text(yaml.safe_dump_all([*NODES, *docs]))
    findings, _ = validate_documents([str(path)])
    return {(f.problem.kind, f.problem.key, f.problem.field, f.problem.message) for f in findings}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(documents().flatmap(lambda docs: st.tuples(st.just(docs), st.permutations(docs))))
def test_validate_and_the_daemon_find_the_same_problems(tmp_path: Path,
                                                        drawn: tuple[list[Document], list[Document]]) -> None:
    docs, arrival = drawn  # the daemon sees the objects in any order the watches bring them
    assert validate_problems(docs, tmp_path) == daemon_problems(arrival)


def test_every_quota_rule_is_found_by_both_naming_object_and_field(tmp_path: Path) -> None:
    gpu = "nvidia.com/gpu"

    def quota(name: str, parent: str, minimum: str, maximum: str) -> Document:
        return {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
                "metadata": {"name": name, "namespace": "team", "labels": {QUOTA_PARENT_LABEL: parent}},
                "spec": {"min": {gpu: minimum}, "max": {gpu: maximum}}}

    docs: list[Document] = [
        quota("greedy", "root", "32", "16"),  # min > max
        quota("loop-a", "loop-b", "1", "8"), quota("loop-b", "loop-a", "1", "8"),  # a cycle in the parent labels
        quota("orphan", "nowhere", "1", "8"),  # an unknown parent
        quota("negative", "root", "-4", "8"),  # a negative quantity
        {"apiVersion": "v1", "kind": "Pod",  # a pod naming a missing quota
         "metadata": {"name": "lost", "namespace": "team", "labels": {QUOTA_NAME_LABEL: "missing"}},
         "spec": {"schedulerName": "toposched", "containers": [{"name": "main"}]}},
        {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "q"},
         "spec": {"capability": {gpu: "8"}, "deserved": {gpu: "16"}}},  # deserved > capability
    ]
    found = daemon_problems(docs)
    assert validate_problems(docs, tmp_path) == found
    label = f"metadata.labels[{QUOTA_PARENT_LABEL}]"
    assert {(kind, key, field) for kind, key, field, _ in found} == {
        ("ElasticQuota", "team/greedy", f"spec.min[{gpu}]"),
        ("ElasticQuota", "team/loop-a", label), ("ElasticQuota", "team/loop-b", label),
        ("ElasticQuota", "team/orphan", label),
        ("ElasticQuota", "team/negative", f"spec.min[{gpu}]"),
        ("Pod", "team/lost", f"metadata.labels[{QUOTA_NAME_LABEL}]"),
        ("Queue", "q", f"spec.deserved[{gpu}]"),
    }
    messages = {key: message for _, key, _, message in found}
    assert messages["team/greedy"].endswith("cut to max")  # each says the rule that applies instead
    assert "loops (loop-a -> loop-b -> loop-a); it is a top quota instead" in messages["team/loop-a"]
    assert messages["team/orphan"] == "parent 'nowhere' does not exist; it is a top quota instead"
    assert messages["team/negative"].endswith("is negative; counted as 0")
    assert messages["team/lost"] == "ElasticQuota 'missing' not found; the pod is not placed until it exists"


def test_the_disagreements_the_hardening_issue_found_are_gone(tmp_path: Path) -> None:
    docs: list[Document] = [
        {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "PodGroup",
         "metadata": {"name": "zero", "namespace": "team", "annotations": {
             NETWORK_TOPOLOGY_SPEC_ANNOTATION: json.dumps(
                 {"gatherStrategy": [{"layer": "BlockLayer", "strategy": "MustGather", "podCountMultiple": 0}]}),
             GANG_GROUPS_ANNOTATION: '["team/a", '}},
         "spec": {"minMember": 4}},
        {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "PodGroup",
         "metadata": {"name": "big", "namespace": "team", "annotations": {
             NETWORK_TOPOLOGY_SPEC_ANNOTATION: json.dumps(
                 {"gatherStrategy": [{"layer": "BlockLayer", "strategy": "MustGather", "podCountMultiple": 8}]})}},
         "spec": {"minMember": 4}},
        {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
         "metadata": {"name": "selector", "namespace": "team"},
         "spec": {"minMember": 2, "subGroupPolicy": [{"name": "w", "labelSelector": {"matchExpressions": [
             {"key": "role", "operator": "Near", "values": ["w"]}]}}]}},
    ]
    found = daemon_problems(docs)
    assert validate_problems(docs, tmp_path) == found
    spec = f"metadata.annotations[{NETWORK_TOPOLOGY_SPEC_ANNOTATION}].gatherStrategy[0].podCountMultiple"
    assert {(key, field) for _, key, field, _ in found} == {
        ("team/zero", spec), ("team/zero", f"metadata.annotations[{GANG_GROUPS_ANNOTATION}]"), ("team/big", spec),
        ("team/selector", "spec.subGroupPolicy[0].labelSelector.matchExpressions[0].operator")}


def test_a_tier_limit_below_the_lowest_hypernode_tier_is_a_problem_not_a_crash(tmp_path: Path) -> None:
    # Found by the property above: HyperNodes from tier 2 up, a hard limit of tier 1.
    docs: list[Document] = [
        {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": "h1"},
         "spec": {"tier": 2, "members": [{"type": "Node", "selector": {"regexMatch": {"pattern": "^gpu-[0-3]$"}}}]}},
        {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
         "metadata": {"name": "tight", "namespace": "team"},
         "spec": {"minMember": 2, "networkTopology": {"mode": "hard", "highestTierAllowed": 1}}},
    ]
    found = daemon_problems(docs)
    assert validate_problems(docs, tmp_path) == found
    assert ("team/tight", "spec.networkTopology.highestTierAllowed") in {(key, field) for _, key, field, _ in found}
