"""Diagnosis: the known failure signatures of DGX Spark vLLM nodes, matched against a node's evidence.

The catalogue is data (``sparktui/data/failures.toml``, the rules that judge every engine, and each
engine's own ``failures.toml`` beside its code): ``load_catalogue()`` reads, validates and merges them,
compiling every regular expression, and
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

This module is the findings' lifecycle; the detectors that judge each rule's condition are in
``detectors/`` (one registry, ``DETECTORS``), and what both share (``Finding``, the memory, one
evaluation's ``Ctx``) in ``state.py``.

Hysteresis: a detector finding opens when its condition holds in ``open_after`` evaluations in a row
and clears when it has been false for ``clear_after_s`` seconds (an evaluation that cannot tell, e.g.
no host sample, changes nothing). A log finding opens on a matching line; "attempt" rules (start-up
failures) clear once the instance serves a request after the last match, or has been serving (UP or
DEGRADED: /health 200) for ``healthy_s`` after it, or after ``quiet_s`` without a new match; "process"
rules (how the running process was launched) clear only when a later start has been serving for
``healthy_s`` without the line, or after ``quiet_s`` down and silent.

Engines: a rule with an ``engine`` judges only the instances of that engine (``InstanceView.engine_kind``,
from the instance's spec): an instance's log is read with the rules of its engine and the neutral ones,
and with its engine's own start and error lines (``Catalogue.marks``); a per-instance detector of an
engine's skips the others' instances, a node-wide one a node without an instance of that engine. The log
of a name no instance of the view has is read as vLLM's (``DEFAULT_ENGINE``).

Kernel-log rules (``stream = "kernel"``) read the node's kernel log, passed under the name
``KERNEL_LOG`` beside the instances' logs; their findings are the node's (``instance`` None), and
"attempt" ones clear once any instance of the node has served again after the last match (of those
that were not serving through it, when there are: a fallback engine beside a failed load proves nothing). "quiet"
rules (an event of the box, a GPU fault or a thermal trip) clear only after ``quiet_s`` without a new match.

Actions: ``action_started`` / ``action_ended`` (the monitor core hears them from the dashboard) hold the
wedge-type detectors (``HELD_DURING_ACTIONS``) of what an action touches while it runs and for
``ACTION_SETTLE_S`` after: a restart's warmup request waits for the JIT with no token, on purpose. For
``ACTION_SETTLE_S`` after an action ends, a detector finding of its node whose condition no longer
holds clears at the first evaluation that says so, not after its ``clear_after_s``: the fix worked,
and the screen says so at once.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from sparktui.diagnosis.catalogue import DEFAULT_ENGINE, Catalogue, LogMarks, Rule
from sparktui.diagnosis.detectors import DETECTORS
from sparktui.diagnosis.detectors.host import memory_evidence
from sparktui.diagnosis.state import (
    MAX_EVIDENCE_CHARS,
    SERVING,
    Check,
    Ctx,
    Finding,
    InstanceMemory,
    NodeMemory,
    Track,
    log_line,
    service_state,
)
from sparktui.engines import registry
from sparktui.model.derive import EngineRates
from sparktui.model.fleet import InstanceView, NodeState, NodeView
from sparktui.model.holds import ACTION_SETTLE_S, ActionHold
from sparktui.model.logbuffer import KERNEL_LOG, LogBuffer, LogLine
from sparktui.model.status import State

# The engine's public names; ``Finding`` and the two limits live in ``state.py`` (shared with the detectors)
# and are the engine's answer and settings, so they are read from here.
__all__ = [
    "ACTION_SETTLE_S",
    "DEFAULT_HISTORY",
    "HELD_DURING_ACTIONS",
    "MAX_EVIDENCE_CHARS",
    "DiagnosisEngine",
    "Finding",
    "last_intervals",
    "unread",
]

DEFAULT_HISTORY = 200  # cleared findings kept per node
MEMORY_TREND_S = 120.0  # how far back "MemAvailable fell …" looks
MAX_PROBLEMS = 50
START_WOBBLE_S = 1.0  # a service start time that moved by less is the same start (read through two clocks)
# The detectors that read "no or slow tokens" as a wedge, held while an action runs (``state.ACTION_SETTLE_S``).
HELD_DURING_ACTIONS = frozenset({"requests-without-tokens", "decode-slow"})  # detector names


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


class _EngineLog:
    """How the log of an instance of one engine kind is read: its rules, their combined prefilter (one
    search per new line: most lines match nothing and cost only this), its start and error lines."""

    def __init__(self, catalogue: Catalogue, engine: str) -> None:
        self.rules = catalogue.log_rules(engine)
        self.marks: LogMarks = catalogue.marks(engine)
        patterns = [p.pattern for rule in self.rules if rule.log is not None for p in rule.log.patterns]
        patterns += [self.marks.attempt_start.pattern, self.marks.error.pattern]
        self.prefilter = _combined(patterns)


_NAMED_GROUP = re.compile(r"\(\?P<\w+>")


def _combined(patterns: Sequence[str]) -> re.Pattern[str]:
    """One regex matching a line any of ``patterns`` matches. Named groups become plain ones: two
    patterns of a rule name the same group (a title's field), which one regex may not."""
    return re.compile("|".join(f"(?:{_NAMED_GROUP.sub('(?:', p)})" for p in patterns) or "(?!)")


def last_intervals(node: NodeState) -> dict[str, EngineRates | None]:
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
        # Engine kind -> how its instances' logs are read; built here, so a bad pattern fails at once.
        self._engine_logs = {kind: _EngineLog(self.catalogue, kind) for kind in registry()}
        self._kernel_rules = tuple(rule for rule in rules if rule.log is not None and rule.log.stream == "kernel")
        self._detector_rules = tuple(rule for rule in rules if rule.detector is not None)
        kernel = [p.pattern for rule in self._kernel_rules if rule.log is not None for p in rule.log.patterns]
        self._kernel_prefilter = _combined(kernel)
        self._nodes: dict[str, NodeMemory] = {}
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
        self._memory(node).actions.setdefault(instance, ActionHold()).started()

    def action_ended(self, node: str, instance: str | None, now: float) -> None:
        """The action ``action_started`` announced has ended (done, failed or cancelled)."""
        memory = self._memory(node)
        hold = memory.actions.get(instance)
        if hold is not None:
            hold.ended(now)
        memory.recheck_from = now

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
        intervals: Mapping[str, EngineRates | None] | None = None,
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
        ctx = Ctx(node, now, memory, intervals, self._eval, wall)
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

    def _memory(self, node: str) -> NodeMemory:
        memory = self._nodes.get(node)
        if memory is None:
            memory = self._nodes[node] = NodeMemory(history=deque(maxlen=max(1, self.history_limit)))
        return memory

    def _observe_node(self, ctx: Ctx) -> None:
        node, memory, now = ctx.node, ctx.memory, ctx.now
        host = node.host_state
        if host is not None and host.seq != memory.host_seq:
            memory.host_seq, memory.host_fresh_at = host.seq, now
        available = node.host_memory.mem_available if node.host_memory is not None else None
        if available is not None:
            memory.available.append((now, available))
        while memory.available and now - memory.available[0][0] > MEMORY_TREND_S:
            memory.available.popleft()

    def _observe_instance(self, ctx: Ctx, inst: InstanceView) -> None:
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

    def _start(self, ctx: Ctx, name: str, im: InstanceMemory, served_reset: bool) -> None:
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

    def _engine_log(self, engine: str) -> _EngineLog:
        found = self._engine_logs.get(engine)
        if found is None:
            found = self._engine_logs[engine] = _EngineLog(self.catalogue, engine)
        return found

    def _scan(self, ctx: Ctx, name: str, lines: Sequence[LogLine]) -> None:
        if not lines:
            return
        im = ctx.memory.instance(name)
        inst = ctx.instances.get(name)
        serving = inst is not None and inst.status.state in SERVING
        reading = self._engine_log(inst.engine_kind if inst is not None else DEFAULT_ENGINE)
        found, im.cursor = _candidates(lines, im.cursor, reading.prefilter)
        for line in found:
            self._scan_line(ctx, name, im, line, serving=serving, reading=reading)

    def _scan_kernel(self, ctx: Ctx, lines: Sequence[LogLine]) -> None:
        found, ctx.memory.kernel_cursor = _candidates(lines, ctx.memory.kernel_cursor, self._kernel_prefilter)
        for line in found:
            self._match_rules(ctx, self._kernel_rules, None, line)

    def _scan_line(
        self, ctx: Ctx, name: str, im: InstanceMemory, line: LogLine, *, serving: bool, reading: _EngineLog
    ) -> None:
        text = line.text
        if reading.marks.attempt_start.search(text):
            # A replayed old start line while the instance serves is not a start of this process.
            self._start(ctx, name, im, served_reset=not serving)
        if not im.error_taken and reading.marks.error.search(text):
            im.first_error, im.error_taken = line, True
        self._match_rules(ctx, reading.rules, name, line)

    def _match_rules(self, ctx: Ctx, rules: Sequence[Rule], subject: str | None, line: LogLine) -> None:
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

    def _track(self, memory: NodeMemory, rule: Rule, subject: str | None) -> Track:
        key = (rule.id, subject)
        track = memory.tracks.get(key)
        if track is None:
            track = memory.tracks[key] = Track(rule, subject)
        return track

    def _log_match(
        self,
        ctx: Ctx,
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
        evidence = [log_line(line) for line in shown]
        if track.matches > 1:
            evidence.append(f"{track.matches} matches since {ctx.at(track.opened_at)}")
        evidence.extend(self._extras(ctx, rule, subject))
        if track.opened_at is None:
            track.opened_at = ctx.now
        track.evidence = tuple(evidence)
        track.last_seen = ctx.now
        track.snapshot = None

    def _judge_log(self, ctx: Ctx, track: Track) -> None:
        rule, now = track.rule, ctx.now
        log, last = rule.log, track.last_match_at
        if log is None or last is None:
            return
        # A node's finding (the kernel's) is judged by the instances of the node: any one serving again.
        names = [track.subject] if track.subject is not None else _not_serving_through(ctx, last)
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

    def _judge_detector(self, ctx: Ctx, rule: Rule) -> None:
        spec = DETECTORS[rule.detector or ""]
        if spec.node is not None:
            if rule.engine is None or any(rule.applies_to(inst.engine_kind) for inst in ctx.node.instances):
                self._apply(ctx, rule, None, spec.node(ctx, rule))
        elif spec.instance is not None:
            for inst in ctx.node.instances:
                if not rule.applies_to(inst.engine_kind):
                    continue  # another engine's rule
                im = ctx.memory.instance(inst.name)
                check = spec.instance(ctx, rule, inst, im)  # run even when held: detectors keep baselines
                holding = check is not None and check.holds and rule.detector in HELD_DURING_ACTIONS
                if holding and self.held(ctx.node.name, inst.name, ctx.now):
                    self._hold(ctx, rule, inst.name)
                    continue
                self._apply(ctx, rule, inst.name, check)

    def _hold(self, ctx: Ctx, rule: Rule, subject: str) -> None:
        """A held detector's condition holds: an open finding stays as it is, a streak starts again."""
        track = ctx.memory.tracks.get((rule.id, subject))
        if track is not None and not track.open:
            del ctx.memory.tracks[(rule.id, subject)]

    def _apply(self, ctx: Ctx, rule: Rule, subject: str | None, check: Check | None) -> None:
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
        if now - track.false_since >= rule.param("clear_after_s") or _rechecked(memory.recheck_from, now):
            self._close(ctx, track)

    def _extras(self, ctx: Ctx, rule: Rule, subject: str | None) -> list[str]:
        out: list[str] = []
        if "memory" in rule.evidence:
            out.extend(memory_evidence(ctx))
        if "service" in rule.evidence and subject is not None:
            inst = ctx.instances.get(subject)
            service = inst.service if inst is not None else None
            if inst is not None and service is not None:
                bits = [service_state(inst)]
                if service.exit_status is not None:
                    bits.append(f"exit status {service.exit_status}")
                if service.restarts is not None:
                    bits.append(f"{service.restarts} restarts")
                if service.problem:
                    bits.append(service.problem)
                out.append(f"{', '.join(bits)} (at {ctx.at()})")
        return out

    def _close(self, ctx: Ctx, track: Track) -> None:
        memory = ctx.memory
        memory.tracks.pop((track.rule.id, track.subject), None)
        if track.shown and track.opened_at is not None:
            finding = replace(self._snapshot(ctx.node.name, track), cleared_at=ctx.now)
            memory.history.append(finding)

    def _snapshot(self, node: str, track: Track) -> Finding:
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

    def _visible(self, node: str, memory: NodeMemory) -> list[Finding]:
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


def _rechecked(recheck_from: float | None, now: float) -> bool:
    """Whether a finding whose condition no longer holds clears at once: an action of sparktui's ended
    on the node within ``ACTION_SETTLE_S``, and a fresh reading says what it addressed is gone (the
    operator must not be tempted to run the fix twice while the ordinary clear time runs out)."""
    return recheck_from is not None and 0.0 <= now - recheck_from <= ACTION_SETTLE_S


def _order(finding: Finding) -> tuple[int, float, str, str]:
    return (-finding.severity.rank, finding.opened_at, finding.id, finding.instance or "")


def _not_serving_through(ctx: Ctx, last: float) -> list[str]:
    """The node's instances whose serving again can end a failed start matched at ``last``: those that
    were not serving without a break across it (a fallback engine that served all along, beside a vLLM
    whose load the driver failed, proves nothing of that load). All of them when every one was."""
    names = list(ctx.instances)
    starting = [
        name
        for name in names
        if (m := ctx.memory.instances.get(name)) is None or m.serving_since is None or m.serving_since > last
    ]
    return starting or names
