"""The times Ollama returns in each answer of ``/api/generate`` and ``/api/chat``, as the numbers sparktui
shows of other engines: a time to the first token and tokens per second.

Ollama exports no counters or histograms (``docs/engines.md``); what it gives instead is in each answer,
to whoever asked (docs.ollama.com/api/generate, "Response"; ``api/types.go``, ``Metrics``), all in
nanoseconds: ``total_duration`` (the whole request), ``load_duration`` (loading the model: 0 or small
when it was loaded), ``prompt_eval_count`` and ``prompt_eval_duration`` (the prompt's tokens and their
evaluation), ``eval_count`` and ``eval_duration`` (the tokens generated and their time; the docs'
"tokens per second" is ``eval_count / eval_duration * 10^9``). A streamed answer carries them on its last
line, the one with ``"done": true``. A prompt Ollama found in its cache may leave the prompt's fields out.

Pure: the canary's answer is read here (``canary.read_answer``: its TTFT and decode rate), and so can
any other answer of Ollama's native routes (a warmup's or a bench's).
"""

from __future__ import annotations

from dataclasses import dataclass

from sparktui.model import safe_json
from sparktui.model.numbers import json_int

NS = 1e9
MAX_NS = 10**15  # eleven days: past any request's duration
MAX_TOKENS = 2**31
MAX_LINES = 100_000  # lines of a streamed answer looked at, from its end


@dataclass(frozen=True, slots=True)
class AnswerTiming:
    """One answer's times, in seconds and tokens per second; None where it did not give the input (or
    gave a duration of 0)."""

    total_s: float | None
    load_s: float | None
    ttft_s: float | None  # load + prompt evaluation: the server's time before its first token
    prompt_tokens: int | None
    prompt_tokens_per_s: float | None
    generated_tokens: int | None
    decode_tokens_per_s: float | None


def answer_timing(body: bytes) -> AnswerTiming | None:
    """The times of an ``/api/generate`` or ``/api/chat`` answer (one JSON object, or a stream of them, one
    a line, whose last ``"done": true`` line carries them); None when no such object is there."""
    found = _done(body)
    if found is None:
        return None
    total, load = _ns(found.get("total_duration")), _ns(found.get("load_duration"))
    prompt_n, prompt_ns = _count(found.get("prompt_eval_count")), _ns(found.get("prompt_eval_duration"))
    eval_n, eval_ns = _count(found.get("eval_count")), _ns(found.get("eval_duration"))
    return AnswerTiming(
        total_s=_seconds(total),
        load_s=_seconds(load),
        ttft_s=_seconds(prompt_ns + (load or 0)) if prompt_ns else None,
        prompt_tokens=prompt_n,
        prompt_tokens_per_s=_rate(prompt_n, prompt_ns),
        generated_tokens=eval_n,
        decode_tokens_per_s=_rate(eval_n, eval_ns),
    )


def _done(body: bytes) -> dict[str, object] | None:
    """The last JSON object of ``body`` (a line of a stream, or the whole of it) that says it is done."""
    whole = safe_json.loads(body)
    if isinstance(whole, dict):
        return whole if whole.get("done") is True else None
    for line in reversed(body.splitlines()[-MAX_LINES:]):
        found = safe_json.loads(line) if line.strip() else None
        if isinstance(found, dict) and found.get("done") is True:
            return found
    return None


def _ns(value: object) -> int | None:
    return json_int(value, 0, MAX_NS)


def _count(value: object) -> int | None:
    return json_int(value, 0, MAX_TOKENS)


def _seconds(ns: int | None) -> float | None:
    return ns / NS if ns is not None else None


def _rate(tokens: int | None, ns: int | None) -> float | None:
    if tokens is None or ns is None or ns == 0:
        return None
    return tokens / (ns / NS)
