"""SGLang (``python -m sglang.launch_server``, default port 30000): what is polled, and how its
``/metrics`` is read (``scrape``).

Each poll asks ``/ready``, not ``/health``: SGLang's ``/health`` (as ``/health_generate``) runs a
one-token generation on an idle server unless ``SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION=0``, and waits
for it, a second at least (``srt/entrypoints/http_server.py``, 0.5.23). ``/ready`` answers 200 once the
server is up and not paused, and 503 while it starts, shuts down or is paused, at no cost to it.
``/metrics`` exists only with ``--enable-metrics``; it is prometheus_client's, so it takes the ``name[]``
filter. ``/server_info`` (``version``, the server's arguments and each data-parallel engine's state)
is asked at the start and now and then: it asks every scheduler for its state.

Its own failure lines are in ``failures.toml`` beside this file (the diagnosis).

``info`` tells ``/server_info`` from other engines' JSON and reads it, and ``command`` reads an SGLang
command line, both for ``sparktui init`` (which unit or container runs it, and on which port).
"""

from __future__ import annotations

from sparktui.engines.base import Engine, PollPlan, json_version
from sparktui.engines.sglang.promql import NUMBERS
from sparktui.engines.sglang.scrape import SERIES, WANTED, normalise
from sparktui.model.reading import EngineReading

INFO_PATH = "/server_info"
READY_PATH = "/ready"


READING = EngineReading(
    kind="sglang",
    label="SGLang",
    wanted=WANTED.__contains__,
    normalise=lambda expo, _answers: normalise(expo),
    version=json_version,
    loading_on_503=True,  # /ready is 503 while the server starts (loads the model, captures CUDA graphs)
)
ENGINE = Engine(
    READING,
    PollPlan(info_path=INFO_PATH, health_path=READY_PATH, metrics_filter=SERIES),
    failures=__name__,
    series=SERIES,
    numbers=NUMBERS,
)
