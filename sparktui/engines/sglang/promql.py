"""SGLang's numbers as PromQL: every number sparktui shows for an SGLang instance that SGLang exports,
as Prometheus would compute it, for ``snapshot --compare`` (``Engine.numbers``; docs/prometheus.md).

Written the way its reading (``scrape``) computes each, from the same names:

- the tokenizer's counters and histograms are summed over their label sets (``is_streaming``,
  ``cache_source``): ``sum by (<target labels>, model_name) (rate(...))``; prompt tokens computed are
  the prompt tokens less the cached ones (all cache sources), or every prompt token where no cached
  tokens are served; requests finished are ``num_requests_total`` (completed plus aborted);
- each scheduler gauge is one engine's state seen once per rank, so it is taken once per data-parallel
  engine (``max by (..., dp_rank)``: every rank of an engine reports the same batch) and never summed
  over ranks; then, as the reading does over engines: running and waiting summed, the KV usage the
  busiest engine's (``max``), the prefix-cache hit rate (SGLang's own ratio) and the speculative gauges
  averaged;
- the speculative gauges (``spec_accept_length``, ``spec_accept_rate``) are shown as SGLang reports
  them, not windowed, and not at all where both are 0 (a server that does not speculate serves both
  at 0). SGLang exports no draft counters, so there is no acceptance per position, and no preemption
  counter.

Pure text from the tables: no I/O here.
"""

from __future__ import annotations

from sparktui.engines.base import PromNumber
from sparktui.engines.sglang.scrape import (
    CACHED,
    GENERATION,
    HISTOGRAMS,
    HIT_RATE,
    PROMPT,
    REPORTED,
    REQUESTS,
    RUNNING,
    TOKEN_USAGE,
    WAITING,
)
from sparktui.engines.vllm.promql import QUANTILES

# The latencies compared (keys of the neutral scrape's ``latency``) and their labels: vLLM's.
LATENCIES = (("ttft", "TTFT"), ("itl", "ITL"), ("e2e", "e2e"))
ENGINE_LABEL = "dp_rank"  # a data-parallel engine; the other rank labels are ranks of one engine


def _series(wire: str) -> str:
    return f"{wire}{{{{{{sel}}}}}}"


def _counter(wire: str) -> str:
    """The counter's rate, summed over its label sets."""
    return f"sum by ({{by}}) (rate({_series(wire)}[{{w}}]))"


def _per_engine(wire: str) -> str:
    """A scheduler gauge once per data-parallel engine (its ranks report the same batch)."""
    return f"max by ({{by}}, {ENGINE_LABEL}) ({_series(wire)})"


def _over_engines(how: str, wire: str) -> str:
    return f"{how} by ({{by}}) ({_per_engine(wire)})"


def _histogram_quantile(base: str, q: float) -> str:
    return f"histogram_quantile({q}, sum by ({{by}}, le) (rate({_series(f'{base}_bucket')}[{{w}}])))"


def _histogram_mean(base: str) -> str:
    return f"{_counter(f'{base}_sum')} / {_counter(f'{base}_count')}"


def _reported(wire: str) -> str:
    """A speculative gauge averaged over engines, unless every one SGLang reports is 0."""
    idle = " and on ({by}) ".join(f"({_over_engines('avg', w)} == 0)" for w in REPORTED.values())
    return f"{_over_engines('avg', wire)} unless on ({{by}}) ({idle})"


def numbers() -> tuple[PromNumber, ...]:
    """Every number sparktui shows for an SGLang instance that SGLang exports, with its PromQL."""
    out = [
        PromNumber("generation_tokens_per_s", "generation", _counter(GENERATION), " tok/s"),
        PromNumber("prompt_tokens_per_s", "prompt", _counter(PROMPT), " tok/s"),
        PromNumber(
            "prompt_tokens_computed_per_s",
            "prompt computed",
            f"({_counter(PROMPT)} - {_counter(CACHED)}) or {_counter(PROMPT)}",
            " tok/s",
        ),
        PromNumber("requests_finished_per_s", "finished", _counter(REQUESTS), " req/s"),
        PromNumber("prefix_cache_hit_rate", "prefix cache hit", _over_engines("avg", HIT_RATE), percent=True),
    ]
    for key, label in LATENCIES:
        base = HISTOGRAMS[key]
        for name, q in QUANTILES:
            out.append(PromNumber(f"{key}_{name}", f"{label} {name}", _histogram_quantile(base, q), " s"))
        out.append(PromNumber(f"{key}_mean", f"{label} mean", _histogram_mean(base), " s"))
    out += [
        PromNumber("kv_usage", "KV cache usage", _over_engines("max", TOKEN_USAGE), percent=True),
        PromNumber("running", "running", _over_engines("sum", RUNNING)),
        PromNumber("waiting", "waiting", _over_engines("sum", WAITING)),
        PromNumber("spec_accept_length", "acceptance length (reported)", _reported(REPORTED["spec_accept_length"])),
        PromNumber(
            "spec_accept_rate",
            "acceptance rate (reported)",
            _reported(REPORTED["spec_accept_rate"]),
            percent=True,
        ),
    ]
    return tuple(out)


NUMBERS = numbers()
