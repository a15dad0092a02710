"""Alert rules (pure): thresholds, minimum duration, hysteresis, deduplication, findings, silences,
the default rules and the config schema of ``[[alerts]]``.

Views come from the real model, as in test_diagnosis.py: a ``FleetState`` fed with vLLM 0.33 scrapes
(tests/data/vllm-0.33) and host frames; ``t`` is the poll clock in seconds, the wall clock ``WALL0 + t``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import get_args

import pytest

from sparktui.config import ConfigError, parse_config
from sparktui.diagnosis.alerts import (
    METRICS,
    AlertEngine,
    AlertEvent,
    AlertKey,
    AlertState,
    RuleState,
    alert_rules,
    default_rules,
    firing_now,
    held_text,
    read_rules,
    rule_condition,
    status_timing,
)
from sparktui.diagnosis.catalogue import Severity
from sparktui.diagnosis.engine import Finding
from sparktui.engines import readings
from sparktui.model.exporters import ExporterKind, GpuReading
from sparktui.model.fleet import FleetState, NodeView
from sparktui.model.memory import GIB, LaunchReadiness, MemoryPressure
from sparktui.model.observations import HttpResult
from sparktui.model.specs import CONDITION_METRICS, AlertMetric, AlertRuleSpec, Thresholds
from sparktui.model.status import State, Status
from tests.unit.test_diagnosis import MTP2, MTP3, SERVING, WALL0, Rig, edit, ok, refused, serving_sample

SRC = "fleet.toml"
KV = "vllm:kv_cache_usage_perc"
UNIT_NODE = """
poll_interval_s = 1.0
[[nodes]]
name = "spark1"
host = "10.0.0.1"
[[nodes.vllm]]
name = "qwen36"
port = 8001
unit = "vllm-qwen36.service"
gpu_memory_utilization = 0.55
"""
ASR = """
[[nodes.services]]
name = "parakeet"
kind = "asr"
port = 8765
"""


class AlertRig:
    """A real FleetState and diagnosis engine (test_diagnosis.Rig) and an AlertEngine on its fleet."""

    def __init__(self, rules: str, config: str = SERVING) -> None:
        self.rig = Rig(config + rules)
        self.spec = self.rig.fleet.spec
        self.engine = AlertEngine.for_fleet(self.spec)
        self.events: list[AlertEvent] = []

    def tick(
        self, t: float, health: HttpResult | None, metrics: str | None = None, *, host: bool = True
    ) -> tuple[AlertEvent, ...]:
        findings = self.rig.step(t, health, metrics, serving_sample(41 + int(t)) if host else None)
        return self.evaluate(t, {self.rig.name: findings})

    def evaluate(self, t: float, findings: Mapping[str, Sequence[Finding]] | None = None) -> tuple[AlertEvent, ...]:
        view = self.rig.view(t)
        events = self.engine.evaluate((view,), findings or {}, t, WALL0 + t)
        self.events.extend(events)
        return events

    def log(self) -> list[tuple[float, str, str]]:
        return [(e.at, e.state.value, e.alert.name) for e in self.events]


def kv(index: int, value: float) -> str:
    return edit(MTP2[index], {KV: value})


# --- the schema and the defaults ------------------------------------------------------------------


def test_every_metric_of_the_schema_has_a_reader_and_the_conditions_are_marked() -> None:
    assert set(METRICS) == set(get_args(AlertMetric))
    assert {name for name, m in METRICS.items() if m.unit == "condition"} == CONDITION_METRICS


def test_default_rules_use_the_dashboard_thresholds() -> None:
    rules = {r.name: r for r in default_rules(Thresholds(kv_usage_warn=0.8, gpu_temp_warn_c=80.0))}
    assert list(rules) == [
        "node-down",
        "node-stale",
        "service-down",
        "metrics-unreadable",
        "kv-cache-full",
        "requests-waiting",
        "ttft-slow",
        "memory-low",
        "memory-critical",
        "memory-pressure",
        "gpu-hot",
        "findings",
    ]
    assert rules["kv-cache-full"].above == 0.8
    assert rules["kv-cache-full"].resolve_at == pytest.approx(0.7)
    assert (rules["gpu-hot"].above, rules["gpu-hot"].resolve_at) == (80.0, 75.0)
    assert (rules["memory-critical"].below, rules["memory-critical"].severity) == (4.0, "crit")
    assert rules["node-down"].severity == "crit" and rules["node-down"].for_s == 30.0
    assert rules["findings"].finding_severity == "warn"


def test_default_rules_stay_valid_at_extreme_thresholds() -> None:
    extreme = Thresholds(
        kv_usage_warn=0.05, waiting_warn=0, ttft_p90_warn_s=0.01, mem_available_warn_gib=0.5, mem_available_crit_gib=0.0
    )
    rules = {r.name: r for r in default_rules(extreme)}
    assert rules["requests-waiting"].resolve_at is None
    assert rules["kv-cache-full"].resolve_at == 0.0


def test_alert_rules_are_the_defaults_only_without_alerts_in_the_config() -> None:
    node = '[[nodes]]\nname = "spark1"\nhost = "10.0.0.1"\n'
    assert alert_rules(parse_config(node, source=SRC, env={})) == default_rules()
    assert alert_rules(parse_config("alerts = []\n" + node, source=SRC, env={})) == ()
    fleet = parse_config(node + '[[alerts]]\nname = "down"\nmetric = "node_down"\n', source=SRC, env={})
    assert [r.name for r in alert_rules(fleet)] == ["down"]


ALERT_ERRORS: list[tuple[str, str]] = [
    ('name = "x"\n', "alerts[0].metric: missing: give metric, finding or finding_severity"),
    (
        'name = "x"\nmetric = "node_down"\nfinding = "engine-dead"\n',
        "alerts[0].finding: give one of metric, finding or finding_severity, not metric and finding",
    ),
    (
        'name = "x"\nmetric = "kv_usage"\n',
        "alerts[0].above: missing: metric 'kv_usage' is a number; give above = N or below = N",
    ),
    ('name = "x"\nmetric = "kv_usage"\nabove = 0.9\nbelow = 0.1\n', "alerts[0].below: give above or below, not both"),
    (
        'name = "x"\nmetric = "node_down"\nabove = 1.0\n',
        "alerts[0].above: not used: metric 'node_down' is a condition, with no threshold; remove it",
    ),
    (
        'name = "x"\nmetric = "kv_usage"\nabove = 0.9\nresolve_at = 0.95\n',
        "alerts[0].resolve_at: must be below above (0.9) (got 0.95)",
    ),
    (
        'name = "x"\nmetric = "mem_available_gib"\nbelow = 8.0\nresolve_at = 6.0\n',
        "alerts[0].resolve_at: must be above below (8) (got 6)",
    ),
    (
        'name = "x"\nmetric = "position_acceptance"\nbelow = 0.2\n',
        "alerts[0].position: missing: the draft position to watch, from 0",
    ),
    (
        'name = "x"\nmetric = "kv_usage"\nabove = 0.9\nposition = 1\n',
        'alerts[0].position: only used with metric = "position_acceptance"',
    ),
    ('name = "x"\nmetric = "node_down"\nfor_s = -1.0\n', "alerts[0].for_s: must be >= 0 (got -1)"),
    ('name = "x"\nmetric = "node_dead"\n', "alerts[0].metric: must be one of "),
    ('name = "x"\nmetric = "node_down"\nseverity = "page"\n', "alerts[0].severity: must be one of 'info', 'warn' or"),
    ('name = "x"\nfinding = "Engine Dead"\n', "alerts[0].finding: must be a rule id of the failure catalogue"),
    (
        'name = "x"\nfinding = "engine-wedgd"\n',
        "alerts[0].finding: the failure catalogue has no rule 'engine-wedgd' (did you mean 'engine-wedged'?)",
    ),
    (
        'name = "x"\nmetric = "node_down"\nnodes = ["spark9"]\n',
        "alerts[0].nodes[0]: no node named 'spark9' in the fleet",
    ),
    ('name = "x"\nmetric = "node_down"\nfix = "two\\nlines"\n', "alerts[0].fix: must be one line of text"),
    ('name = "x"\nmetric = "node_down"\ntreshold = 1\n', "alerts[0].treshold: unknown key"),
]


@pytest.mark.parametrize(
    ("body", "expected"), ALERT_ERRORS, ids=[e[1].split(":")[0] + e[0][10:30] for e in ALERT_ERRORS]
)
def test_each_rule_error_is_one_line_naming_the_key(body: str, expected: str) -> None:
    text = '[[nodes]]\nname = "spark1"\nhost = "10.0.0.1"\n[[alerts]]\n' + body
    with pytest.raises(ConfigError) as caught:
        parse_config(text, source=SRC, env={})
    (error,) = caught.value.errors
    assert error.startswith(f"{SRC}: {expected}"), error
    assert "\n" not in error


def test_alert_names_must_be_unique() -> None:
    text = (
        '[[nodes]]\nname = "spark1"\nhost = "10.0.0.1"\n'
        '[[alerts]]\nname = "down"\nmetric = "node_down"\n[[alerts]]\nname = "down"\nmetric = "vllm_down"\n'
    )
    with pytest.raises(ConfigError) as caught:
        parse_config(text, source=SRC, env={})
    assert caught.value.errors == [f"{SRC}: alerts[1].name: same as alerts[0] ('down'); alert names must be unique"]


# --- a number against a threshold: for_s, deduplication, hysteresis --------------------------------

KV_RULE = """
[[alerts]]
name = "kv-full"
metric = "kv_usage"
above = 0.8
resolve_at = 0.5
for_s = 10.0
clear_after_s = 5.0
"""


def test_a_number_fires_once_after_for_s_and_is_not_repeated_while_it_fires() -> None:
    rig = AlertRig(KV_RULE)
    for i in range(10):
        assert rig.tick(float(i), ok(), kv(i, 0.95)) == (), f"fired at {i} s, before for_s"
    (event,) = rig.tick(10.0, ok(), kv(10, 0.95))
    assert event.state is AlertState.FIRING and not event.silenced
    alert = event.alert
    assert (alert.name, alert.node, alert.instance, alert.severity) == ("kv-full", "spark1", "gptoss", Severity.WARN)
    assert (alert.since, alert.fired_at, alert.fired_wall) == (0.0, 10.0, WALL0 + 10.0)
    assert event.held_s == 10.0
    assert event.summary == "KV-cache usage 95.0% on spark1/gptoss"
    assert event.evidence == ("KV-cache usage 95.0% (fires at or above 80.0%, resolves at or below 50.0%)",)
    assert alert.fix.startswith("The KV cache is nearly full")
    for i in range(11, 20):
        assert rig.tick(float(i), ok(), kv(i, 0.97)) == ()
    (active,) = rig.engine.active()
    assert active.value == 0.97 and active.summary == "KV-cache usage 97.0% on spark1/gptoss"  # current, not sent


def test_hysteresis_keeps_it_firing_until_resolve_at_then_it_resolves_once_after_clear_after_s() -> None:
    rig = AlertRig(KV_RULE)
    for i in range(11):
        rig.tick(float(i), ok(), kv(i, 0.95))
    for i in range(11, 16):
        assert rig.tick(float(i), ok(), kv(i, 0.6)) == (), "under the threshold but above resolve_at: still firing"
    assert [a.name for a in rig.engine.active()] == ["kv-full"]
    for i in range(16, 21):
        assert rig.tick(float(i), ok(), kv(i, 0.3)) == (), "clear for less than clear_after_s"
    (event,) = rig.tick(21.0, ok(), kv(21, 0.3))
    assert event.state is AlertState.RESOLVED
    assert event.summary == "KV-cache usage back to 30.0% on spark1/gptoss"
    assert event.held_s == 11.0 and event.alert.resolved_at == 21.0
    for i in range(22, 26):
        assert rig.tick(float(i), ok(), kv(i, 0.3)) == ()
    assert rig.log() == [(10.0, "firing", "kv-full"), (21.0, "resolved", "kv-full")]
    assert rig.engine.active() == () and [a.name for a in rig.engine.history()] == ["kv-full"]


def test_a_condition_that_breaks_before_for_s_starts_over() -> None:
    rig = AlertRig(KV_RULE)
    for i in range(8):
        rig.tick(float(i), ok(), kv(i, 0.9))
    rig.tick(8.0, ok(), kv(8, 0.7))  # under the threshold once: pending starts over
    for i in range(9, 19):
        assert rig.tick(float(i), ok(), kv(i, 0.9)) == ()
    (event,) = rig.tick(19.0, ok(), kv(19, 0.9))
    assert event.alert.since == 9.0


def test_an_evaluation_that_cannot_tell_changes_nothing() -> None:
    rig = AlertRig(KV_RULE)
    for i in range(11):
        rig.tick(float(i), ok(), kv(i, 0.95))
    # The instance stops answering: its last KV number says nothing now, so the alert neither
    # resolves nor fires again.
    for i in range(11, 15):
        assert rig.tick(float(i), refused(), host=False) == ()
    assert [a.name for a in rig.engine.active()] == ["kv-full"]
    for i in range(15, 18):
        assert rig.tick(float(i), ok(), kv(i, 0.95)) == ()
    assert rig.log() == [(10.0, "firing", "kv-full")]


def test_below_rules_fire_on_low_numbers() -> None:
    rule = '[[alerts]]\nname = "mem"\nmetric = "mem_available_gib"\nbelow = 70.0\nresolve_at = 80.0\n'
    rig = AlertRig(rule)
    (event,) = rig.tick(0.0, ok(), MTP2[0])
    assert event.summary == "MemAvailable 61.9 GiB on spark1"
    assert event.alert.value == pytest.approx(61.944, abs=1e-3)
    assert event.evidence == ("MemAvailable 61.9 GiB (fires at or below 70.0 GiB, resolves at or above 80.0 GiB)",)
    assert "sparktui action spark1 drop-caches" in event.alert.fix


# --- conditions ------------------------------------------------------------------------------------


def test_node_down_fires_with_the_reasons_and_a_fix_naming_the_unit() -> None:
    rules = '[[alerts]]\nname = "node-down"\nmetric = "node_down"\nfor_s = 3.0\n'
    rig = AlertRig(rules, UNIT_NODE)
    for i in range(3):
        rig.tick(float(i), ok(), MTP2[i])
    for i in range(3, 6):
        assert rig.tick(float(i), refused()) == ()
    (event,) = rig.tick(6.0, refused())
    assert (event.alert.severity, event.summary) == (Severity.CRIT, "spark1 is down")
    assert "qwen36: /health connection refused" in event.evidence
    assert event.alert.fix.startswith("Check spark1: `journalctl -u vllm-qwen36.service`; restart vLLM with ")
    assert "`sparktui action spark1 restart`" in event.alert.fix
    for i in range(7, 10):
        assert rig.tick(float(i), refused()) == ()
    (resolved,) = rig.tick(10.0, ok(), MTP2[10])
    assert (resolved.state, resolved.summary) == (AlertState.RESOLVED, "spark1 is up again")


def test_instance_and_service_conditions_have_their_own_subjects() -> None:
    rules = (
        '[[alerts]]\nname = "vllm-down"\nmetric = "vllm_down"\n'
        '[[alerts]]\nname = "asr-down"\nmetric = "service_down"\nseverity = "info"\n'
    )
    rig = AlertRig(rules, UNIT_NODE + ASR)
    rig.tick(0.0, ok(), MTP2[0])  # the service is never polled here: UNKNOWN, which tells nothing
    (event,) = rig.tick(1.0, refused())
    assert event.alert.key == AlertKey("vllm-down", "spark1", "qwen36")
    assert event.summary == "spark1/qwen36 is down"
    assert "restart --instance qwen36" in event.alert.fix
    view = rig.rig.view(2.0)
    down = dataclasses.replace(
        view,
        services=(dataclasses.replace(view.services[0], status=Status(State.DOWN, ("parakeet: connection refused",))),),
    )
    events = rig.engine.evaluate((down,), {}, 2.0)
    (service,) = [e for e in events if e.alert.rule == "asr-down"]
    assert (service.alert.instance, service.alert.severity) == ("parakeet", Severity.INFO)
    assert service.evidence == ("parakeet: connection refused",)
    assert "http://10.0.0.1:8765/health" in service.alert.fix


def test_an_instance_whose_metrics_cannot_be_read_fires_with_the_reason_as_evidence() -> None:
    rules = '[[alerts]]\nname = "unreadable"\nmetric = "metrics_unreadable"\nfor_s = 2.0\n'
    rig = AlertRig(rules, UNIT_NODE)
    bad = MTP2[1].replace('le="0.001"', 'le="abc"', 1)
    assert rig.tick(0.0, ok(), MTP2[0]) == ()
    assert rig.tick(1.0, ok(), bad) == ()  # held for 2 s first
    (event,) = rig.tick(3.0, ok(), bad)
    assert event.fired
    assert event.alert.key == AlertKey("unreadable", "spark1", "qwen36")
    assert event.summary == "spark1/qwen36 /metrics cannot be read"
    assert event.evidence == ("/metrics: bad bucket bound le='abc' in vllm:time_to_first_token_seconds_bucket",)
    (resolved,) = rig.tick(4.0, ok(), MTP2[2])
    assert not resolved.fired
    assert rig.tick(5.0, refused()) == (), "down is vllm_down's to say, not this rule's"


def test_launch_not_ready_reads_launch_readiness_while_not_serving() -> None:
    rules = '[[alerts]]\nname = "blocked"\nmetric = "launch_not_ready"\n'
    rig = AlertRig(rules, UNIT_NODE)
    rig.tick(0.0, ok(), MTP2[0])
    view = rig.rig.view(0.0)
    instance = view.instances[0]
    reason = "needs 65.0 GiB, 40.0 GiB available: 25.0 GiB short; dropping caches would free 50.0 GiB"
    launch = LaunchReadiness(False, 65 * GIB, 40 * GIB, 25 * GIB, 50 * GIB, True, reason)
    serving = dataclasses.replace(view, instances=(dataclasses.replace(instance, launch=launch),))
    assert rig.engine.evaluate((serving,), {}, 1.0) == (), "a serving instance holds its memory already"
    down = dataclasses.replace(
        instance, status=Status(State.DOWN, ("qwen36: vllm-qwen36.service failed",)), launch=launch
    )
    (event,) = rig.engine.evaluate((dataclasses.replace(view, instances=(down,)),), {}, 2.0)
    assert event.summary == "spark1/qwen36 would not start now: not enough free memory"
    assert event.evidence == (reason,)


# --- the other numbers -------------------------------------------------------------------------------


def rule(metric: str, **values: float | int | str) -> AlertRuleSpec:
    return AlertRuleSpec.model_validate({"name": metric.replace("_", "-"), "metric": metric, **values})


def served_view(scrapes: list[str], polls: int = 12) -> NodeView:
    rig = Rig(SERVING)
    for i in range(polls):
        rig.step(float(i), ok(), scrapes[i], serving_sample(41 + i))
    return rig.view(float(polls - 1))


def test_each_number_is_read_from_the_view_it_is_shown_in() -> None:
    view = served_view(MTP3)
    instance = view.instances[0]
    assert instance.rates is not None and instance.rates.spec_decode is not None
    spec = instance.rates.spec_decode
    ttft = instance.rates.latency["ttft"]
    gpu = GpuReading(ExporterKind.NVIDIA_GPU_EXPORTER, "GB10", 91.0, 60.0, 0.9, 2.4e9, None, None, True, True, ())
    hot = dataclasses.replace(view, gpu=gpu, pressure=MemoryPressure(some_avg10=31.5))
    rules = [
        rule("waiting", above=0),
        rule("ttft_p90_s", above=0.001),
        rule("acceptance_length", below=5.0),
        rule("position_acceptance", below=0.2, position=2),
        rule("psi_some_avg10", above=25.0),
        rule("gpu_temp_c", above=85.0),
    ]
    values = {r.name: r.value for r in read_rules(rules, (hot,), {})}
    assert values == {
        "waiting": instance.waiting,
        "ttft-p90-s": ttft.p90,
        "acceptance-length": spec.mean_acceptance_length,
        "position-acceptance": spec.per_position[2],
        "psi-some-avg10": 31.5,
        "gpu-temp-c": 91.0,
    }
    fired = {r.name: r.summary for r in firing_now(rules, (hot,), {})}
    assert fired["position-acceptance"] == f"acceptance of draft position 2 {spec.per_position[2]:.1%} on spark1/gptoss"
    assert fired["gpu-temp-c"] == "GPU temperature 91 °C on spark1"
    assert fired["psi-some-avg10"] == "memory pressure (PSI some, 10 s) 31.5% on spark1"
    assert set(fired) == set(values)


def test_a_draft_position_past_k_or_no_drafts_counts_as_clear() -> None:
    view = served_view(MTP2)  # num_speculative_tokens = 2: positions 0 and 1
    (reading,) = read_rules([rule("position_acceptance", below=0.5, position=2)], (view,), {})
    assert (reading.firing, reading.clear, reading.value) == (False, True, None)


def test_host_numbers_are_unknown_while_the_host_state_is_in_trouble() -> None:
    view = dataclasses.replace(served_view(MTP2, polls=3), host_problem="ssh: connection refused")
    (reading,) = read_rules([rule("mem_available_gib", below=100.0)], (view,), {})
    assert reading.firing is None


def test_nodes_limits_a_rule_and_workers_are_skipped() -> None:
    config = (
        '[[nodes]]\nname = "head"\nhost = "10.0.0.1"\n[[nodes.vllm]]\nname = "big"\nport = 8000\nrole = "head"\n'
        'job = "tp"\n[[nodes]]\nname = "worker"\nhost = "10.0.0.2"\n[[nodes.vllm]]\nname = "big"\nrole = "worker"\n'
        'job = "tp"\n[[alerts]]\nname = "kv"\nmetric = "kv_usage"\nabove = 0.5\n'
        '[[alerts]]\nname = "only-head"\nmetric = "node_down"\nnodes = ["head"]\n'
    )
    fleet = parse_config(config, source=SRC, env={})
    views = FleetState(fleet, readings()).view(0.0)
    keys = {str(r.key) for r in read_rules(alert_rules(fleet), views, {}, fleet)}
    assert keys == {"head/big/kv", "head/only-head"}


# --- findings ------------------------------------------------------------------------------------------


def finding(fid: str, severity: Severity, instance: str | None = "gptoss", evidence: tuple[str, ...] = ()) -> Finding:
    return Finding(
        id=fid,
        node="spark1",
        instance=instance,
        severity=severity,
        title=f"{fid} title",
        evidence=evidence or (f"{fid} evidence",),
        explanation="why",
        fix=f"fix {fid}",
        action=None,
        opened_at=0.0,
        last_seen=0.0,
    )


def test_a_finding_rule_fires_with_the_finding_evidence_and_fix_and_resolves_when_it_clears() -> None:
    rig = AlertRig('[[alerts]]\nname = "dead"\nfinding = "engine-dead"\nclear_after_s = 2.0\n')
    healthy = [rig.tick(float(i), ok(), MTP2[i]) for i in range(2)]
    assert healthy == [(), ()]
    assert rig.tick(2.0, ok(status=503)) == ()  # the catalogue opens engine-dead after 2 polls
    (event,) = rig.tick(3.0, ok(status=503))
    assert (event.alert.name, event.alert.rule, event.alert.severity) == ("engine-dead", "dead", Severity.CRIT)
    assert event.alert.key == AlertKey("dead", "spark1", "engine-dead/gptoss")
    assert "gptoss: engine dead (/health 503) (at 10:30:03 UTC)" in event.evidence
    assert event.alert.fix == "Restart the service."
    for i in range(4, 10):
        assert rig.tick(float(i), ok(status=503)) == ()
    t = 10.0
    while not (events := rig.tick(t, ok(), MTP2[int(t)])):
        t += 1.0
        assert t < 30.0, "engine-dead never resolved"
    (resolved,) = events
    assert resolved.state is AlertState.RESOLVED and resolved.summary.endswith(": cleared")
    assert [(state, name) for _, state, name in rig.log()] == [("firing", "engine-dead"), ("resolved", "engine-dead")]


def test_finding_severity_takes_every_finding_at_or_above_it() -> None:
    rig = AlertRig('[[alerts]]\nname = "bad"\nfinding_severity = "crit"\nfix = "call James"\n')
    rig.tick(0.0, ok(), MTP2[0])
    found = {
        "spark1": (
            finding("crash-loop", Severity.CRIT),
            finding("kv-pressure", Severity.WARN),
            finding("node-vanished", Severity.CRIT, None),
        )
    }
    events = rig.evaluate(1.0, found)
    assert sorted(str(e.alert.key) for e in events) == ["spark1/crash-loop/gptoss/bad", "spark1/node-vanished/bad"]
    assert {e.alert.fix for e in events} == {"call James"}
    assert rig.evaluate(2.0, found) == ()
    (resolved,) = rig.evaluate(3.0, {"spark1": found["spark1"][:2]})
    assert resolved.alert.name == "node-vanished" and resolved.state is AlertState.RESOLVED


# --- silences ----------------------------------------------------------------------------------------


def test_a_silenced_alert_is_marked_and_sent_when_the_silence_ends_if_it_still_fires() -> None:
    rig = AlertRig('[[alerts]]\nname = "kv-full"\nmetric = "kv_usage"\nabove = 0.8\n')
    key = AlertKey("kv-full", "spark1", "gptoss")
    rig.engine.silence(key, until=5.0)
    assert rig.engine.silenced_until(key, 0.0) == 5.0
    (event,) = rig.tick(0.0, ok(), kv(0, 0.9))
    assert event.silenced
    for i in range(1, 5):
        assert rig.tick(float(i), ok(), kv(i, 0.9)) == ()
    (late,) = rig.tick(5.0, ok(), kv(5, 0.9))
    assert late.state is AlertState.FIRING and not late.silenced and late.alert.fired_at == 0.0
    (resolved,) = rig.tick(6.0, ok(), kv(6, 0.1))
    assert not resolved.silenced


def test_an_alert_that_fires_and_resolves_inside_a_silence_sends_nothing() -> None:
    rig = AlertRig('[[alerts]]\nname = "kv-full"\nmetric = "kv_usage"\nabove = 0.8\n')
    rig.engine.silence(AlertKey("kv-full", "spark1", "gptoss"), until=100.0)
    (fired,) = rig.tick(0.0, ok(), kv(0, 0.9))
    (resolved,) = rig.tick(1.0, ok(), kv(1, 0.1))
    assert fired.silenced and resolved.silenced
    rig.engine.unsilence(AlertKey("kv-full", "spark1", "gptoss"))
    assert rig.engine.silenced_until(AlertKey("kv-full", "spark1", "gptoss"), 2.0) is None


def test_pending_lists_conditions_waiting_for_their_minimum_duration() -> None:
    rig = AlertRig(KV_RULE)
    rig.tick(0.0, ok(), kv(0, 0.9))
    rig.tick(1.0, ok(), kv(1, 0.9))
    assert rig.engine.pending() == {AlertKey("kv-full", "spark1", "gptoss"): 0.0}


# --- the rules' state, for the alerts screen ----------------------------------------------------------

THREE_RULES = (
    KV_RULE
    + '[[alerts]]\nname = "kv-high"\nmetric = "kv_usage"\nabove = 0.5\nseverity = "crit"\n'
    + '[[alerts]]\nname = "hot"\nmetric = "gpu_temp_c"\nabove = 90.0\nfor_s = 120.0\n'
)


def test_rule_states_list_firing_then_silenced_then_pending_then_the_quiet_rules() -> None:
    rig = AlertRig(THREE_RULES)
    assert [(s.rule.name, s.state) for s in rig.engine.rule_states(0.0)] == [
        ("kv-full", RuleState.OK),
        ("kv-high", RuleState.OK),
        ("hot", RuleState.OK),
    ]
    for i in range(3):
        rig.tick(float(i), ok(), kv(i, 0.9))  # kv-high fires at once; kv-full waits for its 10 s
    states = rig.engine.rule_states(2.0)
    assert [(s.rule.name, s.state, s.since) for s in states] == [
        ("kv-high", RuleState.FIRING, 0.0),
        ("kv-full", RuleState.PENDING, 0.0),
        ("hot", RuleState.OK, None),
    ]
    firing, pending, _ = states
    assert firing.key == AlertKey("kv-high", "spark1", "gptoss") and firing.severity is Severity.CRIT
    assert firing.alert is not None and firing.alert.fired_at == 0.0
    assert pending.summary == "KV-cache usage 90.0% on spark1/gptoss" and pending.rule.for_s == 10.0
    assert [status_timing(s, 2.0) for s in states] == ["firing 2 s", "pending 2 s of 10 s", ""]
    rig.engine.silence(AlertKey("kv-high", "spark1", "gptoss"), until=60.0)
    silenced = rig.engine.rule_states(3.0)[0]
    assert (silenced.state, silenced.silenced_until) == (RuleState.SILENCED, 60.0)
    assert status_timing(silenced, 3.0) == "silenced 57 s more"
    assert rig.engine.rule_states(60.0)[0].state is RuleState.FIRING  # the silence is over
    rig.engine.silence(AlertKey("kv-full", "spark1", "gptoss"), until=30.0)
    held_back = rig.engine.rule_states(3.0)[1]
    assert (held_back.state, held_back.silenced_until) == (RuleState.PENDING, 30.0)  # silenced ahead of firing


def test_a_rule_reads_as_one_short_condition() -> None:
    rules = {r.name: r for r in default_rules(Thresholds())}
    assert rule_condition(rules["kv-cache-full"]) == "KV-cache usage ≥ 90.0% for 5 min"
    assert rule_condition(rules["memory-critical"]) == "MemAvailable ≤ 4.0 GiB for 10 s"
    assert rule_condition(rules["findings"]) == "any finding at warn or worse"
    assert rule_condition(rule("node_down", for_s=30.0)) == "node down for 30 s"
    assert [held_text(s) for s in (59.6, 300.0, 5400.0, 7200.0, 9000.0)] == [
        "60 s",
        "5 min",
        "90 min",
        "2 h",
        "2 h 30 min",
    ]
