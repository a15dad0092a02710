"""The demo fleet: simulated DGX Sparks serving real HTTP and SSH on 127.0.0.1.

Each node runs, per vLLM instance, a server with ``/health``, ``/metrics`` (vLLM 0.33's exact
exposition), ``/version``, ``/v1/models`` and ``/v1/chat/completions`` (streaming and not, answered by
the simulated engine, so a warmup measures a real TTFT); a GPU exporter (nvidia_gpu_exporter or the
DGX Spark exporter format) and its side services' health endpoints; and an SSH server
(``sshserver.py``) that answers sparktui's host sampler, log and recovery commands from the node's
simulated host (``host.py``: memory, page cache, /dev/shm, PSI) and its vLLM services
(``service.py``: processes, systemd unit or docker container, log). spark1 also runs llama.cpp's
``llama-server`` (``llamaserver.py``), its fallback model, read by sparktui as ``engine = "llamacpp"``.

Time is the simulation's: ``advance(dt)`` moves every node; ``run_clock()`` drives it from the wall
clock, tests call ``advance`` themselves (step mode). A ``seed`` makes a run repeatable.
"""

from __future__ import annotations

import asyncio
import bisect
import json
import random
import shutil
import tempfile
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from sparktui.demo.exposition import GpuState, dgx_spark_exporter_page, nvidia_gpu_exporter_page
from sparktui.demo.fabric import SimNic
from sparktui.demo.faces import FACES, DemoEngineKind
from sparktui.demo.host import GIB, MEM_TOTAL, BaseUsage, SimClock, SimHost, SimProcess
from sparktui.demo.httpserver import LOOPBACK, HttpServer, Request, Response
from sparktui.demo.llamaserver import DemoLlamaServer, LlamaSpec
from sparktui.demo.ollama import GEMMA3_27B, LLAMA33_70B, QWEN3_8B, DemoOllama, OllamaSpec
from sparktui.demo.scenarios import Scenario
from sparktui.demo.service import Manager, TeeSink, VllmService
from sparktui.demo.sim import PROFILES, Engine, EngineState, ModelProfile
from sparktui.demo.sim import Request as SimRequest
from sparktui.demo.sshserver import USER, DemoSshServer, generate_key
from sparktui.demo.vllmlog import InstanceLog

VLLM_VERSION = "0.33.0"
METRICS_TYPE = "text/plain; version=1.0.0; charset=utf-8"
WARMUP_S = 90.0  # simulated seconds before serving, so counters and histograms look lived-in
SERVICE_ANON = {"asr": 2.6 * GIB, "tts": 2.2 * GIB, "ollama": 0.25 * GIB}  # side services' memory
EVENTS_KEPT = 1000  # lines of ``DemoFleet.events_log`` (a soak logs events forever)
# What ``ss`` names the process of each other engine's server (a NIM's is its container's vLLM).
FACE_PROCESS = {"sglang": "python3", "trtllm": "trtllm-serve", "nim": "python3"}
ENGINE_CORE_PORT = 29550  # what ``ss`` shows an engine core listening on (its ZMQ socket; nothing answers)

# A broken /metrics body (the soak's malformed scrape): "garbage" is half the exposition, then bytes
# that are no Prometheus text (a proxy's error page); "truncated" stops mid-line, with no final newline.
MetricsFault = Literal["garbage", "truncated"]
GARBAGE_TAIL = b"\x00\x00\xff\xfe<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>\n"


def broken_metrics(body: bytes, fault: MetricsFault) -> bytes:
    """``body`` (a whole exposition) as the fault serves it."""
    half = body[: len(body) // 2]
    if fault == "garbage":
        return half[: half.rfind(b"\n") + 1] + GARBAGE_TAIL
    return half.rstrip(b"\n")


GB10_SM_CLOCK_MHZ = 2418.0  # a GB10's SM clock under load (the field reports: about 2.4-2.5 GHz)
GpuFault = Literal["thermal", "clock-stuck", "spin"]


@dataclass(frozen=True, slots=True)
class GpuFaultSpec:
    """What a GPU fault makes the exporter read (the field reports of issue 21)."""

    busy: float  # the GPU's load at least (utilisation ≈ 0.97 × it)
    sm_clock_mhz: float
    throttle: tuple[str, ...] = ()
    power_w: float | None = None  # None: what the load draws
    temperature_c: float | None = None  # None: what the power heats it to


GPU_FAULTS: dict[GpuFault, GpuFaultSpec] = {
    # Thermal slowdown near the trip point: clocks held at ~810 MHz, the reason said.
    "thermal": GpuFaultSpec(busy=0.95, sm_clock_mhz=810.0, throttle=("sw_thermal_slowdown",), temperature_c=87.0),
    # A stuck low-power state: the clock stays at ~850 MHz under load and no reason is given.
    "clock-stuck": GpuFaultSpec(busy=0.95, sm_clock_mhz=850.0),
    # A rank spin-waiting in NCCL: ~96 % busy at ~20 W.
    "spin": GpuFaultSpec(busy=1.0, sm_clock_mhz=GB10_SM_CLOCK_MHZ, power_w=20.0),
}


@dataclass(frozen=True, slots=True)
class InstanceSpec:
    name: str
    profile: str  # key of sim.PROFILES
    unit: str | None = None
    container: str | None = None
    role: str = "single"
    job: str | None = None
    api_key: str | None = None
    mfu_metrics: bool = True  # started with --enable-mfu-metrics (the roofline's counters count)
    engine: DemoEngineKind = "vllm"  # which server it is: what it serves, at which paths (``faces``)
    port: int = 0  # the port it asks for first (its engine's default); 0: any port


@dataclass(frozen=True, slots=True)
class NodeSpec:
    name: str
    instances: tuple[InstanceSpec, ...]
    gpu_exporter: str  # "nvidia" | "dgx-spark"
    services: tuple[tuple[str, str], ...] = ()  # (name, kind)
    llamacpp: tuple[LlamaSpec, ...] = ()  # llama.cpp servers beside the vLLM instances
    ollama: OllamaSpec | None = None  # an Ollama beside them
    address: str = LOOPBACK  # where its servers listen (another loopback address: ports of their own)


DEFAULT_NODES: tuple[NodeSpec, ...] = (
    NodeSpec(
        "spark1",
        (InstanceSpec("qwen36", "qwen36", unit="vllm-qwen36.service"),),
        "nvidia",
        (("parakeet-asr", "asr"), ("ollama", "ollama")),
        # The small fallback model beside vLLM (context/000), on llama.cpp's llama-server.
        (LlamaSpec("qwen3-8b", "qwen3-8b"),),
    ),
    NodeSpec(
        "spark2",
        # Started without --enable-mfu-metrics: its roofline is "–" with the flag to add.
        (InstanceSpec("gemma4", "gemma4", container="vllm-gemma4", mfu_metrics=False),),
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


# The mixed fleet (``sparktui demo --fleet mixed``): every engine a Spark runs, each at its Spark default
# port, each node on a loopback address of its own (127.0.0.11...) so that two engines' defaults (vLLM's
# and NIM's 8000) do not collide; where an address or port cannot be had, any port on 127.0.0.1.
MIXED_NODES: tuple[NodeSpec, ...] = (
    NodeSpec(
        "spark1",
        (InstanceSpec("qwen36", "qwen36", unit="vllm-qwen36.service", port=8000),),
        "nvidia",
        # Write-up 000's spark1: Ollama idle beside vLLM, its small model loaded for ever (keep_alive -1).
        ollama=OllamaSpec("ollama", (QWEN3_8B, LLAMA33_70B, GEMMA3_27B), loaded=((QWEN3_8B.name, -1.0),)),
        address="127.0.0.11",
    ),
    NodeSpec(
        "spark2",
        (InstanceSpec("qwen3-30b", "qwen3-30b-sglang", engine="sglang", port=30000),),
        "dgx-spark",
        address="127.0.0.12",
    ),
    NodeSpec(
        "spark3",
        (InstanceSpec("llama31-fp4", "llama31-8b-fp4", engine="trtllm", port=8355),),
        "nvidia",
        address="127.0.0.13",
    ),
    NodeSpec(
        "spark4",
        (InstanceSpec("llama31-nim", "llama31-8b-nim", engine="nim", port=8000),),
        "dgx-spark",
        llamacpp=(LlamaSpec("qwen3-8b", "qwen3-8b", port=8080),),
        address="127.0.0.14",
    ),
)
FLEETS: dict[str, tuple[NodeSpec, ...]] = {"default": DEFAULT_NODES, "mixed": MIXED_NODES}


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
    """One simulated vLLM server: its engine, its HTTP server, its service manager and its log."""

    def __init__(
        self,
        node: str,
        spec: InstanceSpec,
        rng: random.Random,
        host: SimHost | None = None,
        clock: SimClock | None = None,
        *,
        service_rng: random.Random | None = None,
        address: str = LOOPBACK,
    ) -> None:
        self.node = node
        self.spec = spec
        self.profile: ModelProfile = PROFILES[spec.profile]
        self.face = FACES[spec.engine]
        self.exposition = self.face.exposition(self.profile)
        self.engine = Engine(self.profile, self.exposition, rng, mfu_metrics=spec.mfu_metrics)
        self.http = (
            HttpServer(self.handle, host=address, port=spec.port, on_served=self._count)
            if spec.role != "worker"
            else None
        )
        self.metrics_fault: MetricsFault | None = None  # /metrics serves a broken body while set
        self.started_wall = time.time()
        clock = clock or SimClock(time.time())
        host = host or SimHost(node, clock, random.Random(f"{node}:host"), clock.epoch - 86400)
        self.log = InstanceLog(node)
        manager: Manager = "systemd" if spec.unit or not spec.container else "docker"
        # The service gets its own random stream: the engine's numbers stay those of the seed.
        self.service = VllmService(
            instance=spec.name,
            manager=manager,
            name=spec.unit or spec.container or f"vllm-{spec.name}.service",
            role=spec.role,
            profile=self.profile,
            engine=self.engine,
            host=host,
            log=self.log,
            clock=clock,
            rng=service_rng or random.Random(f"{node}:{spec.name}:service"),
            on_process_start=self._process_started,
        )
        self.service.uses_shm = self.face.kind == "vllm"
        self.engine.sink = TeeSink(self.exposition, self.service.stats)

    @property
    def serves_http(self) -> bool:
        return self.http is not None

    def _process_started(self) -> None:
        """A new server process: fresh counters (``process_start_time_seconds`` too)."""
        self.exposition = self.face.exposition(self.profile)
        self.engine.sink = TeeSink(self.exposition, self.service.stats)
        self.started_wall = time.time()

    def restart(self, load_s: float, cold_jit_s: float = 0.0) -> None:
        """The service restarts: fresh counters, the port refuses until the model has loaded."""
        self.service.restart(load_s=load_s, cold_jit_s=cold_jit_s)

    async def sync_listening(self) -> None:
        """Listen exactly when a real server would: not while loading or stopped."""
        if self.http is None:
            return
        # A NIM's front answers while its model loads (live, not ready); the others refuse until served.
        refused = (EngineState.STOPPED,) if self.face.kind == "nim" else (EngineState.LOADING, EngineState.STOPPED)
        should = self.engine.state not in refused
        if should and not self.http.listening:
            await self.http.start()
            self.service.published_port = self.http.port  # fixed from the first start on
        elif not should and self.http.listening:
            await self.http.stop()

    def _count(self, request: Request, response: Response, seconds: float) -> None:
        self.exposition.count_http(request.path, response.status, seconds)

    def _authorised(self, request: Request) -> bool:
        key = self.spec.api_key
        return key is None or request.headers.get("authorization") == f"Bearer {key}"

    async def handle(self, request: Request) -> Response:
        """``request`` at the paths of the instance's engine (``faces``): each engine's own routes, and the
        OpenAI-compatible ones every engine serves."""
        own = self.face.route(self, request)
        if own is not None:
            return own
        path = request.path
        if path.startswith("/v1/") and not self._authorised(request):
            return Response.of_json({"error": "Unauthorized"}, status=401)
        if path == "/v1/models":
            return Response.of_json({"object": "list", "data": [self.face.model_card(self)]})
        if path in ("/v1/chat/completions", "/v1/completions"):
            if request.method != "POST":
                return Response.of_json({"error": "Method Not Allowed"}, status=405)
            return await self._complete(request)
        return Response.of_json({"detail": "Not Found"}, status=404)

    def metrics_response(self, request: Request) -> Response:
        """The exposition (``name[]`` honoured), broken while a fault says so."""
        body = self.exposition.render(request.query.get("name[]"))
        if self.metrics_fault is not None:
            body = broken_metrics(body, self.metrics_fault)
        return Response(body=body, content_type=METRICS_TYPE)

    def vllm_route(self, request: Request) -> Response | None:
        """vLLM's own paths: ``/health``, ``/metrics``, ``/version``."""
        path = request.path
        state = self.engine.state
        if path == "/health":
            return Response(status=503 if state is EngineState.DEAD else 200, body=b"")
        if path == "/metrics":
            return self.metrics_response(request)
        if path == "/version":
            return Response.of_json({"version": VLLM_VERSION})
        return None

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
            usage = isinstance(payload.get("stream_options"), dict) and payload["stream_options"].get("include_usage")
            chat = request.path == "/v1/chat/completions"
            stream = (
                self._sse(sim, events, created) if chat else self._completion_sse(sim, events, created, bool(usage))
            )
            return Response(content_type="text/event-stream", stream=stream)
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

    async def _completion_sse(
        self, sim: SimRequest, events: asyncio.Queue[tuple[str, int | str]], created: int, usage: bool
    ) -> AsyncIterator[bytes]:
        """``/v1/completions`` streamed as vLLM streams it: ``text`` chunks, then, with
        ``stream_options.include_usage``, a last chunk with no choices and the token counts."""

        def chunk(choices: list[dict[str, object]], counts: dict[str, int] | None = None) -> bytes:
            body = {
                "id": f"cmpl-demo-{sim.request_id}",
                "object": "text_completion",
                "created": created,
                "model": self.profile.served_name,
                "choices": choices,
                "usage": counts,
            }
            return f"data: {json.dumps(body)}\n\n".encode()

        while True:
            kind, value = await events.get()
            if kind == "tokens":
                assert isinstance(value, int)
                yield chunk([{"index": 0, "text": _words(value), "logprobs": None, "finish_reason": None}])
                continue
            yield chunk([{"index": 0, "text": "", "logprobs": None, "finish_reason": value}])
            if usage:
                counts = {
                    "prompt_tokens": sim.prompt_tokens,
                    "completion_tokens": sim.generated,
                    "total_tokens": sim.prompt_tokens + sim.generated,
                }
                yield chunk([], counts)
            yield b"data: [DONE]\n\n"
            return


def _words(tokens: int) -> str:
    """Stand-in text: one word per token, each with its leading space (as tokenizers emit them)."""
    return " spark" * max(0, tokens)


@dataclass
class DemoNode:
    spec: NodeSpec
    instances: list[DemoInstance]
    host: SimHost
    clock: SimClock
    gpu: GpuState = field(default_factory=GpuState)
    gpu_http: HttpServer | None = None
    services: dict[str, HttpServer] = field(default_factory=dict)  # side services' health endpoints
    powered: bool = True
    rng: random.Random = field(default_factory=random.Random)
    ssh: DemoSshServer | None = None
    gpu_fault: GpuFault | None = None  # what a scenario does to the GPU (``GPU_FAULTS``)
    gpu_scraped_at: float | None = None  # the simulated time the GPU exporter last answered (``run_clock``)
    nic: SimNic | None = None  # the ConnectX-7 port of a rank of a multi-node job
    llamacpp: list[DemoLlamaServer] = field(default_factory=list)  # beside the vLLM instances
    ollama: DemoOllama | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def address(self) -> str:
        """Where its servers listen (127.0.0.1, or a loopback address of its own)."""
        return self.ssh.address if self.ssh is not None else self.spec.address

    def gpu_served(self, request: Request, response: Response, seconds: float) -> None:
        self.gpu_scraped_at = self.clock.now

    def advance(self, dt: float) -> None:
        for server in self.llamacpp:  # a trickle on a small model: the GPU picture is the vLLM's
            server.engine.advance(dt)
        if self.ollama is not None and self.powered:
            self.ollama.advance()
        if not self.powered:
            for instance in self.instances:
                instance.engine.advance(dt)  # keeps the engine's clock with the fleet's
            return
        load = 0.0
        busy = 0.0
        for instance in self.instances:
            instance.service.advance(dt)
            instance.engine.advance(dt)
            profile = instance.profile
            load = max(load, min(1.0, len(instance.engine.running) / max(1, profile.max_num_seqs // 3)))
            if instance.engine.state is EngineState.LOADING:
                busy += 1.6  # imports, weight loading, torch.compile
        if any(i.spec.role == "worker" and i.engine.state is EngineState.UP for i in self.instances):
            load = 0.8  # a tensor-parallel rank works as hard as its head
        self._update_host(dt, busy + 1.2 * load)
        gpu = self.gpu
        fault = GPU_FAULTS.get(self.gpu_fault) if self.gpu_fault is not None else None
        if fault is not None:
            load = max(load, fault.busy)  # the faults are seen under load: the GPU is kept busy
        target_power = 11.0 + 70.0 * load + self.rng.uniform(-2, 2)
        if fault is not None and fault.power_w is not None:
            target_power = fault.power_w + self.rng.uniform(-1, 1)
        gpu.power_w += (target_power - gpu.power_w) * min(1.0, dt / 2.0)
        target_temp = 38.0 + 0.42 * gpu.power_w if fault is None or fault.temperature_c is None else fault.temperature_c
        gpu.temperature_c += (target_temp - gpu.temperature_c) * min(1.0, dt / 20.0)
        gpu.utilization = min(1.0, max(0.0, load * 0.97 + self.rng.uniform(-0.02, 0.02)))
        gpu.sm_clock_mhz = fault.sm_clock_mhz if fault is not None else GB10_SM_CLOCK_MHZ
        gpu.throttle = fault.throttle if fault is not None else (("gpu_idle",) if gpu.utilization < 0.05 else ())
        for instance in self.instances:
            instance.engine.clock_factor = gpu.sm_clock_mhz / GB10_SM_CLOCK_MHZ

    def _update_host(self, dt: float, busy: float) -> None:
        self.refresh_host()
        self.host.busy = busy
        self.host.advance(dt)

    def refresh_host(self) -> None:
        """The host's view of the vLLM processes: their CUDA allocations and their memory."""
        host = self.host
        processes = self.vllm_processes()
        host.device_alloc = sum(i.service.device_alloc() for i in self.instances)
        if self.ollama is not None:  # its loaded models: unified memory, the host's too
            host.device_alloc += self.ollama.held_bytes()
        host.processes_anon = sum(p.anon for p in processes)
        host.processes_rss = sum(p.rss for p in processes)

    def memory_used(self) -> float:
        """MemTotal − MemFree − Buffers − Cached, what dgx-spark-prometheus exports as used."""
        return self.host.used()

    # --- what the SSH server asks -----------------------------------------------------------------

    def vllm_service(self, manager: str, name: str) -> VllmService | None:
        for instance in self.instances:
            service = instance.service
            if service.manager == manager and service.name == name:
                return service
        return None

    def vllm_services(self) -> list[VllmService]:
        """The vLLM services SSH shows (the other engines' servers are seen over HTTP only)."""
        return [i.service for i in self.instances if i.face.kind == "vllm"]

    def vllm_processes(self) -> list[SimProcess]:
        return [p for service in self.vllm_services() for p in service.processes()]

    def kill(self, pid: int) -> bool:
        return any(i.service.kill(pid) for i in self.instances)

    def listeners(self) -> list[tuple[int, str | None, int | None]]:
        """(port, process name, pid) of each TCP port this node listens on, as ``ss -ltnp`` names them:
        the vLLM API servers (a container's port is docker-proxy's, root's: no name without root),
        each engine core's socket, the GPU exporter, the side services and sshd."""
        out: list[tuple[int, str | None, int | None]] = []
        for index, instance in enumerate(self.instances):
            service = instance.service
            if instance.http is None or not instance.http.listening or service.main_pid == 0:
                continue
            if instance.face.kind != "vllm":  # seen over HTTP only: its process, not vLLM's
                out.append((instance.http.port, FACE_PROCESS[instance.face.kind], 2100 + index))
                continue
            docker = service.manager == "docker"
            out.append((instance.http.port, None if docker else "python3", None if docker else service.main_pid))
            if service.core_pid:
                out.append((ENGINE_CORE_PORT + index, "VLLM::EngineCor", service.core_pid))
        for offset, llama in enumerate(self.llamacpp):
            if llama.http.listening:
                out.append((llama.http.port, "llama-server", 2200 + offset))
        if self.ollama is not None and self.ollama.http.listening:
            out.append((self.ollama.http.port, "ollama", 2300))
        if self.gpu_http is not None and self.gpu_http.listening:
            exporter = "nvidia_gpu_expo" if self.spec.gpu_exporter != "dgx-spark" else "python3"
            out.append((self.gpu_http.port, exporter, 1203))
        for offset, server in enumerate(self.services.values()):
            if server.listening:
                out.append((server.port, "python3", 1310 + offset))
        if self.ssh is not None and self.ssh.listening:
            out.append((self.ssh.port, "sshd", 1041))
        return out

    def boot(self, load_s: float | None = None) -> None:
        """The node (re)boots: empty page cache and /dev/shm, every enabled vLLM service starts."""
        host = self.host
        host.boot_epoch = self.clock.epoch
        host.booted()
        host.drop_caches()
        host.shm.clear()
        host.load = [0.0, 0.0, 0.0]
        host.psi_some = [0.0, 0.0, 0.0]
        host.psi_full = [0.0, 0.0, 0.0]
        host.psi_some_total_us = host.psi_full_total_us = 0.0
        host.last_pid = 1800
        self.powered = True
        for instance in self.instances:
            instance.service.restarts = 0
            instance.service.start(load_s=load_s, manual=False)
        for server in self.llamacpp:
            server.engine.boot()  # its own model's load time
        self.refresh_host()

    async def gpu_page(self, _request: Request) -> Response:
        if self.spec.gpu_exporter == "dgx-spark":
            text = dgx_spark_exporter_page(self.gpu, self.name, float(MEM_TOTAL), self.memory_used())
        else:
            text = nvidia_gpu_exporter_page(self.gpu, self.name)
        return Response(body=text.encode(), content_type="text/plain; version=0.0.4; charset=utf-8")


def _service_handler(kind: str, rng: random.Random, ollama: DemoOllama) -> Callable[[Request], object]:
    """A side service's answers: ``/health``, or, for an Ollama, an idle Ollama's (``ollama.DemoOllama``:
    ``sparktui init`` finds it as an engine; the demo's own config keeps it a side service)."""

    async def handle(request: Request) -> Response:
        await asyncio.sleep(rng.uniform(0.003, 0.02))
        if kind == "ollama":
            return await ollama.handle(request)
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
        on_event: Callable[[str], None] | None = None,
    ) -> None:
        """``on_event`` gets each scenario event's log line as it fires (the demo prints them)."""
        self.seed = seed
        self.now = 0.0
        # The nodes' clock reads the wall time when the fleet starts serving (after the warm-up).
        self.clock = SimClock(time.time() - warmup_s)
        self.nodes: list[DemoNode] = []
        for index, spec in enumerate(nodes):
            rng = random.Random(f"{seed}:{index}")
            host_rng = random.Random(f"{seed}:{index}:host")
            up_for = 2 * 86400 + index * 7 * 3600 + host_rng.uniform(0, 3600)
            base = BaseUsage(services_anon=sum(SERVICE_ANON.get(kind, 0.5 * GIB) for _, kind in spec.services))
            host = SimHost(spec.name, self.clock, host_rng, self.clock.epoch - up_for, base)
            host.last_pid = 1800 + int(up_for / 40)
            address = spec.address
            instances = [
                DemoInstance(
                    spec.name,
                    i,
                    rng,
                    host,
                    self.clock,
                    service_rng=random.Random(f"{seed}:{index}:{i.name}"),
                    address=address,
                )
                for i in spec.instances
            ]
            node = DemoNode(spec, instances, host, self.clock, rng=rng)
            # Each llama-server draws from a random stream of its own: the node's numbers stay the seed's.
            node.llamacpp = [
                DemoLlamaServer(spec.name, s, random.Random(f"{seed}:{index}:{s.name}:llamacpp"), address)
                for s in spec.llamacpp
            ]
            if spec.ollama is not None:
                node.ollama = DemoOllama(spec.name, spec.ollama, self.clock, address)
            if any(i.job for i in spec.instances):
                node.nic = SimNic()
            node.gpu_http = HttpServer(node.gpu_page, host=address, on_served=node.gpu_served)
            for name, kind in spec.services:
                idle = DemoOllama(spec.name, OllamaSpec(name, (QWEN3_8B,)), self.clock, address)
                node.services[name] = HttpServer(_service_handler(kind, rng, idle), host=address)  # type: ignore[arg-type]
            for instance in instances:
                # Up since boot: the model was loaded then (its weights are in the page cache).
                instance.service.adopt(host.boot_epoch + 35.0 + instance.profile.load_s)
            node.refresh_host()
            self.nodes.append(node)
        self._job_tokens: dict[str, float] = {}
        self.state_dir: Path | None = None
        self._own_state_dir = False
        self.client_key_file: Path | None = None
        self.known_hosts_file: Path | None = None
        self._fast_forward(warmup_s)
        self.started_at = self.now  # scenario time counts from here
        self.scenario = scenario
        self._pending = sorted(scenario.events, key=lambda e: e.at_s) if scenario else []
        self.events_log: deque[str] = deque(maxlen=EVENTS_KEPT)
        self.on_event = on_event

    @property
    def elapsed(self) -> float:
        """Simulated seconds since the fleet started serving."""
        return self.now - self.started_at

    async def _fire_due_events(self) -> None:
        while self._pending and self._pending[0].at_s <= self.elapsed + 1e-9:
            event = self._pending.pop(0)
            what = await event.action(self)
            line = f"{event.at_s:5.0f} s  {what or event.what}"
            self.events_log.append(line)
            if self.on_event is not None:
                self.on_event(line)
            every = self.scenario.every_s if self.scenario is not None else None
            if every:  # a repeating timeline: the event comes again next round
                bisect.insort(self._pending, replace(event, at_s=event.at_s + every), key=lambda e: e.at_s)

    def node(self, name: str) -> DemoNode:
        return next(n for n in self.nodes if n.name == name)

    def _fast_forward(self, seconds: float, dt: float = 0.25) -> None:
        steps = int(seconds / dt)
        for _ in range(steps):
            self.clock.now += dt
            for node in self.nodes:
                node.advance(dt)
            self._carry_fabric(dt)
        self.now = self.clock.now

    def _carry_fabric(self, dt: float) -> None:
        """Each job's tokens computed by its head over ``dt`` cross the links of its ranks."""
        for node in self.nodes:
            for instance in node.instances:
                job = instance.spec.job
                if instance.spec.role != "head" or job is None or not node.powered:
                    continue
                total = instance.engine.tokens_computed
                tokens = total - self._job_tokens.get(job, total)
                self._job_tokens[job] = total
                for rank in self.nodes:
                    if rank.nic is not None and rank.powered and any(i.spec.job == job for i in rank.instances):
                        rank.nic.carry(tokens, dt)

    def servers(self) -> list[HttpServer]:
        out: list[HttpServer] = []
        for node in self.nodes:
            out.extend(i.http for i in node.instances if i.http is not None)
            out.extend(server.http for server in node.llamacpp)
            if node.ollama is not None:
                out.append(node.ollama.http)
            if node.gpu_http is not None:
                out.append(node.gpu_http)
            out.extend(node.services.values())
        return out

    async def start(self, state_dir: Path | None = None) -> None:
        """Open every server on 127.0.0.1. The SSH keys and known_hosts go to ``state_dir`` (a
        temporary directory of the fleet's own when None, removed by ``stop()``)."""
        for node in self.nodes:
            if node.gpu_http is not None:
                await node.gpu_http.start()
            for server in node.services.values():
                await server.start()
            for instance in node.instances:
                await instance.sync_listening()
            for llama in node.llamacpp:
                await llama.sync_listening()
            if node.ollama is not None:
                await node.ollama.http.start()
        await self._start_ssh(state_dir)

    async def _start_ssh(self, state_dir: Path | None) -> None:
        if state_dir is None:
            state_dir = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="sparktui-demo-"))
            self._own_state_dir = True
        self.state_dir = state_dir
        client_key = generate_key()
        for node in self.nodes:
            node.ssh = DemoSshServer(node, generate_key(), client_key, after_command=self._sync_listening)
            if node.powered:
                await node.ssh.start()
        self.client_key_file = state_dir / "demo_ssh_key"
        self.known_hosts_file = state_dir / "known_hosts"
        key_text = client_key.export_private_key("openssh").decode()
        public_text = client_key.export_public_key("openssh").decode()
        known = "".join(node.ssh.known_hosts_line() + "\n" for node in self.nodes if node.ssh is not None)
        await asyncio.to_thread(_write_ssh_files, state_dir, key_text, public_text, known)

    async def stop(self) -> None:
        servers = [server.stop() for server in self.servers()]
        servers += [node.ssh.stop() for node in self.nodes if node.ssh is not None]
        await asyncio.gather(*servers)
        if self._own_state_dir and self.state_dir is not None:
            await asyncio.to_thread(shutil.rmtree, self.state_dir, True)
            self._own_state_dir = False

    async def _sync_listening(self) -> None:
        for node in self.nodes:
            for instance in node.instances:
                await instance.sync_listening()

    async def advance(self, dt: float) -> None:
        """Move the simulation ``dt`` seconds forward (in steps of at most 0.25 s)."""
        remaining = dt
        while remaining > 1e-9:
            step = min(0.25, remaining)
            self.clock.now += step
            for node in self.nodes:
                node.advance(step)
            self._carry_fabric(step)
            for node in self.nodes:
                if node.ssh is not None:
                    node.ssh.tick()
            self.now = self.clock.now
            remaining -= step
            await self._fire_due_events()
        await self._sync_listening()

    async def run_clock(
        self, tick_s: float = 0.1, speed: float = 1.0, paced_by: str | None = None, ahead_s: float = 0.0
    ) -> None:
        """Advance with the wall clock (``speed`` times as fast) until cancelled.

        With ``paced_by`` (a node's name) the simulation never runs more than ``ahead_s`` simulated
        seconds past that node's last GPU exporter scrape, and not at all before the first: it waits
        for an observer starved of CPU (a test's dashboard on a busy machine) instead of running ahead
        of its polls, and the time it waited is not made up later. ``ahead_s`` of two polls' worth
        never binds while the polls keep their interval: an observer on time sees the wall's pace."""
        pacer = self.node(paced_by) if paced_by is not None else None
        last = time.monotonic()
        while True:
            await asyncio.sleep(tick_s)
            now = time.monotonic()
            dt = (now - last) * speed
            last = now
            if pacer is not None:  # not before the first scrape: the observer may still be starting
                scraped = pacer.gpu_scraped_at
                dt = 0.0 if scraped is None else min(dt, scraped + ahead_s - self.now)
            if dt > 0:
                await self.advance(dt)

    async def power_off(self, name: str) -> None:
        """The node vanishes: its processes stop and every port, SSH included, refuses."""
        node = self.node(name)
        node.powered = False
        for instance in node.instances:
            instance.service.power_loss()
        for server in node.llamacpp:
            server.engine.power_loss()
        if node.ollama is not None:
            node.ollama.restart()
        node.refresh_host()
        stops = [s.stop() for s in self._node_servers(node)]
        if node.ssh is not None:
            stops.append(node.ssh.stop())
        await asyncio.gather(*stops)

    async def power_on(self, name: str, load_s: float = 120.0) -> None:
        """The node boots: SSH, exporters and services answer at once, vLLM after loading its model."""
        node = self.node(name)
        node.boot(load_s)
        for server in self._node_servers(node):
            if not any(server is i.http for i in node.instances):
                await server.start()
        if node.ssh is not None:
            await node.ssh.start()
        for instance in node.instances:
            await instance.sync_listening()

    async def ssh_down(self, name: str) -> None:
        """The node's sshd stops accepting and its sessions die; HTTP goes on."""
        ssh = self.node(name).ssh
        if ssh is not None:
            await ssh.stop()

    async def ssh_up(self, name: str) -> None:
        ssh = self.node(name).ssh
        if ssh is not None and self.node(name).powered:
            await ssh.start()

    @staticmethod
    def _node_servers(node: DemoNode) -> list[HttpServer]:
        servers = [i.http for i in node.instances if i.http is not None]
        servers += [server.http for server in node.llamacpp]
        if node.ollama is not None:
            servers.append(node.ollama.http)
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
            lines += ["[[nodes]]", f'name = "{node.name}"', f"host = {_toml_string(node.address)}", ""]
            if node.ssh is not None and node.ssh.port and self.client_key_file and self.known_hosts_file:
                lines += [
                    "[nodes.ssh]",
                    f"user = {_toml_string(USER)}",
                    f"port = {node.ssh.port}",
                    f"key_file = {_toml_string(str(self.client_key_file))}",
                    f"known_hosts = {_toml_string(str(self.known_hosts_file))}",
                    "connect_timeout_s = 3.0",
                    "",
                ]
            else:  # not started: no SSH server to point at
                lines += ["[nodes.ssh]", "enabled = false", ""]
            for instance in node.instances:
                spec = instance.spec
                lines += ["[[nodes.vllm]]", f'name = "{spec.name}"']
                if spec.engine != "vllm":  # seen over HTTP only
                    lines += (
                        [f'engine = "{spec.engine}"', f'url = "{instance.http.url}"', ""] if instance.http else [""]
                    )
                    continue
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
            for llama in node.llamacpp:
                lines += ["[[nodes.vllm]]", f'name = "{llama.spec.name}"', 'engine = "llamacpp"']
                lines += [f'url = "{llama.http.url}"', ""]
            if node.ollama is not None:
                lines += ["[[nodes.vllm]]", f'name = "{node.ollama.spec.name}"', 'engine = "ollama"']
                lines += [f'url = "{node.ollama.http.url}"', ""]
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

    def init_command(self) -> str | None:
        """``sparktui init`` for the demo's nodes, as for one's own Sparks: each node's SSH is on a port of
        its own on 127.0.0.1 (``HOST:PORT``). None before the SSH servers listen."""
        targets = [f"{n.address}:{n.ssh.port}" for n in self.nodes if n.ssh is not None and n.ssh.port]
        if not targets or self.client_key_file is None or self.known_hosts_file is None:
            return None
        return (
            f"sparktui init {' '.join(targets)} --user {USER} --key {self.client_key_file} "
            f"--known-hosts {self.known_hosts_file}"
        )

    def endpoints(self) -> list[str]:
        """One line per listening endpoint, for ``sparktui demo`` to print."""
        out = []
        for node in self.nodes:
            for instance in node.instances:
                where = instance.http.url if instance.http is not None else "(tensor-parallel worker, no HTTP)"
                label = instance.face.label
                out.append(f"{node.name:8} {label} {instance.spec.name:10} {instance.profile.served_name:36} {where}")
            for llama in node.llamacpp:
                model = f"{llama.card.alias} ({llama.card.path.rsplit('/', 1)[-1]})"
                out.append(f"{node.name:8} llama.cpp {llama.spec.name:10} {model:31} {llama.http.url}")
            if node.ollama is not None:
                held = ", ".join(node.ollama.loaded) or "no model loaded"
                out.append(f"{node.name:8} Ollama {node.ollama.spec.name:10} {held:34} {node.ollama.http.url}")
            if node.gpu_http is not None:
                out.append(f"{node.name:8} GPU exporter ({node.spec.gpu_exporter})  {node.gpu_http.url}/metrics")
            for name, server in node.services.items():
                out.append(f"{node.name:8} service {name:14} {server.url}")
            if node.ssh is not None and node.ssh.port and self.client_key_file is not None:
                out.append(
                    f"{node.name:8} SSH          ssh -p {node.ssh.port} -i {self.client_key_file} "
                    f"-o UserKnownHostsFile={self.known_hosts_file} {USER}@{node.address}"
                )
        return out


def _toml_string(text: str) -> str:
    """A TOML basic string (JSON's escapes are valid TOML)."""
    return json.dumps(text)


def _write_ssh_files(directory: Path, private_key: str, public_key: str, known_hosts: str) -> None:
    key = directory / "demo_ssh_key"
    key.write_text(private_key)
    key.chmod(0o600)  # OpenSSH refuses a private key others can read
    (directory / "demo_ssh_key.pub").write_text(public_key)
    (directory / "known_hosts").write_text(known_hosts)
