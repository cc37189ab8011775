"""The lean HTTP/1.1 pool over TLS, as every real cluster serves its API: the kubeconfig's CA is the
only one trusted, its client certificate is presented, its bearer token is sent, and
`insecure-skip-tls-verify` is honoured. The server is a TLS listener on 127.0.0.1 with certificates
from trustme (a throwaway CA)."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trustme
from kubernetes_asyncio.client import ApiClient, Configuration

from daemon.config import TimeoutConfig
from daemon.kube.client import KubeApiError, KubeClient, tls_context
from daemon.kube.http1 import Http1Pool


class Recorder:
    """What the server saw: each request's head, and the client certificate's subject."""

    def __init__(self) -> None:
        self.heads: list[str] = []
        self.peers: list[object] = []


@asynccontextmanager
async def tls_server(context: ssl.SSLContext, recorder: Recorder) -> AsyncIterator[int]:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
                recorder.heads.append(head)
                recorder.peers.append(writer.get_extra_info("peercert"))
                length = next((int(line.split(":", 1)[1]) for line in head.split("\r\n")
                               if line.lower().startswith("content-length:")), 0)
                await reader.readexactly(length)
                body = b'{"kind":"Pod","metadata":{"name":"p"}}'
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError, asyncio.CancelledError):
            return  # the client went away, or the test ended with this connection idle: nothing to answer
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=context)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


@pytest.fixture
def ca() -> trustme.CA:
    return trustme.CA()


def server_context(ca: trustme.CA, *, require_client_cert: bool) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert("127.0.0.1", "localhost").configure_cert(context)
    if require_client_cert:
        context.verify_mode = ssl.CERT_REQUIRED
        ca.configure_trust(context)
    return context


def kube_client(port: int, tmp_path: Path, trusted: trustme.CA, *, client_cert: trustme.LeafCert | None = None,
                verify: bool = True) -> KubeClient:
    host = f"https://127.0.0.1:{port}"
    configuration = Configuration(host=host)
    ca_file = tmp_path / "ca.pem"
    trusted.cert_pem.write_to_path(str(ca_file))
    configuration.ssl_ca_cert = str(ca_file)
    configuration.verify_ssl = verify
    if client_cert is not None:
        cert_file, key_file = tmp_path / "client.pem", tmp_path / "client-key.pem"
        client_cert.cert_chain_pems[0].write_to_path(str(cert_file))
        client_cert.private_key_pem.write_to_path(str(key_file))
        configuration.cert_file, configuration.key_file = str(cert_file), str(key_file)
    configuration.api_key = {"BearerToken": "s3cret"}
    configuration.api_key_prefix = {"BearerToken": "Bearer"}
    pool = Http1Pool(host, ssl_context=tls_context(configuration))
    return KubeClient(ApiClient(configuration), TimeoutConfig(request_seconds=5.0), pool)


async def test_a_call_over_tls_trusts_the_kubeconfigs_ca_presents_its_client_certificate_and_token(
        ca: trustme.CA, tmp_path: Path) -> None:
    recorder = Recorder()
    async with tls_server(server_context(ca, require_client_cert=True), recorder) as port:
        client = kube_client(port, tmp_path, ca, client_cert=ca.issue_cert("toposched"))
        try:
            first = await client.request("GET", "/api/v1/namespaces/team/pods/p")
            second = await client.request("POST", "/api/v1/namespaces/team/pods/p/binding", body={"kind": "Binding"})
        finally:
            await client.close()
    assert first.status == second.status == 200 and b'"name":"p"' in first.body
    assert all("authorization: bearer s3cret" in head.lower() for head in recorder.heads)
    assert recorder.peers[0]  # the server required and verified the client certificate
    assert client.http is not None and client.http.opened == 1  # one TLS connection, kept alive


async def test_a_server_certificate_from_another_ca_is_refused_and_nothing_is_sent(
        ca: trustme.CA, tmp_path: Path) -> None:
    recorder = Recorder()
    async with tls_server(server_context(ca, require_client_cert=False), recorder) as port:
        client = kube_client(port, tmp_path, trustme.CA())
        try:
            with pytest.raises(KubeApiError, match="CERTIFICATE_VERIFY_FAILED"):
                await client.request("POST", "/api/v1/namespaces/team/pods/p/binding", body={"kind": "Binding"})
        finally:
            await client.close()
    assert recorder.heads == []


async def test_insecure_skip_tls_verify_accepts_any_server_certificate(ca: trustme.CA, tmp_path: Path) -> None:
    recorder = Recorder()
    async with tls_server(server_context(ca, require_client_cert=False), recorder) as port:
        client = kube_client(port, tmp_path, trustme.CA(), verify=False)
        try:
            answer = await client.request("GET", "/api/v1/namespaces/team/pods/p")
        finally:
            await client.close()
    assert answer.status == 200 and len(recorder.heads) == 1
