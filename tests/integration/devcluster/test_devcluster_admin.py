"""devcluster's control endpoint (/devcluster/faults, /devcluster/audit) over HTTP, as a test or a user
with curl drives a devcluster running in another process."""

from __future__ import annotations

from typing import Any

import aiohttp
from kubernetes_asyncio import client

from devcluster import DevCluster

from .manifests import pod


async def control(cluster: DevCluster, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as session, \
            session.request(method, f"{cluster.url}/devcluster/{path}", json=body) as response:
        return response.status, await response.json()


async def bind(core: Any, name: str) -> int:
    body = client.V1Binding(metadata=client.V1ObjectMeta(name=name),
                            target=client.V1ObjectReference(kind="Node", name="n1"))
    response = await core.create_namespaced_pod_binding(name, "default", body, _preload_content=False)
    return int(response.status)


async def test_fault_rules_are_added_listed_and_removed_over_http(cluster: DevCluster, api: Any) -> None:
    cluster.store.create(pod("p1"))
    core: Any = client.CoreV1Api(api)
    status, rule = await control(cluster, "POST", "faults", {"status": 429, "verb": "create", "path": "/binding",
                                                              "fraction": 1.0, "retry_after": 3})
    assert status == 201 and rule["id"] > 0
    assert await bind(core, "p1") == 429
    status, listed = await control(cluster, "GET", "faults")
    assert status == 200 and listed["injected"] == 1
    assert [(r["id"], r["status"], r["fired"]) for r in listed["rules"]] == [(rule["id"], 429, 1)]
    assert await control(cluster, "DELETE", f"faults/{rule['id']}") == (200, {"removed": 1})
    assert await control(cluster, "DELETE", f"faults/{rule['id']}") == (404, {"error": f"no fault rule {rule['id']}"})
    assert await bind(core, "p1") == 201


async def test_a_bad_rule_is_refused_with_the_field_named(cluster: DevCluster) -> None:
    status, answer = await control(cluster, "POST", "faults", {"status": 429, "fraction": 2})
    assert status == 400 and "fraction" in answer["error"]
    status, answer = await control(cluster, "POST", "faults", {"status": 429, "count": 1, "colour": "red"})
    assert status == 400 and "colour" in answer["error"]
    assert await control(cluster, "GET", "faults") == (200, {"rules": [], "injected": 0})
    assert (await control(cluster, "DELETE", "faults"))[0] == 200
    assert (await control(cluster, "GET", "nothing-here"))[0] == 404


async def test_dropping_watches_over_http_ends_the_open_streams(cluster: DevCluster) -> None:
    status, answer = await control(cluster, "POST", "faults/drop-watches")
    assert status == 200 and answer == {"closed": 0}


async def test_the_audit_records_every_write_with_its_answer_and_user_agent(cluster: DevCluster, api: Any) -> None:
    api.user_agent = "tester/1.0 (replica-t)"
    core: Any = client.CoreV1Api(api)
    await core.create_namespaced_pod("default", client.V1Pod(
        metadata=client.V1ObjectMeta(name="p1"),
        spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="i")])))
    await core.read_namespaced_pod("p1", "default")  # a read: not in the audit
    cluster.faults.fail_next(1, 429, verb="create", path="/binding")
    assert await bind(core, "p1") == 429
    assert await bind(core, "p1") == 201
    status, audit = await control(cluster, "GET", "audit")
    assert status == 200
    rows = [(r["method"], r["path"], r["status"], r["user_agent"]) for r in audit["records"]]
    assert rows == [
        ("POST", "/api/v1/namespaces/default/pods", 201, "tester/1.0 (replica-t)"),
        ("POST", "/api/v1/namespaces/default/pods/p1/binding", 429, "tester/1.0 (replica-t)"),
        ("POST", "/api/v1/namespaces/default/pods/p1/binding", 201, "tester/1.0 (replica-t)"),
    ]
    first = audit["records"][0]["seq"]
    _, later = await control(cluster, "GET", f"audit?since={first + 1}")
    assert [r["status"] for r in later["records"]] == [201]
    assert (await control(cluster, "GET", "audit?since=x"))[0] == 400
