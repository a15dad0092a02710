"""How an engine's answers become the engine-neutral scrape: one ``EngineReading`` per engine kind.

The model reads every engine through this seam and knows none by name: what is specific to an engine
lives in its package (``sparktui.engines``), whose reading the monitor core hands to ``FleetState``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sparktui.model.canary import CanaryPlan
from sparktui.model.promtext import Exposition
from sparktui.model.scrape import EngineScrape, ServedModel


@dataclass(frozen=True, slots=True)
class Answers:
    """What the engine answered besides ``/metrics``, for a reading that needs it."""

    model_name: str | None = None  # the first model its /v1/models serves
    info: bytes | None = None  # its last description of itself (vLLM /version, llama-server /props)
    detail: bytes | None = None  # what the engine's poll plan asked besides, this poll (None: not asked)
    previous: EngineScrape | None = None  # the last scrape read of it
    models: bytes | None = None  # its last /v1/models answer (every model it has, loaded or not)
    wall: float | None = None  # the unix time of this poll: when a server's own times (expiries) are judged


@dataclass(frozen=True, slots=True)
class EngineReading:
    """One engine kind's reading. ``normalise`` raises ``ScrapeProblem`` (one line) for what cannot
    be read; ``version`` finds the engine's version in its description of itself (JSON, made safe);
    ``loading_on_503``: its ``/health`` answers 503 while the model loads (vLLM's means the engine
    died); ``preread``: ``/metrics`` alone is enough to read it ahead, in a worker thread;
    ``served``: for a server that loads and unloads models on demand (a llama.cpp router), each model
    and where it is, read from ``/v1/models`` (with its description of itself); None from a server
    that serves what it loaded at its start. The models of such a server are never asked anything that
    would load one: no canary is sent to it but through its ``canary_plan``, which names only one loaded.

    ``read_body``: for an engine that serves its numbers as JSON, not Prometheus text (Ollama's
    ``/api/ps``), how the answer at its poll plan's ``metrics_path`` is read whole into the neutral
    scrape; ``normalise`` is then used only where an exposition is all there is (Prometheus).
    ``canary``: False for an engine to which no canary is ever sent. ``canary_plan``: how the engine's
    own canary is asked and read (``sparktui.model.canary.CanaryPlan``), for an engine whose canary is
    not an OpenAI completion; it alone may send a canary to a server that loads models on demand, as
    it chooses the model it names (Ollama's: only one loaded, keeping its expiry). None: ``POST
    /v1/completions`` of one token, to a server that serves what it loaded at its start."""

    kind: str
    label: str
    wanted: Callable[[str], bool]
    normalise: Callable[[Exposition, Answers], EngineScrape]
    version: Callable[[object], str | None]
    loading_on_503: bool = False
    preread: bool = True
    served: Callable[[bytes, bytes | None], tuple[ServedModel, ...] | None] | None = None
    read_body: Callable[[bytes, Answers], EngineScrape] | None = None
    canary: bool = True
    canary_plan: CanaryPlan | None = None
