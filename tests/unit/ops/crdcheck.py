"""Check a custom resource against a CRD's openAPIV3Schema offline, CEL rules included.

`violations(crd, obj)` gives what an API server would refuse: JSON-schema errors (types, enums,
required fields, minimums, patterns) and the messages of the `x-kubernetes-validations` CEL rules
that evaluate to false, each rule evaluated with `self` bound to the node it is declared on, as the
API server does. CEL is evaluated with cel-python (the Kubernetes CEL extension libraries are not
available; our rules use only core CEL: has(), ternaries, arithmetic, comparisons).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import celpy
import jsonschema
from celpy.adapter import json_to_cel

Manifest = dict[str, Any]


def served_schema(crd: Manifest, version: str) -> Manifest:
    for entry in crd["spec"]["versions"]:
        if entry["name"] == version:
            schema: Manifest = entry["schema"]["openAPIV3Schema"]
            return schema
    raise AssertionError(f"{crd['metadata']['name']} does not serve {version}")


def _cel_failures(schema: Manifest, value: Any, where: str) -> Iterator[str]:
    for rule in schema.get("x-kubernetes-validations", []):
        environment = celpy.Environment()
        program = environment.program(environment.compile(rule["rule"]))
        result = program.evaluate({"self": json_to_cel(value)})
        if not isinstance(result, celpy.celtypes.BoolType):
            yield f"{where}: rule {rule['rule']!r} did not evaluate to a bool: {result!r}"
        elif not result:
            yield f"{where}: {rule['message']}"
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        for key, child in value.items():
            if key in properties:
                yield from _cel_failures(properties[key], child, f"{where}.{key}")
            elif isinstance(schema.get("additionalProperties"), dict):
                yield from _cel_failures(schema["additionalProperties"], child, f"{where}.{key}")
    elif isinstance(value, list) and "items" in schema:
        for index, child in enumerate(value):
            yield from _cel_failures(schema["items"], child, f"{where}[{index}]")


def violations(crd: Manifest, obj: Manifest) -> list[str]:
    group, _, version = obj["apiVersion"].partition("/")
    assert group == crd["spec"]["group"], f"{obj['apiVersion']} is not served by {crd['metadata']['name']}"
    assert obj["kind"] == crd["spec"]["names"]["kind"]
    schema = served_schema(crd, version)
    validator = jsonschema.Draft7Validator(schema)
    found = [f"{'.'.join(str(p) for p in error.absolute_path) or '<root>'}: {error.message}"
             for error in validator.iter_errors(obj)]
    if not found:  # CEL runs on schema-valid objects only, as in the API server
        found = list(_cel_failures(schema, obj, "<root>"))
    return found


def untyped_nodes(schema: Manifest, where: str = "<root>") -> Iterator[str]:
    """Nodes of a schema that break the structural-schema rule 'every node has a type'."""
    if "type" not in schema and not schema.get("x-kubernetes-int-or-string") \
            and not schema.get("x-kubernetes-preserve-unknown-fields"):
        yield where
    for key, child in schema.get("properties", {}).items():
        yield from untyped_nodes(child, f"{where}.{key}")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from untyped_nodes(schema["additionalProperties"], f"{where}.*")
    if "items" in schema:
        yield from untyped_nodes(schema["items"], f"{where}[]")
