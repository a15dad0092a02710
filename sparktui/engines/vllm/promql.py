"""vLLM's numbers as PromQL: every number sparktui shows for a vLLM instance, as Prometheus would compute
it, for ``snapshot --compare`` (``Engine.numbers``; docs/prometheus.md).

Each is one query batched over every vLLM target (``sum by (<target labels>, model_name)``), written
the way vLLM's Grafana dashboards write it: ``rate()`` of the counters, ratios of rates,
``histogram_quantile()`` over ``sum by (le) (rate(..._bucket[w]))``, the gauges as they are.
Metric-name fallbacks come from the same tables the normaliser uses (``scrape``), joined with ``or``.
``sparktui.sources.promql.render`` fills in the targets, the window and the grouping labels.

Pure text from the tables: no I/O here.
"""

from __future__ import annotations

from collections.abc import Mapping

from sparktui.engines.base import PromNumber
from sparktui.engines.vllm.scrape import COUNTERS, GAUGES, HISTOGRAMS, LABELLED_COUNTERS, WAITING_BY_REASON

QUANTILES = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))
# The latencies compared (keys of the neutral scrape's `latency`) and their labels.
LATENCIES = (("ttft", "TTFT"), ("itl", "ITL"), ("e2e", "e2e"))


Aliases = Mapping[str, str]  # a vLLM sample name -> the same series under another engine's name


def _names(wires: tuple[str, ...], aliases: Aliases) -> tuple[str, ...]:
    """``wires`` and, after them, each one's other name (``aliases``) as a further fallback."""
    return (*wires, *(aliases[wire] for wire in wires if wire in aliases))


def _bases(bases: tuple[str, ...], aliases: Aliases) -> tuple[str, ...]:
    """Histogram base names and, after them, those whose samples have other names (``aliases``)."""
    other = (aliases.get(f"{base}_bucket", "").removesuffix("_bucket") for base in bases)
    return (*bases, *(base for base in other if base))


def _counter(key: str, aliases: Aliases, sel: str = "{sel}") -> str:
    """``sum by ({by}) (rate(<counter>[{w}]))``, with the version fallbacks joined by ``or``."""
    wires = _names(COUNTERS[key], aliases)
    return " or ".join(f"sum by ({{by}}) (rate({wire}{{{{{sel}}}}}[{{w}}]))" for wire in wires)


def _labelled(key: str, aliases: Aliases, value: str | None = None, extra_by: str = "") -> str:
    wire, label = LABELLED_COUNTERS[key]
    sel = "{sel}" if value is None else f'{{sel}},{label}="{value}"'
    return " or ".join(
        f"sum by ({{by}}{extra_by}) (rate({name}{{{{{sel}}}}}[{{w}}]))" for name in _names((wire,), aliases)
    )


def _ratio(numerator: str, denominator: str) -> str:
    return f"({numerator}) / ({denominator})"


def _gauge(key: str, how: str, aliases: Aliases) -> str:
    return " or ".join(f"{how} by ({{by}}) ({wire}{{{{{{sel}}}}}})" for wire in _names(GAUGES[key], aliases))


def _histogram_quantile(key: str, q: float, aliases: Aliases) -> str:
    return " or ".join(
        f"histogram_quantile({q}, sum by ({{by}}, le) (rate({base}_bucket{{{{{{sel}}}}}}[{{w}}])))"
        for base in _bases(HISTOGRAMS[key], aliases)
    )


def _histogram_mean(key: str, aliases: Aliases) -> str:
    def mean(base: str) -> str:
        total = f"sum by ({{by}}) (rate({base}_sum{{{{{{sel}}}}}}[{{w}}]))"
        count = f"sum by ({{by}}) (rate({base}_count{{{{{{sel}}}}}}[{{w}}]))"
        return f"({total} / {count})"

    return " or ".join(mean(base) for base in _bases(HISTOGRAMS[key], aliases))


def numbers(aliases: Aliases | None = None) -> tuple[PromNumber, ...]:
    """Every number sparktui shows for a vLLM instance, with its PromQL; ``aliases``: other names of
    vLLM's samples, each tried after the name it stands for (NIM 1.x's, ``sparktui.engines.nim.promql``)."""
    a = aliases or {}
    out = [
        PromNumber("generation_tokens_per_s", "generation", _counter("generation_tokens", a), " tok/s"),
        PromNumber("prompt_tokens_per_s", "prompt", _counter("prompt_tokens", a), " tok/s"),
        PromNumber(
            "prompt_tokens_computed_per_s",
            "prompt computed",
            # without the by-source counter (< 0.16): every prompt token (``docs/metrics.md``, prompt tok/s)
            f"({_labelled('prompt_by_source', a, 'local_compute')}) or ({_counter('prompt_tokens', a)})",
            " tok/s",
        ),
        PromNumber("requests_finished_per_s", "finished", _labelled("finished", a), " req/s"),
        PromNumber(
            "prefix_cache_hit_rate",
            "prefix cache hit",
            # V0 exports the ratio itself (``docs/metrics.md``, prefix-cache hit rate)
            f"({_ratio(_counter('prefix_cache_hits', a), _counter('prefix_cache_queries', a))})"
            f" or ({_gauge('prefix_hit_rate', 'avg', a)})",
            percent=True,
        ),
        PromNumber("preemptions_per_s", "preemptions", _counter("preemptions", a), " /s"),
        PromNumber(
            "acceptance_rate",
            "draft acceptance",
            _ratio(_counter("spec_accepted_tokens", a), _counter("spec_draft_tokens", a)),
            percent=True,
        ),
        PromNumber(
            "mean_acceptance_length",
            "mean acceptance length",
            "1 + " + _ratio(_counter("spec_accepted_tokens", a), _counter("spec_drafts", a)),
        ),
        PromNumber(
            "per_position",
            "acceptance at position",
            f"({_labelled('spec_accepted_pos', a, extra_by=', position')}) / ignoring (position) group_left () "
            f"({_counter('spec_drafts', a)})",
            percent=True,
        ),
    ]
    for key, label in LATENCIES:
        for name, q in QUANTILES:
            out.append(PromNumber(f"{key}_{name}", f"{label} {name}", _histogram_quantile(key, q, a), " s"))
        out.append(PromNumber(f"{key}_mean", f"{label} mean", _histogram_mean(key, a), " s"))
    out += [
        PromNumber("kv_usage", "KV cache usage", _gauge("kv_usage", "max", a), percent=True),
        PromNumber("running", "running", _gauge("running", "sum", a)),
        PromNumber("waiting", "waiting", _gauge("waiting", "sum", a)),
        PromNumber(
            "waiting_for_capacity",
            "waiting for capacity",
            f'sum by ({{by}}) ({WAITING_BY_REASON}{{{{{{sel}},reason="capacity"}}}})',
        ),
        PromNumber("admission_rejections_per_s", "admission rejections", _labelled("admission_rejected", a), " /s"),
        PromNumber(
            "prompt_cache_hit_share",
            "prompt tokens from the cache",
            _ratio(_labelled("prompt_by_source", a, "local_cache_hit"), _labelled("prompt_by_source", a)),
            percent=True,
        ),
        PromNumber("tokens_per_step_mean", "tokens per step mean", _histogram_mean("iteration_tokens", a)),
        PromNumber("prefill_computed_mean", "prefill computed per request", _histogram_mean("prefill_kv_computed", a)),
    ]
    return tuple(out)


NUMBERS = numbers()
