"""The HTTP face of devcluster: the Kubernetes REST API over aiohttp.web.

aiohttp's low-level server (no router, no middlewares) calls one handler, which parses the URL
itself (`/api/v1/...`, `/apis/<group>/<version>/...`, optionally `namespaces/<ns>/`, then
`<plural>[/<name>[/<subresource>]]`), maps method + path to a Kubernetes verb, consults the fault
injector, and serves the verb from the `Store`. Every failure becomes the `Status` body a real API
server sends (never a stack trace); unexpected exceptions are a 500 Status.

Responses are encoded once with msgspec from the stored dicts (no copies). Watches are chunked
streams of JSON lines fed from a `Watcher` queue; bookmarks are sent when asked for, every
`bookmark_interval` seconds. Tables (`Accept: ...;as=Table`) serve `kubectl get`. Every request
that could write (POST, PUT, PATCH, DELETE under /api and /apis) is recorded in the audit with its
answer and User-Agent; `/devcluster/...` is the control endpoint (`devcluster.admin`).

This module owns no state beyond the request: objects live in the store, faults in the injector,
the write history in the audit.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import re
import time
from collections.abc import Callable
from typing import Any

import msgspec
import yaml
from aiohttp import StreamReader, web
from aiohttp.abc import AbstractStreamWriter
from aiohttp.http import RawRequestMessage

from devcluster import admin, errors, invariants, openapi, tables
from devcluster.audit import MUTATING_METHODS, AuditLog
from devcluster.conversion import to_view
from devcluster.errors import ApiError
from devcluster.faults import FaultInjector
from devcluster.resources import ResourceDef, by_path
from devcluster.schemas import BINDING, DELETE_OPTIONS, EVICTION, KIND_SCHEMAS, Schema
from devcluster.selectors import matcher
from devcluster.store import Store
from devcluster.validation import check, prune
from devcluster.watch import Watcher, WatchEvent

log = logging.getLogger("devcluster")

_encode = msgspec.json.Encoder().encode
_decoder = msgspec.json.Decoder()
_JSON = "application/json"
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
_PATCH_TYPES = {
    "application/merge-patch+json": "merge",
    "application/json-patch+json": "json",
    "application/strategic-merge-patch+json": "strategic",
    "application/apply-patch+yaml": "apply",
}
_YAML_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_SUCCESS_201 = _encode({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})
_OK = b"ok"
DEFAULT_WATCH_TIMEOUT = 1800.0
MAX_BODY_BYTES = 3 * 1024 * 1024  # the real API server refuses request bodies above 3 MiB


class _Target(msgspec.Struct):
    resource: ResourceDef
    namespace: str
    name: str
    subresource: str


def _list_items(resource: ResourceDef, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A list's items as kube-apiserver writes them: a built-in kind's without `apiVersion` and `kind`
    (kubernetes/kubernetes#3030: only the list says what they are), a custom resource's as stored (their
    own fields). A watch event's object and a single GET carry both either way."""
    if resource.custom:
        return items
    return [{key: value for key, value in item.items() if key != "apiVersion" and key != "kind"} for item in items]


def _json(body: bytes, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(body=body, status=status, content_type=_JSON, headers=headers)


def _error(error: ApiError) -> web.Response:
    headers = {"Retry-After": str(error.retry_after)} if error.retry_after is not None else None
    return _json(_encode(error.status()), error.http_status or error.code, headers)


def _parse_target(parts: list[str]) -> _Target | bytes | None:
    """Resolve `/api[s]/...` path segments: a resource target, a discovery document, or None (404)."""
    if parts[0] == "api":
        if len(parts) == 1:
            return None  # /api is answered by the caller (needs the address)
        group, version, rest = "", parts[1], parts[2:]
    else:
        if len(parts) == 1:
            return openapi.group_list()
        if len(parts) == 2:
            return openapi.group(parts[1])
        group, version, rest = parts[1], parts[2], parts[3:]
    if not rest:
        return openapi.resource_list(group, version)
    namespace = ""
    if rest[0] == "namespaces" and len(rest) >= 3 and not (len(rest) == 3 and rest[2] in ("status", "finalize")):
        namespace, rest = rest[1], rest[2:]
    if len(rest) > 3:
        return None
    resource = by_path(group, version, rest[0])
    if resource is None or (namespace and not resource.namespaced):
        return None
    name = rest[1] if len(rest) > 1 else ""
    sub = rest[2] if len(rest) > 2 else ""
    if sub and sub not in resource.subresources:
        return None
    return _Target(resource, namespace, name, sub)


def _verb(method: str, target: _Target, query: dict[str, str]) -> str:
    if method == "GET":
        if _flag(query, "watch"):
            return "watch"
        return "get" if target.name else "list"
    return {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(method, method.lower())


def _int_param(query: dict[str, str], name: str) -> int | None:
    raw = query.get(name)
    if raw in (None, ""):
        return None
    try:
        return int(raw)
    except ValueError:
        raise errors.bad_request(f'invalid value for {name}: "{raw}"') from None


def _flag(query: dict[str, str], name: str) -> bool:
    return query.get(name, "").lower() in ("true", "1")


def _dry_run(query: dict[str, str]) -> bool:
    value = query.get("dryRun", "")
    if value not in ("", "All"):
        raise errors.bad_request(f'dryRun must be "All" (got "{value}")')
    return value == "All"


def _include(request: web.BaseRequest) -> str:
    include = request.query.get("includeObject", "") or "Metadata"
    if include not in ("None", "Metadata", "Object"):
        raise errors.bad_request(f'includeObject must be one of None, Metadata, Object (got "{include}")')
    return include


def _manager(request: web.BaseRequest, query: dict[str, str]) -> str:
    """The field manager of a write: `?fieldManager=`, else the client's program name from its User-Agent."""
    return query.get("fieldManager") or request.headers.get("User-Agent", "").split("/")[0].strip() or "unknown"


def _wants_table(accept: str) -> bool:
    return "as=Table" in accept


class ApiServer:
    """The aiohttp application serving one `Store`."""

    def __init__(self, store: Store, faults: FaultInjector, *, bookmark_interval: float = 1.0,
                 address: str = "127.0.0.1:0", audit: AuditLog | None = None) -> None:
        self.store = store
        self.faults = faults
        self.audit = audit or AuditLog()
        self.bookmark_interval = bookmark_interval
        self.address = address
        self.requests = 0

    def http_server(self) -> web.Server:
        """The low-level aiohttp server (no router, no middlewares: this class parses every path itself)."""
        loop = asyncio.get_running_loop()

        def request_factory(message: RawRequestMessage, payload: StreamReader, protocol: web.RequestHandler,
                            writer: AbstractStreamWriter, task: asyncio.Task[None]) -> web.BaseRequest:
            return web.BaseRequest(message, payload, protocol, writer, task, loop, client_max_size=MAX_BODY_BYTES)

        return web.Server(self._handle, request_factory=request_factory, access_log=None)

    # ----------------------------------------------------------------------- dispatch

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        self.requests += 1
        if request.method not in MUTATING_METHODS or not request.path.startswith("/api"):
            return await self._answer(request)
        status = 0
        try:
            response = await self._answer(request)
            status = response.status
            return response
        finally:
            self.audit.record(request.method, request.path, status, request.headers.get("User-Agent", ""))

    async def _answer(self, request: web.BaseRequest) -> web.StreamResponse:
        try:
            return await self._dispatch(request)
        except ApiError as error:
            return _error(error)
        except web.HTTPException as exc:  # raised by aiohttp itself, e.g. 413 for an oversized body
            return _error(ApiError(exc.status, exc.reason.replace(" ", ""), exc.text or exc.reason, {}))
        except (ConnectionResetError, asyncio.CancelledError):
            raise
        except Exception as exc:  # a bug must still answer a Status, not a stack trace
            log.exception("devcluster: internal error serving %s %s", request.method, request.path)
            return _error(ApiError(500, "InternalError", f"Internal error occurred: {type(exc).__name__}: {exc}", {}))

    async def _dispatch(self, request: web.BaseRequest) -> web.StreamResponse:
        path = request.path
        parts = [p for p in path.split("/") if p]
        if not parts:
            return _json(_encode({"paths": ["/api", "/api/v1", "/apis", "/openapi/v3", "/version"]}))
        head = parts[0]
        if head in ("api", "apis"):
            return await self._api(request, parts)
        if head == admin.PREFIX:
            return await admin.handle(request, parts, self.faults, self.audit)
        if request.method != "GET":
            raise errors.method_not_allowed()
        if head == "version" and len(parts) == 1:
            return _json(_encode(openapi.SERVER_VERSION))
        if head in ("healthz", "livez", "readyz"):
            return web.Response(body=_OK, content_type="text/plain")
        if head == "openapi" and parts[1:] == ["v2"]:
            if "protobuf" in request.headers.get("Accept", ""):
                return web.Response(body=openapi.v2_protobuf(), headers={"Content-Type": openapi.V2_PROTOBUF_TYPE})
            return _json(openapi.v2_json())
        if head == "openapi" and len(parts) >= 2 and parts[1] == "v3":
            document = openapi.v3_root() if len(parts) == 2 else openapi.v3_document("/".join(parts[2:]))
            if document is not None:
                return _json(document)
        raise errors.path_not_found()

    async def _api(self, request: web.BaseRequest, parts: list[str]) -> web.StreamResponse:
        if len(parts) == 1:
            if request.method != "GET":
                raise errors.method_not_allowed()
            if openapi.wants_aggregated(request.headers.get("Accept", "")):
                return web.Response(body=openapi.aggregated(parts[0] == "api"),
                                    headers={"Content-Type": openapi.AGGREGATED_CONTENT_TYPE})
            if parts[0] == "api":
                return _json(openapi.core_versions(self.address))
        found = _parse_target(parts)
        if found is None:
            raise errors.path_not_found()
        if isinstance(found, bytes):
            if request.method != "GET":
                raise errors.method_not_allowed()
            return _json(found)
        target = found
        query = dict(request.query)
        verb = _verb(request.method, target, query)
        if self.faults.active:
            delay = self.faults.latency(verb, request.path)
            if delay > 0:
                await self.faults.delay(delay)
            injected = self.faults.decide(verb, request.path)
            if injected is not None:
                return _error(injected)
        method = request.method
        if target.subresource in ("binding", "eviction"):
            if method != "POST":
                raise errors.method_not_allowed()
            return await self._pod_action(request, target)
        if not target.name:
            if method == "GET":
                if verb == "watch":
                    return await self._watch(request, target, query)
                return self._list(request, target, query)
            if method == "POST":
                return await self._create(request, target, query)
            if method == "DELETE":
                return self._delete_collection(target, query)
            raise errors.method_not_allowed()
        if method == "GET":
            if verb == "watch":
                query["fieldSelector"] = ",".join(
                    s for s in (query.get("fieldSelector", ""), f"metadata.name={target.name}") if s)
                return await self._watch(request, target, query)
            obj = self.store.get(target.resource, target.name, target.namespace)
            return self._object_response(request, target.resource, obj)
        if method == "PUT":
            return await self._update(request, target, query)
        if method == "PATCH":
            return await self._patch(request, target, query)
        if method == "DELETE":
            return await self._delete(request, target, query)
        raise errors.method_not_allowed()

    # ----------------------------------------------------------------------- bodies and validation

    async def _body(self, request: web.BaseRequest) -> Any:
        raw = await request.read()
        content_type = request.headers.get("Content-Type", _JSON).split(";")[0].strip()
        if content_type not in (_JSON, "", "application/yaml", *list(_PATCH_TYPES)):
            raise errors.unsupported_media_type(content_type, ("application/json", "application/yaml"))
        try:
            return _decoder.decode(raw)
        except msgspec.DecodeError as exc:
            if content_type in ("application/yaml", "application/apply-patch+yaml"):  # a body may be YAML
                try:
                    return yaml.load(raw, Loader=_YAML_LOADER)
                except yaml.YAMLError as error:
                    raise errors.bad_request(f"error decoding YAML: {error}") from None
            raise errors.bad_request(f"couldn't get version/kind; json parse error: {exc}") from None

    def _validated(self, resource_key: tuple[str, str], schema: Schema, body: Any, name: str,
                   query: dict[str, str], headers: dict[str, str]) -> dict[str, Any]:
        api_version, kind = resource_key
        if not isinstance(body, dict):
            raise errors.bad_request(f'{kind} in version "{api_version.rpartition("/")[2]}" cannot be handled as a '
                                     f"{kind}: the body must be a JSON object")
        if body.get("kind") not in (None, "", kind) or body.get("apiVersion") not in (None, "", api_version):
            raise errors.bad_request(f"the API version in the data ({body.get('apiVersion')}) does not match the "
                                     f"expected API version ({api_version})" if body.get("kind") in (None, "", kind)
                                     else f'{kind} in version "{api_version.rpartition("/")[2]}" cannot be handled '
                                     f'as a {kind}: got kind "{body.get("kind")}"')
        findings = check(body, schema)
        group = api_version.rpartition("/")[0]
        meta = body.get("metadata")
        display = str((meta.get("name") if isinstance(meta, dict) else None) or name)
        if findings.wrong_type:
            field, problem = findings.wrong_type[0]
            raise errors.bad_request(f'{kind} in version "{api_version.rpartition("/")[2]}" cannot be handled as a '
                                     f"{kind}: json: cannot unmarshal {field}: {problem}")
        if findings.invalid:
            raise errors.invalid(kind, display, findings.invalid, group)
        if findings.unknown:
            mode = query.get("fieldValidation", "Warn")
            if mode == "Strict":
                raise errors.invalid(kind, display, [
                    ("FieldValueInvalid", field, f'Invalid value: "{field}": strict decoding error: unknown field '
                                                 f'"{field}"') for field in findings.unknown], group)
            if mode not in ("Warn", "Ignore"):
                raise errors.bad_request(f"fieldValidation must be one of Strict, Warn, Ignore (got {mode!r})")
            if mode == "Warn":
                headers["Warning"] = ", ".join(f'299 - "unknown field \\"{f}\\""' for f in findings.unknown)
            body = prune(body, schema)
        validated: dict[str, Any] = body
        return validated

    def _check_object(self, resource: ResourceDef, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        name = str(meta.get("name") or "")
        causes: list[tuple[str, str, str]] = []
        if name and (len(name) > 253 or not _NAME.match(name)):
            causes.append(("FieldValueInvalid", "metadata.name", f'Invalid value: "{name}": a lowercase RFC 1123 '
                           "subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
                           "start and end with an alphanumeric character"))
        causes += invariants.problems(resource.kind, obj)
        if causes:
            raise errors.invalid(resource.kind, name, causes, resource.group)

    def _schema(self, resource: ResourceDef) -> tuple[tuple[str, str], Schema]:
        key = (resource.api_version, resource.kind)
        return key, KIND_SCHEMAS[key][1]

    # ----------------------------------------------------------------------- verbs

    def _object_response(self, request: web.BaseRequest, resource: ResourceDef, obj: dict[str, Any],
                         status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
        if _wants_table(request.headers.get("Accept", "")):
            body = tables.table(resource, [obj], time.time(), str(obj["metadata"].get("resourceVersion", "")),
                                include=_include(request))
            return _json(_encode(body), status, headers)
        return _json(_encode(obj), status, headers)

    def _list(self, request: web.BaseRequest, target: _Target, query: dict[str, str]) -> web.Response:
        resource = target.resource
        predicate = matcher(query.get("labelSelector", ""), query.get("fieldSelector", ""), resource.kind)
        items = self.store.list(resource, target.namespace, predicate)
        rv = str(self.store.resource_version)
        limit = _int_param(query, "limit")
        token = query.get("continue", "")
        if token:
            try:
                after = msgspec.json.decode(base64.urlsafe_b64decode(token.encode()))
                start_ns, start_name = str(after[0]), str(after[1])
            except (ValueError, TypeError, IndexError, msgspec.DecodeError):
                raise errors.bad_request("continue key is not valid: illegal base64 data") from None
            items = [o for o in items if (o["metadata"].get("namespace", ""), o["metadata"]["name"])
                     > (start_ns, start_name)]
        next_token = ""
        remaining = 0
        if limit and limit > 0 and len(items) > limit:
            remaining = len(items) - limit
            items = items[:limit]
            last = items[-1]["metadata"]
            next_token = base64.urlsafe_b64encode(
                _encode([last.get("namespace", ""), last["name"]])).decode()
        if _wants_table(request.headers.get("Accept", "")):
            return _json(_encode(tables.table(resource, items, time.time(), rv, next_token, _include(request))))
        metadata: dict[str, Any] = {"resourceVersion": rv}
        if next_token:
            metadata.update({"continue": next_token, "remainingItemCount": remaining})
        return _json(_encode({"kind": f"{resource.kind}List", "apiVersion": resource.api_version,
                              "metadata": metadata, "items": _list_items(resource, items)}))

    async def _create(self, request: web.BaseRequest, target: _Target, query: dict[str, str]) -> web.Response:
        resource = target.resource
        headers: dict[str, str] = {}
        key, schema = self._schema(resource)
        body = self._validated(key, schema, await self._body(request), "", query, headers)
        self._check_object(resource, body)
        obj = self.store.create_in(resource, {**body, "apiVersion": resource.api_version, "kind": resource.kind},
                                   target.namespace, keep_status=False, dry_run=_dry_run(query))
        return self._object_response(request, resource, obj, 201, headers)

    async def _update(self, request: web.BaseRequest, target: _Target, query: dict[str, str]) -> web.Response:
        resource = target.resource
        headers: dict[str, str] = {}
        key, schema = self._schema(resource)
        body = self._validated(key, schema, await self._body(request), target.name, query, headers)
        body = {**body, "apiVersion": resource.api_version, "kind": resource.kind}
        if target.subresource != "status":
            self._check_object(resource, {**body, "metadata": {**(body.get("metadata") or {}), "name": target.name}})
        obj = self.store.update_in(resource, target.name, target.namespace, body, subresource=target.subresource,
                                   dry_run=_dry_run(query), strict=True, manager=_manager(request, query))
        return self._object_response(request, resource, obj, 200, headers)

    async def _patch(self, request: web.BaseRequest, target: _Target, query: dict[str, str]) -> web.Response:
        resource = target.resource
        content_type = request.headers.get("Content-Type", "").split(";")[0].strip()
        patch_type = _PATCH_TYPES.get(content_type)
        accepted = openapi.patch_types(resource)
        if patch_type is None or content_type not in accepted:
            raise errors.unsupported_media_type(content_type, accepted)
        if patch_type != "apply" and "force" in query:
            raise errors.invalid("PatchOptions", "", [("FieldValueForbidden", "force",
                                                       "Forbidden: may not be specified for non-apply patch")],
                                 "meta.k8s.io")
        patch = await self._body(request)
        headers: dict[str, str] = {}
        key, schema = self._schema(resource)

        def validate(result: dict[str, Any]) -> dict[str, Any]:
            checked = self._validated(key, schema, result, target.name, query, headers)
            if target.subresource != "status":
                self._check_object(resource, {**checked, "metadata": {**(checked.get("metadata") or {}),
                                                                      "name": target.name}})
            return checked

        if patch_type == "apply":
            return self._apply(request, target, query, patch, validate, headers)
        result = self.store.patch(resource, target.name, patch, target.namespace, patch_type=patch_type,
                                  subresource=target.subresource, check=validate, dry_run=_dry_run(query),
                                  strict=True, manager=_manager(request, query))
        return self._object_response(request, resource, result, 200, headers)

    def _apply(self, request: web.BaseRequest, target: _Target, query: dict[str, str], applied: Any,
               validate: Callable[[dict[str, Any]], dict[str, Any]], headers: dict[str, str]) -> web.Response:
        """Server-side apply (`devcluster.apply`): create or merge, with field ownership and conflicts."""
        resource = target.resource
        manager = query.get("fieldManager", "")
        if not manager:
            raise errors.invalid("PatchOptions", "", [("FieldValueRequired", "fieldManager",
                                                       "Required value: is required for apply patch")], "meta.k8s.io")
        if target.subresource:
            raise errors.method_not_allowed()
        if not isinstance(applied, dict):
            raise errors.bad_request("an applied configuration must be an object")
        if applied.get("apiVersion") != resource.api_version or applied.get("kind") != resource.kind:
            raise errors.bad_request(f"the applied configuration is {applied.get('apiVersion')} "
                                     f"{applied.get('kind')}, not {resource.api_version} {resource.kind}")
        raw_meta = applied.get("metadata")
        meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
        if meta.get("name") != target.name:
            raise errors.bad_request(f"the name of the object ({meta.get('name')}) does not match the name on "
                                     f"the URL ({target.name})")
        obj, created = self.store.apply(resource, target.name, target.namespace, applied, manager=manager,
                                        force=_flag(query, "force"), check=validate, dry_run=_dry_run(query))
        return self._object_response(request, resource, obj, 201 if created else 200, headers)

    async def _delete_options(self, request: web.BaseRequest,
                              query: dict[str, str]) -> tuple[int | None, dict[str, Any]]:
        grace = _int_param(query, "gracePeriodSeconds")
        preconditions: dict[str, Any] = {}
        if request.can_read_body:
            options = await self._body(request)
            if options is not None and not isinstance(options, dict):
                raise errors.bad_request("DeleteOptions must be a JSON object")
            problems = check(options or {}, DELETE_OPTIONS).wrong_type
            if problems:
                field, problem = problems[0]
                raise errors.bad_request(f"invalid DeleteOptions: {field}: {problem}")
            if options:
                if grace is None and options.get("gracePeriodSeconds") is not None:
                    grace = int(options["gracePeriodSeconds"])
                preconditions = options.get("preconditions") or {}
                if not isinstance(preconditions, dict):
                    raise errors.bad_request("DeleteOptions.preconditions must be an object")
        if grace is not None and grace < 0:
            raise errors.invalid("DeleteOptions", "", [("FieldValueInvalid", "gracePeriodSeconds",
                                                        "Invalid value: must be >= 0")])
        return grace, preconditions

    async def _delete(self, request: web.BaseRequest, target: _Target, query: dict[str, str]) -> web.Response:
        if target.subresource:
            raise errors.method_not_allowed()
        grace, preconditions = await self._delete_options(request, query)
        obj = self.store.delete(target.resource, target.name, target.namespace, grace_period_seconds=grace,
                                preconditions=preconditions, dry_run=_dry_run(query))
        return self._object_response(request, target.resource, obj)

    def _delete_collection(self, target: _Target, query: dict[str, str]) -> web.Response:
        predicate = matcher(query.get("labelSelector", ""), query.get("fieldSelector", ""), target.resource.kind)
        grace = _int_param(query, "gracePeriodSeconds")
        items = self.store.list(target.resource, target.namespace, predicate)
        for obj in items:
            meta = obj["metadata"]
            if self.store.find(target.resource, meta["name"], meta.get("namespace", "")) is not None:
                self.store.delete(target.resource, meta["name"], meta.get("namespace", ""), grace_period_seconds=grace)
        return _json(_encode({"kind": f"{target.resource.kind}List", "apiVersion": target.resource.api_version,
                              "metadata": {"resourceVersion": str(self.store.resource_version)},
                              "items": _list_items(target.resource, items)}))

    async def _pod_action(self, request: web.BaseRequest, target: _Target) -> web.Response:
        body = await self._body(request)
        headers: dict[str, str] = {}
        if target.subresource == "binding":
            body = self._validated(("v1", "Binding"), BINDING[1], body, target.name, dict(request.query), headers)
            node = str((body.get("target") or {}).get("name") or "")
            if not node:
                raise errors.invalid("Binding", target.name, [("FieldValueRequired", "target.name", "Required value")])
            meta = body.get("metadata") or {}
            if meta.get("name") and meta["name"] != target.name:
                raise errors.bad_request(f"the name of the object ({meta['name']}) does not match the name on "
                                         f"the URL ({target.name})")
            uid = meta.get("uid") or None
            self.store.bind(target.namespace, target.name, node, uid=str(uid) if uid else None)
        else:
            body = self._validated(("policy/v1", "Eviction"), EVICTION[1], body, target.name, dict(request.query),
                                   headers)
            options = body.get("deleteOptions") or {}
            findings = check(options, DELETE_OPTIONS) if isinstance(options, dict) else None
            if findings is None or findings.wrong_type:
                raise errors.bad_request("Eviction.deleteOptions must be a DeleteOptions object")
            grace = options.get("gracePeriodSeconds")
            preconditions = options.get("preconditions") or {}
            if not isinstance(preconditions, dict):
                raise errors.bad_request("Eviction.deleteOptions.preconditions must be an object")
            self.store.evict(target.namespace, target.name,
                             grace_period_seconds=int(grace) if grace is not None else None,
                             preconditions=preconditions)
        return _json(_SUCCESS_201, 201, headers or None)

    # ----------------------------------------------------------------------- watch

    async def _watch(self, request: web.BaseRequest, target: _Target, query: dict[str, str]) -> web.StreamResponse:
        resource = target.resource
        predicate = matcher(query.get("labelSelector", ""), query.get("fieldSelector", ""), resource.kind)
        timeout = _int_param(query, "timeoutSeconds")
        bookmarks = _flag(query, "allowWatchBookmarks")
        initial = _flag(query, "sendInitialEvents")
        table = _include(request) if _wants_table(request.headers.get("Accept", "")) else ""
        since = "" if initial else query.get("resourceVersion", "")
        response = web.StreamResponse(status=200, headers={"Content-Type": _JSON})
        response.enable_chunked_encoding()
        try:
            watcher, backlog = self.store.watch(resource, target.namespace, predicate, since)
        except ApiError as error:
            if error.code != 410:
                raise
            await response.prepare(request)
            await response.write(_encode({"type": "ERROR", "object": error.status()}) + b"\n")
            await response.write_eof()
            return response
        try:
            await response.prepare(request)
            if backlog:
                await response.write(b"".join(self._line(kind, event, resource, table) for kind, event in backlog))
            if initial and bookmarks:
                await response.write(self._bookmark(resource, initial_end=True))
            await self._stream(response, watcher, resource, table, bookmarks,
                               float(timeout) if timeout and timeout > 0 else DEFAULT_WATCH_TIMEOUT)
            await response.write_eof()
        except (ConnectionResetError, ConnectionError):
            pass
        finally:
            self.store.stop_watch(watcher)
        return response

    async def _stream(self, response: web.StreamResponse, watcher: Watcher, resource: ResourceDef, table: str,
                      bookmarks: bool, duration: float) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + duration
        next_bookmark = loop.time() + self.bookmark_interval
        while not watcher.closed:
            now = loop.time()
            if now >= deadline:
                return
            wait = deadline - now
            if bookmarks:
                wait = min(wait, max(0.0, next_bookmark - now))
            await watcher.wait(wait)
            if watcher.queue:
                queue = watcher.queue
                lines = []
                while queue:
                    kind, event = queue.popleft()
                    lines.append(self._line(kind, event, resource, table))
                await response.write(b"".join(lines))
            if bookmarks and loop.time() >= next_bookmark and not watcher.closed:
                await response.write(self._bookmark(resource))
                next_bookmark = loop.time() + self.bookmark_interval

    def _line(self, kind: str, event: WatchEvent, resource: ResourceDef, table: str) -> bytes:
        """One watch line; `table` is empty for objects, else the includeObject of a Table answer."""
        if not table and not resource.stored_as:
            return event.line(kind)
        obj = to_view(resource, event.obj) if resource.stored_as else event.obj
        if table:
            obj = tables.table(resource, [obj], time.time(), str(event.rv), include=table)
        return _encode({"type": kind, "object": obj}) + b"\n"

    def _bookmark(self, resource: ResourceDef, initial_end: bool = False) -> bytes:
        metadata: dict[str, Any] = {"resourceVersion": str(self.store.resource_version)}
        if initial_end:
            metadata["annotations"] = {"k8s.io/initial-events-end": "true"}
        return _encode({"type": "BOOKMARK", "object": {"kind": resource.kind, "apiVersion": resource.api_version,
                                                       "metadata": metadata}}) + b"\n"

