"""storage.k8s.io/v1 CSINodes over HTTP as kube-apiserver serves them: list, watch, get, create, update, delete,
discovery (so kubectl finds them), and ValidateCSINode's rules (pkg/apis/storage/validation)."""

from __future__ import annotations

import asyncio
import json

import aiohttp

from devcluster import DevCluster

from .storage_api import PATHS, causes, create, csi_driver, csi_node, request

EBS = "ebs.csi.aws.com"


async def test_a_csinode_is_created_read_listed_updated_and_deleted(cluster: DevCluster) -> None:
    created = await create(cluster, csi_node("node-1", csi_driver(EBS, 25, topologyKeys=["topology.ebs/zone"])))
    assert created["spec"]["drivers"][0]["allocatable"] == {"count": 25}
    status, got = await request(cluster, "GET", f"{PATHS['CSINode']}/node-1")
    assert status == 200 and got["metadata"]["uid"] == created["metadata"]["uid"]
    status, listed = await request(cluster, "GET", PATHS["CSINode"])
    assert status == 200 and [item["metadata"]["name"] for item in listed["items"]] == ["node-1"]
    # The count may change (MutableCSINodeAllocatableCount); the rest of a driver's entry may not.
    updated = {**got, "spec": {"drivers": [csi_driver(EBS, 20, topologyKeys=["topology.ebs/zone"])]}}
    status, body = await request(cluster, "PUT", f"{PATHS['CSINode']}/node-1", updated)
    assert status == 200, body
    assert body["spec"]["drivers"][0]["allocatable"] == {"count": 20}
    moved = {**body, "spec": {"drivers": [csi_driver(EBS, 20, node_id="i-other")]}}
    status, refused = await request(cluster, "PUT", f"{PATHS['CSINode']}/node-1", moved)
    assert status == 422 and [field for field, _ in causes(refused)] == ["spec.drivers"]
    status, _ = await request(cluster, "DELETE", f"{PATHS['CSINode']}/node-1")
    assert status == 200
    status, _ = await request(cluster, "GET", f"{PATHS['CSINode']}/node-1")
    assert status == 404


async def test_what_the_api_server_refuses_of_a_csinode_is_refused(cluster: DevCluster) -> None:
    status, body = await request(cluster, "POST", PATHS["CSINode"], csi_node(
        "node-1", csi_driver(EBS, -1), csi_driver(EBS, 3), csi_driver("Not_A_Name", 1), csi_driver("x.io", node_id="")))
    assert status == 422
    found = causes(body)
    assert ("spec.drivers[0].allocatable.count", "Invalid value: -1: must be greater than or equal to 0") in found
    assert ("spec.drivers[1].name", f'Duplicate value: "{EBS}"') in found
    assert any(field == "spec.drivers[2].name" for field, _ in found)
    assert ("spec.drivers[3].nodeID", "Required value") in found


async def test_csinodes_are_discovered_and_watched(cluster: DevCluster) -> None:
    status, group = await request(cluster, "GET", "/apis/storage.k8s.io/v1")
    assert status == 200
    [resource] = [r for r in group["resources"] if r["name"] == "csinodes"]
    assert resource["kind"] == "CSINode" and not resource["namespaced"]
    assert {"list", "watch", "get", "create", "update", "delete"} <= set(resource["verbs"])
    async with aiohttp.ClientSession(base_url=cluster.url) as http, \
            http.get(f"{PATHS['CSINode']}?watch=true&timeoutSeconds=5") as response:
        await create(cluster, csi_node("node-2", csi_driver(EBS, 7)))
        line = await asyncio.wait_for(response.content.readline(), 5)
    event = json.loads(line)
    assert event["type"] == "ADDED" and event["object"]["metadata"]["name"] == "node-2"
