"""Peak memory and time of the Prometheus text parser on hostile scrapes (issue 17).

    python benchmarks/bench_parse_hostile.py [--write docs/performance.md]

Each case is a body under the default 8 MiB cap that a broken or hostile endpoint could send. For
each: what the parser makes of it (samples, or the ParseError's reason), the peak memory the parse
allocates (tracemalloc, beyond the text itself) in MB and per byte of text, and the median time of a
parse by a parser with the vLLM filter (``PromParser(keep=WANTED)``, what a poll uses), a fresh
parser each time: a poll that sends new heads every scrape gets no help from the memo.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from _common import write_section

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sparktui.engines.vllm.scrape import WANTED  # noqa: E402
from sparktui.model.promtext import MAX_LABEL_VALUE, ParseError, PromParser  # noqa: E402

MB = 1_000_000
SCRAPE = ROOT / "tests" / "data" / "vllm-0.33" / "mtp2-steady" / "scrape-015.prom"
QUICK_ARGS = ("--runs", "1")


def _huge_label_value() -> str:
    return 'vllm:num_requests_running{model_name="' + "x" * (5 * MB) + '"} 1\n'


def _values_at_the_cap() -> str:
    value = "v" * MAX_LABEL_VALUE
    return "".join(f'vllm:num_requests_running{{model_name="{value}",n="{i}"}} 1\n' for i in range(1_900))


def _many_labels_one_series() -> str:
    labels = ",".join(f'l{i}="{i}"' for i in range(100_000))
    return f"vllm:num_requests_running{{{labels}}} 1\n"


def _long_name() -> str:
    return "a" * (5 * MB) + " 1\n"


def _many_short_series() -> str:
    return "".join(f'vllm:num_requests_running{{model_name="m{i}"}} {i}\n' for i in range(150_000))


def _many_unwanted_series() -> str:
    return "".join(f'junk{{n="{i}",path="/some/where/{i}"}} {i}\n' for i in range(150_000))


def _escapes() -> str:
    value = '\\"' * (MAX_LABEL_VALUE // 2)  # 2,048 escaped quotes: 4,096 characters, 2,048 once unescaped
    return "".join(f'vllm:num_requests_running{{model_name="{value}",n="{i}"}} 1\n' for i in range(1_000))


CASES: tuple[tuple[str, Callable[[], str]], ...] = (
    ("a real vLLM scrape (reference)", SCRAPE.read_text),
    ("one 5 MB label value", _huge_label_value),
    (f"1,900 series, each a {MAX_LABEL_VALUE}-character label value", _values_at_the_cap),
    ("one series with 100,000 labels", _many_labels_one_series),
    ("one 5 MB metric name", _long_name),
    ("150,000 short vLLM series", _many_short_series),
    ("150,000 series the dashboard does not read", _many_unwanted_series),
    ("1,000 label values of escaped quotes", _escapes),
)


def _outcome(text: str) -> str:
    try:
        expo = PromParser(keep=WANTED.__contains__).parse(text)
    except ParseError as exc:
        return f"ParseError: {exc.reason}"
    count = sum(len(s) for s in expo.samples.values())
    return f"{count:,} sample{'' if count == 1 else 's'}"


def _peak_bytes(text: str) -> int:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        _outcome(text)
        _size, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak


def _median_ms(text: str, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        _outcome(text)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def measure(runs: int) -> list[tuple[str, int, str, float, float]]:
    rows = []
    for name, make in CASES:
        text = make()
        size = len(text.encode())
        rows.append((name, size, _outcome(text), _peak_bytes(text) / MB, _median_ms(text, runs)))
    return rows


def report(rows: list[tuple[str, int, str, float, float]]) -> str:
    lines = [
        "| hostile body | bytes | the parser says | peak MB | peak bytes per byte | ms per parse |",
        "|---|---|---|---|---|---|",
    ]
    for name, size, outcome, peak_mb, ms in rows:
        lines.append(f"| {name} | {size:,} | {outcome} | {peak_mb:.1f} | {peak_mb * MB / size:.1f} | {ms:.1f} |")
    machine = f"{platform.python_implementation()} {platform.python_version()}, {platform.machine()}"
    return "\n".join(lines) + f"\n\nMeasured on {machine}.\n"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5, help="timed parses per case (median)")
    ap.add_argument("--write", type=Path, help="replace the hostile-parse section of this markdown file")
    args = ap.parse_args()
    table = report(measure(args.runs))
    print(table)
    if args.write:
        write_section(args.write, "bench_parse_hostile", table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
