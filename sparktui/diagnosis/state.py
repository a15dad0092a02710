"""What the diagnosis engine and its detectors share: the findings it answers, what it remembers of a
node between evaluations, one evaluation's context (``Ctx``), a detector's verdict (``Check``) and the
words evidence is written in.

``engine.py`` runs the lifecycle over these (open, hold, clear, action holds); ``detectors/`` judges
each rule's condition from them. Pure: no I/O.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

from sparktui.diagnosis.catalogue import Rule, Severity
from sparktui.model.derive import EngineRates
from sparktui.model.fleet import InstanceView, NodeView
from sparktui.model.holds import ActionHold
from sparktui.model.logbuffer import LogLine, without_engine_clock
from sparktui.model.memory import GIB
from sparktui.model.status import State
from sparktui.model.units import NO_DATA, fmt_clock

SERVING = frozenset(s for s in State if s.serving)  # judged FAILING still serves
MAX_LOG_EVIDENCE = 5  # matching lines shown per finding: the first and the newest
MAX_EVIDENCE_CHARS = 1000  # of one evidence line
# An action sparktui runs itself (restart, warmup, drop caches) makes an engine look stuck on purpose: a
# restart's cold first request waits 25-60 s for the JIT with no token. The detectors that read "no or
# slow tokens" as a wedge are held for the instance while the action runs and for ACTION_SETTLE_S after
# (``sparktui.model.holds``, which the fleet state holds by too).

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
class InstanceMemory:
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
    gen_history: deque[tuple[float, float, float]] = field(default_factory=deque)  # (poll time, running, tok/s)
    gen_recent: deque[tuple[float, float, float]] = field(default_factory=deque)  # (t, tokens, seconds)
    spec_k: int | None = None
    spec_history: deque[float] = field(default_factory=deque)  # last position's acceptance
    spec_learned_at: float | None = None  # the poll ``spec_history`` last learned from


@dataclass(slots=True)
class Track:
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
class NodeMemory:
    instances: dict[str, InstanceMemory] = field(default_factory=dict)
    tracks: dict[tuple[str, str | None], Track] = field(default_factory=dict)
    history: deque[Finding] = field(default_factory=deque)
    host_seq: int | None = None
    host_fresh_at: float | None = None
    http_failing_since: float | None = None
    ssh_failing_since: float | None = None
    available: deque[tuple[float, float]] = field(default_factory=deque)  # (t, MemAvailable)
    actions: dict[str | None, ActionHold] = field(default_factory=dict)  # instance (None: all) -> hold
    recheck_from: float | None = None  # the last action's end: what it addressed is judged again at once
    kernel_cursor: int = 0  # the seq of the next kernel-log line to scan

    def instance(self, name: str) -> InstanceMemory:
        found = self.instances.get(name)
        if found is None:
            found = self.instances[name] = InstanceMemory()
        return found


@dataclass(frozen=True, slots=True)
class Check:
    holds: bool
    evidence: tuple[str, ...] = ()
    lines: tuple[LogLine, ...] = ()  # log lines the evidence quotes, for highlighting


NO = Check(False)


@dataclass(slots=True)
class Ctx:
    """One evaluation of one node."""

    node: NodeView
    now: float
    memory: NodeMemory
    intervals: Mapping[str, EngineRates | None] | None
    eval_id: int
    wall: float | None = None  # the wall-clock time of ``now``
    instances: dict[str, InstanceView] = field(default_factory=dict)

    def rates(self, inst: InstanceView) -> EngineRates | None:
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


def gib(value: float) -> str:
    return f"{value / GIB:.1f} GiB"


def size(value: float) -> str:
    for unit, scale in (("GiB", GIB), ("MiB", 1024**2), ("KiB", 1024)):
        if abs(value) >= scale:
            return f"{value / scale:.1f} {unit}"
    return f"{value:.0f} B"


def log_line(line: LogLine) -> str:
    if line.timestamp is None:
        stamp, text = "(no time)", line.text
    else:  # one clock: the stamp's, in the operator's zone, not the engine's own beside it
        stamp, text = fmt_clock(line.timestamp.timestamp(), date=True), without_engine_clock(line.text)
    if len(text) > MAX_EVIDENCE_CHARS:
        text = text[:MAX_EVIDENCE_CHARS] + "…"
    return f"{stamp}  {text}"


def service_state(inst: InstanceView) -> str:
    service = inst.service
    if service is None:
        return "unknown"
    sub = f" ({service.sub_state})" if service.sub_state else ""
    return f"{service.name} is {service.state}{sub}"
