"""Alert rules: when a derived number or a diagnosis finding becomes something to tell someone about.

Pure, like the rest of the model. ``read_rules()`` judges every rule against the node views and the
active findings once (what ``sparktui check --alerts`` reports); ``AlertEngine.evaluate()`` is called
once per tick by the dashboard and by ``sparktui watch`` and keeps each alert's life:

- it fires when its condition has held for the rule's ``for_s`` seconds (one ``firing`` event);
- while it fires nothing more is sent, however often it is evaluated (deduplication);
- it resolves when its condition has been clear for ``clear_after_s`` seconds (one ``resolved`` event).
  With ``resolve_at`` a number must come back past that value to count as clear, not only past the
  threshold (hysteresis), so a value hovering at the threshold does not flap;
- an evaluation that cannot tell (the node not polled yet or stale, the instance not serving, no host
  sample) changes nothing, as in the diagnosis engine.

A silenced alert still fires and resolves, but its events are marked ``silenced`` and are not sent; if it
still fires when the silence ends, its firing event comes then.

Without ``[[alerts]]`` in the config the rules are ``default_rules()``: thresholds from ``[thresholds]``,
the ones the dashboard colours by, with durations that suit a Spark (docs/alerts.md has the table).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Literal

from sparktui.diagnosis.catalogue import Severity
from sparktui.diagnosis.engine import Finding
from sparktui.model.engines import kv_line
from sparktui.model.fleet import InstanceView, NodeView, ServiceView
from sparktui.model.specs import (
    CONDITION_METRICS,
    AlertRuleSpec,
    FleetSpec,
    NodeSpec,
    Thresholds,
)
from sparktui.model.status import State
from sparktui.model.units import GIB, fmt_pct, fmt_seconds

DEFAULT_HISTORY = 200  # resolved alerts kept
MAX_REASONS = 5  # status reasons quoted as evidence
SERVING = frozenset(s for s in State if s.serving)  # judged FAILING still serves


class AlertState(StrEnum):
    FIRING = "firing"
    RESOLVED = "resolved"


class RuleState(StrEnum):
    """Where a rule stands now, for one subject (or for all of them, when ``ok``)."""

    FIRING = "firing"
    SILENCED = "silenced"  # firing, its messages held back until the silence ends
    PENDING = "pending"  # the condition holds, not yet for the rule's ``for_s``
    OK = "ok"  # nothing of the rule holds anywhere


RULE_STATE_ORDER = (RuleState.FIRING, RuleState.SILENCED, RuleState.PENDING, RuleState.OK)


@dataclass(frozen=True, slots=True)
class AlertKey:
    """One alert: a rule on a node, about a part of it (an instance, a service, a finding) or all of it."""

    rule: str
    node: str
    subject: str | None = None  # instance or service name; "finding-id" or "finding-id/instance"

    def __str__(self) -> str:
        return "/".join(part for part in (self.node, self.subject, self.rule) if part)


@dataclass(frozen=True, slots=True)
class Alert:
    """A firing alert (``resolved_at`` None) or a resolved one. Times ``since``, ``fired_at`` and
    ``resolved_at`` are on the clock given to ``evaluate``; ``*_wall`` are epoch seconds, when known."""

    key: AlertKey
    name: str  # how messages call it: the rule's name, or the finding's id for a finding rule
    node: str
    instance: str | None  # the vLLM instance or side service it is about
    severity: Severity
    summary: str
    evidence: tuple[str, ...]
    fix: str
    value: float | None
    since: float  # when the condition began to hold
    fired_at: float
    fired_wall: float | None = None
    resolved_at: float | None = None
    resolved_wall: float | None = None

    @property
    def rule(self) -> str:
        return self.key.rule

    @property
    def active(self) -> bool:
        return self.resolved_at is None


@dataclass(frozen=True, slots=True)
class AlertEvent:
    """An alert fired or resolved. ``summary`` and ``evidence`` are the event's own: a resolved event
    says what the number came back to. ``silenced`` events are logged, not sent."""

    state: AlertState
    alert: Alert
    at: float
    wall: float | None
    summary: str
    evidence: tuple[str, ...]
    silenced: bool = False

    @property
    def fired(self) -> bool:
        return self.state is AlertState.FIRING

    @property
    def held_s(self) -> float:
        """How long the condition had held when it fired, or how long the alert fired when resolved."""
        if self.state is AlertState.FIRING:
            return self.alert.fired_at - self.alert.since
        return self.at - self.alert.fired_at


@dataclass(frozen=True, slots=True)
class Reading:
    """One rule judged once for one subject. ``firing`` None: this evaluation cannot tell."""

    key: AlertKey
    name: str
    node: str
    instance: str | None
    severity: Severity
    firing: bool | None
    clear: bool  # clear enough to resolve (past resolve_at when the rule has one)
    value: float | None
    summary: str
    evidence: tuple[str, ...]
    fix: str


@dataclass(frozen=True, slots=True)
class RuleStatus:
    """One line of the rules' state: a rule firing, silenced or pending on one subject (``key``), or
    ``ok`` everywhere (``key`` None). ``since``: when the condition began to hold."""

    rule: AlertRuleSpec
    state: RuleState
    key: AlertKey | None = None
    severity: Severity | None = None
    since: float | None = None
    summary: str = ""
    alert: Alert | None = None  # while firing or silenced
    silenced_until: float | None = None


# --- the metrics ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Sample:
    """A metric's value now. ``known`` False: cannot tell. A known None: nothing to measure (no
    traffic in the window, no drafts), which counts as clear."""

    value: float | None
    known: bool = True
    evidence: tuple[str, ...] = ()


_UNKNOWN = Sample(None, known=False)
Scope = Literal["node", "instance", "service"]


@dataclass(frozen=True, slots=True)
class Metric:
    """What an alert rule can watch: how to read it from a view, show it, and fix it."""

    name: str
    scope: Scope
    label: str
    unit: str  # for docs/alerts.md
    show: Callable[[float], str]
    fix: str  # a format string over node, subject, hint, position


def _shown_count(value: float) -> str:
    return f"{value:,.0f}"


def _shown_flag(value: float) -> str:
    return "yes" if value else "no"


METRICS: Mapping[str, Metric] = {
    m.name: m
    for m in (
        Metric(
            "node_down",
            "node",
            "node down",
            "condition",
            _shown_flag,
            "Check {node}: {hint}; restart vLLM with `sparktui action {node} restart` (r in the dashboard); "
            "if SSH does not answer either, check the box's power and network.",
        ),
        Metric(
            "node_stale",
            "node",
            "no poll finished",
            "condition",
            _shown_flag,
            "No poll of {node} finishes: check the network between sparktui and {node}, and whether the box hangs.",
        ),
        Metric(
            "vllm_down",
            "instance",
            "vLLM down",
            "condition",
            _shown_flag,
            "Check {hint} on {node}; restart it with `sparktui action {node} restart --instance {subject}`.",
        ),
        Metric(
            "service_down",
            "service",
            "service down",
            "condition",
            _shown_flag,
            "Check the {subject} service on {node} ({hint}) and restart it.",
        ),
        Metric(
            "metrics_unreadable",
            "instance",
            "/metrics unreadable",
            "condition",
            _shown_flag,
            "{subject} on {node} answers /metrics with something sparktui cannot use (the evidence says what): "
            "check what serves that port, a proxy in front of it, or the vLLM version.",
        ),
        Metric(
            "launch_not_ready",
            "instance",
            "would not start now",
            "condition",
            _shown_flag,
            "Free memory on {node} before vLLM starts: `sparktui action {node} drop-caches` (d), or kill stale "
            "workers (`kill-workers`).",
        ),
        Metric(
            "kv_usage",
            "instance",
            "KV-cache usage",
            "fraction 0–1",
            lambda v: fmt_pct(v, 1),
            "The KV cache is nearly full: spread the load to another node, or lower --max-num-seqs or --max-model-len.",
        ),
        Metric(
            "waiting",
            "instance",
            "waiting requests",
            "requests",
            _shown_count,
            "Requests queue for a slot: spread the load to another node or lower the clients' concurrency.",
        ),
        Metric(
            "ttft_p90_s",
            "instance",
            "TTFT p90",
            "seconds",
            fmt_seconds,
            "Prefill is slow or queued: look at waiting requests and KV usage, and spread the load.",
        ),
        Metric(
            "acceptance_length",
            "instance",
            "mean acceptance length",
            "tokens per step",
            lambda v: f"{v:.2f} tokens",
            "Speculative decoding accepts fewer tokens than it should: check the drafter and the workload; a "
            "smaller num_speculative_tokens may decode faster.",
        ),
        Metric(
            "position_acceptance",
            "instance",
            "acceptance of draft position",
            "fraction of drafts 0–1",
            lambda v: fmt_pct(v, 1),
            "Draft position {position} is rarely accepted: num_speculative_tokens = {position} may decode faster.",
        ),
        Metric(
            "mem_available_gib",
            "node",
            "MemAvailable",
            "GiB",
            lambda v: f"{v:.1f} GiB",
            "Free memory on {node}: drop the page cache (`sparktui action {node} drop-caches`), stop stray "
            "processes, or lower gpu_memory_utilization.",
        ),
        Metric(
            "psi_some_avg10",
            "node",
            "memory pressure (PSI some, 10 s)",
            "percent",
            lambda v: f"{v:.1f}%",
            "{node} stalls on memory reclaim: drop the page cache or reduce what uses memory.",
        ),
        Metric(
            "gpu_temp_c",
            "node",
            "GPU temperature",
            "°C",
            lambda v: f"{v:.0f} °C",
            "Check {node}'s airflow and fans: a hot GB10 throttles.",
        ),
    )
}


def _flag(value: bool) -> float:
    return 1.0 if value else 0.0


def _reasons(reasons: Iterable[str]) -> tuple[str, ...]:
    return tuple(reasons)[:MAX_REASONS]


def _in_the_dark(view: NodeView) -> bool:
    """Nothing current is known of the node: never polled, or no poll finished for a while."""
    return view.polled_wall is None or view.status.state is State.STALE


def _node_sample(metric: str, view: NodeView) -> Sample:
    state = view.status.state
    if metric == "node_down":
        if _in_the_dark(view):
            return _UNKNOWN
        return Sample(_flag(state is State.DOWN), evidence=_reasons(view.status.reasons))
    if metric == "node_stale":
        if view.polled_wall is None:  # never polled (``age_s`` is None too while nothing answered 2xx)
            return _UNKNOWN
        return Sample(_flag(state is State.STALE), evidence=_reasons(view.status.reasons))
    # Host numbers: only while the node answers and its host state is fresh.
    if _in_the_dark(view) or view.host_problem is not None:
        return _UNKNOWN
    if metric == "mem_available_gib":
        memory = view.host_memory
        if memory is None or memory.mem_available is None:
            return _UNKNOWN
        return Sample(memory.mem_available / GIB)
    if metric == "psi_some_avg10":
        pressure = view.pressure
        return _UNKNOWN if pressure is None or pressure.some_avg10 is None else Sample(pressure.some_avg10)
    if metric == "gpu_temp_c":
        gpu = view.gpu
        return _UNKNOWN if gpu is None or gpu.temperature_c is None else Sample(gpu.temperature_c)
    raise KeyError(metric)


def _instance_sample(metric: str, view: NodeView, inst: InstanceView, rule: AlertRuleSpec) -> Sample:
    if _in_the_dark(view) or inst.status.state is State.UNKNOWN:
        return _UNKNOWN
    if metric == "vllm_down":
        return Sample(_flag(inst.status.state is State.DOWN), evidence=_reasons(inst.status.reasons))
    serving = inst.status.state in SERVING
    if metric == "metrics_unreadable":
        if not serving:
            return _UNKNOWN  # down: its own alert says so; /metrics was not asked
        problem = inst.metrics_problem
        return Sample(_flag(problem is not None), evidence=(problem,) if problem else ())
    if metric == "launch_not_ready":
        if serving:
            return Sample(0.0)
        launch = inst.launch
        if launch is None or launch.ready is None:
            return _UNKNOWN
        return Sample(_flag(launch.ready is False), evidence=(launch.reason,))
    if not serving or not inst.engine_stats:
        return _UNKNOWN  # the last numbers of an engine that is not serving say nothing now
    if metric == "kv_usage":
        if inst.kv_usage is None:
            return _UNKNOWN
        kv = inst.kv  # data parallel: the busiest engine is the one judged, named as such
        busiest = (f"KV cache {kv_line(kv)}",) if kv is not None and kv.engines > 1 else ()
        return Sample(inst.kv_usage, evidence=busiest)
    if metric == "waiting":
        return _UNKNOWN if inst.waiting is None else Sample(inst.waiting)
    rates = inst.rates
    if rates is None:
        return _UNKNOWN  # one scrape so far: no window yet
    if metric == "ttft_p90_s":
        ttft = rates.latency.get("ttft")
        return Sample(ttft.p90 if ttft is not None and ttft.count else None)
    spec = rates.spec_decode
    if metric == "acceptance_length":
        return Sample(spec.mean_acceptance_length if spec is not None else None)
    if metric == "position_acceptance":
        position = rule.position if rule.position is not None else 0
        if spec is None or position >= len(spec.per_position):
            return Sample(None)
        return Sample(spec.per_position[position])
    raise KeyError(metric)


def _service_sample(view: NodeView, service: ServiceView) -> Sample:
    if _in_the_dark(view) or service.status.state is State.UNKNOWN:
        return _UNKNOWN
    return Sample(_flag(service.status.state is State.DOWN), evidence=_reasons(service.status.reasons))


# --- judging a rule -------------------------------------------------------------------------------------


def _severity(name: str | None, default: Severity = Severity.WARN) -> Severity:
    return Severity(name) if name is not None else default


def _log_hint(node: NodeSpec | None, instance: str | None) -> str:
    """Where the operator reads what went wrong: the unit's journal or the container's log."""
    if node is None:
        return "its vLLM log"
    for vllm in node.vllm:
        if instance is not None and vllm.name != instance:
            continue
        if vllm.unit is not None:
            return f"`journalctl -u {vllm.unit}`"
        if vllm.container is not None:
            return f"`docker logs {vllm.container}`"
    return "its vLLM log"


def _fix(rule: AlertRuleSpec, metric: Metric, node: NodeSpec | None, node_name: str, subject: str | None) -> str:
    if rule.fix is not None:
        return rule.fix
    hint = _log_hint(node, subject if metric.scope == "instance" else None)
    if metric.scope == "service" and node is not None:
        hint = next((s.url for s in node.services if s.name == subject), "its health check")
    return metric.fix.format(node=node_name, subject=subject or "", hint=hint, position=rule.position)


def _threshold_text(rule: AlertRuleSpec, metric: Metric) -> str:
    if rule.above is not None:
        text = f"fires at or above {metric.show(rule.above)}"
        if rule.resolve_at is not None:
            text += f", resolves at or below {metric.show(rule.resolve_at)}"
        return text
    assert rule.below is not None
    text = f"fires at or below {metric.show(rule.below)}"
    if rule.resolve_at is not None:
        text += f", resolves at or above {metric.show(rule.resolve_at)}"
    return text


def _judge(rule: AlertRuleSpec, sample: Sample) -> tuple[bool | None, bool]:
    """(firing, clear) for a sample: firing None when it cannot tell."""
    if not sample.known:
        return None, False
    value = sample.value
    if value is None:
        return False, True
    if rule.metric in CONDITION_METRICS:
        return value >= 0.5, value < 0.5
    if rule.above is not None:
        resolve = rule.resolve_at
        return value >= rule.above, (value <= resolve) if resolve is not None else value < rule.above
    assert rule.below is not None
    resolve = rule.resolve_at
    return value <= rule.below, (value >= resolve) if resolve is not None else value > rule.below


def _condition_summary(metric: str, where: str, firing: bool, node: NodeView) -> str:
    if metric == "node_down":
        if firing:
            return f"{where} is down"
        state = node.status.state
        return f"{where} is {state.value} again" if state in SERVING else f"{where} is no longer down ({state.value})"
    if metric == "node_stale":
        return f"no poll of {where} finished in time" if firing else f"{where} answers polls again"
    if metric in ("vllm_down", "service_down"):
        return f"{where} is down" if firing else f"{where} is no longer down"
    if metric == "metrics_unreadable":
        return f"{where} /metrics cannot be read" if firing else f"{where} /metrics is read again"
    return f"{where} would not start now: not enough free memory" if firing else f"{where} could start again"


def _metric_reading(
    rule: AlertRuleSpec, metric: Metric, view: NodeView, sample: Sample, subject: str | None, *, node: NodeSpec | None
) -> Reading:
    firing, clear = _judge(rule, sample)
    where = f"{view.name}/{subject}" if subject else view.name
    assert rule.metric is not None
    if rule.metric in CONDITION_METRICS:
        summary = _condition_summary(rule.metric, where, not clear, view)
        evidence = sample.evidence
    else:
        label = metric.label + (f" {rule.position}" if rule.metric == "position_acceptance" else "")
        shown = metric.show(sample.value) if sample.value is not None else "– (nothing to measure)"
        if not sample.known:
            summary = f"{label} on {where}: not known now"
        elif clear:
            summary = f"{label} back to {shown} on {where}"
        else:
            summary = f"{label} {shown} on {where}"
        evidence = (f"{label} {shown} ({_threshold_text(rule, metric)})", *sample.evidence)
    default = Severity.CRIT if rule.metric == "node_down" else Severity.WARN
    return Reading(
        key=AlertKey(rule.name, view.name, subject),
        name=rule.name,
        node=view.name,
        instance=subject,
        severity=_severity(rule.severity, default),
        firing=firing,
        clear=clear,
        value=sample.value,
        summary=summary,
        evidence=evidence,
        fix=_fix(rule, metric, node, view.name, subject),
    )


def _finding_readings(rule: AlertRuleSpec, view: NodeView, findings: Sequence[Finding]) -> Iterable[Reading]:
    floor = _severity(rule.finding_severity) if rule.finding_severity is not None else None
    for finding in findings:
        if not finding.active:
            continue
        if rule.finding is not None and finding.id != rule.finding:
            continue
        if floor is not None and finding.severity.rank < floor.rank:
            continue
        subject = finding.id if finding.instance is None else f"{finding.id}/{finding.instance}"
        where = view.name if finding.instance is None else f"{view.name}/{finding.instance}"
        yield Reading(
            key=AlertKey(rule.name, view.name, subject),
            name=finding.id,
            node=view.name,
            instance=finding.instance,
            severity=_severity(rule.severity, finding.severity),
            firing=True,
            clear=False,
            value=None,
            summary=f"{finding.title} ({where})",
            evidence=finding.evidence,
            fix=rule.fix or finding.fix,
        )


def read_rules(
    rules: Sequence[AlertRuleSpec],
    views: Sequence[NodeView],
    findings: Mapping[str, Sequence[Finding]],
    fleet: FleetSpec | None = None,
) -> list[Reading]:
    """Every rule judged once against the views and each node's active findings."""
    out: list[Reading] = []
    for rule in rules:
        for view in views:
            if rule.nodes and view.name not in rule.nodes:
                continue
            node = fleet.node(view.name) if fleet is not None else None
            if rule.metric is None:
                out.extend(_finding_readings(rule, view, findings.get(view.name, ())))
                continue
            metric = METRICS[rule.metric]
            if metric.scope == "node":
                out.append(_metric_reading(rule, metric, view, _node_sample(metric.name, view), None, node=node))
            elif metric.scope == "service":
                for service in view.services:
                    sample = _service_sample(view, service)
                    out.append(_metric_reading(rule, metric, view, sample, service.name, node=node))
            else:
                for inst in view.instances:
                    if inst.url is None and metric.name != "launch_not_ready":
                        continue  # a tensor-parallel worker: its numbers are its head's
                    sample = _instance_sample(metric.name, view, inst, rule)
                    out.append(_metric_reading(rule, metric, view, sample, inst.name, node=node))
    return out


# --- default rules ------------------------------------------------------------------------------------


def default_rules(thresholds: Thresholds | None = None) -> tuple[AlertRuleSpec, ...]:
    """The rules used when the config has no ``[[alerts]]``: the dashboard's thresholds, held long
    enough to matter, with room to come back before resolving."""
    t = thresholds if thresholds is not None else Thresholds()
    return (
        AlertRuleSpec(name="node-down", metric="node_down", for_s=30.0, severity="crit"),
        AlertRuleSpec(name="node-stale", metric="node_stale", for_s=60.0),
        AlertRuleSpec(name="service-down", metric="service_down", for_s=60.0),
        AlertRuleSpec(name="metrics-unreadable", metric="metrics_unreadable", for_s=60.0),
        AlertRuleSpec(
            name="kv-cache-full",
            metric="kv_usage",
            above=t.kv_usage_warn,
            resolve_at=max(0.0, t.kv_usage_warn - 0.10),
            for_s=300.0,
        ),
        AlertRuleSpec(
            name="requests-waiting",
            metric="waiting",
            above=float(t.waiting_warn),
            resolve_at=t.waiting_warn / 2 if t.waiting_warn > 0 else None,
            for_s=120.0,
        ),
        AlertRuleSpec(
            name="ttft-slow",
            metric="ttft_p90_s",
            above=t.ttft_p90_warn_s,
            resolve_at=0.7 * t.ttft_p90_warn_s,
            for_s=120.0,
        ),
        AlertRuleSpec(
            name="memory-low",
            metric="mem_available_gib",
            below=t.mem_available_warn_gib,
            resolve_at=t.mem_available_warn_gib + 2.0,
            for_s=60.0,
        ),
        AlertRuleSpec(
            name="memory-critical",
            metric="mem_available_gib",
            below=t.mem_available_crit_gib,
            resolve_at=t.mem_available_crit_gib + 2.0,
            for_s=10.0,
            severity="crit",
        ),
        AlertRuleSpec(name="memory-pressure", metric="psi_some_avg10", above=25.0, resolve_at=5.0, for_s=60.0),
        AlertRuleSpec(
            name="gpu-hot", metric="gpu_temp_c", above=t.gpu_temp_warn_c, resolve_at=t.gpu_temp_warn_c - 5.0, for_s=60.0
        ),
        AlertRuleSpec(name="findings", finding_severity="warn"),
    )


def alert_rules(fleet: FleetSpec) -> tuple[AlertRuleSpec, ...]:
    """The fleet's rules: its ``[[alerts]]``, or the defaults when it has none (``alerts = []``: none)."""
    return fleet.alerts if fleet.alerts is not None else default_rules(fleet.thresholds)


# --- the engine ---------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Track:
    rule: AlertRuleSpec
    pending_since: float | None = None
    clearing_since: float | None = None
    alert: Alert | None = None  # set while firing
    notified: bool = False  # its firing event went out unsilenced
    last: Reading | None = None


@dataclass(slots=True)
class _Evaluation:
    now: float
    wall: float | None
    events: list[AlertEvent] = field(default_factory=list)


def _order(alert: Alert) -> tuple[int, float, str]:
    return (-alert.severity.rank, alert.fired_at, str(alert.key))


def _firing_order(status: RuleStatus) -> tuple[int, int, float, str]:
    assert status.alert is not None
    return (RULE_STATE_ORDER.index(status.state), *_order(status.alert))


def held_text(seconds: float) -> str:
    """A rule's hold time as the operator reads it: ``30 s``, ``5 min``, ``1 h 30 min``."""
    whole = round(seconds)
    if whole < 120:
        return f"{whole} s"
    minutes = round(whole / 60)
    if minutes < 120:
        return f"{minutes} min"
    hours, rest = divmod(minutes, 60)
    return f"{hours} h" + (f" {rest} min" if rest else "")


def status_timing(status: RuleStatus, now: float) -> str:
    """How long a rule has stood where it is: ``pending 45 s of 2 min``, ``firing 3 min``,
    ``silenced 58 min more``; empty for a quiet rule."""
    if status.state is RuleState.PENDING and status.since is not None:
        return f"pending {held_text(now - status.since)} of {held_text(status.rule.for_s)}"
    if status.state is RuleState.SILENCED and status.silenced_until is not None:
        return f"silenced {held_text(status.silenced_until - now)} more"
    if status.alert is not None:
        return f"firing {held_text(now - status.alert.fired_at)}"
    return ""


def rule_condition(rule: AlertRuleSpec) -> str:
    """What a rule watches, in one short line: ``KV-cache usage ≥ 90.0% for 5 min``."""
    if rule.metric is None:
        what = f"finding {rule.finding}" if rule.finding is not None else "any finding"
        if rule.finding_severity is not None:
            what += f" at {rule.finding_severity} or worse"
    else:
        metric = METRICS[rule.metric]
        what = metric.label + (f" {rule.position}" if rule.metric == "position_acceptance" else "")
        if rule.above is not None:
            what += f" ≥ {metric.show(rule.above)}"
        elif rule.below is not None:
            what += f" ≤ {metric.show(rule.below)}"
    if rule.nodes:
        what += f" on {', '.join(rule.nodes)}"
    return what + (f" for {held_text(rule.for_s)}" if rule.for_s else "")


class AlertEngine:
    """Every rule over the whole fleet; call ``evaluate`` once per tick."""

    def __init__(
        self,
        rules: Sequence[AlertRuleSpec],
        fleet: FleetSpec | None = None,
        *,
        history_limit: int = DEFAULT_HISTORY,
    ) -> None:
        self.rules = tuple(rules)
        self.fleet = fleet
        self._by_name = {rule.name: rule for rule in self.rules}
        self._tracks: dict[AlertKey, _Track] = {}
        self._history: deque[Alert] = deque(maxlen=history_limit)
        self._silences: dict[AlertKey, float] = {}

    @classmethod
    def for_fleet(cls, fleet: FleetSpec) -> AlertEngine:
        return cls(alert_rules(fleet), fleet)

    # -- queries --

    def active(self) -> tuple[Alert, ...]:
        """The firing alerts, worst first (silenced ones included: see ``silenced_until``)."""
        return tuple(sorted((t.alert for t in self._tracks.values() if t.alert is not None), key=_order))

    def history(self) -> tuple[Alert, ...]:
        """Resolved alerts, oldest first; at most ``history_limit``."""
        return tuple(self._history)

    def pending(self) -> dict[AlertKey, float]:
        """Alerts whose condition holds but not yet for ``for_s``: key -> since when."""
        return {
            key: t.pending_since for key, t in self._tracks.items() if t.alert is None and t.pending_since is not None
        }

    def rule_states(self, now: float) -> tuple[RuleStatus, ...]:
        """Every rule with where it stands at ``now``: each subject firing (worst first), silenced or
        pending (the longest pending first), then the rules quiet everywhere, in the config's order."""
        firing: list[RuleStatus] = []
        pending: list[RuleStatus] = []
        busy: set[str] = set()
        for key, track in self._tracks.items():
            alert = track.alert
            if alert is not None:
                until = self.silenced_until(key, now)
                state = RuleState.FIRING if until is None else RuleState.SILENCED
                firing.append(
                    RuleStatus(
                        track.rule, state, key, alert.severity, alert.since, alert.summary, alert, silenced_until=until
                    )
                )
            elif track.pending_since is not None and track.last is not None:
                reading = track.last
                until = self.silenced_until(key, now)  # silenced ahead: it will fire without a message
                pending.append(
                    RuleStatus(
                        track.rule,
                        RuleState.PENDING,
                        key,
                        reading.severity,
                        track.pending_since,
                        reading.summary,
                        silenced_until=until,
                    )
                )
            else:
                continue
            busy.add(key.rule)
        firing.sort(key=_firing_order)
        pending.sort(key=lambda s: (s.since or 0.0, str(s.key)))
        quiet = [RuleStatus(rule, RuleState.OK) for rule in self.rules if rule.name not in busy]
        return (*firing, *pending, *quiet)

    # -- silences --

    def silence(self, key: AlertKey, until: float) -> None:
        """Send nothing about ``key`` until ``until`` (on the evaluation clock)."""
        self._silences[key] = until

    def unsilence(self, key: AlertKey) -> None:
        self._silences.pop(key, None)

    def silenced_until(self, key: AlertKey, now: float) -> float | None:
        until = self._silences.get(key)
        return until if until is not None and until > now else None

    # -- evaluation --

    def evaluate(
        self,
        views: Sequence[NodeView],
        findings: Mapping[str, Sequence[Finding]],
        now: float,
        wall: float | None = None,
    ) -> tuple[AlertEvent, ...]:
        """Judge every rule; returns what fired and what resolved at this tick."""
        run = _Evaluation(now, wall)
        seen: set[AlertKey] = set()
        for reading in read_rules(self.rules, views, findings, self.fleet):
            seen.add(reading.key)
            track = self._tracks.get(reading.key)
            if track is None:
                if not reading.firing:
                    continue
                track = self._tracks[reading.key] = _Track(self._by_name[reading.key.rule])
            self._step(track, reading, run)
        for key in [k for k in self._tracks if k not in seen]:
            # Not read at all now (a finding that cleared): its condition no longer holds.
            track = self._tracks[key]
            if track.last is not None:
                gone = replace(track.last, firing=False, clear=True, summary=f"{track.last.summary}: cleared")
                self._step(track, gone, run)
        self._send_after_silence(run)
        for key in [k for k, t in self._tracks.items() if t.alert is None and t.pending_since is None]:
            del self._tracks[key]
        for key in [k for k, until in self._silences.items() if until <= now]:
            del self._silences[key]
        return tuple(run.events)

    def _step(self, track: _Track, reading: Reading, run: _Evaluation) -> None:
        if reading.firing is None:
            return  # cannot tell: nothing changes
        track.last = reading
        now = run.now
        alert = track.alert
        if alert is None:
            if not reading.firing:
                track.pending_since = None
                return
            if track.pending_since is None:
                track.pending_since = now
            if now - track.pending_since >= track.rule.for_s:
                self._fire(track, reading, run)
            return
        if not reading.clear:
            track.clearing_since = None
            # Still firing: keep the numbers current for the screen; nothing is sent.
            track.alert = replace(alert, summary=reading.summary, evidence=reading.evidence, value=reading.value)
            return
        if track.clearing_since is None:
            track.clearing_since = now
        if now - track.clearing_since >= track.rule.clear_after_s:
            self._resolve(track, alert, reading, run)

    def _fire(self, track: _Track, reading: Reading, run: _Evaluation) -> None:
        assert track.pending_since is not None
        alert = Alert(
            key=reading.key,
            name=reading.name,
            node=reading.node,
            instance=reading.instance,
            severity=reading.severity,
            summary=reading.summary,
            evidence=reading.evidence,
            fix=reading.fix,
            value=reading.value,
            since=track.pending_since,
            fired_at=run.now,
            fired_wall=run.wall,
        )
        track.alert = alert
        track.clearing_since = None
        silenced = self.silenced_until(alert.key, run.now) is not None
        track.notified = not silenced
        run.events.append(
            AlertEvent(AlertState.FIRING, alert, run.now, run.wall, alert.summary, alert.evidence, silenced)
        )

    def _resolve(self, track: _Track, alert: Alert, reading: Reading, run: _Evaluation) -> None:
        resolved = replace(alert, resolved_at=run.now, resolved_wall=run.wall)
        self._history.append(resolved)
        run.events.append(
            AlertEvent(
                AlertState.RESOLVED,
                resolved,
                run.now,
                run.wall,
                reading.summary,
                reading.evidence,
                silenced=not track.notified,
            )
        )
        track.alert = None
        track.pending_since = None
        track.clearing_since = None
        track.notified = False

    def _send_after_silence(self, run: _Evaluation) -> None:
        """An alert that fired while silenced and still fires when the silence ends is sent then."""
        for track in self._tracks.values():
            alert = track.alert
            if alert is None or track.notified or self.silenced_until(alert.key, run.now) is not None:
                continue
            track.notified = True
            run.events.append(AlertEvent(AlertState.FIRING, alert, run.now, run.wall, alert.summary, alert.evidence))


def firing_now(
    rules: Sequence[AlertRuleSpec],
    views: Sequence[NodeView],
    findings: Mapping[str, Sequence[Finding]],
    fleet: FleetSpec | None = None,
) -> list[Reading]:
    """What would fire if the conditions held long enough (one evaluation, ``for_s`` not applied):
    ``sparktui check --alerts``. Worst first."""
    found = [r for r in read_rules(rules, views, findings, fleet) if r.firing]
    return sorted(found, key=lambda r: (-r.severity.rank, r.node, str(r.key)))
