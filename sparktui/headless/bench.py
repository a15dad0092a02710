"""``sparktui bench`` without a screen: find the instance in the config, ask it what it serves, run the
cases (``sparktui.sources.bench``) and turn what was measured into a ``BenchRun`` that is saved as JSON
and printed as the operators' table (``sparktui.model.bench``). ``docs/bench.md`` tells the workloads.

The command line draws the progress bar through ``on_change``; the node screen can do the same.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from sparktui import installed_version
from sparktui.model.bench import (
    DEFAULT_CONCURRENCY,
    DEFAULT_REQUESTS,
    SEED,
    BenchCase,
    BenchFileError,
    BenchProgress,
    BenchRun,
    build_cases,
    node_state,
    run_from_json,
    tokens_per_word,
)
from sparktui.model.specs import FleetSpec, VllmSpec
from sparktui.model.units import to_jsonable
from sparktui.sources.bench import BenchTarget, ServerInfo, run_cases, scrape, server_info, warm_up
from sparktui.sources.canary import auth_headers
from sparktui.sources.http import make_client


class BenchError(Exception):
    """A bench that cannot start: an unknown node or instance, or an instance that does not answer."""


def find_instance(fleet: FleetSpec, target: str) -> tuple[str, VllmSpec]:
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
    if len(serving) != 1:
        names = ", ".join(v.name for v in serving) or "none"
        raise BenchError(
            f"node {node_name} serves {len(serving)} vLLM instances ({names}): name one as {node_name}/INSTANCE"
        )
    return node_name, serving[0]


@dataclass
class BenchJob:
    """One run in progress: filled as it goes, so a cancelled run still has what it measured."""

    target_name: str
    spec: VllmSpec
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


def instance_flags(spec: VllmSpec, info: ServerInfo, cache_config: dict[str, dict[str, str]]) -> dict[str, object]:
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


def run_bench(
    job: BenchJob, on_change: Callable[[BenchProgress], None] | None = None, *, ca_file: Path | None = None
) -> BenchRun:
    """Run ``job`` to its end, or until Ctrl-C: either way the run with every case that finished.
    ``BenchError`` when it cannot start."""
    try:
        asyncio.run(run_job(job, on_change, ca_file=ca_file))
    except KeyboardInterrupt:
        return job.result(complete=False, problem="stopped by Ctrl-C")
    return job.result(complete=True)


def save(run: BenchRun, path: Path) -> None:
    path.write_text(json.dumps(to_jsonable(run), indent=2) + "\n", encoding="utf-8")


def load(path: Path) -> BenchRun:
    """A saved run; ``BenchFileError`` in one sentence naming the file when it cannot be read."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BenchFileError(f"{path}: cannot read it as JSON ({exc})") from None
    try:
        return run_from_json(data)
    except BenchFileError as exc:
        raise BenchFileError(f"{path}: {exc}") from None


def failed_requests(run: BenchRun) -> int:
    return sum(case.stats.failed for case in run.cases)


def case_names_of(text: Sequence[str] | None) -> tuple[str, ...] | None:
    """``--cases a,b c`` as names (None: the default)."""
    if not text:
        return None
    return tuple(n.strip() for part in text for n in part.split(",") if n.strip())
