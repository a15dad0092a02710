"""Peak memory of one query to a hostile Prometheus (issue 32): a huge answer, a gzip bomb.

    python benchmarks/bench_prometheus_hostile.py [--write docs/performance.md]

A plain HTTP server on 127.0.0.1 serves each answer; a fresh Python process asks it one instant query
through ``PrometheusClient`` (what every refresh, ``snapshot`` and ``check`` use) and reports what it
made of it (the number of series, or the one-line ``PrometheusError``), its RSS before the query and
its peak RSS (``VmHWM``), so each case is measured alone, imports and all.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import sys
import zlib
from collections.abc import Callable
from pathlib import Path

from _common import write_section

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sparktui.demo.httpserver import HttpServer, Request, Response  # noqa: E402

MB = 1_000_000
QUICK_ARGS = ()
HEAD = b'{"status":"success","data":{"resultType":"vector","result":['
TAIL = b"]}}"


def _answer(count: int, samples: int) -> bytes:
    """``count`` series as a vLLM's histogram buckets are, labels and all: an instant query's vector
    (``samples`` = 1) or a range query's matrix."""
    series: list[dict[str, object]] = []
    for i in range(count):
        labels = {
            "__name__": "vllm:time_to_first_token_seconds_bucket",
            "instance": f"10.0.0.{i % 250}:{8000 + i % 4}",
            "job": "vllm",
            "model_name": "Qwen/Qwen3-30B-A3B",
            "le": str(i),
        }
        points = [[1_700_000_000.5 + step, str(i)] for step in range(samples)]
        series.append({"metric": labels, "value": points[0]} if samples == 1 else {"metric": labels, "values": points})
    kind = "vector" if samples == 1 else "matrix"
    return json.dumps({"status": "success", "data": {"resultType": kind, "result": series}}).encode()


def _fleet_answer() -> bytes:
    """About what 8 Sparks with 4 vLLM instances each send (~280 series an instance): the reference."""
    return _answer(10_000, 1)


def _largest_admitted() -> bytes:
    """50,000 series of a range query's 7 samples: the most an answer may hold."""
    return _answer(50_000, 7)


def _many_series(labelled: bool) -> Callable[[], bytes]:
    def make() -> bytes:
        one = (
            b'{"metric":{"__name__":"up","instance":"10.0.0.1:8000","job":"vllm"},"value":[1700000000.5,"1"]}'
            if labelled
            else b'{"metric":{},"value":[0,"1"]}'
        )
        return HEAD + b",".join([one] * 1_000_000) + TAIL

    return make


def _most_labels() -> bytes:
    """One series with as many labels as the scan before parsing admits (two JSON values each)."""
    labels = b",".join(b'"l%07d":"x"' % i for i in range(1_190_000))
    return HEAD + b'{"metric":{' + labels + b'},"value":[0,"1"]}' + TAIL


def _most_arrays() -> bytes:
    """One series of a matrix with as many [time, value] pairs as the scan admits (three values each)."""
    head = b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":['
    return head + b",".join([b'[0,"1"]'] * 790_000) + b"]}]}}"


def _gzip_bomb() -> bytes:
    """A valid answer padded with 240 MB of spaces, gzip-compressed (about a thousandth of that)."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    parts = [compressor.compress(HEAD)]
    spaces = b" " * MB
    parts.extend(compressor.compress(spaces) for _ in range(240))
    parts.append(compressor.compress(TAIL))
    parts.append(compressor.flush())
    return b"".join(parts)


CASES: tuple[tuple[str, Callable[[], bytes], dict[str, str]], ...] = (
    ("10,000 series (8 Sparks x 4 instances, reference)", _fleet_answer, {}),
    ("50,000 series of 7 samples (the largest answer admitted)", _largest_admitted, {}),
    ("1,000,000 series with 3 labels each", _many_series(True), {}),
    ("1,000,000 series without labels", _many_series(False), {}),
    ("gzip bomb: 240 MB of JSON padding", _gzip_bomb, {"Content-Encoding": "gzip"}),
    ("one series with 1,190,000 labels (the most JSON values admitted)", _most_labels, {}),
    ("one series of 790,000 samples (the most JSON values admitted)", _most_arrays, {}),
)


# --- the client, in a process of its own ------------------------------------------------------------


def _status_mb(field: str) -> float:
    """A memory line of /proc/self/status in MB: VmRSS now, VmHWM the peak. Not ``ru_maxrss``, which a
    child started by fork and exec inherits from its parent (here, the server holding the bodies)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024 / MB
    raise RuntimeError(f"no {field} in /proc/self/status")


async def _client(url: str) -> dict[str, object]:
    from sparktui.config import parse_config
    from sparktui.sources.http import make_client
    from sparktui.sources.prometheus import PrometheusClient, PrometheusError

    fleet = parse_config(f'[prometheus]\nurl = "{url}"\n', env={})
    assert fleet.prometheus is not None
    before = _status_mb("VmRSS")
    async with make_client() as client:
        try:
            result = await PrometheusClient(fleet.prometheus, client, 60.0).query("up")
            outcome = f"{len(result):,} series"
        except PrometheusError as exc:
            outcome = f"refused: {exc}".replace(url, "URL")
        except Exception as exc:  # what the code before issue 32 did with some of these
            outcome = f"{type(exc).__name__}: {exc}"[:120]
    return {"outcome": outcome, "before_mb": before, "peak_mb": _status_mb("VmHWM")}


async def _measure_one(body: bytes, headers: dict[str, str]) -> dict[str, object]:
    async def handler(request: Request) -> Response:
        return Response(body=body, headers=headers)

    server = HttpServer(handler)
    await server.start()
    try:
        process = await asyncio.create_subprocess_exec(
            sys.executable, __file__, "--client", server.url, stdout=asyncio.subprocess.PIPE
        )
        out, _ = await process.communicate()
    finally:
        await server.stop()
    found: dict[str, object] = json.loads(out)
    return found


def measure() -> list[tuple[str, int, dict[str, object]]]:
    rows = []
    for name, make, headers in CASES:
        body = make()
        rows.append((name, len(body), asyncio.run(_measure_one(body, headers))))
        del body
    return rows


def report(rows: list[tuple[str, int, dict[str, object]]]) -> str:
    lines = [
        "| hostile answer | bytes sent | sparktui says | RSS before MB | peak RSS MB |",
        "|---|---|---|---|---|",
    ]
    for name, size, found in rows:
        outcome = str(found["outcome"]).replace("|", "\\|")
        lines.append(f"| {name} | {size:,} | {outcome} | {found['before_mb']:.0f} | {found['peak_mb']:.0f} |")
    machine = f"{platform.python_implementation()} {platform.python_version()}, {platform.machine()}"
    return "\n".join(lines) + f"\n\nMeasured on {machine}.\n"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--client", help=argparse.SUPPRESS)  # the measured process: query this URL once
    ap.add_argument("--write", type=Path, help="replace the hostile-Prometheus section of this markdown file")
    args = ap.parse_args()
    if args.client:
        print(json.dumps(asyncio.run(_client(args.client))))
        return 0
    table = report(measure())
    print(table)
    if args.write:
        write_section(args.write, "bench_prometheus_hostile", table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
