"""Prometheus as the fleet's metrics source (docs/prometheus.md).

Where a Prometheus server already scrapes the fleet, sparktui reads the current values from it
instead of scraping every endpoint itself. One refresh is ONE instant query, batched over every
node with regex label matchers::

    {__name__=~"<every series sparktui reads>|up", instance=~"a:8000|a:9835|b:8000|..."}
      or label_replace(timestamp(up{instance=~"..."}), "sparktui_scrape", "ts", "", "")

(its text, like every query's, is ``sparktui.sources.promql``'s).

It returns the latest value of exactly the series direct mode reads (``engines.vllm.scrape.WANTED``, the GPU
exporter and node_exporter series of ``model.exporters`` / ``model.memory``), ``up`` for the health of
each target, and the time of each target's last scrape. Both halves come from one evaluation, so they
are consistent. For each target whose scrape is newer than the last one seen, the answer is written
back as Prometheus text and handed to the sink as an ordinary ``NodeObservation``, stamped with the
scrape's own time: counters, resets, windows and quantiles are then computed by the very code of
direct mode, over the scrape instants (``docs/metrics.md``, the "rates" step: the scrape times, not
the nominal interval).

``up == 0``, or a target Prometheus does not scrape at all, is a refused connection to the model,
with a reason that names Prometheus (and Prometheus's own last error for the target, which costs a
second request, to ``/api/v1/targets``, only in a refresh that found a target down).

Mixed mode: ``PrometheusSource`` is a ``LiveFleet`` whose HTTP part is replaced. Host state, logs and
actions still go over each node's SSH connection where one is configured, and side services (which
Prometheus does not scrape) are still checked over HTTP unless ``poll_services = false``.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import math
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from sparktui.model.logbuffer import LogLine
from sparktui.model.numbers import is_digits
from sparktui.model.observations import FetchKind, HostUpdate, HttpResult, NodeObservation, ServerObservation
from sparktui.model.specs import (
    ExporterSpec,
    FleetSpec,
    NodeSpec,
    PrometheusSpec,
    PrometheusTarget,
    ServerSpec,
    SshSpec,
    check_host,
)
from sparktui.monitor.core import Monitor
from sparktui.monitor.schedule import next_due
from sparktui.sources._httpx import httpx
from sparktui.sources.collector import NodeCollector
from sparktui.sources.http import USER_AGENT, make_client, origin_of
from sparktui.sources.live import FleetSink, FleetSource, LiveFleet
from sparktui.sources.promapi import (
    ENCODINGS,
    MAX_RAW_BYTES,
    MAX_TIME,
    ActiveTarget,
    AnswerBody,
    PrometheusError,
    Series,
    first_line,
    read_answer,
    read_series,
    read_targets,
)
from sparktui.sources.promql import SCRAPE_LABEL, discovery_queries, refresh_query

__all__ = ["PrometheusError"]  # raised here, defined with the reader of the answers (promapi)

# Labels Prometheus adds to every series of a target: not part of what the endpoint exported.
TARGET_LABELS = frozenset({"instance", "job"})
BACKFILL_STEPS = 6
# Sent with every query. VictoriaMetrics answers a query for "now" as of -search.latencyOffset ago (30 s
# by default) unless it is told not to cache (docs/prometheus.md#victoriametrics); Prometheus ignores
# form fields it does not know.
FRESH = {"nocache": "1"}


# --- the HTTP API ---------------------------------------------------------------------------------------


def auth_headers(spec: PrometheusSpec) -> dict[str, str]:
    if spec.bearer_token is not None:
        return {"Authorization": f"Bearer {spec.bearer_token.get_secret_value()}"}
    if spec.username is not None and spec.password is not None:
        pair = f"{spec.username}:{spec.password.get_secret_value()}".encode()
        return {"Authorization": f"Basic {base64.b64encode(pair).decode()}"}
    return {}


@dataclass
class QueryStats:
    """What the client cost: requests to Prometheus and bytes of answers, since it was made."""

    queries: int = 0
    bytes: int = 0
    seconds: float = 0.0


class PrometheusClient:
    """Queries against one Prometheus server's HTTP API; every failure is a one-line ``PrometheusError``."""

    def __init__(self, spec: PrometheusSpec, client: httpx.AsyncClient, timeout_s: float) -> None:
        self.spec = spec
        self.client = client
        self.timeout_s = timeout_s
        # Asked for by name: httpx would offer br and zstd where their packages are installed, and only
        # these two are decoded under the caps (AnswerBody).
        self.headers = {**auth_headers(spec), "User-Agent": USER_AGENT, "Accept-Encoding": ENCODINGS}
        self.stats = QueryStats()

    async def query(self, expr: str, at: float | None = None) -> list[Series]:
        """An instant query's vector (or the series of a range selector's matrix)."""
        form = {"query": expr, **FRESH} if at is None else {"query": expr, "time": f"{at:.3f}", **FRESH}
        return read_series(await self._post("/api/v1/query", form), self._where)

    async def query_range(self, expr: str, start: float, end: float, step: float) -> list[Series]:
        form = {
            "query": expr,
            "start": f"{start:.3f}",
            "end": f"{end:.3f}",
            "step": f"{max(step, 0.001):.3f}",
            **FRESH,
        }
        steps = math.floor((end - start) / max(step, 0.001)) + 1  # the evaluations asked for
        return read_series(await self._post("/api/v1/query_range", form), self._where, max_times=steps + 1)

    async def targets(self) -> list[ActiveTarget]:
        return read_targets(await self._request("GET", "/api/v1/targets", {"state": "active"}), self._where)

    @property
    def _where(self) -> str:
        return f"Prometheus at {self.spec.url}"

    async def _post(self, path: str, form: Mapping[str, str]) -> object:
        return await self._request("POST", path, form)

    async def _request(self, method: str, path: str, form: Mapping[str, str]) -> object:
        url = self.spec.url + path
        where = self._where
        started = time.perf_counter()
        self.stats.queries += 1
        try:
            async with asyncio.timeout(self.timeout_s):
                if method == "POST":
                    request = self.client.build_request("POST", url, data=dict(form), headers=self.headers)
                else:
                    request = self.client.build_request("GET", url, params=dict(form), headers=self.headers)
                response = await self.client.send(request, stream=True)
                try:
                    body = await _read_body(response, where)
                finally:
                    await response.aclose()
        except (TimeoutError, httpx.TimeoutException):
            raise PrometheusError(f"{where}: no answer within {self.timeout_s:g} s") from None
        except httpx.ConnectError as exc:
            reason = "connection refused" if "refused" in str(exc).lower() else _one_line(exc)
            raise PrometheusError(f"{where}: cannot connect: {reason}") from None
        except httpx.HTTPError as exc:
            raise PrometheusError(f"{where}: {_one_line(exc)}") from None
        finally:
            self.stats.seconds += time.perf_counter() - started
        self.stats.bytes += body.raw_size
        status = response.status_code
        if status in (401, 403):
            hint = (
                "check bearer_token_env / bearer_token_file"
                if self.spec.bearer_token is not None
                else "check username and password_env"
                if self.spec.username is not None
                else "it wants credentials: set bearer_token_env, or username and password_env, in [prometheus]"
            )
            raise PrometheusError(f"{where}: HTTP {status} {'unauthorized' if status == 401 else 'forbidden'}; {hint}")
        # Parsed on the loop: a thread would hold the GIL as long (3 MB, ~25 ms, at 64 nodes).
        return read_answer(body.finish(), status, where)


async def _read_body(response: httpx.Response, where: str) -> AnswerBody:
    """The answer's bytes as they come (``aiter_raw``: still compressed), into an ``AnswerBody`` that
    decodes them under its caps; a declared length over the raw cap is refused before any is read."""
    declared = response.headers.get("content-length", "")
    if declared.isascii() and declared.isdigit() and (len(declared) > 15 or int(declared) > MAX_RAW_BYTES):
        shown = f"{int(declared):,} bytes" if len(declared) <= 15 else "a length of over 15 digits"
        raise PrometheusError(f"{where}: the answer is {shown}, over the bound of {MAX_RAW_BYTES // (1024 * 1024)} MiB")
    body = AnswerBody(response.headers.get("content-encoding"), where)
    async for chunk in response.aiter_raw():
        body.feed(chunk)
    return body


def _one_line(exc: BaseException) -> str:
    return first_line(str(exc)) or type(exc).__name__


# --- answers → expositions -----------------------------------------------------------------------------


@dataclass
class TargetScrape:
    """One target's part of an answer: its last scrape's time and ``up``, and its series as text lines
    without the value (``name{labels}``) and their values."""

    scraped: float | None = None  # unix time of the scrape
    up: float | None = None
    series: list[tuple[str, str]] = field(default_factory=list)  # (series head, value)

    def exposition(self) -> bytes:
        return "".join(f"{head} {value}\n" for head, value in self.series).encode()


def _label_text(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def series_head(name: str, labels: Mapping[str, str], drop: frozenset[str]) -> str:
    """``name{label="value",...}`` without the labels in ``drop`` (nor ``__name__``)."""
    block = ",".join(f'{k}="{_label_text(v)}"' for k, v in labels.items() if k not in drop and k != "__name__")
    return f"{name}{{{block}}}" if block else name


def exposition(series: Iterable[tuple[str, Mapping[str, str], str]], drop: frozenset[str]) -> bytes:
    """Series back in the Prometheus text format, without the labels Prometheus added to the target."""
    return "".join(f"{series_head(name, labels, drop)} {value}\n" for name, labels, value in series).encode()


Item = tuple[Mapping[str, str], str]  # a series' labels (``__name__`` included) and its value


class TargetIndex:
    """Finds the configured target a series of an answer belongs to, by the mapped labels, and writes
    each series back as text. The heads are kept from one refresh to the next (the same series come
    back every time), so a steady refresh costs a dictionary lookup per series."""

    HEADS_LIMIT = 400_000

    def __init__(self, targets: Sequence[PrometheusTarget]) -> None:
        self.targets = list(targets)
        self.names = tuple(sorted({name for t in targets for name, _ in t.labels}))
        self._by_key = {self._key_of(dict(t.labels)): t for t in targets}
        self._by_value = {dict(t.labels)[self.names[0]]: t for t in targets} if len(self.names) == 1 else None
        self.drop = TARGET_LABELS | frozenset(self.names) | {SCRAPE_LABEL}
        self._heads: dict[tuple[tuple[str, str], ...], tuple[PrometheusTarget | None, str | None]] = {}

    def _key_of(self, labels: Mapping[str, str]) -> tuple[str | None, ...]:
        return tuple(labels.get(name) for name in self.names)

    def find(self, labels: Mapping[str, str]) -> PrometheusTarget | None:
        if self._by_value is not None:
            return self._by_value.get(labels.get(self.names[0], ""))
        return self._by_key.get(self._key_of(labels))

    def _head(self, labels: Mapping[str, str]) -> tuple[PrometheusTarget | None, str | None]:
        key = tuple(labels.items())
        found = self._heads.get(key)
        if found is None:
            target = self.find(labels)
            name = labels.get("__name__")
            head = series_head(name, labels, self.drop) if name is not None and name != "up" else name
            found = (target, head)
            if len(self._heads) > self.HEADS_LIMIT:
                self._heads.clear()
            self._heads[key] = found
        return found

    def split(self, items: Iterable[Item]) -> dict[PrometheusTarget, TargetScrape]:
        """``(labels, value)`` items of one evaluation → each target's scrape."""
        out: dict[PrometheusTarget, TargetScrape] = {}
        for labels, value in items:
            target, head = self._head(labels)
            if target is None:
                continue  # a label combination no endpoint of the config has
            scrape = out.get(target)
            if scrape is None:
                scrape = out[target] = TargetScrape()
            if head is None:
                scraped = float(value)  # a number: the reader checked every value (promapi)
                if labels.get(SCRAPE_LABEL) == "ts" and 0 < scraped <= MAX_TIME:
                    scrape.scraped = scraped
            elif head == "up":
                scrape.up = float(value)
            else:
                scrape.series.append((head, value))
        return out


def _instant_items(result: Iterable[Series]) -> list[Item]:
    """An instant query's series with their value (the last, should the server answer a matrix)."""
    return [(series.labels, series.samples[-1][1]) for series in result if series.samples]


def _range_items(result: Iterable[Series]) -> dict[float, list[Item]]:
    """A range query's matrix regrouped by evaluation step."""
    steps: dict[float, list[Item]] = {}
    for series in result:
        for at, value in series.samples:
            steps.setdefault(at, []).append((series.labels, value))
    return steps


# --- the source -----------------------------------------------------------------------------------------


@dataclass
class _Delivered:
    scraped: float | None = None  # unix time of the last scrape handed on
    first: float | None = None  # ... and of the first


class PrometheusSource(LiveFleet):
    """The fleet's metrics from Prometheus; host state, logs and actions as ``LiveFleet`` (mixed mode)."""

    def __init__(
        self,
        fleet: FleetSpec,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        logs: bool = True,
        backfill_s: float | None = None,
        refresh_loop: bool = True,
    ) -> None:
        """``backfill_s``: before the first refresh, read that many seconds of history (a range query of
        ``BACKFILL_STEPS`` steps) so windows are full at once. ``refresh_loop=False`` leaves the metrics
        to the caller's own ``refresh()`` / ``backfill()`` calls (``run()`` then collects host state and
        logs only)."""
        if fleet.prometheus is None:
            raise ValueError("the fleet config has no [prometheus] table")
        super().__init__(fleet, clock=clock, logs=logs)
        self.spec: PrometheusSpec = fleet.prometheus
        self.wall = wall
        self.backfill_s = backfill_s
        self.refresh_loop = refresh_loop
        self.refresh_s = self.spec.refresh_s or fleet.poll_interval_s
        self.timeout_s = self.spec.timeout_s or max(fleet.timeout_s, 5.0)
        self.targets = self.spec.targets(fleet.nodes)
        self.index = TargetIndex(self.targets)
        self.query = refresh_query(self.targets, self.spec.selector)
        self._delivered: dict[PrometheusTarget, _Delivered] = {t: _Delivered() for t in self.targets}
        self._node_t: dict[str, float] = {}
        self._offset: float | None = None
        self._services = {
            node.name: NodeCollector(
                node.model_copy(update={"vllm": (), "gpu_exporter": None, "node_exporter": None}), fleet, clock
            )
            for node in fleet.nodes
            if node.services and self.spec.poll_services
        }
        self.prometheus: PrometheusClient | None = None
        self.refreshes = 0

    # --- time ---

    def _to_clock(self, wall_time: float) -> float:
        """A unix time on the consumer's clock. The offset is fixed (scrape intervals stay exact) and
        re-anchored only if the wall clock steps."""
        offset = self.clock() - self.wall()
        if self._offset is None or abs(offset - self._offset) > 1.0:
            self._offset = offset
        return wall_time + self._offset

    def scrape_span(self, target: PrometheusTarget) -> tuple[float, float] | None:
        """Unix times of the first and the last scrape of ``target`` handed on (for comparisons)."""
        delivered = self._delivered.get(target)
        if delivered is None or delivered.first is None or delivered.scraped is None:
            return None
        return delivered.first, delivered.scraped

    # --- one refresh ---

    async def refresh(self, client: httpx.AsyncClient | None = None) -> list[NodeObservation]:
        """One query for the whole fleet (and the side services' health checks, in parallel)."""
        prometheus = self._client(client)
        services = asyncio.gather(*(self._poll_services(name, prometheus.client) for name in self._services))
        try:
            result = await prometheus.query(self.query)
        finally:
            service_results = await services
        split = self.index.split(_instant_items(result))
        errors = await self._down_reasons(prometheus, split)
        observations = self._observations([split], errors, dict(service_results))
        self.refreshes += 1
        return observations

    async def backfill(self, seconds: float, client: httpx.AsyncClient | None = None) -> list[NodeObservation]:
        """The last ``seconds`` of history, ``BACKFILL_STEPS`` evaluations of the refresh query."""
        prometheus = self._client(client)
        end = self.wall()
        result = await prometheus.query_range(self.query, end - seconds, end, seconds / BACKFILL_STEPS)
        steps = _range_items(result)
        splits = [self.index.split(steps[at]) for at in sorted(steps)]
        return self._observations(splits, {}, {}, report_missing=False)

    def _client(self, client: httpx.AsyncClient | None) -> PrometheusClient:
        if client is not None:
            return PrometheusClient(self.spec, client, self.timeout_s)
        if self.prometheus is None:
            raise RuntimeError("refresh() needs a client outside run()")
        return self.prometheus

    async def _poll_services(self, node: str, client: httpx.AsyncClient) -> tuple[str, NodeObservation]:
        return node, await self._services[node].poll(client)

    async def _down_reasons(
        self, prometheus: PrometheusClient, split: Mapping[PrometheusTarget, TargetScrape]
    ) -> dict[PrometheusTarget, str]:
        """Prometheus's own last error for targets that are down in a new scrape (one request, or none)."""
        down = [
            t
            for t, scrape in split.items()
            if scrape.up == 0 and scrape.scraped is not None and scrape.scraped != self._delivered[t].scraped
        ]
        if not down:
            return {}
        try:
            active = await prometheus.targets()
        except PrometheusError:
            return {}
        errors: dict[PrometheusTarget, str] = {}
        for entry in active:
            target = self.index.find(entry.labels)
            if target in down and entry.last_error:
                errors[target] = short_scrape_error(entry.last_error)
        return errors

    def _observations(
        self,
        splits: Sequence[Mapping[PrometheusTarget, TargetScrape]],
        errors: Mapping[PrometheusTarget, str],
        services: Mapping[str, NodeObservation],
        *,
        report_missing: bool = True,
    ) -> list[NodeObservation]:
        """New scrapes as observations, oldest first; per node, one observation per distinct scrape time."""
        # (node, time) -> what goes into that observation
        pending: dict[tuple[str, float], _Pending] = {}
        now_wall = self.wall()
        for split in splits:
            for target in self.targets:
                scrape = split.get(target)
                delivered = self._delivered[target]
                if scrape is None or scrape.scraped is None:
                    if report_missing and split is splits[-1]:
                        wall_time = now_wall
                        result = self._missing(target)
                    else:
                        continue
                else:
                    if delivered.scraped is not None and scrape.scraped <= delivered.scraped:
                        continue  # nothing new since the last refresh
                    delivered.scraped = wall_time = scrape.scraped
                    if delivered.first is None:
                        delivered.first = wall_time
                    result = self._result(target, scrape, errors.get(target))
                entry = pending.setdefault((target.node, wall_time), _Pending())
                entry.results.append((target, result))
        by_node: dict[str, list[tuple[float, _Pending]]] = {}
        for (name, wall_time), entry in pending.items():
            by_node.setdefault(name, []).append((wall_time, entry))
        out: list[NodeObservation] = []
        for node in self.fleet.nodes:
            groups = sorted(by_node.get(node.name, []), key=lambda g: g[0])
            service_obs = services.get(node.name)
            if not groups and service_obs is None:
                continue
            if not groups:
                # Only side services were checked: keep the node's time (it says how fresh the metrics are).
                last = self._node_t.get(node.name)
                out.append(
                    NodeObservation(
                        node=node.name,
                        t=last if last is not None else self.clock(),
                        wall=self.wall(),
                        services=service_obs.services if service_obs is not None else (),
                    )
                )
                continue
            for index, (wall_time, entry) in enumerate(groups):
                # Each vLLM instance's history gets its own scrape times, exactly; the node's time may
                # step back a little when its targets are scraped at different instants (harmless).
                t = self._to_clock(wall_time)
                self._node_t[node.name] = max(t, self._node_t.get(node.name, -math.inf))
                out.append(
                    entry.observation(
                        node.name,
                        t,
                        wall_time,
                        services=service_obs.services if service_obs is not None and index == len(groups) - 1 else (),
                    )
                )
        out.sort(key=lambda o: o.t)
        return out

    def _result(self, target: PrometheusTarget, scrape: TargetScrape, last_error: str | None) -> HttpResult:
        where = f"{self.spec.url} {target.shown()}"
        if scrape.up is not None and scrape.up != 0:
            return HttpResult(
                url=where,
                kind=FetchKind.OK,
                status=200,
                body=scrape.exposition(),
                content_type="text/plain; version=0.0.4",
            )
        cause = f": {last_error}" if last_error else ""
        return HttpResult(
            url=where,
            kind=FetchKind.REFUSED,
            error=f"down in Prometheus (up == 0 for {target.shown()}){cause}",
        )

    def _missing(self, target: PrometheusTarget) -> HttpResult:
        return HttpResult(
            url=f"{self.spec.url} {target.shown()}",
            kind=FetchKind.REFUSED,
            error=(
                f"not in Prometheus: no up series for {target.shown()}; check its scrape config, or [prometheus] labels"
            ),
        )

    # --- the loop (replaces LiveFleet's HTTP polling) ---

    async def _http(self, sink: FleetSink, planner: Monitor | None) -> None:
        # Prometheus scraped the engines: no canary goes out from here (``planner`` unused).
        if not self.refresh_loop:
            return
        origins = [origin_of(self.spec.url)]
        origins.extend(origin_of(s.url) for node in self.fleet.nodes for s in node.services)
        async with make_client(origins, ca_file=self.fleet.ca_file) as client:
            self.prometheus = PrometheusClient(self.spec, client, self.timeout_s)
            failing: str | None = None
            if self.backfill_s:
                try:
                    for observation in await self.backfill(self.backfill_s):
                        sink.observation(observation)
                except PrometheusError as exc:
                    failing = str(exc)
                    sink.error("prometheus", exc)
            next_at = time.monotonic()
            while True:
                try:
                    for observation in await self.refresh():
                        sink.observation(observation)
                    failing = None
                except PrometheusError as exc:
                    if str(exc) != failing:  # once per new problem, not every refresh
                        failing = str(exc)
                        sink.error("prometheus", exc)
                except Exception as exc:  # a bug must not stop the refreshes
                    sink.error("prometheus", exc)
                now = time.monotonic()
                next_at = next_due(next_at, now, self.refresh_s)  # a refresh that overran skips the missed ones
                await asyncio.sleep(next_at - now)


@dataclass
class _Pending:
    results: list[tuple[PrometheusTarget, HttpResult]] = field(default_factory=list)

    def observation(
        self, node: str, t: float, wall: float, services: tuple[tuple[str, HttpResult], ...]
    ) -> NodeObservation:
        vllm: list[ServerObservation] = []
        gpu: HttpResult | None = None
        node_exporter: HttpResult | None = None
        for target, result in self.results:
            if target.kind == "vllm":
                # /health is not in Prometheus: a target that is up answered its /metrics, which is
                # what direct mode's "up" rests on as well (an engine that died behind a live
                # /metrics shows only in direct mode's /health 503).
                health = result if not result.ok else HttpResult(url=result.url, kind=FetchKind.OK, status=200)
                vllm.append(ServerObservation(name=target.endpoint, health=health, metrics=result))
            elif target.kind == "gpu_exporter":
                gpu = result
            else:
                node_exporter = result
        return NodeObservation(
            node=node,
            t=t,
            wall=wall,
            vllm=tuple(vllm),
            gpu_exporter=gpu,
            node_exporter=node_exporter,
            services=services,
        )


def short_scrape_error(text: str) -> str:
    """The server's ``lastError`` without the request it failed: Prometheus's ``Get "http://...": ``,
    VictoriaMetrics's ``error when scraping "http://...": ``."""
    line = first_line(text)
    found = re.match(r'^(?:Get|GET|error when scraping) "[^"]*": (.*)$', line)
    return found.group(1) if found else line


# --- choosing the source, one-shot collection, discovery -------------------------------------------------


def fleet_source(
    fleet: FleetSpec,
    *,
    clock: Callable[[], float] = time.monotonic,
    logs: bool = True,
    backfill_s: float | None = None,
) -> FleetSource:
    """The source the config asks for: Prometheus when it has a ``[prometheus]`` table, else direct."""
    if fleet.prometheus is not None:
        return PrometheusSource(fleet, clock=clock, logs=logs, backfill_s=backfill_s)
    return LiveFleet(fleet, clock=clock, logs=logs)


class _HostsHeard:
    """A tap on the one-shot core: set once every node that has host state was heard from."""

    def __init__(self, wanted: set[str]) -> None:
        self.heard: set[str] = set()
        self.wanted = wanted
        self.all_heard = asyncio.Event()

    def observation(self, observation: NodeObservation) -> None:
        pass

    def host(self, update: HostUpdate) -> None:
        self.heard.add(update.node)
        if self.wanted <= self.heard:
            self.all_heard.set()

    def log_batch(self, node: str, instance: str, lines: Sequence[LogLine]) -> None:
        pass

    def error(self, node: str, exc: Exception) -> None:
        pass


async def collect(
    monitor: Monitor, window_s: float = 60.0, *, clock: Callable[[], float] = time.monotonic
) -> tuple[Monitor, float]:
    """``snapshot`` / ``check`` from Prometheus, into the one-shot core ``monitor`` (``Monitor.once``):
    ``window_s`` of history and the latest values in two queries (no waiting for a second scrape), with
    host state over SSH where configured; the core is ticked at the end. Raises ``PrometheusError`` when
    Prometheus does not answer."""
    from sparktui.sources.host import wants_host_state

    fleet = monitor.fleet
    source = PrometheusSource(fleet, clock=clock, logs=False, refresh_loop=False)
    hosted = {node.name for node in fleet.nodes if wants_host_state(node)}
    heard = _HostsHeard(hosted)
    monitor.taps.append(heard)
    deadline = time.monotonic() + max((n.ssh.connect_timeout_s for n in fleet.nodes), default=0.0) + 3.0
    task = asyncio.create_task(source.run(monitor)) if hosted else None
    try:
        origins = [origin_of(fleet.prometheus.url)] if fleet.prometheus else []
        async with make_client(origins, ca_file=fleet.ca_file) as client:
            observations = await source.backfill(window_s, client)
            observations += await source.refresh(client)
        for observation in sorted(observations, key=lambda o: o.t):
            monitor.observation(observation)
        if task is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(heard.all_heard.wait(), max(0.0, deadline - time.monotonic()))
    finally:
        monitor.taps.remove(heard)
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    now = clock()
    monitor.tick(now)
    return monitor, now


_NODE_NAME_BAD = re.compile(r"[^A-Za-z0-9._-]+")


async def discover_nodes(spec: PrometheusSpec, client: httpx.AsyncClient, timeout_s: float = 10.0) -> list[NodeSpec]:
    """Nodes from what Prometheus scrapes: a vLLM wherever ``vllm:`` series are, exporters by their series,
    grouped by the host of ``instance`` (so this needs the default ``instance = "{address}"`` mapping).
    SSH is left off: the found nodes have no host state or actions until the config says how."""
    prometheus = PrometheusClient(spec, client, timeout_s)
    kinds = discovery_queries(spec)
    answers = await asyncio.gather(*(prometheus.query(query) for query in kinds.values()))
    found: dict[str, dict[str, list[str]]] = {}  # host -> kind -> ports
    for kind, answer in zip(kinds, answers, strict=True):
        for series in answer:
            instance = series.labels.get("instance", "")
            host, _, port = instance.rpartition(":")
            host = host.strip("[]")
            if not host or not is_digits(port):
                continue
            found.setdefault(host, {}).setdefault(kind, []).append(port)
    nodes: list[NodeSpec] = []
    used: set[str] = set()
    for raw_host in sorted(found):
        try:
            host = check_host(raw_host)
        except ValueError:
            continue
        name = _NODE_NAME_BAD.sub("-", host.split(".")[0] if not host[0].isdigit() else host).strip("-._")[:63]
        name = name or "node"
        while name in used:
            name = (name[:58] + "-" + str(len(used)))[:63]
        used.add(name)
        kinds_found = found[raw_host]
        vllm_ports = sorted(set(kinds_found.get("vllm", [])), key=int)
        vllm = tuple(
            ServerSpec(name="vllm" if len(vllm_ports) == 1 else f"vllm-{port}", port=int(port)) for port in vllm_ports
        )
        exporters_found: dict[str, ExporterSpec] = {}
        for kind in ("gpu_exporter", "node_exporter"):
            ports = sorted(set(kinds_found.get(kind, [])), key=int)
            if ports:
                exporters_found[kind] = ExporterSpec(url=f"http://{_url_host(host)}:{ports[0]}/metrics")
        nodes.append(
            NodeSpec.model_validate(
                {"name": name, "host": host, "ssh": SshSpec(enabled=False), "vllm": vllm, **exporters_found}
            )
        )
    return nodes


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


async def with_discovered_nodes(fleet: FleetSpec) -> FleetSpec:
    """The fleet itself, or, when it lists no node, the nodes found in Prometheus."""
    if fleet.nodes or fleet.prometheus is None:
        return fleet
    async with make_client([origin_of(fleet.prometheus.url)], ca_file=fleet.ca_file) as client:
        nodes = await discover_nodes(fleet.prometheus, client, fleet.prometheus.timeout_s or 10.0)
    if not nodes:
        raise PrometheusError(
            f"Prometheus at {fleet.prometheus.url}: no vLLM or exporter targets found; "
            "list the nodes in the config with [[nodes]]"
        )
    return fleet.model_copy(update={"nodes": tuple(nodes[:256])})
