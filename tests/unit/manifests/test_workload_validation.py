"""The Workload API's Workload as kube-apiserver validates it: v1alpha2 (1.36), v1beta1 and v1alpha3 (1.37)."""

from __future__ import annotations

from typing import Any

import pytest

from manifests.validation import validate

V1BETA1 = "scheduling.k8s.io/v1beta1"
V1ALPHA3 = "scheduling.k8s.io/v1alpha3"
V1ALPHA2 = "scheduling.k8s.io/v1alpha2"


def template(name: str = "workers", **fields: Any) -> dict[str, Any]:
    return {"name": name, "schedulingPolicy": {"gang": {"minCount": 4}}, **fields}


def composite(name: str = "jobset", **fields: Any) -> dict[str, Any]:
    return {"name": name, "schedulingPolicy": {"gang": {"minGroupCount": 2}}, **fields}


def workload(api_version: str = V1BETA1, **spec: Any) -> dict[str, Any]:
    spec = spec or {"podGroupTemplates": [template()]}
    return {"apiVersion": api_version, "kind": "Workload", "metadata": {"name": "train", "namespace": "default"},
            "spec": spec}


def fields(obj: dict[str, Any], old: dict[str, Any] | None = None) -> list[str]:
    return [field for _, field, _ in validate(obj["apiVersion"], "Workload", obj, old)]


def nested(depth: int) -> dict[str, Any]:
    """A composite template with `depth` levels below it, pod group templates at the bottom."""
    if depth == 0:
        return template()
    child = nested(depth - 1)
    key = "compositePodGroupTemplates" if "podGroupTemplates" in child or "compositePodGroupTemplates" in child \
        else "podGroupTemplates"
    return composite(f"level-{depth}", **{key: [child]})


@pytest.mark.parametrize("api_version", [V1BETA1, V1ALPHA3])
def test_a_1_37_workload_with_every_template_field_is_valid(api_version: str) -> None:
    assert validate(api_version, "Workload", workload(api_version, controllerRef={
        "apiGroup": "batch", "kind": "Job", "name": "train"}, podGroupTemplates=[template(
            disruptionMode={"all": {}}, priorityClassName="high", priority=10, preemptionPolicy="Never",
            schedulingConstraints={"topology": [{"key": "topology.kubernetes.io/rack"}]},
            resourceClaims=[{"name": "gpus", "resourceClaimTemplateName": "gpu-claim"}]),
            template("driver", schedulingPolicy={"basic": {}})])) == []


def test_a_composite_tree_four_levels_deep_is_valid_and_five_is_not() -> None:
    assert fields(workload(compositePodGroupTemplates=[nested(3)])) == []
    assert fields(workload(compositePodGroupTemplates=[nested(4)])) == [
        "spec.compositePodGroupTemplates[0].compositePodGroupTemplates[0].compositePodGroupTemplates[0]"
        ".compositePodGroupTemplates[0].podGroupTemplates"]


@pytest.mark.parametrize(("spec", "field"), [
    ({}, "spec"),
    ({"podGroupTemplates": [template()], "compositePodGroupTemplates": [composite(podGroupTemplates=[template()])]},
     "spec"),
    ({"podGroupTemplates": [template(f"t{i}") for i in range(9)]}, "spec.podGroupTemplates"),
    ({"podGroupTemplates": [template(""), template("b")]}, "spec.podGroupTemplates[0].name"),
    ({"podGroupTemplates": [template("Workers")]}, "spec.podGroupTemplates[0].name"),
    ({"podGroupTemplates": [template(), template()]}, "spec.podGroupTemplates[1]"),
    ({"podGroupTemplates": [template(schedulingPolicy={})]}, "spec.podGroupTemplates[0].schedulingPolicy"),
    ({"podGroupTemplates": [template(schedulingPolicy={"basic": {}, "gang": {"minCount": 2}})]},
     "spec.podGroupTemplates[0].schedulingPolicy"),
    ({"podGroupTemplates": [template(schedulingPolicy={"gang": {"minCount": 0}})]},
     "spec.podGroupTemplates[0].schedulingPolicy.gang.minCount"),
    ({"podGroupTemplates": [template(schedulingConstraints={"topology": [{"key": "a"}, {"key": "b"}]})]},
     "spec.podGroupTemplates[0].schedulingConstraints.topology"),
    ({"podGroupTemplates": [template(disruptionMode={"single": {}, "all": {}})]},
     "spec.podGroupTemplates[0].disruptionMode"),
    ({"podGroupTemplates": [template(priority=1_000_000_001)]}, "spec.podGroupTemplates[0].priority"),
    ({"podGroupTemplates": [template(priorityClassName="high/priority")]},
     "spec.podGroupTemplates[0].priorityClassName"),
    ({"podGroupTemplates": [template(preemptionPolicy="Sometimes")]}, "spec.podGroupTemplates[0].preemptionPolicy"),
    ({"podGroupTemplates": [template(resourceClaims=[{"name": "gpus"}])]},
     "spec.podGroupTemplates[0].resourceClaims[0]"),
    ({"podGroupTemplates": [template(resourceClaims=[{"name": f"c{i}", "resourceClaimName": "x"}
                                                     for i in range(5)])]},
     "spec.podGroupTemplates[0].resourceClaims"),
    ({"compositePodGroupTemplates": [composite()]}, "spec.compositePodGroupTemplates[0]"),
    ({"compositePodGroupTemplates": [composite(schedulingPolicy={"gang": {"minGroupCount": -1}},
                                               podGroupTemplates=[template()])]},
     "spec.compositePodGroupTemplates[0].schedulingPolicy.gang.minGroupCount"),
    ({"compositePodGroupTemplates": [composite(podGroupTemplates=[template(), template()])]},
     "spec.compositePodGroupTemplates[0].podGroupTemplates[1]"),
    ({"podGroupTemplates": [template()], "controllerRef": {"kind": "Job"}}, "spec.controllerRef.name"),
    ({"podGroupTemplates": [template()], "controllerRef": {"kind": "Jo/b", "name": "a"}},
     "spec.controllerRef.kind"),
])
def test_an_invalid_1_37_workload_is_refused_naming_the_field(spec: dict[str, Any], field: str) -> None:
    obj = workload()
    obj["spec"] = spec
    assert field in fields(obj)


def test_a_1_37_update_may_scale_a_gang_but_keeps_its_templates() -> None:
    old = workload(podGroupTemplates=[template(), template("driver", schedulingPolicy={"basic": {}})])
    scaled = workload(podGroupTemplates=[template(schedulingPolicy={"gang": {"minCount": 8}}),
                                         template("driver", schedulingPolicy={"basic": {}})])
    assert fields(scaled, old) == []
    assert fields(workload(podGroupTemplates=[template()]), old) == ["spec.podGroupTemplates"]
    added = workload(podGroupTemplates=[*old["spec"]["podGroupTemplates"], template("extra")])
    assert fields(added, old) == ["spec.podGroupTemplates[2]"]
    switched = workload(podGroupTemplates=[template(schedulingPolicy={"basic": {}}),
                                           template("driver", schedulingPolicy={"basic": {}})])
    assert fields(switched, old) == ["spec.podGroupTemplates[0].schedulingPolicy"]
    moved = workload(podGroupTemplates=[template(disruptionMode={"all": {}}),
                                        template("driver", schedulingPolicy={"basic": {}})])
    assert fields(moved, old) == ["spec.podGroupTemplates[0].disruptionMode"]
    assert fields(workload(controllerRef={"kind": "Job", "name": "a"}, podGroupTemplates=old["spec"][
        "podGroupTemplates"]), old) == ["spec.controllerRef"]


def test_a_composite_keeps_its_children_on_update() -> None:
    old = workload(compositePodGroupTemplates=[composite(podGroupTemplates=[template()])])
    grown = workload(compositePodGroupTemplates=[composite(
        schedulingPolicy={"gang": {"minGroupCount": 3}}, podGroupTemplates=[template(), template("more")])])
    assert fields(grown, old) == ["spec.compositePodGroupTemplates[0].podGroupTemplates[1]"]


def test_a_1_36_workload_takes_string_disruption_modes_and_freezes_its_templates() -> None:
    old = workload(V1ALPHA2, podGroupTemplates=[template(disruptionMode="PodGroup")])
    assert fields(old) == []
    assert fields(workload(V1ALPHA2, podGroupTemplates=[template(disruptionMode={"all": {}})])) == [
        "spec.podGroupTemplates[0].disruptionMode"]
    assert fields(workload(V1ALPHA2, podGroupTemplates=[])) == ["spec.podGroupTemplates"]
    scaled = workload(V1ALPHA2, podGroupTemplates=[template(
        disruptionMode="PodGroup", schedulingPolicy={"gang": {"minCount": 8}})])
    assert fields(scaled, old) == ["spec.podGroupTemplates"]
