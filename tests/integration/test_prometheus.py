"""Prometheus as the data source: every number sparktui shows from Prometheus is the number it computes
by scraping the fleet itself, and the number Prometheus's own PromQL gives.

The integration tests run the demo fleet in step mode (its state changes only when the test advances
it) with a real Prometheus server (Debian's package, ``tests/support/prometheus_server.py``) scraping it every
second. Each step advances the simulation by the wall time since the last step, waits until
Prometheus has scraped every target after the change, then polls the fleet directly once and
refreshes the Prometheus source once. Both sides so see the same sequence of states, and:

- every ratio, quantile, per-position acceptance, KV usage and gauge is equal to 1e-9 (float
  rounding: the same counters go through the same code);
- every counter increase behind a rate is equal to 1e-9; the rates differ only because Prometheus
  stamps a sample with its scrape time and direct mode with its poll time. Both instants lie inside
  the lifetime of the state they saw, so the two windows differ by at most the longest state's
  lifetime at each end: |rate_prometheus / rate_direct - 1| <= 2 * longest_state / window. That is
  the stated tolerance, computed from the run (about 2 * 1.5 s / 20 s);
- Prometheus's own ``rate()`` and ``histogram_quantile()``, evaluated at the last scrape sparktui used
  over a window that starts exactly at the first one (2.x range selectors include both ends, so there
  is no extrapolation), equal sparktui's numbers from Prometheus to 1e-9.
"""

from __future__ import annotations

import asyncio
import io
import json
import math
import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio

from sparktui.config import ConfigError, parse_config
from sparktui.demo.httpserver import HttpServer, Request, Response
from sparktui.engines.vllm.scrape import WANTED
from sparktui.headless import compare
from sparktui.model.promtext import parse
from sparktui.sources.http import make_client
from sparktui.sources.live import LiveFleet
from sparktui.sources.prometheus import (
    PrometheusError,
    PrometheusSource,
    exposition,
    fleet_source,
)
from sparktui.sources.promql import refresh_query, regex_escape, series_names
from tests.support.prometheus_run import (
    Run,
    assert_a_target_down_is_down_here,
    assert_discovery_finds_the_demo_node,
    assert_mixed_mode,
    assert_numbers_match_direct,
    assert_server_gives_sparktuis_numbers,
    assert_snapshot_has_rates_at_once,
    stepped_run,
    with_prometheus,
)
from tests.support.prometheus_server import PrometheusServer, require_prometheus

pytestmark = pytest.mark.prometheus

STEPS = 14


# --- without a server ----------------------------------------------------------------------------------

NODES = """
[[nodes]]
name = "spark1"
host = "10.0.0.1"
[[nodes.vllm]]
name = "qwen"
port = 8000
[nodes.gpu_exporter]
port = 9835
[[nodes]]
name = "spark2"
host = "fd00::2"
[[nodes.vllm]]
port = 8001
"""


def test_one_refresh_is_one_query_over_every_target() -> None:
    fleet = parse_config(NODES + '[prometheus]\nurl = "http://prom:9090/"\nselector = \'cluster="lab"\'\n', env={})
    assert fleet.prometheus is not None
    targets = fleet.prometheus.targets(fleet.nodes)
    assert [(t.node, t.kind, dict(t.labels)) for t in targets] == [
        ("spark1", "vllm", {"instance": "10.0.0.1:8000"}),
        ("spark1", "gpu_exporter", {"instance": "10.0.0.1:9835"}),
        ("spark2", "vllm", {"instance": "[fd00::2]:8001"}),
    ]
    query = refresh_query(targets, fleet.prometheus.selector)
    # One selector for every series of every target, and the scrape times from the same evaluation.
    assert query.count("__name__=~") == 1 and " or label_replace(timestamp(up{" in query
    assert r'instance=~"10\\.0\\.0\\.1:8000|10\\.0\\.0\\.1:9835|\\[fd00::2\\]:8001"' in query
    assert 'cluster="lab"' in query
    names = set(series_names())
    assert names >= WANTED and "up" in names
    assert {"nvidia_smi_temperature_gpu", "gpu_temperature_celsius", "node_memory_MemAvailable_bytes"} <= names
    assert regex_escape("a.b|c") == r"a\.b\|c"


def test_each_instance_is_asked_for_its_own_engines_series() -> None:
    """A llama.cpp instance's series are llama.cpp's (``Engine.series``); a fleet of vLLMs asks as it did."""
    from sparktui.engines import registry
    from sparktui.engines.llamacpp.scrape import WANTED as LLAMACPP_WANTED

    assert set(registry()["vllm"].series) == WANTED and set(registry()["llamacpp"].series) == LLAMACPP_WANTED
    mixed = NODES + '[[nodes.vllm]]\nname = "llama"\nengine = "llamacpp"\nport = 8080\n'
    fleet = parse_config(mixed + '[prometheus]\nurl = "http://prom:9090/"\n', env={})
    assert fleet.prometheus is not None
    targets = fleet.prometheus.targets(fleet.nodes)
    assert [t.engine for t in targets if t.kind == "vllm"] == ["vllm", "vllm", "llamacpp"]
    both = refresh_query(targets)
    assert regex_escape("llamacpp:tokens_predicted_total") in both and regex_escape("vllm:num_requests_running") in both
    only_vllm = [t for t in targets if t.engine == "vllm"]
    assert "llamacpp:" not in refresh_query(only_vllm)
    # Only the names differ: the vLLM fleet's query is the one it always was.
    assert set(series_names(["vllm", "llamacpp"])) == set(series_names()) | LLAMACPP_WANTED
    assert series_names(["llamacpp"]) == tuple(sorted(set(series_names()) - WANTED | LLAMACPP_WANTED))
    assert series_names(["no-such-engine"]) == series_names([])


def test_series_are_written_back_as_the_text_direct_mode_parses() -> None:
    series = [
        ("vllm:num_requests_running", {"__name__": "x", "instance": "h:1", "job": "v", "model_name": 'a"b\\c'}, "3"),
        ("vllm:kv_cache_usage_perc", {"instance": "h:1", "engine": "0"}, "NaN"),
        ("vllm:time_to_first_token_seconds_bucket", {"instance": "h:1", "le": "+Inf"}, "12"),
        ("process_start_time_seconds", {"instance": "h:1"}, "1.7e+09"),
    ]
    text = exposition(series, frozenset({"instance", "job"})).decode()
    parsed = parse(text)
    assert parsed.get("vllm:num_requests_running") == [({"model_name": 'a"b\\c'}, 3.0)]
    assert parsed.get("vllm:time_to_first_token_seconds_bucket") == [({"le": "+Inf"}, 12.0)]
    assert parsed.first_value("process_start_time_seconds") == 1.7e9
    assert math.isnan(parsed.get("vllm:kv_cache_usage_perc")[0][1])


def test_label_templates_map_each_endpoint_to_its_own_labels() -> None:
    fleet = parse_config(
        NODES + '[prometheus]\nurl = "http://prom:9090"\nlabels = { host = "{node}", job = "{kind}-{port}" }\n', env={}
    )
    assert fleet.prometheus is not None
    assert [dict(t.labels) for t in fleet.prometheus.targets(fleet.nodes)] == [
        {"host": "spark1", "job": "vllm-8000"},
        {"host": "spark1", "job": "gpu_exporter-9835"},
        {"host": "spark2", "job": "vllm-8001"},
    ]


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ('url = "ftp://prom"', "prometheus.url: must start with http:// or https:// (got 'ftp://prom')"),
        ('url = "http://prom:9090/api/v1"', "prometheus.url: must be the server's base URL without /api/v1"),
        ('url = "http://u:pw@prom"', "prometheus.url: must not contain a user name or password"),
        ('url = "http://p"\nrefresh_s = 0', "prometheus.refresh_s: must be >= 0.1 (got 0)"),
        ('url = "http://p"\nlabels = { instance = "{adress}" }', "prometheus.labels.instance: uses {adress}"),
        ('url = "http://p"\nlabels = { "__name__" = "x" }', "prometheus.labels.__name__: is not a Prometheus label"),
        ('url = "http://p"\nselector = "cluster=lab"', "prometheus.selector: must be PromQL label matchers"),
        ('url = "http://p"\nusername = "me"', "prometheus.password_env: missing: give password_env or password_file"),
        (
            'url = "http://p"\nusername = "me"\npassword_env = "PW"\nbearer_token_env = "T"',
            "prometheus.username: give a bearer token or a user name and password, not both",
        ),
        ('url = "http://p"\nlabels = { host = "{node}" }', "prometheus.labels: spark1 gpu_exporter and spark1 qwen"),
        ('url = "http://p"\nbearer_token = "sk-123"', "prometheus.bearer_token: secrets do not go in the config"),
        ('url = "http://p"\nbearer_token_env = "NOT_SET"', "prometheus.bearer_token_env: environment variable NOT_SET"),
        ('url = "http://p"\nurl_typo = 1', "prometheus.url_typo: unknown key"),
    ],
)
def test_prometheus_config_errors_are_one_line_each(table: str, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(NODES + "[prometheus]\n" + table + "\n", source="fleet.toml", env={"PW": "x", "T": "y"})
    assert any(line.startswith("fleet.toml: " + expected) for line in caught.value.errors), caught.value.errors
    assert "sk-123" not in str(caught.value)


def test_secrets_come_from_the_environment_or_a_file(tmp_path: Path) -> None:
    fleet = parse_config(NODES + '[prometheus]\nurl = "http://p"\nbearer_token_env = "T"\n', env={"T": " zq-91\n"})
    assert fleet.prometheus is not None and fleet.prometheus.bearer_token is not None
    assert fleet.prometheus.bearer_token.get_secret_value() == "zq-91"
    assert "zq-91" not in repr(fleet.prometheus)
    secret = tmp_path / "pw"
    secret.write_text("hunter2\n")
    fleet = parse_config(
        NODES + '[prometheus]\nurl = "http://p"\nusername = "me"\npassword_file = "pw"\n', env={}, base_dir=tmp_path
    )
    assert fleet.prometheus is not None and fleet.prometheus.password is not None
    assert fleet.prometheus.password.get_secret_value() == "hunter2"


def test_a_prometheus_config_may_leave_the_nodes_to_discovery() -> None:
    assert parse_config('[prometheus]\nurl = "http://p"\n', env={}).nodes == ()
    with pytest.raises(ConfigError, match="nodes: missing: add at least one"):
        parse_config("poll_interval_s = 1.0\n", env={})


def test_the_config_chooses_the_source() -> None:
    direct = parse_config(NODES, env={})
    assert type(fleet_source(direct)) is LiveFleet
    source = fleet_source(parse_config(NODES + '[prometheus]\nurl = "http://p"\n', env={}))
    # Mixed mode: a LiveFleet (SSH host state, logs, actions) whose HTTP polling is replaced.
    assert isinstance(source, PrometheusSource) and isinstance(source, LiveFleet)


def test_compare_without_prometheus_says_what_is_missing(capsys: pytest.CaptureFixture[str]) -> None:
    assert compare.main(parse_config(NODES, env={}), 1.0, io.StringIO()) == 1
    assert "needs a [prometheus] table" in capsys.readouterr().err


async def test_an_unreachable_prometheus_is_one_clear_error() -> None:
    fleet = parse_config(NODES + '[prometheus]\nurl = "http://127.0.0.1:9"\ntimeout_s = 2\n', env={})
    source = PrometheusSource(fleet)
    async with make_client() as client:
        with pytest.raises(PrometheusError, match=r"^Prometheus at http://127\.0\.0\.1:9: cannot connect"):
            await source.refresh(client)


# --- against a real Prometheus scraping the demo fleet ---------------------------------------------------


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def run() -> AsyncIterator[Run]:
    require_prometheus()
    async with stepped_run(PrometheusServer, STEPS) as found:
        yield found


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.slow
async def test_every_number_from_prometheus_matches_direct_computation(run: Run) -> None:
    assert_numbers_match_direct(run)


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.slow
async def test_prometheus_rate_and_histogram_quantile_give_sparktuis_numbers(run: Run) -> None:
    await assert_server_gives_sparktuis_numbers(run)


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.slow
async def test_snapshot_from_prometheus_has_rates_at_once(run: Run) -> None:
    await assert_snapshot_has_rates_at_once(run)


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.slow
async def test_snapshot_compare_prints_direct_beside_prometheus(run: Run) -> None:
    clock = asyncio.create_task(run.demo.run_clock())
    try:
        text = await compare.compare(run.prom_fleet, window_s=5.0)
    finally:
        clock.cancel()
        await asyncio.gather(clock, return_exceptions=True)
    # The window is from the first direct poll to the last: about the 5 s asked for, longer or shorter by
    # a poll's time when the machine is busy.
    window = re.search(r"over the same (\d+\.\d) s window", text.splitlines()[0])
    assert window and 2.0 <= float(window.group(1)) <= 5.0 + 30.0, text.splitlines()[0]
    for node in run.prom_fleet.nodes:
        assert f"{node.name}/{node.vllm[0].name}" in text
    rows = {line.split("  ")[1].strip() for line in text.splitlines() if line.startswith("  ") and "  " in line[2:]}
    assert {"generation", "draft acceptance", "acceptance at position 1", "TTFT p90", "KV cache usage"} <= rows, rows
    for line in text.splitlines():
        if line.strip().startswith(("generation", "KV cache usage")):
            # a value on each side (not "–"), and their difference: relative, or in points for a share
            difference = line.split()[-1]
            assert line.count("–") == 0 and (difference in ("%", "same") or line.endswith(" pp")), line
            assert not line.startswith("  KV cache usage") or line.endswith((" pp", "same")), line


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.slow
async def test_mixed_mode_metrics_from_prometheus_host_state_over_ssh(run: Run) -> None:
    await assert_mixed_mode(run)


class AuthProxy:
    """Stands in front of Prometheus and lets through only requests with the expected Authorization."""

    def __init__(self, upstream: str, expected: str) -> None:
        self.upstream = upstream
        self.expected = expected
        self.seen: list[str | None] = []
        self.server = HttpServer(self.handle)

    async def handle(self, request: Request) -> Response:
        auth = request.headers.get("authorization")
        self.seen.append(auth)
        if auth != self.expected:
            return Response(status=401, body=b"Unauthorized\n", content_type="text/plain")
        async with httpx.AsyncClient(trust_env=False, timeout=10.0) as client:
            answer = await client.request(
                request.method,
                self.upstream + request.path,
                params=dict(request.query.items()),
                content=request.body,
                headers={"content-type": request.headers.get("content-type", "")},
            )
        return Response(status=answer.status_code, body=answer.content, content_type="application/json")


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ('bearer_token_env = "PROM_TOKEN"', "Bearer s3cret-token"),
        ('username = "grafana"\npassword_env = "PROM_TOKEN"', "Basic Z3JhZmFuYTpzM2NyZXQtdG9rZW4="),
    ],
)
@pytest.mark.slow
async def test_the_auth_header_is_sent(run: Run, extra: str, expected: str) -> None:
    proxy = AuthProxy(run.server.url, expected)
    await proxy.server.start()
    try:
        toml = run.demo.config_toml()
        fleet = with_prometheus(toml, proxy.server.url, extra)
        async with make_client() as client:
            observations = await PrometheusSource(fleet).refresh(client)
            assert {o.node for o in observations if o.vllm and o.vllm[0].metrics and o.vllm[0].metrics.ok} == {
                n.name for n in fleet.nodes
            }
            assert proxy.seen and set(proxy.seen) == {expected}
            with pytest.raises(PrometheusError, match=r"HTTP 401 unauthorized; it wants credentials"):
                await PrometheusSource(with_prometheus(toml, proxy.server.url)).refresh(client)
    finally:
        await proxy.server.stop()


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.slow
async def test_discovery_finds_the_nodes_prometheus_scrapes(run: Run) -> None:
    await assert_discovery_finds_the_demo_node(run)


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.slow
async def test_a_target_down_in_prometheus_is_down_here(run: Run) -> None:
    # Runs last: it powers a node off.
    reasons = await assert_a_target_down_is_down_here(run)
    assert "connection refused" in reasons, reasons


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.slow
async def test_the_cli_snapshot_reads_prometheus_and_discovers_the_nodes(
    run: Run, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A config with only ``[prometheus]``: ``sparktui snapshot`` finds the nodes there and shows their numbers."""
    from sparktui import cli

    config = tmp_path / "fleet.toml"
    config.write_text(f'[prometheus]\nurl = "{run.server.url}"\n')
    code = await asyncio.to_thread(cli.main, ["--config", str(config), "snapshot", "--json"])
    out = capsys.readouterr().out
    assert code == 0, out
    (node,) = json.loads(out)["nodes"]
    # Every vLLM Prometheus has series of (an earlier test may have taken one target down): the demo's.
    urls = {(v.base_url or "").rstrip("/") for n in run.fleet.nodes for v in n.vllm}
    assert node["host"] == "127.0.0.1" and node["instances"]
    assert {instance["url"].rstrip("/") for instance in node["instances"]} <= urls
    assert all(instance["kv_usage"] is not None for instance in node["instances"])


@pytest.mark.asyncio(loop_scope="module")
async def test_the_cli_says_in_one_line_when_prometheus_is_unreachable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from sparktui import cli

    config = tmp_path / "fleet.toml"
    config.write_text('[prometheus]\nurl = "http://127.0.0.1:9/"\ntimeout_s = 1\n')
    code = await asyncio.to_thread(cli.main, ["--config", str(config), "snapshot"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "127.0.0.1:9" in err, err
