"""A broken or hostile Prometheus: what its answers may do to sparktui (issue 32, item 5).

A hand-made Prometheus on 127.0.0.1 (``tests/support/hostile_prometheus.py``) serves the shapes a real
one cannot produce: wrong types in the JSON, more series than the bound, a gzip bomb, a body over the
caps. Each is one line naming Prometheus and what is wrong, never a traceback: in ``snapshot`` and
``check`` (run as a user runs them), and in the refresh loop the dashboard and ``watch`` run. The
reader itself is fuzzed in ``tests/unit/test_fuzz_prometheus_answers.py``.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import tracemalloc
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from sparktui.config import parse_config
from sparktui.headless import compare
from sparktui.model.logbuffer import LogLine
from sparktui.model.observations import HostUpdate, NodeObservation
from sparktui.model.specs import FleetSpec
from sparktui.monitor.core import collect_error_text
from sparktui.sources.http import make_client
from sparktui.sources.promapi import MAX_DECODED_BYTES, MAX_RAW_BYTES, MAX_SERIES
from sparktui.sources.prometheus import PrometheusClient, PrometheusError, PrometheusSource
from tests.support.hostile_prometheus import Answer, HandMadePrometheus, json_answer, success
from tests.support.wait import wait_until

INSTANCE = "10.0.0.1:8000"
NOW = time.time()
QUERY, RANGE, TARGETS = "/api/v1/query", "/api/v1/query_range", "/api/v1/targets"
VLLM: dict[str, object] = {"instance": INSTANCE, "job": "vllm", "model_name": "Qwen3", "engine": "0"}


def labelled(base: dict[str, object], **extra: object) -> dict[str, object]:
    return {**base, **extra}


def config(url: str, *, nodes: bool = True, poll_interval_s: float = 1.0) -> str:
    """One node with one vLLM, SSH off (or none: found in Prometheus); metrics are stale
    ``stale_after`` polls after their scrape."""
    listed = """
[[nodes]]
name = "spark1"
host = "10.0.0.1"
[nodes.ssh]
enabled = false
[[nodes.vllm]]
port = 8000
"""
    top = f"poll_interval_s = {poll_interval_s}\n"
    return top + (listed if nodes else "") + f'[prometheus]\nurl = "{url}"\ntimeout_s = 5\n'


def fleet_of(url: str) -> FleetSpec:
    return parse_config(config(url), env={})


def refresh_answer(labels: dict[str, object] | None = None, up: str = "1", at: float = NOW) -> Answer:
    """What a good Prometheus answers the refresh query for one vLLM target that is up, scraped at ``at``."""
    return success(
        "vector",
        [
            {"metric": {"__name__": "up", "instance": INSTANCE, "job": "vllm"}, "value": [at, up]},
            {"metric": {"instance": INSTANCE, "job": "vllm", "sparktui_scrape": "ts"}, "value": [at, f"{at:.3f}"]},
            {"metric": labelled(labels or VLLM, __name__="vllm:num_requests_running"), "value": [at, "3"]},
        ],
    )


def matrix_of(*entries: object) -> Answer:
    return success("matrix", list(entries))


GOOD_RANGE = matrix_of()
TOO_MANY = success("vector", [{"metric": {}, "value": [NOW, "1"]}] * (MAX_SERIES + 1))


def gzip_bomb(inflated: int = 240 * 1024 * 1024, wbits: int = 16 + zlib.MAX_WBITS) -> bytes:
    """A valid answer padded with ``inflated`` bytes of spaces, compressed (gzip, zlib or raw deflate)."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, wbits)
    parts = [compressor.compress(b'{"status":"success","data":{"resultType":"vector","result":[')]
    block = b" " * (1024 * 1024)
    parts.extend(compressor.compress(block) for _ in range(inflated // len(block)))
    parts.append(compressor.compress(b"]}}"))
    parts.append(compressor.flush())
    return b"".join(parts)


# --- snapshot and check, as a user runs them -------------------------------------------------------------

# name: (answers by path, what the one line says; the config lists no node where "discovery" is named)
CLI_CASES: dict[str, tuple[dict[str, Answer], str]] = {
    "a label value that is an object": (
        {RANGE: matrix_of({"metric": labelled(VLLM, model_name={"a": 1}), "values": [[NOW, "1"]]})},
        "malformed answer: result[0].metric.model_name is an object, not a string",
    ),
    "up that is a word": (
        {RANGE: GOOD_RANGE, QUERY: refresh_answer(up="abc")},
        "malformed answer: result[0].value value 'abc' is not a number",
    ),
    "range values that are not pairs": (
        {RANGE: matrix_of({"metric": VLLM, "values": [[NOW], [NOW, "1", "2"]]})},
        "malformed answer: result[0].values[0] is an array, not a [time, value] pair",
    ),
    "range values that are numbers": (
        {RANGE: matrix_of({"metric": VLLM, "values": [1, 2]})},
        "malformed answer: result[0].values[0] is a number, not a [time, value] pair",
    ),
    "a time that is a word": (
        {RANGE: matrix_of({"metric": VLLM, "values": [["soon", "1"]]})},
        "malformed answer: result[0].values[0] time is a string, not a number",
    ),
    "labels that are an array": (
        {RANGE: GOOD_RANGE, QUERY: success("vector", [{"metric": ["instance"], "value": [NOW, "1"]}])},
        "malformed answer: result[0].metric is an array, not an object of labels",
    ),
    "discovery: labels that are an array": (
        {QUERY: success("vector", [{"metric": ["instance"], "value": [NOW, "1"]}])},
        "malformed answer: result[0].metric is an array, not an object of labels",
    ),
    "more series than the bound": (
        {RANGE: GOOD_RANGE, QUERY: TOO_MANY},
        f"the answer has {MAX_SERIES + 1:,} series, over the bound of {MAX_SERIES:,}",
    ),
    "a gzip bomb": (
        {RANGE: Answer(gzip_bomb(), {"Content-Encoding": "gzip"})},
        f"the answer inflates (gzip) to over {MAX_DECODED_BYTES // (1024 * 1024)} MiB, the bound on an answer",
    ),
}


def _run(config_file: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, SPARKTUI_CONFIG=str(config_file))
    return subprocess.run(
        [sys.executable, "-m", "sparktui", *args], check=False, env=env, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize("command", ["snapshot", "check"])
@pytest.mark.parametrize("case", list(CLI_CASES))
def test_a_hostile_answer_is_one_line_in_snapshot_and_check(case: str, command: str, tmp_path: Path) -> None:
    answers, reason = CLI_CASES[case]
    with HandMadePrometheus(answers) as prometheus:
        config_file = tmp_path / "fleet.toml"
        config_file.write_text(config(prometheus.url, nodes=not case.startswith("discovery")))
        result = _run(config_file, command)
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert lines[0] == f"Prometheus at {prometheus.url}: {reason}", lines[0]


def test_snapshot_prints_no_escape_sequence_from_a_label(tmp_path: Path) -> None:
    """An admission reason (a label the snapshot prints) holding an OSC that renames the pane, an 8-bit
    CSI that clears the screen and a bidi override, in the history and in the latest answer."""
    reason = "max_num_queued_reqs\x1b]2;pwned\x07\x9b2J\u202e"
    rejections = labelled(VLLM, __name__="vllm:admission_rejections_total", reason=reason)
    now = time.time()  # the history must lie inside the snapshot's window, whenever the test runs
    steps = (now - 20, now - 10)

    def history(labels: dict[str, object], values: Sequence[str]) -> dict[str, object]:
        return {"metric": labels, "values": [[t, v] for t, v in zip(steps, values, strict=True)]}

    backfill = matrix_of(
        history({"__name__": "up", "instance": INSTANCE, "job": "vllm"}, ["1", "1"]),
        history({"instance": INSTANCE, "job": "vllm", "sparktui_scrape": "ts"}, [f"{t:.3f}" for t in steps]),
        history(rejections, ["0", "10"]),
    )
    latest = json.loads(refresh_answer(at=now).body)
    latest["data"]["result"].append({"metric": rejections, "value": [now, "20"]})
    with HandMadePrometheus({RANGE: backfill, QUERY: json_answer(latest)}) as prometheus:
        config_file = tmp_path / "fleet.toml"
        # Scrapes stay fresh for minutes: the second run may start seconds after the answers were made.
        config_file.write_text(config(prometheus.url, poll_interval_s=60.0))
        text = _run(config_file, "snapshot")
        as_json = _run(config_file, "snapshot", "--json")
    assert text.returncode == 0 and as_json.returncode == 0, text.stderr + as_json.stderr
    assert "admission rejections 1.0/s (max_num_queued_reqs 20)" in text.stdout, text.stdout
    assert json.loads(as_json.stdout)["nodes"][0]["instances"][0]["rates"]["admission_rejections"] == {
        "max_num_queued_reqs": 20.0
    }
    for out in (text.stdout, as_json.stdout):
        assert not {"\x1b", "\x07", "\x9b", "\u202e"} & set(out), repr(out)


# --- the refresh loop of the dashboard and watch --------------------------------------------------------


class Recorder:
    def __init__(self) -> None:
        self.errors: list[Exception] = []

    def observation(self, observation: NodeObservation) -> None:
        pass

    def host(self, update: HostUpdate) -> None:
        pass

    def log_batch(self, node: str, instance: str, lines: Sequence[LogLine]) -> None:
        pass

    def error(self, node: str, exc: Exception) -> None:
        self.errors.append(exc)


@pytest.mark.parametrize("case", ["a label value that is an object", "up that is a word", "more series than the bound"])
async def test_the_refresh_loop_reports_a_hostile_answer_as_one_line(case: str) -> None:
    """What the dashboard and ``watch`` run: the loop goes on, and the fleet's error line is the reason."""
    answers, reason = CLI_CASES[case]
    answers = {QUERY: answers.get(QUERY) or answers[RANGE]}  # the loop asks only the instant query
    if case == "a label value that is an object":
        answers = {QUERY: success("vector", [{"metric": labelled(VLLM, model_name={"a": 1}), "value": [NOW, "1"]}])}
    with HandMadePrometheus(answers) as prometheus:
        recorder = Recorder()
        task = asyncio.create_task(PrometheusSource(fleet_of(prometheus.url), logs=False).deliver(recorder))
        try:
            await wait_until(lambda: recorder.errors, 10.0, what="an error from the refresh loop")
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    (error,) = recorder.errors[:1]
    assert isinstance(error, PrometheusError), repr(error)
    assert collect_error_text(error) == f"Prometheus at {prometheus.url}: {reason}"


# --- the budgets -----------------------------------------------------------------------------------------


async def _refresh(answers: dict[str, Answer]) -> list[NodeObservation]:
    with HandMadePrometheus(answers) as prometheus:
        async with make_client() as client:
            return await PrometheusSource(fleet_of(prometheus.url)).refresh(client)


async def test_an_answer_over_the_series_bound_is_refused_naming_the_count() -> None:
    with pytest.raises(PrometheusError, match=rf"the answer has {MAX_SERIES + 1:,} series, over the bound of"):
        await _refresh({QUERY: TOO_MANY})
    # ... and one at the bound is read
    body = json.loads(refresh_answer().body)
    result = body["data"]["result"]
    result.extend({"metric": {"n": str(i)}, "value": [NOW, "1"]} for i in range(MAX_SERIES - len(result)))
    (observation,) = await _refresh({QUERY: json_answer(body)})
    assert observation.vllm[0].metrics is not None and observation.vllm[0].metrics.ok


async def test_the_series_bound_holds_when_the_keys_are_escaped() -> None:
    """``"metr\\u0069c"`` is ``"metric"`` to a JSON parser but not to the scan before it: counted again."""
    one = b'{"metr\\u0069c":{},"value":[1700000000,"1"]}'
    body = b'{"status":"success","data":{"resultType":"vector","result":[' + b",".join([one] * (MAX_SERIES + 1))
    with pytest.raises(PrometheusError, match=rf"the answer has {MAX_SERIES + 1:,} series, over the bound of"):
        await _refresh({QUERY: Answer(body + b"]}}")})


def _peak_while(run: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        run()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize(
    ("coding", "wbits"), [("gzip", 16 + zlib.MAX_WBITS), ("deflate", zlib.MAX_WBITS), ("deflate", -zlib.MAX_WBITS)]
)
def test_a_compression_bomb_stops_inflating_at_the_cap(coding: str, wbits: int) -> None:
    """240 MiB of JSON in a quarter of a MiB: refused once the cap is inflated, and no more is ever held."""
    answer = Answer(gzip_bomb(wbits=wbits), {"Content-Encoding": coding})
    caught: list[BaseException] = []

    def refresh() -> None:
        try:
            asyncio.run(_refresh({QUERY: answer}))
        except PrometheusError as exc:
            caught.append(exc)

    peak = _peak_while(refresh)
    (error,) = caught
    assert f"inflates ({coding}) to over {MAX_DECODED_BYTES // (1024 * 1024)} MiB" in str(error)
    assert peak < 1.5 * MAX_DECODED_BYTES, f"{peak / 1e6:.0f} MB held while decoding"
    # ... and a good answer so compressed is read
    compressor = zlib.compressobj(6, zlib.DEFLATED, wbits)
    good = Answer(compressor.compress(refresh_answer().body) + compressor.flush(), {"Content-Encoding": coding})
    (observation,) = asyncio.run(_refresh({QUERY: good}))
    assert observation.vllm[0].metrics is not None and b"vllm:num_requests_running" in observation.vllm[0].metrics.body


async def test_a_declared_length_over_the_raw_cap_is_refused_before_reading() -> None:
    declared = {"Content-Length": str(MAX_RAW_BYTES + 1)}
    with pytest.raises(PrometheusError, match=rf"the answer is {MAX_RAW_BYTES + 1:,} bytes, over the bound of"):
        await _refresh({QUERY: Answer(b"{}", declared)})


async def test_a_body_past_the_raw_cap_is_refused_while_reading() -> None:
    """No length given (the connection's end delimits the body), 40 MiB of a valid answer."""
    padding = b" " * (40 * 1024 * 1024)
    body = b'{"status":"success","data":{"resultType":"vector","result":[' + padding + b"]}}"
    with pytest.raises(PrometheusError, match=r"the answer is over 32 MiB, the bound on an answer"):
        await _refresh({QUERY: Answer(body, {"Content-Length": "", "Connection": "close"})})


async def test_an_encoding_not_asked_for_is_refused() -> None:
    answer = Answer(refresh_answer().body, {"Content-Encoding": "br"})
    with pytest.raises(PrometheusError, match=r"the answer is compressed as 'br'; sparktui asks for gzip, deflate"):
        await _refresh({QUERY: answer})


# --- snapshot --compare -------------------------------------------------------------------------------


async def test_compare_skips_a_position_that_is_not_a_number() -> None:
    """``"²"`` is a digit to ``str.isdigit()`` and not to ``int()``."""
    labels: dict[str, object] = {"instance": INSTANCE, "model_name": "Qwen3"}
    entries = [{"metric": labelled(labels, position=p), "value": [NOW, "0.5"]} for p in ("0", "²", "1e3")]
    with HandMadePrometheus({QUERY: success("vector", entries)}) as prometheus:
        fleet = fleet_of(prometheus.url)
        assert fleet.prometheus is not None
        async with make_client() as client:
            found = await compare.promql_numbers(
                PrometheusClient(fleet.prometheus, client, 5.0),
                fleet.prometheus.targets(fleet.nodes),
                at=NOW,
                window_s=30.0,
            )
    (values,) = found.values()
    assert {k for k in values if k.startswith("per_position:")} == {"per_position:0"}
