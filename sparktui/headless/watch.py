"""``sparktui watch``: the dashboard's collection and rules with no screen, sending alerts.

The watcher drives the same monitor core as the dashboard (``sparktui.monitor.core.Monitor``) from the
same collection (``LiveFleet``, or any source with its ``run(core)`` shape, such as a replay): the
source feeds the core, the watcher subscribes to it. Every poll interval (or at a recording's ticks)
the core computes the views, one diagnosis evaluation per node and the alert rules, so the watcher
sees what the dashboard sees by construction. Each alert that fires or resolves (``ticked``) is
logged and handed to the notifiers, which send from their own queues: a
slow or dead notifier never delays a poll or a tick.

The log is one line per event on stdout, ``key=value`` pairs after a level word, no colour::

    crit node=spark2 alert=node-down event=firing severity=crit summary="spark2 is down" ...

Under systemd (``$JOURNAL_STREAM`` set) each line starts with its syslog priority (``<2>``), which
journald strips and records as the entry's priority, so ``journalctl -p warning`` works.
``check_alerts`` judges the rules once, for ``sparktui check --alerts``.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from sparktui.config import catalogue_for
from sparktui.diagnosis.alerts import AlertEvent, AlertState, alert_rules, firing_now
from sparktui.diagnosis.catalogue import Severity
from sparktui.diagnosis.engine import Finding
from sparktui.model.fleet import NodeView
from sparktui.model.specs import FleetSpec
from sparktui.model.units import fmt_count
from sparktui.monitor.core import (
    UNSHOWN_LOG_LINES,
    WINDOW_S,
    Monitor,
    MonitorObserver,
    MonitorRecorder,
    MonitorTap,
)
from sparktui.monitor.schedule import next_due
from sparktui.notify.notifiers import DEFAULT_DRAIN_S, NotifierHub
from sparktui.sources.live import FleetSource
from sparktui.sources.prometheus import fleet_source

if TYPE_CHECKING:
    from sparktui.record.recorder import Recorder

__all__ = ["Watcher", "check_alerts", "main", "run_check", "watch"]
# syslog priorities (sd-daemon(3)): journald reads a leading "<N>" as the line's priority.
PRIORITIES: Mapping[str, int] = {"crit": 2, "err": 3, "warning": 4, "notice": 5, "info": 6}
_FIRING_LEVEL = {Severity.CRIT: "crit", Severity.WARN: "warning", Severity.INFO: "notice"}
REPEAT_ERROR_S = 60.0  # the same collection error is logged again at most this often
MAX_EVIDENCE_LOGGED = 5


def _field(value: object) -> str:
    """A logfmt value: bare when it is one plain word, else a JSON string (quotes and newlines escaped)."""
    text = " | ".join(str(v) for v in value) if isinstance(value, list | tuple) else str(value)
    if text and not any(c.isspace() or c in '"=\\' for c in text):
        return text
    return json.dumps(text, ensure_ascii=False)


class Watcher:
    """The headless dashboard: collection in, views, findings and alerts each tick, events out."""

    def __init__(
        self,
        fleet: FleetSpec,
        *,
        out: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        source: FleetSource | None = None,
        taps: Sequence[MonitorTap] = (),
        observers: Sequence[MonitorObserver] = (),
        recorder: MonitorRecorder | None = None,
        journal: bool = False,
        window_s: float = WINDOW_S,
    ) -> None:
        """``taps`` hear everything the core is fed, ``observers`` every tick, finding and alert of the
        core; ``recorder`` (``--record``, ``--black-box``) is attached as the dashboard attaches its
        own (``Monitor.attach``)."""
        self.fleet = fleet
        self.out = out if out is not None else sys.stdout
        self.clock = clock
        self.wall = wall
        self.journal = journal
        self.monitor = Monitor(
            fleet,
            catalogue_for(fleet.diagnosis),
            window_s=window_s,
            keep_history=False,
            log_lines=UNSHOWN_LOG_LINES,
            observers=observers,
            taps=taps,
        )
        if recorder is not None:
            self.monitor.attach(recorder)
        self.monitor.subscribe(self)
        self.source: FleetSource = source or fleet_source(fleet, clock=clock)
        self.hub = NotifierHub(fleet.notifiers, report=self._report, wall=wall, ca_file=fleet.ca_file)
        self._errors_logged: dict[tuple[str, str], float] = {}
        self._problems_logged: set[str] = set()
        self._tap_failures_logged = 0

    # --- MonitorSubscriber: what the core publishes -------------------------------------------------

    def arrived(self, node: str) -> None:
        pass  # nothing to draw: the tick evaluates

    def failed(self, node: str, line: str) -> None:
        """A collection error, logged at most once per ``REPEAT_ERROR_S`` per node and message."""
        now = time.monotonic()
        last = self._errors_logged.get((node, line))
        if last is None or now - last >= REPEAT_ERROR_S:
            self._errors_logged[(node, line)] = now
            self.log("err", node=node, event="collect-error", error=line)

    def ticked(self, now: float, events: tuple[AlertEvent, ...]) -> None:
        """Each tick of the core, whoever drove it (this watcher's clock, or a recording's ticks): its
        alert events logged and handed to the notifiers."""
        for event in events:
            self._log_event(event)
            self.hub.submit(event)
        self._log_problems()

    def restarted(self) -> None:
        pass  # a recording started again (a new session, or a gap): the core did; nothing kept here

    # --- the tick -------------------------------------------------------------------------------------

    def tick(self, now: float | None = None) -> tuple[AlertEvent, ...]:
        """Tick the core at ``now`` (default: the clock's); ``ticked`` logs and sends its events."""
        return self.monitor.tick(self.clock() if now is None else now, self.wall())

    def _log_problems(self) -> None:
        for problem in self.monitor.diagnosis.problems:
            if problem not in self._problems_logged:
                self._problems_logged.add(problem)
                self.log("err", event="diagnosis-error", error=problem)
        for problem in self.monitor.observer_problems():
            if problem not in self._problems_logged:
                self._problems_logged.add(problem)
                self.log("err", event="recording-stopped", error=problem)
        for failure in self.monitor.tap_failures[self._tap_failures_logged :]:
            self.log("err", event="sink-error", sink=failure.tap, method=failure.method, error=failure.error)
        self._tap_failures_logged = len(self.monitor.tap_failures)

    # --- the run loop ---------------------------------------------------------------------------------

    async def run(
        self,
        *,
        stop_after_s: float | None = None,
        stop: asyncio.Event | None = None,
        drain_s: float = DEFAULT_DRAIN_S,
    ) -> int:
        """Collect and tick every poll interval until ``stop`` is set, ``stop_after_s`` seconds have
        passed, or the source ends (a replay). 0 when it stopped as asked, 1 when the source failed."""
        loop = asyncio.get_running_loop()
        interval = self.fleet.poll_interval_s
        self.log(
            "info",
            event="start",
            nodes=len(self.fleet.nodes),
            rules=len(self.monitor.alerts.rules),
            notifiers=",".join(f"{n.name}({n.kind})" for n in self.hub.notifiers) or "none",
            interval_s=f"{interval:g}",
            config=self.fleet.source,
        )
        self.hub.start()
        collect = asyncio.create_task(self.source.run(self.monitor), name="collect")
        stopper = asyncio.create_task(stop.wait(), name="stop") if stop is not None else None
        waits: list[asyncio.Future[Any]] = [collect] if stopper is None else [collect, stopper]
        started = loop.time()
        deadline = started + stop_after_s if stop_after_s is not None else None
        next_at = started + interval
        code = 0
        try:
            while True:
                wake = next_at if deadline is None else min(next_at, deadline)
                await asyncio.wait(waits, timeout=max(0.0, wake - loop.time()), return_when=asyncio.FIRST_COMPLETED)
                if collect.done():
                    code = self._source_ended(collect)
                    if not self.source.drives_ticks:
                        self._safe_tick()
                    break
                if stopper is not None and stopper.done():
                    break
                if not self.source.drives_ticks:  # a recording ticks the core at its own ticks
                    self._safe_tick()
                now = loop.time()
                if deadline is not None and now >= deadline:
                    break
                next_at = next_due(next_at, now, interval)  # a tick that overran skips the ones it missed
        finally:
            for task in (collect, stopper):
                if task is not None:
                    task.cancel()
            await asyncio.gather(collect, *([stopper] if stopper else []), return_exceptions=True)
            await self.hub.close(drain_s)
            self.log("info", event="stop", ticks=self.monitor.ticks, firing=len(self.monitor.alerts.active()))
        return code

    def _safe_tick(self) -> None:
        try:
            self.tick()
        except Exception as exc:  # a bug in one tick must not end the watch
            self.log("err", event="tick-error", error=f"{type(exc).__name__}: {exc}")

    def _source_ended(self, collect: asyncio.Task[None]) -> int:
        exc = None if collect.cancelled() else collect.exception()
        if exc is not None:
            self.log("err", event="source-failed", error=f"{type(exc).__name__}: {exc}")
            return 1
        self.log("info", event="source-ended")
        return 0

    # --- the log --------------------------------------------------------------------------------------

    def log(self, level: str, **fields: object) -> None:
        """One line: the level word, then ``key=value`` pairs (None values left out)."""
        parts = [level, *(f"{key}={_field(value)}" for key, value in fields.items() if value is not None)]
        line = " ".join(parts)
        if self.journal:
            line = f"<{PRIORITIES[level]}>{line}"
        self.out.write(line + "\n")
        self.out.flush()

    def _report(self, level: str, fields: Mapping[str, object]) -> None:
        ordered = {key: fields[key] for key in ("node", "alert") if key in fields}
        self.log(level, **ordered, **{k: v for k, v in fields.items() if k not in ordered})

    def _log_event(self, event: AlertEvent) -> None:
        alert = event.alert
        firing = event.state is AlertState.FIRING
        self.log(
            _FIRING_LEVEL[alert.severity] if firing else "notice",
            node=alert.node,
            alert=alert.name,
            event=event.state.value,
            severity=alert.severity.value,
            instance=alert.instance,
            rule=alert.rule if alert.rule != alert.name else None,
            held_s=f"{event.held_s:.0f}" if firing else None,  # how long the condition held before it fired
            lasted_s=None if firing else f"{event.held_s:.0f}",  # how long it fired
            silenced="yes" if event.silenced else None,
            summary=event.summary,
            evidence=list(event.evidence[:MAX_EVIDENCE_LOGGED]) or None,
            fix=alert.fix if firing else None,
        )


async def watch(
    fleet: FleetSpec,
    *,
    out: TextIO | None = None,
    clock: Callable[[], float] = time.monotonic,
    source: FleetSource | None = None,
    taps: Sequence[MonitorTap] = (),
    observers: Sequence[MonitorObserver] = (),
    recorder: MonitorRecorder | None = None,
    stop_after_s: float | None = None,
    stop: asyncio.Event | None = None,
    journal: bool = False,
    wall: Callable[[], float] = time.time,
    drain_s: float = DEFAULT_DRAIN_S,
) -> int:
    """Watch ``fleet`` (live, or ``source``) and send its alerts until stopped; see ``Watcher.run``.
    ``out`` is stdout when None; ``taps`` get everything collected too, ``observers`` the core's
    ticks, findings and alerts."""
    watcher = Watcher(
        fleet,
        out=out,
        clock=clock,
        wall=wall,
        source=source,
        taps=taps,
        observers=observers,
        recorder=recorder,
        journal=journal,
    )
    return await watcher.run(stop_after_s=stop_after_s, stop=stop, drain_s=drain_s)


# --- check --alerts -------------------------------------------------------------------------------------


def check_alerts(
    fleet: FleetSpec, views: Sequence[NodeView], findings: Mapping[str, Sequence[Finding]]
) -> tuple[list[str], int]:
    """The rules judged once (``for_s`` not applied): one line per alert that would fire, worst first,
    and a summary line. Exit code 0 when none would, 1 when the worst is warn or info, 2 when crit."""
    rules = alert_rules(fleet)
    readings = firing_now(rules, views, findings, fleet)
    lines: list[str] = []
    for reading in readings:
        where = reading.node if reading.instance is None else f"{reading.node}/{reading.instance}"
        evidence = "; ".join(reading.evidence[:3])
        line = f"{reading.severity.value} {where} {reading.name}: {reading.summary}"
        if evidence:
            line += f" ({evidence})"
        lines.append(f"{line}; fix: {reading.fix}")
    if readings:
        counts: dict[str, int] = {}
        for reading in readings:
            counts[reading.severity.value] = counts.get(reading.severity.value, 0) + 1
        summary = ", ".join(f"{counts[s.value]} {s.value}" for s in reversed(Severity) if s.value in counts)
        lines.append(f"{fmt_count(len(readings), 'alert')} would fire: {summary}")
    else:
        lines.append(f"no alert would fire ({fmt_count(len(rules), 'rule')})")
    worst = max((r.severity.rank for r in readings), default=-1)
    code = 2 if worst >= Severity.CRIT.rank else 1 if worst >= 0 else 0
    return lines, code


def run_check(fleet: FleetSpec, monitor: Monitor, *, out: TextIO | None = None) -> int:
    """``sparktui check --alerts`` on the one-shot core (``Monitor.once``, fed and ticked once by
    ``headless.collect``): judge the rules on its views and findings, print the lines; returns the exit code."""
    lines, code = check_alerts(fleet, monitor.views, monitor.findings)
    (out if out is not None else sys.stdout).write("\n".join(lines) + "\n")
    return code


# --- the command ------------------------------------------------------------------------------------------


def main(fleet: FleetSpec, *, stop_after_s: float | None, journal: bool, recorder: Recorder | None = None) -> int:
    """``sparktui watch`` once its arguments are read (``sparktui.cli.watch``): watch until SIGTERM/SIGINT
    or ``stop_after_s``; ``recorder`` (--record, --black-box) gets what is collected and what the core derives."""
    return asyncio.run(_main(fleet, stop_after_s=stop_after_s, journal=journal, recorder=recorder))


async def _main(fleet: FleetSpec, *, stop_after_s: float | None, journal: bool, recorder: Recorder | None) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    return await watch(fleet, stop_after_s=stop_after_s, stop=stop, journal=journal, recorder=recorder)
