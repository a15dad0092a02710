"""The demo fleet: simulated DGX Sparks serving real HTTP on 127.0.0.1.

Each node runs, per vLLM instance, a server with ``/health``, ``/metrics`` (vLLM 0.33's exact
exposition), ``/version``, ``/v1/models`` and ``/v1/chat/completions`` (streaming and not, answered by
the simulated engine, so a warmup measures a real TTFT); a GPU exporter (nvidia_gpu_exporter or the
DGX Spark exporter format) and its side services' health endpoints.

Time is the simulation's: ``advance(dt)`` moves every node; ``run_clock()`` drives it from the wall
clock, tests call ``advance`` themselves (step mode). A ``seed`` makes a run repeatable.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from sparktui.demo.exposition import (
    GpuState,
    VllmExposition,
    dgx_spark_exporter_page,
    nvidia_gpu_exporter_page,
)
from sparktui.demo.httpserver import HttpServer, Request, Response
from sparktui.demo.scenarios import Scenario
from sparktui.demo.sim import PROFILES, Engine, EngineState, ModelProfile
from sparktui.demo.sim import Request as SimRequest

VLLM_VERSION = "0.33.0"
METRICS_TYPE = "text/plain; version=1.0.0; charset=utf-8"
GIB = 1024**3
MEM_TOTAL = 127600748 * 1024  # a GB10's MemTotal
WARMUP_S = 90.0  # simulated seconds before serving, so counters and histograms look lived-in


@dataclass(frozen=True, slots=True)
class InstanceSpec:
    name: str
    profile: str  # key of sim.PROFILES
    unit: str | None = None
    container: str | None = None
    role: str = "single"
    job: str | None = None
    api_key: str | None = None


@dataclass(frozen=True, slots=True)
class NodeSpec:
    name: str
    instances: tuple[InstanceSpec, ...]
    gpu_exporter: str  # "nvidia" | "dgx-spark"
    services: tuple[tuple[str, str], ...] = ()  # (name, kind)


DEFAULT_NODES: tuple[NodeSpec, ...] = (
    NodeSpec(
        "spark1",
        (InstanceSpec("qwen36", "qwen36", unit="vllm-qwen36.service"),),
        "nvidia",
        (("parakeet-asr", "asr"), ("ollama", "ollama")),
    ),
    NodeSpec(
        "spark2",
        (InstanceSpec("gemma4", "gemma4", container="vllm-gemma4"),),
        "dgx-spark",
        (("chatterbox-tts", "tts"),),
    ),
    NodeSpec(
        "spark3",
        (InstanceSpec("qwen235", "qwen235", container="vllm-qwen235", role="head", job="qwen235-tp2"),),
        "nvidia",
    ),
    NodeSpec(
        "spark4",
        (InstanceSpec("qwen235", "qwen235", container="vllm-qwen235", role="worker", job="qwen235-tp2"),),
        "dgx-spark",
    ),
)


def scaled_nodes(count: int) -> tuple[NodeSpec, ...]:
    """``count`` single-model nodes alternating the two Spark profiles (for load tests)."""
    out = []
    for index in range(count):
        kind = "qwen36" if index % 2 == 0 else "gemma4"
        out.append(
            NodeSpec(
                f"spark{index + 1:02d}",
                (InstanceSpec(kind, kind, unit=f"vllm-{kind}.service"),),
                "nvidia" if index % 2 == 0 else "dgx-spark",
                (("parakeet-asr", "asr"),) if index % 4 == 0 else (),
            )
        )
    return tuple(out)


class DemoInstance:
    """One simulated vLLM server."""

    def __init__(self, node: str, spec: InstanceSpec, rng: random.Random) -> None:
        self.node = node
        self.spec = spec
        self.profile: ModelProfile = PROFILES[spec.profile]
        self.exposition = VllmExposition(self.profile)
        self.engine = Engine(self.profile, self.exposition, rng)
        self.http = HttpServer(self.handle, on_served=self._count) if spec.role != "worker" else None
        self.started_wall = time.time()

    @property
    def serves_http(self) -> bool:
        return self.http is not None

    def restart(self, load_s: float, cold_jit_s: float = 0.0) -> None:
        """The process restarts: fresh counters, the port refuses until the model has loaded."""
        self.exposition = VllmExposition(self.profile)
        self.engine.sink = self.exposition
        self.engine.restart(load_s, cold_jit_s)

    async def sync_listening(self) -> None:
        """Listen exactly when a real server would: not while loading or stopped."""
        if self.http is None:
            return
        should = self.engine.state not in (EngineState.LOADING, EngineState.STOPPED)
        if should and not self.http.listening:
            await self.http.start()
        elif not should and self.http.listening:
            await self.http.stop()

    def _count(self, request: Request, response: Response, seconds: float) -> None:
        self.exposition.count_http(request.path, response.status, seconds)

    def _authorised(self, request: Request) -> bool:
        key = self.spec.api_key
        return key is None or request.headers.get("authorization") == f"Bearer {key}"

    async def handle(self, request: Request) -> Response:
        path = request.path
        state = self.engine.state
        if path == "/health":
            return Response(status=503 if state is EngineState.DEAD else 200, body=b"")
        if path == "/metrics":
            return Response(body=self.exposition.render(), content_type=METRICS_TYPE)
        if path == "/version":
            return Response.of_json({"version": VLLM_VERSION})
        if path.startswith("/v1/") and not self._authorised(request):
            return Response.of_json({"error": "Unauthorized"}, status=401)
        if path == "/v1/models":
            card = {
                "id": self.profile.served_name,
                "object": "model",
                "created": int(self.started_wall),
                "owned_by": "vllm",
                "root": self.profile.served_name,
                "parent": None,
                "max_model_len": self.profile.max_model_len,
                "permission": [{"object": "model_permission", "allow_sampling": True}],
            }
            return Response.of_json({"object": "list", "data": [card]})
        if path in ("/v1/chat/completions", "/v1/completions"):
            if request.method != "POST":
                return Response.of_json({"error": "Method Not Allowed"}, status=405)
            return await self._complete(request)
        return Response.of_json({"detail": "Not Found"}, status=404)

    async def _complete(self, request: Request) -> Response:
        try:
            payload = request.json()
        except ValueError:
            return Response.of_json({"error": "body is not JSON"}, status=400)
        if not isinstance(payload, dict):
            return Response.of_json({"error": "body must be a JSON object"}, status=400)
        if self.engine.state is EngineState.DEAD:
            return Response.of_json({"error": "EngineDeadError: the engine core died"}, status=500)
        text = json.dumps(payload.get("messages") or payload.get("prompt") or "")
        max_tokens = int(payload.get("max_tokens") or 256)
        sim = self.engine.new_request(max_tokens=max_tokens, prompt_tokens=max(1, len(text) // 4))
        sim.target_tokens = max_tokens
        events: asyncio.Queue[tuple[str, int | str]] = asyncio.Queue()
        sim.on_token = lambda n: events.put_nowait(("tokens", n))
        sim.on_finish = lambda reason: events.put_nowait(("finish", reason))
        self.engine.submit(sim)
        created = int(time.time())
        if payload.get("stream"):
            return Response(content_type="text/event-stream", stream=self._sse(sim, events, created))
        reason: int | str = "stop"
        while True:
            kind, value = await events.get()
            if kind == "finish":
                reason = value
                break
        body = {
            "id": f"chatcmpl-demo-{sim.request_id}",
            "object": "chat.completion",
            "created": created,
            "model": self.profile.served_name,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": _words(sim.generated).strip()},
                    "finish_reason": reason,
                }
            ],
            "usage": {
                "prompt_tokens": sim.prompt_tokens,
                "completion_tokens": sim.generated,
                "total_tokens": sim.prompt_tokens + sim.generated,
            },
        }
        return Response.of_json(body)

    async def _sse(
        self, sim: SimRequest, events: asyncio.Queue[tuple[str, int | str]], created: int
    ) -> AsyncIterator[bytes]:
        while True:
            kind, value = await events.get()
            if kind == "tokens":
                assert isinstance(value, int)
                delta = {"content": _words(value)}
                finish = None
            else:
                delta, finish = {}, value
            chunk = {
                "id": f"chatcmpl-demo-{sim.request_id}",
                "object": "chat.completion.chunk",
                "created": created,
                "model": self.profile.served_name,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
            yield f"data: {json.dumps(chunk)}\n\n".encode()
            if kind == "finish":
                yield b"data: [DONE]\n\n"
                return


def _words(tokens: int) -> str:
    """Stand-in text: one word per token, each with its leading space (as tokenizers emit them)."""
    return " spark" * max(0, tokens)


@dataclass
class DemoNode:
    spec: NodeSpec
    instances: list[DemoInstance]
    gpu: GpuState = field(default_factory=GpuState)
    gpu_http: HttpServer | None = None
    services: dict[str, HttpServer] = field(default_factory=dict)
    powered: bool = True
    rng: random.Random = field(default_factory=random.Random)

    @property
    def name(self) -> str:
        return self.spec.name

    def advance(self, dt: float) -> None:
        if not self.powered:
            return
        load = 0.0
        for instance in self.instances:
            instance.engine.advance(dt)
            profile = instance.profile
            load = max(load, min(1.0, len(instance.engine.running) / max(1, profile.max_num_seqs // 3)))
        if any(i.spec.role == "worker" for i in self.instances):
            load = 0.8  # a tensor-parallel rank works as hard as its head
        gpu = self.gpu
        target_power = 11.0 + 70.0 * load + self.rng.uniform(-2, 2)
        gpu.power_w += (target_power - gpu.power_w) * min(1.0, dt / 2.0)
        target_temp = 38.0 + 0.42 * gpu.power_w
        gpu.temperature_c += (target_temp - gpu.temperature_c) * min(1.0, dt / 20.0)
        gpu.utilization = min(1.0, max(0.0, load * 0.97 + self.rng.uniform(-0.02, 0.02)))

    def memory_used(self) -> float:
        used = 6.5 * GIB
        for instance in self.instances:
            if instance.engine.state is not EngineState.STOPPED:
                used += instance.profile.gpu_memory_utilization * 119.6 * GIB
        return min(used, MEM_TOTAL * 0.98)

    async def gpu_page(self, _request: Request) -> Response:
        if self.spec.gpu_exporter == "dgx-spark":
            text = dgx_spark_exporter_page(self.gpu, self.name, float(MEM_TOTAL), self.memory_used())
        else:
            text = nvidia_gpu_exporter_page(self.gpu, self.name)
        return Response(body=text.encode(), content_type="text/plain; version=0.0.4; charset=utf-8")


def _service_handler(kind: str, rng: random.Random) -> Callable[[Request], object]:
    async def handle(request: Request) -> Response:
        await asyncio.sleep(rng.uniform(0.003, 0.02))
        if kind == "ollama":
            if request.path == "/api/tags":
                return Response.of_json({"models": [{"name": "qwen3:8b", "size": 5225388164}]})
            return Response(body=b"Ollama is running", content_type="text/plain")
        if request.path == "/health":
            return Response.of_json({"status": "ok"})
        return Response.of_json({"detail": "Not Found"}, status=404)

    return handle


class DemoFleet:
    """Every simulated node; ``start()`` opens their servers on 127.0.0.1."""

    def __init__(
        self,
        nodes: tuple[NodeSpec, ...] = DEFAULT_NODES,
        seed: int = 7,
        warmup_s: float = WARMUP_S,
        scenario: Scenario | None = None,
    ) -> None:
        self.seed = seed
        self.now = 0.0
        self.nodes: list[DemoNode] = []
        for index, spec in enumerate(nodes):
            rng = random.Random(f"{seed}:{index}")
            instances = [DemoInstance(spec.name, i, rng) for i in spec.instances]
            node = DemoNode(spec, instances, rng=rng)
            node.gpu_http = HttpServer(node.gpu_page)
            for name, kind in spec.services:
                node.services[name] = HttpServer(_service_handler(kind, rng))  # type: ignore[arg-type]
            self.nodes.append(node)
        self._fast_forward(warmup_s)
        self.started_at = self.now  # scenario time counts from here
        self.scenario = scenario
        self._pending = sorted(scenario.events, key=lambda e: e.at_s) if scenario else []
        self.events_log: list[str] = []

    @property
    def elapsed(self) -> float:
        """Simulated seconds since the fleet started serving."""
        return self.now - self.started_at

    async def _fire_due_events(self) -> None:
        while self._pending and self._pending[0].at_s <= self.elapsed + 1e-9:
            event = self._pending.pop(0)
            await event.action(self)
            self.events_log.append(f"{event.at_s:5.0f} s  {event.what}")

    def node(self, name: str) -> DemoNode:
        return next(n for n in self.nodes if n.name == name)

    def _fast_forward(self, seconds: float, dt: float = 0.25) -> None:
        steps = int(seconds / dt)
        for _ in range(steps):
            for node in self.nodes:
                node.advance(dt)
        self.now += steps * dt

    def servers(self) -> list[HttpServer]:
        out: list[HttpServer] = []
        for node in self.nodes:
            out.extend(i.http for i in node.instances if i.http is not None)
            if node.gpu_http is not None:
                out.append(node.gpu_http)
            out.extend(node.services.values())
        return out

    async def start(self) -> None:
        for node in self.nodes:
            if node.gpu_http is not None:
                await node.gpu_http.start()
            for server in node.services.values():
                await server.start()
            for instance in node.instances:
                await instance.sync_listening()

    async def stop(self) -> None:
        await asyncio.gather(*(server.stop() for server in self.servers()))

    async def advance(self, dt: float) -> None:
        """Move the simulation ``dt`` seconds forward (in steps of at most 0.25 s)."""
        remaining = dt
        while remaining > 1e-9:
            step = min(0.25, remaining)
            for node in self.nodes:
                node.advance(step)
            self.now += step
            remaining -= step
            await self._fire_due_events()
        for node in self.nodes:
            for instance in node.instances:
                await instance.sync_listening()

    async def run_clock(self, tick_s: float = 0.1) -> None:
        """Advance with the wall clock until cancelled."""
        last = time.monotonic()
        while True:
            await asyncio.sleep(tick_s)
            now = time.monotonic()
            await self.advance(now - last)
            last = now

    async def power_off(self, name: str) -> None:
        """The node vanishes: its processes stop and every port refuses."""
        node = self.node(name)
        node.powered = False
        for instance in node.instances:
            instance.engine.state = EngineState.STOPPED
        await asyncio.gather(*(s.stop() for s in self._node_servers(node)))

    async def power_on(self, name: str, load_s: float = 120.0) -> None:
        """The node boots: exporters and services answer at once, vLLM after loading its model."""
        node = self.node(name)
        node.powered = True
        for server in self._node_servers(node):
            if not any(server is i.http for i in node.instances):
                await server.start()
        for instance in node.instances:
            instance.restart(load_s)
            await instance.sync_listening()

    @staticmethod
    def _node_servers(node: DemoNode) -> list[HttpServer]:
        servers = [i.http for i in node.instances if i.http is not None]
        if node.gpu_http is not None:
            servers.append(node.gpu_http)
        servers.extend(node.services.values())
        return servers

    def config_toml(self, poll_interval_s: float = 1.0) -> str:
        """The sparktui config for this fleet (every URL on 127.0.0.1)."""
        lines = [
            "# sparktui demo fleet: simulated DGX Sparks on 127.0.0.1",
            f"poll_interval_s = {poll_interval_s}",
            "timeout_s = 2.0",
            "",
        ]
        for node in self.nodes:
            lines += ["[[nodes]]", f'name = "{node.name}"', 'host = "127.0.0.1"', ""]
            # The demo's nodes serve HTTP; their simulated SSH side is not built yet.
            lines += ["[nodes.ssh]", "enabled = false", ""]
            for instance in node.instances:
                spec = instance.spec
                lines += ["[[nodes.vllm]]", f'name = "{spec.name}"']
                if instance.http is not None:
                    lines.append(f'url = "{instance.http.url}"')
                if spec.unit:
                    lines.append(f'unit = "{spec.unit}"')
                if spec.container:
                    lines.append(f'container = "{spec.container}"')
                lines.append(f"gpu_memory_utilization = {instance.profile.gpu_memory_utilization}")
                if spec.role != "single":
                    lines += [f'role = "{spec.role}"', f'job = "{spec.job}"']
                lines.append("")
            if node.gpu_http is not None:
                lines += ["[nodes.gpu_exporter]", f'url = "{node.gpu_http.url}/metrics"', ""]
            for name, server in node.services.items():
                kind = dict(node.spec.services)[name]
                path = "/api/tags" if kind == "ollama" else "/health"
                lines += [
                    "[[nodes.services]]",
                    f'name = "{name}"',
                    f'kind = "{kind}"',
                    f'url = "{server.url}{path}"',
                    "",
                ]
        return "\n".join(lines)

    def endpoints(self) -> list[str]:
        """One line per listening endpoint, for ``sparktui demo`` to print."""
        out = []
        for node in self.nodes:
            for instance in node.instances:
                where = (
                    instance.http.url if instance.http is not None else "(tensor-parallel worker, no HTTP)"
                )
                out.append(
                    f"{node.name:8} vLLM {instance.spec.name:10} {instance.profile.served_name:36} {where}"
                )
            if node.gpu_http is not None:
                out.append(
                    f"{node.name:8} GPU exporter ({node.spec.gpu_exporter})  {node.gpu_http.url}/metrics"
                )
            for name, server in node.services.items():
                out.append(f"{node.name:8} service {name:14} {server.url}")
        return out
