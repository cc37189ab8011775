"""The RBAC in ops/base/rbac.yaml grants exactly the API calls the daemon makes: no call is
refused, nothing more is allowed.

The daemon records every call in one place, `daemon.kube.cluster_api.API_CALLS` (group, resource,
subresource, verb). The ClusterRole and the leader-election Role are expanded into the same
tuples and the two sets must be equal.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from daemon.config import load_config
from daemon.kube.cluster_api import API_CALLS

from .opsfiles import Manifest, base_objects, config_file, one

Grant = tuple[str, str, str, str]


def expand(rules: Iterable[Manifest]) -> Iterator[Grant]:
    """Every (group, resource, subresource, verb) a list of PolicyRules allows."""
    for rule in rules:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                name, _, subresource = resource.partition("/")
                for verb in rule["verbs"]:
                    yield group, name, subresource, verb


def granted() -> set[Grant]:
    return set(expand(one("ClusterRole")["rules"])) | set(expand(one("Role")["rules"]))


def _show(grants: Iterable[Grant]) -> str:
    return ", ".join(f"{verb} {group or 'core'}/{resource}{'/' + sub if sub else ''}"
                     for group, resource, sub, verb in sorted(grants))


def test_every_api_call_of_the_daemon_is_granted() -> None:
    missing = set(API_CALLS) - granted()
    assert not missing, f"the daemon makes calls the RBAC refuses: {_show(missing)}"


def test_nothing_is_granted_that_the_daemon_does_not_call() -> None:
    extra = granted() - set(API_CALLS)
    assert not extra, f"the RBAC grants calls the daemon never makes: {_show(extra)}"


def test_the_expansion_reads_subresources_and_every_verb() -> None:
    rules = [{"apiGroups": ["", "x.io"], "resources": ["pods", "pods/status"], "verbs": ["get", "patch"]}]
    assert set(expand(rules)) == {
        (group, "pods", sub, verb) for group in ("", "x.io") for sub in ("", "status") for verb in ("get", "patch")
    }


def test_no_rule_uses_wildcards_or_non_resource_urls() -> None:
    for kind in ("ClusterRole", "Role"):
        for rule in one(kind)["rules"]:
            assert "nonResourceURLs" not in rule, f"{kind} grants non-resource URLs: {rule}"
            for field in ("apiGroups", "resources", "verbs"):
                assert "*" not in rule[field] and all("*" not in item for item in rule[field]), (
                    f"{kind} uses a wildcard in {field}: {rule}"
                )


def test_leases_are_granted_only_in_the_daemon_namespace() -> None:
    cluster_wide = set(expand(one("ClusterRole")["rules"]))
    assert not {g for g in cluster_wide if g[0] == "coordination.k8s.io"}, "leases must not be granted cluster-wide"
    lease_calls = {call for call in API_CALLS if call[:2] == ("coordination.k8s.io", "leases")}
    assert lease_calls and lease_calls == set(expand(one("Role")["rules"]))
    namespace = one("Deployment")["metadata"]["namespace"]
    assert one("Role")["metadata"]["namespace"] == namespace
    assert one("RoleBinding")["metadata"]["namespace"] == namespace
    # The daemon campaigns in its own namespace: the Deployment passes it as --lease-namespace.
    args = one("Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--lease-namespace=$(POD_NAMESPACE)" in args


def test_lease_read_and_renew_are_limited_to_the_configured_lease() -> None:
    lease_name = load_config(config_file()).leader_election.lease_name
    for rule in one("Role")["rules"]:
        if "create" in rule["verbs"]:
            # A name cannot restrict create (the object does not exist yet): keep create alone.
            assert rule["verbs"] == ["create"] and "resourceNames" not in rule
        else:
            assert rule.get("resourceNames") == [lease_name], rule


def test_bindings_give_both_roles_to_the_deployment_service_account() -> None:
    pod_spec = one("Deployment")["spec"]["template"]["spec"]
    account = one("ServiceAccount")
    assert pod_spec["serviceAccountName"] == account["metadata"]["name"]
    subject = {"kind": "ServiceAccount", "name": account["metadata"]["name"],
               "namespace": account["metadata"]["namespace"]}
    for binding_kind, role_kind in (("ClusterRoleBinding", "ClusterRole"), ("RoleBinding", "Role")):
        binding = one(binding_kind)
        assert binding["subjects"] == [subject], binding_kind
        assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind,
                                      "name": one(role_kind)["metadata"]["name"]}


def test_only_the_expected_rbac_objects_exist() -> None:
    kinds = [kind for kind, _ in base_objects() if kind.endswith(("Role", "RoleBinding"))]
    assert sorted(kinds) == ["ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"]
