"""Collectors against real HTTP servers on 127.0.0.1: every fault ends in a status with a reason."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from sparktui.config import parse_config
from sparktui.engines import readings
from sparktui.model.fleet import FleetState, NodeView
from sparktui.model.observations import NodeObservation
from sparktui.model.specs import FleetSpec
from sparktui.model.status import State
from sparktui.sources import poller
from sparktui.sources.http import make_client
from sparktui.sources.poller import FleetPoller
from tests.support.fixture_fleet import (
    Faults,
    FixtureNode,
    fleet_config,
    free_port,
    start_node,
)
from tests.support.wait import wait_until


@pytest.fixture
def node() -> Iterator[FixtureNode]:
    started = start_node("spark1", "mtp2-steady", "nvidia_gpu_exporter.prom", advance_every_s=None)
    yield started
    for server in started.servers():
        server.stop()


def _fleet(node: FixtureNode, **overrides: str) -> FleetSpec:
    text = fleet_config([node], timeout_s=0.5)
    for old, new in overrides.items():
        text = text.replace(old, new)
    return parse_config(text, source="test.toml")


async def _poll(fleet: FleetSpec, node: FixtureNode, polls: int = 2) -> NodeView:
    state = FleetState(fleet, readings())
    async with make_client() as client:
        poller = FleetPoller(fleet, client)
        for index in range(polls):
            node.vllm.endpoint.index = index
            for obs in await poller.poll_all():
                state.apply(obs)
    (view,) = state.view(time.monotonic(), window_s=None)
    return view


async def test_healthy_node_shows_every_number(node: FixtureNode) -> None:
    view = await _poll(_fleet(node), node)
    instance = view.instances[0]
    assert instance.status.state is State.UP, instance.status
    assert instance.version == "0.33.0"
    assert instance.served_models == ("RedHatAI/Qwen3.6-35B-A3B-NVFP4",)
    assert instance.max_model_len == 131072
    assert instance.rates is not None and instance.rates.generation_tokens_per_s
    assert instance.rates.spec_decode is not None
    assert instance.kv_usage is not None
    assert view.gpu is not None and view.gpu.temperature_c is not None
    assert view.services[0].status.state is State.UP
    assert view.services[0].latency_s is not None


async def test_metrics_filter_asks_only_for_the_series_it_reads(node: FixtureNode) -> None:
    view = await _poll(_fleet(node), node)
    metrics_requests = [r for r in node.vllm.endpoint.requests if r.startswith("/metrics")]
    assert metrics_requests and all("name%5B%5D=vllm" in r for r in metrics_requests)
    node.vllm.endpoint.requests.clear()
    unfiltered = await _poll(
        _fleet(node, **{"gpu_memory_utilization": "metrics_filter = false\ngpu_memory_utilization"}), node
    )
    assert all(r == "/metrics" for r in node.vllm.endpoint.requests if r.startswith("/metrics"))
    # Same numbers either way (ratios do not depend on the poll timing).
    a, b = view.instances[0].rates, unfiltered.instances[0].rates
    assert a is not None and b is not None and a.spec_decode is not None and b.spec_decode is not None
    assert a.spec_decode.per_position == b.spec_decode.per_position
    assert a.latency["ttft"] == b.latency["ttft"]
    assert a.finished_by_reason == b.finished_by_reason
    assert view.instances[0].kv_capacity_tokens == unfiltered.instances[0].kv_capacity_tokens


async def test_refused_connection_is_down_with_reason(node: FixtureNode) -> None:
    fleet = _fleet(node, **{node.vllm.url: f"http://127.0.0.1:{free_port()}"})
    view = await _poll(fleet, node)
    instance = view.instances[0]
    assert instance.status.state is State.DOWN
    assert "connection refused" in instance.status.summary
    # The rest of the node still reports.
    assert view.gpu is not None
    assert view.services[0].status.state is State.UP


async def test_timeout_is_down_with_reason(node: FixtureNode) -> None:
    node.vllm.endpoint.faults = Faults(delay_s=1.0)
    view = await _poll(_fleet(node), node, polls=1)
    assert view.instances[0].status.state is State.DOWN
    assert "no answer within 0.5 s" in view.instances[0].status.summary


async def test_health_503_while_metrics_answers_is_engine_dead(node: FixtureNode) -> None:
    node.vllm.endpoint.faults = Faults(health_status=503)
    view = await _poll(_fleet(node), node)
    instance = view.instances[0]
    assert instance.status.state is State.DOWN
    assert "engine dead (/health 503)" in instance.status.summary
    # /metrics still answers with the dead core's frozen numbers: read (the scrape is fresh), not shown
    # (issue 18: an engine-dead node showed "Gen 6.4" and "2/0" as if it served).
    assert instance.metrics_age_s is not None and instance.metrics_age_s < 1.0
    assert (instance.rates, instance.running, instance.waiting, instance.kv_usage) == (None, None, None, None)


async def test_401_on_models_is_degraded_and_says_what_to_do(node: FixtureNode) -> None:
    node.vllm.endpoint.api_key = "s3cret-key"
    view = await _poll(_fleet(node), node)
    instance = view.instances[0]
    assert instance.status.state is State.DEGRADED
    assert "401 unauthorized; set api_key_env" in instance.status.summary


async def test_api_key_is_sent_to_models(node: FixtureNode, monkeypatch: pytest.MonkeyPatch) -> None:
    node.vllm.endpoint.api_key = "s3cret-key"
    monkeypatch.setenv("TEST_VLLM_KEY", "s3cret-key")
    fleet = _fleet(node, **{"gpu_memory_utilization": 'api_key_env = "TEST_VLLM_KEY"\ngpu_memory_utilization'})
    view = await _poll(fleet, node)
    assert view.instances[0].status.state is State.UP
    assert view.instances[0].served_models


@pytest.mark.parametrize(
    ("mode", "reason"),
    [
        ("garbage", "/metrics is not Prometheus text: line 1"),
        ("truncated", "/metrics: body truncated"),
        ("huge", "cap"),
        ("status500", "/metrics: HTTP 500"),
    ],
)
async def test_bad_metrics_bodies_are_degraded_with_reason(node: FixtureNode, mode: str, reason: str) -> None:
    node.vllm.endpoint.faults = Faults(metrics=mode)
    fleet = _fleet(node).model_copy(update={"max_body_bytes": 1024 * 1024})
    view = await _poll(fleet, node)
    instance = view.instances[0]
    assert instance.status.state is State.DEGRADED
    assert reason in instance.status.summary


async def test_a_server_behind_a_login_redirect_is_down_and_says_where_it_was_sent(node: FixtureNode) -> None:
    # An auth proxy put in front of vLLM answers every path with its login page's address.
    node.vllm.endpoint.faults = Faults(redirect_to="https://sso.example/oauth2/start?rd=%2Fhealth")
    view = await _poll(_fleet(node), node)
    instance = view.instances[0]
    assert instance.status.state is State.DOWN
    assert "/health HTTP 302 to https://sso.example/oauth2/start?rd=%2Fhealth, not followed" in instance.status.summary


async def test_counter_reset_between_scrapes_is_handled(node: FixtureNode) -> None:
    from tests.support.fixture_fleet import scenario_scrapes

    node.vllm.endpoint.scrapes = scenario_scrapes("restart")[3:7]  # 003, 004 | restart | 005, 006
    view = await _poll(_fleet(node), node, polls=4)
    rates = view.instances[0].rates
    assert rates is not None and rates.reset
    assert rates.generation_tokens_per_s is not None and rates.generation_tokens_per_s > 0
    assert view.instances[0].status.state is State.UP


async def test_metric_missing_in_older_version_leaves_it_unknown(node: FixtureNode) -> None:
    # A 0.10.1 server has no inter_token_latency histogram (nor the old name in this rewrite).
    node.vllm.endpoint.faults = Faults(drop_families=("vllm:inter_token_latency_seconds",))
    node.vllm.endpoint.version = "0.10.1"
    view = await _poll(_fleet(node), node)
    instance = view.instances[0]
    assert instance.status.state is State.UP
    assert instance.version == "0.10.1"
    assert instance.rates is not None
    assert "itl" not in instance.rates.latency
    assert instance.rates.latency["ttft"].p50 is not None


async def test_disable_log_stats_is_up_without_numbers(node: FixtureNode) -> None:
    from tests.support.fixture_fleet import scenario_scrapes

    node.vllm.endpoint.scrapes = scenario_scrapes("disable-log-stats")
    view = await _poll(_fleet(node), node)
    instance = view.instances[0]
    assert instance.status.state is State.UP
    assert not instance.engine_stats
    assert instance.rates is None


async def test_dead_side_service_and_exporter_degrade_the_node_not_the_fleet(node: FixtureNode) -> None:
    fleet = _fleet(
        node,
        **{
            node.service.url: f"http://127.0.0.1:{free_port()}",
            node.gpu.url: f"http://127.0.0.1:{free_port()}",
        },
    )
    view = await _poll(fleet, node)
    assert view.instances[0].status.state is State.UP
    assert view.services[0].status.state is State.DOWN
    assert view.status.state is State.DEGRADED
    assert any("GPU exporter: connection refused" in r for r in view.status.reasons)


async def test_one_dead_node_does_not_delay_the_others() -> None:
    slow = start_node("slow", "mtp2-steady", "nvidia_gpu_exporter.prom", advance_every_s=None)
    fast = start_node("fast", "mtp3-poor-pos2", "nvidia_gpu_exporter.prom", advance_every_s=None)
    try:
        slow.vllm.endpoint.faults = Faults(delay_s=1.0)
        fleet = parse_config(fleet_config([slow, fast], interval_s=0.2, timeout_s=0.5), source="test.toml")
        polls: dict[str, int] = {"slow": 0, "fast": 0}
        async with make_client() as client:
            poller = FleetPoller(fleet, client)
            task = asyncio.create_task(poller.run(lambda obs: polls.__setitem__(obs.node, polls[obs.node] + 1)))
            try:
                await wait_until(
                    lambda: polls["fast"] >= 8, 10.0, what="8 polls of the fast node", detail=lambda: str(polls)
                )
                seen = dict(polls)
            finally:
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
        # 8 polls at 0.2 s take the fast node 1.4 s, in which the slow one (0.5 s timeouts, so a poll
        # every 0.6 s) ends about 3; serialised behind the slow node, the fast one would end no more
        # polls than it.
        assert seen["slow"] <= 4, seen
    finally:
        for server in [*slow.servers(), *fast.servers()]:
            server.stop()


async def test_every_node_is_polled_at_once_first_then_spread_over_the_interval(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The screen fills at start (no node waits for its slot), and after that the polls do not bunch."""
    monkeypatch.setattr(poller, "POLL_GROUP", 1)  # one node per slot (8 share one in the dashboard)
    nodes = [start_node(f"n{i}", "mtp2-steady", "nvidia_gpu_exporter.prom", advance_every_s=None) for i in range(4)]
    try:
        fleet = parse_config(fleet_config(nodes, interval_s=0.8, timeout_s=0.5), source="test.toml")
        seen: list[str] = []
        at: list[float] = []
        twelve = asyncio.Event()

        def observed(obs: NodeObservation) -> None:
            seen.append(obs.node)
            at.append(obs.t)
            if len(seen) >= 12:
                twelve.set()

        async with make_client() as client:
            task = asyncio.create_task(FleetPoller(fleet, client).run(observed))
            await asyncio.wait_for(twelve.wait(), 10)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        names = [n.name for n in nodes]
        assert sorted(seen[:4]) == names  # every first poll before any second one
        # ...and all at once: spread over the interval (0.8 s) the last would come 0.6 s after the first.
        assert at[3] - at[0] < 0.8 / 4
        # Then in turn, each node in its own slot of the interval, the same order every round.
        assert sorted(seen[4:8]) == names and seen[8:12] == seen[4:8]
    finally:
        for n in nodes:
            for server in n.servers():
                server.stop()


async def test_a_failing_observer_does_not_stop_the_polling(node: FixtureNode) -> None:
    fleet = parse_config(fleet_config([node], interval_s=0.1, timeout_s=0.5), source="test.toml")
    errors: list[tuple[str, Exception]] = []
    polls = [0]

    def buggy(_obs: object) -> None:
        polls[0] += 1
        raise RuntimeError("bug in the observer")

    async with make_client() as client:
        task = asyncio.create_task(FleetPoller(fleet, client).run(buggy, lambda n, e: errors.append((n, e))))
        await wait_until(lambda: polls[0] >= 3, 10.0, what="3 polls despite the failing observer")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert polls[0] >= 3
    assert len(errors) == polls[0]
    assert errors[0][0] == "spark1" and isinstance(errors[0][1], RuntimeError)


def test_backoff_waits_longer_after_each_failure_and_resets_on_answer() -> None:
    from sparktui.model.observations import FetchKind, HttpResult
    from sparktui.sources.collector import Backoff

    refused = HttpResult(url="u", kind=FetchKind.REFUSED, error="connection refused")
    answered = HttpResult(url="u", kind=FetchKind.OK, status=503)
    backoff = Backoff(interval_s=1.0, max_s=10.0)
    backoff.record(refused, now=0.0)
    assert backoff.due(0.0)  # one failure: try again on the next poll
    delays = []
    for now in (1.0, 3.0, 7.0, 15.0, 25.0):
        backoff.record(refused, now=now)
        delays.append(backoff.next_try - now)
    assert delays == [1.0, 2.0, 4.0, 8.0, 10.0]
    assert not backoff.due(30.0) and backoff.due(35.0)
    backoff.record(answered, now=35.0)
    assert backoff.due(35.0) and backoff.failures == 0
