"""A small HTTP/1.1 server on asyncio for the demo's endpoints: keep-alive, Content-Length bodies,
chunked streaming, and a switch that closes the listening socket (a loading vLLM refuses
connections) and opens it again on the same port.

The demo needs hundreds of these on one loop (64 nodes x 4 endpoints), so each is a plain
``asyncio.start_server`` with no framework.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlsplit

MAX_HEADER_BYTES = 16 * 1024
MAX_BODY_BYTES = 1024 * 1024
REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    413: "Payload Too Large",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


@dataclass(slots=True)
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes

    def json(self) -> object:
        return json.loads(self.body or b"null")


@dataclass(slots=True)
class Response:
    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    stream: AsyncIterator[bytes] | None = None  # sent chunked when set
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of_json(cls, payload: object, status: int = 200) -> Response:
        return cls(status=status, body=json.dumps(payload).encode())


Handler = Callable[[Request], Awaitable[Response]]


LOOPBACK = "127.0.0.1"


class HttpServer:
    """Serves ``handler`` on ``host`` (127.0.0.1 unless told); ``port`` is fixed after the first ``start()``.

    A ``host`` and ``port`` asked for (an engine's default port on a loopback address of the node's
    own) are where the first start tries; where that cannot be bound (the port is taken, or the address
    is not this machine's), it takes any port there, then any port on 127.0.0.1: the demo still runs,
    and its config says where each server is."""

    def __init__(
        self,
        handler: Handler,
        host: str = LOOPBACK,
        port: int = 0,
        on_served: Callable[[Request, Response, float], None] | None = None,
    ) -> None:
        self.handler = handler
        self.host = host
        self.port = port
        self.on_served = on_served
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.StreamWriter] = set()
        self._fixed = False  # bound once: later starts take the same host and port

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def listening(self) -> bool:
        return self._server is not None

    async def start(self) -> None:
        if self._server is not None:
            return
        if self._fixed:
            self._server = await self._bind(self.host, self.port)
        else:
            self._server = await self._first_bind()
            self._fixed = True
        self.host, self.port = self._server.sockets[0].getsockname()[:2]

    async def _bind(self, host: str, port: int) -> asyncio.Server:
        return await asyncio.start_server(self._serve, host, port, reuse_address=True, limit=MAX_HEADER_BYTES)

    async def _first_bind(self) -> asyncio.Server:
        tries = [(self.host, self.port), (self.host, 0), (LOOPBACK, 0)]
        tries = [t for i, t in enumerate(tries) if t not in tries[:i]]
        for host, port in tries[:-1]:
            try:
                return await self._bind(host, port)
            except OSError:
                continue
        return await self._bind(*tries[-1])

    async def stop(self) -> None:
        """Close the listening socket and every open connection (clients see a refusal)."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for writer in list(self._connections):
            writer.close()
        if server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 2.0)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._connections.add(writer)
        try:
            while True:
                request = await self._read_request(reader)
                if request is None:
                    return
                started = time.perf_counter()
                try:
                    response = await self.handler(request)
                except Exception as exc:  # a bug in a handler answers 500, the server goes on
                    response = Response.of_json({"error": f"{type(exc).__name__}: {exc}"}, status=500)
                keep_alive = request.headers.get("connection", "").lower() != "close"
                await self._write(writer, response, keep_alive)
                if self.on_served is not None:
                    self.on_served(request, response, time.perf_counter() - started)
                if not keep_alive or response.stream is not None:
                    return
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            return
        except asyncio.CancelledError:
            # Shut down while a request hangs (a wedged engine's): end quietly. Python 3.11's stream
            # server logs "Exception in callback" for a connection task that ends cancelled.
            return
        finally:
            self._connections.discard(writer)
            writer.close()

    async def _read_request(self, reader: asyncio.StreamReader) -> Request | None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return None
        lines = head.decode("latin-1").split("\r\n")
        method, target, _version = lines[0].split(" ", 2)
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if ":" in line:
                key, _, value = line.partition(":")
                headers[key.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0") or 0)
        if length > MAX_BODY_BYTES:
            raise ValueError("body too large")
        body = await reader.readexactly(length) if length else b""
        url = urlsplit(target)
        return Request(method.upper(), url.path, parse_qs(url.query), headers, body)

    async def _write(self, writer: asyncio.StreamWriter, response: Response, keep_alive: bool) -> None:
        reason = REASONS.get(response.status, "OK")
        head = [
            f"HTTP/1.1 {response.status} {reason}",
            f"Content-Type: {response.content_type}",
            f"Connection: {'keep-alive' if keep_alive and response.stream is None else 'close'}",
        ]
        head.extend(f"{k}: {v}" for k, v in response.headers.items())
        if response.stream is None:
            head.append(f"Content-Length: {len(response.body)}")
            writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + response.body)
            await writer.drain()
            return
        head.append("Transfer-Encoding: chunked")
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
        async for chunk in response.stream:
            if chunk:
                writer.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()
