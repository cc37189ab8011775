"""The lean HTTP/1.1 client: answers read whole however the bytes arrive, connections reused only when
safe, the gate's last word before any byte leaves, and a deadline that drops the connection."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import pytest

from daemon.kube.http1 import Http1Pool, HttpProtocolError, RawResponse, ResponseReader


def read(data: bytes, *, step: int = 0, head_only: bool = False) -> RawResponse | None:
    reader = ResponseReader(head_only)
    if not step:
        return reader.feed(data)
    for start in range(0, len(data), step):
        answer = reader.feed(data[start:start + step])
        if answer is not None:
            return answer
    return None


@pytest.mark.parametrize("step", [0, 1, 7])
def test_an_answer_is_read_whole_whichever_way_its_bytes_are_split(step: int) -> None:
    sized = b'HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{"kind":""}'
    answer = read(sized, step=step)
    assert answer == RawResponse(201, {"content-type": "application/json", "content-length": "11"}, b'{"kind":""}',
                                 keep_alive=True)
    chunked = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nRetry-After: 3\r\n\r\n"
               b"5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n")
    answer = read(chunked, step=step)
    assert answer is not None and answer.body == b"hello world" and answer.headers["retry-after"] == "3"
    interim = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n"
    assert read(interim, step=step) == RawResponse(204, {}, b"", keep_alive=True)


def test_an_answer_without_a_length_ends_when_the_server_closes_and_its_connection_is_not_reused() -> None:
    reader = ResponseReader()
    assert reader.feed(b"HTTP/1.1 500 Oops\r\nConnection: close\r\n\r\npartial ") is None
    assert reader.feed(b"body") is None
    assert reader.eof() == RawResponse(500, {"connection": "close"}, b"partial body", keep_alive=False)
    closing = read(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
    assert closing is not None and not closing.keep_alive
    assert read(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n", head_only=True) == RawResponse(
        200, {"content-length": "10"}, b"", keep_alive=True)


@pytest.mark.parametrize("garbage", [
    b"SSH-2.0-OpenSSH\r\n\r\n",
    b"HTTP/1.1 2x0 OK\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: -4\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabXY",
])
def test_malformed_answers_are_refused(garbage: bytes) -> None:
    with pytest.raises(HttpProtocolError):
        read(garbage)


def test_answers_over_the_limits_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(HttpProtocolError, match="headers over"):
        read(b"HTTP/1.1 200 OK\r\n" + b"X-Big: " + b"a" * (70 * 1024) + b"\r\n\r\n", step=4096)
    monkeypatch.setattr("daemon.kube.http1.MAX_BODY", 8)
    with pytest.raises(HttpProtocolError, match="body over"):
        read(b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n0123456789ab")


def test_bytes_after_the_answer_that_nobody_asked_for_keep_the_connection_from_reuse() -> None:
    answer = read(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n")
    assert answer is not None and answer.body == b"ok" and not answer.keep_alive
    answer = read(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok\x00garbage")
    assert answer is not None and answer.body == b"ok" and not answer.keep_alive


def test_an_answer_cut_short_by_the_server_is_an_error() -> None:
    reader = ResponseReader()
    assert reader.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc") is None
    with pytest.raises(HttpProtocolError):
        reader.eof()


class Server:
    """A small HTTP/1.1 server on 127.0.0.1 answering each request with `answer(request bytes)`."""

    def __init__(self, answer: Callable[[bytes], bytes | None]) -> None:
        self.answer = answer
        self.received: list[bytes] = []
        self.connections = 0
        self.seconds_each = 0.0  # how long each answer takes (one connection's requests one after another)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                request = head + await reader.readexactly(length)
                self.received.append(request)
                reply = self.answer(request)
                if self.seconds_each:
                    await asyncio.sleep(self.seconds_each)
                if reply is None:  # never answer
                    await asyncio.sleep(3600)
                    continue
                writer.write(reply)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@asynccontextmanager
async def serving(answer: Callable[[bytes], bytes | None], *, limit: int = 4,
                  slow_answer_seconds: float = 0.002) -> AsyncIterator[tuple[Server, Http1Pool]]:
    server = Server(answer)
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    pool = Http1Pool(f"http://127.0.0.1:{port}/prefix", limit=limit, slow_answer_seconds=slow_answer_seconds)
    try:
        yield server, pool
    finally:
        pool.close()
        listener.close()


def ok(request: bytes) -> bytes:
    return b"HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n{}"


async def test_calls_reuse_one_connection_and_carry_host_length_and_headers() -> None:
    async with serving(ok) as (server, pool):
        for _ in range(3):
            answer = await pool.request("POST", pool.target("/api/v1/x y"), b"Accept: application/json\r\n", b'{"a":1}',
                                        seconds=5)
            assert answer.status == 201 and answer.body == b"{}"
        assert pool.opened == 1 and server.connections == 1
        first = server.received[0]
        assert first.startswith(b"POST /prefix/api/v1/x%20y HTTP/1.1\r\nHost: 127.0.0.1:")
        assert b"\r\nContent-Length: 7\r\nAccept: application/json\r\n\r\n" in first and first.endswith(b'{"a":1}')


async def test_the_last_moment_check_refusing_sends_nothing_and_keeps_the_connection() -> None:
    class Closed(Exception):
        pass

    async with serving(ok) as (server, pool):
        await pool.request("GET", pool.target("/warm"), b"", seconds=5)
        asked = []

        def check() -> None:
            asked.append(1)
            if len(asked) == 2:  # open when the call starts, closed when its bytes are about to leave
                raise Closed

        with pytest.raises(Closed):
            await pool.request("POST", pool.target("/binding"), b"", b"{}", seconds=5, check=check)
        await pool.request("GET", pool.target("/after"), b"", seconds=5)
        assert [request.split(b" ")[1] for request in server.received] == [b"/prefix/warm", b"/prefix/after"]
        assert pool.opened == 1


async def test_a_call_past_its_deadline_fails_and_its_connection_is_not_reused() -> None:
    async with serving(lambda request: None if b"/slow" in request else ok(request)) as (_server, pool):
        with pytest.raises(TimeoutError):
            await pool.request("GET", pool.target("/slow"), b"", seconds=0.2)
        assert (await pool.request("GET", pool.target("/fast"), b"", seconds=5)).status == 201
        assert pool.opened == 2


async def test_a_connection_the_server_closed_is_replaced() -> None:
    closing = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
    async with serving(lambda request: closing) as (_server, pool):
        for _ in range(2):
            assert (await pool.request("GET", pool.target("/"), b"", seconds=5)).status == 200
        assert pool.opened == 2


def echo(request: bytes) -> bytes:
    path = request.split(b" ")[1]
    return b"HTTP/1.1 200 OK\r\nContent-Length: " + str(len(path)).encode() + b"\r\n\r\n" + path


def test_answers_read_in_order_from_one_stream_however_their_bytes_are_split() -> None:
    stream = (b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na"
              b"HTTP/1.1 100 Continue\r\n\r\n"
              b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nb\r\n0\r\n\r\n"
              b"HTTP/1.1 404 Not Found\r\nContent-Length: 1\r\n\r\nc")
    for step in (1, 7, len(stream)):
        reader = ResponseReader(pipelined=True)
        answers = []
        for start in range(0, len(stream), step):
            read_now, failure = reader.feed_answers(stream[start:start + step])
            assert failure is None
            answers += read_now
        assert [(answer.status, answer.body) for answer in answers] == [(200, b"a"), (201, b"b"), (404, b"c")]
        assert reader.between_answers


class EchoProtocol(asyncio.Protocol):
    """Answers each request with its path (`echo`), and keeps the bytes of each read apart (`chunks`)."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.chunks.append(data)
        self.buffer += data
        while b"\r\n\r\n" in self.buffer:
            head, _, rest = self.buffer.partition(b"\r\n\r\n")
            length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:"))
            self.buffer = rest[length:]
            assert self.transport is not None
            self.transport.write(echo(head))


async def test_the_calls_of_one_turn_leave_in_one_write_and_each_gets_its_own_answer() -> None:
    chunks: list[bytes] = []
    listener = await asyncio.get_running_loop().create_server(lambda: EchoProtocol(chunks), "127.0.0.1", 0)
    pool = Http1Pool(f"http://127.0.0.1:{listener.sockets[0].getsockname()[1]}", limit=8)
    try:
        paths = [f"/call/{index}" for index in range(4)]
        answers = await asyncio.gather(*(pool.request("POST", pool.target(path), b"", b"{}", seconds=5,
                                                      pipelined=True) for path in paths))
        assert [answer.body for answer in answers] == [path.encode() for path in paths]
        assert pool.opened == 1
        assert len(chunks) == 1 and chunks[0].count(b"POST /call/") == 4  # the four requests in one write
    finally:
        pool.close()
        listener.close()


async def test_after_an_answer_that_closes_the_connection_the_calls_behind_it_fail_as_transport_errors() -> None:
    def answer(request: bytes) -> bytes:
        if b"/first" in request:
            return b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
        return echo(request)

    async with serving(answer) as (_server, pool):
        first, second = await asyncio.gather(
            pool.request("GET", pool.target("/first"), b"", seconds=5, pipelined=True),
            pool.request("GET", pool.target("/second"), b"", seconds=5, pipelined=True), return_exceptions=True)
        assert isinstance(first, RawResponse) and first.status == 200 and not first.keep_alive
        assert isinstance(second, ConnectionResetError)
        assert (await pool.request("GET", pool.target("/again"), b"", seconds=5)).body == b"/prefix/again"
        assert pool.opened == 2


async def test_a_call_refused_at_the_last_moment_leaves_its_turn_mates_to_be_sent() -> None:
    class Closed(Exception):
        pass

    def refuse() -> None:
        if refusing:
            raise Closed

    refusing = False
    async with serving(echo) as (server, pool):
        refused = pool.request("POST", pool.target("/refused"), b"", b"{}", seconds=5, check=refuse, pipelined=True)
        sent = pool.request("POST", pool.target("/sent"), b"", b"{}", seconds=5, pipelined=True)
        task = asyncio.ensure_future(asyncio.gather(refused, sent, return_exceptions=True))
        await asyncio.sleep(0)  # both calls are queued for the turn's write, the first one's check passed
        refusing = True
        outcome, answer = await task
        assert isinstance(outcome, Closed)
        assert isinstance(answer, RawResponse) and answer.body == b"/prefix/sent"
        assert [request.split(b" ")[1] for request in server.received] == [b"/prefix/sent"]
        assert pool.opened == 1


async def test_a_call_cancelled_before_its_turn_write_is_not_sent_and_costs_no_connection() -> None:
    async with serving(echo) as (server, pool):
        cancelled = asyncio.ensure_future(pool.request("POST", pool.target("/gone"), b"", b"{}", seconds=5,
                                                       pipelined=True))
        kept = asyncio.ensure_future(pool.request("POST", pool.target("/kept"), b"", b"{}", seconds=5, pipelined=True))
        await asyncio.sleep(0)
        cancelled.cancel()
        assert (await kept).body == b"/prefix/kept"
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        assert [request.split(b" ")[1] for request in server.received] == [b"/prefix/kept"]
        assert (await pool.request("GET", pool.target("/next"), b"", seconds=5)).status == 200
        assert pool.opened == 1


async def test_a_call_not_pipelined_has_a_connection_to_itself_so_a_slow_answer_holds_up_no_other() -> None:
    async with serving(lambda request: None if b"/slow" in request else echo(request)) as (_server, pool):
        slow = asyncio.ensure_future(pool.request("POST", pool.target("/slow"), b"", b"{}", seconds=5))
        answers = await asyncio.gather(*(pool.request("POST", pool.target(f"/fast/{index}"), b"", b"{}", seconds=5)
                                         for index in range(2)))
        assert [answer.body for answer in answers] == [b"/prefix/fast/0", b"/prefix/fast/1"]
        assert not slow.done() and pool.opened == 3
        slow.cancel()


async def test_calls_asking_to_be_pipelined_get_connections_of_their_own_while_the_server_answers_slowly() -> None:
    """Go's net/http (a real API server) serves one connection's requests one after another: eight Events
    pipelined on one connection take eight times one Event's write. Once answers come slowly, each call
    goes on a connection of its own; once they come fast again, the calls of a turn share one again."""
    async def turn(pool: Http1Pool) -> None:
        answers = await asyncio.gather(*(pool.request("POST", pool.target(f"/event/{index}"), b"", b"{}", seconds=10,
                                                      pipelined=True) for index in range(8)))
        assert [answer.body for answer in answers] == [f"/prefix/event/{index}".encode() for index in range(8)]

    async with serving(echo, limit=16, slow_answer_seconds=0.01) as (server, pool):
        server.seconds_each = 0.04
        await turn(pool)  # on a connection being opened: not timed
        await turn(pool)  # on that one connection, answered one after another: timed, slow
        assert pool.opened == 1 and not pool.pipelining
        await turn(pool)
        assert pool.opened >= 8 and server.connections >= 8  # the turn's calls overlapped on connections of their own
        server.seconds_each = 0.0
        for _ in range(20):  # the running average falls below half the threshold within a few turns
            if pool.pipelining:
                break
            await turn(pool)
        opened = pool.opened
        await turn(pool)
        await turn(pool)
        assert pool.pipelining and pool.opened == opened  # shared again: the turns opened no connection


async def test_a_fast_server_keeps_the_calls_of_each_turn_on_one_connection() -> None:
    async with serving(echo, limit=16, slow_answer_seconds=0.05) as (_server, pool):  # room for a loaded machine
        for _ in range(5):
            await asyncio.gather(*(pool.request("POST", pool.target("/event"), b"", b"{}", seconds=10, pipelined=True)
                                   for _ in range(8)))
        assert pool.pipelining and pool.opened == 1 and pool.answer_seconds is not None


def test_the_slow_answer_threshold_must_be_positive() -> None:
    with pytest.raises(ValueError, match="slow_answer_seconds"):
        Http1Pool("http://127.0.0.1:1", slow_answer_seconds=0)
