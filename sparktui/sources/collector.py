"""Polls one node's HTTP endpoints (vLLM, GPU exporter, node_exporter, side services) into a
``NodeObservation``, with per-endpoint backoff for dead ones."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import urlencode

from sparktui.engines import registry
from sparktui.engines.base import Engine, PollPlan
from sparktui.model.observations import HttpResult, NodeObservation, ServerObservation
from sparktui.model.specs import FleetSpec, NodeSpec, ServerSpec
from sparktui.sources.canary import CanarySender, auth_headers
from sparktui.sources.http import FetchClient, fetch

Clock = Callable[[], float]
VERSION_EVERY = 60  # polls between /version checks while healthy
MODELS_EVERY = 30  # polls between /v1/models checks while healthy
# Per-model /metrics one poll may ask of one server (``PollPlan.model_metrics``), whatever its engine's
# plan says: a plan from a plugin that listed hundreds would not fan out (llama.cpp's asks at most 8).
MAX_MODEL_READS = 16


def metrics_url(base: str, names: tuple[str, ...], path: str = "/metrics") -> str:
    """The metrics URL polled, with a ``name[]`` filter of ``names`` (the series sparktui reads of an
    engine that takes the filter); none: the whole exposition."""
    return f"{base}{path}?{urlencode({'name[]': list(names)}, doseq=True)}" if names else f"{base}{path}"


@dataclass
class Backoff:
    """Skip polls of an endpoint that keeps failing: wait 1, 2, 4... intervals, up to ``max_s``."""

    interval_s: float
    max_s: float
    failures: int = 0
    next_try: float = 0.0

    def due(self, now: float) -> bool:
        return now >= self.next_try

    def record(self, result: HttpResult, now: float) -> None:
        if result.answered:
            self.failures, self.next_try = 0, 0.0
            return
        self.failures += 1
        if self.failures >= 2:
            delay = min(self.interval_s * 2 ** (self.failures - 2), self.max_s)
            self.next_try = now + delay


class _InstancePoller:
    def __init__(
        self, spec: ServerSpec, fleet: FleetSpec, clock: Clock, node: str = "", canaries: CanarySender | None = None
    ) -> None:
        self.spec = spec
        self.engine: Engine = registry()[spec.engine]  # the config named a known engine
        self.node = node
        self.canaries = canaries
        self.clock = clock
        self.metrics_urls: dict[PollPlan, str] = {}
        self.fleet = fleet
        self.backoff = Backoff(fleet.poll_interval_s, max(10.0, fleet.poll_interval_s))
        self.polls = 0
        self.need_version = True
        self.need_models = True
        self.was_healthy = False
        self.info: bytes | None = None  # its last description of itself: which of its engine's plans applies

    def _metrics_url(self, base: str, plan: PollPlan) -> str:
        url = self.metrics_urls.get(plan)
        if url is None:  # built once: the filter has sixty query parameters to encode
            url = self.metrics_urls[plan] = metrics_url(
                base, plan.metrics_filter if self.spec.metrics_filter else (), plan.metrics_path
            )
        return url

    async def poll(self, client: FetchClient) -> ServerObservation:
        """One poll: what the engine's plan for this server says to ask (``engines.base.PollPlan``), and
        nothing else."""
        base = self.spec.base_url
        if base is None:  # a tensor-parallel worker serves no HTTP
            return ServerObservation(name=self.spec.name, health=None, metrics=None)
        canary = self.canaries.take(self.node, self.spec.name) if self.canaries is not None else None
        now = self.clock()
        if not self.backoff.due(now):
            return ServerObservation(name=self.spec.name, health=None, metrics=None, canary=canary)
        self.polls += 1
        timeout, cap = self.fleet.timeout_s, self.fleet.max_body_bytes

        def ask_info() -> Awaitable[HttpResult]:
            return fetch(client, f"{base}{self.engine.polling.info_path}", timeout_s=timeout, max_bytes=256 * 1024)

        version: HttpResult | None = None
        if self.engine.mode is not None and self.info is None and self.engine.polling.info_path is not None:
            # What the server is decides what to ask it (a llama.cpp router's /metrics loads a model): first.
            version = await ask_info()
            self._read_info(version)
        plan = self.engine.plan_for(self.info)
        ask_version = version is None and (
            plan.info_path is not None and (plan.info_each_poll or self.need_version or self.polls % VERSION_EVERY == 0)
        )
        ask_models = plan.models_each_poll or self.need_models or self.polls % MODELS_EVERY == 0
        metrics_at: list[float] = []
        url = self._metrics_url(base, plan)

        async def timed_metrics() -> HttpResult:
            result = await fetch(client, url, timeout_s=timeout, max_bytes=cap)
            metrics_at.append(self.clock())  # the moment its counters are of
            return result

        async def nothing() -> None:
            return None

        health, metrics, asked_version, models = await asyncio.gather(
            fetch(client, f"{base}{plan.health_path}", timeout_s=timeout, max_bytes=64 * 1024),
            timed_metrics() if plan.metrics else nothing(),
            ask_info() if ask_version else nothing(),
            fetch(
                client, f"{base}/v1/models", timeout_s=timeout, max_bytes=1024 * 1024, headers=auth_headers(self.spec)
            )
            if ask_models
            else nothing(),
        )
        if asked_version is not None:
            version = asked_version
            self._read_info(version)
        self.backoff.record(health if health.answered or metrics is None else metrics, self.clock())
        healthy = health.ok
        if version is not None and version.ok:
            self.need_version = False
        if models is not None and models.answered:
            self.need_models = False
        if healthy and not self.was_healthy:  # came (back) up: a restart may have changed both
            self.need_version = self.need_models = True
        self.was_healthy = healthy
        detail = None
        if plan.detail_path is not None and metrics is not None and metrics.ok and plan.wants_detail(metrics.body):
            detail = await fetch(client, f"{base}{plan.detail_path}", timeout_s=timeout, max_bytes=cap)
        per_model = None
        if plan.model_metrics is not None and models is not None and models.ok:
            # Each model this poll's /v1/models says answers, as the plan words it (loading nothing).
            asked = plan.model_metrics(models.body)[:MAX_MODEL_READS]
            answers = await asyncio.gather(
                *(fetch(client, f"{base}{path}", timeout_s=timeout, max_bytes=cap) for _model, path in asked)
            )
            per_model = tuple((model, answer) for (model, _path), answer in zip(asked, answers, strict=True))
            metrics_at.append(self.clock())
        return ServerObservation(
            name=self.spec.name,
            health=health,
            metrics=metrics,
            version=version,
            models=models,
            canary=canary,
            detail=detail,
            metrics_t=metrics_at[-1] if metrics_at else None,
            model_metrics=per_model,
        )

    def _read_info(self, result: HttpResult) -> None:
        if result.ok:
            self.info = result.body


class NodeCollector:
    """Everything HTTP about one node. ``poll()`` never raises and ends within about ``timeout_s``."""

    def __init__(
        self,
        node: NodeSpec,
        fleet: FleetSpec,
        clock: Clock = time.monotonic,
        canaries: CanarySender | None = None,
        wall_clock: Clock = time.time,
    ) -> None:
        """``canaries``: where the node's canary results wait for the next poll (None: no canaries)."""
        self.node = node
        self.fleet = fleet
        self.clock = clock
        self.wall_clock = wall_clock  # the unix time each observation carries (a stepped demo's own)
        self._instances = [_InstancePoller(spec, fleet, clock, node.name, canaries) for spec in node.vllm]
        interval = fleet.poll_interval_s
        self._backoffs: dict[str, Backoff] = {}
        self._interval = interval

    def _backoff(self, key: str) -> Backoff:
        found = self._backoffs.get(key)
        if found is None:
            found = self._backoffs[key] = Backoff(self._interval, max(10.0, self._interval))
        return found

    async def _maybe(
        self, client: FetchClient, key: str, url: str, timeout_s: float, max_bytes: int
    ) -> HttpResult | None:
        backoff = self._backoff(key)
        if not backoff.due(self.clock()):
            return None
        result = await fetch(client, url, timeout_s=timeout_s, max_bytes=max_bytes)
        backoff.record(result, self.clock())
        return result

    async def poll(self, client: FetchClient) -> NodeObservation:
        fleet = self.fleet
        node = self.node
        vllm_calls = [instance.poll(client) for instance in self._instances]
        gpu = (
            self._maybe(client, "gpu", node.gpu_exporter.url, fleet.timeout_s, fleet.max_body_bytes)
            if node.gpu_exporter is not None
            else _none()
        )
        host = (
            self._maybe(client, "node", node.node_exporter.url, fleet.timeout_s, fleet.max_body_bytes)
            if node.node_exporter is not None
            else _none()
        )
        service_calls = [
            self._maybe(client, f"service:{s.name}", s.url, s.timeout_s or fleet.timeout_s, 1024 * 1024)
            for s in node.services
        ]
        vllm_results, gpu_result, host_result, service_results = await asyncio.gather(
            asyncio.gather(*vllm_calls), gpu, host, asyncio.gather(*service_calls)
        )
        return NodeObservation(
            node=node.name,
            t=self.clock(),
            wall=self.wall_clock(),
            vllm=tuple(vllm_results),
            gpu_exporter=gpu_result,
            node_exporter=host_result,
            services=tuple(
                (spec.name, result)
                for spec, result in zip(node.services, service_results, strict=True)
                if result is not None
            ),
        )


async def _none() -> None:
    return None
