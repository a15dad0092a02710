"""The monitor core: what sparktui knows about a fleet, fed observations, ticked by a clock.

One object, free of UI and I/O, that every consumer drives: the dashboard, ``sparktui watch``, a
replay (in the dashboard or headless, as ``sparktui export`` does) and, through its observers, the
recorder and the black box. Because they all run this one class they cannot disagree on a number,
a finding or an alert.

- Fed: every source (live HTTP and SSH, Prometheus, or a recording) is run with the core as its
  sink (``source.run(monitor)``) and calls ``observation``, ``host``, ``log_batch`` and ``error`` on
  the event loop (``preread`` in a worker thread first); a live source asks the core which canaries
  are due (``canaries_due``); a recording ticks it and resets it. Nothing reaches the core through a
  consumer: the dashboard and ``watch`` are subscribers, not pipes.
- Published: each subscriber (``MonitorSubscriber``, ``subscribe``) hears of each observation applied
  (``arrived``: the dashboard draws that node's row), of each collection error as its one line
  (``failed``), of each tick with its alert events (``ticked``: ``watch`` logs and sends them), and of
  a reset (``restarted``).
- Ticked: ``tick(now, wall)`` once per poll interval (or at a recording's ticks) computes the views
  over the window, one diagnosis evaluation per node over the log lines written since the last tick
  and the last scrape interval, each node's one verdict (``diagnosis.verdict.judged``: its status as
  its open findings judge it, the status every consumer shows), a point of history, then the alert
  rules; the observers hear of the tick, each node's findings and every alert that fires, then the
  subscribers; the alert events are returned. When a live consumer ticks is one rule for all of them
  (``sparktui.monitor.schedule``).
- Told of actions: ``action_started`` / ``action_ended`` (the dashboard's recovery actions) hold the
  diagnosis's wedge-type detectors for what the action touches while it runs and a settle time after
  (``diagnosis.engine.ACTION_SETTLE_S``): a restart's cold first request is no wedge.
- Reset: ``reset()`` forgets what was collected (a replay seeking backwards starts again).
- One-shot: ``Monitor.once(fleet, catalogue)`` is the same core for ``snapshot``, ``check``, ``check
  --alerts`` and ``action``: fed what the command collected, ticked once. The diagnosis engine is built
  here and nowhere else.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from sparktui.diagnosis.alerts import AlertEngine, AlertEvent
from sparktui.diagnosis.catalogue import Catalogue
from sparktui.diagnosis.engine import DiagnosisEngine, Finding, last_intervals, unread
from sparktui.diagnosis.verdict import judged
from sparktui.engines import readings
from sparktui.model.fleet import (
    COUNTER_WINDOWS_KEPT,
    DEFAULT_MAX_AGE_S,
    CanaryOrder,
    FleetState,
    NodeView,
    internal_error_text,
)
from sparktui.model.history import History
from sparktui.model.logbuffer import DEFAULT_MAX_LINES, LogBuffer, LogLine
from sparktui.model.observations import HostUpdate, NodeObservation
from sparktui.model.specs import FleetSpec

WINDOW_S = 30.0  # the window behind every rate, ratio and quantile shown or alerted on
MAX_ERRORS = 100  # the latest collection errors kept
# Lines kept of a log no one scrolls (``sparktui watch``, the kiosk): the diagnosis reads only the lines
# that came since its last tick, so a bound well over a second's burst is enough, and it fills in minutes
# instead of hours (a full 10,000-line log holds 2.2 MiB: benchmarks/bench_stores.py).
UNSHOWN_LOG_LINES = 1_000
# Errors whose message is already one line for the operator (live, or replayed under the same name).
ONE_LINE_ERRORS = frozenset({"PrometheusError"})


class MonitorObserver(Protocol):
    """Told what the core derived at each tick (the recorder and the black box). ``problem``: why it
    stopped (a recording whose disk filled up), one line, or None while it works."""

    @property
    def problem(self) -> str | None: ...

    def tick(self, now: float) -> None: ...
    def findings(self, node: str, active: Sequence[Finding], now: float | None = None) -> None: ...
    def alert(self, reason: str, node: str | None = None) -> None: ...


class MonitorSubscriber(Protocol):
    """A consumer of the core (the dashboard, ``watch``): told what the core publishes, it draws or
    sends; it never feeds the core. Each method is called on the event loop and must not block."""

    def arrived(self, node: str) -> None: ...
    def failed(self, node: str, line: str) -> None: ...
    def ticked(self, now: float, events: tuple[AlertEvent, ...]) -> None: ...
    def restarted(self) -> None: ...


class MonitorTap(Protocol):
    """Hears everything the core is fed, as it is fed (a recorder, a black box): one tap on the core, the
    same in every mode, instead of a copy of the source's output wired in by each consumer."""

    def observation(self, observation: NodeObservation) -> None: ...
    def host(self, update: HostUpdate) -> None: ...
    def log_batch(self, node: str, instance: str, lines: Sequence[LogLine]) -> None: ...
    def error(self, node: str, exc: Exception) -> None: ...


class MonitorRecorder(MonitorTap, MonitorObserver, Protocol):
    """A recorder: what the core is fed and what it derives (``Monitor.attach``)."""


@dataclass(frozen=True, slots=True)
class TapFailure:
    """A tap that raised: its first failure of each kind, kept for the consumer to say once."""

    tap: str
    method: str
    error: str


def collect_error_text(exc: Exception) -> str:
    """One line for an error a source reported."""
    if type(exc).__name__ in ONE_LINE_ERRORS:
        return str(exc)
    return f"internal error while collecting: {type(exc).__name__}: {exc}"


class Monitor:
    """The fleet state, log buffers, diagnosis, alerts and history of one fleet (see the module docstring).

    ``window_s`` is the window behind the views (None: everything kept); ``keep_history`` keeps the
    trends the dashboard draws (a headless watcher has no use for them); ``log_lines`` bounds each log
    (``UNSHOWN_LOG_LINES`` where no one scrolls it).
    """

    def __init__(
        self,
        fleet: FleetSpec,
        catalogue: Catalogue,
        *,
        window_s: float | None = WINDOW_S,
        keep_history: bool = True,
        log_lines: int = DEFAULT_MAX_LINES,
        observers: Iterable[MonitorObserver] = (),
        taps: Iterable[MonitorTap] = (),
    ) -> None:
        self.fleet = fleet
        self.catalogue = catalogue
        self.window_s = window_s
        self.keep_history = keep_history
        self.log_lines = log_lines
        self.observers: list[MonitorObserver] = list(observers)
        self.taps: list[MonitorTap] = list(taps)
        self.subscribers: list[MonitorSubscriber] = []
        self.tap_failures: list[TapFailure] = []  # each tap's first failure of each kind, in order
        self._taps_failed: set[tuple[int, str]] = set()
        # Every log signature of the catalogue, for highlighting in a log view.
        self.signature_patterns = tuple(p for rule in catalogue.rules if rule.log for p in rule.log.patterns)
        self.errors: deque[str] = deque(maxlen=MAX_ERRORS)
        self.ticks = 0
        self.resets = 0
        self._start()

    def attach(self, recorder: MonitorRecorder) -> None:
        """Record this core: ``recorder`` (``--record``, ``--black-box``) taps what it is fed and observes
        what it derives. The one way every mode records, so a recording is the same whoever made it."""
        self.taps.append(recorder)
        self.observers.append(recorder)

    def subscribe(self, subscriber: MonitorSubscriber) -> None:
        """``subscriber`` hears of every arrival, error, tick and reset from now on (``MonitorSubscriber``)."""
        self.subscribers.append(subscriber)

    @classmethod
    def once(cls, fleet: FleetSpec, catalogue: Catalogue) -> Monitor:
        """The one-shot form of the core, for the commands that collect once and judge once (``snapshot``,
        ``check``, ``check --alerts``, ``action``): fed like any core, then ticked once at the end; its
        window is everything the command collected, it keeps no trends, and its logs are bounded as no
        one scrolls them. One class for every mode, so a one-shot command sees what the dashboard sees."""
        return cls(fleet, catalogue, window_s=None, keep_history=False, log_lines=UNSHOWN_LOG_LINES)

    def _start(self) -> None:
        kept = DEFAULT_MAX_AGE_S if self.window_s is None else COUNTER_WINDOWS_KEPT * self.window_s
        self.state = FleetState(self.fleet, readings(), kept)  # every engine read as its package says
        self.history = History()
        self.log_buffers: dict[str, dict[str, LogBuffer]] = {}  # node -> instance -> its log
        self.diagnosis = DiagnosisEngine(self.catalogue)
        self.alerts = AlertEngine.for_fleet(self.fleet)
        self.findings: dict[str, tuple[Finding, ...]] = {}
        self.views: tuple[NodeView, ...] = ()
        self._wall_offset: float | None = None  # wall − tick clock, from the newest observation

    def reset(self) -> None:
        """Forget everything collected and derived: the source starts again (a replay's seek)."""
        self._start()
        self.resets += 1
        for subscriber in self.subscribers:
            subscriber.restarted()

    # --- FleetSink: what a source collects ----------------------------------------------------------

    def observation(self, observation: NodeObservation) -> None:
        self.state.apply(observation)
        self._wall_offset = observation.wall - observation.t
        self._tap("observation", observation)
        for subscriber in self.subscribers:
            subscriber.arrived(observation.node)

    def preread(self, observation: NodeObservation) -> None:
        """Parse the bodies ``observation`` carries ahead of ``observation`` (``FleetState.preread``):
        the live source calls this in a worker thread, then ``observation`` on the event loop."""
        self.state.preread(observation)

    def host(self, update: HostUpdate) -> None:
        self.state.apply_host(update)
        self._tap("host", update)

    def log_batch(self, node: str, instance: str, lines: Sequence[LogLine]) -> None:
        if node not in self.state.nodes:
            return  # not of this fleet (a recording naming made-up nodes): no buffer kept for it
        buffer = self.log_buffers.setdefault(node, {}).setdefault(instance, LogBuffer(max_lines=self.log_lines))
        for line in lines:
            buffer.append(line.timestamp, line.text, gap=line.gap)  # a gap marker stays a marker
        self._tap("log_batch", node, instance, lines)

    def error(self, node: str, exc: Exception) -> None:
        """Keep the error's one line (``errors``, the newest ``MAX_ERRORS``) and tell the subscribers."""
        line = collect_error_text(exc)
        self.errors.append(f"{node}: {line}")
        self._tap("error", node, exc)
        for subscriber in self.subscribers:
            subscriber.failed(node, line)

    def _tap(self, method: str, *args: object) -> None:
        """Hand what the core was fed to its taps; one that fails is noted once (``tap_failures``) and
        the core, and every other tap, go on."""
        for index, tap in enumerate(self.taps):
            try:
                getattr(tap, method)(*args)
            except Exception as exc:  # a tap's bug or full disk is its own, never the core's
                if (index, method) not in self._taps_failed:
                    self._taps_failed.add((index, method))
                    self.tap_failures.append(TapFailure(type(tap).__name__, method, f"{type(exc).__name__}: {exc}"))

    def canaries_due(self, node: str, t: float) -> tuple[CanaryOrder, ...]:
        """The canaries a live source should send to ``node`` now (``FleetState.canaries_due``), none to
        an instance an action of sparktui's runs on (until ``ACTION_SETTLE_S`` after it): the action's
        warmup is its probe, and a canary sent as a restarted engine's first request would wait out its
        JIT (tens of seconds) and time out as a wedge, or leave the warmup a warm engine to measure."""
        return self.state.canaries_due(node, t, held=lambda instance: self.diagnosis.held(node, instance, t))

    # --- actions sparktui runs itself -----------------------------------------------------------------

    def action_started(self, nodes: Iterable[str], instance: str | None) -> None:
        """An action began on ``nodes`` (an ``ActionPlan``'s), aimed at ``instance`` (None: the whole
        node). On a node without an instance of that name (the other rank of a multi-node job) the
        whole node is held."""
        for node, subject in self._action_subjects(nodes, instance):
            self.diagnosis.action_started(node, subject)
            self.state.action_started(node, subject)

    def action_ended(self, nodes: Iterable[str], instance: str | None, now: float) -> None:
        """The action ``action_started`` announced ended (done, failed or refused) at ``now`` (on the
        tick's clock); the hold lasts ``ACTION_SETTLE_S`` more."""
        for node, subject in self._action_subjects(nodes, instance):
            self.diagnosis.action_ended(node, subject, now)
            self.state.action_ended(node, subject, now)

    def _action_subjects(self, nodes: Iterable[str], instance: str | None) -> list[tuple[str, str | None]]:
        subjects: list[tuple[str, str | None]] = []
        for node in nodes:
            state = self.state.nodes.get(node)
            if state is not None:
                subjects.append((node, instance if instance in state.instances else None))
        return subjects

    # --- the tick -------------------------------------------------------------------------------------

    def tick(self, now: float, wall: float | None = None) -> tuple[AlertEvent, ...]:
        """Views, history, diagnosis and alerts at ``now``; returns the alert events of this tick.
        ``wall`` is the wall-clock time of ``now`` for the alerts; the findings' times are mapped from
        the observations (``wall_at``), so every consumer of the same observations shows the same."""
        observed = self.state.view(now, window_s=self.window_s)
        for view in observed:  # the diagnosis judges what was observed, never its own verdict
            buffers = self.log_buffers.get(view.name, {})
            lines = {name: unread(buffer, self.diagnosis.cursor(view.name, name)) for name, buffer in buffers.items()}
            try:
                intervals = last_intervals(self.state.nodes[view.name])
                self.findings[view.name] = self.diagnosis.evaluate(view, lines, now, intervals, self.wall_at(now))
            except Exception as exc:  # one node's data never stops another's diagnosis (FleetState's rule)
                self.errors.append(f"{view.name}: {internal_error_text(exc)}")
        self.views = tuple(self._judged(view) for view in observed)
        if self.keep_history:
            self.history.record(self.views, now)
        events = self.alerts.evaluate(self.views, self.findings, now, wall)
        self.ticks += 1
        fired = [(f"{e.alert.severity.value} {e.alert.name}: {e.summary}", e.alert.node) for e in events if e.fired]
        for observer in self.observers:
            observer.tick(now)
            for node, findings in self.findings.items():
                observer.findings(node, findings, now)
            for reason, node in fired:
                observer.alert(reason, node)
        for subscriber in self.subscribers:
            subscriber.ticked(now, events)
        return events

    def observer_problems(self) -> tuple[str, ...]:
        """Why an observer stopped (``MonitorObserver.problem``), for every consumer to show: a
        recording that stopped is the operator's to know, not the log's alone."""
        return tuple(problem for observer in self.observers if (problem := observer.problem) is not None)

    def wall_at(self, t: float | None) -> float | None:
        """The unix time of ``t`` on the tick's clock (a finding's ``opened_at``, ``cleared_at``): the
        one place the monotonic clock is mapped to the wall clock, by the newest observation's ``t``
        and ``wall``. None before the first observation."""
        if t is None or self._wall_offset is None:
            return None
        return t + self._wall_offset

    def views_of(self, names: Iterable[str], now: float) -> dict[str, NodeView]:
        """The named nodes' views again, between ticks (a row redrawn as its observation arrives);
        ``views`` is updated with them."""
        fresh = {
            name: self._judged(view) for name, view in self.state.views_of(names, now, window_s=self.window_s).items()
        }
        if fresh:
            self.views = tuple(fresh.get(view.name, view) for view in self.views)
        return fresh

    def _judged(self, view: NodeView) -> NodeView:
        """``view`` as its open findings judge it (``diagnosis.verdict``): the one status every consumer shows."""
        return judged(view, self.findings.get(view.name, ()))

    def node_logs(self, node: str) -> Mapping[str, LogBuffer]:
        """The node's log buffers by instance (empty before any line came)."""
        return self.log_buffers.get(node, {})
