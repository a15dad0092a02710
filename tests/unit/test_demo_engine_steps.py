"""The demo engine's tokens per step are vLLM's: the prompt tokens a step computes count, not only
the decode tokens (``vllm:iteration_tokens_total`` observes computed prompt + generated tokens)."""

from __future__ import annotations

import random
from collections import defaultdict

from sparktui.demo.sim import PROFILES, Engine


class Recorder:
    """A metrics sink that keeps the totals."""

    def __init__(self) -> None:
        self.counters: dict[tuple[str, str], float] = defaultdict(float)
        self.histogram_sums: dict[str, float] = defaultdict(float)

    def add(self, counter: str, value: float, **labels: str) -> None:
        self.counters[counter, labels.get("source", "")] += value

    def observe(self, histogram: str, value: float, count: int = 1) -> None:
        self.histogram_sums[histogram] += value * count

    def set_gauge(self, gauge: str, value: float, **labels: str) -> None:
        pass


def test_the_demo_tokens_per_step_count_the_computed_prompt_tokens() -> None:
    sink = Recorder()
    engine = Engine(profile=PROFILES["qwen36"], sink=sink, rng=random.Random(7))
    for _ in range(3000):  # five simulated minutes
        engine.advance(0.1)
    computed = sink.counters["vllm:prompt_tokens_by_source", "local_compute"]
    assert computed > 0
    # Every computed prompt token was in some step (a preempted request's recompute adds more).
    assert sink.histogram_sums["vllm:iteration_tokens_total"] >= computed
