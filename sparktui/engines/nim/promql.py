"""NIM's numbers as PromQL, for ``snapshot --compare`` (``Engine.numbers``; docs/prometheus.md): vLLM's.

NIM 2.x passes vLLM's own metrics through unchanged and sparktui reads them with vLLM's reading, so
its numbers are vLLM's (``sparktui.engines.vllm.promql``). NIM 1.x serves some of them without the
``vllm:`` prefix (``V1_NAMES`` in ``sparktui.engines.nim``), read as the prefixed names; here each of
those is the last fallback (``or``) of the name it stands for.

Pure text from the tables: no I/O here.
"""

from __future__ import annotations

from collections.abc import Mapping

from sparktui.engines.base import PromNumber
from sparktui.engines.vllm.promql import numbers as vllm_numbers


def numbers(v1_names: Mapping[str, str]) -> tuple[PromNumber, ...]:
    """vLLM's numbers, each vLLM name that NIM 1.x serves unprefixed (``v1_names``: its name -> vLLM's)
    falling back to that name."""
    return vllm_numbers({prefixed: name for name, prefixed in v1_names.items()})
