"""Parse + derive time per vLLM scrape, against prometheus_client's parser on the same text.

    python benchmarks/bench_parse.py [--write docs/performance.md]

Each figure is the median of several runs of N repetitions, in milliseconds per scrape, on the
fixtures in tests/data/vllm-0.33, then on the two real scrapes of vLLM 0.32 in tests/data/vllm-0.32 (the
real engine's 374 ``vllm:`` lines). "ours, steady" is the poll-loop case: a parser that has seen
the target before (its memo of series heads is warm) and the tracker that derives the numbers.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from _common import write_section
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sparktui.engines.vllm.scrape import WANTED, normalise  # noqa: E402
from sparktui.model.promtext import PromParser, parse  # noqa: E402
from sparktui.model.tracker import ScrapeTracker  # noqa: E402
from tests.support.fixture_fleet import filter_exposition  # noqa: E402

SCENARIO = ROOT / "tests" / "data" / "vllm-0.33" / "mtp2-steady"
SCRAPE = SCENARIO / "scrape-015.prom"
REAL_SCRAPES = (
    ROOT / "tests" / "data" / "vllm-0.32" / "before.prom",
    ROOT / "tests" / "data" / "vllm-0.32" / "after.prom",
)


def per_call_ms(fn: Callable[[], object], repeat: int = 7, number: int = 100) -> float:
    fn()
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        runs.append((time.perf_counter() - start) / number * 1000)
    return statistics.median(runs)


def measure_source(scrapes: list[str]) -> list[tuple[str, float, str]]:
    """The rows for one target's scrapes (the first one alone for the single-text rows)."""
    text = scrapes[0]
    filtered = filter_exposition(text, set(WANTED))
    rows: list[tuple[str, float, str]] = []

    rows.append(
        (
            "prometheus_client parser alone",
            per_call_ms(lambda: list(text_string_to_metric_families(text)), number=20),
            f"{len(text):,} bytes",
        )
    )
    rows.append(("ours: parse, cold (new parser each time)", per_call_ms(lambda: parse(text), number=20), ""))

    parser = PromParser(keep=WANTED.__contains__)
    rows.append(("ours: parse, steady (warm memo)", per_call_ms(lambda: parser.parse(text)), ""))

    tracker = ScrapeTracker()
    calls = [0]

    def parse_and_derive(body_list: list[str]) -> None:
        calls[0] += 1
        body = body_list[calls[0] % len(body_list)]
        tracker.observe(float(calls[0]), normalise(parser.parse(body)))
        tracker.rates(window_s=60.0)

    rows.append(
        (
            "ours: parse + normalise + derive (60 s window), full scrape",
            per_call_ms(lambda: parse_and_derive(scrapes)),
            "the whole poll-loop cost",
        )
    )
    filtered_scrapes = [filter_exposition(s, set(WANTED)) for s in scrapes]
    rows.append(
        (
            "ours: same, with /metrics?name[]= filter",
            per_call_ms(lambda: parse_and_derive(filtered_scrapes)),
            f"{len(filtered):,} bytes on the wire",
        )
    )
    return rows


def report(rows: list[tuple[str, float, str]]) -> str:
    baseline = rows[0][1]
    lines = [
        "| what | ms per scrape | vs prometheus_client | note |",
        "|---|---|---|---|",
    ]
    for name, ms, note in rows:
        lines.append(
            f"| {name} | {ms:.3f} | {baseline / ms:.1f}x faster | {note} |"
            if ms != baseline
            else f"| {name} | {ms:.3f} | 1x | {note} |"
        )
    return "\n".join(lines) + "\n"


def measure() -> str:
    """Both tables: the vLLM 0.33 fixture scenario, then the real vLLM 0.32 engine's own scrapes."""
    machine = f"{platform.python_implementation()} {platform.python_version()}, {platform.machine()}"
    fixture = [p.read_text() for p in sorted(SCENARIO.glob("scrape-*.prom"))]
    fixture = fixture[fixture.index(SCRAPE.read_text()) :] + fixture[: fixture.index(SCRAPE.read_text())]
    real = [p.read_text() for p in REAL_SCRAPES]
    real_lines = sum(line.startswith("vllm:") for line in real[0].splitlines())
    return (
        f"`{SCRAPE.relative_to(ROOT)}` (vLLM 0.33's metrics code, speculative decoding on):\n\n"
        + report(measure_source(fixture))
        + f"\nThe real engine: `{REAL_SCRAPES[0].parent.relative_to(ROOT)}/{{before,after}}.prom`, two scrapes of a "
        f"real vLLM 0.32 CPU server ({real_lines} `vllm:` lines; no speculative decoding):\n\n"
        + report(measure_source(real))
        + f"\nMeasured on {machine}.\n"
    )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--write", type=Path, help="replace the parse section of this markdown file")
    args = ap.parse_args()
    table = measure()
    print(table)
    if args.write:
        write_section(args.write, "bench_parse", table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
