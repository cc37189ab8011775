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
