"""PromQL, all of it: the text of every query sparktui sends to Prometheus (docs/prometheus.md).

- ``refresh_query``: the one instant query of a refresh of ``PrometheusSource``, batched over every
  target with regex label matchers, and ``series_names`` (what it asks for: everything direct mode reads
  of /metrics: each engine's own ``Engine.series`` for the engines of the targets, ``sparktui.engines``,
  and the exporters' series);
- ``discovery_queries``: what finds the nodes when the config lists none;
- ``engine_numbers`` and ``render``: every number sparktui shows for an instance, as Prometheus would
  compute it, for ``snapshot --compare``. The PromQL of each is its engine's (``Engine.numbers``:
  vLLM's in ``sparktui/engines/vllm/promql.py``, SGLang's, TensorRT-LLM's and llama.cpp's beside their
  own scrape tables, NIM's vLLM's; each number one query batched over every target of the engine,
  ``sum by (<target labels>, model_name)``); ``render`` fills in the targets, the window and the labels.

Over the same samples the two agree exactly: Prometheus's ``rate(x[w])`` extrapolates to the ends of
the window, and when the window starts and ends on a sample, as the comparison test arranges, it is
``(last - first) / (t_last - t_first)``, which is what sparktui computes. In everyday use the direct
polls and Prometheus's scrapes happen at different instants, so rates differ by the traffic of up to
one scrape interval at each end of the window, and quantiles by the requests that finished in it.

Pure text from the model's tables: no I/O here, so the source and the comparison share it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from sparktui.engines import registry
from sparktui.engines.base import PromNumber
from sparktui.model import exporters, memory
from sparktui.model.specs import PrometheusSpec, PrometheusTarget, parse_selector

SCRAPE_LABEL = "sparktui_scrape"  # marks the scrape-time half of the refresh query

# --- which series -------------------------------------------------------------------------------------


def exporter_series_names() -> tuple[str, ...]:
    """Every series the GPU exporter and node_exporter readers use (from their own tables)."""
    names: set[str] = set()
    for wires in (exporters.NVIDIA_WIRES, exporters.DGX_SPARK_WIRES, exporters.DCGM_WIRES):
        for choices in wires.values():
            names.update(wire for wire, _multiplier in choices)
    names.update((exporters.NVIDIA_INFO, exporters.NVIDIA_INDEX, exporters.NVIDIA_COLLECT_OK))
    names.update(exporters.DCGM_FB_PARTS)
    names.update(exporters.throttle_series_names())
    names.update(exporters.DGX_SPARK_HOST_MEMORY)
    meminfo = ("MemTotal", "MemAvailable", "MemFree", "Buffers", "Cached", "Shmem", "Dirty", "Writeback")
    names.update(memory.NODE_MEMORY.format(key=key) for key in (*meminfo, "SReclaimable"))
    names.update((memory.NODE_PSI_SOME_TOTAL, memory.NODE_PSI_FULL_TOTAL))
    return tuple(sorted(names))


def engine_series_names(engines: Iterable[str]) -> tuple[str, ...]:
    """The series of instances of the engine kinds ``engines``: each engine's own ``Engine.series``
    (what its reading keeps of ``/metrics``); a kind no engine has asks for nothing."""
    known = registry()
    return tuple(sorted({name for kind in engines if kind in known for name in known[kind].series}))


def series_names(engines: Iterable[str] = ("vllm",)) -> tuple[str, ...]:
    """What one refresh asks for: everything direct mode reads of instances of ``engines`` and of the
    exporters, and ``up``."""
    return tuple(sorted({*engine_series_names(engines), *exporter_series_names(), "up"}))


# --- PromQL text ----------------------------------------------------------------------------------------

_RE2_SPECIAL = re.compile(r"([\\.+*?()|\[\]{}^$])")


def regex_escape(value: str) -> str:
    """``value`` as a literal inside an RE2 regular expression (Prometheus's ``=~``)."""
    return _RE2_SPECIAL.sub(r"\\\1", value)


def promql_string(value: str) -> str:
    """A PromQL double-quoted string literal."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def label_matchers(targets: Iterable[PrometheusTarget], selector: str | None = None) -> str:
    """``instance=~"a:1|b:2",cluster="lab"``: one matcher per mapped label, over every target."""
    values: dict[str, set[str]] = {}
    for target in targets:
        for name, value in target.labels:
            values.setdefault(name, set()).add(value)
    parts: list[str] = []
    for name in sorted(values):
        found = sorted(values[name])
        if len(found) == 1:
            parts.append(f"{name}={promql_string(found[0])}")
        else:
            parts.append(f"{name}=~{promql_string('|'.join(regex_escape(v) for v in found))}")
    if selector:
        parts.extend(f"{name}{op}{promql_string(_unescape(value))}" for name, op, value in parse_selector(selector))
    return ",".join(parts)


def _unescape(value: str) -> str:
    """The value of a PromQL string literal's body (the selector is written as PromQL)."""
    return re.sub(r"\\(.)", lambda m: {"n": "\n"}.get(m.group(1), m.group(1)), value)


def refresh_query(targets: Sequence[PrometheusTarget], selector: str | None = None) -> str:
    """The one query of a refresh: current values and each target's scrape time, in one evaluation."""
    matchers = label_matchers(targets, selector)
    # A fleet of vLLMs only, or of exporters only, asks for vLLM's series: the query as it always was.
    engines = {target.engine for target in targets if target.kind == "vllm"} or {"vllm"}
    names = "|".join(regex_escape(name) for name in series_names(engines))
    return (
        f"{{__name__=~{promql_string(names)},{matchers}}} or "
        f'label_replace(timestamp(up{{{matchers}}}), "{SCRAPE_LABEL}", "ts", "", "")'
    )


# --- node discovery -------------------------------------------------------------------------------------


def discovery_queries(spec: PrometheusSpec) -> dict[str, str]:
    """Per kind of target (vllm, gpu_exporter, node_exporter), the query whose answer has one series per
    ``instance`` that exports it."""
    selector = ("," + label_matchers((), spec.selector)) if spec.selector else ""
    kinds = {
        "vllm": '{__name__=~"vllm:num_requests_running|vllm:generation_tokens_total"' + selector + "}",
        "gpu_exporter": (
            '{__name__=~"nvidia_smi_gpu_info|DCGM_FI_DEV_GPU_TEMP|gpu_temperature_celsius"' + selector + "}"
        ),
        "node_exporter": '{__name__="node_memory_MemTotal_bytes"' + selector + "}",
    }
    return {kind: f"group by (instance) ({query})" for kind, query in kinds.items()}


# --- the numbers on the screen --------------------------------------------------------------------------


def engine_numbers(kind: str) -> tuple[PromNumber, ...]:
    """The numbers ``snapshot --compare`` asks for an instance of the engine ``kind``: its own
    ``Engine.numbers`` (vLLM's: ``sparktui/engines/vllm/promql.py``, and beside it SGLang's, TensorRT-LLM's,
    NIM's and llama.cpp's); an engine without them (Ollama, which serves no Prometheus text) or a kind no
    engine has: none."""
    found = registry().get(kind)
    return found.numbers if found is not None else ()


def compared_engines() -> tuple[str, ...]:
    """The engines ``snapshot --compare`` has numbers of, by their names for people ("vLLM", "SGLang")."""
    return tuple(engine.label for engine in registry().values() if engine.numbers)


def render(number: PromNumber, matchers: str, window_s: float, by: Sequence[str]) -> str:
    """The PromQL of ``number`` for targets picked by ``matchers`` over ``window_s`` (to the millisecond)."""
    window = f"{max(1, round(window_s * 1000))}ms"
    return number.promql.format(sel=matchers, w=window, by=", ".join(by))
