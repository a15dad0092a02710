"""What ``sparktui init`` asks each port over HTTP, and what the answers say is there.

An Ollama (``/api/version`` gives ``{"version": ...}`` and ``/api/tags`` ``{"models": [...]}``), a NIM for
LLMs (``/v1/version`` gives ``{"release": ...}``, or ``/v1/health/ready`` answers 200 or 503 where
``/version`` gives no vLLM's version), a TensorRT-LLM ``trtllm-serve`` (``trtllm_`` names on
``/prometheus/metrics``, or ``owned_by: "tensorrt_llm"`` on ``/v1/models``), an SGLang (``/server_info``
with its server arguments, ``sglang:`` names on ``/metrics``, or ``owned_by: "sglang"`` on
``/v1/models``), a vLLM (``/version`` gives ``{"version": ...}``), a llama.cpp llama-server (``/props``
with its ``build_info``; a router's says ``"role": "router"``), a GPU exporter or node_exporter
(``/metrics``, kind by metric names), a side service (``/health``), or nothing sparktui knows.

They are told apart in that order. The two paths together are Ollama's own (it answers ``/v1/models``
too); many a web app has an ``/api/version``, and an SGLang an Ollama-compatible ``/api/tags``, so a
``/api/tags`` alone is read as Ollama's only after every engine's paths (as it was when an Ollama was a
side service). A NIM runs a vLLM (or a TensorRT-LLM) inside and its ``/v1/version`` is its own; a
trtllm-serve answers ``/version`` with ``{"version": ...}`` as a vLLM does, so the metrics' prefix and
``owned_by`` decide, before ``/version`` is read as a vLLM's; an SGLang answers ``/v1/models`` too, and a
vLLM or an SGLang serving a Llama model is not a llama-server.

The paths are asked in three rounds: ``FIRST_PATHS``, then ``METRICS_PATH`` (``/metrics``) only where
something answered and no trtllm-serve did (its ``/metrics`` is a JSON list of iteration stats, and
reading it drains the queue its own Prometheus gauges are fed from), then ``HEALTH_PATH``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sparktui.engines.llamacpp import router as llamacpp_router
from sparktui.engines.llamacpp.scrape import read_props
from sparktui.engines.nim import INFO_PATH as NIM_INFO_PATH
from sparktui.engines.nim import READING as NIM_READING
from sparktui.engines.nim import READY_PATH as NIM_READY_PATH
from sparktui.engines.ollama import INFO_PATH as OLLAMA_INFO_PATH
from sparktui.engines.ollama import READING as OLLAMA_READING
from sparktui.engines.ollama.command import DEFAULT_PORT as OLLAMA_DEFAULT_PORT
from sparktui.engines.sglang.info import ServerInfo, read_server_info
from sparktui.engines.sglang.scrape import PREFIX as SGLANG_PREFIX
from sparktui.engines.trtllm import INFO_PATH as TRTLLM_INFO_PATH
from sparktui.engines.trtllm import METRICS_PATH as TRTLLM_METRICS_PATH
from sparktui.engines.trtllm import READING as TRTLLM_READING
from sparktui.engines.vllm import READING as VLLM_READING
from sparktui.model import safe_json
from sparktui.model.exporters import ExporterKind, detect
from sparktui.model.numbers import is_digits
from sparktui.model.observations import HttpResult
from sparktui.model.promtext import ParseError, parse
from sparktui.model.safe_text import LABEL_LIMIT, safe_text
from sparktui.model.scrape import MAX_MODELS
from sparktui.model.specs import check_host

# --- what is probed -----------------------------------------------------------------------------------

DEFAULT_VLLM_PORTS: tuple[int, ...] = (8000, 8001)
DEFAULT_LLAMACPP_PORTS: tuple[int, ...] = (8080,)  # llama-server's own default for --port
DEFAULT_SGLANG_PORTS: tuple[int, ...] = (30000,)  # SGLang's own default for --port
DEFAULT_TRTLLM_PORTS: tuple[int, ...] = (8355, 8356)  # the DGX Spark playbook's trtllm-serve ports
DEFAULT_NIM_PORTS: tuple[int, ...] = (8000,)  # NIM's NIM_SERVER_PORT default (vLLM's too: told apart by /v1/version)
DEFAULT_OLLAMA_PORTS: tuple[int, ...] = (OLLAMA_DEFAULT_PORT,)  # 11434, Ollama's own default (OLLAMA_HOST)
DEFAULT_EXPORTER_PORTS: tuple[int, ...] = (9835, 9400, 9100)  # DGX Spark / nvidia_gpu, DCGM, node_exporter
DEFAULT_SERVICE_PORTS: tuple[tuple[str, int], ...] = (("asr", 8765), ("tts", 8882))
# "ollama" stays a kind of --service-ports (it was one): its port is probed, and an Ollama that answers is
# written as an engine.
SERVICE_KINDS = ("asr", "tts", "ollama", "http")
OLLAMA_TAGS_PATH = "/api/tags"
# Every port is asked these first; what answers tells what it is (the port only says what was expected).
FIRST_PATHS: tuple[str, ...] = (
    "/version",
    "/v1/models",
    TRTLLM_METRICS_PATH,
    NIM_INFO_PATH,
    NIM_READY_PATH,
    "/server_info",
    OLLAMA_INFO_PATH,
    OLLAMA_TAGS_PATH,
    "/props",
)
TRTLLM_PREFIX = "trtllm_"
# Asked second, only where something answered and no trtllm-serve did (its /metrics drains its stats).
METRICS_PATH = "/metrics"
# Asked after the others, and never of an SGLang: its /health runs a one-token generation.
HEALTH_PATH = "/health"
# Every path a port may be asked, in the order of the three rounds.
PROBE_PATHS: tuple[str, ...] = (*FIRST_PATHS, METRICS_PATH, HEALTH_PATH)

# Roles: what a port was probed for ("any" is a port added with --ports, LISTENING one that ``ss``
# showed listening on the host).
LISTENING = "listening"
ROLE_LABELS: Mapping[str, str] = {
    "vllm": "vLLM",
    "llamacpp": "llama-server",
    "sglang": "SGLang",
    "trtllm": "TensorRT-LLM",
    "nim": "NIM",
    "exporter": "exporter",
    "asr": "ASR",
    "tts": "TTS",
    "ollama": "Ollama",
    "http": "HTTP service",
    "any": "extra port",
    LISTENING: "listening port",
}
_PRIMARY_PATH: Mapping[str, str] = {
    "vllm": "/version",
    "llamacpp": "/props",
    "sglang": "/server_info",
    "trtllm": TRTLLM_INFO_PATH,
    "nim": NIM_INFO_PATH,
    "exporter": "/metrics",
    "ollama": OLLAMA_INFO_PATH,
    "any": "/version",
    LISTENING: "/version",
}


def split_host_port(raw: str) -> tuple[str, int | None]:
    """``HOST``, ``HOST:PORT`` or ``[IPv6]:PORT`` -> (host, SSH port or None); a bare IPv6 address has no
    port. Raises ValueError with the reason."""
    if raw.startswith("[") and "]:" in raw:
        host, _, port = raw[1:].partition("]:")
    elif raw.count(":") == 1:
        host, _, port = raw.partition(":")
    else:
        return check_host(raw), None
    if not is_digits(port) or not 1 <= int(port) <= 65535:
        raise ValueError(f"the SSH port after the host must be 1 to 65535 (got {port[:20]!r})")
    return check_host(host), int(port)


def parse_port_list(text: str) -> tuple[int, ...]:
    """``"8000,8001"`` → ``(8000, 8001)``; raises ValueError with a sentence for anything else."""
    ports: list[int] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        if not is_digits(item) or not 1 <= int(item) <= 65535:
            raise ValueError(f"{item!r} is not a port (a whole number from 1 to 65535)")
        if int(item) not in ports:
            ports.append(int(item))
    return tuple(ports)


def parse_service_ports(text: str) -> tuple[tuple[str, int], ...]:
    """``"asr=8765,tts=8882"`` → ``(("asr", 8765), ("tts", 8882))``; kinds are asr, tts, ollama, http."""
    services: list[tuple[str, int]] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        kind, eq, port = item.partition("=")
        if not eq or kind.strip() not in SERVICE_KINDS:
            raise ValueError(f"{item!r} is not KIND=PORT with KIND one of {', '.join(SERVICE_KINDS)}")
        ports = parse_port_list(port)
        if len(ports) != 1:
            raise ValueError(f"{item!r} is not KIND=PORT (one port per kind; repeat the kind for more)")
        services.append((kind.strip(), ports[0]))
    return tuple(services)


def port_roles(
    vllm: Sequence[int],
    services: Sequence[tuple[str, int]],
    exporters: Sequence[int],
    extra: Sequence[int] = (),
    *,
    llamacpp: Sequence[int] = (),
    sglang: Sequence[int] = (),
    trtllm: Sequence[int] = (),
    nim: Sequence[int] = (),
    ollama: Sequence[int] = (),
) -> tuple[tuple[int, str], ...]:
    """Each port to probe once, with what it is probed for (the first mention wins: 8000 is vLLM's and
    NIM's default, and stays a vLLM's port; what answers decides)."""
    roles: dict[int, str] = {}
    engines = (
        ("vllm", vllm),
        ("llamacpp", llamacpp),
        ("sglang", sglang),
        ("trtllm", trtllm),
        ("nim", nim),
        ("ollama", ollama),
    )
    for role, ports in engines:
        for port in ports:
            roles.setdefault(port, role)
    for kind, port in services:
        roles.setdefault(port, kind)
    for port in exporters:
        roles.setdefault(port, "exporter")
    for port in extra:
        roles.setdefault(port, "any")
    return tuple(roles.items())


# --- HTTP probe answers -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class VllmAnswer:
    port: int
    version: str
    models: tuple[str, ...]
    needs_api_key: bool


@dataclass(frozen=True, slots=True)
class LlamaAnswer:
    """A llama.cpp llama-server: what its ``/props`` says (remote text made safe)."""

    port: int
    build: str  # build_info
    router: bool  # --models-dir: "role": "router" (no model of its own)
    model_path: str | None  # the GGUF it loaded (-m); None for a router
    alias: str | None  # --alias: what /v1/models calls the model, when it is not the path
    total_slots: int | None
    n_ctx: int | None
    models: tuple[str, ...]  # what /v1/models lists (a router's: every GGUF of its folder)
    metrics: bool  # /metrics answered (llama-server serves it only when started with --metrics)


@dataclass(frozen=True, slots=True)
class SglangAnswer:
    """An SGLang server: what its ``/server_info`` says (when it answered), and how it was recognised."""

    port: int
    recognised_by: str  # the first of /server_info, /metrics, /v1/models that said it is SGLang
    info: ServerInfo | None  # /server_info; None when it did not answer (401 with --api-key...)
    models: tuple[str, ...]  # what /v1/models lists
    metrics: bool  # /metrics answered with sglang: names (served only with --enable-metrics)
    needs_api_key: bool  # /server_info answered 401 or 403: started with --api-key

    @property
    def version(self) -> str:
        return self.info.version if self.info is not None else "unknown"


@dataclass(frozen=True, slots=True)
class TrtllmAnswer:
    """A TensorRT-LLM ``trtllm-serve``: its ``/version`` and ``/v1/models``, and whether its
    ``/prometheus/metrics`` has ``trtllm_`` names (served only with ``return_perf_metrics``)."""

    port: int
    recognised_by: str  # /prometheus/metrics or /v1/models
    version: str
    models: tuple[str, ...]
    metrics: bool


@dataclass(frozen=True, slots=True)
class NimAnswer:
    """A NIM for LLMs: its ``/v1/version`` release, ``/v1/models``, and whether ``/v1/health/ready`` said
    the model is loaded (503 while it loads)."""

    port: int
    recognised_by: str  # /v1/version or /v1/health/ready
    release: str
    models: tuple[str, ...]
    ready: bool


@dataclass(frozen=True, slots=True)
class OllamaAnswer:
    """An Ollama: its ``/api/version`` and the models on its disk (``/api/tags``; remote text made safe)."""

    port: int
    recognised_by: str  # /api/version (with /api/tags), or /api/tags alone
    version: str
    models: tuple[str, ...]  # the names /api/tags lists, at most MAX_MODELS
    model_count: int  # how many /api/tags lists (more than ``models`` holds when it lists more than MAX_MODELS)


@dataclass(frozen=True, slots=True)
class ExporterAnswer:
    port: int
    kind: ExporterKind


@dataclass(frozen=True, slots=True)
class ServiceAnswer:
    port: int
    kind: str  # asr, tts, http (an Ollama is an OllamaAnswer)
    path: str
    status: int
    elapsed_s: float


@dataclass(frozen=True, slots=True)
class NoAnswer:
    """Nothing sparktui knows answered on the port; ``reason`` says what happened instead."""

    port: int
    role: str
    reason: str


PortFinding = (
    OllamaAnswer
    | NimAnswer
    | TrtllmAnswer
    | SglangAnswer
    | VllmAnswer
    | LlamaAnswer
    | ExporterAnswer
    | ServiceAnswer
    | NoAnswer
)


def _json(result: HttpResult | None) -> object:
    if result is None or not result.ok:
        return None
    try:
        return json.loads(result.body)
    except (ValueError, RecursionError):  # RecursionError: arrays nested thousands deep
        return None


def vllm_version(result: HttpResult | None) -> str | None:
    """The version a vLLM's ``/version`` gives (``{"version": ...}``), read as its engine reads it; made
    safe there (init writes it into the config's comments, where a newline could add a key)."""
    return VLLM_READING.version(_json(result)) or None


def model_ids(result: HttpResult | None) -> tuple[str, ...]:
    data = _json(result)
    cards = data.get("data") if isinstance(data, dict) else None
    if not isinstance(cards, list):
        return ()
    return tuple(safe_text(str(card["id"]), LABEL_LIMIT) for card in cards if isinstance(card, dict) and card.get("id"))


def exporter_kind(result: HttpResult | None) -> ExporterKind | None:
    """The exporter that served a /metrics page, or None (no page, not Prometheus text, unknown)."""
    if result is None or not result.ok:
        return None
    try:
        kind = detect(parse(result.text()))
    except ParseError:
        return None
    return None if kind is ExporterKind.UNKNOWN else kind


def llama_answer(port: int, results: Mapping[str, HttpResult]) -> LlamaAnswer | None:
    """A llama-server, from its ``/props`` (and ``/v1/models``, ``/metrics``); None when ``/props`` is
    not one's."""
    props, metrics = results.get("/props"), results.get(METRICS_PATH)
    if props is None or not props.ok or not llamacpp_router.is_llama_server(props.body):
        return None
    found = safe_json.loads(props.body)
    read = read_props(props.body)
    assert isinstance(found, dict)  # is_llama_server said so
    is_router = llamacpp_router.is_router(props.body)

    def text(key: str) -> str | None:
        value = found.get(key)
        return safe_text(value, LABEL_LIMIT) or None if isinstance(value, str) else None

    path, alias = text("model_path"), text("model_alias")
    return LlamaAnswer(
        port=port,
        build=read.build or "unknown",
        router=is_router,
        model_path=None if is_router else path,
        alias=None if is_router or alias == path else alias,
        total_slots=read.total_slots,
        n_ctx=read.n_ctx,
        models=model_ids(results.get("/v1/models")),
        metrics=metrics is not None and metrics.ok,
    )


def _has_prefix(result: HttpResult | None, prefix: str) -> bool:
    """Whether a Prometheus page has names with an engine's prefix (``sglang:``, ``trtllm_``)."""
    if result is None or not result.ok:
        return False
    try:
        expo = parse(result.text(), keep=lambda name: name.startswith(prefix))
    except ParseError:
        return False
    return any(name.startswith(prefix) for name in (*expo.samples, *expo.types))


def _owned_by(result: HttpResult | None, owner: str) -> bool:
    data = _json(result)
    cards = data.get("data") if isinstance(data, dict) else None
    return isinstance(cards, list) and any(isinstance(c, dict) and c.get("owned_by") == owner for c in cards)


def ollama_answer(port: int, results: Mapping[str, HttpResult]) -> OllamaAnswer | None:
    """An Ollama, from its ``/api/tags`` (``{"models": [...]}``, each with a ``name``;
    docs.ollama.com/api/tags) with its ``/api/version`` (``{"version": ...}``; ``recognised_by`` says
    whether it answered); None without the list. A 200 alone is not enough: node_exporter answers every
    path with its landing page."""
    tags = _json(results.get(OLLAMA_TAGS_PATH))
    cards = tags.get("models") if isinstance(tags, dict) else None
    if not isinstance(cards, list):
        return None
    version = OLLAMA_READING.version(_json(results.get(OLLAMA_INFO_PATH)))
    by = OLLAMA_INFO_PATH if version else OLLAMA_TAGS_PATH
    names = [c["name"] for c in cards if isinstance(c, dict) and isinstance(c.get("name"), str) and c["name"]]
    return OllamaAnswer(
        port=port,
        recognised_by=by,
        version=version or "unknown",
        models=tuple(safe_text(name, LABEL_LIMIT) for name in names[:MAX_MODELS]),
        model_count=len(names),
    )


def nim_answer(port: int, results: Mapping[str, HttpResult]) -> NimAnswer | None:
    """A NIM, from its ``/v1/version`` (``{"release": ...}``), else its ``/v1/health/ready`` (200 with
    ``"object": "health.response"``, or 503 while its model loads) where ``/version`` is not a vLLM's;
    None otherwise. A 200 alone is not enough: node_exporter answers every path with its landing page."""
    release = NIM_READING.version(_json(results.get(NIM_INFO_PATH)))
    ready = results.get(NIM_READY_PATH)
    ready_status = ready.status if ready is not None and ready.answered else None
    ready_body = _json(ready)
    health_response = isinstance(ready_body, dict) and ready_body.get("object") == "health.response"
    if release:
        by = NIM_INFO_PATH
    elif (ready_status == 503 or health_response) and vllm_version(results.get("/version")) is None:
        by = NIM_READY_PATH
    else:
        return None
    return NimAnswer(
        port=port,
        recognised_by=by,
        release=release or "unknown",
        models=model_ids(results.get("/v1/models")),
        ready=ready_status == 200,
    )


def trtllm_answer(port: int, results: Mapping[str, HttpResult]) -> TrtllmAnswer | None:
    """A trtllm-serve, from the ``trtllm_`` names of its ``/prometheus/metrics`` or ``owned_by:
    "tensorrt_llm"`` on its ``/v1/models``; None when neither says so."""
    models = results.get("/v1/models")
    metrics = _has_prefix(results.get(TRTLLM_METRICS_PATH), TRTLLM_PREFIX)
    by = TRTLLM_METRICS_PATH if metrics else "/v1/models" if _owned_by(models, "tensorrt_llm") else None
    if by is None:
        return None
    return TrtllmAnswer(
        port=port,
        recognised_by=by,
        version=TRTLLM_READING.version(_json(results.get(TRTLLM_INFO_PATH))) or "unknown",
        models=model_ids(models),
        metrics=metrics,
    )


def sglang_answer(port: int, results: Mapping[str, HttpResult]) -> SglangAnswer | None:
    """An SGLang, from its ``/server_info``, its ``/metrics`` or its ``/v1/models``; None when none of
    them is SGLang's."""
    server_info, models = results.get("/server_info"), results.get("/v1/models")
    info = read_server_info(server_info.body) if server_info is not None and server_info.ok else None
    metrics = _has_prefix(results.get(METRICS_PATH), SGLANG_PREFIX)
    by = "/server_info" if info else "/metrics" if metrics else "/v1/models" if _owned_by(models, "sglang") else None
    if by is None:
        return None
    return SglangAnswer(
        port=port,
        recognised_by=by,
        info=info,
        models=model_ids(models),
        metrics=metrics,
        needs_api_key=server_info is not None and server_info.answered and server_info.status in (401, 403),
    )


def wants_metrics(results: Mapping[str, HttpResult]) -> bool:
    """Whether ``METRICS_PATH`` is asked of a port, given the answers to ``PROBE_PATHS``: not where none
    of them got an answer (a closed or silent port), nor of a trtllm-serve (its ``/metrics`` hands out
    iteration stats once: reading them takes them from its own Prometheus gauges)."""
    return any(result.answered for result in results.values()) and trtllm_answer(0, results) is None


def wants_health(results: Mapping[str, HttpResult]) -> bool:
    """Whether ``HEALTH_PATH`` is asked of a port, given the answers to the other paths: not where none
    of them got an answer (a closed or silent port: no second wait), nor of an SGLang, whose ``/health``
    runs a generation."""
    return any(result.answered for result in results.values()) and sglang_answer(0, results) is None


def classify_port(port: int, role: str, results: Mapping[str, HttpResult]) -> PortFinding:
    """What answers on a port, from the answers to ``PROBE_PATHS`` (the role only names the kind of
    a ``/health`` service and the reason shown when nothing answered)."""
    ollama = ollama_answer(port, results)
    if ollama is not None and ollama.recognised_by == OLLAMA_INFO_PATH:
        return ollama
    nim = nim_answer(port, results)
    if nim is not None:
        return nim
    trtllm = trtllm_answer(port, results)
    if trtllm is not None:
        return trtllm
    sglang = sglang_answer(port, results)
    if sglang is not None:
        return sglang
    version = vllm_version(results.get("/version"))
    if version is not None:
        models = results.get("/v1/models")
        needs_key = models is not None and models.answered and models.status in (401, 403)
        return VllmAnswer(port=port, version=version, models=model_ids(models), needs_api_key=needs_key)
    llama = llama_answer(port, results)
    if llama is not None:
        return llama
    kind = exporter_kind(results.get(METRICS_PATH))
    if kind is not None:
        return ExporterAnswer(port=port, kind=kind)
    if ollama is not None:  # /api/tags without /api/version: no engine's paths answered, so Ollama's list
        return ollama
    health = results.get("/health")
    if (
        role in ("asr", "tts", "http", "any", "ollama", LISTENING)
        and health is not None
        and health.answered
        and health.status is not None
        and health.status not in (404, 405)
    ):
        service_kind = role if role in ("asr", "tts") else "http"
        return ServiceAnswer(port, service_kind, "/health", health.status, health.elapsed_s)
    # /health is not asked where nothing else answered: then any path says why.
    primary = results.get(_PRIMARY_PATH.get(role, HEALTH_PATH)) or next(iter(results.values()), None)
    if not any(r.answered for r in results.values()):
        reason = primary.problem() if primary is not None else "not probed"
        return NoAnswer(port, role, reason)
    if model_ids(results.get("/v1/models")):
        return NoAnswer(
            port,
            role,
            "an OpenAI-compatible server without /version, /props, /server_info, /v1/version or /api/version "
            "(not vLLM, llama-server, SGLang, TensorRT-LLM, NIM or Ollama); add it by hand",
        )
    if role == "exporter" and results.get(METRICS_PATH) is not None and results[METRICS_PATH].ok:
        return NoAnswer(port, role, "/metrics is not a GPU exporter or node_exporter sparktui knows")
    if role == "llamacpp" and health is not None and health.ok:
        return NoAnswer(port, role, "answers /health but not /props: not a llama-server sparktui can read")
    if role == "sglang" and results.get("/v1/models") is not None and results["/v1/models"].status in (401, 403):
        return NoAnswer(port, role, "/v1/models wants an API key and /metrics has no sglang: names; add it by hand")
    if role == "vllm" and health is not None and health.ok:
        return NoAnswer(port, role, "answers /health but not /version: not a vLLM sparktui can read")
    shown = primary if primary is not None and primary.answered else None
    status = f" (HTTP {shown.status} on {_PRIMARY_PATH.get(role, '/health')})" if shown else ""
    return NoAnswer(
        port,
        role,
        f"something answered{status}, but not a vLLM, llama-server, SGLang, TensorRT-LLM, NIM, Ollama, exporter "
        "or service sparktui knows",
    )
