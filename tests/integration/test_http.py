"""fetch() against real HTTP servers on 127.0.0.1: every failure ends in a result with a reason.

Most cases run against both clients ``fetch`` accepts: httpx (``make_client``) and the poll path's own
HTTP/1.1 client (``make_poll_client``). The byte-level cases (chunking, keep-alive, closes, drips,
resets) use raw asyncio servers that write exactly the bytes a test needs, in plain TCP or in TLS with
a self-signed certificate made for the test.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ipaddress
import json
import os
import socket
import ssl
import struct
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from sparktui.config import parse_config
from sparktui.engines import readings
from sparktui.model.fleet import FleetState
from sparktui.model.observations import FetchKind, HttpResult
from sparktui.model.status import State
from sparktui.sources.http import FetchClient, PollClient, fetch, make_client, make_poll_client
from sparktui.sources.poller import FleetPoller, fleet_origins
from tests.support.fixture_fleet import (
    Endpoint,
    Faults,
    FixtureServer,
    fleet_config,
    free_port,
    scenario_scrapes,
    start_node,
)
from tests.support.wait import wait_until

CAP = 1024 * 1024
ROOT = Path(__file__).resolve().parents[2]
KINDS = ("httpx", "http1")


@pytest.fixture
def server() -> Iterator[FixtureServer]:
    srv = FixtureServer(Endpoint(name="vllm", scrapes=scenario_scrapes("mtp2-steady"))).start()
    yield srv
    srv.stop()


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    return kind


@contextlib.asynccontextmanager
async def open_client(kind: str, ssl_context: ssl.SSLContext | None = None) -> AsyncIterator[FetchClient]:
    """httpx, or the poll client (sparktui's own HTTP/1.1 client)."""
    if kind == "httpx":
        async with make_client(ssl_context=ssl_context) as client:
            yield client
    else:
        async with make_poll_client(ssl_context=ssl_context) as poll_client:
            yield poll_client


async def get(client: FetchClient, url: str, timeout_s: float = 2.0, max_bytes: int = CAP) -> HttpResult:
    return await fetch(client, url, timeout_s=timeout_s, max_bytes=max_bytes)


# --- a raw server: the exact bytes a test needs --------------------------------------------------------


@dataclass
class RawConnection:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    index: int
    requests: list[bytes] = field(default_factory=list)
    closed_by_client: asyncio.Event = field(default_factory=asyncio.Event)

    async def request(self) -> bytes | None:
        """The next request's head, or None once the client has closed the connection."""
        try:
            head = await self.reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            self.closed_by_client.set()
            return None
        self.requests.append(head)
        return head

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def until_client_closes(self) -> None:
        with contextlib.suppress(ConnectionError):
            while await self.reader.read(65536):
                pass
        self.closed_by_client.set()

    def reset(self) -> None:
        """Close with a TCP reset (SO_LINGER 0) rather than a FIN."""
        sock = self.writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.writer.transport.abort()


Handler = Callable[[RawConnection], Awaitable[None]]


class RawServer:
    """An asyncio TCP server on 127.0.0.1 (port 0); ``handler`` runs once per accepted connection.
    With ``tls`` (a server-side context) it speaks TLS and its ``url`` is https."""

    def __init__(self, handler: Handler, host: str = "127.0.0.1", tls: ssl.SSLContext | None = None) -> None:
        self.handler = handler
        self.host = host
        self.tls = tls
        self.connections: list[RawConnection] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._server: asyncio.Server | None = None
        self.url = ""

    async def __aenter__(self) -> RawServer:
        self._server = await asyncio.start_server(self._handle, self.host, 0, ssl=self.tls)
        port = self._server.sockets[0].getsockname()[1]
        shown = f"[{self.host}]" if ":" in self.host else self.host
        self.url = f"{'https' if self.tls else 'http'}://{shown}:{port}"
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    @property
    def requests(self) -> list[bytes]:
        return [r for c in self.connections for r in c.requests]

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        conn = RawConnection(reader, writer, len(self.connections))
        self.connections.append(conn)
        try:
            await self.handler(conn)
        except ConnectionError:
            pass
        finally:
            writer.transport.abort()
            self._tasks.discard(task)


def answer(body: bytes, status: str = "200 OK", head: str = "") -> bytes:
    return f"HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\n{head}\r\n".encode() + body


async def keep_alive(conn: RawConnection) -> None:
    """Answers every request on the connection with its own path and the connection's index."""
    while (head := await conn.request()) is not None:
        path = head.split(b" ", 2)[1]
        await conn.send(answer(path + b" on connection %d" % conn.index))


# --- the basics, on both clients ------------------------------------------------------------------------


async def test_ok_body_status_and_latency(server: FixtureServer, kind: str) -> None:
    async with open_client(kind) as client:
        result = await get(client, f"{server.url}/metrics")
    assert result.ok and result.kind is FetchKind.OK
    assert result.body.decode() == server.endpoint.current_scrape()
    assert result.content_type is not None and result.content_type.startswith("text/plain")
    assert 0 < result.elapsed_s < 2


async def test_refused_connection(kind: str) -> None:
    async with open_client(kind) as client:
        result = await get(client, f"http://127.0.0.1:{free_port()}/health")
    assert result.kind is FetchKind.REFUSED
    assert result.problem() == "connection refused"


async def test_timeout_is_bounded_by_the_deadline(server: FixtureServer, kind: str) -> None:
    server.endpoint.faults = Faults(delay_s=1.5)
    async with open_client(kind) as client:
        result = await get(client, f"{server.url}/health", timeout_s=0.3)
    assert result.kind is FetchKind.TIMEOUT
    assert result.elapsed_s < 1.0
    assert "0.3 s" in result.problem()


async def test_body_over_the_cap_is_refused(server: FixtureServer, kind: str) -> None:
    server.endpoint.faults = Faults(metrics="huge")
    async with open_client(kind) as client:
        result = await get(client, f"{server.url}/metrics", timeout_s=5)
    assert result.kind is FetchKind.TOO_LARGE
    assert "1.0 MiB cap" in result.problem()
    assert result.body == b""


async def test_truncated_body_is_reported(server: FixtureServer, kind: str) -> None:
    server.endpoint.faults = Faults(metrics="truncated")
    async with open_client(kind) as client:
        result = await get(client, f"{server.url}/metrics")
    assert result.kind is FetchKind.TRUNCATED
    assert "truncated" in result.problem()


async def test_http_error_status_is_an_answer_not_ok(server: FixtureServer, kind: str) -> None:
    server.endpoint.faults = Faults(health_status=503)
    async with open_client(kind) as client:
        result = await get(client, f"{server.url}/health")
    assert result.answered and not result.ok
    assert result.status == 503
    assert result.problem() == "HTTP 503"


async def test_a_redirect_is_an_answer_that_says_where_it_points_and_is_not_followed(kind: str) -> None:
    # An auth proxy in front of the server sends every request to its login page, on the same server
    # here: a client that followed it would ask for /login too.
    async def to_login(conn: RawConnection) -> None:
        while (head := await conn.request()) is not None:
            if head.startswith(b"GET /login "):
                await conn.send(answer(b"# HELP a login page, not metrics\n"))
            else:
                await conn.send(answer(b"", "302 Found", "Location: /login?rd=%2Fmetrics\r\n"))

    async with RawServer(to_login) as srv, open_client(kind) as client:
        result = await get(client, f"{srv.url}/metrics")
    assert result.answered and not result.ok and result.status == 302
    assert result.problem() == "HTTP 302 to /login?rd=%2Fmetrics, not followed"
    assert [head.split(b" ")[1] for head in srv.requests] == [b"/metrics"]


@pytest.mark.parametrize(
    ("location", "shown"),
    [
        ("", "nowhere (no Location header)"),
        ("\x1b]2;pwned\x07https://evil.example/\x1b[2J" + "a" * 5000, "https://evil.example/aaa"),
    ],
    ids=["missing", "hostile"],
)
async def test_a_redirects_location_is_made_safe_to_print(kind: str, location: str, shown: str) -> None:
    head = f"Location: {location}\r\n" if location else ""

    async def redirect(conn: RawConnection) -> None:
        while await conn.request() is not None:
            await conn.send(answer(b"", "301 Moved Permanently", head))

    async with RawServer(redirect) as srv, open_client(kind) as client:
        result = await get(client, f"{srv.url}/metrics")
    problem = result.problem()
    assert problem.isprintable() and len(problem) < 300, problem
    if result.answered:  # httpx may refuse the control bytes in the header: then a one-line error instead
        assert result.location is not None and result.location.startswith(shown)
        assert problem.startswith(f"HTTP 301 to {shown}") and problem.endswith(", not followed")
    else:
        assert kind == "httpx" and location, problem


async def test_api_key_header_is_sent_and_401_is_an_answer(server: FixtureServer, kind: str) -> None:
    server.endpoint.api_key = "s3cret-key"
    async with open_client(kind) as client:
        without = await get(client, f"{server.url}/v1/models")
        with_key = await fetch(
            client,
            f"{server.url}/v1/models",
            timeout_s=2,
            max_bytes=CAP,
            headers={"Authorization": "Bearer s3cret-key"},
        )
    assert without.answered and without.status == 401
    assert with_key.ok and b"RedHatAI/Qwen3.6-35B-A3B-NVFP4" in with_key.body


async def test_unresolvable_host_is_an_error_with_a_reason(kind: str) -> None:
    async with open_client(kind) as client:
        result = await get(client, "http://no-such-host.invalid/health")
    assert result.kind in (FetchKind.ERROR, FetchKind.TIMEOUT)
    assert result.error


async def test_garbage_instead_of_http_is_an_error_with_one_line(kind: str) -> None:
    async def ssh_banner(conn: RawConnection) -> None:
        await conn.request()
        await conn.send(b"SSH-2.0-OpenSSH_9.6\r\nProtocol mismatch.\r\n\r\n")

    async with RawServer(ssh_banner) as srv, open_client(kind) as client:
        result = await get(client, f"{srv.url}/metrics")
    assert result.kind is FetchKind.ERROR
    assert result.error and "\n" not in result.error


async def test_reset_before_the_answer_is_an_error_with_one_line(kind: str) -> None:
    async def reset(conn: RawConnection) -> None:
        await conn.request()
        conn.reset()

    async with RawServer(reset) as srv, open_client(kind) as client:
        result = await get(client, f"{srv.url}/metrics")
    assert result.kind is FetchKind.ERROR
    assert result.error and "\n" not in result.error


async def test_declared_length_over_the_cap_fails_without_reading_the_body(kind: str) -> None:
    async def promise_ten_mib(conn: RawConnection) -> None:
        await conn.request()
        # Declares 10 MiB, sends 1 KiB, then waits: reading the body would end in a timeout instead.
        await conn.send(b"HTTP/1.1 200 OK\r\nContent-Length: 10485760\r\n\r\n" + b"x" * 1024)
        await conn.until_client_closes()

    async with RawServer(promise_ten_mib) as srv, open_client(kind) as client:
        result = await get(client, f"{srv.url}/metrics", timeout_s=5)
    assert result.kind is FetchKind.TOO_LARGE
    assert result.problem() == "body of 10.0 MiB is over the 1.0 MiB cap"


# --- framing --------------------------------------------------------------------------------------------

CHUNKED = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"5;note=first\r\nhello\r\n"
    b"7\r\n, world\r\n"
    b"1A\r\n" + b"abcdefghijklmnopqrstuvwxyz" + b"\r\n"
    b"0\r\nX-Checksum: 1234\r\n\r\n"
)


async def test_chunked_body_arriving_a_few_bytes_at_a_time(kind: str) -> None:
    async def chunked(conn: RawConnection) -> None:
        while await conn.request() is not None:
            for start in range(0, len(CHUNKED), 3):
                await conn.send(CHUNKED[start : start + 3])
                await asyncio.sleep(0.001)  # the scenario: a server sending a few bytes at a time

    async with RawServer(chunked) as srv, open_client(kind) as client:
        first = await get(client, f"{srv.url}/metrics")
        second = await get(client, f"{srv.url}/metrics")
    assert first.ok and second.ok
    assert first.body == second.body == b"hello, worldabcdefghijklmnopqrstuvwxyz"
    assert len(srv.connections) == 1  # a whole chunked answer leaves the connection reusable


async def test_chunked_body_over_the_cap_is_too_large_and_the_connection_dropped(kind: str) -> None:
    async def endless_chunks(conn: RawConnection) -> None:
        head = await conn.request()
        if head is not None and b"/small" in head:
            await conn.send(answer(b"small"))
            await conn.until_client_closes()
            return
        await conn.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for _ in range(64):
            await conn.send(b"4000\r\n" + b"x" * 0x4000 + b"\r\n")
        await conn.until_client_closes()

    async with RawServer(endless_chunks) as srv, open_client(kind) as client:
        big = await get(client, f"{srv.url}/big", max_bytes=256 * 1024)
        small = await get(client, f"{srv.url}/small")
        await asyncio.wait_for(srv.connections[0].closed_by_client.wait(), 5)
    assert big.kind is FetchKind.TOO_LARGE and "cap" in big.problem()
    assert small.ok and small.body == b"small"
    assert len(srv.connections) == 2  # the oversized answer's connection was not reused


async def test_keep_alive_reuses_one_connection_for_sequential_gets(kind: str) -> None:
    async with RawServer(keep_alive) as srv, open_client(kind) as client:
        results = [await get(client, f"{srv.url}/n{i}") for i in range(10)]
    assert all(r.ok for r in results)
    assert [r.body for r in results] == [b"/n%d on connection 0" % i for i in range(10)]
    assert len(srv.connections) == 1


@pytest.mark.parametrize(
    "head",
    [
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 4\r\n\r\n",
        b"HTTP/1.0 200 OK\r\nContent-Length: 4\r\n\r\n",  # HTTP/1.0 without keep-alive closes too
    ],
    ids=["connection-close", "http10-with-length"],
)
async def test_connection_close_is_honoured(kind: str, head: bytes) -> None:
    async def close_after_one(conn: RawConnection) -> None:
        # Says "close" but leaves the socket open: a client that reused it would wait for ever.
        await conn.request()
        await conn.send(head + b"once")
        await conn.until_client_closes()

    async with RawServer(close_after_one) as srv, open_client(kind) as client:
        first = await get(client, f"{srv.url}/a")
        second = await get(client, f"{srv.url}/b")
        await asyncio.wait_for(srv.connections[0].closed_by_client.wait(), 5)
    assert first.ok and second.ok and first.body == second.body == b"once"
    assert len(srv.connections) == 2


async def test_http10_body_ends_with_the_connection(kind: str) -> None:
    async def http10(conn: RawConnection) -> None:
        await conn.request()
        await conn.send(b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\n")
        for part in (b"no length ", b"given, ", b"read to the end"):
            await conn.send(part)
            await asyncio.sleep(0.01)  # the scenario: the body in separate pieces
        conn.writer.close()

    async with RawServer(http10) as srv, open_client(kind) as client:
        first = await get(client, f"{srv.url}/metrics")
        second = await get(client, f"{srv.url}/metrics")
    assert first.ok and first.body == b"no length given, read to the end"
    assert first.content_type == "text/plain"
    assert second.ok and len(srv.connections) == 2


async def test_body_to_close_over_the_cap_is_too_large(kind: str) -> None:
    async def stream_forever(conn: RawConnection) -> None:
        await conn.request()
        await conn.send(b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\n")
        for _ in range(64):
            await conn.send(b"x" * 16384)
        await conn.until_client_closes()

    async with RawServer(stream_forever) as srv, open_client(kind) as client:
        result = await get(client, f"{srv.url}/metrics", max_bytes=256 * 1024)
    assert result.kind is FetchKind.TOO_LARGE
    assert result.problem() == "body is over the 0.2 MiB cap"


async def test_headers_over_the_cap_are_an_error_with_one_line(kind: str) -> None:
    async def huge_head(conn: RawConnection) -> None:
        await conn.request()
        filler = b"".join(b"X-Filler-%d: %s\r\n" % (i, b"a" * 100) for i in range(2000))  # ~230 KiB
        await conn.send(b"HTTP/1.1 200 OK\r\n" + filler + b"Content-Length: 2\r\n\r\nok")
        await conn.until_client_closes()

    async with RawServer(huge_head) as srv, open_client(kind) as client:
        result = await get(client, f"{srv.url}/metrics", timeout_s=5)
    assert result.kind is FetchKind.ERROR
    assert result.error and "\n" not in result.error


@pytest.mark.parametrize(
    "head",
    [
        b"HTTP/1.1 200 OK\nContent-Length: 4\n\n",
        b"HTTP/1.1 200 OK\nContent-Length: 4\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 4\n\r\n",
    ],
    ids=["all-lf", "lf-status-line", "lf-before-blank-line"],
)
async def test_poll_client_bare_lf_head_is_a_malformed_response_not_a_timeout(head: bytes) -> None:
    async def bare_lf(conn: RawConnection) -> None:
        await conn.request()
        await conn.send(head + b"body")
        await conn.until_client_closes()

    async with RawServer(bare_lf) as srv, make_poll_client() as client:
        result = await get(client, f"{srv.url}/metrics", timeout_s=30)
    assert result.kind is FetchKind.ERROR
    assert result.problem() == "malformed HTTP response: header lines end in a bare LF, not CRLF"


async def test_slow_drip_body_past_the_deadline_is_a_timeout(kind: str) -> None:
    sent: list[int] = []

    async def drip(conn: RawConnection) -> None:
        await conn.request()
        await conn.send(b"HTTP/1.1 200 OK\r\nContent-Length: 200\r\n\r\n")
        for _ in range(200):  # one byte every 20 ms: 4 s for the whole body
            await conn.send(b"x")
            sent.append(1)
            await asyncio.sleep(0.02)  # the scenario: a slow server

    async with RawServer(drip) as srv, open_client(kind) as client:
        result = await get(client, f"{srv.url}/metrics", timeout_s=0.4)
    assert result.kind is FetchKind.TIMEOUT
    assert result.problem() == "no answer within 0.4 s"
    assert 0 < len(sent) < 200  # bytes were arriving: the deadline covers the body, not just the headers


async def test_cancel_mid_body_closes_that_connection_and_the_pool_stays_healthy(kind: str) -> None:
    half_sent = asyncio.Event()

    async def stall_first(conn: RawConnection) -> None:
        if conn.index == 0:
            await conn.request()
            await conn.send(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + b"half" * 10)
            half_sent.set()
            await conn.until_client_closes()
            return
        await keep_alive(conn)

    async with RawServer(stall_first) as srv, open_client(kind) as client:
        task = asyncio.create_task(get(client, f"{srv.url}/stalls", timeout_s=30))
        await asyncio.wait_for(half_sent.wait(), 5)
        # Give the half body a moment to reach the client; cancelled a little earlier it is still
        # cancelled mid-answer, which is all the test needs, so no condition is waited on.
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.wait_for(srv.connections[0].closed_by_client.wait(), 5)
        after = [await get(client, f"{srv.url}/after{i}") for i in range(5)]
    assert all(r.ok for r in after), [r.problem() for r in after]
    assert [r.body for r in after] == [b"/after%d on connection 1" % i for i in range(5)]
    assert len(srv.connections) == 2


async def test_server_closing_an_idle_connection_does_not_fail_the_next_fetch(kind: str) -> None:
    async def close_when_idle(conn: RawConnection) -> None:
        await conn.request()
        await conn.send(answer(b"fine"))  # keep-alive implied, then closed after 50 ms idle (uvicorn does after 5 s)
        await asyncio.sleep(0.05)  # the scenario: the server's idle timeout

    async with RawServer(close_when_idle) as srv, open_client(kind) as client:
        first = await get(client, f"{srv.url}/a")
        await wait_until(srv.connections[0].writer.is_closing, 5.0, what="the server closing the idle connection")
        second = await get(client, f"{srv.url}/b")
    assert first.ok and second.ok, second.problem()
    assert len(srv.connections) == 2


async def test_reused_connection_closed_before_answering_is_retried_on_a_fresh_one() -> None:
    # The race the idle close leaves: the request goes out on a kept connection just as the server
    # closes it. The server reads the second request and closes without a byte of answer.
    async def one_answer_per_connection(conn: RawConnection) -> None:
        await conn.request()
        await conn.send(answer(b"answer %d" % conn.index))
        await conn.request()

    async with RawServer(one_answer_per_connection) as srv, make_poll_client() as client:
        results = [await get(client, f"{srv.url}/r{i}") for i in range(3)]
    assert [r.body for r in results] == [b"answer 0", b"answer 1", b"answer 2"], [r.problem() for r in results]
    assert len(srv.connections) == 3
    assert len(srv.requests) == 5  # two of them were the ones dropped unanswered


async def test_a_fresh_connection_closed_before_answering_is_not_retried() -> None:
    async def never_answer(conn: RawConnection) -> None:
        await conn.request()

    async with RawServer(never_answer) as srv, make_poll_client() as client:
        result = await get(client, f"{srv.url}/metrics")
    assert result.kind is FetchKind.ERROR
    assert result.problem() == "the server closed the connection without answering"
    assert len(srv.connections) == 1


async def test_many_origins_concurrently(kind: str) -> None:
    async with contextlib.AsyncExitStack() as stack:
        servers = [await stack.enter_async_context(RawServer(keep_alive)) for _ in range(12)]
        client = await stack.enter_async_context(open_client(kind))
        for round_ in range(3):
            results = await asyncio.gather(
                *(get(client, f"{srv.url}/{index}/{path}") for index, srv in enumerate(servers) for path in ("a", "b"))
            )
            expected = [(f"/{index}/{path}").encode() for index in range(len(servers)) for path in ("a", "b")]
            assert all(r.ok for r in results), round_
            assert [r.body.split(b" ")[0] for r in results] == expected
    # Two at a time per origin, every round: two connections each, kept and reused.
    assert all(len(srv.connections) == 2 for srv in servers), [len(s.connections) for s in servers]


async def test_ipv6_literal_host(kind: str) -> None:
    try:
        srv = RawServer(keep_alive, host="::1")
        await srv.__aenter__()
    except OSError:
        pytest.skip("no IPv6 loopback here")
    try:
        async with open_client(kind) as client:
            result = await get(client, f"{srv.url}/six")
    finally:
        await srv.__aexit__()
    assert result.ok and result.body == b"/six on connection 0"
    port = srv.url.rsplit(":", 1)[1]
    assert f"Host: [::1]:{port}\r\n".encode() in srv.requests[0]


# --- the poll client itself ------------------------------------------------------------------------------


async def test_poll_client_request_says_who_it_is_and_asks_for_no_compression() -> None:
    async with RawServer(keep_alive) as srv, make_poll_client() as client:
        result = await get(client, f"{srv.url}/metrics?name%5B%5D=vllm%3Ax")
    assert result.ok
    (request,) = srv.requests
    lines = request.decode().split("\r\n")
    assert lines[0] == "GET /metrics?name%5B%5D=vllm%3Ax HTTP/1.1"
    assert "User-Agent: sparktui" in lines
    assert not any(line.lower().startswith("accept-encoding") for line in lines)


async def test_poll_client_refuses_a_compressed_answer_it_did_not_ask_for() -> None:
    async def gzip_anyway(conn: RawConnection) -> None:
        await conn.request()
        await conn.send(answer(b"\x1f\x8b\x08\x00", head="Content-Encoding: gzip\r\n"))
        await conn.until_client_closes()

    async with RawServer(gzip_anyway) as srv, make_poll_client() as client:
        result = await get(client, f"{srv.url}/metrics")
    assert result.kind is FetchKind.ERROR
    assert result.problem() == "malformed HTTP response: the answer is compressed (gzip), which was not asked for"


# --- https: a real TLS server on 127.0.0.1 with a certificate made for the test ------------------------


@dataclass(frozen=True)
class Certificate:
    cert: Path
    key: Path

    def server_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.cert, self.key)
        return context

    def trusted(self) -> ssl.SSLContext:
        """A client context that trusts this (self-signed) certificate as its only CA."""
        return ssl.create_default_context(cafile=str(self.cert))


def self_signed(directory: Path, *, ip: str | None = "127.0.0.1", dns: str = "localhost") -> Certificate:
    """A self-signed certificate for ``ip`` and ``dns``, its own CA."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sparktui test")])
    now = datetime.datetime.now(datetime.UTC)
    names: list[x509.GeneralName] = [x509.DNSName(dns)]
    if ip is not None:
        names.append(x509.IPAddress(ipaddress.ip_address(ip)))
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    paths = Certificate(directory / "cert.pem", directory / "key.pem")
    paths.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths.key.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return paths


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> Certificate:
    return self_signed(tmp_path_factory.mktemp("tls"))


async def test_https_with_the_certificate_trusted_is_ok_over_one_kept_connection(
    certificate: Certificate, kind: str
) -> None:
    async with (
        RawServer(keep_alive, tls=certificate.server_context()) as srv,
        open_client(kind, certificate.trusted()) as client,
    ):
        assert srv.url.startswith("https://127.0.0.1:")
        results = [await get(client, f"{srv.url}/metrics?n={i}") for i in range(3)]
    assert [r.body for r in results] == [b"/metrics?n=%d on connection 0" % i for i in range(3)], [
        r.problem() for r in results
    ]
    assert len(srv.connections) == 1


async def test_https_with_an_untrusted_certificate_fails_with_a_one_line_reason(
    certificate: Certificate, kind: str
) -> None:
    async with RawServer(keep_alive, tls=certificate.server_context()) as srv, open_client(kind) as client:
        result = await get(client, f"{srv.url}/metrics")
    assert result.kind is FetchKind.ERROR
    assert result.error and "\n" not in result.error
    assert "certificate" in result.error.lower() and "self-signed" in result.error.lower(), result.error
    assert srv.requests == []  # nothing was asked of a server that was not trusted


async def test_poll_client_https_reasons_name_the_certificate_problem(certificate: Certificate, tmp_path: Path) -> None:
    only_a_name = self_signed(tmp_path, ip=None)  # valid for "localhost" alone, served at 127.0.0.1
    async with RawServer(keep_alive, tls=only_a_name.server_context()) as srv:
        async with make_poll_client() as client:
            untrusted = await get(client, f"{srv.url}/metrics")
        async with make_poll_client(ssl_context=only_a_name.trusted()) as client:
            wrong_host = await get(client, f"{srv.url}/metrics")
    assert untrusted.problem() == "cannot connect: TLS certificate not trusted: self-signed certificate"
    assert wrong_host.problem() == (
        "cannot connect: TLS certificate not trusted: IP address mismatch, certificate is not valid for '127.0.0.1'."
    )


def private_ca(directory: Path) -> tuple[Path, Certificate]:
    """A private CA (its certificate in ``ca.pem``) and a server certificate for 127.0.0.1 it signed."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sparktui test private CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )  # key_cert_sign, crl_sign
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "spark1")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    ca_file = directory / "ca.pem"
    ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    server = Certificate(directory / "server.pem", directory / "server-key.pem")
    server.cert.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    server.key.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return ca_file, server


async def test_ssl_cert_file_is_honoured_by_both_clients(
    certificate: Certificate, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(certificate.cert))
    async with RawServer(keep_alive, tls=certificate.server_context()) as srv, open_client(kind) as client:
        result = await get(client, f"{srv.url}/metrics")
    assert result.ok, result.problem()


async def test_the_configs_ca_file_trusts_a_private_ca_for_both_clients(tmp_path: Path, kind: str) -> None:
    ca_file, server = private_ca(tmp_path)
    fleet = parse_config('ca_file = "ca.pem"\n[[nodes]]\nname = "a"\nhost = "127.0.0.1"\n', base_dir=tmp_path)
    assert fleet.ca_file == ca_file
    async with RawServer(keep_alive, tls=server.server_context()) as srv:
        async with open_client(kind) as client:
            untrusted = await get(client, f"{srv.url}/metrics")
        factory = make_client if kind == "httpx" else make_poll_client
        async with factory(ca_file=fleet.ca_file) as client:
            trusted = await get(client, f"{srv.url}/metrics")
    assert not untrusted.ok and "certificate" in untrusted.problem().lower()
    assert trusted.ok, trusted.problem()


@pytest.mark.parametrize("how", ["ca_file", "SSL_CERT_FILE"])
async def test_sparktui_check_trusts_a_private_ca_from_the_config_or_ssl_cert_file(tmp_path: Path, how: str) -> None:
    ca_file, server = private_ca(tmp_path)
    async with RawServer(keep_alive, tls=server.server_context()) as srv:
        config = tmp_path / "fleet.toml"
        head = 'ca_file = "ca.pem"\n' if how == "ca_file" else ""
        config.write_text(
            head + '[[nodes]]\nname = "spark1"\nhost = "127.0.0.1"\n[nodes.ssh]\nenabled = false\n'
            f'[[nodes.vllm]]\nurl = "{srv.url}"\n'
        )
        env = {**os.environ, "SPARKTUI_CONFIG": str(config), "PYTHONPATH": str(ROOT)}
        if how == "SSL_CERT_FILE":
            env["SSL_CERT_FILE"] = str(ca_file)
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "sparktui", "check", "--json", "--interval", "0.1",
            env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(process.communicate(), 60)
    (node,) = json.loads(out)["nodes"]
    reasons = " ".join(node["status"]["reasons"])
    assert "TLS" not in reasons and "certificate" not in reasons, (reasons, err)
    assert any(head.startswith(b"GET /health ") for head in srv.requests), reasons  # it asked, over TLS


async def test_poll_client_https_to_a_plain_http_server_is_an_error_with_one_line() -> None:
    async def bad_request(conn: RawConnection) -> None:
        await conn.reader.read(1)  # a TLS hello is no HTTP request: answer as a plain server does
        await conn.send(answer(b"bad request", status="400 Bad Request", head="Connection: close\r\n"))

    async with RawServer(bad_request) as srv, make_poll_client() as client:
        result = await get(client, srv.url.replace("http://", "https://") + "/metrics")
    assert result.kind is FetchKind.ERROR
    assert result.error and result.error.startswith("cannot connect: ") and "\n" not in result.error


async def test_poll_client_https_keeps_the_cap_the_deadline_truncation_and_the_stale_retry(
    certificate: Certificate,
) -> None:
    async def by_path(conn: RawConnection) -> None:
        head = await conn.request()
        assert head is not None
        if b"/big" in head:  # no length declared: the cap must hold while reading
            await conn.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            with contextlib.suppress(ConnectionError):
                for _ in range(64):
                    await conn.send(b"4000\r\n" + b"x" * 0x4000 + b"\r\n")
            await conn.until_client_closes()
        elif b"/slow" in head:
            await conn.until_client_closes()
        elif b"/short" in head:  # closed mid-body, without TLS's close_notify
            await conn.send(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc")
        else:  # one answer per connection, then the next request is dropped unanswered
            await conn.send(answer(b"answer %d" % conn.index))
            await conn.request()

    async with (
        RawServer(by_path, tls=certificate.server_context()) as srv,
        make_poll_client(ssl_context=certificate.trusted()) as client,
    ):
        big = await get(client, f"{srv.url}/big", max_bytes=100_000)
        started = time.monotonic()
        slow = await get(client, f"{srv.url}/slow", timeout_s=0.3)
        slow_s = time.monotonic() - started
        short = await get(client, f"{srv.url}/short")
        answers = [await get(client, f"{srv.url}/r{i}") for i in range(2)]
    assert big.kind is FetchKind.TOO_LARGE and big.problem() == "body is over the 0.1 MiB cap"
    assert slow.kind is FetchKind.TIMEOUT and slow_s < 2.0
    assert short.kind is FetchKind.TRUNCATED, short.problem()
    assert [r.body for r in answers] == [b"answer 3", b"answer 4"], [r.problem() for r in answers]


async def test_poll_client_close_closes_every_connection_and_fails_what_is_in_flight() -> None:
    stalling: list[bytes] = []
    four_stalled = asyncio.Event()

    async def answer_then_stall(conn: RawConnection) -> None:
        while (head := await conn.request()) is not None:
            if b"/stall" not in head:
                await conn.send(answer(b"ok"))
                continue
            stalling.append(head)
            if len(stalling) == 4:
                four_stalled.set()
            await conn.until_client_closes()
            return

    async with RawServer(answer_then_stall) as srv:
        client: PollClient = make_poll_client()
        await asyncio.gather(*(get(client, f"{srv.url}/{i}") for i in range(3)))
        assert len(srv.connections) == 3
        waiting = asyncio.gather(*(get(client, f"{srv.url}/stall{i}", timeout_s=30) for i in range(4)))
        await asyncio.wait_for(four_stalled.wait(), 5)  # three on the idle connections, one on a new one
        await client.aclose()
        stalled = await asyncio.wait_for(waiting, 5)
        await asyncio.wait_for(asyncio.gather(*(c.closed_by_client.wait() for c in srv.connections)), 5)
    assert [r.problem() for r in stalled] == ["the HTTP client was closed"] * 4
    assert len(srv.connections) == 4


async def test_fleet_poller_through_the_poll_client_reads_every_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    node = start_node("spark1", "mtp2-steady", "nvidia_gpu_exporter.prom", advance_every_s=None)
    try:
        node.vllm.endpoint.api_key = "s3cret-key"
        monkeypatch.setenv("TEST_VLLM_KEY", "s3cret-key")
        text = fleet_config([node], timeout_s=2.0).replace(
            "gpu_memory_utilization", 'api_key_env = "TEST_VLLM_KEY"\ngpu_memory_utilization'
        )
        fleet = parse_config(text, source="test.toml")
        state = FleetState(fleet, readings())
        async with make_poll_client(fleet_origins(fleet)) as client:
            poller = FleetPoller(fleet, client)
            for index in range(2):
                node.vllm.endpoint.index = index
                for observation in await poller.poll_all():
                    state.apply(observation)
        (view,) = state.view(time.monotonic(), window_s=None)
    finally:
        for srv in node.servers():
            srv.stop()
    instance = view.instances[0]
    assert instance.status.state is State.UP, instance.status
    assert instance.served_models == ("RedHatAI/Qwen3.6-35B-A3B-NVFP4",)  # the API key went to /v1/models
    assert instance.rates is not None and instance.rates.generation_tokens_per_s
    assert view.gpu is not None and view.gpu.temperature_c is not None
    assert view.services[0].status.state is State.UP
    metrics = [r for r in node.vllm.endpoint.requests if r.startswith("/metrics")]
    assert metrics and all("name%5B%5D=vllm" in r for r in metrics)
