"""The canary: one tiny completion that proves an idle engine still generates.

An engine core that hangs while idle is invisible to every poll: ``/health`` and ``/metrics`` answer
200 at once from the API process, the numbers freeze, and a request sent now waits for ever without
showing up in ``num_requests_running`` or ``num_requests_waiting`` (seen on the real engine with its
core stopped; ``docs/diagnosis.md``). Only a request tells. So when an instance says it is up and no
token has moved for ``CanarySpec.idle_s``, sparktui sends one completion of ``max_tokens`` 1 with a
deadline; an answer proves the engine alive and gives its TTFT (with one token to generate, the answer
*is* the first token), a timeout while ``/health`` says 200 is the evidence of a wedge.

This module is the pure half: when a canary is due, and what its answer means. The sender is
``sparktui.sources.canary``; its result comes back as ``ServerObservation.canary`` and is kept here.

How a canary is asked and read is the engine's where it is not an OpenAI completion
(``EngineReading.canary_plan``, a ``CanaryPlan``): which model it may name (or none: no canary now),
on which path, with what payload, and how its answer is read; an engine that times its own answers
gives its own time to the first token and decode rate (``CanaryAnswer``), shown instead of the wall
time. Without a plan, a canary is ``POST /v1/completions`` of ``max_tokens`` 1, judged by its
``"choices"`` and timed by the wall clock.

Rules (``CanaryClock.due``):

- never while tokens are moving: a token in the last ``idle_s`` already proves liveness;
- only while the instance answers ``/health`` 200 (a down engine is down, not wedged);
- never to an engine that is asleep (``vllm:engine_sleep_state``): it generates nothing until woken
  (``InstanceState.canary_due``);
- never while one is in flight, and never twice within ``interval_s``;
- not at all when the instance's ``canary = false`` or ``[canary] enabled = false``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sparktui.model.observations import FetchKind, HttpResult
from sparktui.model.scrape import ServedModel

CANARY_MAX_TOKENS = 1


@dataclass(frozen=True, slots=True)
class CanaryAsk:
    """What an engine's plan is given to build a canary: the configured ``prompt``, the first model the
    server serves (``model``; None: not known yet), every model of a server that loads them on demand
    and where each is (``models``; () for one that serves what it loaded at its start) and the unix
    time of the poll it follows (``wall``; None: not known), against which a server's own times
    (an expiry) are judged."""

    prompt: str
    model: str | None
    models: tuple[ServedModel, ...]
    wall: float | None


@dataclass(frozen=True, slots=True)
class CanaryAnswer:
    """What an engine's own answer says of its timing: the time to its first token as the engine
    measured it (``ttft_s``; None: not given, the wall time stands) and its decode rate
    (``decode_tokens_per_s``; None: not given, or too few tokens to make one)."""

    ttft_s: float | None
    decode_tokens_per_s: float | None


@dataclass(frozen=True, slots=True)
class CanaryPlan:
    """An engine's own canary. ``request``: the model to name and the JSON payload to POST to ``path``,
    or None when no canary may go out now (every model it could name would be loaded, or its
    keep-alive changed, by it); ``read``: the answer's timing, None when the body is not an answer
    (a 2xx that is not one proves nothing)."""

    path: str
    request: Callable[[CanaryAsk], tuple[str, dict[str, object]] | None]
    read: Callable[[bytes], CanaryAnswer | None]


@dataclass(frozen=True, slots=True)
class CanaryResult:
    """One canary's outcome. ``ttft_s``: the answer's time (it carries the one token asked for), or
    the engine's own time to its first token where its answer gives one (``engine_timed``);
    ``decode_tokens_per_s``: the engine's own decode rate, where its answer gives one (None: "–");
    ``timed_out``: no answer within the deadline; ``problem``: why it failed, one line (None: it answered)."""

    sent_t: float
    done_t: float
    ttft_s: float | None
    timed_out: bool
    problem: str | None
    engine_timed: bool = False
    decode_tokens_per_s: float | None = None

    @property
    def answered(self) -> bool:
        return self.problem is None


def judge(
    result: HttpResult, sent_t: float, done_t: float, read: Callable[[bytes], CanaryAnswer | None] | None = None
) -> CanaryResult:
    """What the POST's ``result`` says of the engine. Only a 2xx answer with a completion in it proves
    the engine generated; an HTTP error proves the API process lives but not the engine, and is shown
    as a problem, not as a wedge; only no answer at all within the deadline is a wedge's evidence.
    ``read``: the engine's reading of its own answer (``CanaryPlan.read``); None: an OpenAI completion,
    timed by the wall clock."""
    if result.kind is FetchKind.TIMEOUT:
        return CanaryResult(sent_t, done_t, None, True, result.problem())
    if not result.answered:
        return CanaryResult(sent_t, done_t, None, False, result.problem())
    if not result.ok:
        return CanaryResult(sent_t, done_t, None, False, result.problem())
    if read is None:
        if b'"choices"' not in result.body:
            return CanaryResult(sent_t, done_t, None, False, "the answer is not a completion")
        return CanaryResult(sent_t, done_t, result.elapsed_s, False, None)
    answer = read(result.body)
    if answer is None:
        return CanaryResult(sent_t, done_t, None, False, "the answer is not a completion")
    engine_timed = answer.ttft_s is not None
    ttft = answer.ttft_s if answer.ttft_s is not None else result.elapsed_s
    return CanaryResult(sent_t, done_t, ttft, False, None, engine_timed, answer.decode_tokens_per_s)


@dataclass(frozen=True, slots=True)
class CanaryView:
    """What the screen and the headless commands show of an instance's canary."""

    sent: int  # canaries sent to this instance since sparktui started
    in_flight: bool
    last: CanaryResult | None
    wedged: bool  # the last canary timed out while /health said 200, and no token moved since
    quiet_s: float | None = None  # seconds since a token last moved (None: no scrape yet)
    idle_s: float | None = None  # the quiet time after which a canary goes out
    asleep: bool = False  # the engine is asleep: no canary goes out


class CanaryClock:
    """One instance's canary bookkeeping: when tokens last moved, what was sent, what came back."""

    def __init__(self, idle_s: float, interval_s: float) -> None:
        self.idle_s = idle_s
        self.interval_s = interval_s
        self.tokens_moved_t: float | None = None  # the last scrape that showed the token count rise
        self.first_seen_t: float | None = None  # the first scrape: the idle time counts from here
        self.sent = 0
        self.sent_t: float | None = None
        self.in_flight = False
        self.last: CanaryResult | None = None

    def scraped(self, t: float, tokens_moved: bool) -> None:
        """A scrape at ``t``; ``tokens_moved``: the generation counter rose since the one before."""
        if self.first_seen_t is None:
            self.first_seen_t = t
        if tokens_moved:
            self.tokens_moved_t = t

    def idle_for(self, t: float) -> float | None:
        """Seconds since a token last moved (or since the first scrape), None before any scrape."""
        since = self.tokens_moved_t if self.tokens_moved_t is not None else self.first_seen_t
        return None if since is None else t - since

    def due(self, t: float, healthy: bool) -> bool:
        """Whether a canary should go out at ``t`` (the rules in the module docstring)."""
        if not healthy or self.in_flight:
            return False
        idle = self.idle_for(t)
        if idle is None or idle < self.idle_s:
            return False
        return self.sent_t is None or t - self.sent_t >= self.interval_s

    def send(self, t: float) -> None:
        """The canary went out at ``t``."""
        self.sent += 1
        self.sent_t = t
        self.in_flight = True

    def done(self, result: CanaryResult) -> None:
        """Its result came back. One that was not sent from here (a recording's, replayed) counts too."""
        if not self.in_flight:
            self.sent += 1
            self.sent_t = result.sent_t
        self.in_flight = False
        self.last = result

    def wedged(self) -> bool:
        """The last canary got no answer in time, and no token has moved since it was sent."""
        last = self.last
        if last is None or not last.timed_out:
            return False
        return self.tokens_moved_t is None or self.tokens_moved_t <= last.sent_t

    def view(self, t: float, *, asleep: bool = False) -> CanaryView:
        return CanaryView(
            sent=self.sent,
            in_flight=self.in_flight,
            last=self.last,
            wedged=self.wedged() and not asleep,  # a timeout before it was put to sleep is old news
            quiet_s=self.idle_for(t),
            idle_s=self.idle_s,
            asleep=asleep,
        )


def canary_text(view: CanaryView) -> str:
    """One line for the screen and ``snapshot``: how many were sent, and what the last one got."""
    sent = f"{view.sent} sent"
    if view.in_flight:
        return f"canary: {sent}, one waiting for its answer"
    if view.asleep:
        return f"canary: {sent}; none while the engine is asleep"
    last = view.last
    if last is None:
        quiet, idle = view.quiet_s, view.idle_s
        if quiet is not None and idle is not None and quiet < idle:
            return f"canary: none needed while tokens move (one after {idle:g} s without a token)"
        return "canary: none sent yet"
    if last.answered and last.ttft_s is not None and last.engine_timed:
        decode = last.decode_tokens_per_s
        rate = f"{decode:.1f} tok/s" if decode is not None else "–"
        ttft = f"TTFT {last.ttft_s * 1000:.0f} ms"
        return f"canary: {sent}, last answered: {ttft}, decode {rate} (the engine's own timing)"
    if last.answered and last.ttft_s is not None:
        return f"canary: {sent}, last answered in {last.ttft_s * 1000:.0f} ms (TTFT of 1 token)"
    verdict = "wedged" if view.wedged else "failed"
    return f"canary: {sent}, last {verdict}: {last.problem}"
