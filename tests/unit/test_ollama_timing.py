"""The times an Ollama answer carries (docs.ollama.com/api/generate), as a time to the first token and
tokens per second: the docs' example, a stream, a cached prompt, and hostile answers."""

from __future__ import annotations

import json

import pytest

from sparktui.engines.ollama.timing import AnswerTiming, answer_timing
from tests.support.ollama_server import GENERATED

ANSWER = GENERATED


def test_the_docs_example() -> None:
    timing = answer_timing(json.dumps(ANSWER).encode())
    assert timing is not None
    assert timing.total_s == pytest.approx(0.174560334)
    assert timing.load_s == pytest.approx(0.101397084)
    assert timing.ttft_s == pytest.approx(0.101397084 + 0.013074791)
    assert (timing.prompt_tokens, timing.generated_tokens) == (11, 18)
    assert timing.prompt_tokens_per_s == pytest.approx(11 / 0.013074791)
    assert timing.decode_tokens_per_s == pytest.approx(18 / 0.052479709)  # the docs' eval_count / eval_duration


def test_a_stream_is_timed_by_its_done_line() -> None:
    chunks = [{"model": "gemma3", "response": word, "done": False} for word in ("Hel", "lo")]
    body = "\n".join(json.dumps(c) for c in (*chunks, ANSWER)).encode() + b"\n"
    assert answer_timing(body) == answer_timing(json.dumps(ANSWER).encode())


def test_a_cached_prompt_leaves_its_fields_out_and_those_numbers_are_unknown() -> None:
    cached = {k: v for k, v in ANSWER.items() if not k.startswith("prompt_eval")}
    timing = answer_timing(json.dumps(cached).encode())
    assert timing is not None
    assert (timing.ttft_s, timing.prompt_tokens, timing.prompt_tokens_per_s) == (None, None, None)
    assert timing.decode_tokens_per_s == pytest.approx(18 / 0.052479709)


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"\xff\xfe",
        b"[]",
        json.dumps({**ANSWER, "done": False}).encode(),  # not done: no times yet
        json.dumps({**ANSWER, "done": "true"}).encode(),
        b'{"model": "gemma3", "response": "Hel", "done": false}\nnot json\n',
    ],
)
def test_no_done_answer_is_none(body: bytes) -> None:
    assert answer_timing(body) is None


def test_wrong_types_zero_durations_and_huge_numbers_are_unknown_never_a_rate() -> None:
    hostile = {
        "done": True,
        "total_duration": "174560334",
        "load_duration": -1,
        "prompt_eval_count": True,
        "prompt_eval_duration": 0,
        "eval_count": 10**400,
        "eval_duration": 1.5,
    }
    assert answer_timing(json.dumps(hostile).encode()) == AnswerTiming(
        total_s=None,
        load_s=None,
        ttft_s=None,
        prompt_tokens=None,
        prompt_tokens_per_s=None,
        generated_tokens=None,
        decode_tokens_per_s=None,
    )
    zero = {**ANSWER, "eval_duration": 0, "prompt_eval_duration": 0}
    timing = answer_timing(json.dumps(zero).encode())
    assert timing is not None and (timing.prompt_tokens_per_s, timing.decode_tokens_per_s) == (None, None)
