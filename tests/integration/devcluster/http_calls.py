"""Plain HTTP calls on devcluster (the `http` fixture's session): a status and the decoded body."""

from __future__ import annotations

import json
from typing import Any

import aiohttp


async def call(http: aiohttp.ClientSession, method: str, path: str, body: Any = None, *,
               content_type: str = "application/json") -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    async with http.request(method, path, data=data, headers={"Content-Type": content_type}) as response:
        return response.status, await response.json(content_type=None)


async def ok(http: aiohttp.ClientSession, method: str, path: str, body: Any = None, *,
             content_type: str = "application/json") -> dict[str, Any]:
    """The body of a call that must succeed (200 or 201)."""
    status, answer = await call(http, method, path, body, content_type=content_type)
    assert status in (200, 201), answer
    found: dict[str, Any] = answer
    return found


def refused_fields(answer: dict[str, Any]) -> list[str]:
    """The fields a 422 Invalid names, in its order."""
    assert answer["kind"] == "Status" and answer["code"] == 422 and answer["reason"] == "Invalid", answer
    return [cause["field"] for cause in answer["details"]["causes"]]


def assert_refused(status: int, answer: dict[str, Any], field: str, message: str, kind: str,
                   group: str = "scheduling.k8s.io") -> None:
    """A 422 that names `field`, says `message`, and is about a `kind` of `group`."""
    assert status == 422 and field in refused_fields(answer), answer
    assert message in answer["message"]
    assert answer["details"]["group"] == group and answer["details"]["kind"] == kind
