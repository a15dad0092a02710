"""Broken and hostile /metrics answers: each is a problem with a one-line reason on its instance, never
an exception out of the model and never a number shown as if it were good."""

from __future__ import annotations

import random
import re
from dataclasses import replace

import pytest

from sparktui.engines import readings
from sparktui.engines.vllm.scrape import normalise
from sparktui.model.fleet import FleetState
from sparktui.model.promtext import parse
from sparktui.model.scrape import MAX_ENGINES, ScrapeProblem
from sparktui.model.status import State
from sparktui.model.tracker import ScrapeTracker
from tests.unit.test_status import FLEET, SCRAPES, observe, ok, view

MODEL = 'model_name="RedHatAI/Qwen3.6-35B-A3B-NVFP4"'
TTFT_BUCKET = f'vllm:time_to_first_token_seconds_bucket{{engine="0",le="0.001",{MODEL}}}'
KV = f'vllm:kv_cache_usage_perc{{engine="0",{MODEL}}}'
RUNNING = f'vllm:num_requests_running{{engine="0",{MODEL}}}'
GENERATED = f'vllm:generation_tokens_total{{engine="0",{MODEL}}}'


def _edited(old: str, new: str, scrape: str = SCRAPES[0]) -> str:
    assert old in scrape
    return scrape.replace(old, new, 1)


def _reasons_after(*bodies: str) -> tuple[str, ...]:
    return _reasons_after_bytes(*(body.encode() for body in bodies))


def _reasons_after_bytes(*bodies: bytes) -> tuple[str, ...]:
    state = FleetState(FLEET, readings())
    for t, body in enumerate(bodies):
        observe(state, float(t), ok(), replace(ok(), body=body))
    node = view(state, float(len(bodies) - 1))
    assert node.status.state is State.DEGRADED
    return node.status.reasons


@pytest.mark.parametrize("le", ["abc", "NaN", "1_0", "", "-Inf"])
def test_a_bucket_bound_that_is_not_a_number_is_a_scrape_problem(le: str) -> None:
    text = _edited('le="0.001"', f'le="{le}"')
    with pytest.raises(ScrapeProblem) as caught:
        normalise(parse(text))
    assert str(caught.value) == f"bad bucket bound le={le!r} in vllm:time_to_first_token_seconds_bucket"


def test_a_bad_bucket_bound_is_the_reason_on_its_instance() -> None:
    reasons = _reasons_after(_edited('le="0.001"', 'le="abc"'))
    assert reasons == ("qwen: /metrics: bad bucket bound le='abc' in vllm:time_to_first_token_seconds_bucket",)


def _with_value(head: str, value: str, scrape: str) -> str:
    """``scrape`` with the value of the series ``head`` replaced by ``value``."""
    edited, count = re.subn(rf"^{re.escape(head)} \S+$", f"{head} {value}", scrape, count=1, flags=re.MULTILINE)
    assert count == 1
    return edited


@pytest.mark.parametrize(
    ("head", "value", "reason"),
    [
        (KV, "NaN", "NaN in vllm:kv_cache_usage_perc"),
        (KV, "+Inf", "+Inf in vllm:kv_cache_usage_perc"),
        (RUNNING, "-Inf", "-Inf in vllm:num_requests_running"),
        (RUNNING, "+Inf", "+Inf in vllm:num_requests_running"),
        (GENERATED, "+Inf", "+Inf in vllm:generation_tokens_total"),
        (TTFT_BUCKET, "NaN", "NaN in vllm:time_to_first_token_seconds_bucket"),
    ],
)
def test_a_non_finite_value_the_normaliser_needs_is_a_problem_naming_the_metric(
    head: str, value: str, reason: str
) -> None:
    with pytest.raises(ScrapeProblem, match=re.escape(reason)):
        normalise(parse(_with_value(head, value, SCRAPES[0])))
    # On the instance: that reason, and no number from the bad scrape ("KV cache inf%", "wedged: -inf").
    reasons = _reasons_after(SCRAPES[0], _with_value(head, value, SCRAPES[1]))
    assert reasons == (f"qwen: /metrics: {reason}",)


def test_non_finite_values_in_series_the_normaliser_does_not_read_are_fine() -> None:
    scrape = normalise(parse(SCRAPES[0] + "python_gc_objects_collected_total NaN\nsome_gauge -Inf\n"))
    assert scrape.has_engine_stats


def test_a_duplicate_series_is_the_reason_on_its_instance() -> None:
    (reason,) = _reasons_after(SCRAPES[0] + RUNNING + " 11.0\n")
    assert reason.startswith(
        "qwen: /metrics is not Prometheus text: line 709: duplicate series vllm:num_requests_running{"
    )


def test_random_bytes_are_not_prometheus_text_not_a_truncated_body() -> None:
    rng = random.Random(17)
    body = bytes(rng.randrange(256) for _ in range(4096))
    (reason,) = _reasons_after_bytes(body)
    assert reason.startswith("qwen: /metrics is not Prometheus text: line ")
    assert "not UTF-8 text" in reason


def test_random_text_without_a_final_newline_is_not_prometheus_text() -> None:
    (reason,) = _reasons_after("vllm:x 1\n<html>\n<body>Bad Gateway</body>")
    assert reason.startswith("qwen: /metrics is not Prometheus text: line 2: ")


@pytest.mark.parametrize("cut", [0.5, 0.75])
def test_a_scrape_cut_mid_line_is_a_truncated_body(cut: float) -> None:
    body = SCRAPES[0][: int(len(SCRAPES[0]) * cut)]
    assert not body.endswith("\n")
    assert _reasons_after(body) == ("qwen: /metrics: body truncated (no final newline)",)


def test_a_scrape_cut_inside_a_multibyte_character_is_a_truncated_body() -> None:
    body = (SCRAPES[0] + 'vllm:x{a="é"} 1\n').encode()
    cut = body[: body.rindex("é".encode()) + 1]
    assert _reasons_after_bytes(cut) == ("qwen: /metrics: body truncated (no final newline)",)


@pytest.mark.parametrize("blocks", ["inf", "NaN", "1_000", "lots"])
def test_a_cache_config_size_that_is_not_a_finite_number_is_unknown(blocks: str) -> None:
    text = re.sub(r'num_gpu_blocks="[^"]*"', f'num_gpu_blocks="{blocks}"', SCRAPES[0])
    text = re.sub(r'kv_cache_size_tokens="[^"]*"', 'kv_cache_size_tokens="None"', text)
    assert f'num_gpu_blocks="{blocks}"' in text
    assert normalise(parse(text)).kv_capacity_tokens is None


def test_finite_values_that_sum_past_the_largest_float_are_a_scrape_problem() -> None:
    engine1 = GENERATED.replace('engine="0"', 'engine="1"')
    text = f"{GENERATED} 1.5e308\n{engine1} 1.5e308\n"
    with pytest.raises(ScrapeProblem, match=r"generation_tokens of model 'RedHatAI/Qwen3.6-35B-A3B-NVFP4' is out"):
        normalise(parse(text))


def _engines_text(count: int, model: str = "m") -> str:
    lines = ["# TYPE vllm:num_requests_running gauge"]
    lines += [f'vllm:num_requests_running{{engine="{e}",model_name="{model}"}} 1' for e in range(count)]
    return "\n".join(lines) + "\n"


def test_more_engine_labels_than_any_fleet_runs_is_one_line_not_a_breakdown_per_label() -> None:
    assert len(normalise(parse(_engines_text(MAX_ENGINES))).models["m"].per_engine) == MAX_ENGINES
    with pytest.raises(
        ScrapeProblem, match=rf"^{MAX_ENGINES + 1} engine labels for model 'm' \(at most {MAX_ENGINES}\)$"
    ):
        normalise(parse(_engines_text(MAX_ENGINES + 1)))


def test_names_that_change_with_every_scrape_keep_no_more_than_a_window_of_history() -> None:
    """A server whose model and engine names are new at each scrape: the tracker forgets a name once it
    has not been scraped for its window, so it holds a window's worth, not one history per scrape."""
    tracker = ScrapeTracker(max_age_s=60.0)
    for t in range(600):
        text = _engines_text(2, model=f"m{t}")
        tracker.observe(float(t), normalise(parse(text)))
    assert len(tracker._histories) <= 61 and len(tracker._engine_histories) <= 2 * 61
    assert tracker.rates("m599") is None  # one scrape of the newest name: no rate yet, and no error
