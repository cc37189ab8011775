"""Discovery and OpenAPI v3 documents, generated from the resource table and the kind schemas.

Discovery (`/api`, `/apis`, `/api/v1`, `/apis/<group>[/<version>]`) in the legacy form, and the
aggregated form (apidiscovery.k8s.io/v2) for `/api` and `/apis` when the client's Accept asks for it,
as kubectl does. The OpenAPI v3 root lists one
document per group-version; each document declares the kinds' schemas (with
`x-kubernetes-group-version-kind`) and the resource paths. The create, update and patch operations
declare the `fieldValidation` query parameter: that is what makes kubectl leave validation to the
server instead of falling back to OpenAPI v2.

Documents are built once and cached as encoded bytes. Pure: no I/O.
"""

from __future__ import annotations

import functools
import hashlib
from typing import Any

import msgspec

from devcluster.resources import (
    RESOURCES,
    SAME_KIND_SUBRESOURCES,
    SUBRESOURCE_KINDS,
    ResourceDef,
    group_versions,
    in_group_version,
)
from devcluster.schemas import BINDING, DELETE_OPTIONS, EVICTION, KIND_SCHEMAS, LIST_META, Schema

SERVER_VERSION: dict[str, str] = {
    "major": "1", "minor": "32", "gitVersion": "v1.32.0-devcluster", "gitCommit": "devcluster",
    "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.23",
    "compiler": "gc", "platform": "linux/amd64",
}

_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
_encode = msgspec.json.encode


def _resource_entries(resource: ResourceDef) -> list[dict[str, Any]]:
    entry: dict[str, Any] = {
        "name": resource.plural, "singularName": resource.singular, "namespaced": resource.namespaced,
        "kind": resource.kind, "verbs": _VERBS,
    }
    if resource.short_names:
        entry["shortNames"] = list(resource.short_names)
    if resource.categories:
        entry["categories"] = list(resource.categories)
    entries = [entry]
    for sub in resource.subresources:
        if sub in SAME_KIND_SUBRESOURCES:
            entries.append({"name": f"{resource.plural}/{sub}", "singularName": "", "namespaced": resource.namespaced,
                            "kind": resource.kind, "verbs": ["get", "patch", "update"]})
        else:
            group, version, kind = SUBRESOURCE_KINDS[sub]
            sub_entry: dict[str, Any] = {"name": f"{resource.plural}/{sub}", "singularName": "",
                                         "namespaced": resource.namespaced, "kind": kind, "verbs": ["create"]}
            if group:
                sub_entry.update(group=group, version=version)
            entries.append(sub_entry)
    return entries


def resource_list(group: str, version: str) -> bytes | None:
    resources = in_group_version(group, version)
    if not resources:
        return None
    return _resource_list(group, version)


@functools.cache
def _resource_list(group: str, version: str) -> bytes:
    return _encode({
        "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": f"{group}/{version}" if group else version,
        "resources": [e for r in in_group_version(group, version) for e in _resource_entries(r)],
    })


def _group(name: str) -> dict[str, Any]:
    versions = [{"groupVersion": f"{name}/{v}", "version": v} for g, v in group_versions() if g == name]
    return {"name": name, "versions": versions, "preferredVersion": versions[0]}


@functools.cache
def group_list() -> bytes:
    names = list(dict.fromkeys(g for g, _ in group_versions() if g))
    return _encode({"kind": "APIGroupList", "apiVersion": "v1", "groups": [_group(n) for n in names]})


def group(name: str) -> bytes | None:
    if not any(g == name for g, _ in group_versions()):
        return None
    return _encode({"kind": "APIGroup", "apiVersion": "v1", **_group(name)})


AGGREGATED_CONTENT_TYPE = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


def _aggregated_resource(resource: ResourceDef) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "resource": resource.plural,
        "responseKind": {"group": resource.group, "version": resource.version, "kind": resource.kind},
        "scope": "Namespaced" if resource.namespaced else "Cluster",
        "singularResource": resource.singular,
        "verbs": _VERBS,
    }
    if resource.short_names:
        entry["shortNames"] = list(resource.short_names)
    if resource.categories:
        entry["categories"] = list(resource.categories)
    subresources = []
    for sub in resource.subresources:
        if sub in SAME_KIND_SUBRESOURCES:
            kind = {"group": resource.group, "version": resource.version, "kind": resource.kind}
            verbs = ["get", "patch", "update"]
        else:
            group, version, name = SUBRESOURCE_KINDS[sub]
            kind, verbs = {"group": group, "version": version, "kind": name}, ["create"]
        subresources.append({"subresource": sub, "responseKind": kind, "verbs": verbs})
    if subresources:
        entry["subresources"] = subresources
    return entry


@functools.cache
def aggregated(core: bool) -> bytes:
    """Aggregated discovery (apidiscovery.k8s.io/v2) for `/api` (core) or `/apis`."""
    names = [""] if core else list(dict.fromkeys(g for g, _ in group_versions() if g))
    items = [{
        "metadata": {"name": name, "creationTimestamp": None},
        "versions": [
            {"version": v, "resources": [_aggregated_resource(r) for r in in_group_version(g, v)],
             "freshness": "Current"}
            for g, v in group_versions() if g == name
        ],
    } for name in names]
    return _encode({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {},
                    "items": items})


def wants_aggregated(accept: str) -> bool:
    return "g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList" in accept.replace(" ", "")


def core_versions(address: str) -> bytes:
    return _encode({"kind": "APIVersions", "versions": ["v1"],
                    "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": address}]})


# --------------------------------------------------------------------------- OpenAPI v3


def _gvk(group: str, version: str, kind: str) -> dict[str, str]:
    return {"group": group, "version": version, "kind": kind}


def _ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def _query(name: str, kind: str = "string") -> Schema:
    return {"name": name, "in": "query", "schema": {"type": kind}, "uniqueItems": True}


_WRITE_PARAMS = [_query("dryRun"), _query("fieldManager"), _query("fieldValidation")]
_LIST_PARAMS = [_query(n) for n in ("labelSelector", "fieldSelector", "resourceVersion", "continue")] + [
    _query("limit", "integer"), _query("timeoutSeconds", "integer"), _query("watch", "boolean"),
    _query("allowWatchBookmarks", "boolean"),
]
def patch_types(resource: ResourceDef) -> tuple[str, ...]:
    """The PATCH media types a resource accepts, as its OpenAPI says: no strategic merge patch for custom
    resources (kubectl reads this to choose between a strategic and a JSON merge patch)."""
    if resource.custom:
        return ("application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml")
    return ("application/json-patch+json", "application/merge-patch+json", "application/strategic-merge-patch+json",
            "application/apply-patch+yaml")


def _op(action: str, gvk: dict[str, str], op_id: str, schema: str, params: list[Schema],
        body: str | None = None, body_types: tuple[str, ...] = ("application/json",)) -> Schema:
    op: Schema = {
        "operationId": op_id,
        "parameters": params,
        "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": _ref(schema)}}},
                      "401": {"description": "Unauthorized"}},
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": gvk,
    }
    if body is not None:
        op["requestBody"] = {"content": {t: {"schema": _ref(body)} for t in body_types}, "required": True}
    return op


def _paths(resource: ResourceDef, names: dict[tuple[str, str], str]) -> dict[str, Schema]:
    gvk = _gvk(resource.group, resource.version, resource.kind)
    schema = names[(resource.api_version, resource.kind)]
    list_schema = f"{schema}List"
    prefix = f"/{resource.group_version_path}"
    base = f"{prefix}/namespaces/{{namespace}}/{resource.plural}" if resource.namespaced else \
        f"{prefix}/{resource.plural}"
    op_base = f"{resource.kind}{'Namespaced' if resource.namespaced else ''}"
    name_param = {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}
    ns_param = [{"name": "namespace", "in": "path", "required": True, "schema": {"type": "string"}}] \
        if resource.namespaced else []
    paths: dict[str, Schema] = {
        base: {
            "parameters": ns_param,
            "get": _op("list", gvk, f"list{op_base}", list_schema, _LIST_PARAMS),
            "post": _op("post", gvk, f"create{op_base}", schema, _WRITE_PARAMS, schema),
        },
        f"{base}/{{name}}": {
            "parameters": [name_param, *ns_param],
            "get": _op("get", gvk, f"read{op_base}", schema, []),
            "put": _op("put", gvk, f"replace{op_base}", schema, _WRITE_PARAMS, schema),
            "patch": _op("patch", gvk, f"patch{op_base}", schema, [*_WRITE_PARAMS, _query("force", "boolean")],
                         "io.k8s.apimachinery.pkg.apis.meta.v1.Patch", patch_types(resource)),
            "delete": _op("delete", gvk, f"delete{op_base}", schema, [_query("gracePeriodSeconds", "integer")],
                          "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions"),
        },
    }
    if resource.namespaced:
        paths[f"{prefix}/{resource.plural}"] = {
            "get": _op("list", gvk, f"list{resource.kind}ForAllNamespaces", list_schema, _LIST_PARAMS)}
    # The subresources that read and write the whole object: status, and a pod's resize.
    for sub, served in (("status", resource.has_status), ("resize", "resize" in resource.subresources)):
        if served:
            title = sub.capitalize()
            paths[f"{base}/{{name}}/{sub}"] = {
                "parameters": [name_param, *ns_param],
                "get": _op("get", gvk, f"read{op_base}{title}", schema, []),
                "put": _op("put", gvk, f"replace{op_base}{title}", schema, _WRITE_PARAMS, schema),
                "patch": _op("patch", gvk, f"patch{op_base}{title}", schema, _WRITE_PARAMS,
                             "io.k8s.apimachinery.pkg.apis.meta.v1.Patch", patch_types(resource)),
            }
    for sub, (body_schema, _) in (("binding", BINDING), ("eviction", EVICTION)):
        if sub in resource.subresources:
            group, version, kind = SUBRESOURCE_KINDS[sub]
            paths[f"{base}/{{name}}/{sub}"] = {
                "parameters": [name_param, *ns_param],
                "post": _op("post", _gvk(group, version, kind), f"create{op_base}{kind}", body_schema,
                            _WRITE_PARAMS, body_schema),
            }
    return paths


def _with_gvk(schema: Schema, group: str, version: str, kind: str) -> Schema:
    return {**schema, "x-kubernetes-group-version-kind": [_gvk(group, version, kind)]}


def _document(group: str, version: str) -> dict[str, Any]:
    resources = in_group_version(group, version)
    names = {key: name for key, (name, _) in KIND_SCHEMAS.items()}
    schemas: dict[str, Schema] = {
        "io.k8s.apimachinery.pkg.apis.meta.v1.Patch": {"type": "object"},
        "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions": _with_gvk(DELETE_OPTIONS, "", "v1", "DeleteOptions"),
        "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta": LIST_META,
    }
    paths: dict[str, Schema] = {}
    for resource in resources:
        name, schema = KIND_SCHEMAS[(resource.api_version, resource.kind)]
        schemas[name] = _with_gvk(schema, resource.group, resource.version, resource.kind)
        schemas[f"{name}List"] = _with_gvk({"type": "object", "properties": {
            "apiVersion": {"type": "string"}, "kind": {"type": "string"},
            "metadata": _ref("io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta"),
            "items": {"type": "array", "items": _ref(name)},
        }, "required": ["items"]}, resource.group, resource.version, f"{resource.kind}List")
        if "binding" in resource.subresources:
            schemas[BINDING[0]] = _with_gvk(BINDING[1], "", "v1", "Binding")
        if "eviction" in resource.subresources:
            schemas[EVICTION[0]] = _with_gvk(EVICTION[1], "policy", "v1", "Eviction")
        paths.update(_paths(resource, names))
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": SERVER_VERSION["gitVersion"]},
        "paths": paths,
        "components": {"schemas": schemas},
    }


@functools.cache
def _documents() -> dict[str, bytes]:
    return {
        (f"apis/{g}/{v}" if g else f"api/{v}"): _encode(_document(g, v)) for g, v in group_versions()
    }


def v3_document(path: str) -> bytes | None:
    """The OpenAPI v3 document for `api/v1` or `apis/<group>/<version>`."""
    return _documents().get(path)


@functools.cache
def v3_root() -> bytes:
    entries = {
        path: {"serverRelativeURL": f"/openapi/v3/{path}?hash={hashlib.sha512(doc).hexdigest()[:32].upper()}"}
        for path, doc in _documents().items()
    }
    return _encode({"paths": entries})


def _field(number: int, payload: bytes) -> bytes:
    """One length-delimited protobuf field."""
    length, encoded = len(payload), b""
    while True:
        byte = length & 0x7F
        length >>= 7
        encoded += bytes([byte | (0x80 if length else 0)])
        if not length:
            break
    return bytes([number << 3 | 2]) + encoded + payload


@functools.cache
def v2_protobuf() -> bytes:
    """`/openapi/v2` as kubectl fetches it (gnostic openapi_v2.Document in protobuf): swagger, info, and no
    paths or definitions. kubectl asks for it only to validate a `kind: List` client-side, item by item; with
    no definitions it leaves every item to the server, which validates each with `fieldValidation=Strict`."""
    info = _field(1, b"Kubernetes") + _field(2, SERVER_VERSION["gitVersion"].encode())
    return _field(1, b"2.0") + _field(2, info) + _field(8, b"") + _field(9, b"")


# What kube-apiserver answers (kubectl asks with `...spec.v2@v1.0+protobuf`; an "@" would not parse as a media type).
V2_PROTOBUF_TYPE = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"


@functools.cache
def v2_json() -> bytes:
    return _encode({"swagger": "2.0", "info": {"title": "Kubernetes", "version": SERVER_VERSION["gitVersion"]},
                    "paths": {}, "definitions": {}})


def served_group_versions() -> list[str]:
    return [r.group_version_path for r in RESOURCES]
