"""Server-side apply in the store: field sets, shared ownership, removal of what a manager stops applying."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from devcluster import ApiError, Store
from devcluster.apply import field_set, from_fields_v1, path_text, to_fields_v1
from devcluster.schemas import KIND_SCHEMAS

POD_SCHEMA = KIND_SCHEMAS[("v1", "Pod")][1]


def pod(**metadata: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default", **metadata},
            "spec": {"containers": [{"name": "main", "image": "a:1", "args": ["x"]}]}}


def test_field_sets_use_merge_keys_sets_and_atomic_lists_and_round_trip_through_fields_v1() -> None:
    paths = field_set(pod(labels={"a": "1"}, finalizers=["f"]), POD_SCHEMA)
    shown = sorted(path_text(p) for p in paths)
    assert '.spec.containers[name="main"].args' in shown  # an atomic list is owned whole
    assert '.metadata.finalizers[="f"]' in shown
    assert ".metadata.labels.a" in shown
    assert from_fields_v1(to_fields_v1(paths)) == paths


def test_two_managers_applying_the_same_value_share_it_and_the_last_one_keeps_it() -> None:
    store = Store()
    store.apply("pods", "p", "default", pod(labels={"team": "a"}), manager="one")
    store.apply("pods", "p", "default", pod(labels={"team": "a"}), manager="two")
    both = store.get("pods", "p", "default")
    assert [m["manager"] for m in both["metadata"]["managedFields"]] == ["one", "two"]
    store.apply("pods", "p", "default", pod(), manager="one")  # one stops applying the label: two still owns it
    assert store.get("pods", "p", "default")["metadata"]["labels"] == {"team": "a"}
    with pytest.raises(ApiError) as conflict:
        store.apply("pods", "p", "default", pod(labels={"team": "b"}), manager="one")
    assert conflict.value.code == 409
    assert conflict.value.details is not None
    assert conflict.value.details["causes"] == [{"reason": "FieldManagerConflict", "message": 'conflict with "two"',
                                                 "field": ".metadata.labels.team"}]


def test_an_applied_object_unchanged_keeps_its_resource_version() -> None:
    store = Store()
    first, created = store.apply("pods", "p", "default", pod(labels={"a": "1"}), manager="m")
    again, created_again = store.apply("pods", "p", "default", pod(labels={"a": "1"}), manager="m")
    assert (created, created_again) == (True, False)
    assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]


def test_objects_never_applied_carry_no_managed_fields() -> None:
    store = Store()
    created = store.create(pod())
    assert "managedFields" not in created["metadata"]
    patched = store.patch("pods", "p", {"metadata": {"labels": {"x": "1"}}}, "default")
    assert "managedFields" not in patched["metadata"]


_NAMES = st.text(alphabet="abcdefgh", min_size=1, max_size=4)


@given(labels=st.dictionaries(_NAMES, _NAMES, max_size=4),
       containers=st.lists(_NAMES, min_size=1, max_size=3, unique=True),
       finalizers=st.lists(_NAMES, max_size=3, unique=True))
def test_applying_a_configuration_again_changes_nothing_and_fields_v1_round_trips(
        labels: dict[str, str], containers: list[str], finalizers: list[str]) -> None:
    config = {"apiVersion": "v1", "kind": "Pod",
              "metadata": {"name": "p", "namespace": "default", "labels": labels, "finalizers": finalizers},
              "spec": {"containers": [{"name": c, "image": f"{c}:1"} for c in containers]}}
    paths = field_set(config, POD_SCHEMA)
    assert from_fields_v1(to_fields_v1(paths)) == paths
    store = Store()
    first, _ = store.apply("pods", "p", "default", config, manager="m")
    again, _ = store.apply("pods", "p", "default", config, manager="m")
    assert again is first or again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    assert [c["name"] for c in again["spec"]["containers"]] == containers
