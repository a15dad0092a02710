"""Dead data does not look alive (issue 18): a node's age counts from its last good answer, every part
of its view read from somewhere carries how old it is, and an instance that does not answer shows no
gauges or rates. Launch readiness is not predicted from a powered-off node or for a TP worker.

Pure: a real ``FleetState`` fed recorded scrapes (tests/data/vllm-0.33), a GB10 exporter page and
sampler frames (tests/data/host), and the diagnosis engine over its views."""

from __future__ import annotations

from dataclasses import replace

from sparktui.config import load_catalogue, parse_config
from sparktui.diagnosis.engine import DiagnosisEngine
from sparktui.engines import readings
from sparktui.model.fleet import FleetState, NodeView
from sparktui.model.host import FrameSplitter, HostSample, ServiceState, parse_frame
from sparktui.model.observations import FetchKind, HostUpdate, HttpResult, NodeObservation, ServerObservation
from sparktui.model.status import State
from tests.conftest import DATA
from tests.support.fixture_fleet import gb10_nvidia_exporter_page, scenario_scrapes

CONFIG = """
poll_interval_s = 1.0
timeout_s = 2.0
stale_after = 3
[[nodes]]
name = "spark1"
host = "10.0.0.1"
[[nodes.vllm]]
name = "gptoss"
port = 8001
container = "vllm_gptoss"
gpu_memory_utilization = 0.9
[nodes.gpu_exporter]
port = 9835

[[nodes]]
name = "spark2"
host = "10.0.0.2"
[[nodes.vllm]]
name = "big"
port = 8000
unit = "vllm-big.service"
role = "head"
job = "big-tp2"
gpu_memory_utilization = 0.9

[[nodes]]
name = "spark3"
host = "10.0.0.3"
[[nodes.vllm]]
name = "big"
unit = "vllm-big-worker.service"
role = "worker"
job = "big-tp2"
gpu_memory_utilization = 0.9
"""
FLEET = parse_config(CONFIG, source="test.toml")
STEADY = scenario_scrapes("mtp2-steady")
GPU = gb10_nvidia_exporter_page()


def ok(body: str = "", status: int = 200) -> HttpResult:
    return HttpResult(url="u", kind=FetchKind.OK, status=status, body=body.encode(), elapsed_s=0.01)


REFUSED = HttpResult(url="u", kind=FetchKind.REFUSED, error="connection refused")
TIMEOUT = HttpResult(url="u", kind=FetchKind.TIMEOUT, error="timed out")


def frames(name: str) -> list[HostSample]:
    splitter = FrameSplitter()
    found = [splitter.feed(line) for line in (DATA / "host" / name).read_text().splitlines()]
    return [parse_frame(frame) for frame in found if frame is not None]


SERVING = frames("frames-serving.txt")
INCIDENT = frames("frame-incident.txt")[0]  # MemAvailable 30.0 GiB: 0.9 x 121.7 GiB would not fit


def poll(state: FleetState, t: float, health: HttpResult, metrics: HttpResult, gpu: HttpResult) -> None:
    vllm = (ServerObservation("gptoss", health, metrics),)
    state.apply(NodeObservation(node="spark1", t=t, wall=1e9 + t, vllm=vllm, gpu_exporter=gpu))


def spark(state: FleetState, t: float, name: str = "spark1") -> NodeView:
    return {v.name: v for v in state.view(t, window_s=30.0)}[name]


def serving_for(state: FleetState, seconds: int) -> None:
    for second in range(seconds):
        poll(state, float(second), ok(), ok(STEADY[second]), ok(GPU))
        state.apply_host(HostUpdate("spark1", float(second), sample=SERVING[second % len(SERVING)]))


def test_a_powered_off_node_ages_from_its_last_good_answer_and_every_part_says_how_old_it_is() -> None:
    state = FleetState(FLEET, readings())
    serving_for(state, 5)  # the last good answer at t=4
    view = spark(state, 4.0)
    assert (view.age_s, view.gpu_age_s, view.host_age_s) == (0.0, 0.0, 0.0)
    assert not any(view.is_stale(part) for part in ("node", "gpu", "host"))
    instance = view.instances[0]
    assert instance.running is not None and instance.kv_usage is not None and instance.rates is not None

    # Powered off at t=5: every probe times out, the SSH connection is lost; polls still finish.
    lost = "ssh: spark1 (10.0.0.1:22): connection lost"
    state.apply_host(HostUpdate("spark1", 5.0, problem=lost, connection_lost=True))
    for second in range(5, 41):
        poll(state, float(second), TIMEOUT, TIMEOUT, TIMEOUT)
    view = spark(state, 40.0)
    assert view.age_s == 36.0  # from t=4, not from the (timed-out) poll at t=40
    assert view.gpu_age_s == 36.0 and view.host_age_s == 36.0
    assert view.is_stale("node") and view.is_stale("gpu") and view.is_stale("host")
    assert view.gpu is not None and view.host_memory is not None  # kept, for a screen to show dimmed
    instance = view.instances[0]
    assert (instance.running, instance.waiting, instance.kv_usage, instance.rates) == (None, None, None, None)
    assert instance.metrics_age_s == 36.0
    assert view.status.state is State.DOWN


def test_an_engine_dead_instance_shows_no_gauges_or_rates_though_its_metrics_still_answer() -> None:
    """A dead engine core: /health 503, and the API still serves the last numbers the core published."""
    state = FleetState(FLEET, readings())
    serving_for(state, 5)
    for second in range(5, 9):
        poll(state, float(second), ok(status=503), ok(STEADY[4]), ok(GPU))
    view = spark(state, 8.0)
    instance = view.instances[0]
    assert instance.status.state is State.DOWN
    assert (instance.running, instance.waiting, instance.kv_usage, instance.rates) == (None, None, None, None)
    assert view.age_s == 0.0 and not view.is_stale("gpu")  # the node answers: its GPU numbers are live


def test_stale_limits_come_from_the_fleet_settings() -> None:
    state = FleetState(FLEET, readings())
    serving_for(state, 1)
    view = spark(state, 0.0)
    assert view.stale_after_s == 4.0  # max(stale_after 3 x 1 s, 2 x timeout 2 s)
    assert view.host_stale_after_s == 10.0  # max(3 x 1 s, 10 s)
    assert not spark(state, 4.0).is_stale("gpu") and spark(state, 4.5).is_stale("gpu")
    assert not spark(state, 10.0).is_stale("host") and spark(state, 10.5).is_stale("host")


def test_launch_readiness_is_not_predicted_from_a_powered_off_node_nor_for_a_tp_worker() -> None:
    engine = DiagnosisEngine(load_catalogue())
    state = FleetState(FLEET, readings())
    # spark1 serves, its memory taken by its own vLLM, then the node goes away (no new host sample).
    serving_for(state, 3)
    state.apply_host(HostUpdate("spark1", 2.0, sample=INCIDENT))
    for second in range(3, 40):
        poll(state, float(second), TIMEOUT, TIMEOUT, TIMEOUT)
        engine.evaluate(spark(state, float(second)), None, float(second))
    assert "launch-readiness" not in {f.id for f in engine.active("spark1")}

    # spark3: the worker of a stopped tensor-parallel job, on a node short of memory.
    for second in range(0, 5):
        t = float(second)
        state.apply(NodeObservation(node="spark2", t=t, wall=1e9 + t, vllm=(ServerObservation("big", REFUSED, None),)))
        state.apply(NodeObservation(node="spark3", t=t, wall=1e9 + t, vllm=(ServerObservation("big", None, None),)))
        state.apply_host(HostUpdate("spark3", t, sample=INCIDENT))
        worker = spark(state, t, "spark3")
        engine.evaluate(worker, None, t)
    assert worker.instances[0].launch is not None and worker.instances[0].launch.ready is False
    assert "launch-readiness" not in {f.id for f in engine.active("spark3")}


def test_launch_readiness_still_warns_for_a_stopped_instance_on_a_live_node() -> None:
    """The near miss of the test above: the node answers and its host state is fresh."""
    engine = DiagnosisEngine(load_catalogue())
    state = FleetState(FLEET, readings())
    for second in range(0, 4):
        t = float(second)
        poll(state, t, REFUSED, REFUSED, ok(GPU))
        state.apply_host(HostUpdate("spark1", t, sample=INCIDENT))
        engine.evaluate(spark(state, t), None, t)
    assert "launch-readiness" in {f.id for f in engine.active("spark1")}


def test_launch_readiness_is_not_predicted_while_a_start_is_loading() -> None:
    """The engine-dead scenario's restart: the new process reads its weights, MemAvailable falls with
    them, and the start is going well; the memory check's failure would show as its own log line."""
    engine = DiagnosisEngine(load_catalogue())
    state = FleetState(FLEET, readings())
    running = ServiceState("gptoss", "docker", "vllm_gptoss", "running", restarts=1)
    loading = replace(INCIDENT, services={"gptoss": running})
    for second in range(0, 4):
        t = float(second)
        poll(state, t, REFUSED, REFUSED, ok(GPU))
        state.apply_host(HostUpdate("spark1", t, sample=loading))
        view = spark(state, t)
        engine.evaluate(view, None, t)
    assert view.instances[0].status.state is State.LOADING
    assert view.instances[0].launch is not None and view.instances[0].launch.ready is False
    assert "launch-readiness" not in {f.id for f in engine.active("spark1")}
