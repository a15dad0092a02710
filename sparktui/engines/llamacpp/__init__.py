"""llama.cpp's ``llama-server``: what is polled, and how what it serves is read (``scrape``).

Every poll asks ``/health``, ``/metrics`` and ``/props`` (none of them wakes a sleeping server, nor
keeps an idle one awake), and now and then ``/v1/models``. ``/slots`` is asked only when the same
poll's ``/metrics`` shows a request running (``wants_slots``): reading it resets the server's idle
timer, so a server started with ``--sleep-idle-seconds`` polled for its slots would never sleep
(measured: read once a second, it stayed awake; ``docs/metrics.md``). An idle server's context in use
is nothing anyway.

A router (``--models-dir``: ``/props`` says ``"role": "router"``) is polled by ``ROUTER_PLAN``: its
``/health``, ``/props`` and ``/v1/models``, which says where each model is (``router``), then the
``/metrics`` of each model whose child answers (``loaded`` or ``sleeping`` in that answer), through the
router with ``?model=X&autoload=false`` (``model_metrics_paths``): without ``autoload=false`` it would
load X (evicting another); with it, a model that went away since is a 400 and nothing is loaded or
woken. At most ``MODEL_READS`` models are read a poll. Never its ``/slots``, which wakes a sleeping
child, so a router's generated tokens move when a request ends.

``command`` reads a ``llama-server`` command line for ``sparktui init`` (which unit or container runs it,
and on which port).
"""

from __future__ import annotations

import re
from urllib.parse import urlencode

from sparktui.engines.base import Engine, PollPlan
from sparktui.engines.llamacpp import router, scrape
from sparktui.engines.llamacpp.promql import NUMBERS
from sparktui.model.promtext import Exposition
from sparktui.model.reading import Answers, EngineReading
from sparktui.model.safe_text import LABEL_LIMIT, safe_text
from sparktui.model.scrape import EngineScrape, ModelLoad, ScrapeProblem, ServedModel

INFO_PATH = "/props"  # build, slots, context, sleep: the engine's description of itself
SLOTS_PATH = "/slots"
MODEL_READS = 8  # a router's models whose /metrics one poll reads: bounded, whatever its --models-max
HEALTH_LOADING = 503  # /health answers 503 "Loading model" while the model loads
_PROCESSING = re.compile(rb"^llamacpp:requests_processing ([0-9.eE+]+)\s*$", re.MULTILINE)


def wants_slots(metrics_body: bytes) -> bool:
    """Whether ``/metrics`` (this poll's answer) shows a request running: then ``/slots`` is read."""
    found = _PROCESSING.search(metrics_body)
    if found is None:
        return False
    try:
        return float(found.group(1)) > 0
    except ValueError:
        return False


def _reading() -> EngineReading:
    def normalise(expo: Exposition, answers: Answers) -> EngineScrape:
        slots = scrape.read_slots(answers.detail) if answers.detail is not None else None
        props = scrape.read_props(answers.info) if answers.info is not None else None
        name = answers.model_name or "llama-server"
        return scrape.normalise(expo, name, slots=slots, props=props, previous=answers.previous)

    def served(models: bytes, info: bytes | None) -> tuple[ServedModel, ...] | None:
        if info is None or not router.is_router(info):
            return None  # a single server serves the model it loaded at its start
        return tuple(
            ServedModel(m.id, _LOAD[m.state], f"exit code {m.exit_code}" if m.exit_code is not None else None)
            for m in router.read_router_models(models).models
        )

    def version(found: object) -> str | None:
        build = found.get("build_info") if isinstance(found, dict) else None
        return safe_text(build, LABEL_LIMIT) if isinstance(build, str) else None

    return EngineReading(
        kind="llamacpp",
        label="llama.cpp",
        wanted=scrape.WANTED.__contains__,
        normalise=normalise,
        version=version,
        loading_on_503=True,
        preread=False,  # its reading needs /slots and /props: small, read on the event loop
        served=served,
    )


_LOAD = {
    router.ModelState.LOADED: ModelLoad.LOADED,
    router.ModelState.LOADING: ModelLoad.LOADING,
    router.ModelState.SLEEPING: ModelLoad.SLEEPING,
    router.ModelState.UNLOADED: ModelLoad.UNLOADED,
    router.ModelState.FAILED: ModelLoad.FAILED,
    router.ModelState.UNKNOWN: ModelLoad.UNKNOWN,
}


READING = _reading()
# /props each poll: it says whether the server sleeps, and asking wakes nothing.
PLAN = PollPlan(info_path=INFO_PATH, info_each_poll=True, detail_path=SLOTS_PATH, wants_detail=wants_slots)


# A router (--models-dir): its /metrics and /slots are per model, and ?model=X loads X (evicting another
# at --models-max): asked only with autoload=false, of the models /v1/models (every poll) says answer.
def model_metrics_paths(models: bytes) -> tuple[tuple[str, str], ...]:
    """The ``/metrics`` to ask of a router for each of its models whose child answers (``loaded`` or
    ``sleeping`` in this ``/v1/models`` answer), at most ``MODEL_READS`` in the listed order: the id
    URL-encoded, always with ``autoload=false`` (which loads nothing and wakes nothing). () for a
    body that is not the model list."""
    try:
        children = router.read_router_models(models).answering
    except ScrapeProblem:
        return ()
    return tuple(
        (model.id, f"/metrics?{urlencode({'model': model.id, 'autoload': 'false'})}")
        for model in children[:MODEL_READS]
    )


ROUTER_PLAN = PollPlan(
    info_path=INFO_PATH,
    info_each_poll=True,
    metrics=False,
    models_each_poll=True,
    model_metrics=model_metrics_paths,
)


def _mode(props: bytes) -> PollPlan:
    return ROUTER_PLAN if router.is_router(props) else PLAN


ENGINE = Engine(READING, PLAN, mode=_mode, failures=__name__, series=tuple(sorted(scrape.WANTED)), numbers=NUMBERS)
