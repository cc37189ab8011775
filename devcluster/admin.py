"""devcluster's own control endpoints, served beside the Kubernetes API on the same loopback port.

    GET    /devcluster/faults                 the active fault rules (id, how often each fired)
    POST   /devcluster/faults                 add a rule, a JSON `FaultSpec`:
                                              {"status": 429, "verb": "create", "path": "/binding", "fraction": 1}
    DELETE /devcluster/faults                 remove every rule
    DELETE /devcluster/faults/<id>            remove one rule
    POST   /devcluster/faults/drop-watches    close every open watch stream now
    GET    /devcluster/audit?since=<seq>      the write audit (`devcluster.audit`) after record <seq>

So that a test, a benchmark or a person with curl can break a devcluster running in another
process (`toposched devcluster`) and see which client wrote what. Not a Kubernetes path: no
Kubernetes client asks for it, and the fault rules never match it. Answers are JSON; a bad request
is a 400 with {"error": "..."} naming the field.
"""

from __future__ import annotations

import msgspec
from aiohttp import web

from devcluster.audit import AuditLog
from devcluster.faults import FaultInjector, FaultSpec, FaultSpecError

PREFIX = "devcluster"

_encode = msgspec.json.Encoder().encode
_spec_decoder = msgspec.json.Decoder(FaultSpec)


def _answer(body: object, status: int = 200) -> web.Response:
    return web.Response(body=_encode(body), status=status, content_type="application/json")


def _problem(status: int, message: str) -> web.Response:
    return _answer({"error": message}, status)


async def handle(request: web.BaseRequest, parts: list[str], faults: FaultInjector, audit: AuditLog) -> web.Response:
    """Serve `/devcluster/<parts[1:]>`."""
    method = request.method
    rest = parts[1:]
    if rest == ["faults"]:
        if method == "GET":
            return _answer({"rules": faults.rules, "injected": faults.injected})
        if method == "POST":
            try:
                spec = _spec_decoder.decode(await request.read())
                rule = faults.add(spec)
            except (msgspec.DecodeError, msgspec.ValidationError, FaultSpecError) as error:
                return _problem(400, f"bad fault rule: {error}")
            return _answer(rule, 201)
        if method == "DELETE":
            removed = len(faults.rules)
            faults.clear()
            return _answer({"removed": removed})
        return _problem(405, f"{method} is not allowed on /devcluster/faults")
    if len(rest) == 2 and rest[0] == "faults":
        if rest[1] == "drop-watches" and method == "POST":
            return _answer({"closed": faults.drop_watches()})
        if method == "DELETE" and rest[1].isdigit():
            if faults.remove_id(int(rest[1])):
                return _answer({"removed": 1})
            return _problem(404, f"no fault rule {rest[1]}")
        return _problem(405 if rest[1] == "drop-watches" or rest[1].isdigit() else 404,
                        f"{method} /devcluster/faults/{rest[1]} is not served")
    if rest == ["audit"]:
        if method != "GET":
            return _problem(405, f"{method} is not allowed on /devcluster/audit")
        raw = request.query.get("since", "0")
        if not raw.isdigit():
            return _problem(400, f"since: expected a record number >= 0, got {raw!r}")
        return _answer({"first": audit.first_seq, "records": audit.since(int(raw))})
    return _problem(404, f"/{'/'.join(parts)} is not served (see /devcluster/faults, /devcluster/audit)")
