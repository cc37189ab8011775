"""The fake kubelet's admission of a pod against its node (the kubelet's OS checks, NodeAffinity and NoExecute
taints, besides resources and host ports): a pod bound where a real kubelet refuses it is rejected, Failed with
the kubelet's reason and message, and the first failure in the kubelet's order is the one reported."""

from __future__ import annotations

from typing import Any

import pytest

from devcluster.admission import matches_node_affinity
from devcluster.kubelet import FakeKubelet
from devcluster.store import Store
from tests.unit.devcluster import test_kubelet_host_ports as host_port_tests
from tests.unit.devcluster.test_kubelet_host_ports import host, phases, settle
from tests.unit.devcluster.test_kubelet_resources import rejection

# The host-port tests' fixtures: a Store, and a FakeKubelet started on it (delay 1 ms).
store = host_port_tests.store
kubelet = host_port_tests.kubelet

AFFINITY = ("NodeAffinity",
            "Pod was rejected: Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector")
TAINTS = ("TaintToleration",
          "Pod was rejected: Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate")
PORTS = ("NodePorts",
         "Pod was rejected: Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports")
OS_FIELD = ("PodOSNotSupported", "Pod was rejected: Failed to admit pod as the OS field doesn't match node OS")
OS_LABEL = ("PodOSSelectorNodeLabelDoesNotMatch",
            "Pod was rejected: Failed to admit pod as the `kubernetes.io/os` label doesn't match node label")
DEDICATED = {"key": "dedicated", "value": "training", "effect": "NoExecute"}


def node(name: str = "node-a", labels: dict[str, str] | None = None, *, taints: list[dict[str, Any]] | None = None,
         allocatable: dict[str, str] | None = None, os: str | None = None) -> dict[str, Any]:
    """A node with `labels` and `taints`, offering `allocatable` (110 pods and 8 cpus unless it says otherwise),
    whose kubelet reports `os` (the fake kubelet's linux when None)."""
    status: dict[str, Any] = {"allocatable": {"pods": "110", "cpu": "8", **(allocatable or {})}}
    if os is not None:
        status["nodeInfo"] = {"operatingSystem": os}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels or {}},
            "spec": {"taints": taints or []}, "status": status}


def pod(name: str, node: str = "node-a", *, required: list[dict[str, Any]] | None = None,
        labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    """A pod bound to `node` whose required node affinity has the nodeSelectorTerms `required` (none if None)."""
    body = host_port_tests.pod(name, node, **spec)
    if required is not None:
        body["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": required}}}
    if labels:
        body["metadata"]["labels"] = labels
    return body


def expression(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": operator, **({"values": list(values)} if values else {})}


async def test_a_pod_whose_node_selector_the_node_does_not_match_is_rejected_node_affinity(
        store: Store, kubelet: FakeKubelet) -> None:
    store.create(node(labels={"pool": "a100", "zone": "z1"}))
    store.create(pod("matching", nodeSelector={"pool": "a100"}))
    store.create(pod("other-pool", nodeSelector={"pool": "h100"}))
    store.create(pod("missing-label", nodeSelector={"pool": "a100", "rack": "r1"}))
    await settle(kubelet, 3)
    assert phases(store) == {"matching": "Running", "missing-label": "Failed", "other-pool": "Failed"}
    assert rejection(store, "other-pool") == AFFINITY
    assert rejection(store, "missing-label") == AFFINITY
    status = store.get("pods", "other-pool", "default")["status"]
    assert status["startTime"] and not {"podIP", "hostIP", "containerStatuses"} & set(status)


async def test_required_node_affinity_needs_one_term_whose_expressions_all_hold(
        store: Store, kubelet: FakeKubelet) -> None:
    store.create(node(labels={"pool": "a100", "gpus": "8"}))
    store.create(pod("in", required=[{"matchExpressions": [expression("pool", "In", "h100", "a100")]}]))
    store.create(pod("not-in", required=[{"matchExpressions": [expression("pool", "NotIn", "a100")]}]))
    store.create(pod("all-of-a-term", required=[{"matchExpressions": [
        expression("pool", "Exists"), expression("spot", "DoesNotExist"), expression("gpus", "Gt", "4")]}]))
    store.create(pod("one-expression-fails", required=[{"matchExpressions": [
        expression("pool", "Exists"), expression("gpus", "Lt", "8")]}]))
    store.create(pod("second-term", required=[{"matchExpressions": [expression("pool", "In", "h100")]},
                                              {"matchExpressions": [expression("gpus", "Lt", "16")]}]))
    await settle(kubelet, 5)
    assert phases(store) == {"all-of-a-term": "Running", "in": "Running", "not-in": "Failed",
                             "one-expression-fails": "Failed", "second-term": "Running"}
    assert rejection(store, "not-in") == AFFINITY


async def test_match_fields_on_metadata_name_pins_the_pod_to_its_node(store: Store, kubelet: FakeKubelet) -> None:
    store.create(node("node-a"))
    store.create(node("node-b"))
    pinned = [{"matchFields": [expression("metadata.name", "In", "node-a")]}]
    store.create(pod("on-its-node", "node-a", required=pinned))
    store.create(pod("elsewhere", "node-b", required=pinned))
    store.create(pod("not-there", "node-a",
                     required=[{"matchFields": [expression("metadata.name", "NotIn", "node-a")]}]))
    await settle(kubelet, 3)
    assert phases(store) == {"elsewhere": "Failed", "not-there": "Failed", "on-its-node": "Running"}
    assert rejection(store, "elsewhere") == AFFINITY


async def test_a_node_selector_and_required_affinity_must_both_match(store: Store, kubelet: FakeKubelet) -> None:
    store.create(node(labels={"pool": "a100"}))
    term = [{"matchExpressions": [expression("pool", "In", "a100")]}]
    store.create(pod("both", required=term, nodeSelector={"pool": "a100"}))
    store.create(pod("selector-fails", required=term, nodeSelector={"pool": "h100"}))
    await settle(kubelet, 2)
    assert phases(store) == {"both": "Running", "selector-fails": "Failed"}


def test_terms_that_cannot_match_or_do_not_parse_match_nothing_but_another_term_still_can() -> None:
    labels = {"pool": "a100", "gpus": "8", "version": "v2"}
    a_node = node(labels=labels)

    def matches(*terms: dict[str, Any]) -> bool:
        return matches_node_affinity(pod("p", required=list(terms)), a_node)

    fits = {"matchExpressions": [expression("pool", "Exists")]}
    assert matches(fits)
    assert not matches()  # no terms: nothing
    assert not matches({})  # an empty term selects no node
    for broken in (expression("pool", "In"), expression("pool", "Exists", "a100"), expression("gpus", "Gt", "4.5"),
                   expression("gpus", "Gt", "1", "2"), expression("pool", "Matches", "a100")):
        assert not matches({"matchExpressions": [broken]}), broken
        assert not matches({"matchExpressions": [fits["matchExpressions"][0], broken]}), broken
        assert matches({"matchExpressions": [broken]}, fits), broken
    assert not matches({"matchFields": [expression("metadata.name", "In", "node-a", "node-b")]})
    assert not matches({"matchFields": [expression("metadata.name", "Exists")]})
    # Gt / Lt compare integers: a label that is not one matches neither, nor does a missing label.
    assert not matches({"matchExpressions": [expression("version", "Gt", "1")]})
    assert not matches({"matchExpressions": [expression("version", "Lt", "1")]})
    assert not matches({"matchExpressions": [expression("absent", "Lt", "1")]})
    assert matches({"matchExpressions": [expression("gpus", "Gt", "-1"), expression("gpus", "Lt", "+9")]})


async def test_an_untolerated_no_execute_taint_rejects_the_pod_but_a_tolerated_one_or_no_schedule_does_not(
        store: Store, kubelet: FakeKubelet) -> None:
    store.create(node("tainted", taints=[DEDICATED]))
    store.create(node("no-schedule", taints=[{**DEDICATED, "effect": "NoSchedule"}]))
    store.create(pod("untolerated", "tainted"))
    store.create(pod("other-value", "tainted", tolerations=[
        {"key": "dedicated", "operator": "Equal", "value": "inference", "effect": "NoExecute"}]))
    store.create(pod("tolerated", "tainted", tolerations=[
        {"key": "dedicated", "operator": "Equal", "value": "training", "effect": "NoExecute"}]))
    store.create(pod("tolerates-any-value", "tainted", tolerations=[{"key": "dedicated", "operator": "Exists"}]))
    store.create(pod("cordoned-alike", "no-schedule"))  # NoSchedule is the scheduler's business
    await settle(kubelet, 5)
    assert phases(store) == {"cordoned-alike": "Running", "other-value": "Failed", "tolerated": "Running",
                             "tolerates-any-value": "Running", "untolerated": "Failed"}
    assert rejection(store, "untolerated") == TAINTS
    assert rejection(store, "other-value") == TAINTS


async def test_the_pod_os_is_checked_against_the_os_its_node_reports(store: Store, kubelet: FakeKubelet) -> None:
    store.create(node("linux-node"))
    store.create(node("windows-node", os="windows"))
    store.create(pod("windows-pod", "linux-node", os={"name": "windows"}))
    store.create(pod("windows-labelled", "linux-node", labels={"kubernetes.io/os": "windows"}))
    store.create(pod("linux-pod", "linux-node", os={"name": "linux"}, labels={"kubernetes.io/os": "linux"}))
    store.create(pod("windows-at-home", "windows-node", os={"name": "windows"}))
    store.create(pod("nameless-node", "absent", os={"name": "windows"}))  # this agent's own OS: linux
    await settle(kubelet, 5)
    assert phases(store) == {"linux-pod": "Running", "nameless-node": "Failed", "windows-at-home": "Running",
                             "windows-labelled": "Failed", "windows-pod": "Failed"}
    assert rejection(store, "windows-pod") == OS_FIELD
    assert rejection(store, "windows-labelled") == OS_LABEL


@pytest.mark.parametrize(("first", "second", "reported"), [
    ("os", "resources", OS_FIELD),
    ("resources", "affinity", ("OutOfcpu", "Pod was rejected: Node didn't have enough resource: cpu, requested: "
                                           "16000, used: 0, capacity: 8000")),
    ("affinity", "ports", AFFINITY),
    ("ports", "taints", PORTS),
])
async def test_of_two_failed_checks_the_first_in_the_kubelets_order_is_reported(
        store: Store, kubelet: FakeKubelet, first: str, second: str, reported: tuple[str, str]) -> None:
    store.create(node(labels={"pool": "a100"}, taints=[DEDICATED]))
    tolerate = [{"key": "dedicated", "operator": "Exists"}]
    store.create(pod("holder", ports=host(), tolerations=tolerate))
    failing: dict[str, dict[str, Any]] = {
        "os": {"os": {"name": "windows"}},
        "resources": {"containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "16"}}}]},
        "affinity": {"nodeSelector": {"pool": "h100"}},
        "ports": {"containers": [{"name": "main", "image": "busybox", "ports": host()}]},
        "taints": {"tolerations": []},
    }
    body = pod("late", tolerations=tolerate)
    for check in (first, second):
        body["spec"].update(failing[check])
    store.create(body)
    await settle(kubelet, 2)
    assert phases(store) == {"holder": "Running", "late": "Failed"}
    assert rejection(store, "late") == reported


async def test_a_pod_bound_to_a_node_without_an_object_is_not_checked_against_it(
        store: Store, kubelet: FakeKubelet) -> None:
    store.create(pod("selector", "absent", nodeSelector={"pool": "a100"}))
    store.create(pod("pinned", "absent", required=[{"matchFields": [expression("metadata.name", "In", "other")]}]))
    await settle(kubelet, 2)
    assert phases(store) == {"pinned": "Running", "selector": "Running"}
