"""``sparktui bench``, the I/O: streamed completions timed on the client, ``/metrics`` around each case.

What a case is and what its numbers mean is the model's (``sparktui.model.bench``). Here:

- each request is one streamed ``POST /v1/completions`` (``stream_options.include_usage``, so the count
  of generated tokens is the server's own, not a count of chunks); the chunk times give TTFT and the
  decode rate;
- a case sends its prompts through a limiter of ``concurrency`` slots;
- ``/metrics`` is scraped just before a case's first request and just after its last answer;
- a warmup (one short request, not counted) goes first, so the first case does not pay for a cold
  engine (CUDA graphs, JIT); its prompt's token count sizes the cases' prompts (``run_job``);
- every finished case is appended to the caller's ``BenchProgress.finished`` at once, so a run that is
  cancelled (Ctrl-C) keeps what it measured.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from sparktui import installed_version
from sparktui.engines.vllm.scrape import normalise
from sparktui.model import promtext
from sparktui.model.bench import (
    DEFAULT_CONCURRENCY,
    DEFAULT_REQUESTS,
    SEED,
    BenchCase,
    BenchProgress,
    BenchRun,
    CaseResult,
    RequestResult,
    build_cases,
    calibration_prompt,
    case_result,
    node_state,
    server_stats,
    tokens_per_word,
)
from sparktui.model.safe_text import LABEL_LIMIT, safe_text
from sparktui.model.scrape import EngineScrape
from sparktui.model.specs import FleetSpec, ServerSpec, meant_instances
from sparktui.model.units import to_jsonable
from sparktui.sources._httpx import httpx
from sparktui.sources.canary import auth_headers
from sparktui.sources.http import fetch, make_client

METRICS_CAP = 16 * 1024 * 1024
INFO_CAP = 1024 * 1024
LINE_CAP = 1024 * 1024  # one SSE line: a chunk of a few tokens is a few hundred bytes
INFO_TIMEOUT_S = 10.0
WARMUP_MAX_TOKENS = 8


@dataclass(frozen=True, slots=True)
class BenchTarget:
    """The instance a bench runs against: its base URL, its API key's headers, the model to ask for."""

    url: str
    headers: dict[str, str]
    model: str | None
    request_timeout_s: float = 600.0


def completion_payload(prompt: str, max_tokens: int, model: str | None) -> dict[str, object]:
    """A streamed completion of exactly ``max_tokens`` (``ignore_eos``: the answer's length is the
    case's, not the model's), greedy, with the server's token count in the last chunk."""
    payload: dict[str, object] = {
        "prompt": prompt,
        "max_tokens": max_tokens,
        "temperature": 0,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if model is not None:
        payload["model"] = model
    return payload


def _line_error(text: str) -> str:
    return safe_text(text.strip().splitlines()[0] if text.strip() else "empty answer", LABEL_LIMIT)


async def stream_completion(
    client: httpx.AsyncClient, target: BenchTarget, prompt: str, max_tokens: int, origin: float
) -> RequestResult:
    """One streamed completion, its times in seconds since ``origin`` (``time.monotonic``). Never raises
    (but for cancellation): a failure is a result with its ``error``."""
    sent = time.monotonic() - origin
    chunks: list[float] = []
    completion: int | None = None
    prompt_tokens: int | None = None

    def failed(error: str) -> RequestResult:
        return RequestResult(sent, time.monotonic() - origin, tuple(chunks), completion, prompt_tokens, error)

    payload = completion_payload(prompt, max_tokens, target.model)
    try:
        async with asyncio.timeout(target.request_timeout_s):
            async with client.stream(
                "POST",
                f"{target.url}/v1/completions",
                json=payload,
                headers=target.headers,
                timeout=httpx.Timeout(30.0),
            ) as response:
                if response.status_code != 200:
                    body = await response.aread()
                    return failed(f"HTTP {response.status_code}: {_line_error(body[:2000].decode(errors='replace'))}")
                async for line in response.aiter_lines():
                    if len(line) > LINE_CAP:
                        return failed("a streamed line is over the 1 MiB cap")
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        break
                    try:
                        chunk = json.loads(data)
                    except ValueError:
                        return failed("a streamed chunk is not JSON")
                    if not isinstance(chunk, dict):
                        continue
                    if "error" in chunk:
                        return failed(f"the server stopped the stream: {_line_error(json.dumps(chunk['error']))}")
                    choices = chunk.get("choices")
                    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
                        text = choices[0].get("text")
                        if isinstance(text, str) and text:
                            chunks.append(time.monotonic() - origin)
                    usage = chunk.get("usage")
                    if isinstance(usage, dict):
                        tokens, prompt_count = usage.get("completion_tokens"), usage.get("prompt_tokens")
                        completion = tokens if isinstance(tokens, int) else completion
                        prompt_tokens = prompt_count if isinstance(prompt_count, int) else prompt_tokens
    except TimeoutError:
        return failed(f"no complete answer within {target.request_timeout_s:g} s")
    except httpx.HTTPError as exc:
        return failed(safe_text(f"{type(exc).__name__}: {exc}", LABEL_LIMIT))
    done = time.monotonic() - origin
    if not chunks:
        return RequestResult(sent, done, (), completion, prompt_tokens, "the stream carried no text")
    return RequestResult(sent, done, tuple(chunks), completion, prompt_tokens)


async def scrape(client: httpx.AsyncClient, target: BenchTarget) -> EngineScrape | None:
    """The instance's ``/metrics``, normalised; None when it cannot be read or parsed."""
    result = await fetch(
        client, f"{target.url}/metrics", timeout_s=INFO_TIMEOUT_S, max_bytes=METRICS_CAP, headers=target.headers
    )
    if not result.ok:
        return None
    try:
        return normalise(promtext.parse(promtext.decode(result.body)))
    except ValueError:
        return None


async def get_json(client: httpx.AsyncClient, target: BenchTarget, path: str) -> tuple[object, str | None]:
    """``path``'s JSON answer (None when there is none) and why there is none, in a few words."""
    result = await fetch(
        client, f"{target.url}{path}", timeout_s=INFO_TIMEOUT_S, max_bytes=INFO_CAP, headers=target.headers
    )
    if not result.ok:
        return None, result.problem()
    try:
        return json.loads(result.body), None
    except ValueError:
        return None, "the answer is not JSON"


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """What the instance says of itself before a run: ``/version``, ``/v1/models``' first card."""

    version: str | None
    model: str | None
    max_model_len: int | None
    card: dict[str, object]
    problem: str | None = None  # why the instance cannot be benchmarked (None: it can)


async def server_info(client: httpx.AsyncClient, target: BenchTarget) -> ServerInfo:
    version_doc, _ = await get_json(client, target, "/version")
    version = version_doc.get("version") if isinstance(version_doc, dict) else None
    models, why = await get_json(client, target, "/v1/models")
    cards = models.get("data") if isinstance(models, dict) else None
    if not isinstance(cards, list) or not cards or not isinstance(cards[0], dict):
        why = why or "the answer lists no model"
        problem = f"{target.url}/v1/models gave no model ({why}): is vLLM up there, and its API key configured?"
        return ServerInfo(None, None, None, {}, problem)
    card: dict[str, object] = {
        k: v for k, v in cards[0].items() if isinstance(v, (str, int, float, bool)) or v is None
    }  # the scalar fields: id, root, max_model_len, owned_by
    model = card.get("id")
    length = card.get("max_model_len")
    return ServerInfo(
        version=safe_text(version, LABEL_LIMIT) if isinstance(version, str) else None,
        model=safe_text(model, LABEL_LIMIT) if isinstance(model, str) else None,
        max_model_len=length if isinstance(length, int) and not isinstance(length, bool) else None,
        card=card,
    )


async def run_case(
    client: httpx.AsyncClient,
    target: BenchTarget,
    case: BenchCase,
    on_request: Callable[[RequestResult], None] | None = None,
) -> CaseResult:
    """Send the case's prompts, ``case.concurrency`` at a time, between two scrapes of ``/metrics``."""
    origin = time.monotonic()
    before = await scrape(client, target)
    before_t = time.monotonic() - origin
    slots = asyncio.Semaphore(case.concurrency)

    async def one(prompt: str) -> RequestResult:
        async with slots:
            result = await stream_completion(client, target, prompt, case.max_tokens, origin)
        if on_request is not None:
            on_request(result)
        return result

    results = await asyncio.gather(*(one(p) for p in case.prompts))
    after_t = time.monotonic() - origin
    after = await scrape(client, target)
    server = None
    if before is not None and after is not None:
        server = server_stats(before, before_t, after, after_t, target.model)
    return case_result(case, results, server)


async def warm_up(client: httpx.AsyncClient, target: BenchTarget) -> RequestResult:
    """One short request, not counted: the engine's first request after a start pays for its JIT. Its
    prompt is the calibration text: its ``prompt_tokens`` give the tokenizer's tokens per word."""
    return await stream_completion(client, target, calibration_prompt(), WARMUP_MAX_TOKENS, time.monotonic())


async def run_cases(
    client: httpx.AsyncClient,
    target: BenchTarget,
    cases: Sequence[BenchCase],
    progress: BenchProgress,
    on_change: Callable[[BenchProgress], None] | None = None,
) -> None:
    """Each case in turn; each finished case goes into ``progress.finished`` at once (cancel this and
    the finished ones are kept)."""

    def changed() -> None:
        if on_change is not None:
            on_change(progress)

    progress.total_cases = len(cases)
    for number, case in enumerate(cases, 1):
        progress.case, progress.case_number = case.label, number
        changed()

        def request_done(_result: RequestResult) -> None:
            progress.done_requests += 1
            changed()

        result = await run_case(client, target, case, request_done)
        progress.finished.append(result)
        progress.cases_done += 1
        changed()
    progress.case = None
    changed()


class BenchError(Exception):
    """A bench that cannot start: an unknown node or instance, or an instance that does not answer."""


def find_instance(fleet: FleetSpec, target: str) -> tuple[str, ServerSpec]:
    """``NODE`` or ``NODE/INSTANCE`` in the config: the node's name and the instance (its only one
    that serves HTTP when none is named). ``BenchError`` in one sentence otherwise."""
    node_name, _, instance = target.partition("/")
    node = fleet.node(node_name)
    if node is None:
        names = ", ".join(n.name for n in fleet.nodes) or "none"
        raise BenchError(f"no node {node_name!r} in the config (nodes: {names})")
    serving = [v for v in node.vllm if v.base_url is not None]
    if instance:
        found = next((v for v in serving if v.name == instance), None)
        if found is None:
            names = ", ".join(v.name for v in serving) or "none"
            raise BenchError(f"node {node_name} has no vLLM instance {instance!r} with a URL (instances: {names})")
        return node_name, found
    meant = meant_instances(serving)  # a llama.cpp fallback beside one vLLM: the vLLM
    if len(meant) != 1:
        names = ", ".join(v.name for v in meant) or "none"
        raise BenchError(
            f"node {node_name} serves {len(meant)} vLLM instances ({names}): name one as {node_name}/INSTANCE"
        )
    return node_name, meant[0]


@dataclass
class BenchJob:
    """One run in progress: filled as it goes, so a cancelled run still has what it measured."""

    target_name: str
    spec: ServerSpec
    case_names: tuple[str, ...]
    concurrency: tuple[int, ...] = DEFAULT_CONCURRENCY
    requests: int = DEFAULT_REQUESTS
    prefill_max: int | None = None
    started_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    run_tag: str = field(default_factory=lambda: secrets.token_hex(4))
    info: ServerInfo | None = None
    flags: dict[str, object] = field(default_factory=dict)
    state: dict[str, object] = field(default_factory=dict)
    cases: list[BenchCase] = field(default_factory=list)
    progress: BenchProgress = field(default_factory=lambda: BenchProgress(total_requests=0))
    tokens_per_word: float = 1.0  # the tokenizer's, on the filler text, from the warmup

    def result(self, *, complete: bool, problem: str | None = None) -> BenchRun:
        info = self.info
        return BenchRun(
            target=self.target_name,
            url=self.spec.base_url or "",
            started_at=self.started_at,
            model=info.model if info else None,
            version=info.version if info else None,
            max_model_len=info.max_model_len if info else None,
            flags=self.flags,
            node_state=self.state,
            settings={
                "seed": SEED,
                "cases": list(self.case_names),
                "concurrency": list(self.concurrency),
                "requests_per_case": self.requests,
                "prefill_max": self.prefill_max,
                "tokens_per_word": self.tokens_per_word,
                "run_tag": self.run_tag,
            },
            cases=tuple(self.progress.finished),
            complete=complete and len(self.progress.finished) == len(self.cases),
            problem=problem,
            sparktui_version=installed_version(),
        )


def instance_flags(spec: ServerSpec, info: ServerInfo, cache_config: dict[str, dict[str, str]]) -> dict[str, object]:
    """The flags a result is compared under: ``/v1/models``' card, the config's instance (no secret),
    and ``vllm:cache_config_info`` per engine (block size, prefix caching, memory share, KV dtype)."""
    config = spec.model_dump(mode="json", exclude={"api_key", "api_key_file", "api_key_env"})
    return {"v1_models": info.card, "config": config, "cache_config": cache_config}


async def run_job(
    job: BenchJob, on_change: Callable[[BenchProgress], None] | None = None, *, ca_file: Path | None = None
) -> None:
    """Ask the instance what it serves, build the cases, and run them into ``job.progress``."""
    target = BenchTarget(url=job.spec.base_url or "", headers=auth_headers(job.spec), model=None)
    async with make_client(ca_file=ca_file) as client:
        info = await server_info(client, target)
        if info.problem is not None:
            raise BenchError(info.problem)
        job.info = info
        target = BenchTarget(url=target.url, headers=target.headers, model=info.model)
        first = await scrape(client, target)
        cache = {engine: dict(c.labels) for engine, c in first.cache_config.items()} if first is not None else {}
        job.flags = instance_flags(job.spec, info, cache)
        job.state = node_state(first)
        job.progress.warming_up = True
        if on_change is not None:
            on_change(job.progress)
        warmup = await warm_up(client, target)  # not counted: it pays for a cold engine, and measures
        job.tokens_per_word = tokens_per_word(warmup.prompt_tokens)
        job.cases = build_cases(
            job.case_names,
            job.run_tag,
            max_model_len=info.max_model_len,
            concurrency=job.concurrency,
            requests=job.requests,
            prefill_max=job.prefill_max,
            tokens_per_word=job.tokens_per_word,
        )
        job.progress = BenchProgress(total_requests=sum(len(c.prompts) for c in job.cases))
        await run_cases(client, target, job.cases, job.progress, on_change)


def save(run: BenchRun, path: Path) -> None:
    """Write ``run`` as the result file (docs/bench.md)."""
    path.write_text(json.dumps(to_jsonable(run), indent=2) + "\n", encoding="utf-8")
