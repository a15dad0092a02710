"""Replicas of one served model across the fleet: latency from merged histogram buckets.

A percentile of the fleet is the percentile of every request the fleet served, so it comes from the
replicas' bucket increases added together (``merge_histograms``), then ``histogram_quantile``:
the PromQL ``histogram_quantile(q, sum by (le) (increase(x_bucket[w])))``. An average of the
replicas' percentiles is no percentile of anything (a replica serving 10 requests would weigh as
much as one serving 10,000).

Each replica's increases are over its own window, which ends at its own last scrape: the poll keeps
those ends within one poll interval of each other, so the windows are the same length and almost
the same span.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sparktui.model.derive import LatencySummary
from sparktui.model.fleet import InstanceView, NodeView
from sparktui.model.scrape import HistogramSample

# The latencies merged across replicas, in the order they are shown.
REPLICA_LATENCY_KEYS = ("ttft", "e2e", "itl", "tpot", "queue")

# A replica is named slowest only by a p90 TTFT over at least this many requests in the window: with
# fewer, its p90 is one or two requests (the 90th percentile of 10 observations is the 9th), and a
# replica that served 2 slow requests would be named on noise.
SLOWEST_MIN_REQUESTS = 20


def merge_histograms(histograms: Sequence[HistogramSample]) -> HistogramSample | None:
    """The sum of ``histograms`` (cumulative bucket increases) on the bounds they all have.

    A cumulative count at bound ``le`` is exact for every histogram that has that bound, so on the
    common bounds the sum is exact: replicas with finer buckets lose only resolution, never
    observations (+Inf, which every histogram has, keeps the whole count). PromQL's
    ``sum by (le)`` instead sums each ``le`` over the series that have it, so a bound only one
    replica has holds one replica's count beside others' totals: the buckets are not monotonic and
    ``histogram_quantile`` answers from a histogram nobody observed. None without histograms.
    """
    if not histograms:
        return None
    common = set(histograms[0].bounds)
    for hist in histograms[1:]:
        common &= set(hist.bounds)
    bounds = tuple(sorted(common))
    if not bounds or not math.isinf(bounds[-1]):
        return None
    cumulative = [0.0] * len(bounds)
    for hist in histograms:
        at = dict(zip(hist.bounds, hist.cumulative, strict=True))
        for index, bound in enumerate(bounds):
            cumulative[index] += at[bound]
    return HistogramSample(
        bounds=bounds,
        cumulative=tuple(cumulative),
        sum=sum(h.sum for h in histograms),
        count=sum(h.count for h in histograms),
    )


@dataclass(frozen=True, slots=True)
class Replica:
    """One instance serving the model: its own TTFT over the window and the requests behind it."""

    node: str
    instance: str
    ttft: LatencySummary | None  # None: no rates (not answering, stale, or a single scrape so far)

    @property
    def where(self) -> str:
        return f"{self.node}/{self.instance}"

    @property
    def requests(self) -> float | None:
        """Requests that got their first token in the window (the TTFT histogram's count)."""
        return self.ttft.count if self.ttft is not None else None


@dataclass(frozen=True, slots=True)
class ModelReplicas:
    """A model served by two or more instances: the fleet's latency over all of them.

    ``latency``: per key of ``REPLICA_LATENCY_KEYS``, the summary of the merged bucket increases of
    the replicas that have rates (its ``count`` is the requests behind it). ``coarsened``: the keys
    whose replicas' bucket bounds differ, merged on the bounds they share. ``slowest``: the replica
    with the highest own p90 TTFT among those with at least ``SLOWEST_MIN_REQUESTS`` requests, when
    two or more have that many (None otherwise: there is nothing to compare it with).
    """

    model: str
    replicas: tuple[Replica, ...]
    latency: Mapping[str, LatencySummary]
    coarsened: tuple[str, ...]
    slowest: Replica | None

    JSON_PROPERTIES = ("reporting",)

    @property
    def reporting(self) -> int:
        """Replicas whose numbers are in the merge."""
        return sum(1 for r in self.replicas if r.ttft is not None)


def _model_of(instance: InstanceView) -> str | None:
    if instance.url is None:  # a tensor-parallel worker: part of its head's replica, not one of its own
        return None
    return instance.model_name or (instance.served_models[0] if instance.served_models else None)


def slowest_replica(replicas: Sequence[Replica], min_requests: float = SLOWEST_MIN_REQUESTS) -> Replica | None:
    """The replica with the highest p90 TTFT among those with ``min_requests`` requests or more in
    the window; None when fewer than two qualify."""
    eligible = [r for r in replicas if r.ttft is not None and r.ttft.p90 is not None and r.ttft.count >= min_requests]
    if len(eligible) < 2:
        return None
    return max(eligible, key=lambda r: r.ttft.p90 if r.ttft is not None and r.ttft.p90 is not None else -math.inf)


def model_replicas(views: Sequence[NodeView]) -> tuple[ModelReplicas, ...]:
    """Every model that two or more instances of the fleet serve, by model name; a model served once
    is not listed (its numbers are its instance's)."""
    by_model: dict[str, list[tuple[NodeView, InstanceView]]] = {}
    for view in views:
        for instance in view.instances:
            model = _model_of(instance)
            if model is not None:
                by_model.setdefault(model, []).append((view, instance))
    out: list[ModelReplicas] = []
    for model, members in sorted(by_model.items()):
        if len(members) < 2:
            continue
        replicas = tuple(
            Replica(view.name, i.name, i.rates.latency.get("ttft") if i.rates is not None else None)
            for view, i in members
        )
        latency: dict[str, LatencySummary] = {}
        coarsened: list[str] = []
        for key in REPLICA_LATENCY_KEYS:
            found = [i.rates.histograms[key] for _, i in members if i.rates is not None and key in i.rates.histograms]
            merged = merge_histograms(found)
            if merged is None:
                continue
            latency[key] = LatencySummary.of(merged)
            if any(h.bounds != merged.bounds for h in found):
                coarsened.append(key)
        out.append(ModelReplicas(model, replicas, latency, tuple(coarsened), slowest_replica(replicas)))
    return tuple(out)
