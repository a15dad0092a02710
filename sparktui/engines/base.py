"""What an engine package gives sparktui: one ``Engine``, its reading and its poll plan.

An engine is a server kind sparktui reads (vLLM, llama.cpp's llama-server...). Everything specific to it
lives in its package and reaches the rest of sparktui through the ``Engine`` it exports:

- ``reading`` (``sparktui.model.reading.EngineReading``): how its answers become the engine-neutral
  scrape (``sparktui.model.scrape``) the model, the rules and every screen read;
- ``polling`` (``PollPlan``): what the poller asks its server besides ``/health`` and ``/metrics``, and
  when; what it must never ask (an endpoint that wakes a sleeping server) is simply not in the plan;
- ``series``: the sample names its reading keeps of ``/metrics``, which is what the Prometheus source
  asks Prometheus for, for an instance of it (``sparktui.sources.promql``; ``docs/engines.md``);
- ``numbers``: the numbers sparktui shows for an instance of it, as PromQL (``PromNumber``), which
  ``snapshot --compare`` asks Prometheus for beside the direct ones.

``docs/engines.md`` says how to add one, in this package or in one of your own (an entry point).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from sparktui.model.reading import EngineReading
from sparktui.model.safe_text import LABEL_LIMIT, safe_text

KIND = re.compile(r"[a-z][a-z0-9_]{0,31}")  # an engine kind, as configs name it: engine = "llamacpp"


def json_version(found: object) -> str | None:
    """The ``version`` string of an engine's JSON description of itself (vLLM's ``/version``, SGLang's
    ``/server_info``), made safe; None where there is none."""
    if isinstance(found, dict) and isinstance(found.get("version"), str):
        return safe_text(found["version"], LABEL_LIMIT)
    return None


def _never(_metrics_body: bytes) -> bool:
    return False


@dataclass(frozen=True, slots=True)
class PollPlan:
    """What one poll of an instance asks, on the instance's base URL: its health (``health_path``, every
    poll: 200 is up; ``/health`` unless the engine's runs work, as SGLang's runs a one-token generation),
    its Prometheus text (``metrics_path``) and ``/v1/models`` now and then, which every engine here serves.

    ``info_path``: the engine's description of itself (vLLM ``/version``, llama-server ``/props``),
    asked at the first poll, after the server came back, and every ``VERSION_EVERY`` polls, or every
    poll when ``info_each_poll`` (it carries state, as llama-server's sleep). ``metrics_filter``: the
    sample names for ``/metrics?name[]=...`` where the engine takes that filter (vLLM; none: no filter).
    ``detail_path``: asked only when ``wants_detail`` says this poll's ``/metrics`` body is worth it
    (llama-server's ``/slots`` while a request runs: reading it keeps an idle server awake).
    ``metrics``: False for a server whose ``/metrics`` is not its own (a llama.cpp router's is asked
    per model, and would load the model it names); ``models_each_poll``: ``/v1/models`` every poll
    (it says which models are loaded). ``model_metrics``: for a server whose models each have their own
    ``/metrics`` (a llama.cpp router's children), the (model, path) pairs to ask, from this poll's
    ``/v1/models`` answer: only what loads and wakes nothing, and a bounded number of them (None: the
    server's ``/metrics`` is its own)."""

    info_path: str | None = None
    health_path: str = "/health"
    metrics_path: str = "/metrics"
    metrics: bool = True
    models_each_poll: bool = False
    info_each_poll: bool = False
    metrics_filter: tuple[str, ...] = ()
    detail_path: str | None = None
    wants_detail: Callable[[bytes], bool] = field(default=_never)
    model_metrics: Callable[[bytes], tuple[tuple[str, str], ...]] | None = None


@dataclass(frozen=True, slots=True)
class PromNumber:
    """One number on the screen as Prometheus computes it: its key (as ``headless.compare.view_numbers``
    keys the direct side), how it is shown, and its PromQL (``{sel}`` the target matchers, ``{w}`` the
    window, ``{by}`` the grouping labels; ``sparktui.sources.promql.render`` fills them in)."""

    key: str
    label: str
    promql: str
    unit: str = ""
    percent: bool = False


@dataclass(frozen=True, slots=True)
class Engine:
    """One engine kind: its name in configs (``kind``), its reading and its poll plan. ``mode``, where
    one server of the engine can be of several kinds (llama-server alone, or a router of models): the
    plan for what its description of itself (``polling.info_path``) says it is. ``series``: every sample
    name ``reading.wanted`` keeps (``reading.wanted`` is a test, this the list of it), the series the
    Prometheus source asks for an instance of this engine; empty: that source reads no engine numbers
    of it (only ``up``). ``numbers``: what ``snapshot --compare`` asks Prometheus for an instance of it;
    empty: it is not compared."""

    reading: EngineReading
    polling: PollPlan
    series: tuple[str, ...] = ()
    mode: Callable[[bytes], PollPlan] | None = None
    failures: str | None = None  # the package whose failures.toml holds its own failure lines (diagnosis)
    numbers: tuple[PromNumber, ...] = ()

    def __post_init__(self) -> None:
        if not KIND.fullmatch(self.reading.kind):
            raise ValueError(f"engine kind {self.reading.kind!r}: lowercase letters, digits and _, at most 32")

    def plan_for(self, info: bytes | None) -> PollPlan:
        """The poll plan of a server that last described itself as ``info`` (None: not known yet)."""
        return self.mode(info) if self.mode is not None and info is not None else self.polling

    @property
    def kind(self) -> str:
        return self.reading.kind

    @property
    def label(self) -> str:
        """Its name for people: "vLLM", "llama.cpp"."""
        return self.reading.label
