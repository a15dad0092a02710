"""The failure catalogues the engines ship beside their code: each engine kind's own failure lines, in
the format of ``sparktui/data/failures.toml`` (docs/diagnosis.md, "An engine's own catalogue").

``sparktui.config.load_catalogue`` reads each with ``engine_catalogue`` and parses it as that engine's
(``parse_catalogue(..., engine=kind)``): every rule of the file judges only that engine's instances,
because of where the file is, not of anything it says.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import resources

from sparktui.engines import registry

CATALOGUE_FILE = "failures.toml"


def engine_catalogues() -> Mapping[str, str]:
    """Engine kind (``ServerSpec.engine``) -> the package whose ``failures.toml`` is its catalogue
    (``Engine.failures``): vLLM's, llama.cpp's, SGLang's and TensorRT-LLM's, and a plugin engine's that
    names one. The main file (sparktui/data/failures.toml) holds only the rules that judge every engine."""
    return {kind: engine.failures for kind, engine in registry().items() if engine.failures is not None}


def engine_catalogue(kind: str) -> tuple[str, str]:
    """Where an engine's catalogue is (for its errors) and its text, read from the installed package."""
    package = engine_catalogues()[kind]
    where = f"{package.replace('.', '/')}/{CATALOGUE_FILE}"
    return where, (resources.files(package) / CATALOGUE_FILE).read_text(encoding="utf-8")
