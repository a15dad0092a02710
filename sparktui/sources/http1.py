"""A lean HTTP/1.1 GET client for ``http://`` and ``https://`` URLs, on asyncio protocols and transports.

The poll path makes a few dozen small GETs a second to a fixed set of origins. Per kept-alive GET,
httpx spends about 10-18 times this client's CPU and aiohttp over twice (``benchmarks/bench_http.py``,
http and https); this client does only what polling needs:

- TLS through asyncio's own (``create_connection(ssl=...)``): the certificate and the host name are
  verified against the system's CAs unless the caller passes an ``ssl.SSLContext`` of its own;
- keep-alive pools per origin (up to ``MAX_IDLE_PER_ORIGIN`` idle connections, reused last-in
  first-out; a burst above that opens extra connections that close after their answer);
- request bytes built once per URL and headers;
- the whole answer parsed in the protocol's callbacks, one future per request: status line, headers
  (names case-insensitive), then a body framed by Content-Length, chunked transfer-encoding, or the
  connection's end (HTTP/1.0, or no length given);
- a total deadline per request (connect, headers and body), a body-size cap (a declared length over
  it fails at once, a body that grows past it fails and drops the connection) and a header-size cap;
- a reused connection that fails before any byte of the answer (the server closed it while it sat
  idle) is retried once on a fresh one; a cancelled or failed request never returns its connection
  to the pool.

No proxies, cookies, redirects or compression (no ``Accept-Encoding`` is sent, and a compressed
answer is a protocol error). Failures raise the ``HttpError`` subclasses below, or ``TimeoutError``.
"""

from __future__ import annotations

import asyncio
import base64
import ssl
from collections.abc import Mapping
from urllib.parse import quote, unquote, urlsplit

MAX_IDLE_PER_ORIGIN = 4
MAX_HEAD_BYTES = 64 * 1024  # status line and headers (and each chunk-size line or trailer block)
_TARGETS_KEPT = 4096  # prepared requests cached (the poll path asks the same few URLs forever)
_SAFE_TARGET = "!#$%&'()*+,/:;=?@[]~"  # kept as is when a request target is percent-encoded

# Parser states of a connection.
_IDLE, _HEAD, _LENGTH, _CHUNK_SIZE, _CHUNK_DATA, _CHUNK_END, _TRAILER, _UNTIL_CLOSE = range(8)
_HEX = frozenset(b"0123456789abcdefABCDEF")


class HttpError(Exception):
    """A GET that did not end in a whole answer; ``str()`` is one line for the operator."""


class InvalidURL(HttpError):
    pass


class ConnectFailed(HttpError):
    def __init__(self, cause: OSError) -> None:
        if isinstance(cause, ssl.SSLCertVerificationError):
            super().__init__(f"TLS certificate not trusted: {cause.verify_message or cause.reason}")
        else:
            text = str(cause).strip().splitlines()
            super().__init__(text[0] if text else type(cause).__name__)
        # A name resolving to several addresses fails with one OSError quoting each refusal.
        self.refused = isinstance(cause, ConnectionRefusedError) or "refused" in str(cause).lower()


class TooLarge(HttpError):
    def __init__(self, cap: int, status: int, declared: int | None = None) -> None:
        super().__init__(f"body over the {cap}-byte cap")
        self.cap = cap
        self.status = status
        self.declared = declared


class Truncated(HttpError):
    pass


class ProtocolError(HttpError):
    pass


class ConnectionBroken(HttpError):
    pass


class NoAnswer(ConnectionBroken):
    """The connection ended before a single byte of the answer arrived."""


class Response:
    """A whole answer. ``headers`` has lower-case names; repeated headers are joined with ", "."""

    __slots__ = ("body", "headers", "status")

    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body


class _Pool:
    """Idle keep-alive connections to one origin, newest last."""

    __slots__ = ("idle", "limit")

    def __init__(self, limit: int) -> None:
        self.idle: list[_Connection] = []
        self.limit = limit

    def take(self) -> _Connection | None:
        idle = self.idle
        while idle:
            conn = idle.pop()
            if conn.usable():
                return conn
            conn.abort()
        return None

    def put(self, conn: _Connection) -> None:
        if len(self.idle) < self.limit and conn.usable():
            self.idle.append(conn)
        else:
            conn.close()


class _Target:
    """One prepared GET: where it goes (over TLS or not) and the exact bytes that ask for it."""

    __slots__ = ("host", "pool", "port", "request", "tls")

    def __init__(self, host: str, port: int, tls: bool, request: bytes, pool: _Pool) -> None:
        self.host = host
        self.port = port
        self.tls = tls
        self.request = request
        self.pool = pool


class _Connection(asyncio.Protocol):
    """One TCP connection, one request at a time; the response is parsed as its bytes arrive."""

    def __init__(self, pool: _Pool, registry: set[_Connection], max_head: int) -> None:
        self.pool = pool
        self.registry = registry
        self.max_head = max_head
        self.transport: asyncio.Transport | None = None
        self.open = False
        self.reusable = False
        self.waiter: asyncio.Future[Response] | None = None
        self.state = _IDLE
        self.buf = bytearray()
        self.scan_from = 0
        self.received = False
        self.max_bytes = 0
        self.status = 0
        self.headers: dict[str, str] = {}
        self.remaining = 0
        self.parts: list[bytes] = []
        self.body_size = 0

    # --- asyncio.Protocol ---

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.open = True
        self.registry.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.open = False
        self.reusable = False
        self.registry.discard(self)
        if self in self.pool.idle:
            self.pool.idle.remove(self)
        state = self.state
        if state == _IDLE:
            return
        if state == _UNTIL_CLOSE and exc is None:
            self._finish(bytes(self.buf))
        elif not self.received:
            reason = f": {_one_line(exc)}" if exc is not None else ""
            self._fail(NoAnswer(f"the server closed the connection without answering{reason}"))
        elif exc is not None:
            self._fail(ConnectionBroken(f"connection lost mid-answer: {_one_line(exc)}"))
        elif state == _HEAD:
            self._fail(ProtocolError("the connection closed in the middle of the response headers"))
        else:
            self._fail(Truncated("the connection closed mid-body"))

    def data_received(self, data: bytes) -> None:
        if self.state == _IDLE:
            # Bytes nobody asked for (a late 408, junk after a body): this connection cannot be trusted.
            self.abort()
            return
        self.received = True
        self.buf += data
        try:
            self._advance()
        except HttpError as exc:
            self._fail(exc)
        except Exception as exc:  # a parser bug must end this request now, not at its deadline
            self._fail(ProtocolError(f"unreadable answer: {_one_line(exc)}"))

    # --- the client's side ---

    def usable(self) -> bool:
        return self.open and self.transport is not None and not self.transport.is_closing()

    def request(self, request: bytes, max_bytes: int) -> asyncio.Future[Response]:
        assert self.transport is not None
        waiter: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
        self.waiter = waiter
        self.state = _HEAD
        self.scan_from = 0
        self.received = False
        self.reusable = False
        self.max_bytes = max_bytes
        self.transport.write(request)
        return waiter

    def close(self) -> None:
        self.reusable = False
        if self.transport is not None:
            self.transport.close()

    def abort(self) -> None:
        self.reusable = False
        self.state = _IDLE
        if self.transport is not None:
            self.transport.abort()

    # --- parsing ---

    def _advance(self) -> None:
        """Read what the buffer holds, one framing step at a time, until a step needs more bytes or the
        answer is complete. Each step answers whether another may follow at once."""
        while True:
            state = self.state
            if state == _HEAD:
                more = self._read_head()
            elif state == _LENGTH:
                more = self._read_sized_body()
            elif state == _CHUNK_SIZE:
                more = self._read_chunk_size()
            elif state == _CHUNK_DATA:
                more = self._read_chunk_data()
            elif state == _CHUNK_END:
                more = self._read_chunk_end()
            elif state == _TRAILER:
                more = self._read_trailers()
            elif state == _UNTIL_CLOSE:
                if len(self.buf) > self.max_bytes:
                    raise TooLarge(self.max_bytes, self.status)
                return
            else:  # _IDLE: the answer is already complete or failed
                return
            if not more:
                return

    def _read_head(self) -> bool:
        """The status line and headers, up to the blank line that ends them."""
        buf = self.buf
        end = buf.find(b"\r\n\r\n", self.scan_from)
        if end < 0:
            # A head ended by bare LFs would never match: say so now, not at the deadline.
            if b"\n\n" in buf or b"\n\r\n" in buf:
                raise ProtocolError("header lines end in a bare LF, not CRLF")
            if len(buf) > self.max_head:
                raise ProtocolError(f"response headers are over the {self.max_head}-byte cap")
            self.scan_from = max(0, len(buf) - 3)
            return False
        if end > self.max_head:
            raise ProtocolError(f"response headers are over the {self.max_head}-byte cap")
        head = bytes(buf[:end])
        del buf[: end + 4]
        self.scan_from = 0
        self._on_head(head)
        return True

    def _read_sized_body(self) -> bool:
        """A body of the Content-Length the head declared, once all of it is here."""
        buf = self.buf
        size = self.remaining
        have = len(buf)
        if have < size:
            return False
        body = bytes(buf) if have == size else bytes(buf[:size])
        del buf[:size]
        self._finish(body)
        return False

    def _read_chunk_size(self) -> bool:
        """A chunk's size line: the next chunk's length, or 0 for the trailers."""
        buf = self.buf
        end = buf.find(b"\r\n")
        if end < 0:
            if len(buf) > self.max_head:
                raise ProtocolError("chunk-size line is too long")
            return False
        digits = bytes(buf[:end]).split(b";", 1)[0].strip()
        del buf[: end + 2]
        if not digits or not _HEX.issuperset(digits):
            raise ProtocolError(f"bad chunk size {digits[:20]!r}")
        size = int(digits, 16)
        if size == 0:
            self.state = _TRAILER
            self.scan_from = 0
        else:
            if self.body_size + size > self.max_bytes:
                raise TooLarge(self.max_bytes, self.status)
            self.remaining = size
            self.state = _CHUNK_DATA
        return True

    def _read_chunk_data(self) -> bool:
        """As much of the current chunk as has arrived."""
        buf = self.buf
        take = min(self.remaining, len(buf))
        if not take:
            return False
        self.parts.append(bytes(buf[:take]))
        del buf[:take]
        self.body_size += take
        self.remaining -= take
        if not self.remaining:
            self.state = _CHUNK_END
        return True

    def _read_chunk_end(self) -> bool:
        """The CRLF after a chunk's data."""
        buf = self.buf
        if len(buf) < 2:
            return False
        if buf[:2] != b"\r\n":
            raise ProtocolError("chunk data does not end in CRLF")
        del buf[:2]
        self.state = _CHUNK_SIZE
        return True

    def _read_trailers(self) -> bool:
        """The trailers after the last chunk (read past, not kept); then the body is complete."""
        buf = self.buf
        if buf[:2] == b"\r\n":
            del buf[:2]
        else:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > self.max_head:
                    raise ProtocolError("chunked trailers are too long")
                return False
            del buf[: end + 4]  # trailers are read past, not kept
        body = b"".join(self.parts)
        self.parts = []
        self._finish(body)
        return False

    def _on_head(self, head: bytes) -> None:
        if b"\n" in head.replace(b"\r\n", b""):
            raise ProtocolError("header lines end in a bare LF, not CRLF")
        lines = head.decode("latin-1").split("\r\n")
        version, _, rest = lines[0].partition(" ")
        code = rest[:3]
        if not version.startswith("HTTP/1.") or len(code) != 3 or not code.isdigit() or rest[3:4] not in ("", " "):
            raise ProtocolError(f"not an HTTP/1 answer: {lines[0][:60]!r}")
        status = int(code)
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep or not name or name[0] in " \t" or name[-1] in " \t":
                raise ProtocolError(f"malformed header line {line[:60]!r}")
            key = name.lower()
            value = value.strip(" \t")
            found = headers.get(key)
            headers[key] = value if found is None else f"{found}, {value}"
        if 100 <= status < 200:
            if status == 101:
                raise ProtocolError("the server switched protocols, which was not asked for")
            return  # an interim answer (100 Continue, 103 Early Hints): the real one follows
        self.status = status
        self.headers = headers
        connection = headers.get("connection", "").lower()
        if version == "HTTP/1.1":
            self.reusable = "close" not in connection
        else:
            self.reusable = "keep-alive" in connection
        coding = headers.get("content-encoding")
        if coding is not None and coding.lower() != "identity":
            raise ProtocolError(f"the answer is compressed ({coding}), which was not asked for")
        if status in (204, 304):
            self._finish(b"")
            return
        framing = headers.get("transfer-encoding")
        declared = headers.get("content-length")
        if framing is not None:
            if framing.lower().rsplit(",", 1)[-1].strip() == "chunked":
                self.state = _CHUNK_SIZE
                self.parts = []
                self.body_size = 0
            else:
                self.state = _UNTIL_CLOSE
                self.reusable = False
        elif declared is not None:
            size = _content_length(declared)
            if size > self.max_bytes:
                raise TooLarge(self.max_bytes, self.status, declared=size)
            if size == 0:
                self._finish(b"")
            else:
                self.remaining = size
                self.state = _LENGTH
        else:
            self.state = _UNTIL_CLOSE
            self.reusable = False

    def _finish(self, body: bytes) -> None:
        self.state = _IDLE
        if self.buf:  # bytes past the end of the answer: nothing more may be read on this connection
            self.reusable = False
            self.buf.clear()
        waiter = self.waiter
        self.waiter = None
        if waiter is not None and not waiter.done():
            waiter.set_result(Response(self.status, self.headers, body))

    def shut(self, exc: HttpError) -> None:
        """Drop the connection; a request waiting on it fails with ``exc``."""
        self._fail(exc)

    def _fail(self, exc: HttpError) -> None:
        waiter = self.waiter
        self.waiter = None
        self.abort()
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)


def _content_length(value: str) -> int:
    if value.isdigit() and value.isascii():
        return int(value)
    # Repeated identical Content-Length headers arrive joined ("10, 10"): one value, said twice.
    values = {v.strip() for v in value.split(",")}
    if len(values) != 1:
        raise ProtocolError(f"conflicting Content-Length {value[:40]!r}")
    (text,) = values
    if not text.isdigit() or not text.isascii():
        raise ProtocolError(f"bad Content-Length {value[:40]!r}")
    return int(text)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__


class Http1Client:
    """GETs over keep-alive HTTP/1.1 connections, one small pool per origin. Close with ``aclose()``."""

    def __init__(
        self,
        *,
        user_agent: str = "sparktui",
        max_idle_per_origin: int = MAX_IDLE_PER_ORIGIN,
        max_head_bytes: int = MAX_HEAD_BYTES,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.user_agent = user_agent
        self.max_idle_per_origin = max_idle_per_origin
        self.max_head_bytes = max_head_bytes
        # Made on the first https:// GET when not given: loading the system's CAs takes a few ms.
        self._ssl_context = ssl_context
        self._pools: dict[tuple[bool, str, int], _Pool] = {}
        self._targets: dict[str | tuple[str, tuple[tuple[str, str], ...]], _Target] = {}
        self._connections: set[_Connection] = set()
        self._closed = False

    async def __aenter__(self) -> Http1Client:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def get(
        self, url: str, *, timeout_s: float, max_bytes: int, headers: Mapping[str, str] | None = None
    ) -> Response:
        """GET ``url``; the whole exchange must end within ``timeout_s`` (else ``TimeoutError``)."""
        if self._closed:
            raise RuntimeError("the HTTP client is closed")
        key: str | tuple[str, tuple[tuple[str, str], ...]] = url if not headers else (url, tuple(headers.items()))
        target = self._targets.get(key)
        if target is None:
            target = self._prepare(url, headers)
            if len(self._targets) >= _TARGETS_KEPT:
                self._targets.clear()
            self._targets[key] = target
        async with asyncio.timeout(timeout_s):
            conn = target.pool.take()
            if conn is not None:
                try:
                    return await self._exchange(conn, target, max_bytes)
                except NoAnswer:
                    pass  # the server dropped it while it sat idle: once more, on a new connection
            conn = await self._connect(target)
            return await self._exchange(conn, target, max_bytes)

    async def aclose(self) -> None:
        """Close every connection, idle or busy (a request in flight fails)."""
        self._closed = True
        for pool in self._pools.values():
            pool.idle.clear()
        for conn in list(self._connections):
            conn.shut(ConnectionBroken("the HTTP client was closed"))
        self._connections.clear()
        await asyncio.sleep(0)  # the transports close their sockets on the next loop iteration

    async def _exchange(self, conn: _Connection, target: _Target, max_bytes: int) -> Response:
        try:
            response = await conn.request(target.request, max_bytes)
        except BaseException:  # failed, timed out or cancelled: the connection is in an unknown state
            conn.abort()
            raise
        if conn.reusable:
            target.pool.put(conn)
        else:
            conn.close()
        return response

    async def _connect(self, target: _Target) -> _Connection:
        conn = _Connection(target.pool, self._connections, self.max_head_bytes)
        loop = asyncio.get_running_loop()
        try:
            if target.tls:
                # The request's deadline bounds the handshake too (well inside asyncio's own 60 s).
                await loop.create_connection(
                    lambda: conn, target.host, target.port, ssl=self.ssl_context(), server_hostname=target.host
                )
            else:
                await loop.create_connection(lambda: conn, target.host, target.port)
        except OSError as exc:  # ssl.SSLError is one
            raise ConnectFailed(exc) from exc
        if self._closed:  # closed while connecting
            conn.abort()
            raise RuntimeError("the HTTP client is closed")
        return conn

    def ssl_context(self) -> ssl.SSLContext:
        """The context every TLS connection uses: the caller's, else the system's CAs, verification on."""
        if self._ssl_context is None:
            self._ssl_context = ssl.create_default_context()
        return self._ssl_context

    def _prepare(self, url: str, headers: Mapping[str, str] | None) -> _Target:
        try:
            parts = urlsplit(url)
            scheme = parts.scheme.lower()
            default_port = 443 if scheme == "https" else 80
            port = parts.port or default_port
        except ValueError as exc:
            raise InvalidURL(f"{url[:200]}: {exc}") from None
        host = parts.hostname
        if scheme not in ("http", "https") or not host:
            raise InvalidURL(f"{url[:200]}: only http(s)://host[:port]/path URLs are supported here")
        path = parts.path or "/"
        target = f"{path}?{parts.query}" if parts.query else path
        if not target.isascii() or any(c <= " " or c == "\x7f" for c in target):
            target = quote(target, safe=_SAFE_TARGET)
        shown_host = f"[{host}]" if ":" in host else host
        host_header = shown_host if port == default_port else f"{shown_host}:{port}"
        fields = {
            "host": ("Host", host_header),
            "user-agent": ("User-Agent", self.user_agent),
            "accept": ("Accept", "*/*"),
        }
        if parts.username is not None:
            credentials = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
            fields["authorization"] = ("Authorization", "Basic " + base64.b64encode(credentials).decode("ascii"))
        for name, value in (headers or {}).items():
            if not name.isascii() or any(c in name for c in ":\r\n ") or any(c in value for c in "\r\n\0"):
                raise InvalidURL(f"bad request header {name[:40]!r}")
            fields[name.lower()] = (name, value)
        lines = [f"GET {target} HTTP/1.1", *(f"{name}: {value}" for name, value in fields.values()), "", ""]
        try:
            request = "\r\n".join(lines).encode("latin-1")
        except UnicodeEncodeError:
            raise InvalidURL(f"{url[:200]}: a request header is not Latin-1 text") from None
        tls = scheme == "https"
        origin = (tls, host, port)
        pool = self._pools.get(origin)
        if pool is None:
            pool = self._pools[origin] = _Pool(self.max_idle_per_origin)
        return _Target(host, port, tls, request, pool)
