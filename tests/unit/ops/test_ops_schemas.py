"""Every object under ops/ (base and CRD components) matches the Kubernetes API types of its kind:
no unknown field, no wrong type, no missing required field. This is the offline twin of
`kubectl apply --dry-run=client` for the kinds devcluster does not serve."""

from __future__ import annotations

import pytest

from .modelcheck import problems
from .opsfiles import Manifest, base_objects, component_objects

OBJECTS: list[Manifest] = [*base_objects().values(),
                           *(doc for c in ("scheduler-plugins", "scheduler-plugins-x-k8s", "koordinator", "volcano")
                             for doc in component_objects(c).values())]


@pytest.mark.parametrize("obj", OBJECTS, ids=[f"{o['kind']}/{o['metadata']['name']}" for o in OBJECTS])
def test_object_matches_the_kubernetes_api_types(obj: Manifest) -> None:
    assert problems(obj) == []


def test_the_check_names_unknown_fields_wrong_types_and_missing_required_fields() -> None:
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"replicas": "2", "selector": {"matchLabels": {"a": "b"}},
                 "template": {"spec": {"containers": [{"name": "c", "imagePullPolcy": "Always"}]}}},
    }
    assert problems(deployment) == [
        "spec.replicas: expected int, got '2'",
        "spec.template.spec.containers[0].imagePullPolcy: unknown field (not in V1Container)",
    ]
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "r"},
            "rules": [{"apiGroups": [""], "resources": ["pods"]}]}
    assert len(problems(role)) == 1 and "verbs" in problems(role)[0]
