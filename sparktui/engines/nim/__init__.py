"""NVIDIA NIM for LLMs (default port 8000): a vLLM behind NVIDIA's own routes.

What NIM serves (docs.nvidia.com/nim/large-language-models, the 2.x API reference and "Logging and
Observability"; not run here: NIM ships as GPU containers):

- ``/v1/health/live`` answers 200 as soon as the container runs (nginx, no model needed) and
  ``/v1/health/ready`` only once the model is loaded: live and not ready is loading. sparktui polls
  ``/v1/health/ready``; a 503 there is ``loading`` (a container that is not even live answers nothing,
  and is down).
- ``/v1/metrics``: NIM 2.x runs vLLM and passes vLLM's own Prometheus metrics through unchanged, so they
  are read by vLLM's reading (``sparktui.engines.vllm.scrape``), every number and rule as a vLLM's.
  NIM 1.x's observability page lists the same numbers without the ``vllm:`` prefix
  (``num_requests_running``, ``gpu_cache_usage_perc``, ``time_to_first_token_seconds``...): those are
  read as the prefixed names (``V1_NAMES``) when a scrape has no ``vllm:`` name. No ``name[]`` filter is
  sent: NIM's front does not say it passes one on. Its numbers as PromQL (``promql``, for
  ``snapshot --compare``) are vLLM's, with the 1.x names as fallbacks.
- ``/v1/version``: ``{"release": ..., "api": ...}``; the release is its version.
"""

from __future__ import annotations

from sparktui.engines.base import Engine, PollPlan
from sparktui.engines.nim import promql
from sparktui.engines.vllm.scrape import WANTED as VLLM_WANTED
from sparktui.engines.vllm.scrape import normalise as vllm_normalise
from sparktui.engines.vllm.scrape import wanted_sample_names
from sparktui.model.promtext import Exposition
from sparktui.model.reading import Answers, EngineReading
from sparktui.model.safe_text import LABEL_LIMIT, safe_text
from sparktui.model.scrape import EngineScrape

INFO_PATH = "/v1/version"
READY_PATH = "/v1/health/ready"
METRICS_PATH = "/v1/metrics"
PREFIX = "vllm:"

# NIM 1.x's names (its "Logging and Observability" page): each is vLLM's with the prefix dropped.
_V1_BASES = (
    "num_requests_running",
    "num_requests_waiting",
    "gpu_cache_usage_perc",
    "prompt_tokens_total",
    "generation_tokens_total",
    "request_success_total",
    "time_to_first_token_seconds",
    "time_per_output_token_seconds",
    "e2e_request_latency_seconds",
    "request_prompt_tokens",
    "request_generation_tokens",
)
_HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")
V1_NAMES: dict[str, str] = {
    name: f"{PREFIX}{name}"
    for base in _V1_BASES
    for name in (base, *(f"{base}{suffix}" for suffix in _HISTOGRAM_SUFFIXES))
    if f"{PREFIX}{name}" in VLLM_WANTED
}
WANTED = frozenset({*VLLM_WANTED, *V1_NAMES})
SERIES: tuple[str, ...] = (*wanted_sample_names(), *V1_NAMES)


def as_vllm(expo: Exposition) -> Exposition:
    """A NIM 1.x scrape (vLLM's numbers without the ``vllm:`` prefix) under vLLM's names; a 2.x scrape
    (vLLM's own) as it is."""
    if any(name.startswith(PREFIX) for name in expo.names()):
        return expo
    samples = {V1_NAMES.get(name, name): series for name, series in expo.samples.items()}
    types = {V1_NAMES.get(name, name): kind for name, kind in expo.types.items()}
    return Exposition(samples, types, expo.lines, expo.series)


def _normalise(expo: Exposition, _answers: Answers) -> EngineScrape:
    return vllm_normalise(as_vllm(expo))


def _version(found: object) -> str | None:
    if isinstance(found, dict) and isinstance(found.get("release"), str):
        return safe_text(found["release"], LABEL_LIMIT)
    return None


READING = EngineReading(
    kind="nim",
    label="NIM",
    wanted=WANTED.__contains__,
    normalise=_normalise,
    version=_version,
    loading_on_503=True,  # /v1/health/ready is 503 while the model loads (live, not ready)
)
ENGINE = Engine(
    READING,
    PollPlan(info_path=INFO_PATH, health_path=READY_PATH, metrics_path=METRICS_PATH),
    series=SERIES,
    numbers=promql.numbers(V1_NAMES),
)
