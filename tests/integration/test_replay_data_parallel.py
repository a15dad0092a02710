"""A recording of a data-parallel server replays with each engine's numbers: recordings hold the raw
``/metrics`` bodies, so the replay derives the per-engine breakdown exactly as the live model did."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparktui.config import parse_config
from sparktui.record.recorder import Recorder
from sparktui.record.replay import Feeder
from sparktui.record.store import RecordingReader
from tests.support.dp_data import CONFIG, EXPECTED, dp2_fleet, dp2_observations
from tests.support.monitoring import monitor_for


class _Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_a_recorded_data_parallel_server_replays_with_each_engines_numbers(tmp_path: Path) -> None:
    spec = parse_config(CONFIG, source="dp2-test.toml")
    clock = _Clock()
    recorder = Recorder(tmp_path / "dp.db", spec, clock=clock, wall=lambda: 1e9 + clock.t)
    for observation in dp2_observations():
        clock.t = observation.t
        recorder.observation(observation)
        recorder.tick(observation.t)
    recorder.close()
    assert recorder.problem is None

    reader = RecordingReader(tmp_path / "dp.db")
    monitor = monitor_for(reader.fleet, window_s=60.0)  # a window over the whole recording
    feeder = Feeder(monitor, reader.gap_s)
    for record in reader.records():
        feeder.feed(record)
    (replayed,) = monitor.views
    live_state, now = dp2_fleet()  # the same observations straight into the model, viewed at the last tick
    (live,) = live_state.view(now, window_s=60.0)
    instance = replayed.instances[0]

    per_engine = EXPECTED["window_first_to_last"]["per_engine"]
    assert [e.engine for e in instance.engines] == EXPECTED["engines"]
    for engine in instance.engines:
        assert engine.rates is not None
        assert engine.rates.generation_tokens_per_s == pytest.approx(
            per_engine[engine.engine]["generation_tokens_per_s"], rel=1e-4
        )
        assert engine.kv_usage == pytest.approx(EXPECTED["last_scrape"]["kv_cache_usage_perc"][engine.engine])
    assert instance.imbalanced_engines == tuple(EXPECTED["engines"])
    assert instance.kv is not None and instance.kv.busiest_engine == "1"
    assert live.instances[0].engines == instance.engines
    assert live.instances[0].kv == instance.kv
