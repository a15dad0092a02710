"""llama.cpp's numbers as PromQL: every number sparktui shows for a ``llama-server`` that its ``/metrics``
exports, as Prometheus would compute it, for ``snapshot --compare`` (``Engine.numbers``;
docs/prometheus.md).

Written the way its reading (``scrape``) computes each, from the same table (``COUNTERS``: which wire
names add to which neutral key):

- generation: the rate of ``tokens_predicted_total``, which counts a request's tokens when it ends.
  The direct reading also counts those of the requests still running (``/slots``, which Prometheus
  does not scrape), so the two agree over a window that no request straddles at either end;
- prompt: every prompt token, computed and cached (``prompt_tokens_total`` + ``prompt_tokens_cached_total``,
  each that is served); prompt computed: ``prompt_tokens_total``; the share of prompt tokens from the
  cache: cached over both;
- speculative decoding from the ``spec_decode_num_*_total`` counters: acceptance = accepted over drafted
  tokens, mean acceptance length 1 + accepted tokens per draft, each ``position`` of
  ``spec_decode_num_accepted_tokens_per_pos_total`` accepted tokens per draft. llama-server serves them
  at 0 without a draft model: their ratios are then 0 / 0, no number, as the reading shows none;
- running and waiting: the gauges ``requests_processing`` and ``requests_deferred``.

Not compared: the context in use (KV usage) and the sleep state, which are read from ``/slots`` and
``/props``; latencies (it exports no histograms), finished requests (it counts none) and preemptions.
A router (``--models-dir``) is not compared either: its ``/metrics`` is per model (``?model=``, which
loads the model), so Prometheus has no series of its models (docs/engines.md, router mode).

Pure text from the tables: no I/O here.
"""

from __future__ import annotations

from sparktui.engines.base import PromNumber
from sparktui.engines.llamacpp.scrape import ACCEPTED_PER_POSITION, COUNTERS, RUNNING, WAITING


def _series(wire: str) -> str:
    return f"{wire}{{{{{{sel}}}}}}"


def _rate(wire: str) -> str:
    return f"sum by ({{by}}) (rate({_series(wire)}[{{w}}]))"


def _counter(key: str) -> str:
    """The rate of the neutral counter ``key``: of the one wire name that adds to it, or of the sum of
    the two that are served (the reading adds each that is)."""
    wires = [wire for wire, keys in COUNTERS.items() if key in keys]
    if len(wires) == 1:
        return _rate(wires[0])
    first, second = wires  # prompt_tokens: computed and cached
    return f"({_rate(first)} + {_rate(second)}) or {_rate(first)} or {_rate(second)}"


def _gauge(wire: str) -> str:
    return f"sum by ({{by}}) ({_series(wire)})"


def _ratio(numerator: str, denominator: str) -> str:
    return f"({numerator}) / ({denominator})"


def numbers() -> tuple[PromNumber, ...]:
    """Every number sparktui shows for a ``llama-server`` that its ``/metrics`` exports, with its PromQL."""
    accepted_by_position = f"sum by ({{by}}, position) (rate({_series(ACCEPTED_PER_POSITION)}[{{w}}]))"
    return (
        PromNumber("generation_tokens_per_s", "generation", _counter("generation_tokens"), " tok/s"),
        PromNumber("prompt_tokens_per_s", "prompt", _counter("prompt_tokens"), " tok/s"),
        PromNumber(
            "prompt_tokens_computed_per_s", "prompt computed", _counter("prompt_by_source:local_compute"), " tok/s"
        ),
        PromNumber(
            "acceptance_rate",
            "draft acceptance",
            _ratio(_counter("spec_accepted_tokens"), _counter("spec_draft_tokens")),
            percent=True,
        ),
        PromNumber(
            "mean_acceptance_length",
            "mean acceptance length",
            "1 + " + _ratio(_counter("spec_accepted_tokens"), _counter("spec_drafts")),
        ),
        PromNumber(
            "per_position",
            "acceptance at position",
            f"({accepted_by_position}) / ignoring (position) group_left () ({_counter('spec_drafts')})",
            percent=True,
        ),
        PromNumber("running", "running", _gauge(RUNNING)),
        PromNumber("waiting", "waiting", _gauge(WAITING)),
        PromNumber(
            "prompt_cache_hit_share",
            "prompt tokens from the cache",
            _ratio(_counter("prompt_by_source:local_cache_hit"), _counter("prompt_tokens")),
            percent=True,
        ),
    )


NUMBERS = numbers()
