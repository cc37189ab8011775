"""A create, an update and a scenario load go through the API server's defaulting, admission and validation."""

from __future__ import annotations

from typing import Any

import pytest

from manifests.admission import Rejected, SpecMemo, admit_create, admit_update, load_object

GPU = "nvidia.com/gpu"


def pod(name: str = "p", resources: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "trainer:1.0"}
    if resources is not None:
        container["resources"] = resources
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [container], **spec}}


def priority_class(name: str, value: int, **fields: Any) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
            "value": value, **fields}


def create(obj: dict[str, Any], classes: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    return admit_create(obj["apiVersion"], obj["kind"], obj, classes or {})


def refusal(obj: dict[str, Any], classes: dict[str, dict[str, Any]] | None = None) -> Rejected:
    with pytest.raises(Rejected) as refused:
        create(obj, classes)
    return refused.value


def test_limits_only_gpu_pod_gets_requests_equal_to_its_limits_in_canonical_form() -> None:
    created = create(pod(resources={"limits": {GPU: 8, "cpu": "4000m", "memory": "65536Mi"}}))
    resources = created["spec"]["containers"][0]["resources"]
    assert resources["limits"] == {GPU: "8", "cpu": "4", "memory": "64Gi"}
    assert resources["requests"] == resources["limits"]


def test_a_request_written_is_kept_and_only_missing_ones_come_from_limits() -> None:
    created = create(pod(resources={"requests": {"cpu": "500m"}, "limits": {"cpu": "2", GPU: "1"}}))
    assert created["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "500m", GPU: "1"}


def test_a_pod_on_the_host_network_holds_its_container_ports_as_host_ports() -> None:
    ports = [{"containerPort": 29500}, {"containerPort": 8080, "hostPort": 18080}]
    created = create(pod(hostNetwork=True, containers=[{"name": "main", "image": "trainer:1.0", "ports": ports}]))
    assert [(p["containerPort"], p["hostPort"], p["protocol"]) for p in created["spec"]["containers"][0]["ports"]] \
        == [(29500, 29500, "TCP"), (8080, 18080, "TCP")]
    plain = create(pod(containers=[{"name": "main", "image": "trainer:1.0", "ports": [{"containerPort": 29500}]}]))
    assert "hostPort" not in plain["spec"]["containers"][0]["ports"][0]


def test_pod_level_requests_default_to_the_pod_level_limits_of_cpu_memory_and_hugepages() -> None:
    manifest = pod(resources={"requests": {"cpu": "1"}})
    manifest["spec"]["resources"] = {"requests": {"cpu": "8"},
                                     "limits": {"cpu": "16", "memory": "64Gi", "hugepages-2Mi": "1Gi"}}
    created = create(manifest)
    assert created["spec"]["resources"]["requests"] == {"cpu": "8", "memory": "64Gi", "hugepages-2Mi": "1Gi"}
    assert "resources" not in create(pod())["spec"]


def test_pod_defaults_placement_depends_on() -> None:
    spec = create(pod())["spec"]
    assert spec["schedulerName"] == "default-scheduler"
    assert spec["terminationGracePeriodSeconds"] == 30
    assert (spec["priority"], spec["preemptionPolicy"]) == (0, "PreemptLowerPriority")
    assert {(t["key"], t["tolerationSeconds"]) for t in spec["tolerations"]} == {
        ("node.kubernetes.io/not-ready", 300), ("node.kubernetes.io/unreachable", 300)}
    assert spec["containers"][0]["imagePullPolicy"] == "IfNotPresent"
    assert create(pod(schedulerName="toposched"))["spec"]["schedulerName"] == "toposched"


def test_a_pod_tolerating_every_noexecute_taint_gets_no_default_toleration() -> None:
    spec = create(pod(tolerations=[{"operator": "Exists"}]))["spec"]
    assert spec["tolerations"] == [{"operator": "Exists"}]


def test_priority_comes_from_the_class_and_the_global_default_fills_in() -> None:
    classes = {"high": priority_class("high", 1000, preemptionPolicy="Never"),
               "base": priority_class("base", 10, globalDefault=True, preemptionPolicy="PreemptLowerPriority")}
    high = create(pod(priorityClassName="high"), classes)["spec"]
    assert (high["priority"], high["preemptionPolicy"]) == (1000, "Never")
    defaulted = create(pod(), classes)["spec"]
    assert (defaulted["priorityClassName"], defaulted["priority"]) == ("base", 10)


def test_unknown_class_and_contradicting_priority_are_forbidden() -> None:
    unknown = refusal(pod(priorityClassName="gold"))
    assert (unknown.code, unknown.message) == (403, 'pods "p" is forbidden: no PriorityClass with name gold was found')
    classes = {"high": priority_class("high", 1000, preemptionPolicy="PreemptLowerPriority")}
    assert "must not be provided in pod spec" in refusal(pod(priorityClassName="high", priority=5), classes).message
    policy = refusal(pod(priorityClassName="high", preemptionPolicy="Never"), classes)
    assert policy.code == 403 and "PreemptionPolicy (Never)" in policy.message


@pytest.mark.parametrize(("resources", "field", "message"), [
    ({"requests": {GPU: "8"}}, "spec.containers[0].resources.limits",
     "Required value: Limit must be set for non overcommitable resources"),
    ({"limits": {GPU: "0.5"}}, "spec.containers[0].resources.limits[nvidia.com/gpu]",
     'Invalid value: "500m": must be an integer'),
    ({"requests": {GPU: "4"}, "limits": {GPU: "8"}}, "spec.containers[0].resources.requests",
     'Invalid value: "4": must be equal to nvidia.com/gpu limit of 8'),
    ({"requests": {"cpu": "4"}, "limits": {"cpu": "2"}}, "spec.containers[0].resources.requests",
     'Invalid value: "4": must be less than or equal to cpu limit of 2'),
    ({"limits": {"memory": "-1Gi"}}, "spec.containers[0].resources.limits[memory]",
     'Invalid value: "-1Gi": must be greater than or equal to 0'),
    ({"limits": {"gpu": "1"}}, "spec.containers[0].resources.limits[gpu]",
     'Invalid value: "gpu": must be a standard resource for containers'),
])
def test_resources_a_real_server_refuses_are_invalid_naming_the_field(resources: dict[str, Any], field: str,
                                                                      message: str) -> None:
    refused = refusal(pod(resources=resources))
    assert refused.code == 422 and (field, message) in [(f, m) for _, f, m in refused.causes]
    assert refused.message.startswith('Pod "p" is invalid: ')


def test_an_undecodable_quantity_is_a_bad_request_naming_the_field() -> None:
    refused = refusal(pod(resources={"limits": {GPU: "8 GPUs"}}))
    assert refused.code == 400
    assert refused.message == ('Pod in version "v1" cannot be handled as a Pod: '
                               "spec.containers[0].resources.limits[nvidia.com/gpu]: quantities must match the "
                               "regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")


def test_labels_and_annotations_over_their_limits_are_invalid() -> None:
    long_value = pod()
    long_value["metadata"]["labels"] = {"team": "x" * 64, "bad key!": "v"}
    causes = refusal(long_value).causes
    assert ("FieldValueInvalid", "metadata.labels",
            f'Invalid value: "{"x" * 64}": must be no more than 63 characters') in causes
    assert any(field == "metadata.labels" and '"bad key!"' in message for _, field, message in causes)
    big = pod()
    big["metadata"]["annotations"] = {"a": "x" * (256 * 1024)}
    assert refusal(big).causes == [("FieldValueTooLong", "metadata.annotations",
                                    "Too long: may not be more than 262144 bytes")]
    fits = pod()
    fits["metadata"]["annotations"] = {"a": "x" * (256 * 1024 - 1)}
    assert create(fits)["metadata"]["annotations"]["a"]


def test_priority_classes_are_limited_to_one_global_default_and_immutable_values() -> None:
    classes = {"base": priority_class("base", 10, globalDefault=True)}
    second = refusal(priority_class("other", 20, globalDefault=True), classes)
    assert second.code == 403 and "PriorityClass base is already marked as default" in second.message
    assert create(priority_class("user", 10**9))["preemptionPolicy"] == "PreemptLowerPriority"
    too_high = refusal(priority_class("user", 10**9 + 1))
    assert too_high.causes[0][1] == "value"
    assert refusal(priority_class("system-mine", 5)).causes[0][1] == "metadata.name"
    old = create(priority_class("user", 5))
    with pytest.raises(Rejected) as changed:
        admit_update("scheduling.k8s.io/v1", "PriorityClass", {**old, "value": 6}, old, {})
    assert changed.value.causes == [("FieldValueForbidden", "value", "Forbidden: may not be changed in an update.")]


def test_a_scenario_load_keeps_what_a_server_refuses_and_says_why() -> None:
    loaded = load_object("v1", "Pod", pod(resources={"requests": {GPU: "8"}}, priorityClassName="gold"), {})
    assert loaded.obj["spec"]["containers"][0]["resources"]["requests"] == {GPU: "8"}
    assert "priority" not in loaded.obj["spec"]
    assert loaded.warnings == [
        "a real API server refuses it: no PriorityClass with name gold was found",
        "a real API server refuses it: spec.containers[0].resources.limits: Required value: Limit must be set for "
        "non overcommitable resources"]
    stated = load_object("v1", "Pod", pod(priority=500), {})  # docs/scenarios.md: a pod may state its priority
    assert stated.obj["spec"]["priority"] == 500 and stated.warnings == []
    with pytest.raises(Rejected):
        load_object("v1", "Pod", pod(resources={"limits": {GPU: "lots"}}), {})


def test_pods_loaded_with_a_spec_memo_are_stored_and_warned_about_as_without_it() -> None:
    memo = SpecMemo()
    gold = {"gold": create(priority_class("gold", 1000))}
    bad_label = pod("b", priorityClassName="gold")
    bad_label["metadata"]["labels"] = {"bad key!": "v"}
    same_spec = [pod("a", priorityClassName="gold"), bad_label, pod("c", priorityClassName="gold"),
                 pod("d", resources={"requests": {GPU: "8"}}), pod("e", resources={"requests": {GPU: "8"}}),
                 pod("f: g", priorityClassName="gone"), pod("h", priorityClassName="gone")]
    for obj in same_spec:
        assert load_object("v1", "Pod", obj, gold, memo) == load_object("v1", "Pod", obj, gold)
    assert load_object("v1", "Pod", bad_label, gold, memo).warnings[0].startswith(
        "a real API server refuses it: metadata.labels: Invalid value: \"bad key!\"")
    memo.clear()  # the classes changed: the same spec resolves to another priority
    silver = {"gold": create(priority_class("gold", 7))}
    assert load_object("v1", "Pod", pod("a", priorityClassName="gold"), silver, memo).obj["spec"]["priority"] == 7
    with pytest.raises(Rejected):
        load_object("v1", "Pod", pod(resources={"limits": {GPU: "lots"}}), {}, memo)


# --------------------------------------------------------------------------- pod (anti-)affinity

ANTI = "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]"


def anti(*terms: dict[str, Any], labels: dict[str, str] | None = None) -> dict[str, Any]:
    manifest = pod(affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}})
    manifest["metadata"]["labels"] = labels or {}
    return manifest


def causes(obj: dict[str, Any]) -> list[tuple[str, str]]:
    return [(field, message) for _, field, message in refusal(obj).causes]


def test_match_label_keys_are_merged_into_the_selector_with_the_pods_own_values_on_create() -> None:
    term = {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname",
            "matchLabelKeys": ["pod-template-hash", "absent"], "mismatchLabelKeys": ["team"]}
    created = create(anti(term, labels={"app": "web", "pod-template-hash": "v2", "team": "ml"}))
    stored = created["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert stored["labelSelector"] == {"matchLabels": {"app": "web"}, "matchExpressions": [
        {"key": "pod-template-hash", "operator": "In", "values": ["v2"]},
        {"key": "team", "operator": "NotIn", "values": ["ml"]}]}
    assert stored["matchLabelKeys"] == ["pod-template-hash", "absent"]  # kept as written


def test_a_term_without_a_topology_key_or_with_a_bad_selector_is_refused_with_every_cause() -> None:
    assert causes(anti({"labelSelector": {"matchExpressions": [
        {"key": "app", "operator": "In"}, {"key": "tier", "operator": "Exists", "values": ["x"]},
        {"key": "zone", "operator": "Near", "values": ["a"]}]}})) == [
        (f"{ANTI}.labelSelector.matchExpressions[0].values",
         "Required value: must be specified when `operator` is 'In' or 'NotIn'"),
        (f"{ANTI}.labelSelector.matchExpressions[1].values",
         "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"),
        (f"{ANTI}.labelSelector.matchExpressions[2].operator", 'Invalid value: "Near": not a valid selector operator'),
        (f"{ANTI}.topologyKey", "Required value: can not be empty"),
        (f"{ANTI}.topologyKey", "Invalid value: \"\": name part must be non-empty"),
    ]


def test_label_keys_need_a_selector_and_may_not_repeat_one_of_its_keys_or_each_other() -> None:
    host = "kubernetes.io/hostname"
    assert causes(anti({"topologyKey": host, "matchLabelKeys": ["app"]})) == [
        (f"{ANTI}.matchLabelKeys", "Forbidden: must not be specified when labelSelector is not set")]
    assert causes(anti({"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": host,
                        "matchLabelKeys": ["app"], "mismatchLabelKeys": ["app"]}, labels={"app": "web"})) == [
        # Checked on the merged selector (app written, then In and NotIn merged): once per merged expression.
        (f"{ANTI}[0]", 'Invalid value: "app": exists in both matchLabelKeys and labelSelector'),
        (f"{ANTI}[0]", 'Invalid value: "app": exists in both matchLabelKeys and labelSelector'),
        (f"{ANTI}.matchLabelKeys[0]", 'Invalid value: "app": exists in both matchLabelKeys and mismatchLabelKeys'),
    ]


def test_a_preferred_terms_weight_is_1_to_100_and_namespaces_are_dns_labels() -> None:
    manifest = pod(affinity={"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 0, "podAffinityTerm": {"labelSelector": {}, "topologyKey": "zone",
                                          "namespaces": ["Not_A_Namespace"]}}]}})
    where = "spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0]"
    found = causes(manifest)
    assert found[0] == (f"{where}.weight", "Invalid value: 0: must be in the range 1-100")
    assert found[1][0] == f"{where}.podAffinityTerm.namespace" and "RFC 1123 label" in found[1][1]
    assert len(found) == 2


# --------------------------------------------------------------------------- topology spread constraints

SPREAD = "spec.topologySpreadConstraints"


def spreading(*constraints: dict[str, Any], labels: dict[str, str] | None = None) -> dict[str, Any]:
    manifest = pod(topologySpreadConstraints=list(constraints))
    manifest["metadata"]["labels"] = labels or {}
    return manifest


def test_spread_match_label_keys_are_merged_into_the_selector_on_create() -> None:
    constraint = {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
                  "labelSelector": {"matchLabels": {"app": "web"}}, "matchLabelKeys": ["pod-template-hash", "absent"]}
    created = create(spreading(constraint, labels={"app": "web", "pod-template-hash": "v2"}))
    stored = created["spec"]["topologySpreadConstraints"][0]
    assert stored["labelSelector"] == {"matchLabels": {"app": "web"}, "matchExpressions": [
        {"key": "pod-template-hash", "operator": "In", "values": ["v2"]}]}
    loaded = load_object("v1", "Pod", spreading(constraint, labels={"app": "web", "pod-template-hash": "v3"}), {},
                         SpecMemo())
    merged = loaded.obj["spec"]["topologySpreadConstraints"][0]["labelSelector"]["matchExpressions"]
    assert merged == [{"key": "pod-template-hash", "operator": "In", "values": ["v3"]}]


def test_spread_constraints_are_refused_as_the_api_server_refuses_them() -> None:
    zone = "topology.kubernetes.io/zone"
    assert causes(spreading(
        {"maxSkew": 0, "topologyKey": "", "whenUnsatisfiable": "Sometimes", "minDomains": 0},
        {"maxSkew": 1, "topologyKey": zone, "whenUnsatisfiable": "DoNotSchedule", "nodeAffinityPolicy": "Always",
         "labelSelector": {"matchLabels": {"app": "web"}}},
        {"maxSkew": 2, "topologyKey": zone, "whenUnsatisfiable": "DoNotSchedule", "matchLabelKeys": ["app"]},
        {"maxSkew": 1, "topologyKey": zone, "whenUnsatisfiable": "ScheduleAnyway", "minDomains": 2},
    )) == [
        (f"{SPREAD}[0].maxSkew", "Invalid value: 0: must be greater than zero"),
        (f"{SPREAD}[0].topologyKey", "Required value: can not be empty"),
        (f"{SPREAD}[0].whenUnsatisfiable",
         'Unsupported value: "Sometimes": supported values: "DoNotSchedule", "ScheduleAnyway"'),
        (f"{SPREAD}[0].minDomains", "Invalid value: 0: must be greater than zero"),
        (f"{SPREAD}[0].minDomains", "Invalid value: 0: can only use minDomains if whenUnsatisfiable=DoNotSchedule, "
                                    "not Sometimes"),
        (f"{SPREAD}[1].{{topologyKey, whenUnsatisfiable}}",
         f'Duplicate value: "{{{zone}, DoNotSchedule}}"'),
        (f"{SPREAD}[1].nodeAffinityPolicy", 'Unsupported value: "Always": supported values: "Honor", "Ignore"'),
        (f"{SPREAD}[2].matchLabelKeys", "Forbidden: must not be specified when labelSelector is not set"),
        (f"{SPREAD}[3].minDomains", "Invalid value: 2: can only use minDomains if whenUnsatisfiable=DoNotSchedule, "
                                    "not ScheduleAnyway"),
    ]
    assert causes(spreading({"maxSkew": 1, "topologyKey": zone, "whenUnsatisfiable": "DoNotSchedule",
                             "labelSelector": {"matchLabels": {"app": "web"}}, "matchLabelKeys": ["app"]},
                            labels={"app": "web"})) == [
        (f"{SPREAD}[0][0]", 'Invalid value: "app": exists in both matchLabelKeys and labelSelector')]
