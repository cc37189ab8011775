"""Check a built-in Kubernetes object offline against the API's own types, as strict as kubectl's
server-side field validation: an unknown field, a value of the wrong type or a missing required
field is a problem naming the field path.

The types are the OpenAPI-generated models shipped with kubernetes-asyncio (`openapi_types` and
`attribute_map` per kind, required fields checked by the model constructors). This covers the kinds
devcluster does not serve (apps, policy, rbac, apiextensions, ConfigMap, Service, ServiceAccount),
so a typo in a Deployment is caught even where `kubectl apply --dry-run=client` cannot run.
"""

from __future__ import annotations

import re
from typing import Any

from kubernetes_asyncio.client import models

_LIST = re.compile(r"^list\[(.+)\]$")
_DICT = re.compile(r"^dict\(str, (.+)\)$")
_SCALARS: dict[str, tuple[type, ...]] = {"str": (str,), "int": (int,), "bool": (bool,), "float": (int, float),
                                         "datetime": (str,), "date": (str,)}
# Schema nodes the generated model types as `object` but that are schemas themselves.
_SCHEMA_VALUED = {("V1JSONSchemaProps", "items"), ("V1JSONSchemaProps", "additional_properties")}


def model_for(api_version: str, kind: str) -> str:
    version = api_version.rpartition("/")[2]
    name = f"{version[:1].upper()}{version[1:]}{kind}"
    if not hasattr(models, name):
        raise LookupError(f"no kubernetes-asyncio model for {api_version} {kind} ({name})")
    return name


def problems(obj: dict[str, Any]) -> list[str]:
    found: list[str] = []
    _check(model_for(obj["apiVersion"], obj["kind"]), obj, "", found)
    return found


def _check(type_name: str, value: Any, where: str, found: list[str]) -> Any:
    """Validate `value` as `type_name`; returns a model instance (or plain value) for the constructor."""
    if value is None:
        return None
    if (match := _LIST.match(type_name)) is not None:
        if not isinstance(value, list):
            found.append(f"{where}: expected a list, got {type(value).__name__}")
            return None
        return [_check(match[1], item, f"{where}[{index}]", found) for index, item in enumerate(value)]
    if (match := _DICT.match(type_name)) is not None:
        if not isinstance(value, dict):
            found.append(f"{where}: expected a map, got {type(value).__name__}")
            return None
        return {key: _check(match[1], item, f"{where}.{key}", found) for key, item in value.items()}
    if type_name == "object":
        return value
    if type_name in _SCALARS:
        expected = _SCALARS[type_name]
        if not isinstance(value, expected) or (type_name != "bool" and isinstance(value, bool)):
            found.append(f"{where}: expected {type_name}, got {value!r}")
        return value
    model = getattr(models, type_name)
    if not isinstance(value, dict):
        found.append(f"{where}: expected an object ({type_name}), got {type(value).__name__}")
        return None
    by_json = {json_name: attr for attr, json_name in model.attribute_map.items()}
    kwargs: dict[str, Any] = {}
    for key, item in value.items():
        attr = by_json.get(key)
        path = f"{where}.{key}" if where else key
        if attr is None:
            found.append(f"{path}: unknown field (not in {type_name})")
            continue
        if (type_name, attr) in _SCHEMA_VALUED and isinstance(item, dict):
            kwargs[attr] = _check("V1JSONSchemaProps", item, path, found)
        else:
            kwargs[attr] = _check(model.openapi_types[attr], item, path, found)
    try:
        return model(**kwargs)
    except ValueError as error:  # a required field is missing, or an enum value is not allowed
        found.append(f"{where or '<root>'}: {error}")
        return None
