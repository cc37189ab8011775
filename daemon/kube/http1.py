"""A lean HTTP/1.1 client for the daemon's single-shot API calls: Bindings, Events, patches, reads.

Why: a scheduler makes two small calls per pod (its Binding and its Scheduled Event). Through
kubernetes-asyncio and aiohttp one such call cost ~150-180 us of CPU (request and response objects,
header multidicts, URL parsing, trace signals, the OpenAPI layer); a request written as one buffer on
a kept-alive connection and its answer read by llhttp (Node.js's C parser, through httptools, the
parser uvicorn uses) costs ~35 us. Watches keep aiohttp (`KubeClient.stream`), and so does everything
when a proxy is configured.

Two parts: `ResponseReader` is the protocol (pure: bytes in, a `RawResponse` out, no I/O; llhttp
parses, it adds what a pooling client needs), `Http1Pool` the I/O (asyncio connections to one API
server, reused while they stay open).

The protocol, as RFC 9112 has it for a client that sends one request at a time per connection and
asks for no compression:
- An answer is a status line, header lines and a blank line; 1xx interim answers are skipped.
- Its body is `Transfer-Encoding: chunked` (chunks, a zero chunk, optional trailers), else
  `Content-Length` bytes, else everything until the server closes (the connection is not reused).
  HEAD, 204 and 304 have no body.
- A connection is reused only after a complete answer without `Connection: close`. A call cancelled
  or timed out while in flight closes its connection (its answer may still come).
- Malformed input (whatever llhttp refuses: an unparsable status line, a bad length or chunk; headers
  over 64 KiB, a body over `MAX_BODY`) raises `HttpProtocolError` and the connection is dropped.

The write gate: `Http1Pool.request(..., check=)` calls `check` (the lease gate's `check()`, which
raises `NotLeader`) once before it takes a connection and once more immediately before the request's
bytes are handed to the socket, with no await in between: refused there, nothing was sent and the
connection goes back to the pool unused.

Must never: send a request on a connection with an answer outstanding, reuse a connection whose last
answer was not read whole, or retry anything (retries are `KubeClient.call`'s, with the gate).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable, Mapping
from typing import Final, cast
from urllib.parse import quote, urlsplit

import anyio
import httptools
import msgspec

MAX_HEAD: Final = 64 * 1024
MAX_BODY: Final = 256 * 1024 * 1024
_PATH_SAFE: Final = "/:@!$&'()*+,;=-._~%?"  # already-encoded paths and queries pass unchanged


class HttpProtocolError(Exception):
    """The server's answer is not HTTP/1.1 this client can read; the connection is dropped."""


class RawResponse(msgspec.Struct, frozen=True):
    """One answer: its status, the headers this client reads (lower-cased names), the body."""

    status: int
    headers: Mapping[str, str]
    body: bytes
    keep_alive: bool


class ResponseReader:
    """Reads one answer from the bytes of a connection (pure: `feed` and `eof` are its only inputs).

    The parsing is llhttp's (Node.js's HTTP parser, through httptools); this class keeps what the
    pool needs on top: interim 1xx answers skipped, HEAD answers ending at their headers, a body ended
    by the server's close, size limits, and whether the connection may carry another request."""

    __slots__ = ("_body", "_complete", "_head_bytes", "_head_only", "_headers", "_headers_done", "_interim",
                 "_keep_alive", "_parser", "_status")

    def __init__(self, head_only: bool = False) -> None:
        self._parser = httptools.HttpResponseParser(self)
        self._head_only = head_only
        self._head_bytes = 0
        self._status = 0
        self._headers: dict[str, str] = {}
        self._headers_done = False
        self._interim = False
        self._complete = False
        self._keep_alive = True
        self._body = bytearray()

    # llhttp's callbacks
    def on_message_begin(self) -> None:
        if self._complete:
            self._keep_alive = False  # bytes after the answer that nobody asked for

    def on_header(self, name: bytes, value: bytes) -> None:
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1").strip()
        headers = self._headers
        headers[key] = f"{headers[key]}, {text}" if key in headers else text

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if 100 <= status < 200:
            self._interim = True  # an interim answer: the real one follows
            return
        self._status = status
        self._headers_done = True
        self._keep_alive = self._parser.should_keep_alive()  # llhttp answers it only inside a callback
        if self._head_only:
            self._complete = True

    def on_body(self, body: bytes) -> None:
        if not self._complete:
            self._body += body
            if len(self._body) > MAX_BODY:
                raise HttpProtocolError("body over the size limit")

    def on_message_complete(self) -> None:
        if self._interim:
            self._interim = False
            self._headers = {}
            return
        self._keep_alive = self._keep_alive and self._parser.should_keep_alive()
        self._complete = True

    def feed(self, data: bytes) -> RawResponse | None:
        """Take the next bytes; the answer once it is complete, else None (more bytes needed)."""
        if not self._headers_done:
            self._head_bytes += len(data)
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserCallbackError as error:
            if isinstance(error.__context__, HttpProtocolError):
                raise error.__context__ from None
            raise HttpProtocolError(str(error)) from None
        except (httptools.HttpParserError, httptools.HttpParserUpgrade) as error:
            if not self._complete:
                raise HttpProtocolError(f"not an HTTP/1.1 answer this client reads: {error}") from None
            self._keep_alive = False  # bytes after the answer that nobody asked for
        if not self._headers_done and self._head_bytes > MAX_HEAD:
            raise HttpProtocolError("headers over the size limit")
        if not self._complete:
            return None
        return self._done()

    def eof(self) -> RawResponse:
        """The server closed the connection: the answer if it ends there, else `HttpProtocolError`."""
        framed = "content-length" in self._headers or "chunked" in self._headers.get("transfer-encoding", "")
        if self._headers_done and not self._complete and not framed:
            self._keep_alive = False
            return self._done()
        raise HttpProtocolError("connection closed before the answer was complete")

    def _done(self) -> RawResponse:
        return RawResponse(self._status, self._headers, bytes(self._body), self._keep_alive)


class _Connection(asyncio.Protocol):
    """One connection: at most one request outstanding; its answer resolves `_waiter`."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self._reader: ResponseReader | None = None
        self._waiter: asyncio.Future[RawResponse] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not subclasses of asyncio.Transport; they behave as one
        self.transport = cast("asyncio.Transport", transport)

    def data_received(self, data: bytes) -> None:
        reader, waiter = self._reader, self._waiter
        if reader is None or waiter is None or waiter.done():
            self._close()  # bytes nobody asked for: the connection cannot be trusted any more
            return
        try:
            response = reader.feed(data)
        except HttpProtocolError as error:
            self._close()
            waiter.set_exception(error)
            return
        if response is not None:
            self._reader = self._waiter = None
            waiter.set_result(response)

    def eof_received(self) -> bool | None:
        reader, waiter = self._reader, self._waiter
        self.closed = True
        if reader is not None and waiter is not None and not waiter.done():
            self._reader = self._waiter = None
            try:
                waiter.set_result(reader.eof())
            except HttpProtocolError as error:
                waiter.set_exception(error)
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        waiter = self._waiter
        self._reader = self._waiter = None
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc or ConnectionResetError("the API server closed the connection"))

    def time_out(self) -> None:
        """The call's deadline passed with its answer still outstanding: fail it, drop the connection."""
        waiter = self._waiter
        self.abort()
        if waiter is not None and not waiter.done():
            waiter.set_exception(TimeoutError("no answer from the API server in time"))

    def send(self, data: bytes, head_only: bool) -> asyncio.Future[RawResponse]:
        assert self.transport is not None and self._waiter is None
        self._reader = ResponseReader(head_only)
        self._waiter = asyncio.get_running_loop().create_future()
        self.transport.write(data)
        return self._waiter

    @property
    def usable(self) -> bool:
        return not self.closed and self.transport is not None and not self.transport.is_closing()

    def _close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def abort(self) -> None:
        self.closed = True
        self._reader = None
        self._waiter = None
        if self.transport is not None:
            self.transport.abort()


def _ssl_context(url_scheme: str, context: ssl.SSLContext | None) -> ssl.SSLContext | None:
    if url_scheme == "https":
        return context or ssl.create_default_context()
    return None


class Http1Pool:
    """Kept-alive HTTP/1.1 connections to one server (`base_url`: scheme, host, port, path prefix), at
    most `limit` in use at once; each call waits for a free one beyond that."""

    def __init__(self, base_url: str, *, ssl_context: ssl.SSLContext | None = None, server_hostname: str | None = None,
                 limit: int = 100) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        self._host = parts.hostname
        self._port = parts.port or (443 if parts.scheme == "https" else 80)
        self._ssl = _ssl_context(parts.scheme, ssl_context)
        self._server_hostname = server_hostname if self._ssl is not None and server_hostname else None
        self._prefix = parts.path.rstrip("/")
        host = f"[{self._host}]" if ":" in self._host else self._host
        default_port = parts.port is None or parts.port == (443 if parts.scheme == "https" else 80)
        self.host_header = host if default_port else f"{host}:{self._port}"
        self._idle: list[_Connection] = []
        self._slots = asyncio.Semaphore(limit)
        self.opened = 0  # connections opened so far (tests, benchmarks)

    def target(self, path: str, query: str = "") -> str:
        """The request target for `path` (percent-encoded where it needs it) and an encoded `query`."""
        target = quote(self._prefix + path, safe=_PATH_SAFE)
        return f"{target}?{query}" if query else target

    async def request(self, method: str, target: str, headers: bytes, body: bytes | None = None, *,
                      seconds: float, check: Callable[[], None] | None = None) -> RawResponse:
        """Send one request (`headers`: its header lines, each ending in CRLF, without Host and
        Content-Length) and read its answer within `seconds`. `check` is asked before a
        connection is taken and again just before the bytes are written (module docstring). Transport
        failures raise OSError (TimeoutError past the deadline) or `HttpProtocolError`; a call cancelled
        or timed out in flight closes its connection."""
        if check is not None:
            check()
        content = body if body is not None else b""
        data = (f"{method} {target} HTTP/1.1\r\nHost: {self.host_header}\r\n"
                f"Content-Length: {len(content)}\r\n").encode("latin-1") + headers + b"\r\n" + content
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        if self._slots.locked():  # every connection is in use: wait for one, within the deadline
            with anyio.fail_after(seconds):
                await self._slots.acquire()
        else:
            await self._slots.acquire()  # free: returns at once
        try:
            connection = self._idle_connection()
            if connection is None:
                with anyio.fail_after(max(0.0, deadline - loop.time())):
                    connection = await self._connect()
            try:
                if check is not None:
                    check()  # the last moment: nothing is written after the gate closed
            except BaseException:
                self._idle.append(connection)
                raise
            waiter = connection.send(data, method == "HEAD")
            timer = loop.call_at(deadline, connection.time_out)
            try:
                response = await waiter
            except BaseException:
                connection.abort()
                raise
            finally:
                timer.cancel()
            if response.keep_alive and connection.usable:
                self._idle.append(connection)
            else:
                connection.abort()
            return response
        finally:
            self._slots.release()

    def _idle_connection(self) -> _Connection | None:
        while self._idle:
            connection = self._idle.pop()
            if connection.usable:
                return connection
            connection.abort()
        return None

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        _, protocol = await loop.create_connection(_Connection, self._host, self._port, ssl=self._ssl,
                                                   server_hostname=self._server_hostname)
        self.opened += 1
        return protocol

    def close(self) -> None:
        """Close every idle connection (those in use close when their call ends)."""
        idle, self._idle = self._idle, []
        for connection in idle:
            connection.abort()
