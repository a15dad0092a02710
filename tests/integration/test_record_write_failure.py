"""A recording whose file can no longer grow, for real: ``sparktui watch --record`` under a file-size
limit (``prlimit --fsize``), so the kernel refuses SQLite's writes past it (EFBIG) as it would on a full
disk. The recording stops with one line that says so, what was written stays readable, and the watcher
goes on watching and alerting. The dashboard's and the kiosk's banner: ``tests/e2e/test_tmux.py``."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparktui.record.store import RecordingReader
from sparktui.record.types import Kind
from tests.support.fixture_fleet import Faults, FixtureNode, fleet_config, start_node
from tests.support.wait import wait_until

ROOT = Path(__file__).resolve().parents[2]
# Room for the new file and its first records (measured: about 13 polls of one node at 0.25 s), not
# for a minute of them.
FILE_LIMIT = 120_000
# The node's own down alert at once: what the watcher says after its recording stopped.
ALERT_AT_ONCE = '\n[[alerts]]\nname = "node-down"\nmetric = "node_down"\nfor_s = 0.0\nseverity = "crit"\n'


@pytest.fixture
def node() -> Iterator[FixtureNode]:
    started = start_node("spark1", "mtp2-steady", "nvidia_gpu_exporter.prom", advance_every_s=0.5)
    yield started
    for server in started.servers():
        server.stop()


@pytest.mark.slow
async def test_watch_goes_on_when_its_recording_can_no_longer_be_written(node: FixtureNode, tmp_path: Path) -> None:
    config = tmp_path / "fleet.toml"
    config.write_text(fleet_config([node], interval_s=0.25) + ALERT_AT_ONCE)
    recording = tmp_path / "rec.db"
    proc = await asyncio.create_subprocess_exec(
        *("prlimit", f"--fsize={FILE_LIMIT}", sys.executable, "-m", "sparktui", "--config", str(config)),
        *("watch", "--journal", "no", "--record", str(recording)),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.stdout is not None
    stdout = proc.stdout
    lines: list[str] = []

    async def read() -> None:
        while line := await stdout.readline():
            lines.append(line.decode())

    def having(text: str) -> list[str]:
        return [line for line in lines if text in line]

    def said() -> str:
        return "".join(lines)

    reader = asyncio.create_task(read())
    try:
        await wait_until(lambda: having("event=recording-stopped"), 120, what="the recording stopping", detail=said)
        # Still watching: the node goes down after the recording stopped, and its alert fires.
        node.vllm.endpoint.faults = Faults(health_status=503)
        await wait_until(lambda: having("alert=node-down event=firing"), 60, what="node-down firing", detail=said)
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 60) == 0, said()
        await asyncio.wait_for(reader, 10)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader

    (stopped,) = having("event=recording-stopped")  # said once, not at every tick
    assert 'error="recording stopped: disk I/O error (SQLITE_IOERR' in stopped, stopped
    assert f' on {recording}"' in stopped, stopped
    assert "Traceback" not in said()
    (stop,) = having("event=stop")
    ticks_watched = int(stop.split("ticks=")[1].split()[0])
    # What was written before the refusal is a recording that opens and reads to its end.
    recorded = RecordingReader(recording)
    try:
        kinds = [record.kind for record in recorded.records(synthesize_ticks=False)]
    finally:
        recorded.close()
    ticks_recorded = kinds.count(Kind.TICK)
    assert kinds.count(Kind.OBSERVATION) > 0 and ticks_recorded > 0, kinds
    assert ticks_recorded < ticks_watched, (ticks_recorded, ticks_watched)
