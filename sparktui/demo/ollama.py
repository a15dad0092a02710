"""The demo's Ollama: a simulated ``ollama serve`` with models on disk, the ones it holds in memory, and
Ollama's documented JSON (docs.ollama.com/api; ``tests/support/ollama_server.py`` cites each route).

- ``GET /`` "Ollama is running"; ``GET /api/version``; ``GET /api/tags`` every model on disk;
  ``GET /v1/models`` the same, as OpenAI's list;
- ``GET /api/ps`` the models loaded, with ``size``, ``size_vram``, ``context_length`` and
  ``expires_at`` (RFC 3339, nanoseconds and the server's offset, as Go writes a ``time.Time``);
- ``POST /api/generate`` (not streamed) loads the model it names if it is not loaded, answers with
  Ollama's timing fields in nanoseconds (``load_duration``, ``prompt_eval_*``, ``eval_*``,
  ``total_duration``), and sets the model's expiry to its ``keep_alive`` after the answer (five minutes
  when not given; negative: never; 0: unloaded at once).

Ollama's scheduler unloads a model when its keep-alive runs out. ``stuck`` is the fault write-up
000's operators saw: a model still held after its expiry ("overdue"), its memory never given back
until the server is restarted. What the loaded models hold counts in the node's memory (unified
memory: ``size_vram`` is the host's memory too).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from sparktui.demo.host import GIB, SimClock
from sparktui.demo.httpserver import LOOPBACK, HttpServer, Request, Response

OLLAMA_VERSION = "0.12.6"
OLLAMA_PORT = 11434
DEFAULT_KEEP_ALIVE_S = 300.0
FOREVER = datetime(2318, 1, 1, tzinfo=UTC)  # what a negative keep_alive reads as: a time never reached
LOAD_GIB_PER_S = 2.5  # weights from NVMe into memory
PROMPT_TOKENS_PER_S = 1800.0
DECODE_TOKENS_PER_S = 42.0
GENERATED_KEPT = 100


@dataclass(frozen=True, slots=True)
class OllamaModel:
    """A model on disk: its tag, its size in memory once loaded, its family and its context."""

    name: str
    size: int
    family: str
    parameter_size: str
    context_length: int = 4096
    quantization: str = "Q4_K_M"


@dataclass(frozen=True, slots=True)
class OllamaSpec:
    """An Ollama on a demo node: its models, and those loaded at the start (name, keep-alive seconds)."""

    name: str
    models: tuple[OllamaModel, ...]
    loaded: tuple[tuple[str, float], ...] = ()
    port: int = OLLAMA_PORT


@dataclass
class Loaded:
    model: OllamaModel
    expires_at: datetime


QWEN3_8B = OllamaModel("qwen3:8b", int(6.2 * GIB), "qwen3", "8.2B", context_length=4096)
LLAMA33_70B = OllamaModel("llama3.3:70b", int(46.5 * GIB), "llama", "70.6B", context_length=8192)
GEMMA3_27B = OllamaModel("gemma3:27b", int(19.8 * GIB), "gemma3", "27.4B", context_length=8192)


@dataclass
class DemoOllama:
    """One simulated ``ollama serve``."""

    node: str
    spec: OllamaSpec
    clock: SimClock
    address: str = LOOPBACK
    loaded: dict[str, Loaded] = field(default_factory=dict)
    stuck: bool = False  # the scheduler no longer unloads expired models
    http: HttpServer = field(init=False)
    # The models the last /api/generate requests named (a canary's every 30 s: bounded, the demo runs for days).
    generated: deque[str] = field(default_factory=lambda: deque(maxlen=GENERATED_KEPT))

    def __post_init__(self) -> None:
        self.http = HttpServer(self.handle, host=self.address, port=self.spec.port)
        for name, keep_alive_s in self.spec.loaded:
            self.load(name, keep_alive_s)

    def model(self, name: str) -> OllamaModel | None:
        return next((m for m in self.spec.models if m.name == name), None)

    def now(self) -> datetime:
        """The node's clock (the simulation's)."""
        return datetime.fromtimestamp(self.clock.epoch, UTC)

    def load(self, name: str, keep_alive_s: float) -> bool:
        """The model ``name`` is held until ``keep_alive_s`` from now (negative: for ever)."""
        model = self.model(name)
        if model is None:
            return False
        now = self.now()
        expires = FOREVER if keep_alive_s < 0 else now + timedelta(seconds=keep_alive_s)
        self.loaded[name] = Loaded(model, expires)
        return True

    def advance(self) -> None:
        """The scheduler unloads what expired (unless it is ``stuck``)."""
        if self.stuck:
            return
        now = self.now()
        for name in [n for n, held in self.loaded.items() if held.expires_at <= now]:
            del self.loaded[name]

    def held_bytes(self) -> float:
        """What the loaded models hold (all of it in the GB10's memory)."""
        return float(sum(held.model.size for held in self.loaded.values()))

    def restart(self) -> None:
        """``systemctl restart ollama``: every model is let go."""
        self.loaded.clear()
        self.stuck = False

    # --- HTTP ---------------------------------------------------------------------------------------

    async def handle(self, request: Request) -> Response:
        path = request.path
        if request.method == "POST":
            if path == "/api/generate":
                return await self._generate(request)
            return Response(status=404, body=b"404 page not found", content_type="text/plain")
        if path == "/":
            return Response(body=b"Ollama is running", content_type="text/plain; charset=utf-8")
        if path == "/api/version":
            return Response.of_json({"version": OLLAMA_VERSION})
        if path == "/api/tags":
            return Response.of_json({"models": [_tag(m) for m in self.spec.models]})
        if path == "/api/ps":
            return Response.of_json({"models": [_running(held) for held in self.loaded.values()]})
        if path == "/v1/models":
            cards = [
                {"id": m.name, "object": "model", "created": 1759559643, "owned_by": "library"}
                for m in self.spec.models
            ]
            return Response.of_json({"object": "list", "data": cards})
        return Response(status=404, body=b"404 page not found", content_type="text/plain")

    async def _generate(self, request: Request) -> Response:
        try:
            sent = request.json()
        except ValueError:
            return Response.of_json({"error": "invalid JSON"}, status=400)
        name = sent.get("model") if isinstance(sent, dict) else None
        model = self.model(name) if isinstance(name, str) else None
        if model is None:
            return Response.of_json({"error": f"model '{name}' not found"}, status=404)
        assert isinstance(sent, dict)
        self.generated.append(model.name)
        load_s = 0.0 if model.name in self.loaded else model.size / GIB / LOAD_GIB_PER_S
        prompt_tokens = max(1, len(str(sent.get("prompt") or "")) // 4)
        options = sent.get("options")
        wanted = options.get("num_predict") if isinstance(options, dict) else None
        eval_count = wanted if isinstance(wanted, int) and 0 < wanted <= 512 else 24
        prompt_s = prompt_tokens / PROMPT_TOKENS_PER_S
        eval_s = eval_count / DECODE_TOKENS_PER_S
        await asyncio.sleep(min(2.0, load_s / 20 + prompt_s + eval_s / 10))  # a taste of its time
        keep_alive_s = _keep_alive_s(sent.get("keep_alive"))
        self.load(model.name, keep_alive_s)
        ns = 1_000_000_000
        body = {
            "model": model.name,
            "created_at": self.now().isoformat().replace("+00:00", "Z"),
            "response": " spark" * eval_count,
            "done": True,
            "done_reason": "length" if wanted else "stop",
            "total_duration": round((load_s + prompt_s + eval_s) * ns) + 1_500_000,
            "load_duration": round(load_s * ns) + 1_000_000,
            "prompt_eval_count": prompt_tokens,
            "prompt_eval_duration": round(prompt_s * ns),
            "eval_count": eval_count,
            "eval_duration": round(eval_s * ns),
        }
        if keep_alive_s == 0:
            self.loaded.pop(model.name, None)
        return Response.of_json(body)


def _keep_alive_s(value: object) -> float:
    """``keep_alive`` as Ollama takes it: seconds as a number, a Go duration ("5m", "1h", "30s"), a
    negative for ever; five minutes when absent or unreadable."""
    if isinstance(value, bool):
        return DEFAULT_KEEP_ALIVE_S
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str) and value:
        units = {"s": 1.0, "m": 60.0, "h": 3600.0}
        number, unit = value[:-1], value[-1]
        try:
            return float(number) * units[unit] if unit in units else float(value)
        except ValueError:
            return DEFAULT_KEEP_ALIVE_S
    return DEFAULT_KEEP_ALIVE_S


def _details(model: OllamaModel) -> dict[str, object]:
    return {
        "parent_model": "",
        "format": "gguf",
        "family": model.family,
        "families": [model.family],
        "parameter_size": model.parameter_size,
        "quantization_level": model.quantization,
    }


def _tag(model: OllamaModel) -> dict[str, object]:
    return {
        "name": model.name,
        "model": model.name,
        "modified_at": "2026-10-03T23:34:03.409490317Z",
        "size": model.size,
        "digest": _digest(model),
        "details": _details(model),
    }


def _running(held: Loaded) -> dict[str, object]:
    """One ``/api/ps`` entry; ``expires_at`` with nanoseconds, as Go's RFC 3339 writes it."""
    model = held.model
    stamp = held.expires_at
    expires = stamp.strftime("%Y-%m-%dT%H:%M:%S") + f".{stamp.microsecond:06d}000Z"
    return {
        "name": model.name,
        "model": model.name,
        "size": model.size,
        "digest": _digest(model),
        "details": _details(model),
        "expires_at": expires,
        "size_vram": model.size,
        "context_length": model.context_length,
    }


def _digest(model: OllamaModel) -> str:
    return hashlib.sha256(model.name.encode()).hexdigest()
