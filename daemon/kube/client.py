"""The one place toposched talks HTTP to a Kubernetes API server.

`connect(config)` builds a kubernetes-asyncio `ApiClient` from a kubeconfig file or the in-cluster
service account and wraps it in a `KubeClient`, whose `request()` sends one call and returns the raw
status and body bytes (`_preload_content=False`: responses are decoded by the caller with msgspec,
never into the generated OpenAPI model classes, which among other things cannot read the `Status` a
binding returns). `call()` adds the retry policy every write shares: 429 waits for Retry-After,
5xx and transport errors back off exponentially with jitter, anything else is returned to the caller
to interpret (a 409 means "read it back", never "try again").

A write passes the leader's `WriteGate` (`call(..., gate=...)`): the whole call, backoff included,
runs in the gate's cancel scope (cancelled the moment the lease runs out or is found taken), the gate
is asked again before every attempt, and once more at the last moment, when the request's bytes are
about to be written to the socket (an aiohttp trace hook reading the gate from a context variable):
a process frozen after its last check and woken past its deadline still sends nothing. A refusal
raises `NotLeader` and nothing of the request has left the process.

`call(..., on_attempt=)` is told what became of every attempt, retries and refusals included: the
HTTP status as a string, or `transport`, `refused`, `cancelled` (the adapter counts them in
`toposched_api_requests_total{code}`).

Every request carries a timeout; watches (`stream()`) carry a socket-read timeout longer than their
server-side `timeoutSeconds`, so a half-open connection is noticed. The client is closed on exit.

Must never: decide what to write (that is the adapters' job), or swallow a failure without saying so.
"""

from __future__ import annotations

import contextvars
import email.utils
import random
import ssl
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager, nullcontext
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlencode

import aiohttp
import anyio
import msgspec
import structlog
from aiohttp.helpers import get_env_proxy_for_url
from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio import config as k8s_config
from kubernetes_asyncio.config.config_exception import ConfigException
from yarl import URL

from daemon.config import DaemonConfig, TimeoutConfig
from daemon.kube.http1 import Http1Pool, HttpProtocolError
from daemon.kube.leader import NotLeader, WriteGate
from daemon.version import package_version

_load_incluster_config: Callable[..., None] = k8s_config.load_incluster_config

log = structlog.get_logger("toposched.kube")

RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})
# What became of one attempt, when it has no HTTP status (`call(on_attempt=...)`).
TRANSPORT = "transport"  # no answer: connection refused or reset, timeout
REFUSED = "refused"  # the write gate refused it: nothing of it was sent
CANCELLED = "cancelled"  # in flight when it was cancelled (the lease ran out): it may or may not have arrived

AttemptObserver = Callable[[str], None]
JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"


class KubeConnectError(Exception):
    """No usable API configuration (no kubeconfig, not in a cluster, bad context)."""


class KubeApiError(Exception):
    """A call failed after its retries; carries the last HTTP status (0 = transport) and reason."""

    def __init__(self, method: str, path: str, status: int, reason: str) -> None:
        self.method = method
        self.path = path
        self.status = status
        self.reason = reason
        super().__init__(f"{method} {path}: {status or 'transport error'} {reason}".rstrip())


class StatusCause(msgspec.Struct, kw_only=True):
    reason: str = ""
    message: str = ""
    field: str = ""


class StatusDetails(msgspec.Struct, kw_only=True):
    name: str = ""
    kind: str = ""
    retryAfterSeconds: int = 0
    causes: list[StatusCause] = []


class Status(msgspec.Struct, kw_only=True):
    """metav1.Status, the body of every error (and of a successful binding)."""

    kind: str = ""
    status: str = ""
    message: str = ""
    reason: str = ""
    code: int = 0
    details: StatusDetails | None = None


_status_decoder = msgspec.json.Decoder(Status)


def decode_status(body: bytes) -> Status:
    try:
        return _status_decoder.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return Status(message=body[:200].decode("utf-8", "replace"))


DISRUPTION_BUDGET = "DisruptionBudget"  # the cause of an eviction's 429 that a PodDisruptionBudget refused


def disruption_budget_refusal(response: Response) -> str:
    """The cause's message when `response` is an eviction a PodDisruptionBudget refused (429, cause
    DisruptionBudget: "The disruption budget NAME needs D healthy pods and has C currently"), else ""."""
    if response.status != 429 or DISRUPTION_BUDGET.encode() not in response.body:
        return ""
    details = decode_status(response.body).details
    causes = details.causes if details is not None else []
    return next((cause.message or response.reason() for cause in causes if cause.reason == DISRUPTION_BUDGET), "")


class Response(msgspec.Struct, frozen=True):
    status: int
    body: bytes
    retry_after: float | None = None

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def reason(self) -> str:
        parsed = decode_status(self.body)
        return parsed.message or parsed.reason or f"HTTP {self.status}"


def backoff_delay(attempt: int, initial: float, maximum: float) -> float:
    """Exponential backoff with full jitter: uniform in [base/2, base], base = initial * 2**attempt."""
    base = min(maximum, initial * (2**attempt))
    return random.uniform(base / 2, base)


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value)
        return max(0.0, parsed.timestamp() - time.time())


def header_lines(fields: Mapping[str, str]) -> bytes:
    """HTTP header lines (`Name: value\\r\\n` each); a name or value that could split a line is refused."""
    for name, value in fields.items():
        if any(c in name or c in value for c in "\r\n\0") or not name or ":" in name:
            raise KubeConnectError(f"header {name!r} has a character that cannot be sent")
    return "".join(f"{name}: {value}\r\n" for name, value in fields.items()).encode("latin-1")


_encoder = msgspec.json.Encoder()


# The gate of the write this task is sending, if any: read by the last-moment check below. A context
# variable, because aiohttp writes a request's body from a task of its own, which inherits it.
_sending_under: contextvars.ContextVar[WriteGate | None] = contextvars.ContextVar("sending_under", default=None)


async def _check_gate_before_bytes(session: aiohttp.ClientSession, context: SimpleNamespace, params: object) -> None:
    """Refuse (NotLeader) to put a gated write's bytes on the wire once its gate has closed."""
    gate = _sending_under.get()
    if gate is not None:
        gate.check()


def gate_trace() -> aiohttp.TraceConfig:
    """The trace hooks that ask the gate when a request's headers are built and before each body chunk
    is written (aiohttp holds the headers back and writes them with the first chunk)."""
    trace = aiohttp.TraceConfig()
    trace.on_request_headers_sent.append(_check_gate_before_bytes)
    trace.on_request_chunk_sent.append(_check_gate_before_bytes)
    trace.freeze()
    return trace


def install_gate_trace(session: aiohttp.ClientSession) -> None:
    """Add `gate_trace()` to a session kubernetes-asyncio built (it takes no trace configs of ours)."""
    configs = session.trace_configs
    if not any(hook is _check_gate_before_bytes for config in configs for hook in config.on_request_chunk_sent):
        configs.append(gate_trace())


def user_agent(config: DaemonConfig) -> str:
    """`toposched/<version> (<holder identity>)`: an API server's audit log tells the replicas apart."""
    return f"toposched/{package_version()} ({config.leader_election.holder_identity()})"


class KubeClient:
    """Raw, timed, retried HTTP calls over a kubernetes-asyncio ApiClient."""

    def __init__(self, api_client: Any, timeouts: TimeoutConfig, http: Http1Pool | None = None) -> None:
        self.api_client = api_client
        self.timeouts = timeouts
        self.host: str = api_client.configuration.host
        self.http = http  # the lean path for single-shot calls (None: every call through kubernetes-asyncio)
        self._header_lines: dict[tuple[str, str], bytes] = {}

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: Mapping[str, Any] | None = None,
        content_type: str = JSON,
        time_limit: float | None = None,
        gate: WriteGate | None = None,
        pipelined: bool = False,
    ) -> Response:
        """One HTTP call, no retries. Transport errors and timeouts raise `KubeApiError(status=0)`.

        With a `gate`, it is asked at the last moment, when the request's bytes are about to be written:
        closed by then, nothing is sent and `NotLeader` is raised. `pipelined`: it may share a connection
        (and a write) with the other pipelined calls of this event-loop turn, and wait behind them for
        its answer (`daemon.kube.http1`): for calls nothing waits on, such as Events.
        """
        timeout = time_limit or self.timeouts.request_seconds
        if self.http is not None:
            return await self._send(self.http, method, path, query, body, content_type, timeout, gate, pipelined)
        if gate is not None:
            token = _sending_under.set(gate)
            try:
                return await self.request(method, path, query=query, body=body, content_type=content_type,
                                          time_limit=time_limit)
            except KubeApiError:
                gate.check()  # the transport error may be the last-moment check refusing to send
                raise
            finally:
                _sending_under.reset(token)
        headers = {"Accept": JSON, "Content-Type": content_type}
        try:
            with anyio.fail_after(timeout + 1):
                raw = await self.api_client.call_api(
                    path, method, query_params=list(query), header_params=headers, body=body,
                    auth_settings=["BearerToken"], _preload_content=False, _request_timeout=timeout,
                )
                try:
                    data = await raw.read()
                    return Response(raw.status, data, _retry_after(raw.headers.get("Retry-After")))
                finally:
                    raw.release()
        except (aiohttp.ClientError, TimeoutError, OSError) as error:
            raise KubeApiError(method, path, 0, f"{type(error).__name__}: {error}") from error

    async def _send(self, http: Http1Pool, method: str, path: str, query: Sequence[tuple[str, str]],
                    body: Mapping[str, Any] | None, content_type: str, seconds: float,
                    gate: WriteGate | None, pipelined: bool) -> Response:
        """`request` over the lean HTTP/1.1 pool: the gate asked before a connection is taken and again
        just before the bytes are written."""
        target = http.target(path, urlencode(query) if query else "")
        payload = None if body is None else _encoder.encode(body)
        headers = await self._headers(content_type)
        try:
            raw = await http.request(method, target, headers, payload, seconds=seconds,
                                     check=None if gate is None else gate.check, pipelined=pipelined)
        except (OSError, TimeoutError, HttpProtocolError) as error:
            raise KubeApiError(method, path, 0, f"{type(error).__name__}: {error}") from error
        return Response(raw.status, raw.body, _retry_after(raw.headers.get("retry-after")))

    async def _headers(self, content_type: str) -> bytes:
        """The request's header lines: Accept, Content-Type, the ApiClient's defaults (User-Agent), its
        cookie, and the credentials its Configuration gives now (a token refreshed by its hook)."""
        configuration = self.api_client.configuration
        settings = await configuration.auth_settings()
        bearer = settings.get("BearerToken")
        authorization = str(bearer["value"]) if bearer and bearer.get("value") else ""
        key = (content_type, authorization)
        lines = self._header_lines.get(key)
        if lines is None:
            fields = {"Accept": JSON, "Content-Type": content_type, **self.api_client.default_headers}
            if self.api_client.cookie:
                fields["Cookie"] = self.api_client.cookie
            if authorization:
                fields["Authorization"] = authorization
            lines = header_lines(fields)
            if len(self._header_lines) > 16:  # tokens rotate: keep only the recent ones
                self._header_lines.clear()
            self._header_lines[key] = lines
        return lines

    async def call(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: Mapping[str, Any] | None = None,
        content_type: str = JSON,
        attempts: int | None = None,
        gate: WriteGate | None = None,
        on_attempt: AttemptObserver | None = None,
        pipelined: bool = False,
    ) -> Response:
        """`request` with the shared retry policy; returns the first non-retryable response.

        With a `gate`: raises `NotLeader` (and sends nothing more) as soon as the gate is closed, before
        any attempt, during one, or while backing off between two. `on_attempt` hears the outcome of
        each attempt (module docstring), a write refused before its first attempt included.
        `pipelined`: as for `request`.
        """
        entered = False
        try:
            with gate.writing() if gate is not None else nullcontext():
                entered = True
                return await self._retried(method, path, query, body, content_type, attempts or 0, gate, on_attempt,
                                           pipelined)
        except NotLeader:
            if not entered and on_attempt is not None:
                on_attempt(REFUSED)
            raise

    async def _retried(self, method: str, path: str, query: Sequence[tuple[str, str]], body: Mapping[str, Any] | None,
                       content_type: str, attempts: int, gate: WriteGate | None,
                       on_attempt: AttemptObserver | None, pipelined: bool = False) -> Response:
        tries = attempts or self.timeouts.bind_retry_attempts
        last = "no attempt"
        last_status = 0
        for attempt in range(tries):
            outcome = CANCELLED  # unless the attempt comes back one way or another
            try:
                if gate is not None:
                    gate.check()  # before every attempt: a process woken past its deadline learns it here
                response = await self.request(method, path, query=query, body=body, content_type=content_type,
                                              gate=gate, pipelined=pipelined)
            except NotLeader:
                outcome = REFUSED
                raise
            except KubeApiError as error:
                outcome = TRANSPORT
                last, last_status = error.reason, 0
                delay = backoff_delay(attempt, self.timeouts.backoff_initial_seconds, self.timeouts.backoff_max_seconds)
            else:
                outcome = str(response.status)
                if response.status not in RETRYABLE_STATUS or disruption_budget_refusal(response):
                    return response  # a budget's refusal is an answer, not a rate limit: the caller decides
                last, last_status = response.reason(), response.status
                if response.status == 429 and response.retry_after is not None:
                    delay = min(response.retry_after, self.timeouts.backoff_max_seconds)
                else:
                    delay = backoff_delay(
                        attempt, self.timeouts.backoff_initial_seconds, self.timeouts.backoff_max_seconds
                    )
            finally:
                if on_attempt is not None:
                    on_attempt(outcome)
            if attempt + 1 < tries:
                log.debug("api.retry", method=method, path=path, status=last_status, reason=last, delay=delay)
                await anyio.sleep(delay)
        if gate is not None:
            gate.check()  # a last attempt refused by the gate is NotLeader, not a transport error
        raise KubeApiError(method, path, last_status, last)

    @asynccontextmanager
    async def stream(
        self, path: str, query: Sequence[tuple[str, str]], read_timeout: float
    ) -> AsyncIterator[tuple[int, aiohttp.StreamReader | bytes]]:
        """Open a streaming GET (a watch). Yields (status, body reader) or (status, error body)."""
        timeout = aiohttp.ClientTimeout(
            total=None, connect=self.timeouts.request_seconds, sock_connect=self.timeouts.request_seconds,
            sock_read=read_timeout,
        )
        try:
            with anyio.fail_after(self.timeouts.request_seconds):
                raw = await self.api_client.call_api(
                    path, "GET", query_params=list(query), header_params={"Accept": JSON},
                    auth_settings=["BearerToken"], _preload_content=False, _request_timeout=timeout,
                )
        except (aiohttp.ClientError, TimeoutError, OSError) as error:
            raise KubeApiError("GET", path, 0, f"{type(error).__name__}: {error}") from error
        try:
            if raw.status != 200:
                with anyio.fail_after(self.timeouts.request_seconds):
                    data = await raw.read()
                yield raw.status, data
            else:
                yield raw.status, raw.content
        finally:
            raw.close()

    async def close(self) -> None:
        if self.http is not None:
            self.http.close()
        await self.api_client.close()


async def api_configuration(config: DaemonConfig) -> Any:
    """A kubernetes-asyncio Configuration: in-cluster when asked (or when no kubeconfig is found)."""
    configuration = k8s_client.Configuration()
    if config.in_cluster:
        try:
            _load_incluster_config(client_configuration=configuration)
        except ConfigException as error:
            raise KubeConnectError(f"in_cluster is set but the service account is not usable: {error}") from error
        return configuration
    try:
        await k8s_config.load_kube_config(
            config_file=config.kubeconfig or None, context=config.context or None,
            client_configuration=configuration, persist_config=False,
        )
    except (ConfigException, OSError) as error:
        if config.kubeconfig:
            raise KubeConnectError(f"kubeconfig {config.kubeconfig}: {error}") from error
        try:
            _load_incluster_config(client_configuration=configuration)
        except ConfigException as in_cluster_error:
            raise KubeConnectError(
                f"no kubeconfig ({error}) and not running in a cluster ({in_cluster_error})"
            ) from in_cluster_error
    return configuration


def tls_context(configuration: Any) -> ssl.SSLContext | None:
    """The TLS settings of a kubernetes-asyncio Configuration as an SSLContext (None for plain HTTP):
    its CA, client certificate and key, `verify_ssl` and `disable_strict_ssl_verification`."""
    if not str(configuration.host).startswith("https:"):
        return None
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, keyfile=configuration.key_file)
    if not configuration.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if configuration.disable_strict_ssl_verification:
        context.verify_flags &= ~ssl.VERIFY_X509_STRICT
    return context


def _env_proxy(host: str) -> str | None:
    """The proxy HTTPS_PROXY/HTTP_PROXY/NO_PROXY choose for the API server, looked up once."""
    try:
        proxy, _ = get_env_proxy_for_url(URL(host))
    except LookupError:
        return None
    return str(proxy)


@asynccontextmanager
async def connect(config: DaemonConfig, *, pool_size: int | None = None) -> AsyncIterator[KubeClient]:
    """Open a client for the configured API server; always closed on exit."""
    configuration = await api_configuration(config)
    configuration.connection_pool_maxsize = pool_size or max(100, config.bind_concurrency + 32)
    if not configuration.proxy:
        configuration.proxy = _env_proxy(configuration.host)
    api_client = k8s_client.ApiClient(configuration=configuration)
    api_client.user_agent = user_agent(config)
    # kubernetes-asyncio opens its session with trust_env=True, which makes aiohttp look up ~/.netrc
    # and the proxy variables in a worker thread on *every* request (two thread hops per Binding).
    # The proxy from the environment was resolved once above; turn the per-request lookups off.
    session = api_client.rest_client.pool_manager
    if getattr(session, "_trust_env", False):
        session._trust_env = False
    install_gate_trace(session)
    # Single-shot calls (Bindings, Events, patches, reads) go over the lean pool unless a proxy is set
    # (aiohttp knows proxies; `daemon.kube.http1` does not); watches stay on aiohttp.
    http = None if configuration.proxy else Http1Pool(
        configuration.host, ssl_context=tls_context(configuration), server_hostname=configuration.tls_server_name,
        limit=configuration.connection_pool_maxsize)
    client = KubeClient(api_client, config.timeouts, http)
    try:
        yield client
    finally:
        with anyio.CancelScope(shield=True):
            await client.close()
