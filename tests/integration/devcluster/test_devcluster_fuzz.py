"""Any request, however malformed, gets a JSON Status or object back: never a 500, never a hang."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from urllib.parse import urlparse

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from devcluster import BackgroundDevCluster

PATHS = [
    "/api/v1/namespaces/default/pods", "/api/v1/namespaces/default/pods/p1",
    "/api/v1/namespaces/default/pods/p1/status",
    "/api/v1/namespaces/default/pods/p1/binding", "/api/v1/namespaces/default/pods/p1/eviction", "/api/v1/nodes/n1",
    "/apis/topology.volcano.sh/v1alpha1/hypernodes/h", "/apis/coordination.k8s.io/v1/namespaces/default/leases/l",
    "/apis/events.k8s.io/v1/namespaces/default/events/e", "/api/v1/namespaces/x", "/apis/nope/v1/things", "/openapi/v3",
]
QUERIES = ["", "?limit=x", "?continue=zzz", "?labelSelector=a%20in%20", "?fieldSelector=a", "?gracePeriodSeconds=x",
           "?dryRun=All", "?dryRun=Some", "?fieldValidation=Nope", "?fieldValidation=Strict", "?includeObject=Object"]
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.sampled_from(["p1", "n1", "", "x-", "Node", "v1"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["metadata", "name", "spec", "status", "containers", "target", "op", "path", "value",
                         "resourceVersion", "labels", "deleteOptions", "gracePeriodSeconds", "apiVersion", "kind"]),
        inner, max_size=4),
    max_leaves=12,
)
CONTENT_TYPES = ["application/json", "application/merge-patch+json", "application/strategic-merge-patch+json",
                 "application/json-patch+json", "text/yaml"]


@pytest.fixture(scope="module")
def address() -> Iterator[tuple[str, int]]:
    with BackgroundDevCluster(kubelet_delay=0.01) as cluster:
        parsed = urlparse(cluster.url)
        yield str(parsed.hostname), int(parsed.port or 0)


@settings(max_examples=150)
@given(method=st.sampled_from(["GET", "POST", "PUT", "PATCH", "DELETE"]), path=st.sampled_from(PATHS),
       query=st.sampled_from(QUERIES), body=st.none() | JSON.map(json.dumps) | st.just("{not json"),
       content_type=st.sampled_from(CONTENT_TYPES))
def test_every_request_is_answered_without_a_server_error(address: tuple[str, int], method: str, path: str,
                                                          query: str, body: str | None, content_type: str) -> None:
    connection = http.client.HTTPConnection(*address, timeout=10)
    try:
        connection.request(method, path + query, body=body, headers={"Content-Type": content_type})
        response = connection.getresponse()
        payload = json.loads(response.read())
    finally:
        connection.close()
    assert response.status < 500, payload
    if response.status >= 400:
        assert payload["kind"] == "Status" and payload["code"] == response.status
