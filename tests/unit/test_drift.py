"""Fleet drift: what each instance runs, and mismatches between ranks of a job or hosts of a model."""

from __future__ import annotations

from sparktui.config import parse_config
from sparktui.model.drift import drift_report, normalized_command
from sparktui.model.fleet import FleetState
from sparktui.model.observations import FetchKind, HttpResult, NodeObservation, VllmObservation
from tests.support.fixture_fleet import scenario_scrapes

CONFIG = """
[[nodes]]
name = "a"
host = "10.0.0.1"
[[nodes.vllm]]
name = "qwen"
port = 8001
[[nodes]]
name = "b"
host = "10.0.0.2"
[[nodes.vllm]]
name = "qwen"
port = 8001
"""


def _ok(body: str) -> HttpResult:
    return HttpResult(url="u", kind=FetchKind.OK, status=200, body=body.encode())


def _feed(state: FleetState, node: str, scrape: str, version: str) -> None:
    state.apply(
        NodeObservation(
            node=node,
            t=0.0,
            wall=0.0,
            vllm=(VllmObservation("qwen", _ok(""), _ok(scrape), _ok(f'{{"version": "{version}"}}')),),
        )
    )


def test_two_hosts_of_one_model_on_different_versions_and_draft_lengths_are_flagged() -> None:
    state = FleetState(parse_config(CONFIG, source="t.toml"))
    _feed(state, "a", scenario_scrapes("mtp2-steady")[0], "0.33.0")
    _feed(state, "b", scenario_scrapes("mtp3-poor-pos2")[0], "0.30.1")
    report = drift_report(state)
    by_node = {row.node: row for row in report.rows}
    assert by_node["a"].values["version"] == "0.33.0" and by_node["b"].values["version"] == "0.30.1"
    assert by_node["a"].values["spec_tokens"] == "2" and by_node["b"].values["spec_tokens"] == "3"
    assert by_node["a"].values["block_size"] == "16"
    assert report.differs("a", "qwen", "version") and report.differs("b", "qwen", "version")
    assert not report.differs("a", "qwen", "block_size")  # the same on both


def test_same_everything_is_no_drift() -> None:
    state = FleetState(parse_config(CONFIG, source="t.toml"))
    for node in ("a", "b"):
        _feed(state, node, scenario_scrapes("mtp2-steady")[0], "0.33.0")
    assert drift_report(state).mismatches == {}


def test_rank_specific_flags_do_not_count_as_drift() -> None:
    head = "vllm serve Qwen/Qwen3-235B --tensor-parallel-size 2 --port 8000 --host 0.0.0.0 --node-rank 0"
    worker = "vllm serve Qwen/Qwen3-235B --tensor-parallel-size 2 --headless --node-rank=1"
    assert (
        normalized_command(head) == normalized_command(worker) == "vllm serve Qwen/Qwen3-235B --tensor-parallel-size 2"
    )
    assert normalized_command(worker + " --kv-cache-dtype fp8") != normalized_command(head)
