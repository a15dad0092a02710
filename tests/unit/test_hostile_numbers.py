"""Hostile input, round 3 (pure): label text made safe where it is parsed, numbers validated by kind,
budgets on what a remote can inflate, and one node's bad data never stopping another's.

Each case is one the attack round found: it crashed a mode, painted the terminal or showed a number
that cannot be. The reasons are asserted as the operator reads them on the node.
"""

from __future__ import annotations

import re

import pytest

from sparktui.config import parse_config
from sparktui.engines import readings
from sparktui.headless.snapshot import render_check, render_snapshot, views_json
from sparktui.model import safe_json
from sparktui.model.derive import MAX_TOKENS_PER_S
from sparktui.model.fleet import FleetState, NodeState
from sparktui.model.numbers import count_problem, counter_problem, fraction_problem, json_int, label_int
from sparktui.model.observations import NodeObservation, ServerObservation
from sparktui.model.promtext import MAX_SERIES, TooManySeries, parse
from sparktui.model.specs import FleetSpec
from sparktui.model.status import State
from tests.support.fixture_fleet import gb10_nvidia_exporter_page
from tests.unit.test_status import FLEET, SCRAPES, observe, ok, view

MODEL = 'model_name="RedHatAI/Qwen3.6-35B-A3B-NVFP4"'
FINISHED_STOP = f'vllm:request_success_total{{engine="0",finished_reason="stop",{MODEL}}}'
POSITION_1 = f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",{MODEL},position="1"}}'
GENERATED = f'vllm:generation_tokens_total{{engine="0",{MODEL}}}'
WAITING = f'vllm:num_requests_waiting{{engine="0",{MODEL}}}'
TTFT = "vllm:time_to_first_token_seconds"
# What a terminal must never receive from a remote: an OSC 2 (the pane title) and an OSC 52 (the
# clipboard), ST- and BEL-terminated, a CSI, C1 controls written as UTF-8, a bidi override, a DCS.
HOSTILE = "\x1b]2;owned\x1b\\\x1b]52;c;ZWNobyBoaQ==\x07\x1b[2J\u009b31m\u0085\u202edcba\x1bP1$r\x1b\\ok"
TERMINAL_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")

GPU_PAGE = gb10_nvidia_exporter_page()


def _fleet(*names: str, gpu_exporter: bool = False) -> FleetSpec:
    """Nodes serving one vLLM instance ``qwen`` each, with a GPU exporter or without."""
    exporter = "[nodes.gpu_exporter]\nport = 9835\n" if gpu_exporter else ""
    nodes = (
        f'[[nodes]]\nname = "{name}"\nhost = "10.0.0.{n}"\n[[nodes.vllm]]\nname = "qwen"\nport = 8001\n{exporter}'
        for n, name in enumerate(names, start=1)
    )
    return parse_config("".join(nodes), source="test.toml")


GPU_FLEET = _fleet("spark1", gpu_exporter=True)
TWO_NODES = _fleet("spark1", "spark2")


def _with_value(head: str, value: str, scrape: str = SCRAPES[0]) -> str:
    edited, count = re.subn(rf"^{re.escape(head)} \S+$", f"{head} {value}", scrape, count=1, flags=re.MULTILINE)
    assert count == 1
    return edited


def _edited(old: str, new: str, scrape: str = SCRAPES[0]) -> str:
    assert old in scrape
    return scrape.replace(old, new)


def _reasons(*bodies: str) -> tuple[str, ...]:
    state = FleetState(FLEET, readings())
    for t, body in enumerate(bodies):
        observe(state, float(t), ok(), ok(body))
    return view(state, float(len(bodies) - 1)).status.reasons


def _poll(state: FleetState, node: str, t: float, body: str) -> None:
    state.apply(
        NodeObservation(
            node=node,
            t=t,
            wall=1e9 + t,
            vllm=(ServerObservation(name="qwen", health=ok(), metrics=ok(body)),),
        )
    )


# --- 1. label text is made safe where the exposition is parsed ----------------------------------------


def test_a_hostile_label_value_reaches_no_view_and_no_headless_output_raw() -> None:
    bodies = [_edited('finished_reason="stop"', f'finished_reason="{HOSTILE}"', scrape) for scrape in SCRAPES[:3]]
    state = FleetState(FLEET, readings())
    for t, body in enumerate(bodies):
        observe(state, float(t), ok(), ok(body))
    views = state.view(2.0, window_s=None)
    finished = views[0].instances[0].rates
    assert finished is not None and finished.finished_by_reason  # the series was read, its label kept
    assert " dcbaok" in finished.finished_by_reason  # the hostile reason, read and made plain text
    for reason in finished.finished_by_reason:
        assert "\x1b" not in reason and not TERMINAL_CONTROL.search(reason)
    for text in (render_snapshot(views), render_check(views), views_json(views)):
        assert "\x1b" not in text and not TERMINAL_CONTROL.search(text.replace("\n", ""))


def test_every_label_value_the_parser_gives_is_safe_text() -> None:
    expo = parse(f'm{{a="{HOSTILE}",b="x\\ny"}} 1\n')
    ((labels, _value),) = expo.get("m")
    assert labels["a"] == " dcbaok"  # every sequence whole, the NEL a space, the override dropped
    assert labels["b"] == "x y"


# --- 2. one value never crashes a mode ----------------------------------------------------------------


@pytest.mark.parametrize("position", ["²", "٣", "1_0", "-1", "1e3", " 1", "9" * 40])
def test_a_draft_position_that_is_not_ascii_digits_is_a_reason_not_a_traceback(position: str) -> None:
    body = _edited('position="1"', f'position="{position}"')
    reasons = _reasons(body)
    assert len(reasons) == 1
    assert "vllm:spec_decode_num_accepted_tokens_per_pos_total has position=" in reasons[0]
    assert reasons[0].endswith("which is not a whole number")


def test_a_context_length_past_any_integer_is_unknown_and_the_node_still_views() -> None:
    state = FleetState(FLEET, readings())
    models = ok('{"object":"list","data":[{"id":"m","max_model_len":1' + "0" * 400 + "}]}")
    state.apply(
        NodeObservation(
            node="spark1",
            t=0.0,
            wall=1e9,
            vllm=(ServerObservation(name="qwen", health=ok(), metrics=ok(SCRAPES[0]), models=models),),
        )
    )
    assert state.nodes["spark1"].instances["qwen"].max_model_len is None
    assert state.nodes["spark1"].instances["qwen"].served_models == ("m",)
    views = state.view(0.0, window_s=None)
    render_snapshot(views)
    views_json(views)


def test_one_nodes_bad_data_never_stops_another_nodes_view(monkeypatch: pytest.MonkeyPatch) -> None:
    state = FleetState(TWO_NODES, readings())
    for t in (0.0, 1.0):
        _poll(state, "spark1", t, SCRAPES[int(t)])
        _poll(state, "spark2", t, SCRAPES[int(t)])
    real_view = NodeState.view

    def broken_for_spark1(self: NodeState, *args: object, **kwargs: object) -> object:
        if self.spec.name == "spark1":
            raise OverflowError("int too large to convert to float")
        return real_view(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(NodeState, "view", broken_for_spark1)
    spark1, spark2 = state.view(1.0, window_s=None)
    assert spark1.status.state is State.DEGRADED
    assert spark1.status.reasons == (
        "sparktui could not read this node's data (OverflowError: int too large to convert to float); the others go on",
    )
    assert spark2.status.state is State.UP and spark2.instances[0].rates is not None
    render_snapshot((spark1, spark2))


# --- 3. numbers that cannot be -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("head", "value", "reason"),
    [
        (GENERATED, "-941575", "vllm:generation_tokens_total is -941575, and a counter cannot be negative"),
        (WAITING, "1e308", "vllm:num_requests_waiting is 1e+308, more than any engine holds"),
        (WAITING, "-2", "vllm:num_requests_waiting is -2, and a counter cannot be negative"),
        (
            f'vllm:kv_cache_usage_perc{{engine="0",{MODEL}}}',
            "3.5",
            "vllm:kv_cache_usage_perc is 3.5, outside [0, 1]",
        ),
    ],
)
def test_a_number_not_of_its_kind_is_a_reason_naming_the_metric(head: str, value: str, reason: str) -> None:
    assert _reasons(_with_value(head, value)) == (f"qwen: /metrics: {reason}",)


def test_a_counter_jump_past_any_engine_is_flagged_and_not_shown() -> None:
    generated = float(re.search(rf"^{re.escape(GENERATED)} (\S+)$", SCRAPES[1], re.MULTILINE)[1])  # type: ignore[index]
    state = FleetState(FLEET, readings())
    observe(state, 0.0, ok(), ok(SCRAPES[0]))
    observe(state, 1.0, ok(), ok(_with_value(GENERATED, repr(generated + 1e18), SCRAPES[1])))
    node = view(state, 1.0)
    rates = node.instances[0].rates
    assert rates is not None and rates.generation_tokens_per_s is None
    assert rates.prompt_tokens_per_s is not None  # the other rates of the window are shown
    assert node.status.state is State.DEGRADED
    (reason,) = node.status.reasons
    assert reason.startswith("qwen: a counter jumped past what any engine does (generation 1e+18/s over 1 s)")
    assert MAX_TOKENS_PER_S < 1e18


def test_a_histogram_without_its_inf_bucket_is_a_named_problem() -> None:
    body = "\n".join(
        line for line in SCRAPES[0].splitlines() if not line.startswith(f'{TTFT}_bucket{{engine="0",le="+Inf"')
    )
    assert body != SCRAPES[0].rstrip("\n")
    assert _reasons(body + "\n") == (f"qwen: /metrics: {TTFT}_bucket has no +Inf bucket",)


def test_a_histogram_whose_buckets_decrease_is_a_named_problem() -> None:
    head = f'{TTFT}_bucket{{engine="0",le="+Inf",{MODEL}}}'
    body = _with_value(head, "0")
    (reason,) = _reasons(body)
    assert reason.startswith(f"qwen: /metrics: {TTFT}_bucket is not cumulative: the le=inf bucket counts fewer")


@pytest.mark.parametrize("body", ["", "\n", "# HELP nothing at all\n# TYPE x gauge\n"])
def test_an_empty_exposition_is_a_problem_not_an_up_node(body: str) -> None:
    assert _reasons(body) == ("qwen: /metrics: the answer holds no series (an empty exposition)",)


# --- 4. budgets --------------------------------------------------------------------------------------


def test_a_scrape_over_the_series_budget_is_refused_before_it_is_parsed() -> None:
    count = MAX_SERIES * 5
    body = "".join(f'vllm:num_requests_running{{engine="0",model_name="m{i}"}} 1\n' for i in range(count))
    with pytest.raises(TooManySeries) as caught:
        parse(body)
    assert str(caught.value) == f"{count:,} series, over the budget of {MAX_SERIES:,} a scrape; not read"
    assert _reasons(body) == (
        f"qwen: /metrics: {count:,} series, over the budget of {MAX_SERIES:,} a scrape; not read",
    )


def test_a_scrape_at_the_series_budget_is_read() -> None:
    body = "".join(f'unread_family{{i="{i}"}} 1\n' for i in range(MAX_SERIES - 1000)) + SCRAPES[0]
    assert _reasons(body) == ()


def test_thousands_of_model_names_are_one_reason() -> None:
    body = SCRAPES[0] + "".join(f'vllm:num_requests_running{{engine="0",model_name="m{i}"}} 1\n' for i in range(5000))
    (reason,) = _reasons(body)
    assert reason == "qwen: /metrics: more than 16 model_name labels (a server serves one model)"


# --- the parsers by kind ------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "number"), [("0", 0), ("7", 7), ("123456789", 123456789)])
def test_label_int_takes_ascii_digits(text: str, number: int) -> None:
    assert label_int(text) == number


@pytest.mark.parametrize("text", ["", "²", "٣", "1_0", "-1", "+1", " 1", "1.0", "1234567890", "0x1"])
def test_label_int_refuses_anything_else(text: str) -> None:
    assert label_int(text) is None


@pytest.mark.parametrize("value", [True, 1.0, "1", None, 2**53 + 1, -1, 10**400])
def test_json_int_refuses_what_is_not_an_integer_in_range(value: object) -> None:
    assert json_int(value) is None


def test_the_number_kinds_say_why() -> None:
    assert counter_problem(0.0) is None and counter_problem(-1.0) == "-1, and a counter cannot be negative"
    assert counter_problem(float("nan")) == "NaN"
    assert count_problem(2e9) == "2e+09, more than any engine holds"
    assert fraction_problem(1.0) is None and fraction_problem(1.01) == "1.01, outside [0, 1]"


def test_safe_json_bounds_depth_numbers_and_strings() -> None:
    assert safe_json.loads(b"[" * 40 + b"]" * 40) is None  # deeper than MAX_DEPTH
    assert safe_json.loads(b"[" * 100_000 + b"]" * 100_000) is None  # json.loads' RecursionError
    assert safe_json.loads(b'{"a": NaN}') is None
    assert safe_json.loads(b'{"n": 1' + b"0" * 400 + b"}") == {"n": float("inf")}
    assert safe_json.loads(b'{"n": 12345}') == {"n": 12345}
    assert safe_json.loads(b'{"\\u001b]2;x\\u0007k": "\\u001b[31mv\\u202e"}') == {"k": "v"}
    assert safe_json.loads(b"\xff") is None


def _observation(t: float, metrics: str, gpu: str) -> NodeObservation:
    return NodeObservation(
        node="spark1",
        t=t,
        wall=1e9 + t,
        vllm=(ServerObservation(name="qwen", health=ok(), metrics=ok(metrics)),),
        gpu_exporter=ok(gpu),
    )


@pytest.mark.parametrize("hostile", [False, True])
def test_an_observation_read_ahead_gives_the_view_of_one_read_on_arrival(hostile: bool) -> None:
    """The live source parses each observation in a worker thread (``FleetState.preread``) before it
    is applied on the event loop: the same view as a replay, which reads it on arrival."""
    gpu = "".join(f'g{{i="{i}"}} 1\n' for i in range(MAX_SERIES + 1)) if hostile else GPU_PAGE
    metrics = [_edited('position="1"', 'position="²"', s) if hostile else s for s in SCRAPES[:2]]
    ahead, on_arrival = FleetState(GPU_FLEET, readings()), FleetState(GPU_FLEET, readings())
    for t, body in enumerate(metrics):
        observation = _observation(float(t), body, gpu)
        ahead.preread(observation)
        ahead.apply(observation)
        on_arrival.apply(observation)
    assert ahead.view(1.0, window_s=None) == on_arrival.view(1.0, window_s=None)
    (node,) = ahead.view(1.0, window_s=None)
    if hostile:
        assert node.status.reasons[0].startswith("qwen: /metrics: vllm:spec_decode_num_accepted_tokens_per_pos_total")
        assert f"GPU exporter: {MAX_SERIES + 1:,} series, over the budget of {MAX_SERIES:,} a scrape; not read" in (
            node.status.reasons
        )
    else:
        assert node.status.state is State.UP and node.gpu is not None


@pytest.mark.parametrize(
    ("wire", "flagged"),
    [
        (
            f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",{MODEL},position="1"}}',
            "spec decode accepted",
        ),
        (f'vllm:spec_decode_num_accepted_tokens_total{{engine="0",{MODEL}}}', "spec decode accepted"),
        (f'vllm:estimated_read_bytes_per_gpu_total{{engine="0",{MODEL}}}', "estimated 1e+30 B/s"),
    ],
)
def test_spec_decode_and_bandwidth_counters_past_any_drafter_or_gpu_are_flagged(wire: str, flagged: str) -> None:
    state = FleetState(FLEET, readings())
    observe(state, 0.0, ok(), ok(SCRAPES[0]))
    observe(state, 1.0, ok(), ok(_with_value(wire, "1e30", SCRAPES[1])))
    node = view(state, 1.0)
    rates = node.instances[0].rates
    assert rates is not None
    if "spec" in flagged:
        assert rates.spec_decode is None
    else:
        assert rates.mfu is not None and rates.mfu.memory_bytes_per_s is None
    (reason,) = node.status.reasons
    assert reason.startswith(f"qwen: a counter jumped past what any engine does ({flagged}")
