"""Data-parallel engines: the numbers of each engine of one vLLM server, and how they compare.

A server started with ``--data-parallel-size N`` (one API server) exports every ``vllm:`` series once
per engine (``engine="0"``, ``engine="1"``...). The instance's totals are the sums; this module gives
each engine's own numbers beside them (``EngineView``), the KV cache of the instance in one kind of
unit (``KvLoad``: used tokens over capacity, and the busiest engine named), and whether an engine does
much more or much less than its share of the instance's generation (``share_ratios``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sparktui.model.derive import EngineRates
from sparktui.model.scrape import EngineScrape, ModelScrape, engine_order
from sparktui.model.units import NO_DATA, fmt_number, fmt_pct, fmt_rate, fmt_tokens


@dataclass(frozen=True, slots=True)
class KvLoad:
    """The KV cache of one instance over all its engines, every figure of one kind.

    ``usage`` is total used tokens over total capacity (Σ usage_e x capacity_e / Σ capacity_e); None
    when an engine's capacity is not known (with one engine, its own usage). ``busiest_usage`` is the
    highest engine's usage: the engine that preempts first, the one the KV threshold judges.
    """

    engines: int
    usage: float | None
    used_tokens: float | None
    capacity_tokens: float | None
    busiest_engine: str
    busiest_usage: float


def busiest_engine(usage_by_engine: Mapping[str, float]) -> str | None:
    """The engine with the highest KV usage (the lowest-numbered of equals); None with none."""
    engines = sorted(usage_by_engine, key=engine_order)
    return max(engines, key=lambda e: usage_by_engine[e]) if engines else None


def kv_load(usage_by_engine: Mapping[str, float], capacity_by_engine: Mapping[str, float | None]) -> KvLoad | None:
    """``KvLoad`` from each engine's ``vllm:kv_cache_usage_perc`` and its capacity in tokens (None:
    unknown); None when no engine publishes its usage."""
    busiest = busiest_engine(usage_by_engine)
    if busiest is None:
        return None
    engines = sorted(usage_by_engine, key=engine_order)
    capacities = [capacity_by_engine.get(e) for e in engines]
    known = [c for c in capacities if c is not None]
    capacity = used = usage = None
    if len(known) == len(engines) and sum(known) > 0:
        capacity = sum(known)
        used = sum(usage_by_engine[e] * c for e, c in zip(engines, known, strict=True))
        usage = used / capacity
    elif len(engines) == 1:
        usage = usage_by_engine[engines[0]]
    return KvLoad(
        engines=len(engines),
        usage=usage,
        used_tokens=used,
        capacity_tokens=capacity,
        busiest_engine=busiest,
        busiest_usage=usage_by_engine[busiest],
    )


def busiest_engine_words(kv: KvLoad | None) -> str:
    """ " on engine 1" after a KV figure that is the busiest engine's, when there are several; ""."""
    return f" on engine {kv.busiest_engine}" if kv is not None and kv.engines > 1 else ""


def kv_line(kv: KvLoad | None) -> str:
    """The KV cache in words, for the node screen and ``snapshot`` alike: "35.2% of 983k tokens" for
    one engine; "31.6% of 2.0M tokens (621k used), busiest engine 1: 35.2%" for several, and without
    every engine's capacity only the busiest engine's share, named as such."""
    if kv is None:
        return NO_DATA
    if kv.engines == 1:
        return f"{fmt_pct(kv.usage)} of {fmt_tokens(kv.capacity_tokens)} tokens"
    busiest = f"busiest engine {kv.busiest_engine}: {fmt_pct(kv.busiest_usage)}"
    if kv.usage is None:
        return f"{NO_DATA} (the engines' capacity is not known), {busiest}"
    used = fmt_tokens(kv.used_tokens)
    return f"{fmt_pct(kv.usage)} of {fmt_tokens(kv.capacity_tokens)} tokens ({used} used), {busiest}"


def share_ratios(generation_by_engine: Mapping[str, float | None]) -> dict[str, float | None]:
    """Each engine's generation tok/s over an even share of the instance's: ``gen_e x N / Σ gen``
    (1.0: its share; 0.73: 27 % under it). None for every engine when one has no rate or the
    instance generated nothing (no traffic is no imbalance)."""
    values = list(generation_by_engine.values())
    known = [v for v in values if v is not None]
    total = sum(known)
    if len(known) != len(values) or total <= 0:
        return dict.fromkeys(generation_by_engine)
    count = len(values)
    return {engine: value * count / total for engine, value in generation_by_engine.items() if value is not None}


def imbalanced(share_ratio: float | None, threshold: float) -> bool:
    """An engine whose share ratio is off 1 by more than ``threshold`` (``engine_imbalance_warn``)."""
    return share_ratio is not None and abs(share_ratio - 1.0) > threshold


@dataclass(frozen=True, slots=True)
class EngineView:
    """One engine of a data-parallel instance. ``rates`` are its own over the window (the same
    ``derive_rates`` as the instance's, on its own reset-safe counter history)."""

    engine: str
    running: float | None
    waiting: float | None
    kv_usage: float | None
    kv_capacity_tokens: float | None
    rates: EngineRates | None
    share_ratio: float | None  # ``share_ratios``: its generation over an even share of the instance's
    imbalanced: bool


def engine_views(
    model: ModelScrape,
    scrape: EngineScrape,
    rates_by_engine: Mapping[str, EngineRates | None],
    imbalance_threshold: float,
) -> tuple[EngineView, ...]:
    """Each engine of ``model`` (from ``scrape``), in engine order; () with one engine."""
    if not model.per_engine:
        return ()
    generation = {
        engine: rates.generation_tokens_per_s if (rates := rates_by_engine.get(engine)) is not None else None
        for engine in model.per_engine
    }
    ratios = share_ratios(generation)
    return tuple(
        EngineView(
            engine=engine,
            running=part.running,
            waiting=part.waiting,
            kv_usage=part.kv_usage_max,
            kv_capacity_tokens=scrape.kv_capacity_of(engine),
            rates=rates_by_engine.get(engine),
            share_ratio=ratios.get(engine),
            imbalanced=imbalanced(ratios.get(engine), imbalance_threshold),
        )
        for engine, part in model.per_engine.items()
    )


def data_parallel_summary(engines: tuple[EngineView, ...] | list[EngineView]) -> str:
    """A data-parallel instance in one line, for the fleet's detail and ``snapshot``: "2 engines,
    generation 832 / 1,449 tok/s (0.73x / 1.27x an even share), imbalanced: engine 0, 1"; "" for one
    engine."""
    if not engines:
        return ""
    gen = " / ".join(fmt_rate(e.rates.generation_tokens_per_s if e.rates else None, "") for e in engines)
    shares = " / ".join(f"{fmt_number(e.share_ratio, 2)}x" for e in engines)
    off = [e.engine for e in engines if e.imbalanced]
    marker = f", imbalanced: engine {', '.join(off)}" if off else ""
    return f"{len(engines)} engines, generation {gen} tok/s ({shares} an even share){marker}"
