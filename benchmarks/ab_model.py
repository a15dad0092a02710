"""The model's per-scrape work, this tree's beside another commit's, in one process.

    python benchmarks/ab_model.py [--base main] [--head COMMIT] [--repeats 15] [--number 50]

One vLLM instance's work per scrape as the dashboard does it: parse + normalise + ``ScrapeTracker.observe``,
then the last interval's numbers (progress, canary and the diagnosis read them) and the 60 s window's
(the view). ``sparktui/model`` of ``--base`` is extracted from git into a temporary package beside this
tree's, and the two run alternately on the same scrapes, the median of ``--repeats`` runs of ``--number``
scrapes each: on a busy machine two separate runs are not comparable. Not a ``bench_*`` script: it
compares two versions, so ``run_all.py`` does not run it. ``--head`` compares two commits (one
fix: ``--base FIX^ --head FIX``) instead of the base and this tree. Every step also checks that both
derive the same numbers (``EngineRates`` equal), so a speed-up that changed a figure fails here.
"""

from __future__ import annotations

import argparse
import importlib
import io
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.fixture_fleet import filter_exposition  # noqa: E402

DATA = ROOT / "tests" / "data"
SOURCES = {
    "real vLLM 0.32 (2 scrapes)": [DATA / "vllm-0.32" / "before.prom", DATA / "vllm-0.32" / "after.prom"],
    "vLLM 0.33 fixture mtp2-steady": sorted((DATA / "vllm-0.33" / "mtp2-steady").glob("scrape-*.prom")),
    "vLLM 0.32 data parallel dp2": sorted((DATA / "vllm-0.32" / "dp2").glob("scrape-*.prom")),
}


def model_package(commit: str, into: Path, name: str) -> str:
    """``sparktui/model`` (and ``sparktui/engines``, where vLLM's reading moved) at ``commit`` as the
    package ``name`` under ``into``; its name."""
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-tree", "--name-only", commit, "sparktui/"], check=True, capture_output=True
    ).stdout.decode()
    parts = [path for path in ("sparktui/model", "sparktui/engines") if path in listed.split()]
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", commit, *parts], check=True, capture_output=True
    ).stdout
    package = into / name
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        for member in tar.getmembers():
            if member.isfile() and member.name.endswith(".py"):
                extracted = tar.extractfile(member)
                assert extracted is not None
                text = extracted.read().decode()
                for part in ("model", "engines"):
                    text = text.replace(f"sparktui.{part}", f"{name}.{part}")
                target = package / Path(member.name).relative_to("sparktui")
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text)
    if str(into) not in sys.path:
        sys.path.insert(0, str(into))
    return name


def vllm_reading(package: str) -> ModuleType:
    """The module of vLLM's ``normalise``: ``engines/vllm/scrape.py``, or ``model/vllm.py`` before it moved."""
    try:
        return importlib.import_module(f"{package}.engines.vllm.scrape")
    except ModuleNotFoundError:
        return importlib.import_module(f"{package}.model.vllm")


class Instance:
    """One instance's parser and tracker from one copy of the model, fed the scrapes in a loop."""

    def __init__(self, package: str, scrapes: list[str]) -> None:
        promtext: ModuleType = importlib.import_module(f"{package}.model.promtext")
        vllm = vllm_reading(package)
        tracker: ModuleType = importlib.import_module(f"{package}.model.tracker")
        self.parser = promtext.PromParser(keep=vllm.WANTED.__contains__)
        self.normalise: Callable[[object], object] = vllm.normalise
        self.tracker = tracker.ScrapeTracker(max_age_s=120.0)  # COUNTER_WINDOWS_KEPT x 60 s, as the dashboard
        self.scrapes = scrapes
        self.calls = 0

    def step(self) -> tuple[object, object]:
        self.calls += 1
        text = self.scrapes[self.calls % len(self.scrapes)]
        self.tracker.observe(float(self.calls), self.normalise(self.parser.parse(text)))
        return self.tracker.last_interval_rates(), self.tracker.rates(window_s=60.0)


def timed(instance: Instance, number: int) -> float:
    start = time.perf_counter()
    for _ in range(number):
        instance.step()
    return (time.perf_counter() - start) / number * 1000


def same_numbers(a: object, b: object) -> bool:
    """Equal dataclasses from the two copies (their classes differ, so compare field by field)."""
    return repr(a) == repr(b)


def measure(base: str, head: str, repeats: int, number: int) -> list[tuple[str, float, float]]:
    rows = []
    for name, paths in SOURCES.items():
        from sparktui.engines.vllm.scrape import WANTED

        scrapes = [filter_exposition(p.read_text(), set(WANTED)) for p in paths]
        old, new = Instance(base, scrapes), Instance(head, scrapes)
        for _ in range(3 * len(scrapes)):  # warm, and check every step derives the same numbers
            a, b = old.step(), new.step()
            if not same_numbers(a, b):
                raise SystemExit(f"{name}: the numbers differ:\n{a}\n{b}")
        old_ms: list[float] = []
        new_ms: list[float] = []
        for i in range(repeats):
            pair = [(old, old_ms), (new, new_ms)]
            for instance, out in pair if i % 2 == 0 else pair[::-1]:
                out.append(timed(instance, number))
        rows.append((name, statistics.median(old_ms), statistics.median(new_ms)))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", default="main", help="the commit to compare with (default: main)")
    ap.add_argument("--head", help="a commit to time instead of this tree")
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--number", type=int, default=50)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = model_package(args.base, Path(tmp), "sparktui_base")
        head = model_package(args.head, Path(tmp), "sparktui_head") if args.head else "sparktui"
        rows = measure(base, head, args.repeats, args.number)
    print(f"| scrapes (filtered, as polled) | {args.base} ms per scrape | {args.head or 'this tree'} | change |")
    print("|---|---|---|---|")
    for name, old, new in rows:
        print(f"| {name} | {old:.3f} | {new:.3f} | {(new - old) / old:+.0%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
