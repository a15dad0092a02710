"""``sparktui watch`` against the demo fleet (real HTTP and SSH on 127.0.0.1) and real local HTTP
receivers, one per notifier format, that record every request.

The scenario tests step the simulation (``SteppedDemo``: advance, then poll every node over HTTP,
stamped with the simulation's clock), so a two-minute outage costs a few seconds. The test of a slow or
dead notifier runs the real ``LiveFleet`` (poll loops, host samplers and log streams over SSH) against
the demo fleet on its wall clock.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import itertools
import json
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from sparktui.cli import watch as watch_cli
from sparktui.config import catalogue_for, parse_config
from sparktui.demo.fleet import DEFAULT_NODES, DemoFleet
from sparktui.demo.scenarios import SCENARIOS
from sparktui.diagnosis.engine import Finding
from sparktui.headless.watch import Watcher, check_alerts, run_check, watch
from sparktui.model.logbuffer import LogLine
from sparktui.model.observations import HostUpdate, NodeObservation, ServerObservation
from sparktui.model.specs import FleetSpec
from sparktui.monitor.core import Monitor
from sparktui.sources.http import make_client
from sparktui.sources.live import FleetSink
from sparktui.sources.poller import FleetPoller
from tests.integration.test_notify import BOT_TOKEN, HOOK_SECRET, SLACK_SECRET, Behaviour, Receiver
from tests.support.fixture_fleet import free_port
from tests.support.wait import wait_until
from tests.unit.test_diagnosis import MTP2, Rig, ok, refused, serving_sample

TOKENS = {"TG_TOKEN": BOT_TOKEN}
SECRETS = (BOT_TOKEN, HOOK_SECRET, SLACK_SECRET)


class SteppedDemo:
    """The demo fleet in step mode as a ``FleetSource``: advance ``dt`` simulated seconds, poll every
    node over HTTP, hand the observations over; ends once the simulation reaches ``until_s``."""

    drives_ticks = False

    def __init__(self, demo: DemoFleet, spec: FleetSpec, until_s: float, dt: float = 2.0) -> None:
        self.demo, self.spec, self.until_s, self.dt = demo, spec, until_s, dt

    async def run(self, sink: FleetSink) -> None:
        async with make_client() as client:
            poller = FleetPoller(self.spec, client, clock=lambda: self.demo.now)
            while self.demo.elapsed < self.until_s:
                await self.demo.advance(self.dt)
                for observation in await poller.poll_all():
                    sink.observation(observation)
                await asyncio.sleep(0.03)  # let the watcher tick between steps, as it would between polls


class Recorder:
    """An extra sink: what the watcher forwards, with the loop time it arrived."""

    def __init__(self) -> None:
        self.observations: list[tuple[float, NodeObservation]] = []
        self.hosts: list[HostUpdate] = []
        self.logs: list[tuple[str, str, int]] = []

    def observation(self, observation: NodeObservation) -> None:
        self.observations.append((time.monotonic(), observation))

    def host(self, update: HostUpdate) -> None:
        self.hosts.append(update)

    def log_batch(self, node: str, instance: str, lines: Sequence[LogLine]) -> None:
        self.logs.append((node, instance, len(lines)))

    def error(self, node: str, exc: Exception) -> None:
        raise AssertionError(f"{node}: {exc}")


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver()
    try:
        yield found
    finally:
        found.close()


@dataclass
class Demo:
    demo: DemoFleet
    text: str  # the fleet's config


@pytest.fixture
async def node_down() -> AsyncIterator[Demo]:
    demo = DemoFleet(nodes=DEFAULT_NODES[:2], seed=21, scenario=SCENARIOS["node-down"])
    await demo.start()
    try:
        yield Demo(demo, demo.config_toml(poll_interval_s=0.1))
    finally:
        await demo.stop()


def every_format(receiver: Receiver) -> str:
    base = receiver.url
    return f"""
[[notifiers]]
kind = "webhook"
url = "{base}/hook/{HOOK_SECRET}"
[[notifiers]]
kind = "slack"
url = "{base}/services/T000/B000/{SLACK_SECRET}"
[[notifiers]]
kind = "ntfy"
url = "{base}"
topic = "spark-fleet"
[[notifiers]]
kind = "telegram"
url = "{base}"
token_env = "TG_TOKEN"
chat_id = -1001234567890
"""


NODE_DOWN_RULE = """
[[alerts]]
name = "node-down"
metric = "node_down"
for_s = 10.0
severity = "crit"
"""


def lines_of(out: io.StringIO, **fields: str) -> list[str]:
    """The log lines that carry every ``key=value`` given."""
    return [line for line in out.getvalue().splitlines() if all(f" {k}={v}" in f" {line}" for k, v in fields.items())]


# --- one alert through every notifier format ---------------------------------------------------------


@pytest.mark.slow
async def test_node_down_fires_once_after_for_s_and_resolves_once_in_every_format(
    node_down: Demo, receiver: Receiver
) -> None:
    spec = parse_config(node_down.text + NODE_DOWN_RULE + every_format(receiver), source="demo.toml", env=TOKENS)
    demo = node_down.demo
    out = io.StringIO()
    # spark2 loses power at 20 s and boots at 80 s; its vLLM loads for 45 s.
    watcher = Watcher(spec, out=out, clock=lambda: demo.now, source=SteppedDemo(demo, spec, until_s=150.0))
    assert await asyncio.wait_for(watcher.run(drain_s=5.0), 60.0) == 0

    (alert,) = watcher.monitor.alerts.history()
    assert (alert.name, alert.node) == ("node-down", "spark2")
    assert alert.since >= demo.started_at + 20.0
    assert alert.fired_at - alert.since >= 10.0, "fired before its minimum duration"
    assert alert.resolved_at is not None and alert.resolved_at >= demo.started_at + 125.0
    assert watcher.monitor.alerts.active() == ()

    # Logged once each, in the journald-friendly form: level word first, key=value pairs, no colour.
    (fired,) = lines_of(out, event="firing")
    (resolved,) = lines_of(out, event="resolved")
    assert fired.startswith("crit node=spark2 alert=node-down event=firing severity=crit ")
    assert 'summary="spark2 is down"' in fired and "connection refused" in fired and "fix=" in fired
    assert resolved.startswith("notice node=spark2 alert=node-down event=resolved ")
    assert 'summary="spark2 is up again"' in resolved
    assert "\x1b" not in out.getvalue()

    # Each format got exactly one firing and one resolved message, in that order.
    (hook_firing, hook_resolved) = receiver.received(f"/hook/{HOOK_SECRET}")
    body = hook_firing.json()
    assert isinstance(body, dict)
    assert (body["status"], body["alert"], body["node"], body["severity"]) == ("firing", "node-down", "spark2", "crit")
    assert body["summary"] == "spark2 is down"
    assert any("gemma4: /health" in line for line in body["evidence"])
    assert str(body["fix"]).startswith("Check spark2: `docker logs vllm-gemma4`")
    assert float(body["held_s"]) >= 10.0
    done = hook_resolved.json()
    assert isinstance(done, dict) and done["status"] == "resolved" and done["resolved_at"]

    slack = [r.json() for r in receiver.received("/services/T000/B000/")]
    assert [str(m["text"]).split("\n")[0][:33] for m in slack] == [
        "FIRING crit: spark2 node-down (he",
        "RESOLVED crit: spark2 node-down a",
    ]

    ntfy = receiver.received("/spark-fleet")
    assert [(r.headers["title"], r.headers["priority"]) for r in ntfy] == [
        ("FIRING crit: spark2 node-down", "5"),
        ("RESOLVED crit: spark2 node-down", "3"),
    ]
    assert ntfy[0].body.decode().startswith("spark2 is down\n")

    telegram = receiver.received(f"/bot{BOT_TOKEN}/sendMessage")
    assert [r.json()["chat_id"] for r in telegram] == [-1001234567890, -1001234567890]
    assert str(telegram[0].json()["text"]).startswith("FIRING crit: spark2 node-down")

    assert len(receiver.received()) == 8
    assert all(s.healthy and s.sent == 2 for s in watcher.hub.statuses())
    for secret in SECRETS:
        assert secret not in out.getvalue()


@pytest.mark.slow
async def test_a_finding_alert_carries_the_finding_evidence_and_fix(receiver: Receiver) -> None:
    demo = DemoFleet(nodes=DEFAULT_NODES[2:], seed=21, scenario=SCENARIOS["engine-dead"])
    await demo.start()
    try:
        rules = '\n[[alerts]]\nname = "dead"\nfinding = "engine-dead"\n'
        hook = f'\n[[notifiers]]\nkind = "webhook"\nurl = "{receiver.url}/hook"\n'
        spec = parse_config(demo.config_toml(poll_interval_s=0.1) + rules + hook, source="demo.toml")
        out = io.StringIO()
        source = SteppedDemo(demo, spec, until_s=30.0, dt=0.25)  # the 503 lasts a second: poll inside it
        watcher = Watcher(spec, out=out, clock=lambda: demo.now, source=source)
        assert await asyncio.wait_for(watcher.run(drain_s=5.0), 60.0) == 0
    finally:
        await demo.stop()
    # Fired while /health said 503; resolved once the API server exited and was restarted (a second).
    request, *_resolved = receiver.received("/hook")
    body = request.json()
    assert isinstance(body, dict)
    assert (body["alert"], body["rule"], body["node"], body["instance"]) == ("engine-dead", "dead", "spark3", "qwen235")
    assert body["fix"] == "Restart the service."
    assert any("qwen235: engine dead (/health 503)" in line for line in body["evidence"])
    (line,) = lines_of(out, event="firing")
    assert line.startswith("crit node=spark3 alert=engine-dead event=firing severity=crit instance=qwen235 rule=dead ")


# --- a slow or dead notifier -------------------------------------------------------------------------------


@pytest.mark.slow
async def test_a_slow_and_a_dead_notifier_delay_no_poll_and_no_tick(receiver: Receiver) -> None:
    receiver.behaviour = Behaviour(delay_s=5.0)  # answers after 5 s
    dead = free_port()
    demo = DemoFleet(nodes=DEFAULT_NODES[:2], seed=5)
    await demo.start()
    clock = asyncio.create_task(demo.run_clock())
    try:
        rules = '\n[[alerts]]\nname = "gpu-warm"\nmetric = "gpu_temp_c"\nabove = 1.0\n'  # fires at once
        notifiers = (
            f'\n[[notifiers]]\nkind = "slack"\nname = "slow"\nurl = "{receiver.url}/services/{SLACK_SECRET}"\n'
            "timeout_s = 30.0\nretries = 0\n"
            f'[[notifiers]]\nkind = "telegram"\nname = "dead"\nurl = "http://127.0.0.1:{dead}"\n'
            'token_env = "TG_TOKEN"\nchat_id = 42\nretries = 2\nbackoff_s = 0.5\n'
        )
        spec = parse_config(demo.config_toml(poll_interval_s=0.2) + rules + notifiers, source="demo.toml", env=TOKENS)
        out, recorder = io.StringIO(), Recorder()
        watcher = Watcher(spec, out=out, taps=(recorder,))
        ticks: list[tuple[float, int]] = []

        async def sample_ticks() -> None:
            while True:
                ticks.append((time.monotonic(), watcher.monitor.ticks))
                await asyncio.sleep(0.1)  # a sampling period: the measurement, not a wait

        sampler = asyncio.create_task(sample_ticks())
        run = asyncio.create_task(watcher.run(drain_s=0.5))
        await wait_until(lambda: len(receiver.received("/services/")) == 2, 15.0)  # both nodes' GPUs
        slow_from = receiver.received("/services/")[0].at
        await asyncio.sleep(5.5)  # the scenario: the window the slow receiver holds its first request, watched whole
        run.cancel()
        await asyncio.gather(run, return_exceptions=True)
        sampler.cancel()
    finally:
        clock.cancel()
        await demo.stop()

    first, second = receiver.received("/services/")
    assert second.at - first.at >= 4.9, "the slow notifier sends one message at a time"
    window = (slow_from, slow_from + 5.0)  # the slow receiver holds its first request all this time
    for node in ("spark1", "spark2"):
        arrivals = [t for t, o in recorder.observations if o.node == node and window[0] - 0.5 <= t <= window[1]]
        gaps = [b - a for a, b in itertools.pairwise(arrivals)]
        assert len(arrivals) >= 15 and max(gaps) < 1.0, (node, gaps)
    during = [count for t, count in ticks if window[0] <= t <= window[1]]
    assert during[-1] - during[0] >= 15, ticks  # ~25 ticks at 0.2 s
    assert recorder.hosts, "host updates reach the extra sinks too"

    # The dead one was retried with backoff, then reported; the slow one is still out.
    retries = lines_of(out, notifier="dead", event="notify-retry")
    failed = lines_of(out, notifier="dead", event="notify-failed")
    assert len(retries) == 4 and len(failed) == 2  # two alerts (one per node), 1 + 2 attempts each
    assert all(line.startswith("err node=") and 'error="cannot connect: connection refused"' in line for line in failed)
    (dead_status,) = [s for s in watcher.hub.statuses() if s.name == "dead"]
    assert (dead_status.healthy, dead_status.failed) == (False, 2)
    for secret in SECRETS:
        assert secret not in out.getvalue()


# --- the watch() entry point and its sources ------------------------------------------------------------


async def test_watch_runs_live_collection_into_extra_sinks_and_logs_for_journald(receiver: Receiver) -> None:
    demo = DemoFleet(nodes=DEFAULT_NODES[:1], seed=5)
    await demo.start()
    clock = asyncio.create_task(demo.run_clock())
    try:
        spec = parse_config("alerts = []\n" + demo.config_toml(poll_interval_s=0.2), source="demo.toml")
        out, recorder = io.StringIO(), Recorder()
        code = await watch(spec, out=out, taps=(recorder,), stop_after_s=2.5, journal=True)
    finally:
        clock.cancel()
        await demo.stop()
    assert code == 0
    lines = out.getvalue().splitlines()
    assert lines[0] == "<6>info event=start nodes=1 rules=0 notifiers=none interval_s=0.2 config=demo.toml"
    stop = re.fullmatch(r"<6>info event=stop ticks=(\d+) firing=0", lines[-1])
    assert stop is not None and int(stop[1]) >= 5, lines[-1]  # 2.5 s at 0.2 s
    assert len(recorder.observations) >= 8 and recorder.hosts and recorder.logs


class Replay:
    """A source that hands over a few observations and ends, as a recording's replay does."""

    drives_ticks = False

    def __init__(self, observations: Sequence[NodeObservation], fail: bool = False) -> None:
        self.observations, self.fail = observations, fail

    async def run(self, sink: FleetSink) -> None:
        for observation in self.observations:
            sink.observation(observation)
            sink.log_batch("spark1", "gptoss", [LogLine(0, None, "INFO hello")])
            await asyncio.sleep(0.05)  # the scenario: a source that paces its polls
        if self.fail:
            raise RuntimeError("recording truncated")


def polls(count: int) -> list[NodeObservation]:
    return [
        NodeObservation(node="spark1", t=float(i), wall=1e9 + i, vllm=(ServerObservation("gptoss", refused(), None),))
        for i in range(count)
    ]


SERVING_NODE = '[[nodes]]\nname = "spark1"\nhost = "10.0.0.1"\n[[nodes.vllm]]\nname = "gptoss"\nport = 8000\n'


async def test_a_source_that_ends_gets_a_last_tick_and_a_failing_one_is_reported() -> None:
    spec = parse_config(
        "poll_interval_s = 0.1\n" + SERVING_NODE + '[[alerts]]\nname = "down"\nmetric = "node_down"\n',
        source="t.toml",
    )
    out = io.StringIO()
    watcher = Watcher(spec, out=out, clock=lambda: 5.0, source=Replay(polls(3)))
    assert await watcher.run() == 0
    assert lines_of(out, event="source-ended") and lines_of(out, node="spark1", alert="down", event="firing")
    assert watcher.monitor.log_buffers["spark1"]["gptoss"].next_seq == 3  # the replay's log lines were kept
    out = io.StringIO()
    assert await Watcher(spec, out=out, source=Replay(polls(1), fail=True)).run() == 1
    (line,) = lines_of(out, event="source-failed")
    assert line == 'err event=source-failed error="RuntimeError: recording truncated"'


async def test_a_failing_extra_sink_is_reported_once_and_the_rest_goes_on() -> None:
    spec = parse_config("poll_interval_s = 0.1\nalerts = []\n" + SERVING_NODE, source="t.toml")

    class Broken(Recorder):
        def observation(self, observation: NodeObservation) -> None:
            raise ValueError("disk full")

    out, good = io.StringIO(), Recorder()
    watcher = Watcher(spec, out=out, source=Replay(polls(3)), taps=(Broken(), good))
    assert await watcher.run() == 0
    assert lines_of(out, event="sink-error") == [
        'err event=sink-error sink=Broken method=observation error="ValueError: disk full"'
    ]
    assert len(good.observations) == 3


# --- check --alerts ------------------------------------------------------------------------------------------


def checked(rules: str, *, up: bool) -> tuple[list[str], int]:
    """check_alerts on a node that serves mtp2-steady (up) or refuses (down), after three polls."""
    rig = Rig(SERVING_NODE + rules)
    for i in range(3):
        if up:
            rig.step(float(i), ok(), MTP2[i], serving_sample(41 + i))
        else:  # no host sample either: with one, its running container would make it "loading"
            rig.step(float(i), refused())
    return check_alerts(rig.fleet.spec, (rig.view(2.0),), rig_findings(rig))


def rig_findings(rig: Rig) -> Mapping[str, tuple[Finding, ...]]:
    return {rig.name: rig.findings}


def test_check_alerts_exit_codes() -> None:
    rules = (
        '[[alerts]]\nname = "down"\nmetric = "node_down"\nfor_s = 600.0\n'
        '[[alerts]]\nname = "mem"\nmetric = "mem_available_gib"\nbelow = 100.0\n'
    )
    lines, code = checked(rules.replace("below = 100.0", "below = 1.0"), up=True)
    assert (lines, code) == (["no alert would fire (2 rules)"], 0)
    lines, code = checked(rules, up=True)
    assert code == 1
    assert lines == [
        "warn spark1 mem: MemAvailable 61.9 GiB on spark1 (MemAvailable 61.9 GiB (fires at or below 100.0 GiB)); "
        "fix: Free memory on spark1: drop the page cache (`sparktui action spark1 drop-caches`), stop stray "
        "processes, or lower gpu_memory_utilization.",
        "1 alert would fire: 1 warn",
    ]
    lines, code = checked(rules, up=False)
    assert code == 2, "for_s does not apply to a one-shot check"
    assert lines[0].startswith("crit spark1 down: spark1 is down (gptoss: /health connection refused); fix: Check ")
    assert lines[-1] == "1 alert would fire: 1 crit"  # no host sample: MemAvailable is not known


def test_run_check_diagnoses_once_and_prints_the_lines() -> None:
    spec = parse_config(SERVING_NODE + '[[alerts]]\nname = "down"\nmetric = "node_down"\n', source="t.toml")
    monitor = Monitor.once(spec, catalogue_for(spec.diagnosis))
    for observation in polls(2):
        monitor.observation(observation)
    monitor.tick(1.5)
    out = io.StringIO()
    assert run_check(spec, monitor, out=out) == 2
    assert out.getvalue().endswith("1 alert would fire: 1 crit\n")


# --- the command line ----------------------------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="sparktui")
    top.add_argument("--config", type=Path)  # as the CLI's own parser
    watch_cli.add_parser(top.add_subparsers(dest="command"))
    return top


def test_the_subcommand_parses_its_options() -> None:
    args = parser().parse_args(["--config", "f.toml", "watch", "--for", "30", "--journal", "no"])
    assert (args.command, args.config, args.stop_after_s, args.journal) == ("watch", Path("f.toml"), 30.0, "no")
    assert parser().parse_args(["watch"]).journal == "auto"


def test_main_reports_a_bad_config_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "fleet.toml"
    bad.write_text(SERVING_NODE + '[[notifiers]]\nkind = "telegram"\ntoken_env = "NOT_SET_ANYWHERE"\nchat_id = 1\n')
    assert watch_cli.run(parser().parse_args(["--config", str(bad), "watch", "--for", "1"])) == 2
    err = capsys.readouterr().err
    assert err == (
        f"{bad}: notifiers[0].token_env: environment variable NOT_SET_ANYWHERE is not set; "
        "export it before starting sparktui, or use token_file\n"
    )


def test_main_watches_for_the_given_time(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "fleet.toml"
    port = free_port()  # nothing listens: the node is down, which the default rules see
    config.write_text(
        f'poll_interval_s = 0.2\n[[nodes]]\nname = "spark1"\nhost = "127.0.0.1"\n'
        f"[nodes.ssh]\nenabled = false\n[[nodes.vllm]]\nport = {port}\n"
    )
    assert watch_cli.run(parser().parse_args(["--config", str(config), "watch", "--for", "1", "--journal", "no"])) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("info event=start nodes=1 rules=12 notifiers=none interval_s=0.2 config=")
    assert lines[-1].startswith("info event=stop ticks=")


async def test_json_values_in_log_lines_are_escaped() -> None:
    spec = parse_config("poll_interval_s = 0.1\nalerts = []\n" + SERVING_NODE, source="t.toml")
    out = io.StringIO()
    watcher = Watcher(spec, out=out, source=Replay([]))
    watcher.log("err", event="x", error='a "quoted"\nnewline', plain="word", gone=None)
    assert out.getvalue() == 'err event=x error="a \\"quoted\\"\\nnewline" plain=word\n'
    assert json.loads(out.getvalue().split("error=", 1)[1].split(" plain=")[0]) == 'a "quoted"\nnewline'


def test_the_watcher_and_the_notifiers_load_no_ui_library() -> None:
    code = (
        "import sys, sparktui.notify, sparktui.headless.watch\n"
        "print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'rich', 'click'))))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""
