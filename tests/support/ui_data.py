"""Deterministic fleets for the UI tests and the screenshots: real fixture scrapes and host frames
fed into the model at fixed times, with a frozen clock."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

from sparktui.config import parse_config
from sparktui.model.host import FrameSplitter, HostSample, parse_frame
from sparktui.model.logbuffer import LogBuffer
from sparktui.model.observations import FetchKind, HostUpdate, HttpResult, NodeObservation, ServerObservation
from sparktui.model.specs import FleetSpec
from sparktui.ui.app import SparkApp, make_app
from tests.conftest import DATA
from tests.support import dp_data
from tests.support.fixture_fleet import gb10_nvidia_exporter_page, scenario_scrapes

NOW = 30.0

CONFIG = """
poll_interval_s = 1.0
[[nodes]]
name = "spark1"
host = "192.168.1.11"
[[nodes.vllm]]
name = "gptoss"
port = 8001
container = "vllm_gptoss"
gpu_memory_utilization = 0.55
[nodes.gpu_exporter]
port = 9835
[[nodes.services]]
name = "parakeet-asr"
kind = "asr"
port = 8765

[[nodes]]
name = "spark2"
host = "192.168.1.12"
[[nodes.vllm]]
name = "gemma4"
port = 8001
unit = "vllm-gemma4.service"
[nodes.gpu_exporter]
port = 9835

[[nodes]]
name = "spark3"
host = "192.168.1.13"
[[nodes.vllm]]
name = "qwen235"
port = 8000
role = "head"
job = "qwen235-tp2"

[[nodes]]
name = "spark4"
host = "192.168.1.14"
[[nodes.vllm]]
name = "qwen235"
role = "worker"
job = "qwen235-tp2"
"""


def fleet_spec() -> FleetSpec:
    return parse_config(CONFIG, source="ui-test.toml")


def _ok(url: str, body: str = "", status: int = 200, elapsed: float = 0.012) -> HttpResult:
    return HttpResult(url=url, kind=FetchKind.OK, status=status, body=body.encode(), elapsed_s=elapsed)


def _frames() -> list[HostSample]:
    splitter = FrameSplitter()
    frames: list[HostSample] = []
    for line in (DATA / "host" / "frames-serving.txt").read_text().splitlines():
        frame = splitter.feed(line)
        if frame is not None:
            frames.append(parse_frame(frame))
    return frames


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, t: float = 0.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def feed(app: SparkApp, clock: Clock) -> None:
    """Thirty seconds of a small fleet: spark1 (with host state) and spark2 serving, spark3 refusing
    connections, spark4 its tensor-parallel worker."""
    state = app.state
    steady = scenario_scrapes("mtp2-steady")
    poor = scenario_scrapes("mtp3-poor-pos2")
    gpu = gb10_nvidia_exporter_page()
    version = '{"version": "0.33.0"}'
    refused = HttpResult(url="u", kind=FetchKind.REFUSED, error="connection refused")
    frames = _frames()
    for second in range(0, 30, 2):
        t = clock.t = float(second)
        state.apply(
            NodeObservation(
                node="spark1",
                t=t,
                wall=1e9 + t,
                vllm=(ServerObservation("gptoss", _ok("u"), _ok("u", steady[second]), _ok("u", version)),),
                gpu_exporter=_ok("g", gpu),
                services=(("parakeet-asr", _ok("s")),),
            )
        )
        state.apply(
            NodeObservation(
                node="spark2",
                t=t,
                wall=1e9 + t,
                vllm=(ServerObservation("gemma4", _ok("u"), _ok("u", poor[second]), _ok("u", version)),),
                gpu_exporter=_ok("g", gpu),
            )
        )
        state.apply(
            NodeObservation(node="spark3", t=t, wall=1e9 + t, vllm=(ServerObservation("qwen235", refused, refused),))
        )
        state.apply(NodeObservation(node="spark4", t=t, wall=1e9 + t, vllm=(ServerObservation("qwen235", None, None),)))
        state.apply_host(HostUpdate("spark1", t, sample=frames[(second // 2) % len(frames)]))
        app.refresh_views()
    clock.t = NOW


# A render tick longer than any test: a snapshot is of the first tick, however slow the machine is (a
# second tick on a loaded machine let rules that need two evaluations open one more finding).
ONE_TICK_S = 3600.0


def fed_app(keymap: dict[str, str] | None = None, **options: object) -> SparkApp:
    """An app that collects nothing, frozen at NOW, holding ``feed``'s thirty seconds; ``keymap`` is
    the config's ``[keymap]``."""
    clock = Clock()
    spec = fleet_spec()
    if keymap is not None:
        spec = spec.model_copy(update={"keymap": keymap})
    app = make_app(spec, collect=False, clock=clock, **options)
    feed(app, clock)
    return app


def fire_node_down(app: SparkApp) -> None:
    """Move a ``fed_app`` past the node-down rule's 30 s: spark3 has refused connections since the
    start, so its alert fires (the other nodes' polls keep finishing)."""
    for t in (NOW + 40, NOW + 75):
        app.clock.t = t  # type: ignore[attr-defined]
        for node in ("spark1", "spark2", "spark3", "spark4"):
            app.state.nodes[node].last_t = t
        app.refresh_views()


def serving_fleet_app(nodes: int, **options: object) -> SparkApp:
    """A ``fed_app``-like app of ``nodes`` single-model nodes, every one serving (the kiosk's layouts)."""
    config = "poll_interval_s = 1.0\n" + "".join(
        f'[[nodes]]\nname = "spark{n}"\nhost = "192.168.1.{10 + n}"\n'
        f'[[nodes.vllm]]\nname = "model{n}"\nport = 8001\n[nodes.gpu_exporter]\nport = 9835\n'
        for n in range(1, nodes + 1)
    )
    clock = Clock()
    app = make_app(parse_config(config, source="kiosk-test.toml"), collect=False, clock=clock, **options)
    steady = scenario_scrapes("mtp2-steady")
    gpu = gb10_nvidia_exporter_page()
    version = '{"version": "0.33.0"}'
    frames = _frames()
    for second in range(0, 30, 2):
        t = clock.t = float(second)
        for n in range(1, nodes + 1):
            vllm = ServerObservation(f"model{n}", _ok("u"), _ok("u", steady[second]), _ok("u", version))
            app.state.apply(
                NodeObservation(node=f"spark{n}", t=t, wall=1e9 + t, vllm=(vllm,), gpu_exporter=_ok("g", gpu))
            )
            app.state.apply_host(HostUpdate(f"spark{n}", t, sample=frames[(second // 2) % len(frames)]))
        app.refresh_views()
    clock.t = NOW
    return app


@contextlib.contextmanager
def local_zone(zone: str) -> Iterator[None]:
    """Local time in ``zone`` (a ``TZ`` value) for what runs inside: the kiosk's clock shows local time."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = zone
    time.tzset()
    try:
        yield
    finally:
        if before is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = before
        time.tzset()


def dp_fleet_app(**options: object) -> SparkApp:
    """An app of two serving nodes, frozen at NOW: ``spark-dp``, whose one instance is the two-engine
    data-parallel fixture (engine 1 busier), and ``spark1``, one engine (``mtp2-steady``)."""
    config = (
        dp_data.CONFIG
        + '[[nodes]]\nname = "spark1"\nhost = "192.168.1.11"\n[[nodes.vllm]]\nname = "gptoss"\nport = 8001\n'
    )
    clock = Clock()
    app = make_app(parse_config(config, source="dp-test.toml"), collect=False, clock=clock, **options)
    steady = scenario_scrapes("mtp2-steady")
    for index, observation in enumerate(dp_data.dp2_observations()):
        clock.t = observation.t
        app.state.apply(observation)
        single = ServerObservation("gptoss", _ok("u"), _ok("u", steady[index]), _ok("u", '{"version": "0.33.0"}'))
        app.state.apply(NodeObservation(node="spark1", t=observation.t, wall=observation.wall, vllm=(single,)))
        app.refresh_views()
    clock.t = NOW
    return app


def with_failed_start_log(app: SparkApp) -> SparkApp:
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
