"""HTTP GET with a total deadline and a body-size cap, as plain ``HttpResult`` data.

Every failure ends in an ``HttpResult`` with a one-line reason; nothing raises to the caller (except
cancellation). ``fetch`` takes either client:

- ``make_poll_client()``: the poll path's client, for ``http://`` and ``https://`` alike: sparktui's own
  HTTP/1.1 client (``sparktui.sources.http1``; about a tenth of httpx's CPU per kept-alive GET or less,
  and under half of aiohttp's: ``benchmarks/bench_http.py``).
- ``make_client()``: an httpx client, for the callers that use httpx's API themselves (the
  Prometheus source, notifiers, the action runner).
"""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from sparktui.model.numbers import is_digits
from sparktui.model.observations import FetchKind, HttpResult
from sparktui.model.safe_text import LABEL_LIMIT, safe_text
from sparktui.sources import http1
from sparktui.sources._httpx import httpx

USER_AGENT = "sparktui"


def tls_context(ca_file: Path | None = None) -> ssl.SSLContext:
    """How every https request is verified: against the system's CAs (OpenSSL's default paths, which
    ``SSL_CERT_FILE`` and ``SSL_CERT_DIR`` override) and the CAs in ``ca_file`` (the config's private
    CA), the certificate and the host name both. One place for both clients: httpx alone would take
    certifi's bundle and, with ``trust_env=False``, ignore ``SSL_CERT_FILE``."""
    context = ssl.create_default_context()
    if ca_file is not None:
        context.load_verify_locations(cafile=ca_file)
    return context


def make_client(
    origins: Iterable[str] = (),
    max_connections: int = 64,
    *,
    ssl_context: ssl.SSLContext | None = None,
    ca_file: Path | None = None,
) -> httpx.AsyncClient:
    """An httpx client: keep-alive connections, no global timeout (each call sets one). For callers
    that use httpx's API; the poll path takes ``make_poll_client``. TLS is verified as ``tls_context``
    says (with ``ca_file``), or through ``ssl_context`` when given.

    Each origin (``scheme://host:port``) listed gets a connection pool of its own: httpcore assigns
    requests to connections by scanning its whole pool, so one pool shared by a large fleet costs
    O(requests x connections) per request (``benchmarks/bench_demo.py`` measured 85 % of the time in
    that scan at 64 nodes); small per-origin pools keep every poll O(1).
    """
    per_origin = httpx.Limits(max_connections=4, max_keepalive_connections=4)
    verify = tls_context(ca_file) if ssl_context is None else ssl_context
    mounts: dict[str, httpx.AsyncBaseTransport | None] = {
        origin: httpx.AsyncHTTPTransport(verify=verify, limits=per_origin, trust_env=False) for origin in set(origins)
    }
    return httpx.AsyncClient(
        verify=verify,
        headers={"User-Agent": USER_AGENT},
        limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections),
        follow_redirects=False,
        timeout=None,
        trust_env=False,
        mounts=mounts,
    )


class PollClient:
    """The poll path's client: ``http://`` and ``https://`` through ``http1.Http1Client``.

    Use as an async context manager (or call ``aclose()``). Connections are pooled per origin: up to
    ``http1.MAX_IDLE_PER_ORIGIN`` idle keep-alive connections each. TLS is verified as ``tls_context``
    says (with ``ca_file``), or through ``ssl_context`` when given.
    """

    def __init__(self, *, ssl_context: ssl.SSLContext | None = None, ca_file: Path | None = None) -> None:
        context = ssl_context if ssl_context is not None or ca_file is None else tls_context(ca_file)
        self.http1 = http1.Http1Client(user_agent=USER_AGENT, ssl_context=context)

    async def __aenter__(self) -> PollClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self.http1.aclose()


def make_poll_client(
    origins: Iterable[str] = (),
    max_connections: int = 64,
    *,
    ssl_context: ssl.SSLContext | None = None,
    ca_file: Path | None = None,
) -> PollClient:
    """The client for polling ``origins`` (``origin_of`` each URL). Any origin works, each pooled on first
    use, and there is no cap on connections: the arguments keep ``make_client``'s signature."""
    del origins, max_connections
    return PollClient(ssl_context=ssl_context, ca_file=ca_file)


# What ``fetch`` (and the collectors, which only fetch) accept.
FetchClient = PollClient | httpx.AsyncClient


def origin_of(url: str) -> str:
    """``http://host:port`` of a URL (the default port made explicit), for ``make_client`` and ``make_poll_client``."""
    parsed = httpx.URL(url)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    host = f"[{parsed.host}]" if ":" in parsed.host else parsed.host
    return f"{parsed.scheme}://{host}:{port}"


def _mib(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MiB"


def _refused(exc: BaseException) -> bool:
    """Whether a connect error was a refusal (httpx wraps the OSError a few causes deep)."""
    seen: BaseException | None = exc
    for _ in range(6):
        if seen is None:
            return False
        if isinstance(seen, ConnectionRefusedError) or "refused" in str(seen).lower():
            return True
        if isinstance(seen, OSError) and getattr(seen, "errno", None) == 111:
            return True
        if isinstance(seen, BaseExceptionGroup):
            return any(_refused(inner) for inner in seen.exceptions)
        seen = seen.__cause__ or seen.__context__
    return False


async def fetch(
    client: FetchClient,
    url: str | httpx.URL,
    *,
    timeout_s: float,
    max_bytes: int,
    headers: Mapping[str, str] | None = None,
) -> HttpResult:
    """GET ``url``; the whole exchange (connect, headers, body) must finish within ``timeout_s``."""
    if isinstance(client, PollClient):
        return await _fetch_http1(client.http1, str(url), timeout_s, max_bytes, headers)
    return await _exchange(client, "GET", url, timeout_s=timeout_s, max_bytes=max_bytes, headers=headers)


async def post_json(
    client: httpx.AsyncClient,
    url: str,
    payload: Mapping[str, object],
    *,
    timeout_s: float,
    max_bytes: int,
    headers: Mapping[str, str] | None = None,
) -> HttpResult:
    """POST ``payload`` as JSON to ``url``, under the same deadline, cap and one-line reasons as ``fetch``."""
    body = json.dumps(payload).encode()
    sent = {"Content-Type": "application/json", **(headers or {})}
    return await _exchange(client, "POST", url, timeout_s=timeout_s, max_bytes=max_bytes, headers=sent, content=body)


async def _exchange(
    client: httpx.AsyncClient,
    method: str,
    url: str | httpx.URL,
    *,
    timeout_s: float,
    max_bytes: int,
    headers: Mapping[str, str] | None = None,
    content: bytes | None = None,
) -> HttpResult:
    started = time.perf_counter()
    shown = str(url)

    def result(
        kind: FetchKind,
        error: str | None = None,
        *,
        status: int | None = None,
        body: bytes = b"",
        content_type: str | None = None,
        location: str | None = None,
    ) -> HttpResult:
        return HttpResult(
            url=shown,
            kind=kind,
            status=status,
            body=body,
            elapsed_s=time.perf_counter() - started,
            error=None if error is None else safe_text(error),  # may quote the server
            content_type=None if content_type is None else safe_text(content_type, LABEL_LIMIT),
            location=location,
        )

    per_op = httpx.Timeout(timeout_s)
    try:
        async with asyncio.timeout(timeout_s):
            async with client.stream(method, url, headers=headers, timeout=per_op, content=content) as response:
                declared = response.headers.get("content-length")
                if declared is not None and is_digits(declared) and int(declared) > max_bytes:
                    return result(
                        FetchKind.TOO_LARGE,
                        f"body of {_mib(int(declared))} is over the {_mib(max_bytes)} cap",
                        status=response.status_code,
                    )
                chunks: list[bytes] = []
                size = 0
                async for chunk in response.aiter_bytes():
                    size += len(chunk)
                    if size > max_bytes:
                        return result(
                            FetchKind.TOO_LARGE,
                            f"body is over the {_mib(max_bytes)} cap",
                            status=response.status_code,
                        )
                    chunks.append(chunk)
                return result(
                    FetchKind.OK,
                    status=response.status_code,
                    body=b"".join(chunks),
                    content_type=response.headers.get("content-type"),
                    location=redirect_target(response.status_code, response.headers),
                )
    except (TimeoutError, httpx.TimeoutException):
        return result(FetchKind.TIMEOUT, f"no answer within {timeout_s:g} s")
    except httpx.ConnectError as exc:
        if _refused(exc):
            return result(FetchKind.REFUSED, "connection refused")
        return result(FetchKind.ERROR, f"cannot connect: {_one_line(exc)}")
    except httpx.RemoteProtocolError as exc:
        if "incomplete" in str(exc) or "without sending complete message body" in str(exc):
            return result(FetchKind.TRUNCATED, "body truncated: the connection closed mid-body")
        return result(FetchKind.ERROR, f"malformed HTTP response: {_one_line(exc)}")
    except httpx.DecodingError as exc:
        return result(FetchKind.ERROR, f"cannot decode the body: {_one_line(exc)}")
    except (httpx.HTTPError, OSError) as exc:
        return result(FetchKind.ERROR, _one_line(exc) or type(exc).__name__)


async def _fetch_http1(
    client: http1.Http1Client, url: str, timeout_s: float, max_bytes: int, headers: Mapping[str, str] | None
) -> HttpResult:
    started = time.perf_counter()
    try:
        response = await client.get(url, timeout_s=timeout_s, max_bytes=max_bytes, headers=headers)
    except TimeoutError:
        kind, error = FetchKind.TIMEOUT, f"no answer within {timeout_s:g} s"
    except http1.ConnectFailed as exc:
        kind, error = (
            (FetchKind.REFUSED, "connection refused") if exc.refused else (FetchKind.ERROR, f"cannot connect: {exc}")
        )
    except http1.TooLarge as exc:
        if exc.declared is not None:
            error = f"body of {_mib(exc.declared)} is over the {_mib(max_bytes)} cap"
        else:
            error = f"body is over the {_mib(max_bytes)} cap"
        return HttpResult(
            url=url, kind=FetchKind.TOO_LARGE, status=exc.status, elapsed_s=time.perf_counter() - started, error=error
        )
    except http1.Truncated:
        kind, error = FetchKind.TRUNCATED, "body truncated: the connection closed mid-body"
    except http1.ProtocolError as exc:
        kind, error = FetchKind.ERROR, f"malformed HTTP response: {exc}"
    except http1.InvalidURL as exc:
        kind, error = FetchKind.ERROR, f"bad URL: {exc}"
    except (http1.HttpError, OSError) as exc:
        kind, error = FetchKind.ERROR, _one_line(exc)
    else:
        return HttpResult(
            url=url,
            kind=FetchKind.OK,
            status=response.status,
            body=response.body,
            elapsed_s=time.perf_counter() - started,
            content_type=safe_text(response.headers.get("content-type") or "", LABEL_LIMIT) or None,
            location=redirect_target(response.status, response.headers),
        )
    # The error may quote the server (a malformed status line, a header): made safe to print here.
    return HttpResult(url=url, kind=kind, elapsed_s=time.perf_counter() - started, error=safe_text(error))


def redirect_target(status: int, headers: Mapping[str, str]) -> str | None:
    """Where a redirect points, made safe to print (a remote's text); None for any other answer.
    Redirects are not followed: the next hop may be another host (a login page, a proxy), and the
    node's API key (or a notifier's token) would go with it. Both clients' answers and the notifiers
    say it through this one function."""
    if not 300 <= status < 400:
        return None
    return safe_text(headers.get("location") or "", LABEL_LIMIT) or "nowhere (no Location header)"


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__
