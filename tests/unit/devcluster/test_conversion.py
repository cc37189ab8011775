"""One stored object, several versions: the conversions of `devcluster.conversion` lose nothing a version shows."""

from __future__ import annotations

from typing import Any

from devcluster.conversion import to_storage, to_view
from devcluster.store import resolve

STORAGE = resolve("scheduling.k8s.io/v1beta1/PodGroup")
V1ALPHA2 = resolve("scheduling.k8s.io/v1alpha2/PodGroup")
V1ALPHA3 = resolve("scheduling.k8s.io/v1alpha3/PodGroup")


def stored(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": "g"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}, **spec}, "status": {"conditions": []}}


def test_the_podgroups_key_names_the_storage_version_and_the_others_view_it() -> None:
    assert resolve("podgroups.scheduling.k8s.io") is STORAGE and not STORAGE.stored_as
    assert V1ALPHA2.stored_as == V1ALPHA3.stored_as == STORAGE.key


def test_a_v1beta1_pod_group_round_trips_through_v1alpha2_keeping_what_v1alpha2_hides() -> None:
    obj = stored(disruptionMode={"all": {}}, workloadRef={"workloadName": "w", "templateName": "t"},
                 parentCompositePodGroupName="c", preemptionPolicy="Never", priorityClassName="p", priority=3,
                 resourceClaims=[{"name": "gpu", "resourceClaimName": "gpu-0"}])
    view = to_view(V1ALPHA2, obj)
    assert view["apiVersion"] == "scheduling.k8s.io/v1alpha2"
    assert view["spec"] == {"schedulingPolicy": {"gang": {"minCount": 2}}, "disruptionMode": "PodGroup",
                            "podGroupTemplateRef": {"workload": {"workloadName": "w", "podGroupTemplateName": "t"}},
                            "priorityClassName": "p", "priority": 3,
                            "resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu-0"}]}
    assert to_storage(V1ALPHA2, STORAGE, view, obj) == obj
    assert "preemptionPolicy" not in to_storage(V1ALPHA2, STORAGE, view)["spec"]  # a create has nothing to keep


def test_a_v1alpha2_pod_group_round_trips_through_storage() -> None:
    view = {"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup", "metadata": {"name": "g"},
            "spec": {"schedulingPolicy": {"basic": {}}, "disruptionMode": "Pod",
                     "podGroupTemplateRef": {"workload": {"workloadName": "w", "podGroupTemplateName": "t"}}}}
    converted = to_storage(V1ALPHA2, STORAGE, view)
    assert converted["spec"]["disruptionMode"] == {"single": {}}
    assert to_view(V1ALPHA2, converted) == view


def test_v1alpha3_has_the_fields_of_v1beta1() -> None:
    obj = stored(disruptionMode={"single": {}}, preemptionPolicy="Never")
    view = to_view(V1ALPHA3, obj)
    assert view == {**obj, "apiVersion": "scheduling.k8s.io/v1alpha3"}
    assert to_storage(V1ALPHA3, STORAGE, view) == obj


def test_events_k8s_io_events_still_rename_the_core_fields() -> None:
    core = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e"}, "message": "m", "involvedObject": {}}
    view = to_view(resolve("events.events.k8s.io"), core)
    assert view == {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e"}, "note": "m",
                    "regarding": {}}
    assert to_storage(resolve("events.events.k8s.io"), resolve("events"), view) == core
