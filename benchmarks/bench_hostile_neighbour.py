"""A good node beside a hostile one (issue 32): the good node's largest gap between updates, the event
loop's longest stall and the process's peak memory, live, over real HTTP on 127.0.0.1.

    python benchmarks/bench_hostile_neighbour.py [--seconds 20] [--write docs/performance.md]

Two loopback servers answer ``/health`` and ``/metrics``: a good one with a real vLLM 0.33 scrape, and a
hostile one with one of the cases below, every poll a new body (fresh series heads, so the parser's memo
never helps). The collection is sparktui's own (``LiveFleet`` into a ``Monitor``, 1 s interval), and the
core ticks every interval as the dashboard's does. Measured: the good node's largest gap between two
updates (the target is under 1.5 intervals), the event loop's longest stall (a 10 ms ticker's largest
lateness; the target is about 50 ms), and peak RSS (target under 200 MB). ``--no-preread`` parses on the
event loop as sparktui did before, for the before/after.
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from _common import machine_line, write_section

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sparktui.config import catalogue_for, parse_config  # noqa: E402
from sparktui.model.observations import NodeObservation  # noqa: E402
from sparktui.model.promtext import MAX_SERIES  # noqa: E402
from sparktui.monitor.core import Monitor  # noqa: E402
from sparktui.sources.live import LiveFleet  # noqa: E402

SCRAPE = (ROOT / "tests" / "data" / "vllm-0.33" / "mtp2-steady" / "scrape-015.prom").read_bytes()
MB = 1024 * 1024
QUICK_ARGS = ("--seconds", "4")


def _many_series(count: int) -> Callable[[int], bytes]:
    """``count`` distinct series of a family the normaliser reads, new heads at every poll."""

    def body(poll: int) -> bytes:
        return "".join(
            f'vllm:num_requests_running{{engine="{i % 8}",model_name="m",p="{poll}-{i}"}} 1\n' for i in range(count)
        ).encode()

    return body


def _many_unread(count: int) -> Callable[[int], bytes]:
    def body(poll: int) -> bytes:
        return "".join(f'junk_family{{n="{poll}-{i}",path="/some/where/{i}"}} {i}\n' for i in range(count)).encode()

    return body


CASES: dict[str, Callable[[int], bytes]] = {
    "none (a second good node, the reference)": lambda poll: SCRAPE,
    "100,000 series (6 MB), over the budget": _many_series(100_000),
    f"{MAX_SERIES - 100:,} series of a family read, inside the budget": _many_series(MAX_SERIES - 100),
    f"{MAX_SERIES - 100:,} series of families not read": _many_unread(MAX_SERIES - 100),
}


class _Handler(BaseHTTPRequestHandler):
    body_of: Callable[[int], bytes] = staticmethod(lambda poll: SCRAPE)
    polls = 0

    def do_GET(self) -> None:
        if self.path.startswith("/metrics"):
            cls = type(self)
            cls.polls += 1
            body = cls.body_of(cls.polls)
        elif self.path == "/v1/models":
            body = b'{"object": "list", "data": [{"id": "m", "max_model_len": 4096}]}'
        else:
            body = b"" if self.path == "/health" else b'{"version": "0.33.0"}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return


def _serve(body_of: Callable[[int], bytes]) -> ThreadingHTTPServer:
    handler = type("Handler", (_Handler,), {"body_of": staticmethod(body_of), "polls": 0})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _config(good: int, hostile: int) -> str:
    nodes = []
    for name, port in (("good", good), ("hostile", hostile)):
        nodes.append(
            f'[[nodes]]\nname = "{name}"\nhost = "127.0.0.1"\n[nodes.ssh]\nenabled = false\n'
            f'[[nodes.vllm]]\nname = "qwen"\nport = {port}\n'
        )
    return "poll_interval_s = 1.0\ntimeout_s = 5.0\n" + "\n".join(nodes)


class _Sink(Monitor):
    """The monitor core, with the good node's update times noted."""

    def __init__(self, *args: object, preread: bool, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.arrivals: list[float] = []
        if not preread:
            self.preread = None  # type: ignore[assignment,method-assign]

    def observation(self, observation: NodeObservation) -> None:
        super().observation(observation)
        if observation.node == "good":
            self.arrivals.append(time.monotonic())


async def _run(case: str, seconds: float, preread: bool) -> dict[str, float | str]:
    good, hostile = _serve(lambda poll: SCRAPE), _serve(CASES[case])
    fleet = parse_config(_config(good.server_port, hostile.server_port), source="bench.toml")
    sink = _Sink(fleet, catalogue_for(fleet.diagnosis), preread=preread)
    stalls: list[float] = []

    async def ticker() -> None:
        while True:
            before = time.monotonic()
            await asyncio.sleep(0.01)
            stalls.append(time.monotonic() - before - 0.01)

    async def ticks() -> None:
        while True:
            await asyncio.sleep(fleet.poll_interval_s)
            sink.tick(time.monotonic())

    async with asyncio.TaskGroup() as group:
        tasks = [group.create_task(t) for t in (LiveFleet(fleet, logs=False).run(sink), ticker(), ticks())]
        await asyncio.sleep(seconds)
        for task in tasks:
            task.cancel()
    good.shutdown()
    hostile.shutdown()
    gaps = [b - a for a, b in zip(sink.arrivals[2:], sink.arrivals[3:], strict=False)]  # after the first polls
    reason = next((r for v in sink.views if v.name == "hostile" for r in v.status.reasons if "/metrics" in r), "")
    return {
        "max_gap_s": max(gaps, default=float("nan")),
        "max_stall_ms": 1000 * max(stalls[100:], default=float("nan")),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "updates": len(sink.arrivals),
        "reason": reason[:90],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--case", choices=list(CASES), action="append")
    parser.add_argument("--no-preread", action="store_true", help="parse on the event loop (the old way)")
    parser.add_argument("--write", type=Path)
    args = parser.parse_args()
    rows = [
        "| hostile neighbour | parse | good node's largest gap (s) | longest loop stall (ms) | peak RSS (MB) |"
        " the hostile node's reason |",
        "|---|---|---|---|---|---|",
    ]
    cases = args.case or list(CASES)
    for case in cases:
        if len(cases) > 1:  # each case in a process of its own: peak RSS is a process's
            command = [sys.executable, __file__, "--seconds", str(args.seconds), "--case", case]
            command += ["--no-preread"] if args.no_preread else []
            rows.append(subprocess.run(command, check=True, capture_output=True, text=True).stdout.strip())
        else:
            found = asyncio.run(_run(case, args.seconds, preread=not args.no_preread))
            where = "on the loop" if args.no_preread else "worker thread"
            rows.append(
                f"| {case} | {where} | {found['max_gap_s']:.2f} | {found['max_stall_ms']:.0f} | "
                f"{found['peak_rss_mb']:.0f} | {found['reason']} |"
            )
        print(rows[-1], flush=True)
    if args.write:
        body = (
            f"{machine_line()}; Python {platform.python_version()}; {args.seconds:.0f} s a case, 1 s interval; "
            "each case in a process of its own.\n\n" + "\n".join(rows)
        )
        write_section(args.write, "bench_hostile_neighbour", body)


if __name__ == "__main__":
    main()
