"""The Workload API's PodGroup as kube-apiserver validates and admits it: v1alpha2 (1.36), v1beta1 and v1alpha3
(1.37)."""

from __future__ import annotations

from typing import Any

import pytest

from manifests.admission import Rejected, admit_create, load_object
from manifests.validation import validate

V1BETA1 = "scheduling.k8s.io/v1beta1"
V1ALPHA3 = "scheduling.k8s.io/v1alpha3"
V1ALPHA2 = "scheduling.k8s.io/v1alpha2"


def pod_group(api_version: str = V1BETA1, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": "PodGroup", "metadata": {"name": "train", "namespace": "default"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 4}}, **spec}}


def fields(api_version: str, obj: dict[str, Any], old: dict[str, Any] | None = None) -> list[str]:
    return [field for _, field, _ in validate(api_version, "PodGroup", obj, old)]


def scaled(obj: dict[str, Any], count: int) -> dict[str, Any]:
    return {**obj, "spec": {**obj["spec"], "schedulingPolicy": {"gang": {"minCount": count}}}}


@pytest.mark.parametrize("api_version", [V1BETA1, V1ALPHA3])
def test_a_1_37_pod_group_with_every_field_is_valid(api_version: str) -> None:
    assert validate(api_version, "PodGroup", pod_group(
        api_version, disruptionMode={"all": {}}, workloadRef={"workloadName": "job.set", "templateName": "workers"},
        schedulingConstraints={"topology": [{"key": "topology.kubernetes.io/rack"}]}, preemptionPolicy="Never",
        parentCompositePodGroupName="job", priorityClassName="high", priority=10)) == []


@pytest.mark.parametrize(("spec", "field"), [
    ({"disruptionMode": {}}, "spec.disruptionMode"),
    ({"disruptionMode": {"single": {}, "all": {}}}, "spec.disruptionMode"),
    ({"workloadRef": {"templateName": "workers"}}, "spec.workloadRef.workloadName"),
    ({"workloadRef": {"workloadName": "a_b", "templateName": "workers"}}, "spec.workloadRef.workloadName"),
    ({"workloadRef": {"workloadName": "ab", "templateName": "a.b"}}, "spec.workloadRef.templateName"),
    ({"schedulingConstraints": {"topology": [{"key": "a"}, {"key": "b"}]}}, "spec.schedulingConstraints.topology"),
    ({"schedulingConstraints": {"topology": [{"key": "a b"}]}}, "spec.schedulingConstraints.topology[0].key"),
    ({"schedulingConstraints": {"topology": [{}]}}, "spec.schedulingConstraints.topology[0].key"),
    ({"preemptionPolicy": "Always"}, "spec.preemptionPolicy"),
    ({"schedulingPolicy": {}}, "spec.schedulingPolicy"),
])
def test_each_1_37_rule_names_its_field(spec: dict[str, Any], field: str) -> None:
    assert fields(V1BETA1, pod_group(**spec)) == [field]


def test_min_count_is_mutable_at_1_37_and_immutable_at_1_36() -> None:
    for api_version in (V1BETA1, V1ALPHA3):
        old = pod_group(api_version)
        assert fields(api_version, scaled(old, 9), old) == []
    old = pod_group(V1ALPHA2)
    assert fields(V1ALPHA2, scaled(old, 9), old) == ["spec.schedulingPolicy"]


def test_a_1_37_pod_group_keeps_its_policy_type_and_every_other_field() -> None:
    old = pod_group(disruptionMode={"single": {}}, preemptionPolicy="Never", priority=3)
    basic = {**old, "spec": {**old["spec"], "schedulingPolicy": {"basic": {}}}}
    assert fields(V1BETA1, basic, old) == ["spec.schedulingPolicy"]
    assert fields(V1BETA1, old, basic) == ["spec.schedulingPolicy"]
    changed = {**old, "spec": {**old["spec"], "disruptionMode": {"all": {}}, "priority": 4, "preemptionPolicy": None}}
    assert fields(V1BETA1, changed, old) == ["spec.disruptionMode", "spec.priority", "spec.preemptionPolicy"]


def test_a_1_36_disruption_mode_is_pod_or_pod_group() -> None:
    assert fields(V1ALPHA2, pod_group(V1ALPHA2, disruptionMode="PodGroup")) == []
    assert fields(V1ALPHA2, pod_group(V1ALPHA2, disruptionMode={"all": {}})) == ["spec.disruptionMode"]


CLASSES = {"high": {"metadata": {"name": "high"}, "value": 100, "preemptionPolicy": "Never"},
           "batch": {"metadata": {"name": "batch"}, "value": 5, "globalDefault": True,
                     "preemptionPolicy": "PreemptLowerPriority"}}


def test_priority_admission_resolves_a_pod_groups_class_and_its_policy_from_1_37() -> None:
    beta = admit_create(V1BETA1, "PodGroup", pod_group(priorityClassName="high"), CLASSES)
    assert (beta["spec"]["priority"], beta["spec"]["preemptionPolicy"]) == (100, "Never")
    alpha2 = admit_create(V1ALPHA2, "PodGroup", pod_group(V1ALPHA2, priorityClassName="high"), CLASSES)
    assert alpha2["spec"]["priority"] == 100 and "preemptionPolicy" not in alpha2["spec"]
    defaulted = admit_create(V1ALPHA3, "PodGroup", pod_group(V1ALPHA3), CLASSES)
    assert (defaulted["spec"]["priorityClassName"], defaulted["spec"]["priority"]) == ("batch", 5)
    none = admit_create(V1BETA1, "PodGroup", pod_group(), {})
    assert (none["spec"]["priority"], none["spec"]["preemptionPolicy"]) == (0, "PreemptLowerPriority")


@pytest.mark.parametrize("spec", [{"priorityClassName": "missing"}, {"priorityClassName": "high", "priority": 1},
                                  {"priorityClassName": "high", "preemptionPolicy": "PreemptLowerPriority"}])
def test_priority_admission_forbids_an_unknown_class_or_values_that_disagree(spec: dict[str, Any]) -> None:
    with pytest.raises(Rejected) as refused:
        admit_create(V1BETA1, "PodGroup", pod_group(**spec), CLASSES)
    assert refused.value.code == 403
    assert refused.value.message.startswith('podgroups.scheduling.k8s.io "train" is forbidden: ')


def test_a_loaded_pod_group_naming_an_unknown_class_is_a_warning() -> None:
    loaded = load_object(V1BETA1, "PodGroup", pod_group(priorityClassName="missing"), CLASSES)
    assert loaded.warnings == ["a real API server refuses it: no PriorityClass with name missing was found"]
    kept = load_object(V1BETA1, "PodGroup", pod_group(priority=42), CLASSES)
    assert kept.obj["spec"]["priority"] == 42 and kept.warnings == []
