"""TensorRT-LLM's numbers as PromQL: every number sparktui shows for a ``trtllm-serve`` instance that it
exports, as Prometheus would compute it, for ``snapshot --compare`` (``Engine.numbers``;
docs/prometheus.md).

Written the way its reading (``scrape``) computes each, from the same names:

- the per-request counters and histograms are summed over their label sets
  (``sum by (<target labels>, model_name) (rate(...))``); prompt tokens computed are the prompt tokens
  less the cached ones, or every prompt token where no cached tokens are served; requests finished are
  ``request_success_total`` over every ``finished_reason``;
- speculative decoding from the per-position counters: the drafts are the tokens drafted at position
  0 (every draft proposes it), the acceptance rate accepted over drafted tokens, the mean acceptance
  length 1 + accepted tokens per draft, and each position's accepted tokens per draft (its
  ``token_position`` as the ``position`` the comparison reads);
- the iteration gauges as they are, the largest where several processes (``pid``) set one; the
  acceptance length gauge only where no per-position counter is served (the reading shows it only
  then), and only when it is not 0.

``trtllm-serve`` has no inter-token latency histogram; its per-request time per output token
(``tpot``) is compared instead. It exports no preemption counter.

Pure text from the tables: no I/O here.
"""

from __future__ import annotations

from sparktui.engines.base import PromNumber
from sparktui.engines.trtllm.scrape import (
    ACCEPTANCE_LENGTH,
    ACCEPTED,
    CACHED,
    DRAFTED,
    GENERATION,
    HISTOGRAMS,
    HIT_RATE,
    PROMPT,
    RUNNING,
    SUCCESS,
    UTILIZATION,
    WAITING,
)
from sparktui.engines.vllm.promql import QUANTILES

LATENCIES = (("ttft", "TTFT"), ("tpot", "TPOT"), ("e2e", "e2e"))
POSITION = "token_position"  # its label of a draft position


def _series(wire: str, extra: str = "") -> str:
    return f"{wire}{{{{{{sel}}{extra}}}}}"


def _counter(wire: str, extra: str = "") -> str:
    """The counter's rate, summed over its label sets."""
    return f"sum by ({{by}}) (rate({_series(wire, extra)}[{{w}}]))"


def _gauge(wire: str) -> str:
    """The gauge's value, the largest where several processes set it."""
    return f"max by ({{by}}) ({_series(wire)})"


def _ratio(numerator: str, denominator: str) -> str:
    return f"({numerator}) / ({denominator})"


def _histogram_quantile(base: str, q: float) -> str:
    return f"histogram_quantile({q}, sum by ({{by}}, le) (rate({_series(f'{base}_bucket')}[{{w}}])))"


def _histogram_mean(base: str) -> str:
    return f"{_counter(f'{base}_sum')} / {_counter(f'{base}_count')}"


def numbers() -> tuple[PromNumber, ...]:
    """Every number sparktui shows for a ``trtllm-serve`` instance that it exports, with its PromQL."""
    drafts = _counter(DRAFTED, f',{POSITION}="0"')
    accepted_by_position = (
        f'sum by ({{by}}, position) (label_replace(rate({_series(ACCEPTED)}[{{w}}]), "position", "$1", "{POSITION}", '
        '"(.*)"))'
    )
    out = [
        PromNumber("generation_tokens_per_s", "generation", _counter(GENERATION), " tok/s"),
        PromNumber("prompt_tokens_per_s", "prompt", _counter(PROMPT), " tok/s"),
        PromNumber(
            "prompt_tokens_computed_per_s",
            "prompt computed",
            f"({_counter(PROMPT)} - {_counter(CACHED)}) or {_counter(PROMPT)}",
            " tok/s",
        ),
        PromNumber("requests_finished_per_s", "finished", _counter(SUCCESS), " req/s"),
        PromNumber("prefix_cache_hit_rate", "prefix cache hit", _gauge(HIT_RATE), percent=True),
        PromNumber("acceptance_rate", "draft acceptance", _ratio(_counter(ACCEPTED), _counter(DRAFTED)), percent=True),
        PromNumber("mean_acceptance_length", "mean acceptance length", "1 + " + _ratio(_counter(ACCEPTED), drafts)),
        PromNumber(
            "per_position",
            "acceptance at position",
            f"({accepted_by_position}) / ignoring (position) group_left () ({drafts})",
            percent=True,
        ),
    ]
    for key, label in LATENCIES:
        base = HISTOGRAMS[key]
        for name, q in QUANTILES:
            out.append(PromNumber(f"{key}_{name}", f"{label} {name}", _histogram_quantile(base, q), " s"))
        out.append(PromNumber(f"{key}_mean", f"{label} mean", _histogram_mean(base), " s"))
    out += [
        PromNumber("kv_usage", "KV cache usage", _gauge(UTILIZATION), percent=True),
        PromNumber("running", "running", _gauge(RUNNING)),
        PromNumber("waiting", "waiting", _gauge(WAITING)),
        PromNumber(
            "spec_accept_length",
            "acceptance length (reported)",
            f"({_gauge(ACCEPTANCE_LENGTH)} != 0) unless on ({{by}}) {drafts}",
        ),
    ]
    return tuple(out)


NUMBERS = numbers()
