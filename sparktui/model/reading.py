"""How an engine's answers become the engine-neutral scrape: one ``EngineReading`` per engine kind.

The model reads every engine through this seam and knows no engine but vLLM by name: what is specific
to another engine lives in its package (``sparktui.engines``), whose reading the monitor core hands to
``FleetState``. vLLM's reading is here (``VLLM``) while its code is still in ``model/vllm.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from sparktui.model.promtext import Exposition
from sparktui.model.safe_text import LABEL_LIMIT, safe_text
from sparktui.model.vllm import WANTED, VllmScrape, normalise


@dataclass(frozen=True, slots=True)
class Answers:
    """What the engine answered besides ``/metrics``, for a reading that needs it."""

    model_name: str | None = None  # the first model its /v1/models serves
    info: bytes | None = None  # its last description of itself (vLLM /version, llama-server /props)
    slots: bytes | None = None  # llama-server's /slots of this poll (None: not read)
    previous: VllmScrape | None = None  # the last scrape read of it


@dataclass(frozen=True, slots=True)
class EngineReading:
    """One engine kind's reading. ``normalise`` raises ``ScrapeProblem`` (one line) for what cannot
    be read; ``version`` finds the engine's version in its description of itself (JSON, made safe);
    ``loading_on_503``: its ``/health`` answers 503 while the model loads (vLLM's means the engine
    died); ``preread``: ``/metrics`` alone is enough to read it ahead, in a worker thread."""

    kind: str
    label: str
    wanted: Callable[[str], bool]
    normalise: Callable[[Exposition, Answers], VllmScrape]
    version: Callable[[object], str | None]
    loading_on_503: bool = False
    preread: bool = True


def _vllm_version(found: object) -> str | None:
    if isinstance(found, dict) and isinstance(found.get("version"), str):
        return safe_text(found["version"], LABEL_LIMIT)
    return None


VLLM = EngineReading(
    kind="vllm",
    label="vLLM",
    wanted=WANTED.__contains__,
    normalise=lambda expo, _answers: normalise(expo),
    version=_vllm_version,
)
DEFAULT_READINGS: Mapping[str, EngineReading] = {"vllm": VLLM}
