"""TensorRT-LLM's ``trtllm-serve`` (the Spark playbook's ports 8355 and 8356): what is polled, and how
its Prometheus text is read (``scrape``).

Each poll asks ``/health`` (200 with an empty body; 503 "LLM is unavailable" when its executor is not
healthy: down, as a vLLM's 503), ``/prometheus/metrics`` (served only with ``return_perf_metrics``; it
is prometheus_client's, so it takes the ``name[]`` filter) and ``/version`` now and then
(``{"version": ...}``). Never its ``/metrics``: that is a JSON list of iteration stats, and reading it
takes them from the queue the server's own collector reads to set the Prometheus gauges
(``openai_server.get_iteration_stats`` and ``_iteration_stats_collector_loop``, both on
``get_stats_async``): polling it would steal what ``/prometheus/metrics`` shows. Sources:
``tensorrt_llm/serve/openai_server.py`` and ``tensorrt_llm/metrics/collector.py`` (NVIDIA/TensorRT-LLM).

Its own failure lines are in ``failures.toml`` beside this file (the diagnosis).
"""

from __future__ import annotations

from sparktui.engines.base import Engine, PollPlan, json_version
from sparktui.engines.trtllm.promql import NUMBERS
from sparktui.engines.trtllm.scrape import SERIES, WANTED, normalise
from sparktui.model.reading import EngineReading

INFO_PATH = "/version"
METRICS_PATH = "/prometheus/metrics"

READING = EngineReading(
    kind="trtllm",
    label="TensorRT-LLM",
    wanted=WANTED.__contains__,
    normalise=lambda expo, answers: normalise(expo, answers.model_name),
    version=json_version,
)
ENGINE = Engine(
    READING,
    PollPlan(info_path=INFO_PATH, metrics_path=METRICS_PATH, metrics_filter=SERIES),
    failures=__name__,
    series=SERIES,
    numbers=NUMBERS,
)
