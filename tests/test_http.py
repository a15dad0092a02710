"""fetch() against real HTTP servers on 127.0.0.1: every failure ends in a result with a reason."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sparktui.model.observations import FetchKind
from sparktui.sources.http import fetch, make_client
from tests.fixture_fleet import Endpoint, Faults, FixtureServer, free_port, scenario_scrapes

CAP = 1024 * 1024


@pytest.fixture
def server() -> Iterator[FixtureServer]:
    srv = FixtureServer(Endpoint(name="vllm", scrapes=scenario_scrapes("mtp2-steady"))).start()
    yield srv
    srv.stop()


async def test_ok_body_status_and_latency(server: FixtureServer) -> None:
    async with make_client() as client:
        result = await fetch(client, f"{server.url}/metrics", timeout_s=2, max_bytes=CAP)
    assert result.ok and result.kind is FetchKind.OK
    assert result.body.decode() == server.endpoint.current_scrape()
    assert result.content_type is not None and result.content_type.startswith("text/plain")
    assert 0 < result.elapsed_s < 2


async def test_refused_connection() -> None:
    async with make_client() as client:
        result = await fetch(client, f"http://127.0.0.1:{free_port()}/health", timeout_s=2, max_bytes=CAP)
    assert result.kind is FetchKind.REFUSED
    assert result.problem() == "connection refused"


async def test_timeout_is_bounded_by_the_deadline(server: FixtureServer) -> None:
    server.endpoint.faults = Faults(delay_s=1.5)
    async with make_client() as client:
        result = await fetch(client, f"{server.url}/health", timeout_s=0.3, max_bytes=CAP)
    assert result.kind is FetchKind.TIMEOUT
    assert result.elapsed_s < 1.0
    assert "0.3 s" in result.problem()


async def test_body_over_the_cap_is_refused(server: FixtureServer) -> None:
    server.endpoint.faults = Faults(metrics="huge")
    async with make_client() as client:
        result = await fetch(client, f"{server.url}/metrics", timeout_s=5, max_bytes=CAP)
    assert result.kind is FetchKind.TOO_LARGE
    assert "1.0 MiB cap" in result.problem()
    assert result.body == b""


async def test_truncated_body_is_reported(server: FixtureServer) -> None:
    server.endpoint.faults = Faults(metrics="truncated")
    async with make_client() as client:
        result = await fetch(client, f"{server.url}/metrics", timeout_s=2, max_bytes=CAP)
    assert result.kind is FetchKind.TRUNCATED
    assert "truncated" in result.problem()


async def test_http_error_status_is_an_answer_not_ok(server: FixtureServer) -> None:
    server.endpoint.faults = Faults(health_status=503)
    async with make_client() as client:
        result = await fetch(client, f"{server.url}/health", timeout_s=2, max_bytes=CAP)
    assert result.answered and not result.ok
    assert result.status == 503
    assert result.problem() == "HTTP 503"


async def test_unresolvable_host_is_an_error_with_a_reason() -> None:
    async with make_client() as client:
        result = await fetch(client, "http://no-such-host.invalid/health", timeout_s=2, max_bytes=CAP)
    assert result.kind in (FetchKind.ERROR, FetchKind.TIMEOUT)
    assert result.error
