"""How much of each log the core keeps: the dashboard its scrollback (10,000 lines), a log no one
scrolls (``sparktui watch``, the kiosk) ``UNSHOWN_LOG_LINES``, so a process that runs for weeks fills
its logs in minutes and is flat after (docs/performance.md, "The stores that grow with time")."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta

import pytest

from sparktui.config import parse_config
from sparktui.headless.watch import Watcher
from sparktui.model.logbuffer import DEFAULT_MAX_LINES, LogLine
from sparktui.monitor.core import UNSHOWN_LOG_LINES, Monitor
from sparktui.ui.app import make_app

FLEET = parse_config(
    '[[nodes]]\nname = "spark1"\nhost = "10.0.0.1"\n[[nodes.vllm]]\nname = "qwen"\nport = 8001\n',
    source="test.toml",
)
START = datetime(2026, 5, 30, 10, 0, tzinfo=UTC)


def fill(monitor: Monitor, count: int) -> int:
    """``count`` lines of qwen's log through the core; how many it holds after."""
    lines = [LogLine(i, START + timedelta(seconds=i), f"INFO line {i}") for i in range(count)]
    monitor.log_batch("spark1", "qwen", lines)
    buffer = monitor.log_buffers["spark1"]["qwen"]
    assert buffer.tail(1)[0].text == f"INFO line {count - 1}"  # the newest kept, the oldest dropped
    return len(buffer)


@pytest.mark.parametrize(
    ("who", "kept"),
    [("dashboard", DEFAULT_MAX_LINES), ("kiosk", UNSHOWN_LOG_LINES), ("watch", UNSHOWN_LOG_LINES)],
)
def test_a_log_no_one_scrolls_keeps_fewer_lines(who: str, kept: int) -> None:
    assert UNSHOWN_LOG_LINES < DEFAULT_MAX_LINES
    if who == "watch":
        monitor = Watcher(FLEET, out=io.StringIO()).monitor
    else:
        monitor = make_app(FLEET, collect=False, kiosk=who == "kiosk").monitor
    assert fill(monitor, DEFAULT_MAX_LINES + 500) == kept
