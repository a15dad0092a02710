"""``sparktui bench``'s pure half: the workloads, a case's statistics from made-up times, the server's
counters over a case from real vLLM 0.33 scrapes, the tables, the comparison and the JSON round trip."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
from pathlib import Path

import pytest

from sparktui.engines.vllm.scrape import normalise
from sparktui.headless.bench import run_interruptible
from sparktui.model.bench import (
    CALIBRATION_WORDS,
    DEFAULT_CASES,
    PREFILL_HEADROOM,
    SCHEMA_VERSION,
    WORKLOADS,
    BenchFileError,
    BenchProgress,
    BenchRun,
    CaseResult,
    CaseStats,
    RequestResult,
    ServerStats,
    build_cases,
    calibration_prompt,
    case_stats,
    change,
    compare,
    compare_table,
    percentile,
    prefill_lengths,
    progress_text,
    render_run,
    results_table,
    run_from_json,
    server_stats,
    tokens_per_word,
)
from sparktui.model.promtext import parse
from sparktui.model.tracker import ScrapeTracker
from sparktui.model.units import NO_DATA, to_jsonable

pytestmark = pytest.mark.unit

DATA = Path(__file__).resolve().parents[1] / "data" / "vllm-0.33"


def test_the_same_seed_and_tag_build_the_same_prompts_and_another_tag_other_prompts() -> None:
    first = build_cases(DEFAULT_CASES, "run1", max_model_len=8192)
    again = build_cases(DEFAULT_CASES, "run1", max_model_len=8192)
    other = build_cases(DEFAULT_CASES, "run2", max_model_len=8192)
    assert [c.prompts for c in first] == [c.prompts for c in again]
    assert all(a.prompts[0] != b.prompts[0] for a, b in zip(first, other, strict=True))
    assert all(p.startswith("[run2") for c in other for p in c.prompts)  # no run finds another's in the cache


def test_the_default_cases_are_the_operators_workloads_the_sweeps_and_the_prefix_case() -> None:
    cases = build_cases(DEFAULT_CASES, "t", max_model_len=8192)
    names = [c.name for c in cases]
    assert names[:5] == ["short", "medium", "long", "code", "reasoning"]
    assert [c.concurrency for c in cases if c.kind == "concurrency"] == [1, 2, 4, 8]
    assert [len(c.prompts) for c in cases if c.kind == "concurrency"] == [1, 2, 4, 8]
    assert [c.max_tokens for c in cases[:5]] == [64, 300, 600, 300, 300]
    assert {c.label for c in cases[:5]} >= {"Medium (300 tok)", "Long (600 tok)", "Reasoning (300 tok)"}
    prefix = next(c for c in cases if c.kind == "prefix")
    system = prefix.prompts[0].split("\n\n")[0]
    assert len(prefix.prompts) > 1 and all(p.startswith(system + "\n\n") for p in prefix.prompts)
    assert len(set(prefix.prompts)) == len(prefix.prompts)


def test_prompts_have_realistic_lengths() -> None:
    cases = {c.name: c for c in build_cases(DEFAULT_CASES, "t", max_model_len=8192)}
    words = {name: len(cases[name].prompts[0].split()) for name in WORKLOADS}
    assert words["short"] < words["medium"] < words["long"]
    assert words["short"] > 50 and words["long"] < 400
    assert len(cases["prefix-repeat"].prompts[0].split()) > 1000


def test_the_prefill_sweep_doubles_up_to_what_max_model_len_leaves() -> None:
    assert prefill_lengths(None) == ()
    assert prefill_lengths(1024) == ()  # the first length does not fit with the answer
    # the largest that fits: the headroom's share of the context less the answer (16) and a margin (64)
    assert prefill_lengths(8192) == (1024, 2048, 4096, int(PREFILL_HEADROOM * (8192 - 16 - 64)))
    assert prefill_lengths(262144)[-1] < 262144 * 0.8
    assert prefill_lengths(262144, cap=5000) == (1024, 2048, 4096)
    sweep = [c for c in build_cases(("prefill",), "t", max_model_len=4096) if c.kind == "prefill"]
    assert [c.prompt_tokens for c in sweep] == [1024, 2048, int(PREFILL_HEADROOM * (4096 - 16 - 64))]
    assert [c.label for c in sweep][:2] == ["Prefill 1k", "Prefill 2k"]


def test_prompts_are_sized_by_the_tokens_per_word_the_warmup_measured() -> None:
    assert tokens_per_word(None) == 1.0 and tokens_per_word(0) == 1.0
    assert tokens_per_word(2 * CALIBRATION_WORDS) == 2.0
    assert len(calibration_prompt().split()) == CALIBRATION_WORDS
    one = {c.name: c for c in build_cases(("prefill", "prefix"), "t", max_model_len=2048)}
    two = {c.name: c for c in build_cases(("prefill", "prefix"), "t", max_model_len=2048, tokens_per_word=2.0)}
    words_one, words_two = (len(cases["prefill-1024"].prompts[0].split()) for cases in (one, two))
    assert words_two == pytest.approx(words_one / 2, abs=10)  # half the words make the same tokens
    # the system prompt repeated fills at most half of a small context, in tokens
    system_words = len(two["prefix-repeat"].prompts[0].split("\n\n")[0].split())
    assert system_words * 2.0 <= 2048 / 2 + 2.0 * 12  # its first sentence adds a dozen words


def test_an_unknown_case_is_named() -> None:
    with pytest.raises(ValueError, match="unknown bench case 'fast'"):
        build_cases(("short", "fast"), "t")


def test_percentile_interpolates_between_ranks() -> None:
    assert percentile([], 0.5) is None
    assert percentile([3.0], 0.9) == 3.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.5) == pytest.approx(2.5)
    assert percentile([4.0, 1.0, 3.0, 2.0, 5.0], 0.9) == pytest.approx(4.6)


def _request(sent: float, first: float, gap: float, tokens: int, prompt: int = 100) -> RequestResult:
    chunks = tuple(first + gap * i for i in range(tokens))  # one token per chunk
    return RequestResult(sent, chunks[-1] + 0.01, chunks, tokens, prompt)


def test_case_stats_from_the_clients_times() -> None:
    # Two requests at once: TTFT 0.1 s and 0.3 s; 21 tokens each, 20 gaps of 50 ms and of 25 ms.
    results = [_request(0.0, 0.1, 0.05, 21), _request(0.0, 0.3, 0.025, 21)]
    stats = case_stats(results)
    assert stats.requests == 2 and stats.failed == 0
    assert stats.ttft_p50_s == pytest.approx(0.2) and stats.ttft_p90_s == pytest.approx(0.28)
    # per request, 20 tokens after the first over first chunk to end (10 ms after the last chunk): the mean
    assert stats.decode_tokens_per_s == pytest.approx((20 / 1.01 + 20 / 0.51) / 2)
    span = 0.1 + 20 * 0.05 + 0.01  # first send to the last answer
    assert stats.span_s == pytest.approx(span)
    assert stats.aggregate_tokens_per_s == pytest.approx(42 / span)
    assert stats.completion_tokens == 42 and stats.prompt_tokens == 200
    assert stats.prefill_tokens_per_s == pytest.approx((100 / 0.1 + 100 / 0.3) / 2)
    assert stats.inter_chunk_p50_s is not None and 0.025 <= stats.inter_chunk_p50_s <= 0.05


def test_the_servers_token_count_not_the_chunks_makes_the_rate() -> None:
    # Speculative decoding streams several tokens per chunk: 3 chunks carried 9 tokens.
    result = RequestResult(0.0, 1.1, (0.1, 0.6, 1.1), completion_tokens=9)
    assert result.decode_tokens_per_s == pytest.approx(8 / 1.0)
    # The last chunks arrived in one read with the end: timed to the end, as vllm bench serve's TPOT.
    burst = RequestResult(0.0, 1.1, (0.1, 1.0999, 1.1), completion_tokens=9)
    assert burst.decode_tokens_per_s == pytest.approx(8 / 1.0)


def test_failed_requests_count_but_give_no_numbers() -> None:
    failed = RequestResult(0.0, 0.5, error="HTTP 400: too long")
    stats = case_stats([failed])
    assert stats.requests == 1 and stats.failed == 1
    assert stats.ttft_p50_s is None and stats.decode_tokens_per_s is None and stats.aggregate_tokens_per_s is None
    row = results_table([_case("short", stats)]).splitlines()[2]
    assert "1 (1 failed)" in row and "0 tok/s" not in row and NO_DATA in row


def test_the_printed_run_says_why_requests_failed_by_case_and_reason() -> None:
    refused = RequestResult(0.0, 0.1, error="connection refused")
    hostile = RequestResult(0.0, 0.1, error="HTTP 500: \x1b[2Jboom")
    served = RequestResult(0.0, 1.1, (0.1, 0.6, 1.1), completion_tokens=9)
    requests = (refused, refused, hostile, served)
    case = dataclasses.replace(_case("short", case_stats(requests)), requests=requests)
    text = render_run(_run(case))
    assert "| 4 (3 failed) |" in text
    assert text.endswith(
        "Failed requests:\n- Short (64 tok): 2 × connection refused\n- Short (64 tok): 1 × HTTP 500: boom\n"
    )
    assert "Failed requests" not in render_run(_run(_case("short", _stats(50.0))))


def test_a_request_without_usage_has_no_rate_rather_than_a_guess() -> None:
    result = RequestResult(0.0, 1.0, (0.1, 0.5, 0.9), completion_tokens=None)
    assert result.decode_tokens_per_s is None and result.ttft_s == pytest.approx(0.1)


def _scrape(name: str) -> object:
    return normalise(parse((DATA / "mtp2-steady" / name).read_text()))


def _steady_files() -> list[Path]:
    return sorted((DATA / "mtp2-steady").glob("*.prom"))


def test_server_stats_are_the_dashboards_numbers_over_the_same_scrapes() -> None:
    files = _steady_files()
    first, last = normalise(parse(files[0].read_text())), normalise(parse(files[-1].read_text()))
    stats = server_stats(first, 0.0, last, 20.0)
    tracker = ScrapeTracker()
    tracker.observe(0.0, first)
    tracker.observe(20.0, last)
    rates = tracker.rates()
    assert stats is not None and rates is not None and rates.spec_decode is not None
    assert stats.generation_tokens_per_s == rates.generation_tokens_per_s
    assert stats.generation_tokens == pytest.approx(rates.generation_tokens_per_s * 20.0)  # type: ignore[operator]
    assert stats.acceptance_by_position == rates.spec_decode.per_position
    assert len(stats.acceptance_by_position) == 2
    assert stats.mean_acceptance_length == rates.spec_decode.mean_acceptance_length
    assert stats.prefix_cache_hit_rate == rates.prefix_cache_hit_rate
    assert stats.preemptions == rates.preemptions
    assert stats.generation_tokens is not None and stats.generation_tokens > 0


def test_server_stats_without_engine_stats_are_none() -> None:
    files = sorted((DATA / "disable-log-stats").glob("*.prom"))
    scrape = normalise(parse(files[0].read_text()))
    assert server_stats(scrape, 0.0, scrape, 5.0) is None


def _case(name: str, stats: CaseStats, server: ServerStats | None = None, kind: str = "workload") -> CaseResult:
    label = WORKLOADS[name].label if name in WORKLOADS else name
    return CaseResult(name, label, kind, 1, 300, stats, server)


def _stats(decode: float | None, aggregate: float | None = None, ttft: float | None = 0.1) -> CaseStats:
    return CaseStats(2, 0, 10.0, ttft, ttft, 0.02, decode, aggregate or decode, 600, 200, None)


def _run(*cases: CaseResult, started: str = "2026-11-27T00:00:00+00:00") -> BenchRun:
    return BenchRun(
        target="spark1/qwen36",
        url="http://127.0.0.1:8000",
        started_at=started,
        model="qwen",
        version="0.33.0",
        max_model_len=8192,
        flags={"cache_config": {"0": {"enable_prefix_caching": "True"}}},
        node_state={"running": 0.0},
        settings={"seed": 22},
        cases=cases,
    )


def test_the_table_has_a_row_per_case_with_the_servers_numbers() -> None:
    server = ServerStats(10.0, 560.0, 56.0, 200.0, (0.89, 0.63), 2.52, 0.76, 0.42, 0.0, memory_bandwidth_share=0.55)
    table = results_table([_case("medium", _stats(55.3), server), _case("long", _stats(53.2))])
    lines = table.splitlines()
    assert lines[0].startswith("| Case | Requests | TTFT p50") and len(lines) == 4
    assert lines[2].startswith("| Medium (300 tok) | 2 | 100 ms |")
    assert "55.3 tok/s" in lines[2] and "89% / 63%" in lines[2] and "2.52" in lines[2] and "42.0%" in lines[2]
    assert "55.0%" in lines[2]
    assert lines[3].count(NO_DATA) == 6  # no server numbers: dashes, not zeros


def test_compare_gives_the_change_in_percent_like_the_write_ups() -> None:
    before = _run(_case("medium", _stats(55.3)), _case("reasoning", _stats(55.5)))
    after = _run(_case("medium", _stats(56.5)), _case("reasoning", _stats(63.8)), _case("long", _stats(50.7)))
    rows = {(r.case, r.metric): r for r in compare(before, after)}
    reasoning = rows[("Reasoning (300 tok)", "decode tok/s/req")]
    assert reasoning.before == 55.5 and reasoning.after == 63.8
    assert reasoning.change == pytest.approx((63.8 - 55.5) / 55.5)
    assert rows[("Long (600 tok)", "decode tok/s/req")].before is None  # only the new run has it
    table = compare_table(before, after)
    assert "| Reasoning (300 tok) | decode tok/s/req | 55.5 tok/s | 63.8 tok/s | +15.0% |" in table
    assert "| Long (600 tok) | decode tok/s/req | – | 50.7 tok/s | – |" in table
    assert change(0.0, 1.0) is None and change(None, 1.0) is None and change(2.0, 1.0) == -0.5


def test_a_run_survives_its_json_file() -> None:
    server = ServerStats(10.0, 560.0, 56.0, 200.0, (0.89, None), 2.52, 0.76, 0.42, 1.0)
    request = RequestResult(0.0, 1.0, (0.1, 0.5), 9, 120)
    case = CaseResult("medium", "Medium (300 tok)", "workload", 1, 300, case_stats([request]), server, (request,))
    run = _run(case)
    data = json.loads(json.dumps(to_jsonable(run)))
    assert data["schema_version"] == SCHEMA_VERSION and data["flags"]["cache_config"]["0"]["enable_prefix_caching"]
    back = run_from_json(data)
    assert back == run
    assert render_run(back) == render_run(run)


def test_a_stopped_run_says_so_above_its_table() -> None:
    run = _run(_case("medium", _stats(55.3)))
    stopped = BenchRun(**{**{f: getattr(run, f) for f in run.__dataclass_fields__}, "complete": False})
    assert "stopped early: interrupted" in render_run(stopped) and "stopped early" not in render_run(run)


def test_a_file_that_is_not_a_result_or_of_another_version_is_refused() -> None:
    with pytest.raises(BenchFileError, match="not a sparktui bench result"):
        run_from_json({"nodes": []})
    with pytest.raises(BenchFileError, match="schema version 99"):
        run_from_json({"schema_version": 99, "cases": []})


def test_progress_names_the_case_running_by_its_number_until_the_next_starts() -> None:
    state = BenchProgress(total_requests=4, warming_up=True)
    assert progress_text(state) == "warmup (not counted)"
    state = BenchProgress(total_requests=4, case="Prefill 8k", case_number=13, total_cases=14, cases_done=13)
    assert progress_text(state) == "Prefill 8k: case 13 of 14"  # just finished: still its own number
    assert progress_text(BenchProgress(total_requests=4, cases_done=14)) == "done: 14 cases"


# --- Ctrl-C ---------------------------------------------------------------------------------------


def _ctrl_c_once_started() -> None:
    asyncio.get_running_loop().call_soon(os.kill, os.getpid(), signal.SIGINT)


def test_ctrl_c_stops_a_run_even_when_a_library_swallowed_its_cancellation() -> None:
    """An HTTP client's timeout scope can take the Ctrl-C's cancellation for its own and go on: the run
    is cancelled again until it ends, and reported as stopped."""
    swallowed: list[bool] = []

    async def stubborn() -> None:
        _ctrl_c_once_started()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            swallowed.append(True)  # and goes on as if nothing happened
        await asyncio.sleep(3600)

    assert run_interruptible(stubborn) is True
    assert swallowed == [True]


def test_a_run_that_ends_by_itself_was_not_interrupted() -> None:
    async def quick() -> None:
        await asyncio.sleep(0)

    assert run_interruptible(quick) is False
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # Ctrl-C is Python's again
