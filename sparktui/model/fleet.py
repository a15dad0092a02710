"""The fleet as the model sees it: observations in, immutable views (numbers + status) out.

``FleetState.apply()`` takes what a poll saw; ``FleetState.view()`` gives the frozen ``NodeView``s that
the dashboard and the headless commands render. No I/O here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Literal, ParamSpec, TypeVar
from urllib.parse import urlsplit

from sparktui.model import safe_json
from sparktui.model.canary import CanaryAsk, CanaryClock, CanaryView, judge
from sparktui.model.counters import CounterHistory
from sparktui.model.derive import EngineRates
from sparktui.model.engines import EngineView, KvLoad, busiest_engine, engine_views, kv_load
from sparktui.model.exporters import GpuReading, gpu_reading, nvidia_smi_q_reading
from sparktui.model.fabric import FabricSample, FabricView, JobView, LinkView, RankView, link_rates, parse_fabric
from sparktui.model.holds import ActionHold
from sparktui.model.host import (
    HostProcess,
    HostSample,
    MemoryLedger,
    ServiceState,
    ShmEntry,
    ledger,
    leftovers,
)
from sparktui.model.host import merge as merge_host
from sparktui.model.host import stale_workers as find_stale_workers
from sparktui.model.memory import (
    HostMemory,
    LaunchReadiness,
    MemoryPressure,
    host_memory_from_exposition,
    launch_readiness,
    pressure_from_exposition,
)
from sparktui.model.numbers import MAX_CONTEXT_TOKENS, json_int, known_sum
from sparktui.model.observations import FetchKind, HostUpdate, HttpResult, NodeObservation, ServerObservation
from sparktui.model.promtext import Exposition, ParseError, PromParser, TooManySeries, decode, looks_truncated
from sparktui.model.reading import Answers, EngineReading
from sparktui.model.roofline import Roofline
from sparktui.model.safe_text import LABEL_LIMIT, safe_text
from sparktui.model.scrape import EngineScrape, ModelLoad, ModelScrape, ScrapeProblem, ServedModel, Sleep
from sparktui.model.specs import CanarySpec, FleetSpec, NodeSpec, ServerSpec, ServiceSpec, Thresholds
from sparktui.model.status import UP, State, Status
from sparktui.model.tracker import ScrapeTracker
from sparktui.model.units import fmt_count, fmt_duration, fmt_gib, fmt_number, fmt_rate

GIB = 1024**3
WEDGED_AFTER_S = 20.0  # running requests but no token for this long: the engine is stuck


@dataclass(frozen=True, slots=True)
class ModelNumbers:
    """One model of a server that loads models on demand (a llama.cpp router), read through it: its
    own gauges at the last scrape and its rates over the window (``rates``: None before two scrapes)."""

    model: str
    running: float | None
    waiting: float | None
    rates: EngineRates | None

    @property
    def words(self) -> str:
        """For people: "a: generation 12.5 tok/s   prompt 40.0 tok/s   running 1   waiting 0"."""
        rates = self.rates
        return (
            f"{self.model}: generation {fmt_rate(rates.generation_tokens_per_s if rates else None, ' tok/s')}   "
            f"prompt {fmt_rate(rates.prompt_tokens_per_s if rates else None, ' tok/s')}   "
            f"running {fmt_number(self.running)}   waiting {fmt_number(self.waiting)}"
        )


@dataclass(frozen=True, slots=True)
class InstanceView:
    name: str
    url: str | None
    role: str
    status: Status
    version: str | None
    engine: str  # the engine it runs, as the operator says it ("vLLM", "llama.cpp")
    served_models: tuple[str, ...]
    max_model_len: int | None
    model_name: str | None
    engine_stats: bool
    running: float | None
    waiting: float | None
    kv_usage: float | None
    kv_capacity_tokens: float | None
    rates: EngineRates | None
    launch: LaunchReadiness | None
    service: ServiceState | None = None  # its systemd unit or container, from the host sampler
    metrics_problem: str | None = None  # why its last /metrics answer was not used, also a status reason
    canary: CanaryView | None = None  # None: canaries are off for it (or it serves no HTTP)
    waiting_for_capacity: float | None = None  # None: the version does not split waiting by reason
    waiting_deferred: float | None = None
    sleep: Sleep | None = None  # None: the version publishes no engine_sleep_state
    metrics_age_s: float | None = None  # seconds since its last usable /metrics scrape (None: never)
    kv: KvLoad | None = None  # the KV cache over all engines in one kind (``kv_usage`` is the busiest's)
    engines: tuple[EngineView, ...] = ()  # each engine of a data-parallel instance; () with one engine
    roofline: Roofline | None = None  # memory bandwidth and FLOP/s per GPU against the node's peaks
    lacks: Mapping[str, str] = field(default_factory=dict)  # what its engine exports none of, and why
    # A server that loads models on demand (a llama.cpp router): each model and where it is; () for one
    # that serves what it loaded at its start.
    models: tuple[ServedModel, ...] = ()
    engine_kind: str = "vllm"  # the engine it runs, as the config names it (``ServerSpec.engine``)
    # Its models' own numbers, of those read (a router's loaded and sleeping ones); its ``rates``,
    # ``running`` and ``waiting`` are then theirs added up. () for a server that serves one model.
    model_numbers: tuple[ModelNumbers, ...] = ()
    # Numbers its engine computes itself over its own recent work and serves as gauges (SGLang's
    # "spec_accept_length", "spec_accept_rate"; ``ModelScrape.reported``), as the engine reports them.
    reported: Mapping[str, float] = field(default_factory=dict)
    # The path its health is asked at (its engine's: vLLM's /health, SGLang's /ready, NIM's
    # /v1/health/ready, Ollama's /), as its last health answer was asked; None before one.
    health_path: str | None = None

    @property
    def health_check(self) -> str:
        """Its health check for people: "/ready", or "its health check" before one was asked."""
        return self.health_path or "its health check"

    @property
    def acceptance_length(self) -> float | None:
        """Speculative decoding's mean acceptance length: over the window where the engine counts drafts
        and accepted tokens, else as the engine reports it (``reported``); None without either."""
        spec = self.rates.spec_decode if self.rates is not None else None
        if spec is not None:
            return spec.mean_acceptance_length
        return self.reported.get("spec_accept_length")

    @property
    def imbalanced_engines(self) -> tuple[str, ...]:
        """The engines doing much more or much less than their share (``engine_imbalance_warn``)."""
        return tuple(e.engine for e in self.engines if e.imbalanced)

    @property
    def asleep(self) -> bool:
        """Put to sleep on purpose (``/sleep``): not down, not wedged, sent no canary."""
        return self.sleep is not None and self.sleep.asleep


@dataclass(frozen=True, slots=True)
class CanaryOrder:
    """A canary to send now: to which instance, asking for which served model (None: not known yet).
    ``path`` and ``payload``: the engine's own canary request (``CanaryPlan``); None: an OpenAI
    completion of one token (``sparktui.sources.canary.canary_payload``)."""

    instance: str
    model: str | None
    path: str | None = None
    payload: dict[str, object] | None = None


@dataclass(frozen=True, slots=True)
class ServiceView:
    name: str
    kind: str
    url: str
    status: Status
    latency_s: float | None


StalePart = Literal["node", "gpu", "host"]


@dataclass(frozen=True, slots=True)
class NodeView:
    """One node as the screens show it. The parts that come from a reading carry how old it is, so a
    screen can dim what is older than its stale limit and show no live-looking numbers for a node that
    stopped answering (``is_stale``):

    - ``age_s``: seconds since any endpoint of the node last answered 2xx (a vLLM probe, an exporter, a
      side service): a powered-off node's age grows from its last good answer, not from its last
      (refused) poll. None before the first good answer.
    - ``gpu_age_s``: seconds since the GPU exporter's last usable reading (``gpu``); None: never read.
    - ``host_age_s``: seconds since the host state behind ``host_memory``, ``pressure``, ``ledger``,
      ``host_state`` and ``shm_leftovers`` was read (the SSH sampler's last frame, else the exporters'
      last memory answer); None: never read.
    - ``stale_after_s`` is the limit for ``age_s`` and ``gpu_age_s`` (``stale_after`` poll intervals,
      at least twice the timeout), ``host_stale_after_s`` for ``host_age_s`` (three poll intervals, at
      least 10 s).

    An instance's gauges and rates (``InstanceView.running``, ``kv_usage``, ``rates``…) are None while
    it is not answering /health 200 or its last scrape is older than ``stale_after_s``;
    ``InstanceView.metrics_age_s`` says how old its last scrape is.
    """

    name: str
    host: str
    status: Status
    instances: tuple[InstanceView, ...]
    services: tuple[ServiceView, ...]
    gpu: GpuReading | None
    host_memory: HostMemory | None
    pressure: MemoryPressure | None
    polled_wall: float | None
    host_state: HostSample | None = None
    age_s: float | None = None
    ledger: MemoryLedger | None = None
    host_problem: str | None = None
    shm_leftovers: tuple[ShmEntry, ...] = ()
    stale_workers: tuple[HostProcess, ...] = ()
    gpu_age_s: float | None = None
    host_age_s: float | None = None
    stale_after_s: float = math.inf
    host_stale_after_s: float = math.inf
    fabric: FabricView | None = None  # its RDMA NICs and NCCL libraries (None: not read)
    jobs: tuple[JobView, ...] = ()  # the multi-node jobs it is a rank of, each with all its ranks

    def is_stale(self, part: StalePart) -> bool:
        """True when ``part`` ("node": ``age_s``, "gpu", "host") has a reading older than its limit;
        False when it is fresh or was never read (then there is nothing to show)."""
        age, limit = {
            "node": (self.age_s, self.stale_after_s),
            "gpu": (self.gpu_age_s, self.stale_after_s),
            "host": (self.host_age_s, self.host_stale_after_s),
        }[part]
        return age is not None and age > limit

    @property
    def fresh_host_memory(self) -> HostMemory | None:
        """The host's memory reading while it is within its stale limit, else None. It is read apart
        from the engines (the SSH sampler, an exporter), so a node whose vLLM is down still has it: it
        is the reading the node's memory reasons, alerts and findings cite."""
        return None if self.is_stale("host") else self.host_memory


def _crash_loop_detail(service: ServiceState, age_s: float | None) -> str:
    """After "is crash-looping: ": "3 restarts, last exit status 1" between attempts, "2 restarts,
    attempt 3 running for 4s, the port is not open" during one (its exit status is not known yet)."""
    restarts = service.restarts or 0
    status = f", last exit status {service.exit_status}" if service.exit_status else ""
    if restarts == 0:
        return f"its start failed{status}, restarting"
    detail = fmt_count(restarts, "restart")
    if service.restarting or service.failed:
        return detail + status
    age = f" for {fmt_duration(age_s)}" if age_s is not None else ""
    return f"{detail}, attempt {restarts + 1} running{age}, the port is not open"


def _parsed(parser: PromParser, result: HttpResult) -> Exposition | ParseError:
    """An exporter's answer parsed, or the ``ParseError`` that says why it is not Prometheus text."""
    try:
        return parser.parse(result.text())
    except ParseError as exc:
        return exc


def _unreadable(what: str, exc: ParseError) -> str:
    """The reason an exporter's answer cannot be read, in one line."""
    if isinstance(exc, TooManySeries):
        return f"{what}: {exc}"
    return f"{what} is not Prometheus text: {safe_text(str(exc))}"


def read_metrics(
    parser: PromParser, result: HttpResult, reading: EngineReading, answers: Answers | None = None
) -> tuple[EngineScrape | None, str | None]:
    """A 2xx ``/metrics`` answer read by its engine's ``reading`` (with the engine's other ``answers``):
    its normalised scrape, or the one-line reason it cannot be used (not UTF-8, not Prometheus text,
    over the series budget, empty, a number not of its kind). Pure: the live source calls it off the
    event loop (``InstanceState.preread``), a replay on it. An engine that serves JSON, not Prometheus
    text (``EngineReading.read_body``), reads the answer whole; its problems name their path."""
    if reading.read_body is not None:
        try:
            return reading.read_body(result.body, answers if answers is not None else Answers()), None
        except ScrapeProblem as exc:
            return None, safe_text(str(exc))
    text, truncated = "", False
    try:
        text = decode(result.body)
        truncated = looks_truncated(text)
        expo = parser.parse(text)
        if not truncated and expo.series == 0:
            return None, "/metrics: the answer holds no series (an empty exposition)"
        scrape = reading.normalise(expo, answers if answers is not None else Answers())
    except TooManySeries as exc:
        return None, f"/metrics: {exc}"
    except ParseError as exc:
        # A body cut mid-line fails on its last line; one that fails earlier is not Prometheus text.
        if truncated and exc.line_no == text.count("\n") + 1:
            return None, "/metrics: body truncated (no final newline)"
        return None, f"/metrics is not Prometheus text: {safe_text(str(exc))}"
    except ScrapeProblem as exc:
        reason = safe_text(str(exc))
        return None, reason if reason.startswith("/") else f"/metrics: {reason}"  # "/slots: ..." names itself
    if truncated:
        return None, "/metrics: body truncated (no final newline)"
    return scrape, None


class InstanceState:
    """What is known about one vLLM instance, updated poll by poll."""

    def __init__(self, spec: ServerSpec, max_age_s: float, canary: CanarySpec | None, reading: EngineReading) -> None:
        """``canary``: the fleet's canary settings (None, or off for this instance: no canary);
        ``reading``: how its engine's answers are read (``spec.engine``'s)."""
        self.spec = spec
        self.reading = reading
        self.parser = PromParser(keep=reading.wanted)
        self.info: bytes | None = None  # the engine's last description of itself (/version, /props)
        self.tracker = ScrapeTracker(max_age_s=max_age_s)
        self.health: HttpResult | None = None
        self.metrics: HttpResult | None = None
        self.metrics_error: str | None = None
        self.models_problem: str | None = None
        self.version: str | None = None
        self.served_models: tuple[str, ...] = ()
        # ``EngineReading.served`` or the scrape's ``served``: () unless it loads models on demand
        self.on_demand: tuple[ServedModel, ...] = ()
        self.models_body: bytes | None = None  # its last /v1/models answer, for a reading that needs it
        self.wall: float | None = None  # the unix time of the poll being applied
        self.max_model_len: int | None = None
        self.last_progress_t: float | None = None
        # A body read ahead (``preread``): the body, what it was read with, and what the reading made of it.
        self._preread: tuple[bytes, ReadWith, tuple[EngineScrape | None, str | None]] | None = None
        self.service: ServiceState | None = None  # from the host sampler, when known
        self.service_age_s: float | None = None  # how long the service has been in its state
        self.service_age_t: float | None = None  # when ``service_age_s`` was read (the host frame's t)
        self.served_t: float | None = None  # when /health last answered 200
        self.hold = ActionHold()  # sparktui's own actions on it (``action_started`` / ``action_ended``)
        wanted = canary is not None and canary.enabled and spec.canary and spec.base_url is not None and reading.canary
        self.canary_spec = canary if wanted else None
        self.canary = CanaryClock(canary.idle_s, canary.interval_s) if canary is not None and wanted else None

    def apply(self, obs: ServerObservation, t: float, wall: float | None = None) -> None:
        """What one poll saw of it, at ``t`` (monotonic) and ``wall`` (unix time, the poll's)."""
        self.wall = wall
        if obs.health is not None:
            self.health = obs.health
            if obs.health.ok:
                self.served_t = t
        if obs.version is not None and obs.version.ok:  # first: llama-server's /props is read with /metrics
            self.info = obs.version.body
            found = self.reading.version(safe_json.loads(obs.version.body))
            if isinstance(found, str):  # made safe here too: an engine may come from another package
                self.version = safe_text(found, LABEL_LIMIT)
        if obs.models is not None:
            self._apply_models(obs.models)
        if obs.model_metrics is not None:
            self._apply_model_metrics(obs.model_metrics, obs.metrics_t if obs.metrics_t is not None else t)
        if obs.metrics is not None:
            self.metrics = obs.metrics
            # Timed by its own answer, not the end of the node's poll (ServerObservation.metrics_t).
            detail = obs.detail.body if obs.detail is not None and obs.detail.ok else None
            self._apply_metrics(obs.metrics, obs.metrics_t if obs.metrics_t is not None else t, detail)
        if obs.canary is not None and self.canary is not None:
            clock = self.canary
            # Live, the clock knows when it sent the canary; a replayed result carries only its time.
            sent_t = clock.sent_t if clock.in_flight and clock.sent_t is not None else t - obs.canary.elapsed_s
            plan = self.reading.canary_plan
            clock.done(judge(obs.canary, sent_t, t, plan.read if plan is not None else None))

    def canary_due(self, t: float) -> CanaryOrder | None:
        """A canary for this instance if one is due at ``t`` (``CanaryClock.due``), marked as sent.
        None to an engine that is asleep: it generates nothing until woken, and that is no wedge. To a
        server that loads models on demand, only through its engine's plan, which chooses the model
        (``EngineReading.canary_plan``), and none when the plan has none to name now."""
        clock = self.canary
        healthy = self.health is not None and self.health.ok
        if clock is None or self.sleep() is not None or not clock.due(t, healthy):
            return None
        model = self.served_models[0] if self.served_models else None
        plan = self.reading.canary_plan
        if plan is None:
            if self.on_demand:
                return None  # a router: a canary would load the model it names
            clock.send(t)
            return CanaryOrder(self.spec.name, model)
        assert self.canary_spec is not None  # set with the clock
        request = plan.request(CanaryAsk(self.canary_spec.prompt, model, self.on_demand, self.wall))
        if request is None:
            return None
        clock.send(t)
        return CanaryOrder(self.spec.name, request[0], plan.path, request[1])

    def preread(self, result: HttpResult) -> None:
        """Read ``result``'s ``/metrics`` body now (``read_metrics``), for ``apply`` to take when the same
        answer arrives: the live source does this in a worker thread, so a large or hostile body's
        parse never holds the event loop. Not thread-safe with ``apply`` of the same instance: the
        node's polls never overlap, and its observation is applied after its preread returned."""
        if result.ok and self.reading.preread:
            answers = self._answers()
            self._preread = (result.body, _read_with(answers), read_metrics(self.parser, result, self.reading, answers))

    def _answers(self, detail: bytes | None = None) -> Answers:
        """What the reading is given besides the body: the model ``/v1/models`` serves (a trtllm-serve's
        labels do not name it), the server's description of itself, the last scrape..."""
        return Answers(
            model_name=self.served_models[0] if self.served_models else None,
            info=self.info,
            detail=detail,
            previous=self.tracker.latest,
            models=self.models_body,
            wall=self.wall,
        )

    def _apply_metrics(self, result: HttpResult, t: float, detail: bytes | None = None) -> None:
        if not result.ok:
            # Named by the path asked where the answer says it: NIM's /v1/metrics, Ollama's /api/ps.
            where = urlsplit(result.url).path or "/metrics"
            self.metrics_error = f"{safe_text(where, LABEL_LIMIT)}: {result.problem()}"
            return
        pre, self._preread = self._preread, None
        answers = self._answers(detail)
        # Read ahead with what this poll's other answers (/v1/models, the description) have changed since:
        # read again, as a read on arrival would.
        if pre is not None and pre[0] is result.body and pre[1] == _read_with(answers):
            scrape, problem = pre[2]
        else:
            scrape, problem = read_metrics(self.parser, result, self.reading, answers)
        if scrape is None:
            self.metrics_error = problem
            return
        self.metrics_error = None
        if scrape.served is not None:
            self.on_demand = scrape.served
        before = self.tracker.latest
        self.tracker.observe(t, scrape)
        if before is None or self._made_progress():
            self.last_progress_t = t
        if self.canary is not None:
            interval = self.tracker.last_interval_rates() if before is not None else None
            generated = interval.generation_tokens_per_s if interval is not None else None
            self.canary.scraped(t, generated is not None and generated > 0)

    def _apply_model_metrics(self, answers: tuple[tuple[str, HttpResult], ...], t: float) -> None:
        """Each model's own ``/metrics`` (a llama.cpp router's loaded models), read by the engine's reading
        as one server's, into one scrape of the models read: each model keeps its own reset-safe counter
        history in the tracker, so one that unloads and loads again (its counters from 0) is a reset of
        its own, never a drop of the instance's. A 400 is a model that went away since ``/v1/models``
        said it answered (``autoload=false`` refuses, loading nothing): not a problem, just not read."""
        models: dict[str, ModelScrape] = {}
        problems: list[str] = []
        latest = self.tracker.latest
        for name, result in answers:
            if result.answered and result.status == 400:
                continue
            if not result.ok:
                problems.append(f"/metrics of {name}: {result.problem()}")
                continue
            before = latest.models.get(name) if latest is not None else None
            previous = EngineScrape(models={name: before}) if before is not None else None
            scrape, problem = read_metrics(
                self.parser, result, self.reading, Answers(model_name=name, previous=previous)
            )
            if scrape is None:
                problems.append(f"{name}: {problem}")
                continue
            models.update(scrape.models)
        self.metrics_error = "; ".join(problems) or None
        # No wedge rule (``last_progress_t`` stays None): without /slots, which would wake a sleeping
        # child, a router's generated tokens move only when a request ends.
        self.tracker.observe(t, EngineScrape(models=models))

    def _made_progress(self) -> bool:
        rates = self.tracker.last_interval_rates()
        if rates is None or rates.reset:
            return True  # a new process (its counters went back) starts its own wait for a token
        generated = rates.generation_tokens_per_s
        return generated is None or generated > 0 or self._running() in (None, 0)

    def sleep(self) -> Sleep | None:
        """The sleep state of the last scrape when the engine is asleep, else None (awake or not known)."""
        latest = self.tracker.latest
        if latest is None or self.metrics_error is not None:
            return None
        states = [m.sleep for m in latest.models.values() if m.sleep is not None and m.sleep.asleep]
        return states[0] if states else None

    def _running(self) -> float | None:
        latest = self.tracker.latest
        if latest is None or not latest.models:
            return None
        return sum(m.running or 0 for m in latest.models.values())

    def _apply_models(self, result: HttpResult) -> None:
        if result.answered and result.status == 401:
            self.models_problem = "/v1/models: 401 unauthorized; set api_key_env or api_key_file for this instance"
            return
        if not result.ok:
            self.models_problem = f"/v1/models: {result.problem()}" if result.answered else None
            return
        found = safe_json.loads(result.body)
        data = found.get("data") if isinstance(found, dict) else None
        if not isinstance(data, list):
            self.models_problem = "/v1/models: answer is not the OpenAI model list"
            return
        self.models_problem = None
        self.models_body = result.body
        if self.reading.served is not None:
            try:
                self.on_demand = self.reading.served(result.body, self.info) or ()
            except ScrapeProblem as exc:
                self.models_problem = safe_text(str(exc))
        cards = [card for card in data if isinstance(card, dict)]
        self.served_models = tuple(safe_text(str(card.get("id")), LABEL_LIMIT) for card in cards if card.get("id"))
        lengths = [json_int(card.get("max_model_len"), 1, MAX_CONTEXT_TOKENS) for card in cards]
        self.max_model_len = next((n for n in lengths if n is not None), None)

    def status(
        self, t: float, thresholds: Thresholds, rates: EngineRates | None, head: HeadStatus | None = None
    ) -> Status:
        if self.spec.base_url is None:
            return _worker_status(self.spec.name, head)
        health = self.health
        name = self.spec.name
        if health is None:
            return Status(State.UNKNOWN, (f"{name}: not polled yet",))
        if not health.answered:
            manager = self._manager_status(health, t)
            if manager is not None:
                return manager
            return Status(State.DOWN, (f"{name}: /health {health.problem()}",))
        if health.status == 503:
            if self.reading.loading_on_503:
                return Status(State.LOADING, (f"{name}: loading the model (/health 503)",))
            return Status(State.DOWN, (f"{name}: engine dead (/health 503)",))
        if not health.ok:
            return Status(State.DOWN, (f"{name}: /health {health.problem()}",))
        problems = [p for p in (self.metrics_error, self.models_problem) if p]
        problems.extend(_overdue_words(m) for m in self.on_demand if m.overdue_s is not None)
        asleep = self.sleep()
        latest = self.tracker.latest
        if asleep is None and latest is not None and latest.has_engine_stats and self.metrics_error is None:
            problems.extend(self._load_problems(t, thresholds, rates))
        if problems:
            return Status(State.DEGRADED, tuple(f"{name}: {p}" for p in problems))
        if self.on_demand:
            return Status(State.UP, (f"{name}: {_on_demand_words(self.on_demand)}",))
        if asleep is not None:
            # Asleep on purpose: it answers /health and generates nothing until woken. Neither its
            # silence (wedge) nor its gauges (load) are problems; the reason says why it is quiet.
            return Status(State.UP, (f"{name}: {asleep.description}",))
        return UP

    def _manager_status(self, health: HttpResult, t: float) -> Status | None:
        """What the service manager says while the port does not answer: loading, crash loop, stopped."""
        service = self.service
        if service is None or health.kind is not FetchKind.REFUSED:
            return None
        name, unit = self.spec.name, service.name
        restarts = service.restarts or 0
        if service.exit_status == 127:
            missing = f"; {service.exec_path} does not exist" if service.exec_exists is False else ""
            return Status(
                State.DOWN,
                (
                    f"{name}: {unit} cannot start: status=127, the program it runs was not found{missing} "
                    f"({restarts} restarts)",
                ),
            )
        restarted = service.manager == "systemd" and restarts > 0 and service.state != "inactive"
        if service.restarting or restarted:
            # Down from the first failed start: between attempts (auto-restart), and during an attempt
            # systemd began on its own (NRestarts counts only those; a start by hand flushes it).
            # docker's RestartCount survives a `docker restart`, so a running container is loading.
            detail = _crash_loop_detail(service, self.service_age_s)
            return Status(State.DOWN, (f"{name}: {unit} is crash-looping: {detail}",))
        if service.running and not service.starting and self._served_since_start(t):
            # The unit's process answered /health since it started, and its port refuses now: it is not
            # loading. It stopped or crashed; the manager's word, sampled every few seconds, says so next.
            return Status(
                State.DOWN,
                (
                    f"{name}: /health {health.problem()}; {unit} still read {service.state}, "
                    "its port closed after it served",
                ),
            )
        if service.starting or service.running:
            age = f" for {fmt_duration(self.service_age_s)}" if self.service_age_s is not None else ""
            return Status(
                State.LOADING, (f"{name}: loading{age}: {unit} is {service.state}, the port is not open yet",)
            )
        if service.failed:
            status = f" (exit status {service.exit_status})" if service.exit_status is not None else ""
            return Status(State.DOWN, (f"{name}: {unit} failed{status}",))
        return Status(State.DOWN, (f"{name}: {unit} is {service.state}: not running",))

    def action_started(self) -> None:
        """An action of sparktui's began on this instance (``model.holds``)."""
        self.hold.started()

    def action_ended(self, t: float) -> None:
        """The action ended at ``t``: its windows start again there, so the warmup's cold requests are
        not the fixed engine's latency, and the wedge clock starts from its end."""
        self.hold.ended(t)
        self.tracker.restart(t)
        self.last_progress_t = t

    def _served_since_start(self, t: float) -> bool:
        """Whether /health answered 200 after the unit's current process started, at ``t``. Two
        durations compared, each on one clock (the unit's age by the host's clock, the answer's by
        ours), so no skew between the host's clock and ours can misjudge it; a second's slack."""
        if self.served_t is None or self.service_age_s is None or self.service_age_t is None:
            return False
        age_now = self.service_age_s + (t - self.service_age_t)
        return age_now > t - self.served_t + 1.0

    def _load_problems(self, t: float, thresholds: Thresholds, rates: EngineRates | None) -> list[str]:
        latest = self.tracker.latest
        assert latest is not None
        problems: list[str] = []
        for model in latest.models.values():
            kv = model.kv_usage_max
            if kv is not None and kv >= thresholds.kv_usage_warn:
                several = len(model.kv_usage_by_engine) > 1  # the busiest engine is the one that preempts
                busiest = f" on engine {busiest_engine(model.kv_usage_by_engine)}" if several else ""
                problems.append(f"KV cache {kv:.0%}{busiest} (warn at {thresholds.kv_usage_warn:.0%})")
            if model.waiting is not None and model.waiting >= thresholds.waiting_warn:
                problems.append(f"{model.waiting:.0f} requests waiting (warn at {thresholds.waiting_warn})")
        if rates is not None:
            if rates.implausible:
                problems.append(
                    f"a counter jumped past what any engine does ({', '.join(rates.implausible)} over "
                    f"{rates.seconds:.0f} s); not shown"
                )
            if rates.preemptions_per_s is not None and rates.preemptions_per_s > thresholds.preemptions_per_s_warn:
                problems.append(f"{rates.preemptions_per_s:.2f} preemptions/s: KV pressure")
            ttft = rates.latency.get("ttft")
            held = self.hold.holds(t)  # an action's own cold requests (its warmup's) are not its latency
            if not held and ttft is not None and ttft.p90 is not None and ttft.p90 > thresholds.ttft_p90_warn_s:
                problems.append(f"TTFT p90 {ttft.p90:.1f} s (warn at {thresholds.ttft_p90_warn_s:g} s)")
        if self.hold.holds(t):
            # An action of sparktui's runs on it or just ended: its restart's and warmup's cold requests
            # wait for the JIT with no token on purpose; no wedge is read into them.
            return problems
        running = self._running()
        if running and self.last_progress_t is not None and t - self.last_progress_t >= WEDGED_AFTER_S:
            problems.append(f"wedged: {running:.0f} running, no token generated for {t - self.last_progress_t:.0f} s")
        elif self.canary is not None and self.canary.wedged():
            problems.append(self._canary_problem(t))
        return problems

    def _canary_problem(self, t: float) -> str:
        assert self.canary is not None and self.canary_spec is not None
        idle = self.canary.idle_for(t)
        quiet = f", no token for {idle:.0f} s" if idle is not None else ""
        return f"wedged: the canary (a 1-token completion) got no answer within {self.canary_spec.timeout_s:g} s{quiet}"

    def view(
        self,
        t: float,
        thresholds: Thresholds,
        window_s: float | None,
        memory: HostMemory | None,
        *,
        head: HeadStatus | None = None,
        fresh_s: float | None = None,
        node: NodeSpec | None = None,
    ) -> InstanceView:
        """``fresh_s``: numbers from a last scrape older than this are not shown (the instance stopped
        answering; its last rates and gauges would pass for current ones); nor are they while /health
        does not answer 200."""
        several = bool(self.on_demand)  # a router: its numbers are its models' added up
        rates = self.tracker.summed_rates(window_s) if several else self.tracker.rates(window_s=window_s)
        latest = self.tracker.latest
        model = _first_model(latest)
        status = self.status(t, thresholds, rates, head)
        kv, engines = self._engine_load(model, latest, window_s, thresholds)
        last = self.tracker.latest_t
        # Gauges and rates are shown only while the engine answers: a dead engine core's API (/health
        # 503) still serves its last, frozen numbers, and a node that went away leaves its last scrape.
        answering = self.health is not None and self.health.ok
        fresh = answering and (fresh_s is None or (last is not None and t - last <= fresh_s))
        gauges = model if fresh else None  # the model whose gauges are shown
        # Each model's own numbers, where its engine counts any (Ollama counts none: no line of "–"s).
        counted = model is None or "requests" not in model.lacks
        numbers = self._model_numbers(window_s) if fresh and several and counted else ()
        return InstanceView(
            name=self.spec.name,
            url=self.spec.base_url,
            role=self.spec.role,
            status=status,
            version=self.version,
            engine=self.reading.label,
            engine_kind=self.spec.engine,
            served_models=self.served_models,
            max_model_len=self.max_model_len,
            model_name=model.model_name if model and not several else None,
            engine_stats=bool(latest and latest.has_engine_stats),
            running=known_sum(n.running for n in numbers) if several else gauges.running if gauges else None,
            waiting=known_sum(n.waiting for n in numbers) if several else gauges.waiting if gauges else None,
            waiting_for_capacity=gauges.waiting_for_capacity if gauges else None,
            waiting_deferred=gauges.waiting_deferred if gauges else None,
            sleep=gauges.sleep if gauges else None,
            kv_usage=gauges.kv_usage_max if gauges else None,
            kv_capacity_tokens=latest.kv_capacity_tokens if latest else None,
            rates=rates if fresh else None,
            launch=self._launch(memory, latest, status),
            service=self.service,
            metrics_problem=self.metrics_error if self.spec.base_url is not None else None,
            canary=self.canary.view(t, asleep=self.sleep() is not None) if self.canary is not None else None,
            metrics_age_s=t - last if last is not None else None,
            kv=kv if fresh else None,
            engines=engines if fresh else (),
            roofline=_roofline(rates, node) if fresh else None,
            lacks=gauges.lacks if gauges else {},
            models=self.on_demand,
            reported=gauges.reported if gauges else {},
            health_path=safe_text(urlsplit(self.health.url).path, LABEL_LIMIT) or None if self.health else None,
            model_numbers=numbers,
        )

    def _model_numbers(self, window_s: float | None) -> tuple[ModelNumbers, ...]:
        """Each model of the last scrape, by name, with its own rates over the window."""
        latest = self.tracker.latest
        if latest is None:
            return ()
        return tuple(
            ModelNumbers(name, model.running, model.waiting, self.tracker.rates(name, window_s))
            for name, model in sorted(latest.models.items())
        )

    def _engine_load(
        self, model: ModelScrape | None, latest: EngineScrape | None, window_s: float | None, thresholds: Thresholds
    ) -> tuple[KvLoad | None, tuple[EngineView, ...]]:
        """The KV cache's load over the engines, and each engine's own view."""
        if model is None or latest is None:
            return None, ()
        kv = kv_load(model.kv_usage_by_engine, {e: latest.kv_capacity_of(e) for e in model.kv_usage_by_engine})
        engine_rates = self.tracker.engine_rates(window_s=window_s) if model.per_engine else {}
        return kv, engine_views(model, latest, engine_rates, thresholds.engine_imbalance_warn)

    def _launch(self, memory: HostMemory | None, latest: EngineScrape | None, status: Status) -> LaunchReadiness | None:
        """Launch readiness answers "would it start now?": it matters while the instance is not
        serving. A running instance already holds its memory, so the check would mislead."""
        gmu = self.spec.gpu_memory_utilization
        if gmu is None and latest is not None:
            configured = [c.gpu_memory_utilization for c in latest.cache_config.values()]
            gmu = next((g for g in configured if g is not None), None)
        serving = status.state in (State.UP, State.DEGRADED)
        if memory is None or gmu is None or serving:
            return None
        return launch_readiness(memory, gmu)


def _first_model(latest: EngineScrape | None) -> ModelScrape | None:
    """The model a scrape's numbers are shown for: the first by name (a server serves one)."""
    if latest is None or not latest.models:
        return None
    return latest.models[min(latest.models)]


def _roofline(rates: EngineRates | None, node: NodeSpec | None) -> Roofline | None:
    """Where the instance runs against its node's peak bandwidth and compute, when both are known."""
    if rates is None or rates.mfu is None or node is None:
        return None
    return Roofline.of(rates.mfu, node.peak_memory_bandwidth_gb_s, node.peak_tflops)


@dataclass(frozen=True, slots=True)
class HeadStatus:
    """The head of a multi-node (tensor-parallel) job, as its workers see it."""

    where: str  # "node/instance"
    status: Status


def _worker_status(name: str, head: HeadStatus | None) -> Status:
    """A worker serves no HTTP: it is as healthy as the job's head (its own host state comes over SSH)."""
    if head is None:
        return Status(State.UNKNOWN, (f"{name}: tensor-parallel worker whose head is not in the fleet",))
    if head.status.state in (State.UP, State.DEGRADED):
        return Status(State.UP)
    return Status(head.status.state, (f"{name}: worker of {head.where}, which is {head.status.state.value}",))


def _service_status(spec: ServiceSpec, result: HttpResult | None, thresholds: Thresholds) -> Status:
    if result is None:
        return Status(State.UNKNOWN, (f"{spec.name}: not polled yet",))
    if not result.answered:
        return Status(State.DOWN, (f"{spec.name}: {result.problem()}",))
    if result.status != spec.expect_status:
        return Status(State.DEGRADED, (f"{spec.name}: {result.problem()} (expected {spec.expect_status})",))
    if result.elapsed_s > thresholds.service_latency_warn_s:
        return Status(State.DEGRADED, (f"{spec.name}: slow, {result.elapsed_s:.2f} s",))
    return UP


def host_stale_after(fleet: FleetSpec) -> float:
    """Host state older than this is stale: three poll intervals, at least 10 s (the sampler's pace)."""
    return max(3 * fleet.poll_interval_s, 10.0)


def _results(obs: NodeObservation) -> Iterable[HttpResult]:
    """Every HTTP answer of one poll."""
    for vobs in obs.vllm:
        yield from (r for r in (vobs.health, vobs.metrics, vobs.version, vobs.models) if r is not None)
    yield from (result for _, result in obs.services)
    yield from (r for r in (obs.gpu_exporter, obs.node_exporter) if r is not None)


def _on_demand_words(models: tuple[ServedModel, ...]) -> str:
    """A router's models for its status line: "loads models on demand: 1 of 3 loaded (a); b sleeping"."""
    loaded = [m.id for m in models if m.load is ModelLoad.LOADED]
    others = [m.words for m in models if m.load not in (ModelLoad.LOADED, ModelLoad.UNLOADED)]
    shown = f" ({', '.join(loaded[:4])}{', …' if len(loaded) > 4 else ''})" if loaded else ""
    rest = f"; {', '.join(others[:4])}{', …' if len(others) > 4 else ''}" if others else ""
    return f"loads models on demand: {len(loaded)} of {len(models)} loaded{shown}{rest}"


ReadWith = tuple[str | None, bytes | None, bytes | None, bytes | None]


def _read_with(answers: Answers) -> ReadWith:
    """What of the answers a metrics body is read with can change between its read ahead and the poll's
    arrival (``/v1/models``, the description, the detail): a read ahead with other ones is not used."""
    return (answers.model_name, answers.info, answers.models, answers.detail)


def _models_held(instances: Iterable[InstanceView]) -> float | None:
    """What the serving instances that load models on demand say their loaded models hold, in bytes
    (Ollama's ``/api/ps`` sizes); None where none says."""
    serving = (i for i in instances if i.status.state in (State.UP, State.DEGRADED))
    return known_sum(
        m.size_bytes for i in serving for m in i.models if m.load is ModelLoad.LOADED and m.size_bytes is not None
    )


def _overdue_words(model: ServedModel) -> str:
    """A model still loaded past the time its server said it would unload it: it holds memory."""
    held = f" holding {fmt_gib(model.size_bytes)}" if model.size_bytes is not None else ""
    return f"{model.id} still loaded{held}, {fmt_duration(model.overdue_s)} past its keep-alive ({model.expires_at})"


def _at_most_degraded(status: Status) -> Status:
    if status.state in (State.DOWN, State.STALE):
        return Status(State.DEGRADED, status.reasons)
    return status


DEFAULT_MAX_AGE_S = 900.0  # the counter history kept for windows when no window bounds it


def _reading(readings: Mapping[str, EngineReading], spec: ServerSpec) -> EngineReading:
    found = readings.get(spec.engine)
    if found is None:
        raise ValueError(f"instance {spec.name}: no reading for engine {spec.engine!r} here")
    return found


class NodeState:
    def __init__(
        self,
        spec: NodeSpec,
        fleet: FleetSpec,
        max_age_s: float,
        readings: Mapping[str, EngineReading],
    ) -> None:
        self.spec = spec
        self.fleet = fleet
        self.instances = {v.name: InstanceState(v, max_age_s, fleet.canary, _reading(readings, v)) for v in spec.vllm}
        self.services: dict[str, HttpResult] = {}
        self.gpu_result: HttpResult | None = None
        self.gpu: GpuReading | None = None
        self.gpu_error: str | None = None
        self.node_result: HttpResult | None = None
        self.host_memory: HostMemory | None = None
        self.pressure: MemoryPressure | None = None
        self.host_error: str | None = None
        self._gpu_parser = PromParser()
        self._node_parser = PromParser()
        self._preparsed: dict[str, tuple[bytes, Exposition | ParseError]] = {}  # by ``preread``
        self.last_t: float | None = None
        self.last_wall: float | None = None
        # Why this node's data could not be read (``FleetState``'s guard): a reason on the node until
        # an observation is applied without one.
        self.internal_error: str | None = None
        self.host: HostSample | None = None
        self.host_t: float | None = None
        self.host_problem: str | None = None
        self.good_t: float | None = None  # the last poll in which any endpoint answered 2xx
        self.gpu_t: float | None = None  # the last usable GPU exporter reading
        self.exporter_memory_t: float | None = None  # the last host memory read from an exporter
        self.fabric: FabricSample | None = None
        self.fabric_t: float | None = None
        self.nic_history: dict[str, CounterHistory] = {}

    def apply_host(self, update: HostUpdate) -> None:
        """A host sample (merged with what earlier frames carried) or a problem reading one."""
        if update.sample is not None:
            self.host = merge_host(self.host, update.sample)
            self.host_t = update.t
            self.host_problem = None
            self._apply_services(self.host, update.t)
        if update.problem is not None:
            self.host_problem = update.problem
        if update.nvidia_smi is not None and self.spec.gpu_exporter is None:
            self._apply_nvidia_smi(update.nvidia_smi, update.t)
        if update.fabric is not None:
            self._apply_fabric(update.fabric, update.t)
        if update.connection_lost and self.host is not None:
            # The unit's state came over the lost connection: it is unknown now, not still "running"
            # (a powered-off node would otherwise read as loading). The next full frame brings it back.
            self.host = replace(self.host, services=None)
            self._apply_services(self.host, update.t)

    def _apply_services(self, host: HostSample, t: float) -> None:
        services = host.services or {}
        for name, instance in self.instances.items():
            service = services.get(name)
            instance.service = service
            started = service.started_epoch if service is not None else None
            instance.service_age_s = host.remote_epoch - started if started is not None else None
            instance.service_age_t = t

    @property
    def memory(self) -> HostMemory | None:
        """Host memory: the sampler's /proc/meminfo when there is one, else node_exporter's."""
        if self.host is not None and self.host.memory.mem_total is not None:
            return self.host.memory
        return self.host_memory

    def memory_age_s(self, now: float) -> float | None:
        """How old the host memory behind ``memory`` is (None: never read)."""
        if self.host is not None and self.host.memory.mem_total is not None:
            read_t = self.host_t
        else:
            read_t = self.exporter_memory_t if self.host_memory is not None else None
        return now - read_t if read_t is not None else None

    @property
    def memory_pressure(self) -> MemoryPressure | None:
        if self.host is not None and self.host.pressure is not None:
            return self.host.pressure
        return self.pressure

    def apply(self, obs: NodeObservation) -> None:
        self.internal_error = None
        self.last_t, self.last_wall = obs.t, obs.wall
        if any(result.ok for result in _results(obs)):
            self.good_t = obs.t
        for vobs in obs.vllm:
            instance = self.instances.get(vobs.name)
            if instance is not None:
                instance.apply(vobs, obs.t, obs.wall)
        for name, result in obs.services:
            self.services[name] = result
        if obs.node_exporter is not None:
            self.node_result = obs.node_exporter
            self._apply_node_exporter(obs.node_exporter, obs.t)
        if obs.gpu_exporter is not None:
            self.gpu_result = obs.gpu_exporter
            self._apply_gpu(obs.gpu_exporter, obs.t)

    def preread(self, obs: NodeObservation) -> None:
        """Parse the exporters' answers of ``obs`` ahead of ``apply(obs)``, as ``InstanceState.preread``
        does its ``/metrics`` (in the live source's worker thread)."""
        for kind, result, parser in (
            ("node", obs.node_exporter, self._node_parser),
            ("gpu", obs.gpu_exporter, self._gpu_parser),
        ):
            if result is not None and result.ok:
                self._preparsed[kind] = (result.body, _parsed(parser, result))
        for vobs in obs.vllm:
            instance = self.instances.get(vobs.name)
            if instance is not None and vobs.metrics is not None:
                instance.preread(vobs.metrics)

    def _exposition(self, kind: str, parser: PromParser, result: HttpResult) -> Exposition | ParseError:
        """``result`` parsed: by ``preread`` when it read this very answer, else now."""
        pre = self._preparsed.pop(kind, None)
        return pre[1] if pre is not None and pre[0] is result.body else _parsed(parser, result)

    def _apply_node_exporter(self, result: HttpResult, t: float) -> None:
        if not result.ok:
            self.host_error = f"node_exporter: {result.problem()}"
            return
        expo = self._exposition("node", self._node_parser, result)
        if isinstance(expo, ParseError):
            self.host_error = _unreadable("node_exporter", expo)
            return
        self.host_error = None
        self.host_memory = host_memory_from_exposition(expo)
        self.pressure = pressure_from_exposition(expo)
        self.exporter_memory_t = t

    def _apply_nvidia_smi(self, text: str, t: float) -> None:
        reading = nvidia_smi_q_reading(text)
        if reading is None:
            self.gpu_error = f"nvidia-smi: {safe_text(text.strip(), 200) or 'no GPU in its answer'}"
            return
        self.gpu_error = None
        self.gpu, self.gpu_t = reading, t

    def _apply_fabric(self, text: str, t: float) -> None:
        sample = parse_fabric(text)
        newer = self.fabric_t is None or t > self.fabric_t  # a reading of the same moment adds no interval
        self.fabric, self.fabric_t = sample, t
        for nic in sample.nics:
            if nic.counters and newer:
                history = self.nic_history.setdefault(nic.name, CounterHistory(max_age_s=120.0, max_points=16))
                history.add(t, nic.counters)

    def fabric_view(self, now: float) -> FabricView | None:
        sample = self.fabric
        if sample is None or self.fabric_t is None:
            return None
        links = []
        for nic in sample.nics:
            history = self.nic_history.get(nic.name)
            deltas = history.last_interval() if history is not None else None
            speed = nic.speed_mbps * 1e6 if nic.speed_mbps is not None else None
            rates = link_rates(deltas) if deltas is not None and deltas.seconds > 0 else None
            links.append(LinkView(nic.name, nic.operstate, speed, rates, nic.problem))
        return FabricView(tuple(links), sample.nccl, now - self.fabric_t, sample.no_ethtool, sample.problem)

    def _apply_gpu(self, result: HttpResult, t: float) -> None:
        if not result.ok:
            self.gpu_error = f"GPU exporter: {result.problem()}"
            return
        expo = self._exposition("gpu", self._gpu_parser, result)
        if isinstance(expo, ParseError):
            self.gpu_error = _unreadable("GPU exporter", expo)
            return
        memory = self.memory
        reading = gpu_reading(expo, host_mem_total_bytes=memory.mem_total if memory else None)
        if reading is None:
            self.gpu_error = "GPU exporter: no GPU series in its answer"
            return
        self.gpu_error = None
        self.gpu, self.gpu_t = reading, t
        found = host_memory_from_exposition(expo) if self.node_result is None else None
        if found is not None:  # dgx-spark-prometheus's memory, read at every scrape, not only the first
            self.host_memory, self.exporter_memory_t = found, t

    def head_statuses(self, now: float, window_s: float | None) -> dict[str, HeadStatus]:
        """Status of every job head on this node, by job name."""
        heads: dict[str, HeadStatus] = {}
        for instance in self.instances.values():
            if instance.spec.role == "head" and instance.spec.job is not None:
                rates = instance.tracker.rates(window_s=window_s)
                status = instance.status(now, self.fleet.thresholds, rates)
                heads[instance.spec.job] = HeadStatus(f"{self.spec.name}/{instance.spec.name}", status)
        return heads

    def view(
        self,
        now: float,
        window_s: float | None,
        heads: Mapping[str, HeadStatus] | None = None,
        jobs: Mapping[str, JobView] | None = None,
    ) -> NodeView:
        fleet = self.fleet
        thresholds = fleet.thresholds
        heads = heads or {}
        fresh_s = max(fleet.stale_after * fleet.poll_interval_s, fleet.timeout_s * 2)
        spec = self.spec
        instances = tuple(
            i.view(now, thresholds, window_s, self.memory, head=heads.get(i.spec.job or ""), fresh_s=fresh_s, node=spec)
            for i in self.instances.values()
        )
        services = self._service_views(thresholds)
        host = self.host
        stale_workers = self._stale_workers()
        host_stale_s = host_stale_after(fleet)
        parts = self._status_parts(now, instances, services, stale_workers, host_stale_s)
        return NodeView(
            name=self.spec.name,
            host=self.spec.host,
            status=self._overall_status(now, parts, instances, services),
            instances=instances,
            services=services,
            gpu=self.gpu,
            host_memory=self.memory,
            pressure=self.memory_pressure,
            polled_wall=self.last_wall,
            age_s=now - self.good_t if self.good_t is not None else None,
            gpu_age_s=now - self.gpu_t if self.gpu is not None and self.gpu_t is not None else None,
            host_age_s=self.memory_age_s(now),
            stale_after_s=fresh_s,
            host_stale_after_s=host_stale_s,
            host_state=host,
            ledger=self._ledger(host, instances),
            host_problem=self.host_problem,
            shm_leftovers=leftovers(host) if host is not None else (),
            stale_workers=stale_workers,
            fabric=self.fabric_view(now),
            jobs=self._job_views(jobs or {}),
        )

    def _service_views(self, thresholds: Thresholds) -> tuple[ServiceView, ...]:
        """Each side service's status and its last answer's latency."""
        return tuple(
            ServiceView(
                name=spec.name,
                kind=spec.kind,
                url=spec.url,
                status=_service_status(spec, self.services.get(spec.name), thresholds),
                latency_s=r.elapsed_s if (r := self.services.get(spec.name)) is not None and r.answered else None,
            )
            for spec in self.spec.services
        )

    def _status_parts(
        self,
        now: float,
        instances: tuple[InstanceView, ...],
        services: tuple[ServiceView, ...],
        stale_workers: tuple[HostProcess, ...],
        host_stale_s: float,
    ) -> list[Status]:
        """What the node's status is the worst of: its instances, services, host and leftovers."""
        # A side service or exporter that is down degrades the node; the node is down only when
        # everything it serves is down (or, with no vLLM configured, every service is).
        parts = [i.status for i in instances] + [_at_most_degraded(s.status) for s in services]
        parts.extend(self._host_statuses(self.fleet.thresholds))
        if self.internal_error is not None:
            parts.append(Status(State.DEGRADED, (self.internal_error,)))
        if stale_workers:
            pids = ", ".join(str(p.pid) for p in stale_workers[:6])
            parts.append(
                Status(
                    State.DEGRADED,
                    (f"{len(stale_workers)} stale VLLM::Worker process(es) while vLLM is stopped (pid {pids})",),
                )
            )
        host_age = now - self.host_t if self.host_t is not None else None
        if self.host_problem is not None:
            parts.append(Status(State.DEGRADED, (self.host_problem,)))
        elif host_age is not None and host_age > host_stale_s:
            parts.append(Status(State.DEGRADED, (f"host state is {host_age:.0f} s old",)))
        return parts

    def _overall_status(
        self, now: float, parts: list[Status], instances: tuple[InstanceView, ...], services: tuple[ServiceView, ...]
    ) -> Status:
        """The worst of the parts, unless the node was never polled, went silent, or serves nothing."""
        fleet = self.fleet
        status = Status.worst(parts) if parts else Status(State.UNKNOWN, ("nothing configured",))
        serving = [i.status for i in instances] or [s.status for s in services]
        stale_after = fleet.stale_after * fleet.poll_interval_s
        if self.last_t is None:
            return Status(State.UNKNOWN, ("not polled yet",))
        if now - self.last_t > max(stale_after, fleet.timeout_s * 2):
            return Status(State.STALE, (f"no poll finished for {now - self.last_t:.0f} s",))
        if serving and all(s.state is State.DOWN for s in serving):
            return Status(State.DOWN, tuple(r for s in parts for r in s.reasons))
        if status.state is State.DOWN:
            # An instance is down beside one that serves (a llama.cpp fallback beside a vLLM): the node
            # still says every part's reason, the host's memory with the down instance's.
            return Status(State.DOWN, tuple(r for s in parts for r in s.reasons))
        return status

    def _ledger(self, host: HostSample | None, instances: tuple[InstanceView, ...]) -> MemoryLedger | None:
        """Where the node's memory went, once the host's total is known."""
        if host is None or host.memory.mem_total is None:
            return None
        return ledger(host, self._vllm_reserved(instances, host), _models_held(instances))

    def _job_views(self, jobs: Mapping[str, JobView]) -> tuple[JobView, ...]:
        """The multi-node jobs this node's instances are ranks of, each once."""
        return tuple(
            job
            for name in dict.fromkeys(i.spec.job for i in self.instances.values() if i.spec.job)
            if name is not None and (job := jobs.get(name)) is not None
        )

    def ranks(self, now: float) -> list[tuple[str, RankView]]:
        """This node's ranks of multi-node jobs, by job name."""
        fresh_s = max(self.fleet.stale_after * self.fleet.poll_interval_s, self.fleet.timeout_s * 2)
        gpu = self.gpu if self.gpu_t is not None and now - self.gpu_t <= fresh_s else None
        fabric = self.fabric_view(now)
        link = fabric.link if fabric is not None else None
        found = []
        for instance in self.instances.values():
            if instance.spec.job is None:
                continue
            rank = RankView(
                self.spec.name,
                instance.spec.name,
                instance.spec.role,
                gpu.utilization if gpu is not None else None,
                gpu.power_w if gpu is not None else None,
                link.busiest_bps if link is not None else None,
                link.share if link is not None else None,
                fabric.nccl_checksums if fabric is not None else (),
            )
            found.append((instance.spec.job, rank))
        return found

    def _vllm_reserved(self, instances: tuple[InstanceView, ...], host: HostSample) -> float | None:
        """What the serving instances reserved at start-up: gpu_memory_utilization x the total."""
        total = host.memory.mem_total
        if total is None:
            return None
        reserved = 0.0
        for view in instances:
            state = self.instances.get(view.name)
            if state is None or view.status.state not in (State.UP, State.DEGRADED):
                continue
            utilization = state.spec.gpu_memory_utilization
            latest = state.tracker.latest
            if utilization is None and latest is not None:
                utilization = next(
                    (c.gpu_memory_utilization for c in latest.cache_config.values() if c.gpu_memory_utilization),
                    None,
                )
            reserved += (utilization or 0.0) * total
        return reserved or None

    def _stale_workers(self) -> tuple[HostProcess, ...]:
        """VLLM::Worker processes alive while no configured vLLM service of the node is running."""
        host = self.host
        if host is None or host.processes is None or not self.instances:
            return ()
        services = [i.service for i in self.instances.values()]
        if any(s is None for s in services):
            return ()  # without the managers' word, a worker may belong to a running server
        running = any(s is not None and (s.running or s.starting) for s in services)
        return find_stale_workers(host, service_running=running)

    def _host_statuses(self, thresholds: Thresholds) -> list[Status]:
        out: list[Status] = []
        if self.gpu_error:
            out.append(Status(State.DEGRADED, (self.gpu_error,)))
        elif (
            self.gpu is not None
            and self.gpu.temperature_c is not None
            and (self.gpu.temperature_c >= thresholds.gpu_temp_warn_c)
        ):
            out.append(Status(State.DEGRADED, (f"GPU at {self.gpu.temperature_c:.0f} °C",)))
        if self.host_error:
            out.append(Status(State.DEGRADED, (self.host_error,)))
        memory = self.memory
        if memory is not None and memory.mem_available is not None:
            available_gib = memory.mem_available / GIB
            if available_gib < thresholds.mem_available_crit_gib:
                out.append(Status(State.DEGRADED, (f"only {available_gib:.1f} GiB available (critical)",)))
            elif available_gib < thresholds.mem_available_warn_gib:
                out.append(Status(State.DEGRADED, (f"only {available_gib:.1f} GiB available",)))
        return out or [UP]


# Counter history kept by a consumer that shows the numbers of one window: two of them (every rate on
# screen is over the last window; at ~12 KB a scrape, 900 s held ~11 MB per vLLM instance).
COUNTER_WINDOWS_KEPT = 2


class FleetState:
    """Every node's state. ``max_age_s`` bounds the history kept for windows.

    One node's data never stops another's: an exception while applying or viewing a node (a bug that
    some remote's data found) is caught here, at the one place every mode passes through (the
    dashboard, the kiosk, ``watch``, ``snapshot``, ``check``, a replay), and becomes a reason on that
    node (``NodeState.internal_error``) while the others go on.
    """

    def __init__(
        self,
        spec: FleetSpec,
        readings: Mapping[str, EngineReading],
        max_age_s: float = DEFAULT_MAX_AGE_S,
    ) -> None:
        """``readings``: how each engine kind is read (``sparktui.engines.readings()``: the model knows no
        engine); an instance of an engine with no reading here is a ``ValueError``."""
        self.spec = spec
        self.nodes = {n.name: NodeState(n, spec, max_age_s, readings) for n in spec.nodes}

    def apply(self, obs: NodeObservation) -> None:
        node = self.nodes.get(obs.node)
        if node is not None:
            _guarded(node, node.apply, obs)

    def preread(self, obs: NodeObservation) -> None:
        """Read the ``/metrics`` bodies of ``obs`` ahead of ``apply(obs)`` (``InstanceState.preread``)."""
        node = self.nodes.get(obs.node)
        if node is not None:
            _guarded(node, node.preread, obs)

    def apply_host(self, update: HostUpdate) -> None:
        node = self.nodes.get(update.node)
        if node is not None:
            _guarded(node, node.apply_host, update)

    def canaries_due(self, node: str, t: float, held: Callable[[str], bool] | None = None) -> tuple[CanaryOrder, ...]:
        """The canaries to send to ``node``'s instances at ``t``, each marked as sent: the caller sends
        them and hands each result back in a later ``ServerObservation.canary``. None to an instance that
        ``held`` names (an action of sparktui's runs on it), and its clock is left as it was."""
        found = self.nodes.get(node)
        if found is None:
            return ()
        orders = (
            instance.canary_due(t) for name, instance in found.instances.items() if held is None or not held(name)
        )
        return tuple(order for order in orders if order is not None)

    def action_started(self, node: str, instance: str | None) -> None:
        """An action of sparktui's began on ``instance`` of ``node`` (None: all of the node's)."""
        for state in self._held(node, instance):
            state.action_started()

    def action_ended(self, node: str, instance: str | None, t: float) -> None:
        """The action ``action_started`` announced ended at ``t`` (``InstanceState.action_ended``)."""
        for state in self._held(node, instance):
            state.action_ended(t)

    def _held(self, node: str, instance: str | None) -> list[InstanceState]:
        found = self.nodes.get(node)
        if found is None:
            return []
        return [s for name, s in found.instances.items() if instance is None or name == instance]

    def view(self, now: float, window_s: float | None = 60.0) -> tuple[NodeView, ...]:
        heads, jobs = self._heads(now, window_s), self.jobs(now)
        return tuple(_node_view(node, now, window_s, heads, jobs) for node in self.nodes.values())

    def views_of(self, names: Iterable[str], now: float, window_s: float | None = 60.0) -> dict[str, NodeView]:
        """The views of some nodes (those just observed), as ``view`` would give them."""
        heads, jobs = self._heads(now, window_s), self.jobs(now)
        return {name: _node_view(self.nodes[name], now, window_s, heads, jobs) for name in names if name in self.nodes}

    def jobs(self, now: float) -> dict[str, JobView]:
        """Every multi-node job of the fleet with its ranks side by side, head first."""
        ranks: dict[str, list[RankView]] = {}
        activity: dict[str, tuple[float | None, float | None]] = {}
        for node in self.nodes.values():
            for job, rank in _guarded(node, node.ranks, now) or ():
                ranks.setdefault(job, []).append(rank)
            for instance in node.instances.values():
                if instance.spec.role == "head" and instance.spec.job is not None:
                    rates = instance.tracker.last_interval_rates()
                    latest = instance.tracker.latest
                    fresh = latest is not None and instance.health is not None and instance.health.ok
                    activity[instance.spec.job] = (
                        rates.generation_tokens_per_s if rates is not None and fresh else None,
                        instance._running() if fresh else None,
                    )
        return {
            job: JobView(job, *activity.get(job, (None, None)), tuple(sorted(members, key=lambda r: r.role != "head")))
            for job, members in ranks.items()
            if len(members) > 1
        }

    def _heads(self, now: float, window_s: float | None) -> dict[str, HeadStatus]:
        heads: dict[str, HeadStatus] = {}
        for node in self.nodes.values():
            heads.update(_guarded(node, node.head_statuses, now, window_s) or {})
        return heads


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _guarded(node: NodeState, work: Callable[_P, _R], *args: _P.args, **kwargs: _P.kwargs) -> _R | None:
    """``work(*args)``, or None when it raised: the exception is kept on ``node`` as its reason."""
    try:
        return work(*args, **kwargs)
    except Exception as exc:  # a bug some remote's data found: that node's reason, not the fleet's end
        node.internal_error = internal_error_text(exc)
        return None


def internal_error_text(exc: Exception) -> str:
    """One line for an exception met while reading a node's data."""
    return safe_text(f"sparktui could not read this node's data ({type(exc).__name__}: {exc}); the others go on")


def _node_view(
    node: NodeState,
    now: float,
    window_s: float | None,
    heads: Mapping[str, HeadStatus],
    jobs: Mapping[str, JobView],
) -> NodeView:
    """``node.view``, or a view that says why there is none when it raised (``FleetState``)."""
    view = _guarded(node, node.view, now, window_s, heads, jobs)
    if view is not None:
        return view
    assert node.internal_error is not None
    return NodeView(
        name=node.spec.name,
        host=node.spec.host,
        status=Status(State.DEGRADED, (node.internal_error,)),
        instances=(),
        services=(),
        gpu=None,
        host_memory=None,
        pressure=None,
        polled_wall=node.last_wall,
    )
