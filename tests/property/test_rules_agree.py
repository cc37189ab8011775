"""`toposched validate` and the daemon apply one rule set: the same objects give the same problems.

Random HyperNodes and Koordinator / Volcano PodGroups (well-formed and not) with a few labelled
nodes go, as the same documents, once through `toposched validate` (a YAML file) and once through
the daemon's path (decoded as the watch decodes them, folded into a `ClusterState`, and collected by
`daemon.kube.topology_status.topology_problems`, which turns them into Warning Events). Every problem,
with its object, field and message, must be found by both.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from daemon.cli.validate import validate_documents
from daemon.kube.topology_status import topology_problems
from events.builders import TOPOGRAPH
from events.ingest import kind_of, upsert_event
from events.objects import GANG_GROUPS_ANNOTATION, NETWORK_TOPOLOGY_SPEC_ANNOTATION
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
                                                    "subGroupPolicy": st.lists(policy, max_size=3)}))
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


@st.composite
def documents(draw: st.DrawFn) -> list[Document]:
    names = draw(st.lists(st.sampled_from(HYPERNODE_NAMES), unique=True, max_size=4))
    found: list[Document] = [draw(hypernode(name)) for name in names]
    found += [draw(koordinator_group(i)) for i in range(draw(st.integers(0, 2)))]
    found += [draw(volcano_group(i)) for i in range(draw(st.integers(0, 2)))]
    return found


def daemon_problems(docs: list[Document]) -> set[tuple[str, str, str, str]]:
    state = ClusterState()
    for doc in [*NODES, *docs]:
        info = kind_of(doc["apiVersion"], doc["kind"])
        assert info is not None
        state.apply(upsert_event(info, doc))
    return {(p.kind, p.key, p.field, p.message) for p in topology_problems(state)}


def validate_problems(docs: list[Document], directory: Path) -> set[tuple[str, str, str, str]]:
    path = directory / "objects.yaml"
    path.write_text(yaml.safe_dump_all([*NODES, *docs]))
    findings, _ = validate_documents([str(path)])
    return {(f.problem.kind, f.problem.key, f.problem.field, f.problem.message) for f in findings}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(documents())
def test_validate_and_the_daemon_find_the_same_problems(tmp_path: Path, docs: list[Document]) -> None:
    assert validate_problems(docs, tmp_path) == daemon_problems(docs)


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
