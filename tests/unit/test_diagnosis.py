"""The diagnosis engine (pure): every catalogue rule against its evidence and a near miss, hysteresis,
threshold overrides, odd input, and the docs table.

Node views come from the real model: a ``FleetState`` fed with scrapes from tests/data/vllm-0.33, host
frames from tests/data/host and log lines from tests/data/diagnosis/cases.toml, as ``test_status.py``
does. Times: ``t`` is the poll loop's clock in seconds; the wall clock is ``WALL0 + t``.
"""

from __future__ import annotations

import dataclasses
import json
import re
import tomllib
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from types import EllipsisType
from typing import Any

import pytest

from sparktui.config import load_catalogue, parse_config
from sparktui.diagnosis.catalogue import ACTIONS, CatalogueError, Severity, catalogue_markdown, parse_catalogue
from sparktui.diagnosis.engine import ACTION_SETTLE_S, DiagnosisEngine, Finding, last_intervals, unread
from sparktui.engines import readings
from sparktui.model.fleet import FleetState, NodeView
from sparktui.model.host import FrameSplitter, HostSample, parse_frame
from sparktui.model.logbuffer import KERNEL_LOG, LogBuffer, LogFormat, parse_log_line, without_engine_clock
from sparktui.model.memory import GIB
from sparktui.model.observations import FetchKind, HostUpdate, HttpResult, NodeObservation, ServerObservation
from sparktui.model.status import State
from sparktui.model.units import fmt_clock
from tests.conftest import DATA
from tests.support.fabric import ETHTOOL, LIBNCCL, fabric_answer, nccl_lines
from tests.support.fixture_fleet import put_to_sleep, scenario_scrapes

ROOT = Path(__file__).resolve().parents[2]
CATALOGUE = load_catalogue()
CASES: list[dict[str, Any]] = tomllib.loads((DATA / "diagnosis" / "cases.toml").read_text())["case"]
WALL0 = 1780137000.0  # 2026-05-30 10:30:00 UTC
MTP2 = scenario_scrapes("mtp2-steady")
MTP3 = scenario_scrapes("mtp3-poor-pos2")
FRESH = scenario_scrapes("restart")[5]  # a server whose engine became ready a second ago

# The rows of shared/reference/spark-failures.md, in its order; the data file must carry every one.
CATALOGUE_ROWS = (
    "page-cache-blocks-start",
    "launch-readiness",
    "oom-during-load",
    "drop-caches-denied",
    "shm-leftovers",
    "stale-workers",
    "exec-not-found",
    "crash-loop",
    "worker-port-in-use",
    "fork-shm-ringbuffer",
    "patch-applied-twice",
    "mamba-block-size",
    "serve-twice",
    "cuda-compat-unavailable",
    "unknown-env-var",
    "model-type-unknown",
    "gated-download",
    "fp4-garbage",
    "tool-choice-400",
    "draft-model-path",
    "spec-position-collapse",
    "enforce-eager",
    "compile-config-ignored",
    "chunked-prefill-ssm",
    "cold-jit",
    "engine-wedged",
    "engine-dead",
    "nccl-timeout",
    "node-vanished",
    "port-refused-loading",
)
ISSUE_DETECTORS = ("decode-stall", "kv-pressure")  # the diagnosis issue's extra metric detectors
# Issue 21's signatures of the node's kernel log.
KERNEL_RULES = ("nvrm-out-of-memory", "gpu-xid", "pcie-aer-fatal", "mlx5-slot-reset", "thermal-event")
GPU_DETECTORS = ("gpu-thermal-slowdown", "gpu-clock-low", "gpu-power-low")  # and its clocks, power, throttling
FABRIC_DETECTORS = ("link-degraded", "rank-spinning", "nccl-mismatch")  # the link between the ranks of a job
ENGINE_DETECTORS = ("held-models-block-start",)  # issue 35: another engine's models hold the memory
# llama.cpp's own lines (sparktui/engines/llamacpp/failures.toml), judged on its instances only.
LLAMACPP_RULES = (
    "llamacpp-model-load-failed",
    "llamacpp-model-file-missing",
    "llamacpp-model-not-gguf",
    "llamacpp-out-of-memory",
    "llamacpp-port-in-use",
    "llamacpp-context-exceeded",
    "llamacpp-batch-too-small",
    "llamacpp-context-full",
)
# SGLang's own (sparktui/engines/sglang/failures.toml).
SGLANG_RULES = (
    "sglang-not-enough-memory",
    "sglang-kv-pool-below-context",
    "sglang-kv-cache-full-retract",
    "sglang-health-check-failed",
)
# TensorRT-LLM's own (sparktui/engines/trtllm/failures.toml).
TRTLLM_RULES = (
    "trtllm-executor-out-of-memory",
    "trtllm-kv-cache-below-max-seq-len",
    "trtllm-fp4-moe-needs-sm100",
    "trtllm-forward-error",
)

SERVING = """
poll_interval_s = 1.0
[[nodes]]
name = "spark1"
host = "10.0.0.1"
[[nodes.vllm]]
name = "gptoss"
port = 8000
container = "vllm_gptoss"
gpu_memory_utilization = 0.9
"""

# The two instances of tests/data/host/frame-incident.txt (context/002's reboot, context/001's loop).
INCIDENT = """
poll_interval_s = 1.0
[[nodes]]
name = "spark1"
host = "10.0.0.1"
[[nodes.vllm]]
name = "ds4"
port = 8000
unit = "vllm-ds4-head.service"
[[nodes.vllm]]
name = "qwen"
port = 8001
container = "qwen36-35b"
"""

# One llama.cpp instance: the rules of llama.cpp's own catalogue judge it.
LLAMA = """
poll_interval_s = 1.0
[[nodes]]
name = "spark1"
host = "10.0.0.1"
[[nodes.vllm]]
name = "gemma"
engine = "llamacpp"
port = 8080
unit = "llama-gemma.service"
"""

SGLANG = """
poll_interval_s = 1.0
[[nodes]]
name = "spark1"
host = "10.0.0.1"
[[nodes.vllm]]
name = "qwen"
engine = "sglang"
port = 30000
unit = "sglang-qwen.service"
"""

TRTLLM = """
poll_interval_s = 1.0
[[nodes]]
name = "spark1"
host = "10.0.0.1"
[[nodes.vllm]]
name = "nemotron"
engine = "trtllm"
port = 8355
unit = "trtllm-nemotron.service"
"""

STALE = """
poll_interval_s = 1.0
[[nodes]]
name = "spark1"
host = "10.0.0.1"
[[nodes.vllm]]
name = "ds4w"
port = 8000
unit = "vllm-ds4-worker.service"
"""


# --- building evidence with the real model --------------------------------------------------------


def ok(body: str = "", status: int = 200) -> HttpResult:
    return HttpResult(url="http://10.0.0.1:8000", kind=FetchKind.OK, status=status, body=body.encode())


def refused() -> HttpResult:
    return HttpResult(url="http://10.0.0.1:8000", kind=FetchKind.REFUSED, error="connection refused")


def timeout() -> HttpResult:
    return HttpResult(url="http://10.0.0.1:8000", kind=FetchKind.TIMEOUT, error="no answer within 2 s")


def frames(name: str, replace: Mapping[str, str] | None = None) -> list[HostSample]:
    text = (DATA / "host" / name).read_text()
    for old, new in (replace or {}).items():
        assert old in text, old
        text = text.replace(old, new)
    splitter = FrameSplitter()
    return [parse_frame(f) for line in text.splitlines() if (f := splitter.feed(line)) is not None]


def serving_sample(seq: int = 41) -> HostSample:
    """frames-serving.txt's full frame (container vllm_gptoss running), as the seq-th frame."""
    return dataclasses.replace(frames("frames-serving.txt")[0], seq=seq)


def incident_sample(replace: Mapping[str, str] | None = None) -> HostSample:
    (sample,) = frames("frame-incident.txt", replace)
    return sample


def edit(text: str, values: Mapping[str, float]) -> str:
    """The scrape with every sample of the named series (any labels) set to a value."""
    out = []
    for line in text.splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0]
        changed = not line.startswith("#") and name in values
        out.append(f"{line.rsplit(' ', 1)[0]} {values[name]}" if changed else line)
    return "\n".join(out) + "\n"


def value_of(text: str, series: str) -> float:
    (line,) = [line for line in text.splitlines() if line.startswith(series)]
    return float(line.rsplit(" ", 1)[1])


def with_value(text: str, series: str, value: float) -> str:
    return (
        "\n".join(
            f"{line.rsplit(' ', 1)[0]} {value}" if line.startswith(series) else line for line in text.splitlines()
        )
        + "\n"
    )


# mtp2-steady's last scrape with nothing running: repeated, an instance that is UP and idle.
IDLE = edit(MTP2[29], {"vllm:num_requests_running": 0, "vllm:num_requests_waiting": 0})


class Rig:
    """One node in a real FleetState, its log buffers, and the engine evaluating it."""

    def __init__(
        self, config: str = SERVING, overrides: Mapping[str, float] | None = None, window_s: float = 60.0
    ) -> None:
        self.fleet = FleetState(parse_config(config, source="test.toml"), readings())
        self.name = next(iter(self.fleet.nodes))
        self.engine = DiagnosisEngine(CATALOGUE, overrides)
        self.window_s = window_s
        self.logs: dict[str, LogBuffer] = {}
        self.findings: tuple[Finding, ...] = ()

    def poll(
        self,
        t: float,
        health: HttpResult | None,
        metrics: str | None = None,
        instance: str = "",
        gpu: str | None = None,
    ) -> None:
        names = [instance] if instance else list(self.fleet.nodes[self.name].instances)
        observed = tuple(
            ServerObservation(name, health, ok(metrics) if metrics is not None else None) for name in names
        )
        exporter = ok(gpu) if gpu is not None else None
        self.fleet.apply(NodeObservation(node=self.name, t=t, wall=WALL0 + t, vllm=observed, gpu_exporter=exporter))

    def host(self, t: float, sample: HostSample | None = None, problem: str | None = None) -> None:
        self.fleet.apply_host(HostUpdate(self.name, t, sample=sample, problem=problem))

    def log(self, instance: str, fmt: LogFormat, raw: list[str]) -> None:
        buffer = self.logs.setdefault(instance, LogBuffer())
        buffer.append_batch(parse_log_line(fmt, line) for line in raw)

    def view(self, t: float) -> NodeView:
        (view,) = [v for v in self.fleet.view(t, window_s=self.window_s) if v.name == self.name]
        return view

    def evaluate(self, t: float) -> tuple[Finding, ...]:
        engine = self.engine
        lines = {name: unread(buf, engine.cursor(self.name, name)) for name, buf in self.logs.items()}
        intervals = last_intervals(self.fleet.nodes[self.name])
        self.findings = engine.evaluate(self.view(t), lines, t, intervals)
        return self.findings

    def step(
        self, t: float, health: HttpResult | None, metrics: str | None = None, sample: HostSample | None = None
    ) -> tuple[Finding, ...]:
        self.poll(t, health, metrics)
        if sample is not None:
            self.host(t, sample)
        return self.evaluate(t)

    def ids(self, instance: str | EllipsisType | None = ...) -> set[str]:
        """Ids of the active findings (of one instance, None: the node's own)."""
        return {f.id for f in self.findings if instance is ... or f.instance == instance}

    def get(self, rule_id: str, instance: str | EllipsisType | None = ...) -> Finding:
        found = [f for f in self.findings if f.id == rule_id and (instance is ... or f.instance == instance)]
        assert found, f"{rule_id} not among {sorted(self.ids())}"
        return found[0]


def text_of(finding: Finding) -> str:
    return "\n".join(finding.evidence)


def healthy(rig: Rig, until: int = 3) -> None:
    """A few normal polls: the instance serves mtp2-steady's traffic."""
    for i in range(until):
        rig.step(float(i), ok(), MTP2[i], serving_sample(41 + i))


# --- the catalogue --------------------------------------------------------------------------------


def test_the_data_file_carries_every_catalogue_row_and_the_issue_detectors() -> None:
    assert set(CATALOGUE.ids) == set(CATALOGUE_ROWS) | set(ISSUE_DETECTORS) | set(KERNEL_RULES) | set(
        GPU_DETECTORS
    ) | set(FABRIC_DETECTORS) | set(LLAMACPP_RULES) | set(SGLANG_RULES) | set(TRTLLM_RULES) | set(ENGINE_DETECTORS)
    assert {rule.id for rule in CATALOGUE.rules if rule.engine == "llamacpp"} == set(LLAMACPP_RULES)
    assert {rule.id for rule in CATALOGUE.rules if rule.engine == "sglang"} == set(SGLANG_RULES)
    assert {rule.id for rule in CATALOGUE.rules if rule.engine == "trtllm"} == set(TRTLLM_RULES)
    assert len(CATALOGUE.ids) == len(set(CATALOGUE.ids))


@pytest.mark.parametrize("rule", CATALOGUE.rules, ids=lambda r: r.id)
def test_every_rule_has_texts_a_known_action_and_thresholds(rule: Any) -> None:
    assert rule.title and rule.explanation and rule.fix and rule.looks_at
    assert rule.action is None or rule.action in ACTIONS
    assert (rule.log is None) != (rule.detector is None)
    needed = ("quiet_s", "healthy_s") if rule.log else ("open_after", "clear_after_s")
    assert all(name in rule.params for name in needed)


def test_actions_are_offered_where_the_catalogue_names_one() -> None:
    actions = {rule.id: rule.action for rule in CATALOGUE.rules if rule.action}
    assert actions == {
        "page-cache-blocks-start": "drop-caches",
        "launch-readiness": "drop-caches",
        "shm-leftovers": "drop-caches",
        "stale-workers": "kill-workers",
        "worker-port-in-use": "kill-workers",
        "cold-jit": "warmup",
        "engine-wedged": "restart",
        "engine-dead": "restart",
        "nccl-timeout": "restart",
    }


def test_the_shipped_data_file_is_in_the_package_data() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "data/*.toml" in pyproject["tool"]["setuptools"]["package-data"]["sparktui"]


# --- log rules: every case of cases.toml ----------------------------------------------------------


LOG_CASES = [
    pytest.param(case, id=f"{case['rule']}-{'match' if case['match'] else 'near-miss'}-{index}")
    for index, case in enumerate(CASES)
]


@pytest.mark.parametrize("case", LOG_CASES)
def test_log_rule_against_its_evidence(case: Mapping[str, Any]) -> None:
    rule = CATALOGUE.rule(case["rule"])
    assert rule.log is not None, f"{rule.id} is not a log rule"
    kernel = rule.log.stream == "kernel"
    assert kernel == (case["format"] == "kernel"), "a kernel-log rule's evidence is kernel-log lines"
    # An engine's own rule is tried on an instance of that engine (on another it opens nothing).
    own = {"llamacpp": ("gemma", LLAMA), "sglang": ("qwen", SGLANG), "trtllm": ("nemotron", TRTLLM)}.get(
        rule.engine or ""
    )
    instance = own[0] if own else "gptoss"
    rig = Rig(own[1]) if own else Rig()
    if own:
        for t in range(3):
            rig.step(float(t), ok())
    else:
        healthy(rig)
    rig.log(KERNEL_LOG if kernel else instance, case["format"], case["lines"])
    findings = rig.evaluate(3.0)
    matched = [f for f in findings if f.id == rule.id]
    if not case["match"]:
        assert matched == []
        return
    (finding,) = matched
    assert finding.instance == (None if kernel else instance) and finding.node == "spark1"
    assert (finding.severity, finding.title, finding.fix, finding.action) == (
        rule.severity,
        rule.title_for(next((m for p in rule.log.any if (m := p.search(finding.lines[0].text))), None)),
        rule.fix,
        rule.action,
    )
    for raw in case["lines"]:
        stamp, text = parse_log_line(case["format"], raw)
        assert stamp is not None
        # One clock: the line's stamp in the operator's zone, the engine's own time at its head left out.
        shown = f"{fmt_clock(stamp.timestamp(), date=True)}  {without_engine_clock(text)}"
        assert shown in finding.evidence, f"{shown!r} not in {finding.evidence}"
    assert [line.text for line in finding.lines][: len(case["lines"])] == [
        parse_log_line(case["format"], raw)[1] for raw in case["lines"]
    ]


def test_the_page_cache_finding_shows_the_memory_behind_it() -> None:
    rig = Rig()
    rig.step(0.0, refused(), sample=incident_sample())
    (case,) = [c for c in CASES if c["rule"] == "page-cache-blocks-start" and c["format"] == "journal"]
    rig.log("gptoss", "journal", case["lines"])
    rig.evaluate(1.0)
    evidence = text_of(rig.get("page-cache-blocks-start", "gptoss"))
    # tests/data/host/README.md: MemAvailable 30.0 GiB, Cached − Shmem 90.0 GiB, leftovers 1.9 GiB
    assert "MemAvailable 30.0 GiB of 121.7 GiB" in evidence
    assert "page cache drop_caches can free (Cached − Shmem) 90.0 GiB" in evidence
    assert "/dev/shm leftovers hold 1.9 GiB" in evidence
    assert "(at 10:30:00 UTC)" in evidence  # the time of the poll the numbers come from


# --- detector rules: a positive and a near miss each ----------------------------------------------

DetectorCase = Callable[[], None]
DETECTOR_CASES: dict[str, dict[bool, list[DetectorCase]]] = {}


def detector_case(rule_id: str, match: bool) -> Callable[[DetectorCase], DetectorCase]:
    def register(fn: DetectorCase) -> DetectorCase:
        DETECTOR_CASES.setdefault(rule_id, {True: [], False: []})[match].append(fn)
        return fn

    return register


@detector_case("launch-readiness", True)
def launch_readiness_short() -> None:
    # tests/data/host/frame-incident.txt: MemAvailable 30.0 GiB; 0.9 × 121.7 GiB needs 109.5 GiB
    rig = Rig()
    assert "launch-readiness" not in {f.id for f in rig.step(0.0, refused(), sample=incident_sample())}
    rig.step(1.0, refused())
    finding = rig.get("launch-readiness", "gptoss")
    assert "needs 109.5 GiB (0.9 × 121.7 GiB MemTotal), 30.0 GiB available: short by 79.5 GiB" in text_of(finding)
    assert finding.action == "drop-caches"


@detector_case("launch-readiness", False)
def launch_readiness_just_fits() -> None:
    rig = Rig(SERVING.replace("gpu_memory_utilization = 0.9", "gpu_memory_utilization = 0.24"))
    for t in range(3):  # 0.24 × 121.7 GiB = 29.2 GiB ≤ 30.0 GiB available
        rig.step(float(t), refused(), sample=incident_sample())
    assert "launch-readiness" not in rig.ids()


# A vLLM stopped beside an Ollama (write-up 000's spark1), read with tests/data/host/frame-incident.txt:
# MemAvailable 30.0 GiB; 0.5 × 121.7 GiB needs 60.8 GiB, short by 30.8 GiB.
BESIDE_OLLAMA = (
    SERVING.replace("gpu_memory_utilization = 0.9", "gpu_memory_utilization = 0.5")
    + """
[[nodes.vllm]]
name = "ollama"
engine = "ollama"
port = 11434
"""
)
LLAMA70B = 46.5 * GIB  # more than the shortfall
QWEN8B = 6.2 * GIB  # less


def ollama_ps(sizes: Mapping[str, float], expired_s_before: float) -> str:
    """``/api/ps`` holding models of these sizes, each due to unload ``expired_s_before`` seconds before
    the poll at WALL0 (negative: after it)."""
    expires = datetime.fromtimestamp(WALL0 - expired_s_before, UTC).isoformat().replace("+00:00", "Z")
    models = [
        {"name": name, "model": name, "size": int(size), "size_vram": int(size), "expires_at": expires}
        for name, size in sizes.items()
    ]
    return json.dumps({"models": models})


def beside_ollama(rig: Rig, t: float, ps: str) -> tuple[Finding, ...]:
    rig.poll(t, refused(), instance="gptoss")
    rig.poll(t, ok("Ollama is running"), ps, instance="ollama")
    rig.host(t, incident_sample())
    return rig.evaluate(t)


@detector_case("held-models-block-start", True)
def held_models_cover_the_shortfall() -> None:
    rig = Rig(BESIDE_OLLAMA)
    ps = ollama_ps({"llama3.3:70b": LLAMA70B, "qwen3:8b": QWEN8B}, expired_s_before=600.0)
    assert "held-models-block-start" not in {f.id for f in beside_ollama(rig, 0.0, ps)}  # opens after 2 polls
    beside_ollama(rig, 1.0, ps)
    finding = rig.get("held-models-block-start", "gptoss")
    text = text_of(finding)
    assert "short by 30.8 GiB" in text
    assert "Ollama ollama holds 52.7 GiB in loaded models, more than the 30.8 GiB it is short of" in text
    # The overdue one first, with its size and how long past its keep-alive.
    assert "Ollama ollama: llama3.3:70b loaded (46.5 GiB, 100% in GPU memory; overdue: 10m" in text
    assert finding.action is None  # the page cache is not what to drop
    assert "launch-readiness" not in rig.ids()  # suppressed: its fix (drop the page cache) would not do


@detector_case("held-models-block-start", False)
def held_models_short_of_the_shortfall() -> None:
    rig = Rig(BESIDE_OLLAMA)
    for t in range(3):  # 6.2 GiB held, 30.8 GiB short: letting it go would not be enough
        beside_ollama(rig, float(t), ollama_ps({"qwen3:8b": QWEN8B}, expired_s_before=-300.0))
    assert "held-models-block-start" not in rig.ids()
    assert "launch-readiness" in rig.ids()  # the start would still fail: that finding says so


@detector_case("shm-leftovers", True)
def shm_leftovers_after_a_crash() -> None:
    rig = Rig()
    rig.step(0.0, refused(), sample=incident_sample())
    rig.step(1.0, refused())
    finding = rig.get("shm-leftovers", None)
    assert finding.action == "drop-caches"
    assert "6 leftover entries in /dev/shm holding 1.9 GiB while no vLLM process runs" in text_of(finding)
    assert "psm_2b7e41f0 (100.0 MiB)" in text_of(finding)


@detector_case("shm-leftovers", False)
def shm_in_use_by_a_running_vllm() -> None:
    rig = Rig()
    healthy(rig, 4)  # frames-serving: vLLM processes run, so its /dev/shm entries are in use
    assert "shm-leftovers" not in rig.ids()


@detector_case("stale-workers", True)
def stale_workers_of_a_stopped_unit() -> None:
    rig = Rig(STALE)
    (sample,) = frames("frame-stale-workers.txt")
    rig.step(0.0, refused(), sample=sample)
    rig.step(1.0, refused())
    finding = rig.get("stale-workers", None)
    assert finding.action == "kill-workers"
    evidence = text_of(finding)
    assert "1 VLLM::Worker process alive while vllm-ds4-worker.service is inactive" in evidence
    assert "pid 5120 (parent 1): VLLM::Worker_TP0_EP0" in evidence


@detector_case("stale-workers", False)
def workers_of_a_running_unit() -> None:
    rig = Rig(STALE)
    (sample,) = frames(
        "frame-stale-workers.txt", {"ActiveState=inactive\nSubState=dead": "ActiveState=active\nSubState=running"}
    )
    for t in range(3):
        rig.step(float(t), refused(), sample=sample)
    assert "stale-workers" not in rig.ids()


@detector_case("exec-not-found", True)
def exec_not_found_status_127() -> None:
    rig = Rig(INCIDENT)
    rig.step(0.0, refused(), sample=incident_sample())
    finding = rig.get("exec-not-found", "ds4")
    evidence = text_of(finding)
    assert "vllm-ds4-head.service is activating (auto-restart), exit status 127, 14 restarts" in evidence
    assert "ExecStart runs /home/milo/vllm-scripts/vllm-head-090.sh, which does not exist on the node" in evidence
    assert finding.action is None
    # The unit also restarts in a loop, but the specific finding says why: crash-loop is suppressed.
    assert "crash-loop" not in rig.ids("ds4")


@detector_case("exec-not-found", False)
def exit_status_1_is_not_a_missing_program() -> None:
    rig = Rig(INCIDENT)
    sample = incident_sample({"ExecMainStatus=127": "ExecMainStatus=1", "ExecPathExists=no": "ExecPathExists=yes"})
    rig.step(0.0, refused(), sample=sample)
    assert "exec-not-found" not in rig.ids()
    assert "crash-loop" in rig.ids("ds4")  # a crash loop all the same


@detector_case("crash-loop", True)
def crash_loop_of_a_restarting_container() -> None:
    rig = Rig(INCIDENT)
    rig.poll(0.0, refused())
    rig.host(0.0, incident_sample())
    # context/001: the container's command repeats `vllm serve`; each attempt dies at argument parsing.
    rig.log(
        "qwen",
        "docker",
        ["2026-05-30T08:29:41.2Z INFO 05-30 08:29:41 [api_server.py:1287] vLLM API server version 0.20.1"],
    )
    rig.log("qwen", "docker", ["2026-05-30T08:29:41.5Z vllm: error: unrecognized arguments: serve"])
    rig.evaluate(0.0)
    finding = rig.get("crash-loop", "qwen")
    evidence = text_of(finding)
    assert "qwen36-35b is restarting: 23 restarts, last exit status 2" in evidence
    assert (
        "first error of the last attempt: 2026-05-30 08:29:41 UTC  vllm: error: unrecognized arguments: serve"
        in evidence
    )
    assert [line.text for line in finding.lines] == ["vllm: error: unrecognized arguments: serve"]
    assert "serve-twice" in rig.ids("qwen")


@detector_case("crash-loop", True)
def crash_loop_restarts_rising() -> None:
    rig = Rig(INCIDENT)
    for t, count in ((0.0, 0), (30.0, 1), (60.0, 2)):
        sample = incident_sample({"Status=restarting\nRestartCount=23": f"Status=running\nRestartCount={count}"})
        rig.step(t, refused(), sample=sample)
    assert "+2 since 10:30:00 UTC" in text_of(rig.get("crash-loop", "qwen"))


@detector_case("crash-loop", False)
def two_restarts_long_ago_is_not_a_loop() -> None:
    rig = Rig(INCIDENT)
    sample = incident_sample({"Status=restarting\nRestartCount=23": "Status=running\nRestartCount=2"})
    for t in range(3):
        rig.step(float(t), ok(), MTP2[t], sample)
    assert "crash-loop" not in rig.ids("qwen")


@detector_case("engine-wedged", True)
def wedged_after_five_polls_without_a_token() -> None:
    rig = Rig()
    # The same scrape again and again: 11 requests running, no token generated, /health 200.
    for t in range(6):
        rig.step(float(t), ok(), MTP2[0], serving_sample(41 + t))
        assert ("engine-wedged" in rig.ids()) == (t == 5), t  # intervals from t=1: the 5th is at t=5
    finding = rig.get("engine-wedged", "gptoss")
    assert finding.action == "restart"
    assert "11 running, 0 waiting at 10:30:05 UTC" in finding.evidence
    assert "0 tokens generated over the last 1.0 s" in finding.evidence
    assert "holding since 10:30:01 UTC (5 polls in a row)" in finding.evidence


@detector_case("engine-wedged", False)
def idle_engine_is_not_wedged() -> None:
    rig = Rig()
    idle = edit(MTP2[0], {"vllm:num_requests_running": 0, "vllm:num_requests_waiting": 0})
    for t in range(8):
        rig.step(float(t), ok(), idle, serving_sample(41 + t))
    assert "engine-wedged" not in rig.ids()


@detector_case("engine-wedged", False)
def four_polls_without_tokens_are_not_yet_wedged() -> None:
    rig = Rig()
    for t in range(5):
        rig.step(float(t), ok(), MTP2[0])
    assert "engine-wedged" not in rig.ids()


def test_an_action_of_sparktuis_own_opens_no_wedge_while_it_runs_and_settles() -> None:
    """A restart's warmup: its cold request runs with no token for half a minute. While the action runs
    and for ACTION_SETTLE_S after, engine-wedged does not open; a wedge that outlasts that opens after
    its open_after polls as usual."""
    rig = Rig()
    rig.engine.action_started("spark1", "gptoss")
    for second in range(12):  # 11 requests running, no token: wedged in shape
        rig.step(float(second), ok(), MTP2[0], serving_sample(41 + second))
        assert "engine-wedged" not in rig.ids(), second
    rig.engine.action_ended("spark1", "gptoss", 11.0)
    settled = 11.0 + ACTION_SETTLE_S
    t = 12.0
    while t < settled:
        rig.step(t, ok(), MTP2[0])
        assert "engine-wedged" not in rig.ids(), t
        t += 1.0
    for polls in range(1, 6):  # the hold is over: the streak starts from nothing
        rig.step(t, ok(), MTP2[0])
        assert ("engine-wedged" in rig.ids()) == (polls == 5), polls
        t += 1.0


def test_a_hold_on_one_instance_leaves_the_others_and_other_nodes_judged() -> None:
    rig = Rig()
    rig.engine.action_started("spark1", "another-instance")
    rig.engine.action_started("spark2", None)
    for t in range(6):
        rig.step(float(t), ok(), MTP2[0], serving_sample(41 + t))
    assert "engine-wedged" in rig.ids("gptoss")
    assert rig.engine.held("spark2", "gptoss", 5.0) and not rig.engine.held("spark1", "gptoss", 5.0)


def stretched(rig: Rig, spacing: float, first: int, last: int) -> float:
    """mtp2-steady at 1 s spacing up to ``first``, then ``spacing`` s apart: the same tokens over a
    longer time, i.e. decoding that much slower while the same requests run."""
    t = 0.0
    for i in range(last + 1):
        if i > 0:
            t += 1.0 if i < first else spacing
        rig.step(t, ok(), MTP2[i], serving_sample(41 + i))
    return t


@detector_case("decode-stall", True)
def decode_five_times_slower() -> None:
    rig = Rig()
    stretched(rig, 5.0, first=12, last=29)  # 11 polls to learn from, then 18 slow ones, 5 s apart
    finding = rig.get("decode-stall", "gptoss")
    assert "holding since" in text_of(finding) and "recent median" in text_of(finding)
    assert "engine-wedged" not in rig.ids()


def test_a_poll_judged_again_teaches_the_baselines_nothing_more() -> None:
    """The rules may run on one poll more than once (a screen redraws): the decoding baseline and the
    draft position's learn each poll once, so a finding's "recent median" is the polls' median."""
    rig = Rig()
    stretched(rig, 1.0, first=1, last=14)
    memory = rig.engine._memory(rig.name).instance("gptoss")
    learned = (len(memory.gen_history), len(memory.gen_recent), len(memory.spec_history))
    assert learned[0] > 0 and learned[2] > 0
    for _ in range(3):
        rig.evaluate(14.0)
    assert (len(memory.gen_history), len(memory.gen_recent), len(memory.spec_history)) == learned


@detector_case("decode-stall", False)
def decode_a_third_slower_is_normal_variation() -> None:
    rig = Rig()
    stretched(rig, 1.5, first=12, last=29)
    assert "decode-stall" not in rig.ids()


@detector_case("spec-position-collapse", True)
def last_position_under_the_catalogue_floor() -> None:
    rig = Rig()
    for t in range(4):  # mtp3-poor-pos2: position 2 accepted in about 0.16 of drafts
        rig.step(float(t), ok(), MTP3[t], serving_sample(41 + t))
    finding = rig.get("spec-position-collapse", "gptoss")
    evidence = text_of(finding)
    assert "draft position 2 (the last of 3) accepted in 0.154 of drafts" in evidence
    assert "under the catalogue's 0.2" in evidence
    assert "num_speculative_tokens = 3" in evidence


@detector_case("spec-position-collapse", True)
def last_position_under_half_its_own_baseline() -> None:
    # The catalogue's floor lowered to 0.1, so only the baseline can fire: mtp2-steady's position 1
    # (about 0.56) drops to 0.4 of its rate from scrape 15 on.
    rig = Rig(overrides={"spec-position-collapse.min_acceptance": 0.1}, window_s=3.0)
    series = (
        "vllm:spec_decode_num_accepted_tokens_per_pos_total"
        '{engine="0",model_name="RedHatAI/Qwen3.6-35B-A3B-NVFP4",position="1"}'
    )
    base = value_of(MTP2[15], series)
    for i in range(30):
        text = MTP2[i]
        if i > 15:
            text = with_value(text, series, base + (value_of(text, series) - base) * 0.4)
        rig.step(float(i), ok(), text, serving_sample(41 + i))
    evidence = text_of(rig.get("spec-position-collapse", "gptoss"))
    assert "draft position 1 (the last of 2)" in evidence
    assert "under 0.5 × baseline" in evidence
    assert "under the catalogue's" not in evidence


@detector_case("spec-position-collapse", False)
def healthy_mtp2_last_position() -> None:
    rig = Rig()
    for t in range(30):  # position 1 accepted in about 0.56 of drafts
        rig.step(float(t), ok(), MTP2[t], serving_sample(41 + t))
    assert "spec-position-collapse" not in rig.ids()


def kv_scrapes(kv: float, preempting: bool) -> list[str]:
    return [
        edit(text, {"vllm:kv_cache_usage_perc": kv, "vllm:num_preemptions_total": 3.0 * i if preempting else 0.0})
        for i, text in enumerate(MTP2)
    ]


@detector_case("kv-pressure", True)
def kv_full_and_preempting() -> None:
    rig = Rig()
    for t, text in enumerate(kv_scrapes(0.95, preempting=True)[:4]):
        rig.step(float(t), ok(), text, serving_sample(41 + t))
    evidence = text_of(rig.get("kv-pressure", "gptoss"))
    assert "KV cache 95% full at 10:30:03 UTC (threshold 90%)" in evidence
    assert "3 preemptions over the last 1.0 s (3.00/s)" in evidence


@detector_case("kv-pressure", False)
def kv_just_under_the_threshold() -> None:
    rig = Rig()
    for t, text in enumerate(kv_scrapes(0.89, preempting=True)[:6]):
        rig.step(float(t), ok(), text)
    assert "kv-pressure" not in rig.ids()


@detector_case("kv-pressure", False)
def kv_full_without_preemptions() -> None:
    rig = Rig()
    for t, text in enumerate(kv_scrapes(0.95, preempting=False)[:6]):
        rig.step(float(t), ok(), text)
    assert "kv-pressure" not in rig.ids()


def restarted_sample(seq: int) -> HostSample:
    """``serving_sample`` of a container started again a second before the frame was read."""
    sample = serving_sample(seq)
    services = {
        name: dataclasses.replace(service, started_epoch=sample.remote_epoch - 1.0)
        for name, service in (sample.services or {}).items()
    }
    return dataclasses.replace(sample, services=services)


def restart_then(rig: Rig, fresh: str) -> None:
    """Serving, then refused while the container loads (started again), then up again with ``fresh``
    scrapes."""
    healthy(rig, 2)
    rig.step(2.0, refused(), sample=restarted_sample(43))
    assert rig.view(2.0).instances[0].status.state is State.LOADING
    rig.step(40.0, refused(), sample=restarted_sample(44))
    rig.step(41.0, ok(), fresh, serving_sample(45))


@detector_case("cold-jit", True)
def cold_after_a_restart() -> None:
    rig = Rig()
    never = {"vllm:num_requests_running": 0, "vllm:num_requests_waiting": 0}
    cold = edit(FRESH, {**never, "vllm:generation_tokens_total": 0, "vllm:request_success_total": 0})
    restart_then(rig, cold)
    finding = rig.get("cold-jit", "gptoss")
    assert finding.action == "warmup" and finding.severity is Severity.INFO
    assert "no request finished and no token generated since the start" in finding.evidence
    rig.step(42.0, ok(), cold)
    assert "cold-jit" in rig.ids()
    rig.step(43.0, ok(), FRESH)  # the first requests finish: warm
    assert "cold-jit" not in rig.ids()
    assert "cold-jit" in [f.id for f in rig.engine.history("spark1")]


@detector_case("cold-jit", False)
def asleep_right_after_the_restart() -> None:
    """Started, then put to sleep before any request: it cannot serve until woken, so it is not
    "cold, the first request will wait"; waking it is the operator's call."""
    rig = Rig()
    never = {"vllm:num_requests_running": 0, "vllm:num_requests_waiting": 0}
    cold = edit(FRESH, {**never, "vllm:generation_tokens_total": 0, "vllm:request_success_total": 0})
    restart_then(rig, put_to_sleep(cold, 1))
    rig.step(42.0, ok(), put_to_sleep(cold, 1))
    assert "cold-jit" not in rig.ids()
    rig.step(43.0, ok(), cold)  # woken, still never served: cold after all
    assert "cold-jit" in rig.ids()


@detector_case("engine-wedged", False)
def asleep_with_frozen_gauges_is_not_wedged() -> None:
    rig = Rig()
    for t in range(8):  # the wedged case's scrapes, from an engine put to sleep
        rig.step(float(t), ok(), put_to_sleep(MTP2[0], 1), serving_sample(41 + t))
    assert "engine-wedged" not in rig.ids()


@detector_case("cold-jit", False)
def served_right_after_the_restart() -> None:
    rig = Rig()
    restart_then(rig, FRESH)  # restart/scrape-005: 5 requests already finished
    assert "cold-jit" not in rig.ids()


@detector_case("cold-jit", False)
def a_quiet_instance_whose_start_time_wobbles_has_not_restarted() -> None:
    """The unit's start time, read through two clocks, moves by milliseconds from frame to frame; an
    instance that then sits idle is not a new, cold start (seen on the demo's quiet node)."""
    rig = Rig()
    healthy(rig, 3)
    frozen = MTP2[2]
    first = serving_sample(50)
    services = first.services or {}
    for i in range(4, 200):
        wobble = 0.01 * (i % 3 - 1)
        moved = {
            name: dataclasses.replace(service, started_epoch=(service.started_epoch or 0.0) + wobble)
            for name, service in services.items()
        }
        rig.step(float(i), ok(), frozen, dataclasses.replace(first, seq=50 + i, services=moved))
        assert "cold-jit" not in rig.ids(), i


@detector_case("engine-dead", True)
def health_503_twice() -> None:
    rig = Rig()
    healthy(rig, 2)
    rig.step(2.0, ok(status=503))
    assert "engine-dead" not in rig.ids()
    rig.step(3.0, ok(status=503))
    finding = rig.get("engine-dead", "gptoss")
    assert "gptoss: engine dead (/health 503) (at 10:30:03 UTC)" in finding.evidence
    assert finding.action == "restart"


@detector_case("engine-dead", False)
def health_500_is_not_engine_dead() -> None:
    rig = Rig()
    for t in range(3):
        rig.step(float(t), ok(status=500))
    assert "engine-dead" not in rig.ids()


@detector_case("node-vanished", True)
def http_and_ssh_die_together() -> None:
    rig = Rig()
    healthy(rig, 3)
    for t in (3.0, 4.0):
        rig.poll(t, timeout())
        rig.host(t, problem="ssh: spark1 (10.0.0.1:22): connection lost")
        rig.evaluate(t)
    evidence = text_of(rig.get("node-vanished", None))
    assert "HTTP unanswered since 10:30:03 UTC: gptoss: /health no answer within 2 s" in evidence
    assert "SSH failing since 10:30:03 UTC: ssh: spark1 (10.0.0.1:22): connection lost" in evidence


@detector_case("node-vanished", True)
def http_dies_and_the_sampler_falls_silent() -> None:
    rig = Rig()
    healthy(rig, 3)  # the last host sample arrives at t=2
    for t in range(3, 20):
        rig.step(float(t), timeout())
    assert "no host sample for 17 s" in text_of(rig.get("node-vanished", None))


@detector_case("node-vanished", False)
def http_dies_but_ssh_still_answers() -> None:
    rig = Rig()
    healthy(rig, 3)
    for t in range(3, 20):
        rig.step(float(t), timeout(), sample=serving_sample(41 + t))
    assert "node-vanished" not in rig.ids()


@detector_case("port-refused-loading", True)
def refused_while_the_container_runs() -> None:
    rig = Rig()
    rig.step(0.0, refused(), sample=serving_sample())
    finding = rig.get("port-refused-loading", "gptoss")
    assert finding.severity is Severity.INFO
    assert "gptoss: loading for 2h19m: vllm_gptoss is running, the port is not open yet (at 10:30:00 UTC)" in text_of(
        finding
    )


@detector_case("port-refused-loading", False)
def refused_while_the_container_is_stopped() -> None:
    rig = Rig()
    stopped = frames("frames-serving.txt", {"Status=running": "Status=exited"})[0]
    rig.step(0.0, refused(), sample=stopped)
    assert "port-refused-loading" not in rig.ids()


# --- the GPU's clocks, power and throttle reasons (issue 21), from the real H100 exporter capture ----

GPU_SERVING = SERVING.replace(
    "[[nodes.vllm]]", '[nodes.gpu_exporter]\nurl = "http://10.0.0.1:9835/metrics"\n[[nodes.vllm]]', 1
)
# tests/data/exporters/nvidia_gpu_exporter.prom: a busy H100 (util 1, 631.95 W, SM 1,980 of 1,980 MHz,
# no clock-event reason active); each case changes the series it is about.
H100_BUSY = (DATA / "exporters" / "nvidia_gpu_exporter.prom").read_text()


def gpu_polls(page: str, polls: int = 3) -> Rig:
    """A serving node whose GPU exporter answers ``page`` at every poll."""
    rig = Rig(GPU_SERVING)
    for i in range(polls):
        rig.poll(float(i), ok(), MTP2[i], gpu=page)
        rig.evaluate(float(i))
    return rig


@detector_case("gpu-thermal-slowdown", True)
def gpu_thermal_slowdown_active() -> None:
    page = edit(
        H100_BUSY,
        {
            "nvidia_smi_clocks_event_reasons_sw_thermal_slowdown": 1,
            "nvidia_smi_temperature_gpu": 87,
            "nvidia_smi_clocks_current_sm_clock_hz": 8.1e8,
        },
    )
    finding = gpu_polls(page).get("gpu-thermal-slowdown", None)
    assert "GPU clocks held back by SW thermal slowdown: 87 °C, 632.0 W, 100 % busy, SM 810 MHz (of 1,980 MHz)" in (
        text_of(finding)
    )
    assert "gpu-clock-low" not in gpu_polls(page, polls=4).ids()  # the thermal finding says why already


@detector_case("gpu-thermal-slowdown", False)
def gpu_power_capped_is_not_thermal() -> None:
    # loaded-q-perf.txt of the same H100: "SW Power Cap: Active" under load, no thermal reason.
    rig = gpu_polls(edit(H100_BUSY, {"nvidia_smi_clocks_event_reasons_sw_power_cap": 1}))
    assert "gpu-thermal-slowdown" not in rig.ids()


@detector_case("gpu-clock-low", True)
def gpu_busy_with_the_clock_stuck_low() -> None:
    page = edit(H100_BUSY, {"nvidia_smi_clocks_current_sm_clock_hz": 8.5e8})
    rig = gpu_polls(page, polls=2)
    assert "gpu-clock-low" not in rig.ids()  # open_after 3 polls
    rig.poll(2.0, ok(), MTP2[2], gpu=page)
    rig.evaluate(2.0)
    finding = rig.get("gpu-clock-low", None)
    assert "GPU busy with its clock low: 59 °C, 632.0 W, 100 % busy, SM 850 MHz (of 1,980 MHz); no clock-event " in (
        text_of(finding)
    )


@detector_case("gpu-clock-low", False)
def gpu_idle_at_a_low_clock() -> None:
    # idle-query.csv of the same H100: 345 MHz at 0 % is a GPU at rest, not a stuck one.
    page = edit(H100_BUSY, {"nvidia_smi_clocks_current_sm_clock_hz": 3.45e8, "nvidia_smi_utilization_gpu_ratio": 0})
    assert "gpu-clock-low" not in gpu_polls(page, polls=4).ids()
    assert "gpu-clock-low" not in gpu_polls(H100_BUSY, polls=4).ids()  # busy at its top clock


@detector_case("gpu-power-low", True)
def gpu_busy_at_idle_power() -> None:
    page = edit(H100_BUSY, {"nvidia_smi_utilization_gpu_ratio": 0.96, "nvidia_smi_power_draw_watts": 20.4})
    finding = gpu_polls(page, polls=4).get("gpu-power-low", None)
    assert "GPU reads 96 % busy but draws 20.4 W, under 30 W" in text_of(finding)


@detector_case("gpu-power-low", False)
def gpu_busy_at_full_power_or_idle_at_low_power() -> None:
    assert "gpu-power-low" not in gpu_polls(H100_BUSY, polls=4).ids()
    idle = edit(H100_BUSY, {"nvidia_smi_utilization_gpu_ratio": 0, "nvidia_smi_power_draw_watts": 11.2})
    assert "gpu-power-low" not in gpu_polls(idle, polls=4).ids()


def test_a_stale_gpu_reading_opens_no_gpu_finding() -> None:
    page = edit(H100_BUSY, {"nvidia_smi_utilization_gpu_ratio": 0.96, "nvidia_smi_power_draw_watts": 20.4})
    rig = gpu_polls(page, polls=1)
    for t in range(10, 30):  # the exporter stopped answering after the first poll: its reading goes stale
        rig.poll(float(t), ok(), MTP2[t % 30])
        rig.evaluate(float(t))
        assert rig.view(float(t)).gpu_age_s == t
    assert "gpu-power-low" not in rig.ids()


# --- the fabric between the ranks of a job (issue 21): tests/data/fabric's mlx5 readings, 10 s apart ---

# spark2 is the job's worker (evaluated: the rig's first node), spark1 its head serving mtp2-steady.
JOB = """
poll_interval_s = 1.0
[[nodes]]
name = "spark2"
host = "10.0.0.2"
[nodes.gpu_exporter]
url = "http://10.0.0.2:9835/metrics"
[[nodes.vllm]]
name = "qwen235"
role = "worker"
job = "tp2"
[[nodes]]
name = "spark1"
host = "10.0.0.1"
[[nodes.vllm]]
name = "qwen235"
port = 8000
role = "head"
job = "tp2"
"""


def _answer(ethtool: str, *, state: str = "up", speed: str = "200000", sha: str | None = None) -> str:
    return fabric_answer(ethtool, state=state, speed=speed, nccl=nccl_lines() if sha else "", sha=sha)


def job_polls(
    *,
    generating: bool = True,
    gpu: str = H100_BUSY,
    ethtool: tuple[str, str] = (ETHTOOL[0], ETHTOOL[1]),
    state: str = "up",
    speed: str = "200000",
    shas: tuple[str | None, str | None] = (None, None),
    polls: int = 4,
) -> Rig:
    """The job polled every 10 s: the head's scrapes (moving, or the same one again: no token), the
    worker's GPU page, and a fabric reading of each node (the worker's link and NCCL, the head's NCCL)."""
    rig = Rig(JOB)
    for i in range(polls):
        t = 10.0 * i
        scrape = MTP2[i] if generating else MTP2[0]
        rig.fleet.apply(NodeObservation("spark1", t, WALL0 + t, (ServerObservation("qwen235", ok(), ok(scrape)),)))
        rig.fleet.apply(NodeObservation("spark2", t, WALL0 + t, gpu_exporter=ok(gpu)))
        # the counters go on as between the two readings
        reading = ethtool[0] if i == 0 else _advanced(ethtool, i - 1)
        text = _answer(reading, state=state, speed=speed, sha=shas[0])
        rig.fleet.apply_host(HostUpdate("spark2", t, fabric=text))
        if shas[1] is not None:
            rig.fleet.apply_host(HostUpdate("spark1", t, fabric=_answer(ETHTOOL[0], sha=shas[1])))
        rig.evaluate(t)
    return rig


# The readings without the drop, pause and error counters: a healthy link's.
CLEAN = tuple(
    "".join(line + "\n" for line in text.splitlines() if not re.search("discards|out_of_buffer|pause|symbol", line))
    for text in ETHTOOL
)


def _advanced(ethtool: tuple[str, str], steps: int) -> str:
    """The second reading moved on by ``steps`` more times its difference from the first."""
    first = {k: int(v) for k, _, v in (line.strip().partition(": ") for line in ethtool[0].splitlines()[1:])}
    lines = ["NIC statistics:"]
    for line in ethtool[1].splitlines()[1:]:
        name, _, value = line.strip().partition(": ")
        lines.append(f"     {name}: {int(value) + steps * (int(value) - first[name])}")
    return "\n".join(lines) + "\n"


@detector_case("link-degraded", True)
def link_full_at_a_tenth_of_its_speed() -> None:
    # 13.0 Gb/s of 200 Gb/s (6.5 %) while rx_discards_phy, rx_out_of_buffer and pause frames rise.
    finding = job_polls().get("link-degraded", None)
    assert "enp1s0f0np0 moves 13.0 Gb/s, 6.5 % of its 200 Gb/s, while it drops or pauses" in text_of(finding)
    assert "rx_out_of_buffer 221/s" in text_of(finding) and "job tp2 generates" in text_of(finding)


@detector_case("link-degraded", True)
def link_negotiated_at_half_speed() -> None:
    finding = job_polls(ethtool=(CLEAN[0], CLEAN[1]), speed="100000").get("link-degraded", None)
    assert "enp1s0f0np0 negotiated 100 Gb/s, below the 200 Gb/s it is capable of" in text_of(finding)


@detector_case("link-degraded", True)
def link_down_while_the_job_runs() -> None:
    # The head answers but makes no token: the link is down (operstate down, speed unreadable).
    finding = job_polls(generating=False, ethtool=(CLEAN[0], CLEAN[0]), state="down", speed="").get(
        "link-degraded", None
    )
    assert "RDMA link enp1s0f0np0 is down while job tp2 generates 0 tok/s" in text_of(finding)


@detector_case("link-degraded", False)
def link_quiet_while_the_job_is_idle_or_slow_without_drops() -> None:
    assert "link-degraded" not in job_polls(generating=False).ids()
    # 13 Gb/s with no drop and no pause: a decoding job's light traffic on a healthy link
    assert "link-degraded" not in job_polls(ethtool=(CLEAN[0], CLEAN[1])).ids()


@detector_case("rank-spinning", True)
def rank_busy_at_idle_power_while_the_job_makes_no_token() -> None:
    page = edit(H100_BUSY, {"nvidia_smi_utilization_gpu_ratio": 0.96, "nvidia_smi_power_draw_watts": 20.4})
    rig = job_polls(generating=False, gpu=page)
    finding = rig.get("rank-spinning", None)
    assert "this rank's GPU reads 96 % busy at 20.4 W while job tp2 generates 0 tok/s" in text_of(finding)
    assert "spark2 worker   96%   20 W  13.0 Gb/s 6.5 %" in text_of(finding)
    assert "gpu-power-low" not in rig.ids()  # the rank's finding says more


@detector_case("rank-spinning", False)
def rank_busy_at_idle_power_while_tokens_move() -> None:
    page = edit(H100_BUSY, {"nvidia_smi_utilization_gpu_ratio": 0.96, "nvidia_smi_power_draw_watts": 20.4})
    rig = job_polls(generating=True, gpu=page)
    assert "rank-spinning" not in rig.ids()
    assert "gpu-power-low" in rig.ids()  # still odd, but not a wedged collective


@detector_case("nccl-mismatch", True)
def ranks_map_different_nccl() -> None:
    finding = job_polls(shas=("a1" * 32, "b2" * 32), polls=2).get("nccl-mismatch", None)
    assert f"this node's vLLM maps NCCL a1a1a1a1a1a1 ({LIBNCCL})" in text_of(finding)
    assert "spark1 maps b2b2b2b2b2b2: the ranks of job tp2 run different NCCL libraries" in text_of(finding)


@detector_case("nccl-mismatch", False)
def ranks_map_the_same_nccl() -> None:
    assert "nccl-mismatch" not in job_polls(shas=("a1" * 32, "a1" * 32), polls=2).ids()
    assert "nccl-mismatch" not in job_polls(shas=("a1" * 32, None), polls=2).ids()  # the head's not known


DETECTOR_CALLS = [
    pytest.param(fn, id=f"{rule_id}-{'match' if match else 'near-miss'}-{fn.__name__}")
    for rule_id, by_match in DETECTOR_CASES.items()
    for match, fns in by_match.items()
    for fn in fns
]


@pytest.mark.parametrize("case", DETECTOR_CALLS)
def test_detector_rule_against_its_evidence(case: DetectorCase) -> None:
    case()


def test_every_rule_has_evidence_that_matches_and_a_near_miss_that_does_not() -> None:
    covered: dict[str, set[bool]] = {}
    for case in CASES:
        covered.setdefault(case["rule"], set()).add(bool(case["match"]))
    for rule_id, by_match in DETECTOR_CASES.items():
        covered.setdefault(rule_id, set()).update(m for m, fns in by_match.items() if fns)
    missing = {rule.id: {True, False} - covered.get(rule.id, set()) for rule in CATALOGUE.rules}
    assert {rule_id: gap for rule_id, gap in missing.items() if gap} == {}
    assert set(covered) <= set(CATALOGUE.ids)


# --- hysteresis and lifetimes ---------------------------------------------------------------------


def test_a_detector_finding_opens_after_open_after_survives_one_healthy_poll_and_clears_after_clear_after() -> None:
    rig = Rig()  # engine-dead: open_after 2, clear_after_s 10
    healthy(rig, 2)
    rig.step(2.0, ok(status=503))
    assert "engine-dead" not in rig.ids()
    rig.step(3.0, ok(status=503))
    opened = rig.get("engine-dead", "gptoss")
    assert opened.opened_at == 3.0 and opened.active
    rig.step(4.0, ok(), MTP2[4])  # one healthy poll: still open
    assert "engine-dead" in rig.ids()
    rig.step(5.0, ok(status=503))  # failing again: the clock for clearing starts over
    for t in range(6, 16):
        rig.step(float(t), ok(), MTP2[t])
        assert "engine-dead" in rig.ids(), t
    rig.step(16.0, ok(), MTP2[16])  # healthy for 10 s since t=6
    assert "engine-dead" not in rig.ids()
    (cleared,) = [f for f in rig.engine.history("spark1") if f.id == "engine-dead"]
    assert (cleared.opened_at, cleared.last_seen, cleared.cleared_at) == (3.0, 5.0, 16.0)
    assert not cleared.active
    assert rig.engine.active("spark1") == ()


def test_after_an_action_a_detector_finding_whose_condition_is_gone_clears_at_once() -> None:
    rig = Rig()  # engine-dead: open_after 2, clear_after_s 10
    healthy(rig, 2)
    rig.step(2.0, ok(status=503))
    rig.step(3.0, ok(status=503))
    assert "engine-dead" in rig.ids()
    rig.engine.action_started("spark1", "gptoss")
    rig.step(4.0, ok(status=503))  # the restart runs: still dead
    rig.engine.action_ended("spark1", "gptoss", 5.0)
    rig.step(6.0, ok(), MTP2[6])  # the first fresh reading after it: healthy, cleared at once
    assert "engine-dead" not in rig.ids()
    (cleared,) = [f for f in rig.engine.history("spark1") if f.id == "engine-dead"]
    assert cleared.cleared_at == 6.0
    # Long after the action, the ordinary clear time applies again.
    rig.step(5.0 + ACTION_SETTLE_S + 1, ok(status=503))
    rig.step(5.0 + ACTION_SETTLE_S + 2, ok(status=503))
    assert "engine-dead" in rig.ids()
    rig.step(5.0 + ACTION_SETTLE_S + 3, ok(), MTP2[8])
    assert "engine-dead" in rig.ids()


def lines_of(rule_id: str) -> tuple[LogFormat, list[str]]:
    case = next(c for c in CASES if c["rule"] == rule_id and c["match"])
    return case["format"], case["lines"]


def test_an_attempt_log_finding_clears_once_the_instance_has_been_up_for_healthy_s() -> None:
    rig = Rig()
    rig.step(0.0, refused(), sample=serving_sample())  # loading
    rig.log("gptoss", *lines_of("mamba-block-size"))
    rig.step(1.0, refused())
    assert "mamba-block-size" in rig.ids()
    for t in range(2, 123):  # fixed and started again: UP from t=2
        rig.step(float(t), ok(), IDLE)
        assert ("mamba-block-size" in rig.ids()) == (t < 122), t
    (cleared,) = [f for f in rig.engine.history() if f.id == "mamba-block-size"]
    assert (cleared.opened_at, cleared.cleared_at) == (1.0, 122.0)
    assert cleared.lines[0].text.startswith("AssertionError: In Mamba cache align mode")


def test_an_attempt_log_finding_clears_as_soon_as_the_restarted_instance_serves_a_request() -> None:
    """The incident's recovery: vLLM's start-up check failed, the operator fixed it and restarted; the
    first request served (the warmup) ends the failed start, long before healthy_s of quiet serving."""
    rig = Rig()
    rig.step(0.0, refused(), sample=incident_sample())
    (case,) = [c for c in CASES if c["rule"] == "page-cache-blocks-start" and c["format"] == "journal"]
    rig.log("gptoss", "journal", case["lines"])
    rig.step(1.0, refused())
    assert "page-cache-blocks-start" in rig.ids()
    rig.step(2.0, ok(), MTP2[0])  # serving again: no interval yet, nothing served to tell
    assert "page-cache-blocks-start" in rig.ids()
    rig.step(3.0, ok(), MTP2[1])  # tokens generated since the last poll
    assert "page-cache-blocks-start" not in rig.ids()
    (cleared,) = [f for f in rig.engine.history() if f.id == "page-cache-blocks-start"]
    assert cleared.cleared_at == 3.0


def test_an_attempt_log_finding_counts_healthy_s_from_serving_and_a_degraded_poll_does_not_restart_it() -> None:
    rig = Rig()
    rig.step(0.0, refused(), sample=serving_sample())
    rig.log("gptoss", *lines_of("mamba-block-size"))
    rig.step(1.0, refused())
    for t in range(2, 123):  # idle (no request to tell) from t=2; one /metrics answer is broken at t=60
        rig.step(float(t), ok(), "not prometheus {" if t == 60 else IDLE)
        if t == 60:
            assert rig.view(60.0).instances[0].status.state is State.DEGRADED
        assert ("mamba-block-size" in rig.ids()) == (t < 122), t


BESIDE_A_FALLBACK = (
    SERVING
    + """
[[nodes.vllm]]
name = "fallback"
port = 8001
"""
)


def test_a_kernel_attempt_finding_is_not_cleared_by_an_instance_that_served_through_it() -> None:
    """The driver ran out of memory while gptoss loaded; a fallback engine on the same box that served
    all along says nothing of that load: the finding clears when gptoss serves again."""
    rig = Rig(BESIDE_A_FALLBACK)
    rig.step(0.0, ok(), MTP2[0], serving_sample())
    rig.step(1.0, ok(), MTP2[1])
    rig.poll(2.0, refused(), instance="gptoss")  # restarting: loading
    rig.poll(2.0, ok(), MTP2[2], instance="fallback")
    rig.log(KERNEL_LOG, *lines_of("nvrm-out-of-memory"))
    rig.evaluate(2.0)
    assert "nvrm-out-of-memory" in rig.ids(None)
    for t in range(3, 20):  # the fallback generates tokens every poll
        rig.poll(float(t), refused(), instance="gptoss")
        rig.poll(float(t), ok(), MTP2[t], instance="fallback")
        rig.evaluate(float(t))
        assert "nvrm-out-of-memory" in rig.ids(None), t
    rig.step(20.0, ok(), MTP2[20])  # gptoss answers again: nothing served yet to tell
    rig.step(21.0, ok(), MTP2[21])  # and serves
    assert "nvrm-out-of-memory" not in rig.ids(None)


def test_an_attempt_log_finding_of_a_stopped_instance_clears_after_quiet_s() -> None:
    rig = Rig(overrides={"serve-twice.quiet_s": 300})
    rig.step(0.0, refused())
    rig.log("gptoss", "docker", ["2026-05-20T11:00:02Z vllm: error: unrecognized arguments: serve"])
    rig.step(1.0, refused())
    assert "serve-twice" in rig.ids()
    rig.step(300.0, refused())
    assert "serve-twice" in rig.ids()
    rig.step(301.0, refused())
    assert "serve-twice" not in rig.ids()


ENFORCE_EAGER = (
    "2026-05-28T10:00:20Z INFO [core.py:93] Initializing a V1 LLM engine (v0.20.1) with config: enforce_eager=True"
)
API_START = "2026-05-28T10:00:01Z INFO [api_server.py:1287] vLLM API server version 0.20.1"
FRESH_IDLE = edit(FRESH, {"vllm:num_requests_running": 0, "vllm:num_requests_waiting": 0})


def test_a_process_log_finding_lasts_as_long_as_the_process_and_clears_after_a_clean_restart() -> None:
    rig = Rig()
    rig.step(0.0, refused(), sample=serving_sample())
    rig.log("gptoss", "docker", [API_START, ENFORCE_EAGER])
    rig.step(1.0, refused())
    for t in range(2, 600, 50):  # serving for ten minutes: the launch flag is still in effect
        rig.step(float(t), ok(), IDLE)
        assert "enforce-eager" in rig.ids(), t
    rig.step(600.0, refused(), sample=serving_sample(50))  # restarted without the flag
    rig.log("gptoss", "docker", [API_START.replace("10:00:01", "10:10:01")])
    rig.step(601.0, refused())
    rig.step(640.0, ok(), FRESH_IDLE)
    rig.step(759.0, ok(), FRESH_IDLE)
    assert "enforce-eager" in rig.ids()
    rig.step(760.0, ok(), FRESH_IDLE)  # UP for healthy_s (120 s) since t=640
    assert "enforce-eager" not in rig.ids()
    assert "enforce-eager" in [f.id for f in rig.engine.history()]


def test_a_process_log_finding_stays_when_the_restarted_process_logs_it_again() -> None:
    rig = Rig()
    rig.step(0.0, refused(), sample=serving_sample())
    rig.log("gptoss", "docker", [API_START, ENFORCE_EAGER])
    rig.step(1.0, refused())
    rig.step(2.0, ok(), IDLE)
    rig.step(100.0, refused())
    rig.log("gptoss", "docker", [API_START, ENFORCE_EAGER])
    rig.step(101.0, refused())
    for t in range(140, 400, 20):
        rig.step(float(t), ok(), FRESH_IDLE)
    finding = rig.get("enforce-eager", "gptoss")
    assert "2 matches since 10:30:01 UTC" in finding.evidence
    assert len(finding.lines) == 2


def test_a_log_line_fed_twice_is_scanned_once() -> None:
    rig = Rig()
    healthy(rig, 1)
    rig.log("gptoss", "docker", [ENFORCE_EAGER])
    lines = rig.logs["gptoss"].tail(1)
    view = rig.view(1.0)
    rig.engine.evaluate(view, {"gptoss": lines}, 1.0)
    (finding,) = rig.engine.evaluate(view, {"gptoss": lines}, 2.0)
    assert "matches" not in text_of(finding)
    assert rig.engine.cursor("spark1", "gptoss") == 1


def test_unread_returns_only_lines_past_the_cursor_of_a_full_buffer() -> None:
    buffer = LogBuffer(max_lines=10_000)
    buffer.append_batch((None, f"line {i}") for i in range(12_000))
    assert unread(buffer, 11_995) == buffer.tail(5)
    assert unread(buffer, 12_000) == []
    assert len(unread(buffer, 0)) == 10_000  # older lines were dropped: what is held


def test_cleared_findings_are_kept_in_a_bounded_history() -> None:
    rig = Rig()
    rig.engine = DiagnosisEngine(CATALOGUE, history_limit=3)
    for cycle in range(5):
        t = cycle * 100.0
        rig.step(t, ok(status=503))
        rig.step(t + 1, ok(status=503))
        rig.step(t + 20, ok(), IDLE)
        rig.step(t + 30, ok(), IDLE)
    history = rig.engine.history("spark1")
    assert [f.opened_at for f in history] == [201.0, 301.0, 401.0]


# --- thresholds from the config -------------------------------------------------------------------


def test_threshold_overrides_change_the_outcome() -> None:
    rig = Rig(overrides={"engine-wedged.open_after": 8})
    for t in range(8):
        rig.step(float(t), ok(), MTP2[0])
    assert "engine-wedged" not in rig.ids()
    rig.step(8.0, ok(), MTP2[0])
    assert "engine-wedged" in rig.ids()

    rig = Rig(overrides={"spec-position-collapse.min_acceptance": 0.15})
    for t in range(6):
        rig.step(float(t), ok(), MTP3[t])
    assert "spec-position-collapse" not in rig.ids()

    rig = Rig(overrides={"kv-pressure.kv_usage_min": 0.85})
    for t, text in enumerate(kv_scrapes(0.89, preempting=True)[:4]):
        rig.step(float(t), ok(), text)
    assert "kv-pressure" in rig.ids()


def test_the_catalogue_is_unchanged_by_an_engine_with_overrides() -> None:
    DiagnosisEngine(CATALOGUE, {"engine-wedged.open_after": 8})
    assert CATALOGUE.rule("engine-wedged").param("open_after") == 5.0


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"engine-wedge.open_after": 3}, "diagnosis threshold 'engine-wedge.open_after': there is no rule"),
        (
            {"engine-wedged.polls": 3},
            "rule 'engine-wedged' has no parameter 'polls' (it has clear_after_s, open_after)",
        ),
        ({"engine-wedged.open_after": -1}, "must be a number ≥ 0 (got -1)"),
        ({"engine-wedged.open_after": True}, "must be a number ≥ 0 (got True)"),
        ({"open_after": 3}, "write it as '<rule id>.<parameter>'"),
    ],
)
def test_bad_overrides_name_the_key(overrides: Mapping[str, float], message: str) -> None:
    with pytest.raises(CatalogueError) as raised:
        DiagnosisEngine(CATALOGUE, overrides)
    assert message in str(raised.value)


# --- the data file is checked when it loads -------------------------------------------------------

# The main file (None) and vLLM's own (parsed as vLLM's, as load_catalogue does).
FILES = {
    None: (ROOT / "sparktui" / "data" / "failures.toml").read_text(),
    "vllm": (ROOT / "sparktui" / "engines" / "vllm" / "failures.toml").read_text(),
}


@pytest.mark.parametrize(
    ("engine", "old", "new", "message"),
    [
        (
            "vllm",
            "any = ['NV_ERR_NO_MEMORY',",
            "any = ['NV_ERR_NO_MEMORY(',",
            "rule 'oom-during-load' log.any[0]: bad regular expression",
        ),
        (
            "vllm",
            'name = "launch-not-ready"',
            'name = "launch-unready"',
            "rule 'launch-readiness' detector: 'name' must be",
        ),
        (
            "vllm",
            'severity = "warn"\ntitle = "vLLM would',
            'severity = "high"\ntitle = "vLLM would',
            "'severity' must be",
        ),
        ("vllm", 'id = "oom-during-load"', 'id = "page-cache-blocks-start"', "the id is used twice"),
        (None, "min_entries = 1.0", "min_entrys = 1.0", "unknown key 'min_entrys'"),
        ("vllm", 'action = "warmup"', 'action = "reboot"', "'action' must be one of"),
        (
            "vllm",
            'lifetime = "process"\n\n[[rule]]\nid = "tool',
            'lifetime = "forever"\n\n[[rule]]\nid = "tool',
            "'lifetime'",
        ),
        (
            "vllm",
            "(?i:mamba page size",
            "(?i)(?:mamba page size",
            "rule 'chunked-prefill-ssm' log.all[1]: bad regular expression",
        ),
        # kernel-log rules (issue 21): the stream, the lifetimes allowed, a title's field and its group
        (
            None,
            'stream = "kernel"\nany = [\'NVRM: .*',
            'stream = "dmesg"\nany = [\'NVRM: .*',
            "rule 'nvrm-out-of-memory' log: 'stream' must be vllm or kernel",
        ),
        (
            None,
            "any = ['AER: Uncorrectable \\(Fatal\\)']\nlifetime = \"quiet\"",
            "any = ['AER: Uncorrectable \\(Fatal\\)']\nlifetime = \"process\"",
            "rule 'pcie-aer-fatal' log: a kernel-log rule's 'lifetime' must be attempt or quiet",
        ),
        (
            None,
            "(?P<xid>\\d+)",
            "(?P<number>\\d+)",
            "rule 'gpu-xid': 'title' field {xid} must be a named group (?P<xid>…)",
        ),
    ],
)
def test_catalogue_errors_name_the_rule_and_the_key(engine: str | None, old: str, new: str, message: str) -> None:
    assert old in FILES[engine]
    with pytest.raises(CatalogueError) as raised:
        parse_catalogue(FILES[engine].replace(old, new, 1), source="failures.toml", engine=engine)
    assert message in str(raised.value)
    assert str(raised.value).startswith("failures.toml: ")


# --- odd input ------------------------------------------------------------------------------------


def test_the_engine_never_raises_on_odd_input() -> None:
    rig = Rig(INCIDENT)
    engine = rig.engine
    before_poll = rig.view(0.0)  # nothing polled: UNKNOWN, no rates, no host
    assert engine.evaluate(before_poll, None, 0.0) == ()
    assert engine.evaluate(before_poll, {}, 0.0, {}) == ()
    assert engine.evaluate(before_poll, {"ds4": [], "nobody": []}, 1.0, {"ds4": None, "ghost": None}) == ()
    buffer = LogBuffer()
    buffer.append(None, "vllm: error: unrecognized arguments: serve")  # no timestamp
    buffer.mark_gap()
    buffer.append(datetime(2026, 5, 30, tzinfo=UTC), "")
    buffer.append(datetime(2026, 5, 30, tzinfo=UTC), "x" * 20_000)
    found = engine.evaluate(before_poll, {"nobody": list(buffer)}, 2.0)
    assert [f.id for f in found] == ["serve-twice"]
    assert found[0].evidence[0] == "(no time)  vllm: error: unrecognized arguments: serve"
    # Fields the model leaves None, odd numbers, an empty node.
    (instance, _) = before_poll.instances
    odd_instance = dataclasses.replace(instance, running=-1.0, waiting=None, kv_usage=float("nan"))
    odd = dataclasses.replace(before_poll, instances=(odd_instance,), polled_wall=1e300, host_state=None)
    engine.evaluate(odd, None, 3.0)
    engine.evaluate(dataclasses.replace(before_poll, instances=(), services=()), None, 4.0)
    # A real view with every source failing at once, rates from a counter reset, intervals missing.
    rig.poll(5.0, timeout(), "garbage")
    rig.host(5.0, problem="ssh: spark1: host key is not trusted")
    rig.evaluate(5.0)
    rig.poll(6.0, ok(), FRESH)
    rig.poll(7.0, ok(), MTP2[0])
    engine.evaluate(rig.view(7.0), None, 7.0)
    assert engine.problems == ()


# --- the docs -------------------------------------------------------------------------------------

DOC = ROOT / "docs" / "diagnosis.md"
START, END = "<!-- catalogue:start -->", "<!-- catalogue:end -->"


def test_the_docs_table_matches_the_data_file() -> None:
    text = DOC.read_text()
    table = text[text.index(START) + len(START) : text.index(END)].strip("\n") + "\n"
    assert table == catalogue_markdown(CATALOGUE), (
        "docs/diagnosis.md is out of date: replace the table between the markers with "
        "sparktui.diagnosis.engine.catalogue_markdown(load_catalogue())"
    )


def test_every_detector_the_catalogue_may_name_has_an_implementation() -> None:
    from sparktui.diagnosis.catalogue import DETECTOR_SIGNATURES
    from sparktui.diagnosis.detectors import DETECTORS

    assert set(DETECTORS) == set(DETECTOR_SIGNATURES)
    assert all((d.node is None) != (d.instance is None) for d in DETECTORS.values())
