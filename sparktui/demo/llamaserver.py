"""The demo's llama.cpp instance: a simulated ``llama-server`` beside spark1's vLLM, the small fallback
model of context/000 (Qwen3-8B; there it is Ollama's, here llama.cpp's own server, which sparktui reads).

The server loop is llama-server's: each iteration is one batch and one ``llama_decode()`` call, with a
token for every slot that generates and as much of a waiting prompt as fits ``n_batch``; the batch that
ends a prompt samples its first token. A request that finds every slot busy waits (deferred). Its
numbers are kept by ``sparktui.engines.llamacpp.demo`` (``ServerBooks``), which also writes the bodies.

The workload is a trickle: a request every ``mean_gap_s`` on average (Poisson), a few hundred tokens
each, from a random stream of its own, so the rest of the fleet's numbers are those of the seed as they
were before this instance existed. Completions sent over HTTP (the canary, a warmup) run through the
same slots. While the model loads, every endpoint answers 503 "Loading model", as the real one does.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from sparktui.demo.httpserver import LOOPBACK, HttpServer, Request, Response
from sparktui.engines.llamacpp.demo import (
    BUILD_INFO,
    JSON_CONTENT_TYPE,
    METRICS_CONTENT_TYPE,
    ModelCard,
    ServerBooks,
    ServerState,
    SlotRun,
    SlotState,
    health_body,
    metrics_body,
    models_body,
    new_server,
    props_body,
    slots_body,
)

SERVER_HEADERS = {"Server": "llama.cpp"}
NOT_FOUND = {"error": {"code": 404, "message": "File Not Found", "type": "not_found_error"}}

QWEN3_8B = ModelCard(
    alias="qwen3-8b",
    path="/models/Qwen3-8B-Q4_K_M.gguf",
    ftype="Q4_K - Medium",
    vocab_type=2,
    n_vocab=151936,
    n_ctx_train=40960,
    n_embd=4096,
    n_params=8_190_735_360,
    size=5_027_783_488,
    bos_token="<|endoftext|>",
    eos_token="<|im_end|>",
    # ChatML, as Qwen3's own template writes a conversation (its tool and thinking parts left out).
    chat_template=(
        "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
        "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    ),
    media_marker="<__media_Qm3fJx8LcV2pWn7RtY4kZs9aHd6uGe1b__>",
)


@dataclass(frozen=True, slots=True)
class LlamaProfile:
    """A llama-server on a DGX Spark: ``-c n_ctx -np total_slots``, and roughly how fast a GB10 runs an
    8B model at Q4_K_M (decode bound by the 273 GB/s of memory)."""

    card: ModelCard
    total_slots: int = 2
    n_ctx: int = 32768
    n_batch: int = 2048
    step_s: float = 0.026  # one decode step with one slot: ~38 tok/s
    step_per_slot_s: float = 0.002  # each other slot in the batch
    prefill_tokens_per_s: float = 2400.0
    mean_gap_s: float = 25.0  # the trickle: a request every this many seconds on average
    prompt_median: float = 420.0
    output_median: float = 220.0
    max_tokens: int = 1024
    system_prompt_tokens: int = 180  # what the requests that share a prefix share
    prefix_reuse_share: float = 0.6
    load_s: float = 12.0  # 5 GB from NVMe and a warmup decode


PROFILES: dict[str, LlamaProfile] = {"qwen3-8b": LlamaProfile(QWEN3_8B)}


@dataclass(slots=True)
class LlamaRequest:
    """One request: its prompt, how many tokens it will generate, and who waits for them (an HTTP
    client), if anyone."""

    prompt_tokens: int
    n_predict: int  # max_tokens; -1: no limit
    target_tokens: int  # where it stops (EOS, or n_predict)
    shares_prefix: bool = False
    stream: bool = False
    on_token: Callable[[int], None] | None = None
    on_finish: Callable[[SlotRun, str], None] | None = None


@dataclass
class LlamaTally:
    """What the simulation did, counted apart from the server's books (what a test compares them with)."""

    requests_ended: int = 0
    prompt_tokens: int = 0  # of the requests whose prompt was processed
    cached_tokens: int = 0
    generated_ended: int = 0  # tokens of the requests that ended
    decode_calls: int = 0


@dataclass
class LlamaEngine:
    """The simulated server: its slots, its waiting requests, its books; ``advance(dt)`` runs it."""

    profile: LlamaProfile
    rng: random.Random
    state: ServerState = field(init=False)
    load_factor: float = 1.0  # 0: its clients are gone
    running: dict[int, LlamaRequest] = field(default_factory=dict)  # slot id -> its request
    deferred: deque[LlamaRequest] = field(default_factory=deque)
    tally: LlamaTally = field(default_factory=LlamaTally)
    stopped: bool = False  # the process is gone (the node is off)
    ready_at: float = 0.0
    now: float = 0.0
    next_task: int = 0
    debt_s: float = 0.0  # server time owed to the batches in progress
    arrival_debt: float = 0.0
    next_gap: float = 1.0
    ended_at: dict[int, float] = field(default_factory=dict)  # slot id -> when its last request ended
    last_shared: dict[int, bool] = field(default_factory=dict)  # slot id -> its cache holds the shared prefix

    def __post_init__(self) -> None:
        self.state = self._fresh_state()

    def _fresh_state(self) -> ServerState:
        p = self.profile
        return new_server(p.card, p.total_slots, p.n_ctx, created=int(time.time()))

    # --- the process ------------------------------------------------------------------------------

    def boot(self, load_s: float | None = None) -> None:
        """The process starts: fresh books, /health 503 until the model has loaded."""
        self._abort_all()
        self.state = self._fresh_state()
        self.state.loading = True
        self.ended_at.clear()  # a new process: the slots' caches are empty
        self.last_shared.clear()
        self.stopped = False
        self.ready_at = self.now + (self.profile.load_s if load_s is None else load_s)

    def power_loss(self) -> None:
        """The process is gone with the node: every request is lost."""
        self._abort_all()
        self.stopped = True

    def _abort_all(self) -> None:
        lost = list(self.running.values()) + list(self.deferred)
        self.running.clear()
        self.deferred.clear()
        for slot in self.state.slots:
            slot.run = None
        self.state.deferred = 0
        for request in lost:
            if request.on_finish is not None:
                request.on_finish(SlotRun(0, request.prompt_tokens, 0, request.n_predict), "abort")

    # --- the workload -----------------------------------------------------------------------------

    def new_request(self) -> LlamaRequest:
        p = self.profile
        prompt = _lognormal(self.rng, p.prompt_median, 0.8, 24, p.n_ctx // p.total_slots // 2)
        output = _lognormal(self.rng, p.output_median, 0.6, 8, p.max_tokens)
        shares = self.rng.random() < p.prefix_reuse_share and prompt > p.system_prompt_tokens
        return LlamaRequest(prompt, p.max_tokens, output, shares_prefix=shares)

    def submit(self, request: LlamaRequest) -> None:
        self.deferred.append(request)
        self._assign()

    def _arrivals(self, dt: float) -> None:
        """A Poisson trickle: exponential gaps in units of expected arrivals."""
        self.arrival_debt += dt * self.load_factor / self.profile.mean_gap_s
        while self.arrival_debt >= self.next_gap:
            self.arrival_debt -= self.next_gap
            self.next_gap = self.rng.expovariate(1.0)
            self.submit(self.new_request())

    def _assign(self) -> None:
        """Give waiting requests the idle slots: the one whose cache holds the shared prefix when the
        request shares it, else the one idle longest (llama-server's similarity, then LRU)."""
        while self.deferred and not self.state.loading and not self.stopped:
            idle = [slot for slot in self.state.slots if slot.run is None]
            if not idle:
                break
            request = self.deferred.popleft()
            reuse = [s for s in idle if request.shares_prefix and self.last_shared.get(s.id)]
            slot = reuse[0] if reuse else min(idle, key=lambda s: self.ended_at.get(s.id, -math.inf))
            cached = min(self.profile.system_prompt_tokens, request.prompt_tokens - 1) if reuse else 0
            self.next_task += 1
            slot.run = SlotRun(
                self.next_task,
                request.prompt_tokens,
                cached,
                request.n_predict,
                stream=request.stream,
                prompt_left=request.prompt_tokens - cached,
            )
            self.running[slot.id] = request
        self.state.deferred = len(self.deferred)

    # --- the server loop --------------------------------------------------------------------------

    def advance(self, dt: float) -> None:
        """Move the server ``dt`` seconds forward."""
        end = self.now + dt
        if self.stopped:
            self.now = end
            return
        if self.state.loading:
            if end < self.ready_at:
                self.now = end
                return
            self.state.loading = False
            dt = end - self.ready_at  # it serves from the moment the model has loaded
            self._assign()
        self._arrivals(dt)
        self.debt_s += dt
        while self._iteration():
            pass
        if not self.running:
            self.debt_s = 0.0  # idle time is not owed to the next request
        self.now = end

    def _iteration(self) -> bool:
        """One batch, if the time owed covers it; False when there is nothing to run or no time."""
        p = self.profile
        slots = self.state.slots
        generating = [s for s in slots if s.run is not None and s.run.prompt_left == 0 and s.run.decoded > 0]
        prompting = sorted((s for s in slots if s.run is not None and s.run.prompt_left > 0), key=_task)
        if not generating and not prompting:
            return False
        chunk_slot = prompting[0] if prompting else None
        room = p.n_batch - len(generating)
        chunk = min(chunk_slot.run.prompt_left, room) if chunk_slot is not None and chunk_slot.run else 0
        seconds = chunk / p.prefill_tokens_per_s
        if generating:
            seconds += p.step_s + p.step_per_slot_s * (len(generating) - 1)
        if seconds > self.debt_s:
            return False
        self.debt_s -= seconds
        books = self.state.books
        ended: list[SlotState] = []
        for slot in generating:  # the batch decoded each one's last token: sample the next
            run, request = slot.run, self.running[slot.id]
            assert run is not None
            run.generation_s += seconds
            run.decoded += 1
            if request.on_token is not None:
                request.on_token(1)
            if run.decoded >= request.target_tokens:
                ended.append(slot)
        prompt_done: SlotRun | None = None
        if chunk_slot is not None and chunk_slot.run is not None:
            run = chunk_slot.run
            run.prompt_s += seconds
            run.prompt_left -= chunk
            if run.prompt_left == 0:  # its last batch: the first token is sampled from it
                run.decoded = 1
                prompt_done = run
                request = self.running[chunk_slot.id]
                if request.on_token is not None:
                    request.on_token(1)
                if request.target_tokens <= 1:
                    ended.append(chunk_slot)
        books.decoded(slots)
        self.tally.decode_calls += 1
        if prompt_done is not None:
            books.prompt_done(prompt_done)
            self.tally.prompt_tokens += prompt_done.prompt_tokens
            self.tally.cached_tokens += prompt_done.cached_tokens
        for slot in ended:
            self._finish(slot, books)
        if ended:
            self._assign()
        return True

    def _finish(self, slot: SlotState, books: ServerBooks) -> None:
        run, request = slot.run, self.running.pop(slot.id)
        assert run is not None
        books.request_done(run)
        self.tally.requests_ended += 1
        self.tally.generated_ended += run.decoded
        slot.last, slot.run = run, None
        self.ended_at[slot.id] = self.now
        self.last_shared[slot.id] = request.shares_prefix
        if request.on_finish is not None:
            request.on_finish(run, "length" if 0 <= run.n_predict <= run.decoded else "stop")

    def generated_so_far(self) -> int:
        """Every token generated: the ended requests' and the running ones'."""
        running = sum(s.run.decoded for s in self.state.slots if s.run is not None)
        return self.tally.generated_ended + running


@dataclass(frozen=True, slots=True)
class LlamaSpec:
    """A llama-server on a demo node: its instance name and its ``PROFILES`` key."""

    name: str
    profile: str
    port: int = 0  # the port it asks for first (8080, llama-server's default); 0: any port


class DemoLlamaServer:
    """One simulated llama-server: its engine and its HTTP server (listening while the process runs,
    the model loading or not)."""

    def __init__(self, node: str, spec: LlamaSpec, rng: random.Random, address: str = LOOPBACK) -> None:
        self.node = node
        self.spec = spec
        self.profile = PROFILES[spec.profile]
        self.engine = LlamaEngine(self.profile, rng)
        self.http = HttpServer(self.handle, host=address, port=spec.port)

    @property
    def card(self) -> ModelCard:
        return self.profile.card

    async def sync_listening(self) -> None:
        """Listen exactly when a real server would: from its start, loading included, until it stops."""
        if not self.engine.stopped and not self.http.listening:
            await self.http.start()
        elif self.engine.stopped and self.http.listening:
            await self.http.stop()

    async def handle(self, request: Request) -> Response:
        state = self.engine.state
        path = request.path
        if state.loading:  # every endpoint, /health included, until the model has loaded
            status, body = health_body(state)
            return _json_response(body, status)
        if path == "/health":
            status, body = health_body(state)
            return _json_response(body, status)
        if path == "/metrics":
            body = metrics_body(state)
            state.books.scraped()  # its averages are since the previous read, whoever made it
            return Response(body=body, content_type=METRICS_CONTENT_TYPE, headers=dict(SERVER_HEADERS))
        if path == "/props":
            return _json_response(props_body(state))
        if path == "/slots":
            return _json_response(slots_body(state))
        if path in ("/v1/models", "/models"):
            return _json_response(models_body(state))
        if path in ("/v1/completions", "/v1/chat/completions"):
            return await self._complete(request, chat=path == "/v1/chat/completions")
        return _json_response(json.dumps(NOT_FOUND, separators=(",", ":")).encode(), 404)

    async def _complete(self, request: Request, *, chat: bool) -> Response:
        try:
            payload = request.json()
        except ValueError:
            payload = None
        if not isinstance(payload, dict):
            error = {
                "error": {"code": 400, "message": "the body is not a JSON object", "type": "invalid_request_error"}
            }
            return _json_response(json.dumps(error).encode(), 400)
        text = json.dumps(payload.get("messages") if chat else payload.get("prompt") or "")
        limit = payload.get("max_tokens") or payload.get("n_predict")
        n_predict = int(limit) if isinstance(limit, int | float) and limit > 0 else -1
        prompt_tokens = max(1, len(text) // 4) + (12 if chat else 0)  # the chat template's tokens
        events: asyncio.Queue[tuple[str, int | tuple[SlotRun, str]]] = asyncio.Queue()
        stream = bool(payload.get("stream"))
        sim = LlamaRequest(
            prompt_tokens,
            n_predict,
            n_predict if n_predict > 0 else 64,
            stream=stream,
            on_token=lambda n: events.put_nowait(("tokens", n)),
            on_finish=lambda run, reason: events.put_nowait(("finish", (run, reason))),
        )
        self.engine.submit(sim)
        answer = _Answer(self.card.alias, int(time.time()), chat, f"chatcmpl-demo{self.engine.next_task:026d}")
        if stream:
            return Response(
                content_type="text/event-stream", stream=answer.stream(events), headers=dict(SERVER_HEADERS)
            )
        generated = 0
        while True:
            kind, value = await events.get()
            if kind == "tokens":
                assert isinstance(value, int)
                generated += value
                continue
            assert isinstance(value, tuple)
            run, reason = value
            return _json_response(json.dumps(answer.whole(run, reason, generated), separators=(",", ":")).encode())


@dataclass(frozen=True, slots=True)
class _Answer:
    """A completion as llama-server's OpenAI routes write it (shapes of a live 11434.0.0 server)."""

    model: str
    created: int
    chat: bool
    id: str

    def _head(self) -> dict[str, object]:
        return {"created": self.created, "model": self.model, "system_fingerprint": BUILD_INFO}

    def whole(self, run: SlotRun, reason: str, generated: int) -> dict[str, object]:
        text = _words(generated)
        if self.chat:
            choice: dict[str, object] = {
                "finish_reason": reason,
                "index": 0,
                "message": {"role": "assistant", "content": text},
            }
        else:
            choice = {"text": text, "index": 0, "logprobs": None, "finish_reason": reason}
        return {
            "choices": [choice],
            **self._head(),
            "object": "chat.completion" if self.chat else "text_completion",
            "usage": _usage(run),
            "id": self.id,
            "timings": _timings(run),
        }

    def _chunk(self, choice: dict[str, object], **extra: object) -> bytes:
        obj = "chat.completion.chunk" if self.chat else "text_completion"
        if self.chat:
            body = {"choices": [choice], **self._head(), "id": self.id, "object": obj, **extra}
        else:
            body = {"choices": [choice], **self._head(), "object": obj, **extra, "id": self.id}
        return f"data: {json.dumps(body, separators=(',', ':'))}\n\n".encode()

    async def stream(self, events: asyncio.Queue[tuple[str, int | tuple[SlotRun, str]]]) -> AsyncIterator[bytes]:
        if self.chat:
            yield self._chunk({"finish_reason": None, "index": 0, "delta": {"role": "assistant", "content": None}})
        while True:
            kind, value = await events.get()
            if kind == "tokens":
                assert isinstance(value, int)
                if self.chat:
                    yield self._chunk({"finish_reason": None, "index": 0, "delta": {"content": _words(value)}})
                else:
                    yield self._chunk({"text": _words(value), "index": 0, "logprobs": None, "finish_reason": None})
                continue
            assert isinstance(value, tuple)
            run, reason = value
            if self.chat:
                yield self._chunk({"finish_reason": reason, "index": 0, "delta": {}}, timings=_timings(run))
            else:
                last = {"text": "", "index": 0, "logprobs": None, "finish_reason": reason}
                yield self._chunk(last, usage=_usage(run), timings=_timings(run))
            yield b"data: [DONE]\n\n"
            return


def _usage(run: SlotRun) -> dict[str, object]:
    return {
        "completion_tokens": run.decoded,
        "prompt_tokens": run.prompt_tokens,
        "total_tokens": run.prompt_tokens + run.decoded,
        "prompt_tokens_details": {"cached_tokens": run.cached_tokens},
    }


def _timings(run: SlotRun) -> dict[str, float]:
    prompt_ms, predicted_ms = run.prompt_s * 1000, run.generation_s * 1000
    computed = run.prompt_computed
    return {
        "cache_n": run.cached_tokens,
        "prompt_n": computed,
        "prompt_ms": prompt_ms,
        "prompt_per_token_ms": prompt_ms / computed if computed else 0.0,
        "prompt_per_second": 1000 * computed / prompt_ms if prompt_ms else 0.0,
        "predicted_n": run.decoded,
        "predicted_ms": predicted_ms,
        "predicted_per_token_ms": predicted_ms / run.decoded if run.decoded else 0.0,
        "predicted_per_second": 1000 * run.decoded / predicted_ms if predicted_ms else 0.0,
    }


def _json_response(body: bytes, status: int = 200) -> Response:
    return Response(status=status, body=body, content_type=JSON_CONTENT_TYPE, headers=dict(SERVER_HEADERS))


def _words(tokens: int) -> str:
    """Stand-in text: one word per token, each with its leading space (as tokenizers emit them)."""
    return " spark" * max(0, tokens)


def _task(slot: SlotState) -> int:
    return slot.run.task if slot.run is not None else 0


def _lognormal(rng: random.Random, median: float, sigma: float, low: int, high: int) -> int:
    return int(min(high, max(low, rng.lognormvariate(math.log(median), sigma))))
