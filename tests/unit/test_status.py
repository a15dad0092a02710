"""Node and instance status from observations (pure): up, loading, degraded, down, stale, wedged."""

from __future__ import annotations

from sparktui.config import parse_config
from sparktui.engines import readings
from sparktui.model.fleet import FleetState, NodeView
from sparktui.model.host import HostSample, ServiceState
from sparktui.model.memory import HostMemory
from sparktui.model.observations import FetchKind, HostUpdate, HttpResult, NodeObservation, ServerObservation
from sparktui.model.status import State, Status
from tests.support.fixture_fleet import scenario_scrapes

CONFIG = """
poll_interval_s = 1.0
stale_after = 3
[thresholds]
kv_usage_warn = 0.30
[[nodes]]
name = "spark1"
host = "10.0.0.1"
[[nodes.vllm]]
name = "qwen"
port = 8001
unit = "vllm-qwen36.service"
[[nodes.services]]
name = "asr"
port = 8765
"""
FLEET = parse_config(CONFIG, source="test.toml")
URL = "http://10.0.0.1:8001"
SCRAPES = scenario_scrapes("mtp2-steady")


def ok(body: str = "", status: int = 200, elapsed: float = 0.01) -> HttpResult:
    return HttpResult(url=URL, kind=FetchKind.OK, status=status, body=body.encode(), elapsed_s=elapsed)


def failed(kind: FetchKind, error: str) -> HttpResult:
    return HttpResult(url=URL, kind=kind, error=error)


def observe(
    state: FleetState,
    t: float,
    health: HttpResult,
    metrics: HttpResult | None = None,
    service: HttpResult | None = None,
) -> None:
    state.apply(
        NodeObservation(
            node="spark1",
            t=t,
            wall=1e9 + t,
            vllm=(ServerObservation(name="qwen", health=health, metrics=metrics),),
            services=(("asr", service or ok()),),
        )
    )


def host_sample(unit: ServiceState, remote_epoch: float = 2000.0) -> HostSample:
    memory = HostMemory(mem_total=128 * 2**30, mem_available=60 * 2**30, mem_free=20 * 2**30)
    return HostSample(
        remote_epoch=remote_epoch,
        memory=memory,
        pressure=None,
        pressure_problem=None,
        shm=(),
        processes=(),
        load=(0.1, 0.1, 0.1),
        uptime_s=1000.0,
        services={unit.instance: unit},
        problems=(),
    )


def view(state: FleetState, now: float) -> NodeView:
    (node,) = state.view(now, window_s=None)
    return node


def test_healthy_until_a_threshold_is_crossed() -> None:
    state = FleetState(FLEET, readings())
    observe(state, 0.0, ok(), ok(SCRAPES[0]))
    observe(state, 1.0, ok(), ok(SCRAPES[1]))
    assert view(state, 1.0).status == Status(State.UP)
    observe(state, 29.0, ok(), ok(SCRAPES[29]))  # KV usage 0.35 in the last scrape, threshold 0.30
    node = view(state, 29.0)
    assert node.status.state is State.DEGRADED
    assert node.status.reasons == ("qwen: KV cache 35% (warn at 30%)",)


def test_refused_is_down_but_loading_while_the_unit_is_starting() -> None:
    state = FleetState(FLEET, readings())
    observe(state, 0.0, failed(FetchKind.REFUSED, "connection refused"))
    assert view(state, 0.0).status == Status(State.DOWN, ("qwen: /health connection refused",))
    unit = ServiceState("qwen", "systemd", "vllm-qwen36.service", "activating", sub_state="start", started_epoch=1000.0)
    state.apply_host(HostUpdate("spark1", 0.0, sample=host_sample(unit, remote_epoch=1130.0)))
    assert view(state, 0.0).status == Status(
        State.LOADING,
        ("qwen: loading for 2m10s: vllm-qwen36.service is activating, the port is not open yet",),
    )


def test_a_stopped_unit_whose_last_sample_says_running_is_down_not_loading() -> None:
    """``systemctl stop`` closes the port at once; the manager's word comes with the next sample. A
    process that answered /health since its start and refuses now is not loading (it read "loading for
    48h01m" before)."""
    state = FleetState(FLEET, readings())
    started = 1e9 - 48 * 3600.0
    unit = ServiceState("qwen", "systemd", "vllm-qwen36.service", "active", sub_state="running", started_epoch=started)
    state.apply_host(HostUpdate("spark1", 0.0, sample=host_sample(unit, remote_epoch=1e9)))
    observe(state, 1.0, ok(), ok(SCRAPES[0]))
    observe(state, 2.0, failed(FetchKind.REFUSED, "connection refused"))
    status = view(state, 2.0).status
    assert status.state is State.DOWN
    assert status.reasons == (
        "qwen: /health connection refused; vllm-qwen36.service still read active, its port closed after it served",
    )
    # Started again after that answer: this process has not served yet, so it is loading.
    again = ServiceState(
        "qwen", "systemd", "vllm-qwen36.service", "active", sub_state="running", started_epoch=1e9 + 1.5
    )
    state.apply_host(HostUpdate("spark1", 2.0, sample=host_sample(again, remote_epoch=1e9 + 2.0)))
    assert view(state, 2.0).status.state is State.LOADING


def test_a_lost_ssh_connection_forgets_the_unit_so_refused_is_down_not_loading() -> None:
    """A powered-off node: the last frame said "running", the connection that said it is gone."""
    state = FleetState(FLEET, readings())
    observe(state, 0.0, failed(FetchKind.REFUSED, "connection refused"))
    unit = ServiceState("qwen", "systemd", "vllm-qwen36.service", "active", sub_state="running", started_epoch=1000.0)
    state.apply_host(HostUpdate("spark1", 0.0, sample=host_sample(unit, remote_epoch=1130.0)))
    assert view(state, 0.0).status.state is State.LOADING
    lost = "ssh: spark1 (10.0.0.1:22): connection lost"
    state.apply_host(HostUpdate("spark1", 0.0, problem=lost, connection_lost=True))
    assert view(state, 0.0).status == Status(State.DOWN, ("qwen: /health connection refused", lost))
    # A sampler problem on a live connection says nothing about the unit: its state is kept.
    state.apply_host(HostUpdate("spark1", 0.0, sample=host_sample(unit, remote_epoch=1130.0)))
    state.apply_host(HostUpdate("spark1", 0.0, problem="host sampler: bad frame"))
    assert view(state, 0.0).instances[0].status.state is State.LOADING


def test_a_crash_loop_and_a_missing_program_are_down_with_the_managers_word() -> None:
    state = FleetState(FLEET, readings())
    observe(state, 0.0, failed(FetchKind.REFUSED, "connection refused"))
    looping = ServiceState(
        "qwen",
        "systemd",
        "vllm-qwen36.service",
        "activating",
        sub_state="auto-restart",
        exit_status=1,
        restarts=14,
    )
    state.apply_host(HostUpdate("spark1", 0.0, sample=host_sample(looping)))
    assert view(state, 0.0).status.reasons == (
        "qwen: vllm-qwen36.service is crash-looping: 14 restarts, last exit status 1",
    )
    missing = ServiceState(
        "qwen",
        "systemd",
        "vllm-qwen36.service",
        "activating",
        sub_state="auto-restart",
        exit_status=127,
        restarts=3,
        exec_path="/opt/serve.sh",
        exec_exists=False,
    )
    state.apply_host(HostUpdate("spark1", 0.0, sample=host_sample(missing)))
    node = view(state, 0.0)
    assert node.status.state is State.DOWN
    assert node.status.reasons == (
        "qwen: vllm-qwen36.service cannot start: status=127, the program it runs was not found; "
        "/opt/serve.sh does not exist (3 restarts)",
    )


def test_a_crash_loop_is_down_from_its_first_failed_start() -> None:
    """Between attempts and during an attempt systemd began on its own, the API not answering: down,
    never loading (the incident's spark1 read "degraded" for 100 s before its third restart)."""
    state = FleetState(FLEET, readings())
    observe(state, 0.0, failed(FetchKind.REFUSED, "connection refused"))
    unit = "vllm-qwen36.service"
    first_wait = ServiceState(
        "qwen", "systemd", unit, "activating", sub_state="auto-restart", exit_status=1, restarts=0
    )
    state.apply_host(HostUpdate("spark1", 0.0, sample=host_sample(first_wait)))
    assert view(state, 0.0).status == Status(
        State.DOWN, (f"qwen: {unit} is crash-looping: its start failed, last exit status 1, restarting",)
    )
    attempt = ServiceState("qwen", "systemd", unit, "active", sub_state="running", restarts=1, started_epoch=1996.0)
    state.apply_host(HostUpdate("spark1", 0.0, sample=host_sample(attempt)))
    assert view(state, 0.0).status == Status(
        State.DOWN, (f"qwen: {unit} is crash-looping: 1 restart, attempt 2 running for 4s, the port is not open",)
    )
    second_wait = ServiceState(
        "qwen", "systemd", unit, "activating", sub_state="auto-restart", exit_status=1, restarts=1
    )
    state.apply_host(HostUpdate("spark1", 0.0, sample=host_sample(second_wait)))
    assert view(state, 0.0).status == Status(
        State.DOWN, (f"qwen: {unit} is crash-looping: 1 restart, last exit status 1",)
    )


def test_a_start_by_hand_and_a_restarted_container_are_loading_not_a_crash_loop() -> None:
    state = FleetState(FLEET, readings())
    observe(state, 0.0, failed(FetchKind.REFUSED, "connection refused"))
    by_hand = ServiceState("qwen", "systemd", "vllm-qwen36.service", "active", sub_state="running", restarts=0)
    state.apply_host(HostUpdate("spark1", 0.0, sample=host_sample(by_hand)))
    assert view(state, 0.0).status.state is State.LOADING
    # docker keeps RestartCount across `docker restart`: a running container with old restarts is loading.
    container = ServiceState("qwen", "docker", "qwen36", "running", exit_status=0, restarts=5)
    state.apply_host(HostUpdate("spark1", 0.0, sample=host_sample(container)))
    assert view(state, 0.0).status.state is State.LOADING
    between = ServiceState("qwen", "docker", "qwen36", "restarting", exit_status=1, restarts=6)
    state.apply_host(HostUpdate("spark1", 0.0, sample=host_sample(between)))
    assert view(state, 0.0).status == Status(
        State.DOWN, ("qwen: qwen36 is crash-looping: 6 restarts, last exit status 1",)
    )


def test_ssh_problem_degrades_the_node_and_says_why() -> None:
    state = FleetState(FLEET, readings())
    observe(state, 0.0, ok(), ok(SCRAPES[0]))
    state.apply_host(HostUpdate("spark1", 0.0, problem="ssh: spark1 (10.0.0.1:22): host key is not trusted"))
    node = view(state, 0.0)
    assert node.status == Status(State.DEGRADED, ("ssh: spark1 (10.0.0.1:22): host key is not trusted",))


def test_host_state_that_stops_arriving_is_reported_as_old() -> None:
    state = FleetState(FLEET, readings())
    unit = ServiceState("qwen", "systemd", "vllm-qwen36.service", "active", sub_state="running")
    observe(state, 30.0, ok(), ok(SCRAPES[0]))
    state.apply_host(HostUpdate("spark1", 0.0, sample=host_sample(unit)))
    assert view(state, 30.0).status == Status(State.DEGRADED, ("host state is 30 s old",))


def test_a_node_whose_polls_stopped_finishing_is_stale() -> None:
    state = FleetState(FLEET, readings())
    observe(state, 0.0, ok(), ok(SCRAPES[0]))
    assert view(state, 3.0).status.state is State.UP
    node = view(state, 4.5)
    assert node.status == Status(State.STALE, ("no poll finished for 4 s",))


def test_running_requests_without_progress_is_wedged() -> None:
    state = FleetState(FLEET, readings())
    for second in range(0, 31, 5):
        # The same scrape again and again: 11 requests running, no token generated.
        observe(state, float(second), ok(), ok(SCRAPES[0]))
    node = view(state, 30.0)
    assert node.status.state is State.DEGRADED
    assert "qwen: wedged: 11 running, no token generated for 30 s" in node.status.reasons


def test_side_service_down_degrades_but_does_not_down_the_node() -> None:
    state = FleetState(FLEET, readings())
    observe(state, 0.0, ok(), ok(SCRAPES[0]), service=failed(FetchKind.REFUSED, "connection refused"))
    node = view(state, 0.0)
    assert node.services[0].status.state is State.DOWN
    assert node.status == Status(State.DEGRADED, ("asr: connection refused",))


def test_slow_side_service_is_degraded_with_its_latency() -> None:
    state = FleetState(FLEET, readings())
    observe(state, 0.0, ok(), ok(SCRAPES[0]), service=ok(elapsed=1.7))
    assert view(state, 0.0).services[0].status == Status(State.DEGRADED, ("asr: slow, 1.70 s",))


def test_everything_down_is_down_with_every_reason() -> None:
    state = FleetState(FLEET, readings())
    observe(
        state,
        0.0,
        failed(FetchKind.TIMEOUT, "no answer within 2 s"),
        service=failed(FetchKind.TIMEOUT, "no answer within 2 s"),
    )
    node = view(state, 0.0)
    assert node.status.state is State.DOWN
    assert set(node.status.reasons) == {"qwen: /health no answer within 2 s", "asr: no answer within 2 s"}


def test_worst_orders_states_and_keeps_reasons_of_the_worst() -> None:
    worst = Status.worst(
        [
            Status(State.UP),
            Status(State.DEGRADED, ("a",)),
            Status(State.DEGRADED, ("b",)),
            Status(State.LOADING, ("c",)),
        ]
    )
    assert worst == Status(State.DEGRADED, ("a", "b"))
    assert [s.severity for s in (State.UP, State.DEGRADED, State.LOADING, State.DOWN, State.STALE)] == [
        0,
        1,
        1,
        2,
        2,
    ]


TP_CONFIG = """
[[nodes]]
name = "spark3"
host = "10.0.0.3"
[[nodes.vllm]]
name = "qwen235"
port = 8000
role = "head"
job = "qwen235-tp2"
[[nodes]]
name = "spark4"
host = "10.0.0.4"
[[nodes.vllm]]
name = "qwen235"
role = "worker"
job = "qwen235-tp2"
"""


def test_tensor_parallel_worker_follows_its_head() -> None:
    state = FleetState(parse_config(TP_CONFIG, source="tp.toml"), readings())
    head_obs = ServerObservation(name="qwen235", health=ok(), metrics=ok(SCRAPES[0]))
    state.apply(NodeObservation(node="spark3", t=0.0, wall=1e9, vllm=(head_obs,)))
    state.apply(NodeObservation(node="spark4", t=0.0, wall=1e9, vllm=(ServerObservation("qwen235", None, None),)))
    head, worker = state.view(0.0)
    assert head.status.state is State.UP
    assert worker.status == Status(State.UP)
    dead = ServerObservation(name="qwen235", health=ok(status=503), metrics=None)
    state.apply(NodeObservation(node="spark3", t=1.0, wall=1e9, vllm=(dead,)))
    _head, worker = state.view(1.0)
    assert worker.status == Status(State.DOWN, ("qwen235: worker of spark3/qwen235, which is down",))


def test_numbers_of_an_instance_that_stopped_answering_are_not_shown_as_current() -> None:
    state = FleetState(FLEET, readings())
    observe(state, 0.0, ok(), ok(SCRAPES[0]))
    observe(state, 1.0, ok(), ok(SCRAPES[1]))
    (live,) = state.view(1.0, window_s=None)
    assert live.instances[0].rates is not None and live.instances[0].running is not None
    for second in range(2, 12):
        observe(
            state,
            float(second),
            failed(FetchKind.REFUSED, "connection refused"),
            failed(FetchKind.REFUSED, "connection refused"),
        )
    (down,) = state.view(11.0, window_s=None)
    instance = down.instances[0]
    assert instance.status.state is State.DOWN
    assert instance.rates is None and instance.running is None and instance.kv_usage is None
    assert instance.kv_capacity_tokens is not None  # what the server was configured with still holds


def test_a_version_or_model_list_nested_thousands_deep_is_no_answer_not_a_crash() -> None:
    state = FleetState(FLEET, readings())
    deep = ok("[" * 100_000 + "]" * 100_000)
    vllm = ServerObservation(name="qwen", health=ok(), metrics=ok(SCRAPES[0]), version=deep, models=deep)
    state.apply(NodeObservation(node="spark1", t=0.0, wall=1e9, vllm=(vllm,), services=(("asr", ok()),)))
    (instance,) = state.nodes["spark1"].view(0.0, None).instances
    assert instance.version is None
    assert "qwen: /v1/models: answer is not the OpenAI model list" in instance.status.reasons


def test_metrics_answering_404_is_the_reason_on_its_instance() -> None:
    """A server that answers /health but has no /metrics (a proxy, the wrong port) says so, not "no data"."""
    state = FleetState(FLEET, readings())
    observe(state, 0.0, ok(), ok('{"detail":"Not Found"}', status=404))
    node = view(state, 0.0)
    assert node.status == Status(State.DEGRADED, ("qwen: /metrics: HTTP 404",))
