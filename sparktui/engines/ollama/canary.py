"""Ollama's canary: ``POST /api/generate`` to a model Ollama holds, asking to keep it exactly as long as
it was going to, and read by the times Ollama puts in its answer.

A request naming a model loads it (``server/sched.go``: a model not in ``s.loaded`` is loaded), so a
canary names only a model ``/api/ps`` lists as loaded, never one ``/v1/models`` lists unloaded. And a
request sets how long the model stays loaded after it (docs.ollama.com/api/generate, ``keep_alive``:
"controls how long the model will stay loaded into memory following the request"): in ``sched.go``,
``useLoadedRunner`` takes the request's ``keep_alive`` as the runner's ``sessionDuration``, and when
the request ends the runner's timer restarts with it and ``expiresAt = time.Now().Add(
runner.sessionDuration)`` (what ``/api/ps`` answers as ``expires_at``). So the canary asks for the
seconds that were left (``keep_alive_for``): the model's expiry moves by no more than the canary's own
duration, where a request without ``keep_alive`` would have restarted the default 5 minutes. A number
is seconds, and a negative one is for ever (``api/types.go``, ``Duration.UnmarshalJSON``: ``t < 0`` is
``math.MaxInt64`` nanoseconds, an expiry some 292 years ahead): a model held for ever is asked -1,
and stays so.

No canary goes to a model past its expiry (overdue: it is being unloaded, or a request holds it), nor
to one with fewer than ``MIN_LEFT_S`` left: the canary could reach the scheduler after the timer fired
and load the model again. One thing it does change: a later request that names no ``keep_alive`` keeps
the runner's ``sessionDuration`` (``useLoadedRunner`` sets it only from a request that gives one), so
until one does, the model's next keep-alive is what was left at the canary, not Ollama's default.

Ollama counts no tokens, so the canary's "no token moved for ``idle_s``" always holds: one goes every
``[canary] interval_s`` while a model qualifies. It asks ``CANARY_TOKENS`` tokens, not one: Ollama's
time to the first token is its ``load_duration`` plus ``prompt_eval_duration`` however many tokens
follow, and its decode rate (``eval_count / eval_duration``, ``timing.py``) needs tokens after the
first to mean anything.
"""

from __future__ import annotations

from sparktui.engines.ollama.timing import answer_timing
from sparktui.model.canary import CanaryAnswer, CanaryAsk, CanaryPlan
from sparktui.model.scrape import ModelLoad, ServedModel

GENERATE_PATH = "/api/generate"
CANARY_TOKENS = 8  # Ollama's options.num_predict: enough after the first for a decode rate
MIN_DECODE_TOKENS = 2  # fewer: eval_duration is one token's sampling, no rate
MIN_LEFT_S = 30.0  # fewer seconds before its expiry: the canary could race the unload and load it again
FOREVER_S = 10 * 365 * 86400.0  # an expiry further ahead than ten years: held for ever (keep_alive -1)
FOREVER = -1


def keep_alive_for(model: ServedModel, wall: float | None) -> int | None:
    """The ``keep_alive`` a canary to ``model`` asks (seconds; -1: for ever), at unix time ``wall``;
    None when no canary may name it: not loaded, no expiry known, overdue, or under ``MIN_LEFT_S``
    left. Whole seconds, rounded down: the expiry never moves later than the canary's own duration."""
    if model.load is not ModelLoad.LOADED or model.expires_wall is None or wall is None:
        return None
    if model.overdue_s is not None:
        return None
    left = model.expires_wall - wall
    if left > FOREVER_S:
        return FOREVER
    if left < MIN_LEFT_S:
        return None
    return int(left)


def canary_request(ask: CanaryAsk) -> tuple[str, dict[str, object]] | None:
    """The first loaded model a canary may name (``keep_alive_for``) and the ``/api/generate`` payload
    for it: the configured prompt, not streamed, greedy, ``CANARY_TOKENS`` tokens; None when there is
    no such model (nothing loaded, or each one near or past its expiry)."""
    for model in ask.models:
        keep_alive = keep_alive_for(model, ask.wall)
        if keep_alive is not None:
            return model.id, {
                "model": model.id,
                "prompt": ask.prompt,
                "stream": False,
                "keep_alive": keep_alive,
                "options": {"num_predict": CANARY_TOKENS, "temperature": 0},
            }
    return None


def read_answer(body: bytes) -> CanaryAnswer | None:
    """An ``/api/generate`` answer's timing (``timing.answer_timing``): its time to the first token,
    and its decode rate where it generated ``MIN_DECODE_TOKENS`` or more; None when it is not an
    answer that is done."""
    timing = answer_timing(body)
    if timing is None:
        return None
    counted = timing.generated_tokens is not None and timing.generated_tokens >= MIN_DECODE_TOKENS
    return CanaryAnswer(timing.ttft_s, timing.decode_tokens_per_s if counted else None)


CANARY = CanaryPlan(path=GENERATE_PATH, request=canary_request, read=read_answer)
