"""The engine seam as a seam: an engine defined outside sparktui (``tests/support/toy_engine.py``),
offered the way an installed package offers one (an entry point of the group ``sparktui.engines``), is
polled, read and shown like vLLM or llama.cpp (the fleet screen in a real terminal, ``snapshot --json``,
``check``) with no file of sparktui changed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.test_tmux import TMUX, Tmux
from tests.support.toy_engine import LACKS, ToyServer, config, install

ROOT = Path(__file__).resolve().parents[2]


def _env(site: Path) -> dict[str, str]:
    """This process's environment with the plugin's folder (and the tests, where it lives) on the path."""
    path = os.pathsep.join([str(site), str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return {**{k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}, "PYTHONPATH": path}


def _sparktui(site: Path, config_file: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sparktui", "--config", str(config_file), *args],
        env=_env(site),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_an_installed_engine_is_read_in_snapshot_json_and_check(tmp_path: Path) -> None:
    site = install(tmp_path / "site")
    with ToyServer().serving() as server:
        config_file = tmp_path / "toy.toml"
        config_file.write_text(config(server.port))
        snapshot = _sparktui(site, config_file, "snapshot", "--json", "--interval", "0.5")
        assert snapshot.returncode == 0, snapshot.stderr
        (node,) = json.loads(snapshot.stdout)["nodes"]
        (instance,) = node["instances"]
        assert (instance["engine"], instance["version"], instance["model_name"]) == ("Toy", "toy-1.0", "toy-model")
        assert instance["status"]["state"] == "up", instance["status"]
        assert instance["running"] == 1
        assert instance["rates"]["generation_tokens_per_s"] > 0  # two scrapes, per_scrape tokens apart
        assert instance["lacks"] == {"latency": LACKS}
        check = _sparktui(site, config_file, "check", "--no-canary")
        assert check.returncode == 0, check.stdout + check.stderr
        assert "/about" in server.asked and "/metrics" in server.asked  # its poll plan, and nothing of vLLM's
        assert not any(path.startswith(("/version", "/metrics?", "/slots", "/props")) for path in server.asked)


def test_without_its_package_the_engine_is_refused_in_one_line(tmp_path: Path) -> None:
    config_file = tmp_path / "toy.toml"
    config_file.write_text(config(9))
    result = _sparktui(tmp_path / "empty", config_file, "check")
    assert result.returncode != 0
    (line,) = result.stderr.strip().splitlines()
    assert (
        "nodes[0].vllm[0].engine: 'toy' is no engine sparktui knows "
        "(it knows llamacpp, nim, ollama, sglang, trtllm, vllm" in line
    )


def test_a_plugin_that_does_not_load_is_one_line_naming_it(tmp_path: Path) -> None:
    site = install(tmp_path / "site", target="tests.support.no_such_module:ENGINE")
    config_file = tmp_path / "toy.toml"
    config_file.write_text(config(9))
    result = _sparktui(site, config_file, "check")
    assert result.returncode != 0
    (line,) = result.stderr.strip().splitlines()
    assert "engine plugin toy (tests.support.no_such_module:ENGINE) does not load: ModuleNotFoundError" in line


def _row_with_rate(tmux: Tmux, model: str, timeout_s: float) -> str:
    """The fleet row of ``model`` once its generation column shows a number (from the second scrape)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        row = next((line for line in tmux.screen().splitlines() if model in line), "")
        fields = row.split()
        if len(fields) > 4 and fields[4][:1].isdigit():
            return row
        time.sleep(0.1)
    raise AssertionError(f"no generation rate on {model}'s row within {timeout_s} s:\n{tmux.screen()}")


def test_an_installed_engine_shows_on_the_fleet_screen_in_a_real_terminal(tmp_path: Path) -> None:
    assert TMUX is not None or os.environ.get("CI") != "true", "tmux is required under CI"
    if TMUX is None:
        pytest.skip("tmux not installed")
    site = install(tmp_path / "site")
    tmux = Tmux()
    try:
        with ToyServer().serving() as server:
            config_file = tmp_path / "toy.toml"
            config_file.write_text(config(server.port))
            env = " ".join(f"{k}={v}" for k, v in _env(site).items() if k == "PYTHONPATH")
            tmux.start(f"env {env} {sys.executable} -m sparktui --config {config_file}")
            tmux.wait_for("toy-model", timeout_s=30)
            row = _row_with_rate(tmux, "toy-model", timeout_s=30)
            assert row.split()[:4] == ["box", "●", "up", "toy-model"], row
            tmux.keys("Enter")  # the node screen names the engine and says why latency is "–"
            tmux.wait_for("Toy toy-1.0", timeout_s=15)
            tmux.wait_for(LACKS, timeout_s=15)
    finally:
        tmux.kill()
