"""The fleet as the model sees it: observations in, immutable views (numbers + status) out.

``FleetState.apply()`` takes what a poll saw; ``FleetState.view()`` gives the frozen ``NodeView``s that
the dashboard and the headless commands render. No I/O here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from sparktui.model.derive import VllmRates
from sparktui.model.exporters import GpuReading, gpu_reading
from sparktui.model.memory import (
    HostMemory,
    LaunchReadiness,
    MemoryPressure,
    host_memory_from_exposition,
    launch_readiness,
    pressure_from_exposition,
)
from sparktui.model.observations import FetchKind, HttpResult, NodeObservation, VllmObservation
from sparktui.model.promtext import ParseError, PromParser, looks_truncated
from sparktui.model.specs import FleetSpec, NodeSpec, ServiceSpec, Thresholds, VllmSpec
from sparktui.model.status import UP, State, Status
from sparktui.model.tracker import VllmTracker
from sparktui.model.vllm import WANTED, normalise

GIB = 1024**3
WEDGED_AFTER_S = 20.0  # running requests but no token for this long: the engine is stuck


@dataclass(frozen=True, slots=True)
class InstanceView:
    name: str
    url: str | None
    role: str
    status: Status
    version: str | None
    served_models: tuple[str, ...]
    max_model_len: int | None
    model_name: str | None
    engine_stats: bool
    running: float | None
    waiting: float | None
    kv_usage: float | None
    kv_capacity_tokens: float | None
    rates: VllmRates | None
    launch: LaunchReadiness | None


@dataclass(frozen=True, slots=True)
class ServiceView:
    name: str
    kind: str
    url: str
    status: Status
    latency_s: float | None


@dataclass(frozen=True, slots=True)
class NodeView:
    name: str
    host: str
    status: Status
    instances: tuple[InstanceView, ...]
    services: tuple[ServiceView, ...]
    gpu: GpuReading | None
    host_memory: HostMemory | None
    pressure: MemoryPressure | None
    polled_wall: float | None


def _json_field(body: bytes) -> object:
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None


class InstanceState:
    """What is known about one vLLM instance, updated poll by poll."""

    def __init__(self, spec: VllmSpec, max_age_s: float) -> None:
        self.spec = spec
        self.parser = PromParser(keep=WANTED.__contains__)
        self.tracker = VllmTracker(max_age_s=max_age_s)
        self.health: HttpResult | None = None
        self.metrics: HttpResult | None = None
        self.metrics_error: str | None = None
        self.models_problem: str | None = None
        self.version: str | None = None
        self.served_models: tuple[str, ...] = ()
        self.max_model_len: int | None = None
        self.last_progress_t: float | None = None
        self.starting = False  # set from the service manager's state (SSH) when known

    def apply(self, obs: VllmObservation, t: float) -> None:
        if obs.health is not None:
            self.health = obs.health
        if obs.metrics is not None:
            self.metrics = obs.metrics
            self._apply_metrics(obs.metrics, t)
        if obs.version is not None and obs.version.ok:
            found = _json_field(obs.version.body)
            if isinstance(found, dict) and isinstance(found.get("version"), str):
                self.version = found["version"]
        if obs.models is not None:
            self._apply_models(obs.models)

    def _apply_metrics(self, result: HttpResult, t: float) -> None:
        if not result.answered:
            self.metrics_error = f"/metrics: {result.problem()}"
            return
        if not result.ok:
            self.metrics_error = f"/metrics: HTTP {result.status}"
            return
        text = result.text()
        if looks_truncated(text):
            self.metrics_error = "/metrics: body truncated (no final newline)"
            return
        try:
            scrape = normalise(self.parser.parse(text))
        except ParseError as exc:
            self.metrics_error = f"/metrics is not Prometheus text: {exc}"
            return
        self.metrics_error = None
        before = self.tracker.latest
        self.tracker.observe(t, scrape)
        if before is None or self._made_progress():
            self.last_progress_t = t

    def _made_progress(self) -> bool:
        rates = self.tracker.last_interval_rates()
        if rates is None:
            return True
        generated = rates.generation_tokens_per_s
        return generated is None or generated > 0 or self._running() in (None, 0)

    def _running(self) -> float | None:
        latest = self.tracker.latest
        if latest is None or not latest.models:
            return None
        return sum(m.running or 0 for m in latest.models.values())

    def _apply_models(self, result: HttpResult) -> None:
        if result.answered and result.status == 401:
            self.models_problem = (
                "/v1/models: 401 unauthorized; set api_key_env or api_key_file for this instance"
            )
            return
        if not result.ok:
            self.models_problem = f"/v1/models: {result.problem()}" if result.answered else None
            return
        found = _json_field(result.body)
        data = found.get("data") if isinstance(found, dict) else None
        if not isinstance(data, list):
            self.models_problem = "/v1/models: answer is not the OpenAI model list"
            return
        self.models_problem = None
        cards = [card for card in data if isinstance(card, dict)]
        self.served_models = tuple(str(card.get("id")) for card in cards if card.get("id"))
        lengths = [card.get("max_model_len") for card in cards]
        self.max_model_len = next((n for n in lengths if isinstance(n, int)), None)

    def status(
        self, t: float, thresholds: Thresholds, rates: VllmRates | None, head: HeadStatus | None = None
    ) -> Status:
        if self.spec.base_url is None:
            return _worker_status(self.spec.name, head)
        health = self.health
        name = self.spec.name
        if health is None:
            return Status(State.UNKNOWN, (f"{name}: not polled yet",))
        if not health.answered:
            if self.starting and health.kind is FetchKind.REFUSED:
                return Status(State.LOADING, (f"{name}: starting (connection refused while loading)",))
            return Status(State.DOWN, (f"{name}: /health {health.problem()}",))
        if health.status == 503:
            return Status(State.DOWN, (f"{name}: engine dead (/health 503)",))
        if not health.ok:
            return Status(State.DOWN, (f"{name}: /health HTTP {health.status}",))
        problems = [p for p in (self.metrics_error, self.models_problem) if p]
        latest = self.tracker.latest
        if latest is not None and latest.has_engine_stats and self.metrics_error is None:
            problems.extend(self._load_problems(t, thresholds, rates))
        if problems:
            return Status(State.DEGRADED, tuple(f"{name}: {p}" for p in problems))
        return UP

    def _load_problems(self, t: float, thresholds: Thresholds, rates: VllmRates | None) -> list[str]:
        latest = self.tracker.latest
        assert latest is not None
        problems: list[str] = []
        for model in latest.models.values():
            kv = model.kv_usage_max
            if kv is not None and kv >= thresholds.kv_usage_warn:
                problems.append(f"KV cache {kv:.0%} (warn at {thresholds.kv_usage_warn:.0%})")
            if model.waiting is not None and model.waiting >= thresholds.waiting_warn:
                problems.append(f"{model.waiting:.0f} requests waiting (warn at {thresholds.waiting_warn})")
        if rates is not None:
            if (
                rates.preemptions_per_s is not None
                and rates.preemptions_per_s > thresholds.preemptions_per_s_warn
            ):
                problems.append(f"{rates.preemptions_per_s:.2f} preemptions/s: KV pressure")
            ttft = rates.latency.get("ttft")
            if ttft is not None and ttft.p90 is not None and ttft.p90 > thresholds.ttft_p90_warn_s:
                problems.append(f"TTFT p90 {ttft.p90:.1f} s (warn at {thresholds.ttft_p90_warn_s:g} s)")
        running = self._running()
        if running and self.last_progress_t is not None and t - self.last_progress_t >= WEDGED_AFTER_S:
            problems.append(
                f"wedged: {running:.0f} running, no token generated for {t - self.last_progress_t:.0f} s"
            )
        return problems

    def view(
        self,
        t: float,
        thresholds: Thresholds,
        window_s: float | None,
        memory: HostMemory | None,
        head: HeadStatus | None = None,
    ) -> InstanceView:
        rates = self.tracker.rates(window_s=window_s)
        latest = self.tracker.latest
        model = None
        if latest is not None and latest.models:
            model = latest.models[min(latest.models)]
        gmu = self.spec.gpu_memory_utilization
        if gmu is None and latest is not None:
            configured = [c.gpu_memory_utilization for c in latest.cache_config.values()]
            gmu = next((g for g in configured if g is not None), None)
        status = self.status(t, thresholds, rates, head)
        # Launch readiness answers "would it start now?": it matters while the instance is not
        # serving. A running instance already holds its memory, so the check would mislead.
        serving = status.state in (State.UP, State.DEGRADED)
        launch = None
        if memory is not None and gmu is not None and not serving:
            launch = launch_readiness(memory, gmu)
        return InstanceView(
            name=self.spec.name,
            url=self.spec.base_url,
            role=self.spec.role,
            status=status,
            version=self.version,
            served_models=self.served_models,
            max_model_len=self.max_model_len,
            model_name=model.model_name if model else None,
            engine_stats=bool(latest and latest.has_engine_stats),
            running=model.running if model else None,
            waiting=model.waiting if model else None,
            kv_usage=model.kv_usage_max if model else None,
            kv_capacity_tokens=latest.kv_capacity_tokens if latest else None,
            rates=rates,
            launch=launch,
        )


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
        return Status(State.DEGRADED, (f"{spec.name}: HTTP {result.status} (expected {spec.expect_status})",))
    if result.elapsed_s > thresholds.service_latency_warn_s:
        return Status(State.DEGRADED, (f"{spec.name}: slow, {result.elapsed_s:.2f} s",))
    return UP


def _at_most_degraded(status: Status) -> Status:
    if status.state in (State.DOWN, State.STALE):
        return Status(State.DEGRADED, status.reasons)
    return status


class NodeState:
    def __init__(self, spec: NodeSpec, fleet: FleetSpec, max_age_s: float) -> None:
        self.spec = spec
        self.fleet = fleet
        self.instances = {v.name: InstanceState(v, max_age_s) for v in spec.vllm}
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
        self.last_t: float | None = None
        self.last_wall: float | None = None

    def apply(self, obs: NodeObservation) -> None:
        self.last_t, self.last_wall = obs.t, obs.wall
        for vobs in obs.vllm:
            instance = self.instances.get(vobs.name)
            if instance is not None:
                instance.apply(vobs, obs.t)
        for name, result in obs.services:
            self.services[name] = result
        if obs.node_exporter is not None:
            self.node_result = obs.node_exporter
            self._apply_node_exporter(obs.node_exporter)
        if obs.gpu_exporter is not None:
            self.gpu_result = obs.gpu_exporter
            self._apply_gpu(obs.gpu_exporter)

    def _apply_node_exporter(self, result: HttpResult) -> None:
        if not result.ok:
            self.host_error = f"node_exporter: {result.problem()}"
            return
        try:
            expo = self._node_parser.parse(result.text())
        except ParseError as exc:
            self.host_error = f"node_exporter is not Prometheus text: {exc}"
            return
        self.host_error = None
        self.host_memory = host_memory_from_exposition(expo)
        self.pressure = pressure_from_exposition(expo)

    def _apply_gpu(self, result: HttpResult) -> None:
        if not result.ok:
            self.gpu_error = f"GPU exporter: {result.problem()}"
            return
        try:
            expo = self._gpu_parser.parse(result.text())
        except ParseError as exc:
            self.gpu_error = f"GPU exporter is not Prometheus text: {exc}"
            return
        total = self.host_memory.mem_total if self.host_memory else None
        reading = gpu_reading(expo, host_mem_total_bytes=total)
        if reading is None:
            self.gpu_error = "GPU exporter: no GPU series in its answer"
            return
        self.gpu_error = None
        self.gpu = reading
        if self.host_memory is None:
            self.host_memory = host_memory_from_exposition(expo)

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
        self, now: float, window_s: float | None, heads: Mapping[str, HeadStatus] | None = None
    ) -> NodeView:
        fleet = self.fleet
        thresholds = fleet.thresholds
        heads = heads or {}
        instances = tuple(
            i.view(now, thresholds, window_s, self.host_memory, heads.get(i.spec.job or ""))
            for i in self.instances.values()
        )
        services = tuple(
            ServiceView(
                name=spec.name,
                kind=spec.kind,
                url=spec.url,
                status=_service_status(spec, self.services.get(spec.name), thresholds),
                latency_s=r.elapsed_s
                if (r := self.services.get(spec.name)) is not None and r.answered
                else None,
            )
            for spec in self.spec.services
        )
        # A side service or exporter that is down degrades the node; the node is down only when
        # everything it serves is down (or, with no vLLM configured, every service is).
        parts = [i.status for i in instances] + [_at_most_degraded(s.status) for s in services]
        parts.extend(self._host_statuses(thresholds))
        status = Status.worst(parts) if parts else Status(State.UNKNOWN, ("nothing configured",))
        serving = [i.status for i in instances] or [s.status for s in services]
        stale_after = fleet.stale_after * fleet.poll_interval_s
        if self.last_t is None:
            status = Status(State.UNKNOWN, ("not polled yet",))
        elif now - self.last_t > max(stale_after, fleet.timeout_s * 2):
            status = Status(State.STALE, (f"no poll finished for {now - self.last_t:.0f} s",))
        elif serving and all(s.state is State.DOWN for s in serving):
            status = Status(State.DOWN, tuple(r for s in parts for r in s.reasons))
        return NodeView(
            name=self.spec.name,
            host=self.spec.host,
            status=status,
            instances=instances,
            services=services,
            gpu=self.gpu,
            host_memory=self.host_memory,
            pressure=self.pressure,
            polled_wall=self.last_wall,
        )

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
        memory = self.host_memory
        if memory is not None and memory.mem_available is not None:
            available_gib = memory.mem_available / GIB
            if available_gib < thresholds.mem_available_crit_gib:
                out.append(Status(State.DEGRADED, (f"only {available_gib:.1f} GiB available (critical)",)))
            elif available_gib < thresholds.mem_available_warn_gib:
                out.append(Status(State.DEGRADED, (f"only {available_gib:.1f} GiB available",)))
        return out or [UP]


class FleetState:
    """Every node's state. ``max_age_s`` bounds the history kept for windows."""

    def __init__(self, spec: FleetSpec, max_age_s: float = 900.0) -> None:
        self.spec = spec
        self.nodes = {n.name: NodeState(n, spec, max_age_s) for n in spec.nodes}

    def apply(self, obs: NodeObservation) -> None:
        node = self.nodes.get(obs.node)
        if node is not None:
            node.apply(obs)

    def view(self, now: float, window_s: float | None = 60.0) -> tuple[NodeView, ...]:
        heads: dict[str, HeadStatus] = {}
        for node in self.nodes.values():
            heads.update(node.head_statuses(now, window_s))
        return tuple(node.view(now, window_s, heads) for node in self.nodes.values())
