"""The stored-only kinds (the ones our ops/ manifests use) with the real clients: kubectl apply for real
and with --dry-run=client, get by plural and short name, strict validation, status subresources,
discovery and OpenAPI v3, and kubernetes-asyncio's typed APIs."""

from __future__ import annotations

import copy
import json
import re
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client import models

from devcluster import BackgroundDevCluster
from devcluster.schemas import KIND_SCHEMAS, Schema

from .kubectl import Kubectl, needs_kubectl

REPO = Path(__file__).resolve().parents[3]

_LABELS = {"app": "web"}
_TEMPLATE = {"metadata": {"labels": _LABELS}, "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}
# (apiVersion, kind, plural, short name or "", namespaced, the object's body without apiVersion/kind/metadata)
KINDS: list[tuple[str, str, str, str, bool, dict[str, Any]]] = [
    ("v1", "ConfigMap", "configmaps", "cm", True, {"data": {"config.yaml": "a: 1\n"}}),
    ("v1", "Secret", "secrets", "", True, {"type": "Opaque", "data": {"token": "czNjcmV0"}}),
    ("v1", "ServiceAccount", "serviceaccounts", "sa", True, {"automountServiceAccountToken": False}),
    ("v1", "Service", "services", "svc", True,
     {"spec": {"selector": _LABELS, "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}}),
    ("apps/v1", "Deployment", "deployments", "deploy", True,
     {"spec": {"replicas": 2, "selector": {"matchLabels": _LABELS}, "template": _TEMPLATE,
               "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}}}),
    ("apps/v1", "StatefulSet", "statefulsets", "sts", True,
     {"spec": {"serviceName": "web", "selector": {"matchLabels": _LABELS}, "template": _TEMPLATE}}),
    ("apps/v1", "DaemonSet", "daemonsets", "ds", True,
     {"spec": {"selector": {"matchLabels": _LABELS}, "template": _TEMPLATE}}),
    ("policy/v1", "PodDisruptionBudget", "poddisruptionbudgets", "pdb", True,
     {"spec": {"minAvailable": 1, "selector": {"matchLabels": _LABELS}}}),
    ("rbac.authorization.k8s.io/v1", "Role", "roles", "", True,
     {"rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "update"]}]}),
    ("rbac.authorization.k8s.io/v1", "RoleBinding", "rolebindings", "", True,
     {"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "web"},
      "subjects": [{"kind": "ServiceAccount", "name": "web", "namespace": "ops-kinds"}]}),
    ("rbac.authorization.k8s.io/v1", "ClusterRole", "clusterroles", "", False,
     {"rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]}]}),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "clusterrolebindings", "", False,
     {"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "web"},
      "subjects": [{"kind": "ServiceAccount", "name": "web", "namespace": "ops-kinds"}]}),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition", "customresourcedefinitions", "crd", False,
     {"spec": {"group": "example.com", "scope": "Namespaced",
               "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
               "versions": [{"name": "v1", "served": True, "storage": True,
                             "schema": {"openAPIV3Schema": {"type": "object",
                                                            "x-kubernetes-preserve-unknown-fields": True}}}]}}),
]
_IDS = [kind for _, kind, *_ in KINDS]


def manifest(api_version: str, kind: str, namespaced: bool, body: dict[str, Any], name: str = "web") -> dict[str, Any]:
    name = "widgets.example.com" if kind == "CustomResourceDefinition" else name
    metadata: dict[str, Any] = {"name": name, **({"namespace": "ops-kinds"} if namespaced else {})}
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata, **copy.deepcopy(body)}


def started(root: Path) -> Iterator[tuple[BackgroundDevCluster, Kubectl]]:
    with BackgroundDevCluster(kubelet=False) as cluster:
        yield cluster, Kubectl(cluster.write_kubeconfig(root / "kubeconfig"), root / "cache")


@pytest.fixture(scope="module")
def background(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BackgroundDevCluster, Kubectl]]:
    yield from started(tmp_path_factory.mktemp("ops-kinds"))


@pytest.fixture
def fresh(tmp_path: Path) -> Iterator[tuple[BackgroundDevCluster, Kubectl]]:
    yield from started(tmp_path)


def request(url: str, method: str = "GET", body: Any = None, content_type: str = "application/json",
            accept: str = "application/json") -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    sent = urllib.request.Request(url, data=data, method=method,
                                  headers={"Content-Type": content_type, "Accept": accept})
    try:
        with urllib.request.urlopen(sent, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def collection(api_version: str, plural: str, namespaced: bool) -> str:
    prefix = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
    return f"{prefix}/namespaces/ops-kinds/{plural}" if namespaced else f"{prefix}/{plural}"


# --------------------------------------------------------------------------- kubectl


@needs_kubectl
@pytest.mark.parametrize(("api_version", "kind", "plural", "short", "namespaced", "body"), KINDS, ids=_IDS)
def test_kubectl_apply_creates_each_kind_and_get_reads_it_back_by_plural_and_short_name(
        background: tuple[BackgroundDevCluster, Kubectl], api_version: str, kind: str, plural: str, short: str,
        namespaced: bool, body: dict[str, Any]) -> None:
    cluster, kubectl = background
    obj = manifest(api_version, kind, namespaced, body)
    name = obj["metadata"]["name"]
    scope = ["-n", "ops-kinds"] if namespaced else []
    created = kubectl.run("apply", "-f", "-", stdin=yaml.safe_dump(obj)).stdout
    assert re.search(rf"/{re.escape(name)} created$", created.strip()), created
    assert kubectl.run("apply", "-f", "-", stdin=yaml.safe_dump(obj)).stdout.strip().endswith(" unchanged")
    read = json.loads(kubectl.run("get", plural, name, *scope, "-o", "json").stdout)
    assert (read["apiVersion"], read["kind"], read["metadata"]["name"]) == (api_version, kind, name)
    assert read["metadata"].get("namespace") == ("ops-kinds" if namespaced else None)
    for field, value in body.items():
        assert _holds(read[field], value), field  # plus the server's defaults (a pod template's, a Secret's type)
    table = kubectl.run("get", short or plural, *scope).stdout
    assert table.splitlines()[0].startswith("NAME") and name in table
    stored = cluster.call(lambda c: c.store.get(f"{api_version}/{kind}", name, "ops-kinds" if namespaced else ""))
    assert stored["metadata"]["uid"] == read["metadata"]["uid"]
    assert kubectl.run("delete", plural, name, *scope).stdout.strip().endswith("deleted")
    missing = kubectl.run("get", plural, name, *scope, check=False)
    assert missing.returncode == 1 and "NotFound" in missing.stderr


def _holds(actual: Any, expected: Any) -> bool:
    """`actual` says everything `expected` says (and may say more, as defaulting adds fields)."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(k in actual and _holds(actual[k], v) for k, v in expected.items())
    if isinstance(expected, list):
        return isinstance(actual, list) and len(actual) == len(expected) and all(
            _holds(a, e) for a, e in zip(actual, expected, strict=True))
    return bool(actual == expected)


@needs_kubectl
def test_kubectl_apply_dry_run_client_of_the_ops_kustomization_succeeds_and_stores_nothing(
        fresh: tuple[BackgroundDevCluster, Kubectl]) -> None:
    cluster, kubectl = fresh
    out = kubectl.run("apply", "--dry-run=client", "-k", str(REPO / "ops")).stdout.strip().splitlines()
    assert len(out) >= 14 and all(line.endswith(" created (dry run)") for line in out), out
    assert any(line.startswith("deployment.apps/toposched ") for line in out)
    assert cluster.call(lambda c: c.store.count("deployments.apps") + c.store.count("customresourcedefinitions."
                                                                                    "apiextensions.k8s.io")) == 0


@needs_kubectl
def test_kubectl_apply_of_the_ops_kustomization_creates_then_is_unchanged_then_merges_a_changed_image(
        fresh: tuple[BackgroundDevCluster, Kubectl], tmp_path: Path) -> None:
    cluster, kubectl = fresh
    ops = str(REPO / "ops")
    created = kubectl.run("apply", "-k", ops).stdout.strip().splitlines()
    assert all(line.endswith(" created") for line in created), created
    assert all(line.endswith(" unchanged") for line in kubectl.run("apply", "-k", ops).stdout.strip().splitlines())
    before = cluster.call(lambda c: c.store.get("deployments.apps", "toposched", "toposched-system"))
    rendered = kubectl.run("kustomize", ops).stdout
    image = before["spec"]["template"]["spec"]["containers"][0]["image"]
    changed = tmp_path / "changed.yaml"
    changed.write_text(rendered.replace(f"image: {image}", "image: toposched:next"), encoding="utf-8")
    out = kubectl.run("apply", "-f", str(changed)).stdout
    assert "deployment.apps/toposched configured" in out
    after = cluster.call(lambda c: c.store.get("deployments.apps", "toposched", "toposched-system"))
    old_container, new_container = (o["spec"]["template"]["spec"]["containers"][0] for o in (before, after))
    assert new_container == {**old_container, "image": "toposched:next"}
    assert after["metadata"]["generation"] == before["metadata"]["generation"] + 1
    listed = kubectl.run("get", "deploy,svc,cm,sa,pdb,role,rolebinding", "-n", "toposched-system", "-o", "wide").stdout
    assert re.search(r"deployment.apps/toposched\s+0/2\s+0\s+0\s+\S+\s+toposched\s+toposched:next", listed), listed
    assert re.search(r"poddisruptionbudget.policy/toposched\s+1\s+N/A\s+0", listed), listed
    crds = kubectl.run("get", "crds", "-o", "name").stdout.split()
    assert "customresourcedefinition.apiextensions.k8s.io/hypernodes.topology.volcano.sh" in crds


@needs_kubectl
def test_kubectl_apply_refuses_an_unknown_field_naming_it(background: tuple[BackgroundDevCluster, Kubectl]) -> None:
    _, kubectl = background
    deployment = manifest(*KINDS[4][:2], True, KINDS[4][5], name="typo")
    deployment["spec"]["replicaz"] = 3
    result = kubectl.run("apply", "-f", "-", stdin=yaml.safe_dump(deployment), check=False)
    assert result.returncode == 1
    assert 'strict decoding error: unknown field "spec.replicaz"' in result.stderr


# --------------------------------------------------------------------------- HTTP


@pytest.mark.parametrize(("api_version", "kind", "plural", "short", "namespaced", "body"), KINDS, ids=_IDS)
def test_unknown_top_level_field_is_a_422_and_a_missing_object_a_404(
        background: tuple[BackgroundDevCluster, Kubectl], api_version: str, kind: str, plural: str, short: str,
        namespaced: bool, body: dict[str, Any]) -> None:
    cluster, _ = background
    url = cluster.url + collection(api_version, plural, namespaced)
    obj = {**manifest(api_version, kind, namespaced, body, name="strict"), "bogus": True}
    if kind == "CustomResourceDefinition":
        obj["metadata"]["name"] = "strict.example.com"
    status, answer = request(f"{url}?fieldValidation=Strict", "POST", obj)
    assert (status, answer["reason"]) == (422, "Invalid")
    assert answer["details"]["kind"] == kind and answer["details"]["causes"][0]["field"] == "bogus"
    status, answer = request(f"{url}/absent")
    group = api_version.rpartition("/")[0]
    assert (status, answer["reason"]) == (404, "NotFound")
    assert answer["message"] == f'{plural}{"." + group if group else ""} "absent" not found'


@pytest.mark.parametrize("plural", ["deployments", "daemonsets", "customresourcedefinitions"])
def test_status_is_a_subresource_a_create_and_an_update_cannot_write(
        background: tuple[BackgroundDevCluster, Kubectl], plural: str) -> None:
    cluster, _ = background
    api_version, kind, _, _, namespaced, body = next(k for k in KINDS if k[2] == plural)
    url = cluster.url + collection(api_version, plural, namespaced)
    name = "with-status" if namespaced else "statuses.example.com"
    obj = manifest(api_version, kind, namespaced, body, name=name)
    obj["metadata"]["name"] = name
    if not namespaced:
        obj["spec"]["names"] = {"plural": "statuses", "singular": "status", "kind": "Status"}
    status, created = request(url, "POST", {**obj, "status": {"observedGeneration": 7}})
    assert status == 201 and "status" not in created
    status, patched = request(f"{url}/{name}/status", "PATCH", {"status": {"observedGeneration": 1}},
                              "application/merge-patch+json")
    assert status == 200 and patched["status"] == {"observedGeneration": 1}
    status, replaced = request(f"{url}/{name}", "PUT", {**patched, "status": {"observedGeneration": 9}})
    assert status == 200 and replaced["status"] == {"observedGeneration": 1}
    assert request(f"{url}/{name}", "DELETE")[0] == 200


def test_discovery_lists_scope_short_names_categories_and_status_subresources(
        background: tuple[BackgroundDevCluster, Kubectl]) -> None:
    cluster, _ = background
    _, legacy = request(cluster.url + "/apis/apps/v1")
    by_name = {r["name"]: r for r in legacy["resources"]}
    assert by_name["deployments"]["shortNames"] == ["deploy"] and by_name["deployments"]["categories"] == ["all"]
    assert by_name["deployments/status"]["verbs"] == ["get", "patch", "update"]
    _, core = request(cluster.url + "/api/v1")
    core_names = {r["name"]: r for r in core["resources"]}
    assert [core_names[n]["shortNames"] for n in ("configmaps", "services", "serviceaccounts")] == [
        ["cm"], ["svc"], ["sa"]]
    assert "secrets" in core_names and "services/status" in core_names
    aggregated_type = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    _, aggregated = request(cluster.url + "/apis", accept=aggregated_type)
    entries = {(g["metadata"]["name"], r["resource"]): r for g in aggregated["items"] for v in g["versions"]
               for r in v["resources"]}
    crd = entries[("apiextensions.k8s.io", "customresourcedefinitions")]
    assert (crd["scope"], crd["shortNames"], crd["categories"]) == ("Cluster", ["crd", "crds"], ["api-extensions"])
    assert [s["subresource"] for s in crd["subresources"]] == ["status"]
    assert entries[("policy", "poddisruptionbudgets")]["shortNames"] == ["pdb"]
    assert entries[("rbac.authorization.k8s.io", "roles")]["scope"] == "Namespaced"
    assert entries[("rbac.authorization.k8s.io", "clusterrolebindings")]["scope"] == "Cluster"


@pytest.mark.parametrize(("api_version", "kind", "plural", "short", "namespaced", "body"), KINDS, ids=_IDS)
def test_openapi_v3_declares_the_kind_and_fieldValidation_on_its_write_paths(
        background: tuple[BackgroundDevCluster, Kubectl], api_version: str, kind: str, plural: str, short: str,
        namespaced: bool, body: dict[str, Any]) -> None:
    cluster, _ = background
    _, root = request(cluster.url + "/openapi/v3")
    path = f"apis/{api_version}" if "/" in api_version else f"api/{api_version}"
    _, document = request(cluster.url + root["paths"][path]["serverRelativeURL"])
    group, _, version = api_version.rpartition("/")
    gvk = {"group": group, "version": version, "kind": kind}
    assert any(gvk in s.get("x-kubernetes-group-version-kind", []) for s in document["components"]["schemas"].values())
    base = collection(api_version, plural, namespaced).replace("ops-kinds", "{namespace}")
    for operation in (document["paths"][base]["post"], document["paths"][f"{base}/{{name}}"]["patch"]):
        assert "fieldValidation" in [p["name"] for p in operation["parameters"]]


def _broken(kind: str, change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    api_version, _, _, _, namespaced, body = next(k for k in KINDS if k[1] == kind)
    obj = manifest(api_version, kind, namespaced, body, name="broken")
    change(obj)
    return obj


def merge_diff(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """The JSON merge patch that turns `old` into `new`."""
    patch: dict[str, Any] = {k: None for k in old if k not in new}
    for key, value in new.items():
        if isinstance(value, dict) and isinstance(old.get(key), dict):
            if value != old[key]:
                patch[key] = merge_diff(old[key], value)
        elif old.get(key) != value:
            patch[key] = value
    return patch


INVALID: list[tuple[str, dict[str, Any], list[str]]] = [
    ("template-not-selected", _broken("Deployment", lambda o: o["spec"]["selector"].update(
        matchLabels={"app": "other"})), ["spec.template.metadata.labels"]),
    ("no-selector", _broken("StatefulSet", lambda o: o["spec"].pop("selector")), ["spec.selector", "spec.selector"]),
    ("expression-not-matched", _broken("DaemonSet", lambda o: o["spec"]["selector"].update(
        matchExpressions=[{"key": "app", "operator": "NotIn", "values": ["web"]}])), ["spec.template.metadata.labels"]),
    ("both-budgets", _broken("PodDisruptionBudget", lambda o: o["spec"].update(maxUnavailable="10%")), ["spec"]),
    ("no-role-ref", _broken("RoleBinding", lambda o: o.pop("roleRef")), ["roleRef.kind", "roleRef.name"]),
    ("cluster-binding-to-role", _broken("ClusterRoleBinding", lambda o: o["roleRef"].update(kind="Role")),
     ["roleRef.kind"]),
    ("crd-misnamed", _broken("CustomResourceDefinition", lambda o: o["metadata"].update(name="broken")),
     ["metadata.name"]),
]


@pytest.mark.parametrize(("case", "obj", "fields"), INVALID, ids=[c for c, _, _ in INVALID])
def test_an_object_the_real_server_calls_invalid_is_a_422_on_create_and_on_patch(
        background: tuple[BackgroundDevCluster, Kubectl], case: str, obj: dict[str, Any], fields: list[str]) -> None:
    cluster, _ = background
    api_version, _, plural, _, namespaced, body = next(k for k in KINDS if k[1] == obj["kind"])
    url = cluster.url + collection(api_version, plural, namespaced)
    status, answer = request(url, "POST", obj)
    assert (status, answer["reason"]) == (422, "Invalid")
    assert [c["field"] for c in answer["details"]["causes"]] == fields
    valid = manifest(api_version, obj["kind"], namespaced, body, name=f"valid-{case}")
    name = valid["metadata"]["name"]
    assert request(url, "POST", valid)[0] == 201
    patch = merge_diff({k: v for k, v in valid.items() if k != "metadata"},
                       {k: v for k, v in obj.items() if k != "metadata"})
    status, answer = request(f"{url}/{name}", "PATCH", patch, "application/merge-patch+json")
    assert status == (200 if obj["kind"] == "CustomResourceDefinition" else 422)
    assert request(f"{url}/{name}", "DELETE")[0] == 200


def test_secret_string_data_is_written_into_data_as_base64(background: tuple[BackgroundDevCluster, Kubectl]) -> None:
    cluster, _ = background
    url = cluster.url + collection("v1", "secrets", True)
    status, created = request(url, "POST", {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "plain"},
                                            "data": {"a": "YQ=="}, "stringData": {"b": "bee"}})
    assert status == 201 and "stringData" not in created
    assert (created["data"], created["type"]) == ({"a": "YQ==", "b": "YmVl"}, "Opaque")
    status, patched = request(f"{url}/plain", "PATCH", {"stringData": {"a": "ay"}}, "application/merge-patch+json")
    assert status == 200 and patched["data"] == {"a": "YXk=", "b": "YmVl"} and "stringData" not in patched


def test_creating_a_crd_object_serves_nothing_new(background: tuple[BackgroundDevCluster, Kubectl]) -> None:
    cluster, _ = background
    api_version, kind, plural, _, namespaced, body = KINDS[-1]
    obj = manifest(api_version, kind, namespaced, body)
    obj["metadata"]["name"] = "gadgets.example.com"
    obj["spec"] = {**obj["spec"], "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"}}
    assert request(cluster.url + collection(api_version, plural, namespaced), "POST", obj)[0] == 201
    assert request(cluster.url + "/apis/example.com/v1/namespaces/default/gadgets")[0] == 404


# --------------------------------------------------------------------------- kubernetes-asyncio


async def test_kubernetes_asyncio_typed_apis_create_read_and_patch_status(api: Any) -> None:
    apps = client.AppsV1Api(api)
    await apps.create_namespaced_deployment("default", client.V1Deployment(
        metadata=client.V1ObjectMeta(name="typed"),
        spec=client.V1DeploymentSpec(
            selector=client.V1LabelSelector(match_labels=_LABELS),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels=_LABELS),
                spec=client.V1PodSpec(containers=[client.V1Container(name="web", image="nginx:1.27")])))))
    await apps.patch_namespaced_deployment_status("typed", "default", {"status": {"readyReplicas": 2}})
    read = await apps.read_namespaced_deployment("typed", "default")
    assert read.status.ready_replicas == 2 and read.spec.template.spec.containers[0].image == "nginx:1.27"
    rbac = client.RbacAuthorizationV1Api(api)
    await rbac.create_cluster_role(client.V1ClusterRole(
        metadata=client.V1ObjectMeta(name="typed"),
        rules=[client.V1PolicyRule(api_groups=[""], resources=["pods"], verbs=["list", "watch"])]))
    roles = await rbac.list_cluster_role()
    assert [r.metadata.name for r in roles.items] == ["typed"] and roles.items[0].rules[0].verbs == ["list", "watch"]
    pdb = await client.PolicyV1Api(api).create_namespaced_pod_disruption_budget("default", client.V1PodDisruptionBudget(
        metadata=client.V1ObjectMeta(name="typed"),
        spec=client.V1PodDisruptionBudgetSpec(max_unavailable="50%",
                                              selector=client.V1LabelSelector(match_labels=_LABELS))))
    assert pdb.spec.max_unavailable == "50%"


# --------------------------------------------------------------------------- schemas


_MODELS = {"ConfigMap": "V1ConfigMap", "Secret": "V1Secret", "ServiceAccount": "V1ServiceAccount",
           "Service": "V1Service", "Deployment": "V1Deployment", "StatefulSet": "V1StatefulSet",
           "DaemonSet": "V1DaemonSet", "PodDisruptionBudget": "V1PodDisruptionBudget", "Role": "V1Role",
           "ClusterRole": "V1ClusterRole", "RoleBinding": "V1RoleBinding",
           "ClusterRoleBinding": "V1ClusterRoleBinding", "CustomResourceDefinition": "V1CustomResourceDefinition"}


def undeclared(model: str, schema: Schema, where: str) -> list[str]:
    """Fields the client library's model has and the schema does not declare (where it declares fields)."""
    properties = schema.get("properties")
    cls = getattr(models, model, None)
    if cls is None or properties is None or schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    found = []
    for attribute, field in cls.attribute_map.items():
        if field not in properties:
            found.append(f"{where}.{field}")
            continue
        kind = cls.openapi_types[attribute]
        nested = re.fullmatch(r"list\[(.+)\]", kind)
        found += undeclared(nested.group(1), properties[field].get("items", {}), f"{where}.{field}[]") if nested \
            else undeclared(kind, properties[field], f"{where}.{field}")
    return found


@pytest.mark.parametrize(("api_version", "kind", "plural", "short", "namespaced", "body"), KINDS, ids=_IDS)
def test_schema_declares_every_field_of_the_client_librarys_model(
        api_version: str, kind: str, plural: str, short: str, namespaced: bool, body: dict[str, Any]) -> None:
    assert undeclared(_MODELS[kind], KIND_SCHEMAS[(api_version, kind)][1], kind) == []
