"""A lean HTTP/1.1 client for the daemon's single-shot API calls: Bindings, Events, patches, reads.

Why: a scheduler makes two small calls per pod (its Binding and its Scheduled Event). Through
kubernetes-asyncio and aiohttp one such call cost ~150-180 us of CPU (request and response objects,
header multidicts, URL parsing, trace signals, the OpenAPI layer); a request written as one buffer on
a kept-alive connection and its answer read by llhttp (Node.js's C parser, through httptools, the
parser uvicorn uses) costs ~35 us. Watches keep aiohttp (`KubeClient.stream`), and so does everything
when a proxy is configured.

Two parts: `ResponseReader` is the protocol (pure: bytes in, `RawResponse`s out, no I/O; llhttp
parses, it adds what a pooling client needs), `Http1Pool` the I/O (asyncio connections to one API
server, reused while they stay open).

Pipelining (RFC 9112 section 9.3), for the calls that ask for it (`pipelined=True`: the Scheduled
Events): those handed to the pool during one event-loop turn go on one connection and are written
together, in one write (at most `depth` of them); the server answers them in order. One write
instead of one per request: a write to the loopback costs ~20 us of CPU whatever its size. The
price is head-of-line blocking: a slow answer holds up those behind it on its connection (a real API
server and devcluster both answer one connection's requests one after the other), which a
background Event can afford and a Binding cannot: a binding held by admission or etcd latency must
not hold up the pods bound after it. Other calls have a connection to themselves. The RFC lets a client
pipeline requests that are not idempotent when it can detect and recover from a partial failure:
here a connection that fails fails every request unanswered on it, as a transport error, which
`KubeClient.call` retries, and the callers judge a retried write that may have landed (a Binding
answered 409 is read back; an Event create answered 409 was written). Real API servers (Go's
net/http) and devcluster (aiohttp) read pipelined requests and answer them in order.

Only while the server answers fast: Go's net/http serves one connection's requests one after another
(golang/go#17799), so calls pipelined on one connection take the sum of their times where calls on
connections of their own overlap. Against an API server that takes milliseconds per write (etcd),
pipelining the Events of eight writers would write them eight times slower; on a loopback server
answering in microseconds it only saves writes. So the pool watches how long each answer of a pipelined
call took, divided by the calls it waited behind on its connection and itself (an average over the
recent ones), and pipelines only while that stays under `slow_answer_seconds` (2 ms); above it, a call
asking to be pipelined gets a connection of its own, as any other call, and pipelining resumes once
those answers come back in under a quarter of it. A switch is logged (`http.pipelining`, at info once a
minute at most: a loopback server busy with a burst of Bindings answers near the line and can make it
switch back and forth, which costs nothing but log lines).

The protocol, as RFC 9112 has it for a client that asks for no compression:
- An answer is a status line, header lines and a blank line; 1xx interim answers are skipped.
- Its body is `Transfer-Encoding: chunked` (chunks, a zero chunk, optional trailers), else
  `Content-Length` bytes, else everything until the server closes (the connection is not reused).
  HEAD, 204 and 304 have no body; a HEAD goes alone, on a connection not reused after it.
- A connection is reused only while every answer on it was complete and without `Connection: close`;
  after an answer with `Connection: close` the requests behind it fail (the server did not read them).
  A call cancelled or timed out once written drops its connection (its answer may still come), and
  with it the calls behind it; one cancelled before its turn's write is simply not written.
- Malformed input (whatever llhttp refuses: an unparsable status line, a bad length or chunk; headers
  over 64 KiB, a body over `MAX_BODY`; an answer to no request) raises `HttpProtocolError` and the
  connection is dropped.

The write gate: `Http1Pool.request(..., check=)` calls `check` (the lease gate's `check()`, which
raises `NotLeader`) once before it takes a connection and once more immediately before the request's
bytes are handed to the socket (in the turn's write, request by request, with no await in between):
refused there, nothing of that request was sent, the call raises what `check` raised, and the
connection carries on with the others.

Must never: write a request whose check refused it, hand an answer to any request but the one it
answers (answers come in the order of the requests), reuse a connection whose answers were not read
whole, or retry anything (retries are `KubeClient.call`'s, with the gate).
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque
from collections.abc import Callable, Mapping
from typing import Final, cast
from urllib.parse import quote, urlsplit

import anyio
import httptools
import msgspec
import structlog

log = structlog.get_logger("toposched.http")

MAX_HEAD: Final = 64 * 1024
MAX_BODY: Final = 256 * 1024 * 1024
DEFAULT_DEPTH: Final = 32  # requests in flight on one connection at most
# Seconds an answer per pipelined call above which pipelining stops (module docstring). A loopback server
# answers in tens of microseconds, an etcd-backed write takes milliseconds.
SLOW_ANSWER_SECONDS: Final = 0.002
_RESUME_FRACTION: Final = 0.25  # pipelining resumes below this fraction of it (a busy server hovers near it)
_AVERAGE_WEIGHT: Final = 0.25  # of the newest answer in the running average
_SWITCH_LOG_SECONDS: Final = 60.0  # a switch is logged at info at most this often
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
    """Reads the answers on a connection from its bytes (pure: `feed`, `feed_answers` and `eof` are its
    only inputs).

    The parsing is llhttp's (Node.js's HTTP parser, through httptools); this class keeps what the
    pool needs on top: interim 1xx answers skipped, HEAD answers ending at their headers, a body ended
    by the server's close, size limits, and whether the connection may carry another request. One
    answer (`feed`: bytes after it that nobody asked for keep the connection from reuse), or, with
    `pipelined`, every answer in turn (`feed_answers`), for a connection with several requests in
    flight."""

    __slots__ = ("_answers", "_begun", "_body", "_complete", "_head_bytes", "_head_only", "_headers",
                 "_headers_done", "_interim", "_keep_alive", "_parser", "_pipelined", "_status")

    def __init__(self, head_only: bool = False, *, pipelined: bool = False) -> None:
        self._parser = httptools.HttpResponseParser(self)
        self._head_only = head_only
        self._pipelined = pipelined
        self._answers: list[RawResponse] = []
        self._keep_alive = True
        self._begun = False
        self._complete = False
        self._reset()

    def _reset(self) -> None:
        self._head_bytes = 0
        self._status = 0
        self._headers: dict[str, str] = {}
        self._headers_done = False
        self._interim = False
        self._body = bytearray()

    # llhttp's callbacks
    def on_message_begin(self) -> None:
        if self._complete:
            if not self._pipelined:
                self._keep_alive = False  # bytes after the answer that nobody asked for
                return
            self._complete = False
            self._reset()
        self._begun = True

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
        self._begun = False
        if self._pipelined:
            self._answers.append(self._done())

    def feed(self, data: bytes) -> RawResponse | None:
        """Take the next bytes; the answer once it is complete, else None (more bytes needed)."""
        self._parse(data)
        if not self._complete:
            return None
        return self._done()

    def feed_answers(self, data: bytes) -> tuple[list[RawResponse], HttpProtocolError | None]:
        """(`pipelined`) Take the next bytes: the answers they complete, in order, and the error that
        ended the reading, if any (the answers complete before it still count)."""
        try:
            self._parse(data)
        except HttpProtocolError as error:
            failure: HttpProtocolError | None = error
        else:
            failure = None
        answers, self._answers = self._answers, []
        return answers, failure

    def _parse(self, data: bytes) -> None:
        if not self._headers_done:
            self._head_bytes += len(data)
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserCallbackError as error:
            if isinstance(error.__context__, HttpProtocolError):
                raise error.__context__ from None
            raise HttpProtocolError(str(error)) from None
        except (httptools.HttpParserError, httptools.HttpParserUpgrade) as error:
            if self._pipelined or not self._complete:
                raise HttpProtocolError(f"not an HTTP/1.1 answer this client reads: {error}") from None
            self._keep_alive = False  # bytes after the answer that nobody asked for
        if not self._headers_done and self._head_bytes > MAX_HEAD:
            raise HttpProtocolError("headers over the size limit")

    def eof(self) -> RawResponse:
        """The server closed the connection: the answer if it ends there, else `HttpProtocolError`."""
        framed = "content-length" in self._headers or "chunked" in self._headers.get("transfer-encoding", "")
        if self._headers_done and not self._complete and not framed:
            self._keep_alive = False
            return self._done()
        raise HttpProtocolError("connection closed before the answer was complete")

    @property
    def between_answers(self) -> bool:
        """(`pipelined`) No byte of a next answer has been read."""
        return not self._begun

    def _done(self) -> RawResponse:
        return RawResponse(self._status, self._headers, bytes(self._body), self._keep_alive)


class _NotSent(Exception):
    """A call's last-moment check refused it when its connection was about to write: none of its bytes
    left, the connection is sound (the check's own exception is `refusal`)."""

    def __init__(self, refusal: BaseException) -> None:
        super().__init__(str(refusal))
        self.refusal = refusal


class _Connection(asyncio.Protocol):
    """One connection, pipelined: requests are written in order, at most one write per loop turn (all
    the requests handed to it since the last write, `_flush`), and their answers resolve their waiters
    in the same order. A call that is not pipelined has it to itself while it lasts (`solo`). A HEAD
    goes alone (its answer has no body whatever its headers say) on a connection that is not reused."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle_listed = False  # in the pool's idle list
        self.solo = False  # carrying a call that is not pipelined: nothing joins it
        self._reader = ResponseReader(pipelined=True)
        self._head_only = False
        self._inflight: deque[asyncio.Future[RawResponse]] = deque()
        self._unsent: list[tuple[bytes, Callable[[], None] | None, asyncio.Future[RawResponse]]] = []
        self.connecting: asyncio.Task[None] | None = None  # the pool's task opening it, until it is open

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not subclasses of asyncio.Transport; they behave as one
        self.transport = cast("asyncio.Transport", transport)
        if self._unsent:  # requests handed to it while it was being opened
            self._flush()

    @property
    def load(self) -> int:
        """Requests handed to this connection and not answered yet."""
        return len(self._inflight) + len(self._unsent)

    @property
    def filling(self) -> bool:
        """Requests wait for this turn's write: another one joins them in the same write."""
        return bool(self._unsent)

    def data_received(self, data: bytes) -> None:
        if not self._inflight:
            self._fail(HttpProtocolError("bytes from the server that nobody asked for"))
            return
        if self._head_only:
            try:
                response = self._reader.feed(data)
            except HttpProtocolError as error:
                self._fail(error)
                return
            if response is not None:
                self._deliver(response)
                self._fail(ConnectionResetError("a connection that carried a HEAD is not reused"))
            return
        answers, failure = self._reader.feed_answers(data)
        for answer in answers:
            if not self._inflight:
                self._fail(HttpProtocolError("an answer to no request"))
                return
            self._deliver(answer)
            if not answer.keep_alive:  # the server closes after this answer: the requests after it are lost
                self._fail(ConnectionResetError("the API server closed the connection after an earlier answer"))
                return
        if failure is not None:
            self._fail(failure)

    def _deliver(self, answer: RawResponse) -> None:
        waiter = self._inflight.popleft()
        if not waiter.done():
            waiter.set_result(answer)

    def eof_received(self) -> bool | None:
        if self._inflight:
            reader = self._reader
            try:
                if self._head_only or not reader.between_answers:
                    self._deliver(reader.eof())
            except HttpProtocolError as error:
                self._fail(error)
                return False
        self._fail(ConnectionResetError("the API server closed the connection"))
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(exc or ConnectionResetError("the API server closed the connection"))

    def time_out(self, waiter: asyncio.Future[RawResponse]) -> None:
        """A call's deadline passed with its answer still outstanding: fail it, drop the connection (and
        with it the calls after it, whose answers would come after the one that never came)."""
        if waiter.done():
            return
        waiter.set_exception(TimeoutError("no answer from the API server in time"))
        self._fail(ConnectionResetError("dropped: an earlier call on this connection got no answer in time"))

    def send(self, data: bytes, check: Callable[[], None] | None, head_only: bool) -> asyncio.Future[RawResponse]:
        """Queue one request for this turn's write; its answer resolves the returned future. `check` is
        asked right before the write: refused, the future fails with `_NotSent` and nothing of it leaves."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[RawResponse] = loop.create_future()
        if head_only:
            self._head_only = True
            self._reader = ResponseReader(head_only=True)
        if not self._unsent:
            loop.call_soon(self._flush)
        self._unsent.append((data, check, waiter))
        return waiter

    def withdraw(self, waiter: asyncio.Future[RawResponse]) -> bool:
        """Take back a request not written yet (its caller gave up); False once it was written."""
        for index, (_, _, queued) in enumerate(self._unsent):
            if queued is waiter:
                del self._unsent[index]
                return True
        return False

    def _flush(self) -> None:
        transport = self.transport
        if transport is None and not self.closed:
            return  # still being opened: written once it is (`connection_made`)
        unsent, self._unsent = self._unsent, []
        if self.closed or transport is None or transport.is_closing():
            for _, _, waiter in unsent:
                if not waiter.done():
                    waiter.set_exception(ConnectionResetError("the connection closed before the request was sent"))
            return
        out = []
        for data, check, waiter in unsent:
            if waiter.done():
                continue  # its caller gave up before it was written
            if check is not None:
                try:
                    check()  # the last moment: nothing is written after the gate closed
                except Exception as refusal:
                    waiter.set_exception(_NotSent(refusal))
                    continue
            out.append(data)
            self._inflight.append(waiter)
        if out:
            transport.write(out[0] if len(out) == 1 else b"".join(out))

    @property
    def usable(self) -> bool:
        return (not self.closed and not self._head_only and self.transport is not None
                and not self.transport.is_closing())

    @property
    def joinable(self) -> bool:
        """Open, or being opened, and may take more requests."""
        return (not self.closed and not self._head_only and not self.solo
                and (self.transport is None or not self.transport.is_closing()))

    def _fail(self, error: BaseException) -> None:
        """Drop the connection; every request on it not answered yet fails with `error`."""
        self.closed = True
        waiters = [*self._inflight, *(waiter for _, _, waiter in self._unsent)]
        self._inflight.clear()
        self._unsent.clear()
        for waiter in waiters:
            if not waiter.done():
                waiter.set_exception(error)
        if self.transport is not None:
            self.transport.abort()
        if self.connecting is not None:
            self.connecting.cancel()
            self.connecting = None

    def abort(self) -> None:
        self._fail(ConnectionResetError("the connection was dropped"))


def _ssl_context(url_scheme: str, context: ssl.SSLContext | None) -> ssl.SSLContext | None:
    if url_scheme == "https":
        return context or ssl.create_default_context()
    return None


class Http1Pool:
    """Kept-alive HTTP/1.1 connections to one server (`base_url`: scheme, host, port, path prefix), at
    most `limit` calls in flight at once; each call waits for a free slot beyond that.

    Which connection a call goes on: a pipelined call joins the connection taking this turn's
    pipelined calls, while it has fewer than `depth` unanswered (so they leave in one write) and while
    the server answers them fast (`pipelining`, module docstring); else, and for every other call, an
    idle connection; else a new one."""

    def __init__(self, base_url: str, *, ssl_context: ssl.SSLContext | None = None, server_hostname: str | None = None,
                 limit: int = 100, depth: int = DEFAULT_DEPTH, slow_answer_seconds: float = SLOW_ANSWER_SECONDS
                 ) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        if depth < 1:
            raise ValueError(f"depth must be at least 1, got {depth}")
        if not slow_answer_seconds > 0:
            raise ValueError(f"slow_answer_seconds must be positive, got {slow_answer_seconds}")
        self._host = parts.hostname
        self._port = parts.port or (443 if parts.scheme == "https" else 80)
        self._ssl = _ssl_context(parts.scheme, ssl_context)
        self._server_hostname = server_hostname if self._ssl is not None and server_hostname else None
        self._prefix = parts.path.rstrip("/")
        host = f"[{self._host}]" if ":" in self._host else self._host
        default_port = parts.port is None or parts.port == (443 if parts.scheme == "https" else 80)
        self.host_header = host if default_port else f"{host}:{self._port}"
        self._first_line_end = f" HTTP/1.1\r\nHost: {self.host_header}\r\nContent-Length: "
        self._idle: list[_Connection] = []
        self._filling: _Connection | None = None
        self._depth = depth
        self._slots = asyncio.Semaphore(limit)
        self.opened = 0  # connections opened so far (tests, benchmarks)
        self._slow_answer = slow_answer_seconds
        self.pipelining = True  # calls asking to be pipelined are (module docstring)
        self.answer_seconds: float | None = None  # the running average that decides it (None: no answer yet)
        self.switches = 0  # times `pipelining` changed
        self._logged_at: float | None = None

    def target(self, path: str, query: str = "") -> str:
        """The request target for `path` (percent-encoded where it needs it) and an encoded `query`."""
        target = quote(self._prefix + path, safe=_PATH_SAFE)
        return f"{target}?{query}" if query else target

    async def request(self, method: str, target: str, headers: bytes, body: bytes | None = None, *,
                      seconds: float, check: Callable[[], None] | None = None, pipelined: bool = False
                      ) -> RawResponse:
        """Send one request (`headers`: its header lines, each ending in CRLF, without Host and
        Content-Length) and read its answer within `seconds`; `pipelined`: on a connection shared with
        the other pipelined calls of this turn (module docstring). `check` is asked before a
        connection is taken and again just before the bytes are written (module docstring). Transport
        failures raise OSError (TimeoutError past the deadline) or `HttpProtocolError`; a call cancelled
        or timed out in flight drops its connection (and fails the calls behind it on that connection)."""
        if check is not None:
            check()
        content = body if body is not None else b""
        data = b"".join(((method + " " + target + self._first_line_end + str(len(content)) + "\r\n").encode("latin-1"),
                         headers, b"\r\n", content))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        if self._slots.locked():  # every slot is in use: wait for one, within the deadline
            with anyio.fail_after(seconds):
                await self._slots.acquire()
        else:
            await self._slots.acquire()  # free: returns at once
        try:
            head_only = method == "HEAD"
            asked = pipelined and not head_only
            pipelined = asked and self.pipelining
            connection = self._connection(pipelined) or self._open()
            if pipelined:
                self._filling = connection
            else:
                connection.solo = True
            waiter = connection.send(data, check, head_only)
            # Timed when it asked to be pipelined and its connection is open (a connection being opened
            # would add its handshake): the calls it waits behind on its connection, itself included.
            behind = connection.load if asked and connection.transport is not None else 0
            sent_at = loop.time()
            timer = loop.call_at(deadline, connection.time_out, waiter)
            try:
                response = await waiter
            except _NotSent as refused:
                self._rest(connection)
                raise refused.refusal from None
            except BaseException:
                if not connection.withdraw(waiter):
                    connection.abort()
                self._rest(connection)
                raise
            finally:
                timer.cancel()
                connection.solo = False
            if not response.keep_alive:
                connection.abort()
            self._rest(connection)
            if behind:
                self._answered((loop.time() - sent_at) / behind)
            return response
        finally:
            self._slots.release()

    def _answered(self, seconds: float) -> None:
        """A call that asked to be pipelined was answered in `seconds` per call on its connection up to it:
        pipeline while the running average stays fast (module docstring)."""
        average = self.answer_seconds
        average = seconds if average is None else average + _AVERAGE_WEIGHT * (seconds - average)
        self.answer_seconds = average
        if self.pipelining and average >= self._slow_answer:
            self.pipelining = False
            self._switched(average, "the server answers one connection's requests one after another, this slowly: "
                                    "calls get connections of their own")
        elif not self.pipelining and average < self._slow_answer * _RESUME_FRACTION:
            self.pipelining = True
            self._switched(average, "the server answers fast again")

    def _switched(self, average: float, why: str) -> None:
        """Log a switch of `pipelining`: at info the first time and once a minute at most (a busy server
        can make it switch back and forth), else at debug; each line counts the switches so far."""
        self.switches += 1
        now = asyncio.get_running_loop().time()
        quiet = self._logged_at is not None and now - self._logged_at < _SWITCH_LOG_SECONDS
        emit = log.debug if quiet else log.info
        emit("http.pipelining", pipelining=self.pipelining, server=self.host_header,
             answer_ms=round(average * 1000, 2), switches=self.switches, why=why)
        if not quiet:
            self._logged_at = now

    def _connection(self, pipelined: bool) -> _Connection | None:
        """The connection for the next call (class docstring); None: open a new one."""
        filling = self._filling
        if (pipelined and filling is not None and filling.filling and filling.joinable
                and filling.load < self._depth):
            return filling
        idle = self._idle
        while idle:
            connection = idle.pop()
            connection.idle_listed = False
            if connection.usable and connection.load == 0:
                return connection
            if not connection.joinable:
                connection.abort()
        return None

    def _rest(self, connection: _Connection) -> None:
        """A call on `connection` ended: list it as idle once nothing is outstanding on it."""
        if connection.load == 0 and not connection.idle_listed:
            if connection.usable:  # (one still being opened with nothing to carry is not wanted)
                connection.idle_listed = True
                self._idle.append(connection)
            else:
                connection.abort()

    def _open(self) -> _Connection:
        """A new connection, being opened: requests handed to it meanwhile are written once it is open
        (the calls of one turn that found no connection share this one), or fail as it fails."""
        connection = _Connection()
        connection.connecting = asyncio.get_running_loop().create_task(self._connect(connection))
        self.opened += 1
        return connection

    async def _connect(self, connection: _Connection) -> None:
        loop = asyncio.get_running_loop()
        try:
            await loop.create_connection(lambda: connection, self._host, self._port, ssl=self._ssl,
                                         server_hostname=self._server_hostname)
        except Exception as error:  # refused, unreachable, TLS handshake failed (ssl.SSLError is an OSError)
            connection.connecting = None
            failure = error if isinstance(error, OSError) else ConnectionError(f"{type(error).__name__}: {error}")
            connection._fail(failure)
            return
        connection.connecting = None

    def close(self) -> None:
        """Close every idle connection (those in use close when their call ends)."""
        idle, self._idle = self._idle, []
        for connection in idle:
            connection.abort()
