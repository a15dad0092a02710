"""A simulated ``llama-server``'s books and bodies, for the demo fleet (``sparktui.demo.llamaserver``).

Pure: the demo moves its requests through the slots and tells ``ServerBooks`` each event; the books
count as build 11434 counts (``tests/data/llamacpp-11434`` and a live 11434.0.0 server):

- a prompt's tokens, computed and cached, and its time are counted when the prompt ends
  (``prompt_done``), so a running request's prompt is in ``prompt_tokens_total`` at once;
- ``n_decode_total`` counts ``llama_decode()`` calls: one per batch, however many slots are in it. A
  prompt that fits one batch is one call, and each generated token after the first is one more
  (``decoded``);
- generated tokens and their time are counted only when the request ends (``request_done``);
- ``n_tokens_max`` is the longest sequence a slot held: its prompt and what it generated, the last
  token not yet decoded;
- ``prompt_tokens_seconds`` and ``predicted_tokens_seconds`` average what was counted since the
  previous read of ``/metrics``, and that read starts them again (``scraped``);
- ``n_busy_slots_per_decode``: the busy slots summed over the decode calls, over the calls.

The bodies are written from that state with the real server's series names, HELP and TYPE lines, JSON
keys, key order and number formatting (``metrics_body``, ``props_body``, ``slots_body``,
``models_body``, ``health_body``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

# The build the saved bodies came from. That sdist reports "b0-unknown" (no git when it was built);
# a release build says "b<number>-<commit>", which the demo shows with no commit.
BUILD_INFO = "b11434-unknown"
METRICS_CONTENT_TYPE = "text/plain; version=0.0.4"
JSON_CONTENT_TYPE = "application/json; charset=utf-8"
HEALTH_OK = {"status": "ok"}
HEALTH_LOADING = {"error": {"message": "Loading model", "type": "unavailable_error", "code": 503}}

# /metrics as served, in its order: (name without the prefix, TYPE, HELP).
METRIC_FAMILIES: tuple[tuple[str, str, str], ...] = (
    ("prompt_tokens_total", "counter", "Number of prompt tokens processed, excluding cached tokens"),
    ("prompt_tokens_cached_total", "counter", "Number of prompt tokens reused from the cache"),
    ("prompt_seconds_total", "counter", "Total time spent processing prompts"),
    ("tokens_predicted_total", "counter", "Number of generation tokens processed"),
    ("tokens_predicted_seconds_total", "counter", "Total time spent generating tokens"),
    (
        "n_decode_total",
        "counter",
        "Total number of llama_decode() calls, excluding speculative decoding and multimodal decoding",
    ),
    ("n_tokens_max", "counter", "Largest observed sequence length (prompt + generation)"),
    ("spec_decode_num_draft_tokens_total", "counter", "Speculative: Total draft tokens generated"),
    (
        "spec_decode_num_accepted_tokens_total",
        "counter",
        "Speculative: Total draft tokens accepted by the target model",
    ),
    ("spec_decode_num_drafts_total", "counter", "Speculative: Total speculative decoding verification steps"),
    ("prompt_tokens_seconds", "gauge", "Average prompt throughput in tokens/s"),
    ("predicted_tokens_seconds", "gauge", "Average generation throughput in tokens/s"),
    ("requests_processing", "gauge", "Number of requests processing"),
    ("requests_deferred", "gauge", "Number of requests deferred"),
    ("n_busy_slots_per_decode", "gauge", "Average number of busy slots per llama_decode() call"),
)

# The sampling parameters as /props and /slots serve them (the server's defaults, in its key order).
DEFAULT_PARAMS: dict[str, object] = {
    "seed": 4294967295,
    "temperature": 0.800000011920929,
    "dynatemp_range": 0.0,
    "dynatemp_exponent": 1.0,
    "top_k": 40,
    "top_p": 0.949999988079071,
    "min_p": 0.05000000074505806,
    "top_n_sigma": -1.0,
    "xtc_probability": 0.0,
    "xtc_threshold": 0.10000000149011612,
    "typical_p": 1.0,
    "repeat_last_n": 64,
    "repeat_penalty": 1.0,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
    "dry_multiplier": 0.0,
    "dry_base": 1.75,
    "dry_allowed_length": 2,
    "dry_penalty_last_n": 64,
    "mirostat": 0,
    "mirostat_tau": 5.0,
    "mirostat_eta": 0.10000000149011612,
    "adaptive_target": -1.0,
    "adaptive_decay": 0.8999999761581421,
    "max_tokens": -1,
    "n_predict": -1,
    "n_keep": 0,
    "n_discard": 0,
    "ignore_eos": False,
    "stream": False,
    "n_probs": 0,
    "min_keep": 0,
    "chat_format": "Content-only",
    "reasoning_format": "none",
    "reasoning_in_content": False,
    "generation_prompt": "",
    "samplers": ["penalties", "dry", "top_n_sigma", "top_k", "typ_p", "top_p", "min_p", "xtc", "temperature"],
    "speculative.types": "none",
    "timings_per_token": False,
    "post_sampling_probs": False,
    "backend_sampling": False,
    "lora": [],
}
CHAT_TEMPLATE_CAPS: dict[str, bool] = {
    "supports_object_arguments": False,
    "supports_parallel_tool_calls": False,
    "supports_preserve_reasoning": False,
    "supports_reasoning_effort": False,
    "supports_string_content": True,
    "supports_system_role": True,
    "supports_tool_calls": False,
    "supports_tools": False,
    "supports_typed_content": False,
}


@dataclass(frozen=True, slots=True)
class ModelCard:
    """The GGUF a server loaded, as ``/props`` and ``/v1/models`` describe it."""

    alias: str  # --alias: the id /v1/models serves
    path: str  # -m
    ftype: str
    vocab_type: int  # 1 SentencePiece, 2 BPE
    n_vocab: int
    n_ctx_train: int
    n_embd: int
    n_params: int
    size: int  # bytes of its tensors
    bos_token: str
    eos_token: str
    chat_template: str
    media_marker: str


@dataclass(slots=True)
class SlotRun:
    """The request a slot processes: its prompt (``cached`` of it reused from the slot's cache), what it
    generated so far, and the time the server spent on each part."""

    task: int
    prompt_tokens: int
    cached_tokens: int
    n_predict: int
    stream: bool = False
    prompt_left: int = 0  # computed prompt tokens not yet in a batch
    decoded: int = 0  # next_token[0].n_decoded
    prompt_s: float = 0.0
    generation_s: float = 0.0

    @property
    def prompt_computed(self) -> int:
        return self.prompt_tokens - self.cached_tokens

    @property
    def sequence_tokens(self) -> int:
        """The tokens in the slot's cache: the prompt so far, then what was generated (the last one
        sampled is decoded with the next batch)."""
        if self.decoded == 0:
            return self.prompt_tokens - self.prompt_left
        return self.prompt_tokens + self.decoded - 1


@dataclass(slots=True)
class SlotState:
    """One slot of ``-np``: its share of the context, the request it runs, and the one it ran last
    (whose task and sequence ``/slots`` still shows; the next request may reuse that cache)."""

    id: int
    n_ctx: int
    run: SlotRun | None = None
    last: SlotRun | None = None

    @property
    def processing(self) -> bool:
        return self.run is not None


@dataclass(slots=True)
class ServerBooks:
    """The numbers ``/metrics`` serves; a restart is new books."""

    prompt_tokens_total: int = 0
    prompt_tokens_cached_total: int = 0
    prompt_seconds_total: float = 0.0
    tokens_predicted_total: int = 0
    tokens_predicted_seconds_total: float = 0.0
    n_decode_total: int = 0
    n_busy_slots_total: int = 0
    n_tokens_max: int = 0
    # Since the last read of /metrics (the averages it serves).
    bucket_prompt_tokens: int = 0
    bucket_prompt_s: float = 0.0
    bucket_predicted_tokens: int = 0
    bucket_predicted_s: float = 0.0

    def decoded(self, slots: list[SlotState]) -> None:
        """One ``llama_decode()`` call, with every slot that processes."""
        self.n_decode_total += 1
        for slot in slots:
            if slot.run is not None:
                self.n_busy_slots_total += 1
                self.n_tokens_max = max(self.n_tokens_max, slot.run.sequence_tokens)

    def prompt_done(self, run: SlotRun) -> None:
        """The request's prompt is in the cache: its first token is sampled now."""
        self.prompt_tokens_total += run.prompt_computed
        self.prompt_tokens_cached_total += run.cached_tokens
        self.prompt_seconds_total += run.prompt_s
        self.bucket_prompt_tokens += run.prompt_computed
        self.bucket_prompt_s += run.prompt_s
        self.n_tokens_max = max(self.n_tokens_max, run.sequence_tokens)

    def request_done(self, run: SlotRun) -> None:
        """The request ended: its generated tokens and their time are counted now, all at once."""
        self.tokens_predicted_total += run.decoded
        self.tokens_predicted_seconds_total += run.generation_s
        self.bucket_predicted_tokens += run.decoded
        self.bucket_predicted_s += run.generation_s

    def scraped(self) -> None:
        """``/metrics`` was read: its averages start again."""
        self.bucket_prompt_tokens = self.bucket_predicted_tokens = 0
        self.bucket_prompt_s = self.bucket_predicted_s = 0.0


@dataclass(slots=True)
class ServerState:
    """What one simulated llama-server is: its model, its slots and its books."""

    card: ModelCard
    slots: list[SlotState]
    books: ServerBooks = field(default_factory=ServerBooks)
    deferred: int = 0  # requests waiting for a slot
    loading: bool = False  # /health 503 while the model loads
    created: int = 0  # Unix time the model was loaded (/v1/models "created")

    @property
    def n_ctx(self) -> int:
        """One slot's context (``-c`` over ``-np``)."""
        return self.slots[0].n_ctx if self.slots else 0

    @property
    def processing(self) -> int:
        return sum(1 for slot in self.slots if slot.processing)


def new_server(card: ModelCard, total_slots: int, n_ctx: int, created: int = 0) -> ServerState:
    """A server started with ``-c n_ctx -np total_slots``: each slot has ``n_ctx // total_slots``."""
    per_slot = n_ctx // total_slots
    return ServerState(card, [SlotState(index, per_slot) for index in range(total_slots)], created=created)


# --- the bodies ------------------------------------------------------------------------------------


def _number(value: float) -> str:
    """A value as llama-server writes it (a double through ``std::ostream``: six significant digits)."""
    return f"{value:g}"


def metrics_values(state: ServerState) -> dict[str, float]:
    """Each series' value (no prefix), as ``/metrics`` serves it now."""
    books = state.books
    prompt_rate = books.bucket_prompt_tokens / books.bucket_prompt_s if books.bucket_prompt_s > 0 else 0.0
    predicted_rate = books.bucket_predicted_tokens / books.bucket_predicted_s if books.bucket_predicted_s > 0 else 0.0
    busy = books.n_busy_slots_total / books.n_decode_total if books.n_decode_total else 0.0
    return {
        "prompt_tokens_total": books.prompt_tokens_total,
        "prompt_tokens_cached_total": books.prompt_tokens_cached_total,
        "prompt_seconds_total": books.prompt_seconds_total,
        "tokens_predicted_total": books.tokens_predicted_total,
        "tokens_predicted_seconds_total": books.tokens_predicted_seconds_total,
        "n_decode_total": books.n_decode_total,
        "n_tokens_max": books.n_tokens_max,
        "spec_decode_num_draft_tokens_total": 0,  # no draft model: served at 0
        "spec_decode_num_accepted_tokens_total": 0,
        "spec_decode_num_drafts_total": 0,
        "prompt_tokens_seconds": prompt_rate,
        "predicted_tokens_seconds": predicted_rate,
        "requests_processing": state.processing,
        "requests_deferred": state.deferred,
        "n_busy_slots_per_decode": busy,
    }


def metrics_body(state: ServerState) -> bytes:
    """``/metrics`` (with ``--metrics``). Reading it resets the averages: call ``books.scraped()``."""
    values = metrics_values(state)
    lines: list[str] = []
    for name, kind, help_text in METRIC_FAMILIES:
        lines += (
            f"# HELP llamacpp:{name} {help_text}",
            f"# TYPE llamacpp:{name} {kind}",
            f"llamacpp:{name} {_number(values[name])}",
        )
    return ("\n".join(lines) + "\n").encode()


def _json(payload: object) -> bytes:
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()


def health_body(state: ServerState) -> tuple[int, bytes]:
    """``/health``: 200 ``{"status":"ok"}``, or 503 while the model loads."""
    return (503, _json(HEALTH_LOADING)) if state.loading else (200, _json(HEALTH_OK))


def props_body(state: ServerState) -> bytes:
    """``/props``: the defaults, the slots, the model, the build and whether it sleeps."""
    card = state.card
    return _json(
        {
            "default_generation_settings": {"params": DEFAULT_PARAMS, "n_ctx": state.n_ctx},
            "total_slots": len(state.slots),
            "model_alias": card.alias,
            "model_ftype": card.ftype,
            "model_path": card.path,
            "modalities": {"vision": False, "video": False, "audio": False},
            "media_marker": card.media_marker,
            "endpoint_slots": True,
            "endpoint_props": False,
            "endpoint_metrics": True,
            "ui": True,
            "ui_settings": {},
            "chat_template": card.chat_template,
            "chat_template_caps": CHAT_TEMPLATE_CAPS,
            "bos_token": card.bos_token,
            "eos_token": card.eos_token,
            "build_info": BUILD_INFO,
            "is_sleeping": False,
            "cors_proxy_enabled": False,
        }
    )


def _request_params(run: SlotRun) -> dict[str, object]:
    """A request's parameters as its slot shows them (OpenAI routes parse reasoning as deepseek)."""
    return DEFAULT_PARAMS | {
        "max_tokens": run.n_predict,
        "n_predict": run.n_predict,
        "stream": run.stream,
        "reasoning_format": "deepseek",
    }


def _slot(slot: SlotState) -> dict[str, object]:
    out: dict[str, object] = {"id": slot.id, "n_ctx": slot.n_ctx, "speculative": False}
    out["is_processing"] = slot.processing
    run = slot.run or slot.last
    if run is None:  # a slot that never ran a request says no more
        return out
    live = slot.run is not None
    out |= {
        "id_task": run.task,
        "n_prompt_tokens": run.sequence_tokens,
        "n_prompt_tokens_processed": run.prompt_computed - run.prompt_left if live else 0,
        "n_prompt_tokens_cache": run.cached_tokens if live else 0,
        "params": _request_params(run),
        "next_token": [
            {
                "has_next_token": live,
                "has_new_line": False,
                "n_remain": run.n_predict - run.decoded if live and run.n_predict >= 0 else -1,
                "n_decoded": run.decoded if live else 0,
            }
        ],
    }
    return out


def slots_body(state: ServerState) -> bytes:
    """``/slots`` (on unless ``--no-slots``): one object per slot."""
    return _json([_slot(slot) for slot in state.slots])


def models_body(state: ServerState) -> bytes:
    """``/v1/models``: the Ollama-style list and the OpenAI one, one model in each."""
    card = state.card
    ollama = {
        "name": card.alias,
        "model": card.alias,
        "modified_at": "",
        "size": "",
        "digest": "",
        "type": "model",
        "description": "",
        "tags": [""],
        "capabilities": ["completion"],
        "parameters": "",
        "details": {
            "parent_model": "",
            "format": "gguf",
            "family": "",
            "families": [""],
            "parameter_size": "",
            "quantization_level": "",
        },
    }
    openai = {
        "id": card.alias,
        "aliases": [card.alias],
        "tags": [],
        "object": "model",
        "architecture": {"input_modalities": ["text"], "output_modalities": ["text"]},
        "created": state.created,
        "owned_by": "llamacpp",
        "meta": {
            "vocab_type": card.vocab_type,
            "n_vocab": card.n_vocab,
            "n_ctx": state.n_ctx,
            "n_ctx_train": card.n_ctx_train,
            "n_embd": card.n_embd,
            "n_params": card.n_params,
            "size": card.size,
            "ftype": card.ftype,
        },
    }
    return _json({"models": [ollama], "object": "list", "data": [openai]})
