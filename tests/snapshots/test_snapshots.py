"""SVG snapshots of the fleet and node screens, in two themes and two sizes, and of the log view, from
deterministic data (``tests/support/ui_data.py``, and a log written here). Update with ``pytest
tests/snapshots/test_snapshots.py --snapshot-update`` after a deliberate change, and look at the report
before committing."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import pytest
from textual.pilot import Pilot

from sparktui.model.logbuffer import LogBuffer
from sparktui.ui.app import SparkApp
from tests.support.ui_data import fed_app

SnapCompare = Callable[..., bool]


async def _open_node(pilot: Pilot[None]) -> None:
    await pilot.press("enter")
    await pilot.pause()


def _with_log(app: SparkApp) -> SparkApp:
    """spark1's log: a start that fails on a known signature, then a serving engine."""
    t0 = datetime(2026, 11, 26, 9, 0, 0, tzinfo=UTC)
    buffer = LogBuffer()
    lines = [
        "Started vllm-gptoss.service - vLLM openai/gpt-oss-120b.",
        "(APIServer pid=4242) INFO [api_server.py:1885] vLLM API server version 0.33.0",
        "(EngineCore_DP0 pid=4301) ValueError: Free memory on device cuda:0 (4.75/119.67 GiB) on startup is less "
        "than desired GPU memory utilization (0.9, 107.7 GiB). Decrease GPU memory utilization or reduce GPU "
        "memory used by other processes.",
        "vllm-gptoss.service: Main process exited, code=exited, status=1/FAILURE",
        "Started vllm-gptoss.service - vLLM openai/gpt-oss-120b.",
        "(APIServer pid=4420) INFO [api_server.py:1885] vLLM API server version 0.33.0",
    ]
    lines += [
        f'(APIServer pid=4420) INFO:     192.168.1.{20 + n}:5{n:04d} - "POST /v1/chat/completions HTTP/1.1" 200 OK'
        for n in range(30)
    ]
    for n, line in enumerate(lines):
        buffer.append(t0 + timedelta(seconds=n), line)
    app.monitor.log_buffers["spark1"] = {"gptoss": buffer}
    return app


@pytest.fixture
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Log times are shown in local time: the snapshots are made in UTC wherever they run."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.parametrize("theme", ["spark-dark", "spark-light"])
@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
@pytest.mark.parametrize("screen", ["fleet", "node"])
def test_screens(snap_compare: SnapCompare, theme: str, size: tuple[int, int], screen: str, utc: None) -> None:
    app = fed_app(theme=theme)
    if screen == "node":
        _with_log(app)  # the node screen's log tail
    assert snap_compare(app, terminal_size=size, run_before=_open_node if screen == "node" else None)


async def _open_log_and_search(pilot: Pilot[None]) -> None:
    await pilot.press("enter", "l", "slash", *"free memory", "enter")
    await pilot.pause()


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
def test_log_view(snap_compare: SnapCompare, size: tuple[int, int], utc: None) -> None:
    """The log view, a search made: the signature line in the critical colour, its match highlighted."""
    assert snap_compare(_with_log(fed_app()), terminal_size=size, run_before=_open_log_and_search)
