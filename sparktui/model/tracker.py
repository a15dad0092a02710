"""History of one vLLM instance: normalised scrapes in, window numbers out."""

from __future__ import annotations

from collections.abc import Iterable

from sparktui.model.counters import CounterHistory, Deltas, flatten
from sparktui.model.derive import EngineRates, derive_rates
from sparktui.model.scrape import EngineScrape, ModelScrape


class ScrapeTracker:
    """Keeps reset-corrected counter history per served model of one vLLM instance, and per engine
    of a data-parallel one (``ModelScrape.per_engine``), each engine's rates by the same ``derive_rates``.

    Derived numbers change only when a scrape arrives, but the render tick, the status model and the
    diagnosis all ask for them; each answer is kept until the next ``observe``.
    """

    def __init__(self, max_age_s: float = 900.0) -> None:
        self._max_age_s = max_age_s
        self._histories: dict[str, CounterHistory] = {}
        self.latest: EngineScrape | None = None
        self.latest_t: float | None = None
        self._memo: dict[tuple[str, str | None, float | None], EngineRates | None] = {}
        self._engine_histories: dict[tuple[str, str], CounterHistory] = {}  # (model, engine)
        self._engine_memo: dict[tuple[str | None, float | None], dict[str, EngineRates | None]] = {}
        self.since: float | None = None  # windows start no earlier than this (``restart``)

    def restart(self, t: float) -> None:
        """Start every window at ``t``: what came before (an action's own warmup, whose cold requests
        wait for the JIT) is not the engine's latency now. Numbers read "–" until two scrapes follow."""
        self.since = t
        self._memo.clear()
        self._engine_memo.clear()

    def observe(self, t: float, scrape: EngineScrape) -> None:
        for name, model in scrape.models.items():
            history = self._histories.get(name)
            if history is None:
                history = self._histories[name] = CounterHistory(max_age_s=self._max_age_s)
            history.add(t, flatten(model), scrape.process_start)
            for engine, part in model.per_engine.items():
                key = (name, engine)
                engine_history = self._engine_histories.get(key)
                if engine_history is None:
                    engine_history = self._engine_histories[key] = CounterHistory(max_age_s=self._max_age_s)
                engine_history.add(t, flatten(part), scrape.process_start)
        self.latest, self.latest_t = scrape, t
        self._forget_older_than(t - self._max_age_s)
        self._memo.clear()
        self._engine_memo.clear()

    def _forget_older_than(self, horizon: float) -> None:
        """Drop the history of a model or engine not scraped since ``horizon``: a server whose names
        change with every scrape (broken or hostile) keeps at most a window's worth, not one per scrape."""
        for name in [k for k, h in self._histories.items() if not _since(h, horizon)]:
            del self._histories[name]
        for key in [k for k, h in self._engine_histories.items() if not _since(h, horizon)]:
            del self._engine_histories[key]

    def _model(self, model_name: str | None) -> tuple[CounterHistory, ModelScrape] | None:
        if self.latest is None or not self.latest.models:
            return None
        name = model_name if model_name is not None else min(self.latest.models)
        model = self.latest.models.get(name)
        history = self._histories.get(name)
        if model is None or history is None:
            return None
        return history, model

    def rates(self, model_name: str | None = None, window_s: float | None = None) -> EngineRates | None:
        """Numbers over the last ``window_s`` seconds (everything kept, if None); None before two scrapes."""
        key = ("window", model_name, window_s)
        if key in self._memo:
            return self._memo[key]
        found = self._model(model_name)
        if found is None:
            return None
        history, model = found
        deltas = history.window(window_s, self.since)
        rates = self._memo[key] = derive_rates(deltas, model) if deltas is not None else None
        return rates

    def summed_rates(self, window_s: float | None = None) -> EngineRates | None:
        """The numbers of every model of the last scrape together, over the window: each model's
        increases on its own reset-safe history (a model loaded again counts from its own 0), added up
        over the longest of their windows (a model read for less of it adds what it did in its part).
        A model the last scrape no longer holds (unloaded) adds nothing. None before two scrapes of any."""
        key = ("summed", None, window_s)
        if key in self._memo:
            return self._memo[key]
        found: list[tuple[Deltas, ModelScrape]] = []
        for name, model in self.latest.models.items() if self.latest is not None else ():
            history = self._histories.get(name)
            deltas = history.window(window_s, self.since) if history is not None else None
            if deltas is not None:
                found.append((deltas, model))
        rates = self._memo[key] = derive_rates(_added(d for d, _ in found), found[0][1]) if found else None
        return rates

    def engine_rates(
        self, model_name: str | None = None, window_s: float | None = None
    ) -> dict[str, EngineRates | None]:
        """Each engine's own numbers over the window (as ``rates``), by engine; {} with one engine."""
        key = (model_name, window_s)
        found = self._engine_memo.get(key)
        if found is not None:
            return found
        found = self._engine_memo[key] = {}
        latest = self._model(model_name)
        if latest is None:
            return found
        _history, model = latest
        for engine, part in model.per_engine.items():
            history = self._engine_histories.get((model.model_name, engine))
            deltas = history.window(window_s, self.since) if history is not None else None
            found[engine] = derive_rates(deltas, part) if deltas is not None else None
        return found

    def last_interval_rates(self, model_name: str | None = None) -> EngineRates | None:
        """Numbers between the last two scrapes."""
        key = ("last", model_name, None)
        if key in self._memo:
            return self._memo[key]
        found = self._model(model_name)
        if found is None:
            return None
        history, model = found
        deltas = history.last_interval()
        rates = self._memo[key] = derive_rates(deltas, model) if deltas is not None else None
        return rates

    def interval_rates(self, model_name: str | None = None) -> list[EngineRates]:
        """Numbers for each pair of consecutive scrapes kept, oldest first."""
        found = self._model(model_name)
        if found is None:
            return []
        history, model = found
        out = []
        for deltas in history.intervals():
            rates = derive_rates(deltas, model)
            if rates is not None:
                out.append(rates)
        return out


def _added(windows: Iterable[Deltas]) -> Deltas:
    """Several windows' increases as one: each key's increases added, over the longest window."""
    values: dict[str, float] = {}
    seconds, reset = 0.0, False
    for deltas in windows:
        for key in deltas.values:
            increase = deltas.get(key)
            if increase is not None:
                values[key] = values.get(key, 0.0) + increase
        seconds, reset = max(seconds, deltas.seconds), reset or deltas.reset
    return Deltas(seconds=seconds, values=values, reset=reset)


def _since(history: CounterHistory, horizon: float) -> bool:
    """Whether ``history`` has a point at or after ``horizon``."""
    return history.latest is not None and history.latest.t >= horizon
