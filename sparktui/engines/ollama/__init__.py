"""Ollama (default port 11434): an engine that loads models on demand and serves no Prometheus metrics.

What is polled (docs.ollama.com/api; ``server/routes.go``, ``GenerateRoutes``): ``/`` (it answers
"Ollama is running": the usual liveness check) every poll, ``/api/ps`` every poll (the models it holds
in memory: ``ps``), ``/api/version`` now and then (``{"version": ...}``) and ``/v1/models`` now and then
(every model it has, as ``/api/tags``). None of them loads a model: ``/api/ps`` and ``/api/tags`` list
what the scheduler holds and the manifests on disk. Never ``/api/chat``, ``/api/embed`` or
``/api/show`` (a request naming a model loads it), and ``/api/generate`` only as the canary
(``canary.py``): only to a model ``/api/ps`` lists as loaded, asking to keep it as long as it was going
to (``keep_alive``), never to one unloaded, overdue or about to be unloaded, so that sparktui neither
loads a model nor keeps one loaded. Its answer's own times give the canary's TTFT (load and prompt
evaluation, ``timing.py``) and a decode rate, shown instead of the wall time.

Ollama exports no request or token counters and no latency histograms (no ``/metrics`` in any release;
its times come back in each answer, to whoever asked: the canary's are shown with it): running, waiting
and every rate are "–", said so by ``lacks``. What it does say is which models it holds, how much
memory each holds (in all and in GPU memory), their context and when each is due to be unloaded: a
loaded model is one model of the scrape, and the scrape's ``served`` gives every model and where it is,
as a llama.cpp router's (``N/M models loaded``), a model still held past its expiry flagged overdue.
"""

from __future__ import annotations

from sparktui.engines.base import Engine, PollPlan, json_version
from sparktui.engines.ollama.canary import CANARY
from sparktui.engines.ollama.ps import PS_PATH, read_ps, served_models
from sparktui.model.promtext import Exposition
from sparktui.model.reading import Answers, EngineReading
from sparktui.model.scrape import EngineScrape, ModelScrape

HEALTH_PATH = "/"  # "Ollama is running"
INFO_PATH = "/api/version"
LACKS = {
    "requests": "Ollama exports no request or token counters",
    "latency": "Ollama exports no latency histograms (TTFT, inter-token, end-to-end)",
    "mfu": "Ollama exports no bandwidth or FLOP counters",
}


def read(body: bytes, answers: Answers) -> EngineScrape:
    """``/api/ps`` (with the last ``/v1/models``) into the neutral scrape: one model per loaded model, with
    no numbers but what it lacks, and every model in ``served``."""
    loaded = read_ps(body, answers.wall)
    models = {
        model.id: ModelScrape(
            model_name=model.id,
            engines=(),
            counters={},
            histograms={},
            running=None,
            waiting=None,
            waiting_by_reason={},
            kv_usage_by_engine={},
            sleep=None,
            lacks=LACKS,
        )
        for model in loaded
    }
    return EngineScrape(models=models, served=served_models(loaded, answers.models))


def _normalise(_expo: Exposition, _answers: Answers) -> EngineScrape:
    return EngineScrape(models={})  # no Prometheus text of Ollama's exists: through Prometheus, up or down only


READING = EngineReading(
    kind="ollama",
    label="Ollama",
    wanted=lambda _name: False,
    normalise=_normalise,
    version=json_version,
    preread=False,  # /api/ps is small JSON, read with the poll's wall time
    read_body=read,
    canary_plan=CANARY,
)
PLAN = PollPlan(info_path=INFO_PATH, health_path=HEALTH_PATH, metrics_path=PS_PATH)
ENGINE = Engine(READING, PLAN)
