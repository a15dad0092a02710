"""vLLM: what is polled, and how its ``/metrics`` is read (``scrape``: every wire name across versions).

Each poll asks ``/health`` and ``/metrics`` (filtered to the series sparktui reads, where the server
takes ``name[]``), ``/version`` at the start, after a restart and now and then, and ``/v1/models``.
Its own failure lines and detectors are in ``failures.toml`` beside this file (the diagnosis), and its
numbers as PromQL in ``promql`` (``snapshot --compare``). ``command`` recognises and reads a ``vllm serve``
command line, for ``sparktui init`` (which unit or container runs it, and on which port).
"""

from __future__ import annotations

from sparktui.engines.base import Engine, PollPlan, json_version
from sparktui.engines.vllm.promql import NUMBERS
from sparktui.engines.vllm.scrape import WANTED, normalise, wanted_sample_names
from sparktui.model.reading import EngineReading

READING = EngineReading(
    kind="vllm",
    label="vLLM",
    wanted=WANTED.__contains__,
    normalise=lambda expo, _answers: normalise(expo),
    version=json_version,
)
ENGINE = Engine(
    READING,
    PollPlan(info_path="/version", metrics_filter=wanted_sample_names()),
    series=wanted_sample_names(),
    failures=__name__,
    numbers=NUMBERS,
)
