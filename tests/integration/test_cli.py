"""The headless commands, run as a user runs them, against fixture servers on 127.0.0.1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.fixture_fleet import Faults, FixtureNode, fixture_fleet, fleet_config, free_port, start_node


def _run(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, SPARKTUI_CONFIG=str(config))
    return subprocess.run(
        [sys.executable, "-m", "sparktui", *args],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture(scope="module")
def fleet() -> Iterator[tuple[list[FixtureNode], Path]]:
    with fixture_fleet(advance_every_s=None) as started:
        yield started


def test_snapshot_text_shows_every_node_and_the_numbers() -> None:
    with fixture_fleet(advance_every_s=0.1) as (nodes, config):  # a new scrape every 0.1 s
        result = _run(config, "snapshot", "--interval", "0.5")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for node in nodes:
        assert f"{node.name}  (127.0.0.1)  up" in out
    assert "spec decode k=3" in out and "spec decode k=2" in out
    assert "hint: draft position 2 adds only" in out  # mtp3-poor-pos2 on spark2
    assert "memory unified with the host" in out
    assert "121.7 GiB total" in out
    assert "service parakeet-asr (asr): up" in out


def test_snapshot_json_carries_the_derived_numbers(fleet: tuple[list[FixtureNode], Path]) -> None:
    nodes, config = fleet
    for node in nodes:
        node.vllm.endpoint.index = 0
    result = _run(config, "snapshot", "--json", "--interval", "0.2")
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    by_name = {n["name"]: n for n in payload["nodes"]}
    assert set(by_name) == {n.name for n in nodes}
    spark2 = by_name["spark2"]["instances"][0]
    assert spark2["status"]["state"] == "up"
    assert spark2["version"] == "0.33.0"
    assert spark2["kv_capacity_tokens"] == 983040
    # Both scrapes hit the same fixture file: no traffic in the window, so ratios are null, not 0.
    rates = spark2["rates"]
    assert rates["generation_tokens_per_s"] == 0
    assert rates["prefix_cache_hit_rate"] is None
    assert rates["spec_decode"]["acceptance_rate"] is None
    assert rates["latency"]["ttft"]["p50"] is None


# What a hostile server puts in /version and in a model_name label: an OSC that renames the tmux pane,
# a CSI that clears the screen, the 8-bit CSI, a bell, and a CR/LF that fakes a line of its own.
OSC_TITLE = "\x1b]2;pwned\x07"
HOSTILE_VERSION = f"0.33{OSC_TITLE}.0\x1b[2J\r\nspark9  (10.0.0.9)  up"
# The label's LF is written as the exposition format's escape (\\n).
HOSTILE_MODEL = "Qwen\x1b[31m3\x9b2J\x1b]52;c;ZXZpbA==\x1b\\.6\\nspark8  (10.0.0.8)  up"


def test_snapshot_prints_no_escape_sequence_or_line_break_a_server_sent(tmp_path: Path) -> None:
    node = start_node("spark1", "mtp2-steady", "gb10")
    try:
        node.vllm.endpoint.version = HOSTILE_VERSION
        node.vllm.endpoint.model_id = HOSTILE_MODEL
        node.vllm.endpoint.scrapes = [
            scrape.replace('model_name="RedHatAI/Qwen3.6-35B-A3B-NVFP4"', f'model_name="{HOSTILE_MODEL}"')
            for scrape in node.vllm.endpoint.scrapes
        ]
        config = tmp_path / "config.toml"
        config.write_text(fleet_config([node]))
        text = _run(config, "snapshot", "--interval", "0.2")
        as_json = _run(config, "snapshot", "--json", "--interval", "0.2")
    finally:
        for server in node.servers():
            server.stop()
    assert text.returncode == 0, text.stderr
    for sent in ("\x1b", "\x9b", "\x07", "\r", "pwned", "ZXZpbA"):
        assert sent not in text.stdout
        assert sent not in as_json.stdout
    assert "vLLM 0.33.0 spark9  (10.0.0.9)  up  Qwen3.6 spark8  (10.0.0.8)  up" in text.stdout
    assert not any(line.startswith(("spark9", "spark8")) for line in text.stdout.splitlines())
    instance = json.loads(as_json.stdout)["nodes"][0]["instances"][0]
    assert instance["version"] == "0.33.0 spark9  (10.0.0.9)  up"
    assert instance["model_name"] == "Qwen3.6 spark8  (10.0.0.8)  up"


def test_check_exits_zero_when_all_is_healthy(fleet: tuple[list[FixtureNode], Path]) -> None:
    _nodes, config = fleet
    result = _run(config, "check", "--interval", "0.1")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == "3 nodes: 3 up"


def test_check_exits_one_when_degraded_and_names_the_problem(fleet: tuple[list[FixtureNode], Path]) -> None:
    nodes, config = fleet
    nodes[1].vllm.endpoint.faults = Faults(metrics="garbage")
    try:
        result = _run(config, "check", "--interval", "0.1")
    finally:
        nodes[1].vllm.endpoint.faults = Faults()
    assert result.returncode == 1
    lines = result.stdout.strip().splitlines()
    assert lines[0].startswith("spark2: degraded: vllm: /metrics is not Prometheus text: line 1")
    assert lines[-1] == "3 nodes: 1 degraded, 2 up"


@pytest.mark.slow
def test_one_node_with_a_bad_bucket_bound_is_degraded_and_every_other_node_is_reported(
    fleet: tuple[list[FixtureNode], Path],
) -> None:
    nodes, config = fleet
    nodes[1].vllm.endpoint.faults = Faults(metrics="bad-bucket-bound")
    try:
        check = _run(config, "check", "--interval", "0.1")
        snapshot = _run(config, "snapshot", "--interval", "0.1")
        snapshot_json = _run(config, "snapshot", "--json", "--interval", "0.1")
        alerts = _run(config, "check", "--alerts", "--interval", "0.1")  # what `watch` would send
    finally:
        nodes[1].vllm.endpoint.faults = Faults()
    reason = "vllm: /metrics: bad bucket bound le='abc' in vllm:time_to_first_token_seconds_bucket"
    assert check.returncode == 1, check.stderr
    assert check.stdout.strip().splitlines() == [f"spark2: degraded: {reason}", "3 nodes: 1 degraded, 2 up"]
    assert snapshot.returncode == 0, snapshot.stderr
    assert "spark2  (127.0.0.1)  degraded" in snapshot.stdout
    assert f"! {reason}" in snapshot.stdout
    for node in (nodes[0], nodes[2]):
        assert f"{node.name}  (127.0.0.1)  up" in snapshot.stdout
    payload = json.loads(snapshot_json.stdout)
    spark2 = next(n for n in payload["nodes"] if n["name"] == "spark2")
    assert spark2["status"] == {"state": "degraded", "reasons": [reason]}
    assert alerts.returncode == 1, alerts.stderr
    unreadable = "warn spark2/vllm metrics-unreadable: spark2/vllm /metrics cannot be read"
    evidence = reason.removeprefix("vllm: ")
    assert any(line.startswith(f"{unreadable} ({evidence})") for line in alerts.stdout.splitlines())


@pytest.mark.slow
def test_a_position_label_int_refuses_and_a_huge_context_length_crash_no_mode_and_stop_no_other_node(
    fleet: tuple[list[FixtureNode], Path],
) -> None:
    """Issue 32: a spec-decode ``position`` of "²" (``str.isdigit()`` says yes, ``int()`` no) was a
    traceback in ``snapshot`` and ``check``, and a ``max_model_len`` of 10**400 killed the dashboard."""
    nodes, config = fleet
    endpoint = nodes[1].vllm.endpoint
    scrapes, endpoint.scrapes = endpoint.scrapes, [s.replace('position="1"', 'position="²"') for s in endpoint.scrapes]
    endpoint.max_model_len = 10**400
    try:
        check = _run(config, "check", "--interval", "0.1")
        snapshot = _run(config, "snapshot", "--json", "--interval", "0.1")
        text = _run(config, "snapshot", "--interval", "0.1")
        alerts = _run(config, "check", "--alerts", "--interval", "0.1")
    finally:
        endpoint.scrapes, endpoint.max_model_len = scrapes, 131072
    wire = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
    reason = f"vllm: /metrics: {wire} has position='²', which is not a whole number"
    for run in (check, snapshot, text, alerts):
        assert "Traceback" not in run.stderr, run.stderr
    assert check.returncode == 1
    assert check.stdout.strip().splitlines() == [f"spark2: degraded: {reason}", "3 nodes: 1 degraded, 2 up"]
    assert f"! {reason}" in text.stdout
    assert "without engine stats" not in text.stdout  # a refused scrape is not --disable-log-stats
    payload = json.loads(snapshot.stdout)
    by_name = {n["name"]: n for n in payload["nodes"]}
    assert by_name["spark2"]["status"] == {"state": "degraded", "reasons": [reason]}
    assert by_name["spark2"]["instances"][0]["max_model_len"] is None
    assert by_name["spark1"]["status"]["state"] == by_name["spark3"]["status"]["state"] == "up"
    assert alerts.returncode == 1
    assert any(line.startswith("warn spark2/vllm metrics-unreadable") for line in alerts.stdout.splitlines())


def test_check_exits_two_when_a_node_is_down(fleet: tuple[list[FixtureNode], Path], tmp_path: Path) -> None:
    nodes, _config = fleet
    dead = fleet_config(nodes).replace(nodes[0].vllm.url, f"http://127.0.0.1:{free_port()}")
    config = tmp_path / "config.toml"
    config.write_text(dead)
    result = _run(config, "check", "--json", "--interval", "0.1")
    assert result.returncode == 2
    payload = json.loads(result.stdout)
    assert payload["exit_code"] == 2
    spark1 = next(n for n in payload["nodes"] if n["name"] == "spark1")
    assert spark1["status"]["state"] == "down"
    assert "vllm: /health connection refused" in spark1["status"]["reasons"]


def test_bad_config_prints_every_error_and_exits_two(tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text('poll_interval_s = -1\n[[nodes]]\nname = "a b"\nhost = "x"\n')
    for command in (["check"], ["snapshot"], ["config", "check"]):
        result = _run(config, *command)
        assert result.returncode == 2
        errors = result.stderr.strip().splitlines()
        assert len(errors) >= 2
        assert all(line.startswith(str(config)) for line in errors)
        assert "Traceback" not in result.stderr


def test_config_check_reports_ok_with_counts(fleet: tuple[list[FixtureNode], Path]) -> None:
    _nodes, config = fleet
    result = _run(config, "config", "check")
    assert result.returncode == 0
    assert result.stdout.strip() == f"{config}: ok: 3 nodes, 3 vLLM instances, 3 side services"


def test_missing_config_says_what_to_do(tmp_path: Path) -> None:
    result = _run(tmp_path / "nope.toml", "check")
    assert result.returncode == 2
    assert "sparktui init" in result.stderr and "sparktui demo" in result.stderr


@pytest.mark.slow
def test_screenshot_runs_the_demo_for_the_seconds_asked(tmp_path: Path) -> None:
    """``--seconds`` is how much of the scenario the picture shows: the fleet chart's span says so."""
    import re

    out = tmp_path / "fleet.svg"
    done = subprocess.run(
        [sys.executable, "-m", "sparktui", "screenshot", "--seconds", "8", "--out", str(out)],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    spans = [int(s) for s in re.findall(r"over&#160;(\d+)s", out.read_text())]
    assert spans and max(spans) <= 8  # the default would run 60 s


@pytest.mark.slow
def test_screenshot_without_out_writes_into_the_current_directory(tmp_path: Path) -> None:
    """Run from anywhere, the default file lands where the operator is, not in a docs/ folder there."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    done = subprocess.run(
        [sys.executable, "-m", "sparktui", "screenshot", "--seconds", "2"],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["sparktui-fleet-spark-dark.svg"]
    assert "<svg" in (tmp_path / "sparktui-fleet-spark-dark.svg").read_text()


def test_config_check_of_a_fleet_with_no_vllm_says_there_is_nothing_to_watch(tmp_path: Path) -> None:
    config = tmp_path / "fleet.toml"
    config.write_text('[[nodes]]\nname = "spark1"\nhost = "127.0.0.1"\n')
    result = _run(config, "config", "check")
    assert result.returncode == 1
    assert result.stdout.strip() == (
        f"{config}: 1 node, 0 vLLM instances, 0 side services: no [[nodes.vllm]] entry, so there is no vLLM to watch"
    )


def test_the_dashboard_without_a_config_says_in_one_line_how_to_try_the_demo_or_write_one(tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    result = subprocess.run(
        [sys.executable, "-m", "sparktui", "--config", str(missing)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert result.returncode == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith(str(missing)) and "sparktui init" in line and "sparktui demo" in line


def test_a_config_others_can_read_holding_a_secret_gets_one_warning_line(tmp_path: Path) -> None:
    config = tmp_path / "fleet.toml"
    hook = "https://hooks.slack.com/services/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"
    config.write_text(
        '[[nodes]]\nname = "spark1"\nhost = "127.0.0.1"\n[[nodes.vllm]]\nport = 8001\n'
        f'[[notifiers]]\nkind = "slack"\nurl = "{hook}"\n',
        encoding="utf-8",
    )
    config.chmod(0o644)
    shared = _run(config, "config", "check")
    config.chmod(0o600)
    private = _run(config, "config", "check")
    assert (shared.returncode, private.returncode) == (0, 0), shared.stderr + private.stderr
    assert shared.stderr == (
        f"sparktui: warning: {config} is readable by others (mode 0644) and holds a secret in notifiers[0].url; "
        f"chmod 600 {config}\n"
    )
    assert hook not in shared.stderr + shared.stdout
    assert private.stderr == ""


@pytest.mark.parametrize(
    "command", [("snapshot", "--interval", "0.1"), ("check", "--interval", "0.1"), ("config", "check")]
)
def test_a_full_disk_behind_stdout_is_one_line_not_a_traceback(
    fleet: tuple[list[FixtureNode], Path], command: tuple[str, ...]
) -> None:
    _nodes, config = fleet
    with Path("/dev/full").open("w") as full:  # the kernel's device that answers every write with ENOSPC
        done = subprocess.run(
            [sys.executable, "-m", "sparktui", *command],
            check=False,
            env=dict(os.environ, SPARKTUI_CONFIG=str(config)),
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    assert done.returncode == 2
    assert done.stderr == f"sparktui {command[0]}: cannot write the output (No space left on device)\n"
