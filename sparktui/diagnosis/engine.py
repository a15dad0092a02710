"""Diagnosis: the known failure signatures of DGX Spark vLLM nodes, matched against a node's evidence.

The catalogue is data (``sparktui/data/failures.toml``, one rule per row of the failure catalogue):
``load_catalogue()`` reads and validates it, compiling every regular expression, and
``Catalogue.with_overrides()`` applies thresholds from the config (``"<rule id>.<param>"``). The rest
is pure: ``DiagnosisEngine.evaluate()`` is called once per poll of a node with

- the node's ``NodeView`` (statuses, rates, launch readiness, host state, shm leftovers, stale workers),
- the log lines each instance wrote since the last call (``unread()`` takes them from a ``LogBuffer``
  by the engine's cursor, so only new lines are ever scanned),
- each instance's numbers between its last two scrapes (``last_intervals()``), which the per-poll
  detectors compare (engine wedged, decode stall, KV pressure, cold JIT); without them they fall back
  to the view's windowed rates, which react only as fast as the window empties,

and answers the node's active findings. The engine keeps the little history it needs itself (recent
generation tok/s, per-position acceptance baselines, restart counts, memory, starts seen) and a bounded
history of cleared findings per node. docs/diagnosis.md describes the rules and the data format.

Hysteresis: a detector finding opens when its condition holds in ``open_after`` evaluations in a row
and clears when it has been false for ``clear_after_s`` seconds (an evaluation that cannot tell, e.g.
no host sample, changes nothing). A log finding opens on a matching line; "attempt" rules (start-up
failures) clear once the instance serves a request after the last match, or has been serving (UP or
DEGRADED: /health 200) for ``healthy_s`` after it, or after ``quiet_s`` without a new match; "process"
rules (how the running process was launched) clear only when a later start has been serving for
``healthy_s`` without the line, or after ``quiet_s`` down and silent.

Kernel-log rules (``stream = "kernel"``) read the node's kernel log, passed under the name
``KERNEL_LOG`` beside the instances' logs; their findings are the node's (``instance`` None), and
"attempt" ones clear once any instance of the node has served again after the last match. "quiet"
rules (an event of the box, a GPU fault or a thermal trip) clear only after ``quiet_s`` without a new match.

Actions: ``action_started`` / ``action_ended`` (the monitor core hears them from the dashboard) hold the
wedge-type detectors (``HELD_DURING_ACTIONS``) of what an action touches while it runs and for
``ACTION_SETTLE_S`` after: a restart's warmup request waits for the JIT with no token, on purpose.
"""

from __future__ import annotations

import re
import statistics
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from sparktui.diagnosis.catalogue import Catalogue, Rule, Severity
from sparktui.model.derive import VllmRates
from sparktui.model.engines import busiest_engine_words
from sparktui.model.exporters import THERMAL_THROTTLE, GpuReading, throttle_words
from sparktui.model.fabric import RANK_HEADER, FabricView, JobView, rank_line, short_sums
from sparktui.model.fleet import InstanceView, NodeState, NodeView
from sparktui.model.logbuffer import KERNEL_LOG, LogBuffer, LogLine
from sparktui.model.memory import GIB
from sparktui.model.status import State
from sparktui.model.units import NO_DATA, fmt_bits, fmt_clock, fmt_rate

SERVING = frozenset({State.UP, State.DEGRADED})
MAX_LOG_EVIDENCE = 5  # matching lines shown per finding: the first and the newest
MAX_EVIDENCE_CHARS = 1000  # of one evidence line
DEFAULT_HISTORY = 200  # cleared findings kept per node
MEMORY_TREND_S = 120.0  # how far back "MemAvailable fell …" looks
MAX_PROBLEMS = 50
START_WOBBLE_S = 1.0  # a service start time that moved by less is the same start (read through two clocks)
# An action sparktui runs itself (restart, warmup, drop caches) makes an engine look stuck on purpose: a
# restart's cold first request waits 25-60 s for the JIT with no token. The detectors that read "no or
# slow tokens" as a wedge are held for the instance while the action runs and for ACTION_SETTLE_S after.
ACTION_SETTLE_S = 30.0
HELD_DURING_ACTIONS = frozenset({"requests-without-tokens", "decode-slow"})  # detector names

# --- findings --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Finding:
    """A matched failure signature on a node (``instance`` None: the node as a whole).

    ``evidence`` is what matched, one line each: log lines with their own timestamps, or numbers with
    their units and the time they were seen. ``lines`` are the matching log lines themselves (by their
    ``seq`` the log view can highlight them). Times ``opened_at``, ``last_seen`` and ``cleared_at`` are
    on the clock passed to ``evaluate`` (the poll loop's monotonic clock): show them with
    ``Monitor.wall_at`` and ``units.fmt_clock``; the evidence's times are wall-clock already.
    """

    id: str
    node: str
    instance: str | None
    severity: Severity
    title: str
    evidence: tuple[str, ...]
    explanation: str
    fix: str
    action: str | None
    opened_at: float
    last_seen: float
    cleared_at: float | None = None
    lines: tuple[LogLine, ...] = ()

    @property
    def active(self) -> bool:
        return self.cleared_at is None

    @property
    def key(self) -> tuple[str, str, str | None]:
        return (self.node, self.id, self.instance)


# --- what the engine remembers ---------------------------------------------------------------------


@dataclass(slots=True)
class _InstanceMemory:
    cursor: int = 0  # the seq of the next log line to scan
    state: State | None = None
    serving_since: float | None = None  # UP or DEGRADED (answering /health 200) without a break
    stopped_at: float | None = None  # when it was seen to stop serving (None: serving, or never seen to)
    starts: int = 0
    last_start: float | None = None
    last_start_eval: int = -1
    served: bool = True  # a request finished or a token was generated since the last start
    served_at: float | None = None  # the last evaluation whose numbers showed a request finished or a token
    reset_seen: bool = False
    service_started: float | None = None
    first_error: LogLine | None = None  # of the newest attempt that logged one
    error_taken: bool = False
    restarts: deque[tuple[float, int]] = field(default_factory=deque)  # (t, count) at each change
    gen_history: deque[tuple[float, float]] = field(default_factory=deque)  # (running, tok/s)
    gen_recent: deque[tuple[float, float, float]] = field(default_factory=deque)  # (t, tokens, seconds)
    spec_k: int | None = None
    spec_history: deque[float] = field(default_factory=deque)  # last position's acceptance


@dataclass(slots=True)
class _Track:
    """One rule on one subject (an instance, or None for the node): its hysteresis and evidence."""

    rule: Rule
    subject: str | None
    streak: int = 0  # evaluations in a row the condition held
    true_since: float | None = None
    false_since: float | None = None
    opened_at: float | None = None  # None: not open
    last_seen: float = 0.0
    evidence: tuple[str, ...] = ()
    first: LogLine | None = None
    recent: deque[LogLine] = field(default_factory=lambda: deque(maxlen=MAX_LOG_EVIDENCE - 1))
    seen: dict[int, LogLine] = field(default_factory=dict)  # "all" rules: pattern index → line
    matches: int = 0
    title: str | None = None  # the title filled from the first matching line (``Rule.title_for``)
    last_match_at: float | None = None
    phase: int = 0  # "process" rules: 0 matched, 1 served since, 2 started again since
    restarted_at: float | None = None
    quoted: tuple[LogLine, ...] = ()  # detector rules: log lines their evidence quotes
    shown: bool = False
    snapshot: Finding | None = None

    @property
    def open(self) -> bool:
        return self.opened_at is not None


@dataclass(slots=True)
class _ActionHold:
    """Actions running on an instance (or the whole node) and when the last one ended."""

    running: int = 0
    ended_at: float | None = None

    def holds(self, now: float) -> bool:
        return self.running > 0 or (self.ended_at is not None and now - self.ended_at < ACTION_SETTLE_S)


@dataclass(slots=True)
class _NodeMemory:
    instances: dict[str, _InstanceMemory] = field(default_factory=dict)
    tracks: dict[tuple[str, str | None], _Track] = field(default_factory=dict)
    history: deque[Finding] = field(default_factory=deque)
    host_seq: int | None = None
    host_fresh_at: float | None = None
    http_failing_since: float | None = None
    ssh_failing_since: float | None = None
    available: deque[tuple[float, float]] = field(default_factory=deque)  # (t, MemAvailable)
    actions: dict[str | None, _ActionHold] = field(default_factory=dict)  # instance (None: all) -> hold
    kernel_cursor: int = 0  # the seq of the next kernel-log line to scan

    def instance(self, name: str) -> _InstanceMemory:
        found = self.instances.get(name)
        if found is None:
            found = self.instances[name] = _InstanceMemory()
        return found


@dataclass(frozen=True, slots=True)
class _Check:
    holds: bool
    evidence: tuple[str, ...] = ()
    lines: tuple[LogLine, ...] = ()  # log lines the evidence quotes, for highlighting


_NO = _Check(False)


@dataclass(slots=True)
class _Ctx:
    """One evaluation of one node."""

    node: NodeView
    now: float
    memory: _NodeMemory
    intervals: Mapping[str, VllmRates | None] | None
    eval_id: int
    wall: float | None = None  # the wall-clock time of ``now``
    instances: dict[str, InstanceView] = field(default_factory=dict)

    def rates(self, inst: InstanceView) -> VllmRates | None:
        """The instance's numbers over the last poll interval, else over the view's window."""
        if self.intervals is not None and inst.name in self.intervals:
            return self.intervals[inst.name]
        return inst.rates

    def at(self, t: float | None = None) -> str:
        """Engine time ``t`` (default now) as local wall-clock time with its zone (``fmt_clock``), by
        the caller's mapping (``wall``: the wall time of ``now``), else the node's last poll's."""
        t = self.now if t is None else t
        wall = self.wall if self.wall is not None else self.node.polled_wall
        shown = fmt_clock(wall + (t - self.now)) if wall is not None else NO_DATA
        return f"t={t:.0f} s" if shown == NO_DATA else shown


def _gib(value: float) -> str:
    return f"{value / GIB:.1f} GiB"


def _size(value: float) -> str:
    for unit, scale in (("GiB", GIB), ("MiB", 1024**2), ("KiB", 1024)):
        if abs(value) >= scale:
            return f"{value / scale:.1f} {unit}"
    return f"{value:.0f} B"


def _log_line(line: LogLine) -> str:
    stamp = fmt_clock(line.timestamp.timestamp(), date=True) if line.timestamp else "(no time)"
    text = line.text
    if len(text) > MAX_EVIDENCE_CHARS:
        text = text[:MAX_EVIDENCE_CHARS] + "…"
    return f"{stamp}  {text}"


# --- detectors -------------------------------------------------------------------------------------

NodeCheck = Callable[[_Ctx, Rule], "_Check | None"]
InstanceCheck = Callable[[_Ctx, Rule, InstanceView, _InstanceMemory], "_Check | None"]


def _launch_not_ready(ctx: _Ctx, rule: Rule, inst: InstanceView, im: _InstanceMemory) -> _Check | None:
    if inst.status.state in SERVING:
        return _NO  # a serving instance holds its memory already: the prediction does not apply
    if inst.role == "worker":
        return _NO  # a tensor-parallel worker starts with its head, which is judged on its own node
    if inst.status.state is State.LOADING:
        return _NO  # a start is under way: its own allocations count against MemAvailable now
    if ctx.node.is_stale("host"):
        return _NO  # no fresh host state (a powered-off node): nothing to predict from
    fresh_at = ctx.memory.host_fresh_at
    if im.stopped_at is not None and (fresh_at is None or fresh_at <= im.stopped_at):
        return None  # the memory read before it stopped still counts what it held: wait for a new sample
    launch = inst.launch
    if launch is None or launch.ready is None:
        return None
    if launch.ready:
        return _NO
    return _Check(True, (f"{inst.name} would not start now: {launch.reason} (at {ctx.at()})",))


def _shm_leftovers(ctx: _Ctx, rule: Rule) -> _Check | None:
    host = ctx.node.host_state
    if host is None or host.shm is None or host.processes is None:
        return None
    entries = ctx.node.shm_leftovers
    if not entries or len(entries) < rule.param("min_entries"):
        return _NO
    total = sum(entry.held_bytes for entry in entries)
    names = ", ".join(f"{e.name} ({_size(e.held_bytes)})" for e in entries[:6])
    more = f" and {len(entries) - 6} more" if len(entries) > 6 else ""
    return _Check(
        True,
        (
            f"{len(entries)} leftover entries in /dev/shm holding {_size(total)} while no vLLM process "
            f"runs (at {ctx.at()}): {names}{more}",
        ),
    )


def _stale_workers(ctx: _Ctx, rule: Rule) -> _Check | None:
    host = ctx.node.host_state
    if host is None or host.processes is None:
        return None
    workers = ctx.node.stale_workers
    if not workers or len(workers) < rule.param("min_workers"):
        return _NO
    stopped = [f"{i.service.name} is {i.service.state}" for i in ctx.node.instances if i.service is not None]
    processes = "process" if len(workers) == 1 else "processes"
    evidence = [
        f"{len(workers)} VLLM::Worker {processes} alive while {', '.join(stopped) or 'the service is stopped'} "
        f"(at {ctx.at()})"
    ]
    evidence.extend(f"pid {p.pid} (parent {p.ppid}): {p.args.strip()}, RSS {_size(p.rss_bytes)}" for p in workers[:6])
    return _Check(True, tuple(evidence))


def _service_state(inst: InstanceView) -> str:
    service = inst.service
    if service is None:
        return "unknown"
    sub = f" ({service.sub_state})" if service.sub_state else ""
    return f"{service.name} is {service.state}{sub}"


def _exec_not_found(ctx: _Ctx, rule: Rule, inst: InstanceView, im: _InstanceMemory) -> _Check | None:
    service = inst.service
    if service is None:
        return None
    missing = service.exec_exists is False and not service.running
    if service.exit_status != int(rule.param("exit_status")) and not missing:
        return _NO
    restarts = f", {service.restarts} restarts" if service.restarts is not None else ""
    evidence = [f"{_service_state(inst)}, exit status {service.exit_status}{restarts} (at {ctx.at()})"]
    if service.exec_path:
        exists = {False: "does not exist on the node", True: "exists", None: "could not be checked"}
        evidence.append(f"ExecStart runs {service.exec_path}, which {exists[service.exec_exists]}")
    return _Check(True, tuple(evidence))


def _restarts_rising(ctx: _Ctx, rule: Rule, inst: InstanceView, im: _InstanceMemory) -> _Check | None:
    service = inst.service
    if service is None or service.restarts is None:
        return None
    now, count, window = ctx.now, service.restarts, rule.param("window_s")
    history = im.restarts
    if history and count < history[-1][1]:
        history.clear()  # the count went down: the unit was reset or the container recreated
    if not history or history[-1][1] != count:
        history.append((now, count))
    while len(history) > 1 and now - history[1][0] >= window:
        history.popleft()  # keep one entry at or before the window's start: the count there
    rise = count - history[0][1]
    between = service.restarting or service.failed
    rising = rise >= rule.param("min_rise") and inst.status.state not in SERVING
    if not rising and not (count >= rule.param("min_restarts") and between):
        return _NO
    exit_status = f", last exit status {service.exit_status}" if service.exit_status else ""
    since = f", +{rise} since {ctx.at(history[0][0])}" if rise > 0 else ""
    evidence = [f"{_service_state(inst)}: {count} restarts{since}{exit_status} (at {ctx.at()})"]
    if im.first_error is None:
        return _Check(True, tuple(evidence))
    evidence.append(f"first error of the last attempt: {_log_line(im.first_error)}")
    return _Check(True, tuple(evidence), (im.first_error,))


def _requests_without_tokens(ctx: _Ctx, rule: Rule, inst: InstanceView, im: _InstanceMemory) -> _Check | None:
    if inst.url is None:
        return None
    if inst.status.state not in SERVING or inst.asleep:  # asleep: quiet on purpose
        return _NO
    canary = inst.canary
    if canary is not None and canary.wedged and canary.last is not None:
        # Idle, or its requests hidden: only a request tells, and the canary got no answer.
        return _Check(
            True,
            (
                f"a canary (1-token completion) sent at {ctx.at(canary.last.sent_t)}: {canary.last.problem}",
                "no token generated since",
                f"/health answers 200 ({inst.status.state.value})",
            ),
        )
    if inst.running is None and inst.waiting is None:
        return None
    running, waiting = inst.running or 0.0, inst.waiting or 0.0
    if running + waiting <= 0:
        return _NO
    rates = ctx.rates(inst)
    generated = rates.generation_tokens_per_s if rates is not None else None
    if rates is None or generated is None:
        return None
    if generated > 0:
        return _NO
    return _Check(
        True,
        (
            f"{running:.0f} running, {waiting:.0f} waiting at {ctx.at()}",
            f"0 tokens generated over the last {rates.seconds:.1f} s",
            f"/health answers 200 ({inst.status.state.value})",
        ),
    )


def _decode_slow(ctx: _Ctx, rule: Rule, inst: InstanceView, im: _InstanceMemory) -> _Check | None:
    if inst.url is None:
        return None
    if inst.status.state not in SERVING or inst.asleep:  # nor does it learn a baseline
        return _NO
    rates = ctx.rates(inst)
    generated = rates.generation_tokens_per_s if rates is not None else None
    running = inst.running
    if rates is None or generated is None or running is None:
        return None
    # The verdict reads the rate over the last ``span_s``, not one interval: a long prompt's chunked
    # prefill holds a running slot for seconds without a token and slows every step, which at low
    # traffic is a dip of several seconds; a throttled or starved GPU stays slow for minutes.
    span = rule.param("span_s")
    recent = im.gen_recent
    recent.append((ctx.now, generated * rates.seconds, rates.seconds))
    while len(recent) > 1 and recent[1][0] <= ctx.now - span:
        recent.popleft()  # keep one interval reaching back to the span's start
    covered = sum(seconds for _, _, seconds in recent)
    if running <= 0 or generated <= 0:
        return _NO  # idle, or no token at all (that is engine-wedged)
    comparable = [rate for busy, rate in im.gen_history if busy <= running]
    median = statistics.median(comparable) if len(comparable) >= rule.param("min_samples") else None
    factor = rule.param("factor")
    over_span = sum(tokens for _, tokens, _ in recent) / covered if covered > 0 else generated
    if median is not None and generated < factor * median:
        if covered < span or over_span >= factor * median:
            return None  # slow this interval; not (yet) for the whole span
        return _Check(
            True,
            (
                f"generation {over_span:.1f} tok/s over the last {covered:.0f} s "
                f"({generated:.1f} tok/s in the last {rates.seconds:.1f} s) with {running:.0f} running (at {ctx.at()})",
                f"recent median {median:.1f} tok/s at {running:.0f} or fewer running "
                f"({len(comparable)} polls); under {factor:g} × median = {factor * median:.1f} tok/s",
            ),
        )
    if median is None and len(im.gen_history) >= rule.param("min_samples"):
        overall = statistics.median(rate for _, rate in im.gen_history)
        if generated < factor * overall:
            return None  # no baseline at this load, and too slow to teach it one
    im.gen_history.append((running, generated))  # the baseline learns only from normal polls
    while len(im.gen_history) > rule.param("history"):
        im.gen_history.popleft()
    return None if median is None else _NO


def _position_collapse(ctx: _Ctx, rule: Rule, inst: InstanceView, im: _InstanceMemory) -> _Check | None:
    if inst.status.state not in SERVING:
        return _NO  # not answering: its numbers are not shown, and a draft that is not run costs nothing
    rates = inst.rates  # the view's window: acceptance is a trend, not one poll
    if rates is None:
        return None
    spec = rates.spec_decode
    if spec is None or spec.num_speculative_tokens < 2:
        return _NO
    k = spec.num_speculative_tokens
    last = spec.per_position[-1] if spec.per_position else None
    if spec.drafts < rule.param("min_drafts") or last is None:
        return None
    if im.spec_k != k:
        im.spec_k = k
        im.spec_history.clear()  # relaunched with another num_speculative_tokens: a new baseline
    history = im.spec_history
    enough = len(history) >= rule.param("min_baseline_samples")
    baseline = statistics.median(history) if enough else None
    floor, factor = rule.param("min_acceptance"), rule.param("baseline_factor")
    under_floor = last < floor
    under_baseline = baseline is not None and last < factor * baseline
    if not under_floor and not under_baseline:
        history.append(last)
        while len(history) > rule.param("baseline_samples"):
            history.popleft()
        return _NO
    evidence = [
        f"draft position {k - 1} (the last of {k}) accepted in {last:.3f} of drafts over the last "
        f"{rates.seconds:.0f} s ({spec.drafts:.0f} drafts, at {ctx.at()})"
    ]
    conditional = spec.conditional[-1] if spec.conditional else None
    if conditional is not None:
        evidence.append(f"accepted in {conditional:.2f} of the drafts whose position {k - 2} was accepted")
    if under_floor:
        evidence.append(f"under the catalogue's {floor:g}")
    if baseline is not None:
        relation = f": under {factor:g} × baseline" if under_baseline else ""
        evidence.append(f"its own baseline {baseline:.3f} (median of {len(history)} polls){relation}")
    if spec.acceptance_rate is not None and spec.mean_acceptance_length is not None:
        evidence.append(
            f"acceptance rate {spec.acceptance_rate:.1%}, mean acceptance length "
            f"{spec.mean_acceptance_length:.2f} with num_speculative_tokens = {k}"
        )
    generated = rates.generation_tokens_per_s
    if generated is not None and len(im.gen_history) >= 3:
        median = statistics.median(rate for _, rate in im.gen_history)
        evidence.append(f"generation {generated:.0f} tok/s (recent median {median:.0f} tok/s)")
    return _Check(True, tuple(evidence))


def _kv_preemptions(ctx: _Ctx, rule: Rule, inst: InstanceView, im: _InstanceMemory) -> _Check | None:
    if inst.url is None:
        return None
    if inst.status.state not in SERVING:
        return _NO  # not answering: nothing is preempted, and its last gauges are not shown
    kv = inst.kv_usage
    rates = ctx.rates(inst)
    preempted = rates.preemptions if rates is not None else None
    if kv is None or rates is None or preempted is None:
        return None
    threshold = rule.param("kv_usage_min")
    if kv < threshold or preempted < rule.param("preemptions_min"):
        return _NO
    evidence = [
        f"KV cache {kv:.0%} full{busiest_engine_words(inst.kv)} at {ctx.at()} (threshold {threshold:.0%})",
        f"{preempted:.0f} preemptions over the last {rates.seconds:.1f} s ({(rates.preemptions_per_s or 0.0):.2f}/s)",
    ]
    if inst.waiting:
        evidence.append(f"{inst.waiting:.0f} requests waiting")
    return _Check(True, tuple(evidence))


def _never_served(ctx: _Ctx, rule: Rule, inst: InstanceView, im: _InstanceMemory) -> _Check | None:
    if inst.url is None:
        return None
    if inst.status.state not in SERVING or im.last_start is None or im.served or inst.asleep:
        return _NO  # asleep: it cannot serve until woken, and waking it is the operator's call
    if im.serving_since is None or ctx.now - im.serving_since < rule.param("min_up_s"):
        return _NO
    return _Check(
        True,
        (
            f"answering since {ctx.at(im.serving_since)}, after a start seen at {ctx.at(im.last_start)}",
            "no request finished and no token generated since the start",
        ),
    )


def _status(ctx: _Ctx, rule: Rule, inst: InstanceView, im: _InstanceMemory) -> _Check | None:
    if inst.url is None:
        return None  # a worker's status is its head's
    status = inst.status
    if status.state.value != rule.detector_args["state"]:
        return _NO
    pattern = rule.detector_patterns.get("reason")
    matched = [r for r in status.reasons if pattern is None or pattern.search(r)]
    if not matched:
        return _NO
    return _Check(True, tuple(f"{reason} (at {ctx.at()})" for reason in matched))


def _unreachable(ctx: _Ctx, rule: Rule) -> _Check | None:
    node, memory, now = ctx.node, ctx.memory, ctx.now
    pattern = rule.detector_patterns["unanswered"]
    probed = [i for i in node.instances if i.url is not None]
    http: tuple[str, ...] = ()
    if node.status.state is State.STALE:
        http = node.status.reasons
    elif probed and all(
        i.status.state in (State.DOWN, State.STALE) and any(pattern.search(r) for r in i.status.reasons) for i in probed
    ):
        http = tuple(r for i in probed for r in i.status.reasons)
    ssh: str | None = None
    ssh_since: float | None = None
    if node.host_problem is not None:
        ssh = node.host_problem
        ssh_since = memory.ssh_failing_since if memory.ssh_failing_since is not None else now
    elif memory.host_fresh_at is not None and now - memory.host_fresh_at >= rule.param("ssh_silent_s"):
        ssh = f"no host sample for {now - memory.host_fresh_at:.0f} s"
        ssh_since = memory.host_fresh_at  # it went silent when the last sample came
    if http:
        memory.http_failing_since = memory.http_failing_since if memory.http_failing_since is not None else now
    else:
        memory.http_failing_since = None
    memory.ssh_failing_since = ssh_since
    if node.host_state is None and node.host_problem is None:
        return None  # no SSH to this node: both paths cannot be judged
    http_since = memory.http_failing_since
    if not http or ssh is None or http_since is None or ssh_since is None:
        return _NO
    if abs(http_since - ssh_since) > rule.param("together_s"):
        return _NO
    return _Check(
        True,
        (
            f"HTTP unanswered since {ctx.at(http_since)}: {'; '.join(http[:3])}",
            f"SSH failing since {ctx.at(ssh_since)}: {ssh}",
        ),
    )


def _gpu_now(ctx: _Ctx) -> GpuReading | None:
    """The GPU exporter's reading, when it is fresh (a stale one cannot tell)."""
    node = ctx.node
    if node.gpu is None or node.gpu_age_s is None or node.gpu_age_s > node.stale_after_s:
        return None
    return node.gpu


def _gpu_words(gpu: GpuReading) -> str:
    """``87 °C, 20.4 W, 96 % busy, SM 810 MHz (of 2,418 MHz)``: what the reading has."""
    bits = []
    if gpu.temperature_c is not None:
        bits.append(f"{gpu.temperature_c:.0f} °C")
    if gpu.power_w is not None:
        bits.append(f"{gpu.power_w:.1f} W")
    if gpu.utilization is not None:
        bits.append(f"{gpu.utilization * 100:.0f} % busy")
    if gpu.sm_clock_hz is not None:
        top = f" (of {gpu.max_sm_clock_hz / 1e6:,.0f} MHz)" if gpu.max_sm_clock_hz else ""
        bits.append(f"SM {gpu.sm_clock_hz / 1e6:,.0f} MHz{top}")
    return ", ".join(bits)


def _gpu_thermal(ctx: _Ctx, rule: Rule) -> _Check | None:
    gpu = _gpu_now(ctx)
    if gpu is None or gpu.throttle is None:
        return None
    thermal = tuple(reason for reason in gpu.throttle if reason in THERMAL_THROTTLE)
    if not thermal:
        return _NO
    return _Check(True, (f"GPU clocks held back by {throttle_words(thermal)}: {_gpu_words(gpu)} (at {ctx.at()})",))


def _gpu_clock_low(ctx: _Ctx, rule: Rule) -> _Check | None:
    gpu = _gpu_now(ctx)
    if gpu is None or gpu.utilization is None or gpu.sm_clock_hz is None:
        return None
    mhz = gpu.sm_clock_hz / 1e6
    low = mhz < rule.param("low_clock_mhz") or (
        gpu.max_sm_clock_hz is not None and gpu.sm_clock_hz < rule.param("low_fraction") * gpu.max_sm_clock_hz
    )
    if gpu.utilization < rule.param("min_utilization") or not low:
        return _NO
    reasons = [r for r in gpu.throttle or () if r != "gpu_idle"]
    why = f"; clock-event reasons: {throttle_words(tuple(reasons))}" if reasons else ""
    if gpu.throttle is not None and not reasons:
        why = "; no clock-event reason is active"
    return _Check(True, (f"GPU busy with its clock low: {_gpu_words(gpu)}{why} (at {ctx.at()})",))


def _gpu_power_low(ctx: _Ctx, rule: Rule) -> _Check | None:
    gpu = _gpu_now(ctx)
    if gpu is None or gpu.utilization is None or gpu.power_w is None:
        return None
    if gpu.utilization < rule.param("min_utilization") or gpu.power_w >= rule.param("max_power_w"):
        return _NO
    return _Check(
        True,
        (
            f"GPU reads {gpu.utilization * 100:.0f} % busy but draws {gpu.power_w:.1f} W, under "
            f"{rule.param('max_power_w'):.0f} W: {_gpu_words(gpu)} (at {ctx.at()})",
        ),
    )


# --- the fabric between the ranks of a multi-node job (issue 21) --------------------------------------


def _fabric_now(ctx: _Ctx, rule: Rule) -> FabricView | None:
    """The node's fabric reading, when it is fresh (three of its periods at most)."""
    fabric = ctx.node.fabric
    if fabric is None or fabric.age_s is None or fabric.age_s > rule.param("max_age_s"):
        return None
    return fabric


def _job_words(job: JobView) -> str:
    tokens = NO_DATA if job.tokens_per_s is None else f"{job.tokens_per_s:,.0f} tok/s"
    return f"job {job.name} generates {tokens}"


def _link_degraded(ctx: _Ctx, rule: Rule) -> _Check | None:
    fabric = _fabric_now(ctx, rule)
    if fabric is None or not ctx.node.jobs:
        return None
    # The job runs while its head answers; it transfers while the head generates tokens.
    running = sorted(
        (job for job in ctx.node.jobs if job.tokens_per_s is not None), key=lambda j: -(j.tokens_per_s or 0)
    )
    if not running:
        return _NO
    job, link = running[0], fabric.link
    transferring = (job.tokens_per_s or 0.0) >= rule.param("min_tokens_per_s")
    if link is None:
        return _Check(True, (f"no RDMA NIC is read on this node while {_job_words(job)} (at {ctx.at()})",))
    if not link.up:
        return _Check(True, (f"RDMA link {link.nic} is {link.state or 'in an unknown state'} while {_job_words(job)}",))
    evidence = []
    expected = rule.param("expected_mbps") * 1e6
    if link.speed_bps is not None and link.speed_bps < expected:
        evidence.append(
            f"{link.nic} negotiated {fmt_bits(link.speed_bps)}, below the {fmt_bits(expected)} it is capable of"
        )
    rates, share = link.rates, link.share
    if transferring and rates is not None and share is not None and share < rule.param("max_share"):
        errors = sum(rates.errors_per_s.values())
        pauses = rates.pauses_per_s or 0.0
        if errors >= rule.param("min_errors_per_s") or pauses >= rule.param("min_pauses_per_s"):
            named = ", ".join(f"{name} {fmt_rate(value)}" for name, value in sorted(rates.errors_per_s.items()))
            moves = f"{fmt_bits(link.busiest_bps)}, {share * 100:.1f} % of its {fmt_bits(link.speed_bps)}"
            evidence.append(
                f"{link.nic} moves {moves}, while it drops or pauses: {named or 'no drops'}, "
                f"{fmt_rate(pauses)} pause frames"
            )
    if not evidence:
        return _NO
    return _Check(True, (*evidence, f"{_job_words(job)} (at {ctx.at()})"))


def _rank_spinning(ctx: _Ctx, rule: Rule) -> _Check | None:
    gpu = _gpu_now(ctx)
    if gpu is None or gpu.utilization is None or gpu.power_w is None or not ctx.node.jobs:
        return None
    spinning = gpu.utilization >= rule.param("min_utilization") and gpu.power_w < rule.param("max_power_w")
    flat = [
        job
        for job in ctx.node.jobs
        if job.tokens_per_s is not None and job.tokens_per_s <= rule.param("max_tokens_per_s")
    ]
    if not spinning or not flat:
        return _NO
    job = flat[0]
    return _Check(
        True,
        (
            f"this rank's GPU reads {gpu.utilization * 100:.0f} % busy at {gpu.power_w:.1f} W while "
            f"{_job_words(job)} (at {ctx.at()})",
            RANK_HEADER,
            *(rank_line(rank) for rank in job.ranks),
        ),
    )


def _nccl_mismatch(ctx: _Ctx, rule: Rule) -> _Check | None:
    fabric = ctx.node.fabric
    if fabric is None or not ctx.node.jobs:
        return None
    mine = fabric.nccl_checksums
    if not mine:
        return None
    for job in ctx.node.jobs:
        others = [r for r in job.ranks if r.node != ctx.node.name and r.nccl]
        differ = [r for r in others if r.nccl != mine]
        if differ:
            paths = ", ".join(sorted({lib.path for lib in fabric.nccl}))
            theirs = "; ".join(f"{r.node} maps {short_sums(r.nccl)}" for r in differ)
            return _Check(
                True,
                (
                    f"this node's vLLM maps NCCL {short_sums(mine)} ({paths})",
                    f"{theirs}: the ranks of job {job.name} run different NCCL libraries",
                ),
            )
    return _NO


@dataclass(frozen=True, slots=True)
class Detector:
    """What a named detector judges: the node as a whole, or each of its instances."""

    node: NodeCheck | None = None
    instance: InstanceCheck | None = None


# One implementation per signature of the catalogue (catalogue.DETECTOR_SIGNATURES): a test keeps them equal.
DETECTORS: Mapping[str, Detector] = {
    "launch-not-ready": Detector(instance=_launch_not_ready),
    "shm-leftovers": Detector(node=_shm_leftovers),
    "stale-workers": Detector(node=_stale_workers),
    "exec-not-found": Detector(instance=_exec_not_found),
    "restarts-rising": Detector(instance=_restarts_rising),
    "requests-without-tokens": Detector(instance=_requests_without_tokens),
    "decode-slow": Detector(instance=_decode_slow),
    "position-collapse": Detector(instance=_position_collapse),
    "kv-preemptions": Detector(instance=_kv_preemptions),
    "never-served": Detector(instance=_never_served),
    "status": Detector(instance=_status),
    "unreachable": Detector(node=_unreachable),
    "gpu-thermal": Detector(node=_gpu_thermal),
    "gpu-clock-low": Detector(node=_gpu_clock_low),
    "gpu-power-low": Detector(node=_gpu_power_low),
    "link-degraded": Detector(node=_link_degraded),
    "rank-spinning": Detector(node=_rank_spinning),
    "nccl-mismatch": Detector(node=_nccl_mismatch),
}


# --- the engine ------------------------------------------------------------------------------------


def unread(buffer: LogBuffer, cursor: int) -> list[LogLine]:
    """The lines of ``buffer`` with ``seq >= cursor`` it still holds, oldest first, reading only the
    newest end of the buffer (a poll's few new lines cost the same in a buffer of 10 or 10,000)."""
    return buffer.tail(min(buffer.next_seq - cursor, len(buffer)))


def _candidates(lines: Sequence[LogLine], cursor: int, prefilter: re.Pattern[str]) -> tuple[list[LogLine], int]:
    """The lines from ``cursor`` on that the combined prefilter lets through (one search per new
    line: most match nothing and cost only this; gap markers are not the node's), and the next cursor."""
    found: list[LogLine] = []
    for line in lines:
        if line.seq < cursor:
            continue
        cursor = line.seq + 1
        if not line.gap and prefilter.search(line.text):
            found.append(line)
    return found, cursor


def last_intervals(node: NodeState) -> dict[str, VllmRates | None]:
    """Each instance's numbers between its last two scrapes, for ``DiagnosisEngine.evaluate``."""
    return {name: state.tracker.last_interval_rates() for name, state in node.instances.items()}


class DiagnosisEngine:
    """Evaluates the catalogue against each node once per poll; one engine serves the whole fleet."""

    def __init__(
        self,
        catalogue: Catalogue,
        overrides: Mapping[str, float] | None = None,
        *,
        history_limit: int = DEFAULT_HISTORY,
    ) -> None:
        self.catalogue = catalogue.with_overrides(overrides) if overrides else catalogue
        self.history_limit = history_limit
        rules = self.catalogue.rules
        self._log_rules = tuple(rule for rule in rules if rule.log is not None and rule.log.stream == "vllm")
        self._kernel_rules = tuple(rule for rule in rules if rule.log is not None and rule.log.stream == "kernel")
        self._detector_rules = tuple(rule for rule in rules if rule.detector is not None)
        patterns = [p.pattern for rule in self._log_rules if rule.log is not None for p in rule.log.patterns]
        patterns += [self.catalogue.attempt_start.pattern, self.catalogue.error.pattern]
        # One search per new line: most lines match nothing and cost only this.
        self._prefilter = re.compile("|".join(f"(?:{p})" for p in patterns))
        kernel = [p.pattern for rule in self._kernel_rules if rule.log is not None for p in rule.log.patterns]
        self._kernel_prefilter = re.compile("|".join(f"(?:{p})" for p in kernel) or "(?!)")
        self._nodes: dict[str, _NodeMemory] = {}
        self._eval = 0
        self._problems: deque[str] = deque(maxlen=MAX_PROBLEMS)

    # -- queries --

    def active(self, node: str | None = None) -> tuple[Finding, ...]:
        """Active findings of one node (or of every node), worst first."""
        names = [node] if node is not None else list(self._nodes)
        found: list[Finding] = []
        for name in names:
            memory = self._nodes.get(name)
            if memory is not None:
                found.extend(self._visible(name, memory))
        return tuple(sorted(found, key=_order))

    def history(self, node: str | None = None) -> tuple[Finding, ...]:
        """Cleared findings of one node (or of every node), oldest first; at most ``history_limit``
        per node."""
        names = [node] if node is not None else list(self._nodes)
        found = [f for name in names if name in self._nodes for f in self._nodes[name].history]
        return tuple(sorted(found, key=lambda f: (f.cleared_at or 0.0, f.node)))

    def cursor(self, node: str, instance: str) -> int:
        """The ``seq`` of the next log line of this instance (or of ``KERNEL_LOG``) to scan (pass it to
        ``unread``)."""
        memory = self._nodes.get(node)
        if instance == KERNEL_LOG:
            return memory.kernel_cursor if memory is not None else 0
        found = memory.instances.get(instance) if memory is not None else None
        return found.cursor if found is not None else 0

    @property
    def problems(self) -> tuple[str, ...]:
        """Rules that failed to evaluate (a bug, never the node's fault), newest last."""
        return tuple(self._problems)

    # -- actions sparktui runs --

    def action_started(self, node: str, instance: str | None) -> None:
        """An action of sparktui's own began on ``instance`` of ``node`` (None: the whole node): the
        wedge-type detectors (``HELD_DURING_ACTIONS``) open nothing for it until ``ACTION_SETTLE_S``
        after it ends. A finding already open stays as it is; one whose condition stops holding clears
        as usual."""
        hold = self._memory(node).actions.setdefault(instance, _ActionHold())
        hold.running += 1

    def action_ended(self, node: str, instance: str | None, now: float) -> None:
        """The action ``action_started`` announced has ended (done, failed or cancelled)."""
        hold = self._memory(node).actions.get(instance)
        if hold is not None:
            hold.running = max(0, hold.running - 1)
            hold.ended_at = now

    def held(self, node: str, instance: str, now: float) -> bool:
        """Whether the wedge-type detectors are held for this instance at ``now``."""
        memory = self._nodes.get(node)
        if memory is None:
            return False
        return any(hold.holds(now) for key, hold in memory.actions.items() if key in (None, instance))

    # -- evaluation --

    def evaluate(
        self,
        node: NodeView,
        new_log_lines: Mapping[str, Sequence[LogLine]] | None,
        now: float,
        intervals: Mapping[str, VllmRates | None] | None = None,
        wall: float | None = None,
    ) -> tuple[Finding, ...]:
        """Judge every rule for ``node``; returns its active findings, worst first.

        ``new_log_lines`` maps an instance name (or ``KERNEL_LOG``) to the lines it logged since the last
        call (lines below its cursor are skipped). ``intervals`` maps an instance name to its numbers
        between its last two scrapes (``last_intervals``). ``wall`` is the wall-clock time of ``now``
        (the monitor's one mapping, ``Monitor.wall_at``) for the times in the evidence; without it the
        node's last poll's. Call once per poll: the per-poll detectors count evaluations.
        """
        self._eval += 1
        memory = self._memory(node.name)
        ctx = _Ctx(node, now, memory, intervals, self._eval, wall)
        self._guard("host state", self._observe_node, ctx)
        for inst in node.instances:
            ctx.instances[inst.name] = inst
            self._guard(f"instance {inst.name}", self._observe_instance, ctx, inst)
        for name, lines in (new_log_lines or {}).items():
            if name == KERNEL_LOG:
                self._guard("kernel log", self._scan_kernel, ctx, lines)
            else:
                self._guard(f"log of {name}", self._scan, ctx, name, lines)
        for track in [t for t in memory.tracks.values() if t.rule.log is not None and t.open]:
            self._guard(track.rule.id, self._judge_log, ctx, track)
        for rule in self._detector_rules:
            self._guard(rule.id, self._judge_detector, ctx, rule)
        return tuple(sorted(self._visible(node.name, memory), key=_order))

    def _guard(self, what: str, fn: Callable[..., None], *args: object) -> None:
        try:
            fn(*args)
        except Exception as exc:  # one rule's bug must not stop the others or the poll loop
            self._problems.append(f"{what}: {type(exc).__name__}: {exc}")

    def _memory(self, node: str) -> _NodeMemory:
        memory = self._nodes.get(node)
        if memory is None:
            memory = self._nodes[node] = _NodeMemory(history=deque(maxlen=max(1, self.history_limit)))
        return memory

    def _observe_node(self, ctx: _Ctx) -> None:
        node, memory, now = ctx.node, ctx.memory, ctx.now
        host = node.host_state
        if host is not None and host.seq != memory.host_seq:
            memory.host_seq, memory.host_fresh_at = host.seq, now
        available = node.host_memory.mem_available if node.host_memory is not None else None
        if available is not None:
            memory.available.append((now, available))
        while memory.available and now - memory.available[0][0] > MEMORY_TREND_S:
            memory.available.popleft()

    def _observe_instance(self, ctx: _Ctx, inst: InstanceView) -> None:
        """State changes and starts of one instance, before the rules are judged."""
        im, now = ctx.memory.instance(inst.name), ctx.now
        state = inst.status.state
        previous = im.state
        serving = state in SERVING
        started = previous is State.LOADING and serving
        rates = ctx.rates(inst)
        reset = rates is not None and rates.reset
        if reset and not im.reset_seen and previous is not None:
            started = True  # the counters went back: a new process
        im.reset_seen = reset
        began = inst.service.started_epoch if inst.service is not None else None
        if began is not None:
            # systemd's start time comes as boot time + a monotonic offset, and the boot time as the
            # remote clock minus /proc/uptime read a moment apart: it wobbles by milliseconds from
            # frame to frame. A new process starts seconds later than the old one did.
            if im.service_started is not None and abs(began - im.service_started) > START_WOBBLE_S:
                started = True
            im.service_started = began
        if not serving:
            im.serving_since = None
            if previous in SERVING:
                im.stopped_at = now
        else:
            im.stopped_at = None
            if im.serving_since is None:
                im.serving_since = now
        im.state = state
        if started:
            self._start(ctx, inst.name, im, served_reset=True)
        if rates is not None and (
            (rates.requests_finished_per_s or 0.0) > 0 or (rates.generation_tokens_per_s or 0.0) > 0
        ):
            im.served, im.served_at = True, now

    def _start(self, ctx: _Ctx, name: str, im: _InstanceMemory, served_reset: bool) -> None:
        """A new start of the instance (its log, its manager or its counters say so)."""
        if im.last_start_eval == ctx.eval_id:
            return
        im.last_start_eval = ctx.eval_id
        im.starts += 1
        im.last_start = ctx.now
        im.error_taken = False
        if served_reset:
            im.served = False
        for track in ctx.memory.tracks.values():
            log = track.rule.log
            if track.subject != name or log is None:
                continue
            track.seen.clear()  # "all" rules need their lines within one start
            if log.lifetime == "process" and track.phase == 1:
                track.phase, track.restarted_at = 2, ctx.now

    def _scan(self, ctx: _Ctx, name: str, lines: Sequence[LogLine]) -> None:
        if not lines:
            return
        im = ctx.memory.instance(name)
        inst = ctx.instances.get(name)
        serving = inst is not None and inst.status.state in SERVING
        found, im.cursor = _candidates(lines, im.cursor, self._prefilter)
        for line in found:
            self._scan_line(ctx, name, im, line, serving)

    def _scan_kernel(self, ctx: _Ctx, lines: Sequence[LogLine]) -> None:
        found, ctx.memory.kernel_cursor = _candidates(lines, ctx.memory.kernel_cursor, self._kernel_prefilter)
        for line in found:
            self._match_rules(ctx, self._kernel_rules, None, line)

    def _scan_line(self, ctx: _Ctx, name: str, im: _InstanceMemory, line: LogLine, serving: bool) -> None:
        text = line.text
        if self.catalogue.attempt_start.search(text):
            # A replayed old start line while the instance serves is not a start of this process.
            self._start(ctx, name, im, served_reset=not serving)
        if not im.error_taken and self.catalogue.error.search(text):
            im.first_error, im.error_taken = line, True
        self._match_rules(ctx, self._log_rules, name, line)

    def _match_rules(self, ctx: _Ctx, rules: Sequence[Rule], subject: str | None, line: LogLine) -> None:
        text = line.text
        for rule in rules:
            log = rule.log
            assert log is not None
            found = next((m for m in (pattern.search(text) for pattern in log.any) if m is not None), None)
            if found is not None:
                self._log_match(ctx, rule, subject, (line,), found)
                continue
            hits = [i for i, pattern in enumerate(log.all) if pattern.search(text)]
            if not hits:
                continue
            track = self._track(ctx.memory, rule, subject)
            for index in hits:
                track.seen.setdefault(index, line)
            if len(track.seen) == len(log.all):
                matched = tuple(sorted(set(track.seen.values()), key=lambda found: found.seq))
                track.seen.clear()
                self._log_match(ctx, rule, subject, matched)

    def _track(self, memory: _NodeMemory, rule: Rule, subject: str | None) -> _Track:
        key = (rule.id, subject)
        track = memory.tracks.get(key)
        if track is None:
            track = memory.tracks[key] = _Track(rule, subject)
        return track

    def _log_match(
        self,
        ctx: _Ctx,
        rule: Rule,
        subject: str | None,
        lines: tuple[LogLine, ...],
        found: re.Match[str] | None = None,
    ) -> None:
        track = self._track(ctx.memory, rule, subject)
        track.matches += 1
        track.last_match_at = ctx.now
        track.phase = 0
        if track.first is None:
            track.first, lines = lines[0], lines[1:]
            track.title = rule.title_for(found)
        track.recent.extend(lines)
        shown = [track.first, *(line for line in track.recent if line.seq != track.first.seq)]
        evidence = [_log_line(line) for line in shown]
        if track.matches > 1:
            evidence.append(f"{track.matches} matches since {ctx.at(track.opened_at)}")
        evidence.extend(self._extras(ctx, rule, subject))
        if track.opened_at is None:
            track.opened_at = ctx.now
        track.evidence = tuple(evidence)
        track.last_seen = ctx.now
        track.snapshot = None

    def _judge_log(self, ctx: _Ctx, track: _Track) -> None:
        rule, now = track.rule, ctx.now
        log, last = rule.log, track.last_match_at
        if log is None or last is None:
            return
        # A node's finding (the kernel's) is judged by the instances of the node: any one serving again.
        names = [track.subject] if track.subject is not None else list(ctx.instances)
        serving_now = [
            (ctx.memory.instances.get(name), inst)
            for name in names
            if (inst := ctx.instances.get(name)) is not None and inst.status.state in SERVING
        ]
        serving = bool(serving_now)
        healthy_s, quiet_s = rule.param("healthy_s"), rule.param("quiet_s")
        # Serving (answering /health 200, UP or DEGRADED) is what a start that got through looks like;
        # a DEGRADED poll (the warmup's cold TTFT, a busy queue) does not start the count again.
        im = ctx.memory.instances.get(track.subject) if track.subject is not None else None
        serving_since = im.serving_since if im is not None else None
        if log.lifetime == "quiet":
            # An event of the box (a GPU or PCIe fault, a thermal trip): over when it stops coming.
            if now - last >= quiet_s:
                self._close(ctx, track)
            return
        if log.lifetime == "attempt":
            # The failed start is over once a later one serves: a request served after the last
            # matching line, or serving for healthy_s without a request to tell.
            served_again = any(m is not None and m.served_at is not None and m.served_at > last for m, _ in serving_now)
            healthy = any(
                m is not None and m.serving_since is not None and now - max(m.serving_since, last) >= healthy_s
                for m, _ in serving_now
            )
            if served_again or healthy or now - last >= quiet_s:
                self._close(ctx, track)
            return
        if track.phase == 0 and serving:
            track.phase = 1  # the process that logged it is serving
        restarted_at = track.restarted_at if track.phase == 2 else None
        healthy_again = (
            restarted_at is not None
            and serving_since is not None
            and now - max(serving_since, restarted_at) >= healthy_s
        )
        if healthy_again or (not serving and now - last >= quiet_s):
            self._close(ctx, track)

    def _judge_detector(self, ctx: _Ctx, rule: Rule) -> None:
        spec = DETECTORS[rule.detector or ""]
        if spec.node is not None:
            self._apply(ctx, rule, None, spec.node(ctx, rule))
        elif spec.instance is not None:
            for inst in ctx.node.instances:
                im = ctx.memory.instance(inst.name)
                check = spec.instance(ctx, rule, inst, im)  # run even when held: detectors keep baselines
                holding = check is not None and check.holds and rule.detector in HELD_DURING_ACTIONS
                if holding and self.held(ctx.node.name, inst.name, ctx.now):
                    self._hold(ctx, rule, inst.name)
                    continue
                self._apply(ctx, rule, inst.name, check)

    def _hold(self, ctx: _Ctx, rule: Rule, subject: str) -> None:
        """A held detector's condition holds: an open finding stays as it is, a streak starts again."""
        track = ctx.memory.tracks.get((rule.id, subject))
        if track is not None and not track.open:
            del ctx.memory.tracks[(rule.id, subject)]

    def _apply(self, ctx: _Ctx, rule: Rule, subject: str | None, check: _Check | None) -> None:
        """Hysteresis: open after ``open_after`` holding evaluations, clear after ``clear_after_s``
        of not holding; an evaluation that cannot tell changes nothing."""
        if check is None:
            return
        memory, now, key = ctx.memory, ctx.now, (rule.id, subject)
        track = memory.tracks.get(key)
        if check.holds:
            if track is None:
                track = self._track(memory, rule, subject)
            if track.streak == 0:
                track.true_since = now
            track.streak += 1
            track.false_since = None
            if track.open or track.streak >= rule.param("open_after"):
                if track.opened_at is None:
                    track.opened_at = now
                polls = "poll" if track.streak == 1 else "polls"
                since = f"holding since {ctx.at(track.true_since)} ({track.streak} {polls} in a row)"
                track.evidence = (*check.evidence, *self._extras(ctx, rule, subject), since)
                track.quoted = check.lines
                track.last_seen = now
                track.snapshot = None
            return
        if track is None:
            return
        track.streak, track.true_since = 0, None
        if not track.open:
            del memory.tracks[key]
            return
        if track.false_since is None:
            track.false_since = now
        if now - track.false_since >= rule.param("clear_after_s"):
            self._close(ctx, track)

    def _extras(self, ctx: _Ctx, rule: Rule, subject: str | None) -> list[str]:
        out: list[str] = []
        if "memory" in rule.evidence:
            out.extend(_memory_evidence(ctx))
        if "service" in rule.evidence and subject is not None:
            inst = ctx.instances.get(subject)
            service = inst.service if inst is not None else None
            if inst is not None and service is not None:
                bits = [_service_state(inst)]
                if service.exit_status is not None:
                    bits.append(f"exit status {service.exit_status}")
                if service.restarts is not None:
                    bits.append(f"{service.restarts} restarts")
                if service.problem:
                    bits.append(service.problem)
                out.append(f"{', '.join(bits)} (at {ctx.at()})")
        return out

    def _close(self, ctx: _Ctx, track: _Track) -> None:
        memory = ctx.memory
        memory.tracks.pop((track.rule.id, track.subject), None)
        if track.shown and track.opened_at is not None:
            finding = replace(self._snapshot(ctx.node.name, track), cleared_at=ctx.now)
            memory.history.append(finding)

    def _snapshot(self, node: str, track: _Track) -> Finding:
        if track.snapshot is None:
            rule = track.rule
            lines = track.quoted
            if track.first is not None:
                lines = (track.first, *(line for line in track.recent if line.seq != track.first.seq))
            track.snapshot = Finding(
                id=rule.id,
                node=node,
                instance=track.subject,
                severity=rule.severity,
                title=track.title or rule.title,
                evidence=track.evidence,
                explanation=rule.explanation,
                fix=rule.fix,
                action=rule.action,
                opened_at=track.opened_at if track.opened_at is not None else track.last_seen,
                last_seen=track.last_seen,
                lines=lines,
            )
        return track.snapshot

    def _visible(self, node: str, memory: _NodeMemory) -> list[Finding]:
        """Open findings not suppressed by a more specific open one on the same subject."""
        opened = {key for key, track in memory.tracks.items() if track.open}
        out: list[Finding] = []
        for track in memory.tracks.values():
            if not track.open:
                continue
            if any((other, track.subject) in opened for other in track.rule.suppressed_by):
                continue
            track.shown = True
            out.append(self._snapshot(node, track))
        return out


def _order(finding: Finding) -> tuple[int, float, str, str]:
    return (-finding.severity.rank, finding.opened_at, finding.id, finding.instance or "")


def _memory_evidence(ctx: _Ctx) -> list[str]:
    node, memory = ctx.node, ctx.node.host_memory
    if memory is None or memory.mem_available is None:
        return []
    parts = [f"MemAvailable {_gib(memory.mem_available)}"]
    if memory.mem_total:
        parts[0] += f" of {_gib(memory.mem_total)}"
    droppable = memory.page_cache_droppable
    if droppable is not None:
        parts.append(f"page cache drop_caches can free (Cached − Shmem) {_gib(droppable)}")
    if memory.shmem is not None:
        parts.append(f"Shmem {_gib(memory.shmem)}")
    out = [f"{'; '.join(parts)} (at {ctx.at()})"]
    ledger = node.ledger
    if ledger is not None and ledger.shm_leftovers:
        whose = "leftovers" if ledger.vllm_running is False else "segments of the running vLLM"
        out.append(f"/dev/shm {whose} hold {_size(ledger.shm_leftovers)}")
    trend = ctx.memory.available
    if trend:
        t_max, peak = max(trend, key=lambda sample: sample[1])
        fell = peak - memory.mem_available
        if fell >= GIB and t_max < ctx.now:
            out.append(f"MemAvailable fell {_gib(fell)} in {ctx.now - t_max:.0f} s (from {_gib(peak)})")
    return out
