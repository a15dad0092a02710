"""``sparktui bench`` against the demo fleet (real HTTP servers on 127.0.0.1): every kind of case runs,
the streamed answers are timed and counted, the simulation's acceptance and prefix hit come back from its
``/metrics``, a cancelled run keeps the cases that finished, and the command saves, prints and compares."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sparktui.config import parse_config
from sparktui.demo.fleet import DemoFleet
from sparktui.demo.sim import PROFILES
from sparktui.headless.bench import BenchError, BenchJob, find_instance, run_job
from sparktui.model.specs import FleetSpec
from tests.support.wait import wait_until

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SPEED = 4.0  # the demo's clock runs this much faster than the wall clock: cases end sooner


@contextlib.asynccontextmanager
async def demo_fleet() -> AsyncIterator[tuple[DemoFleet, FleetSpec]]:
    fleet = DemoFleet(seed=5)
    await fleet.start()
    clock = asyncio.create_task(fleet.run_clock(tick_s=0.05, speed=SPEED))
    try:
        yield fleet, parse_config(fleet.config_toml(), source="demo.toml")
    finally:
        clock.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await clock
        await fleet.stop()


@pytest.mark.slow
async def test_every_kind_of_case_runs_on_the_demo_and_its_counters_come_back() -> None:
    async with demo_fleet() as (_fleet, spec):
        node, instance = find_instance(spec, "spark1")
        job = BenchJob(
            f"{node}/{instance.name}", instance, ("short", "concurrency", "prefill", "prefix"), (1, 2), 1, 1024
        )
        seen: list[int] = []
        await asyncio.wait_for(run_job(job, lambda progress: seen.append(progress.done_requests)), 120.0)
    run = job.result(complete=True)
    # the progress counted every request, one by one
    assert job.progress.total_requests == sum(len(c.prompts) for c in job.cases) == seen[-1]
    assert sorted(set(seen)) == list(range(job.progress.total_requests + 1))
    assert run.complete and run.model == PROFILES["qwen36"].served_name and run.version == "0.33.0"
    assert run.max_model_len == PROFILES["qwen36"].max_model_len
    kinds = {c.kind for c in run.cases}
    assert kinds == {"workload", "concurrency", "prefill", "prefix"}, [c.name for c in run.cases]
    assert [c.name for c in run.cases] == ["short", "concurrent-1", "concurrent-2", "prefill-1024", "prefix-repeat"]
    for case in run.cases:
        stats, server = case.stats, case.server
        assert stats.failed == 0, [r.error for r in case.requests]
        # ignore_eos: every request generated exactly max_tokens, as the server's usage says
        assert stats.completion_tokens == case.max_tokens * stats.requests, case.name
        assert stats.ttft_p50_s is not None and stats.aggregate_tokens_per_s is not None
        assert stats.decode_tokens_per_s is not None and stats.decode_tokens_per_s > 0
        assert server is not None and server.generation_tokens is not None
        # the demo keeps its own traffic running: the server made at least the case's tokens
        assert server.generation_tokens >= stats.completion_tokens
        assert len(server.acceptance_by_position) == PROFILES["qwen36"].num_speculative_tokens
        assert server.mean_acceptance_length is not None and server.mean_acceptance_length > 1.0
        assert server.prefix_cache_hit_rate is not None
        assert server.memory_bandwidth_share is not None
    assert run.flags["v1_models"] and run.flags["cache_config"]
    assert "api_key" not in run.flags["config"]  # type: ignore[operator]
    assert run.node_state["engine_stats"] is True


async def test_a_cancelled_run_keeps_the_cases_that_finished() -> None:
    async with demo_fleet() as (_fleet, spec):
        _node, instance = find_instance(spec, "spark1")
        job = BenchJob("spark1/qwen36", instance, ("short", "long"), requests=1)
        task = asyncio.create_task(run_job(job))
        await wait_until(lambda: job.progress.cases_done >= 1, 60.0, what="the first case to finish")
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    run = job.result(complete=False, problem="stopped by Ctrl-C")
    assert [c.name for c in run.cases] == ["short"] and not run.complete and run.problem == "stopped by Ctrl-C"


async def test_a_node_or_instance_not_in_the_config_is_told_in_one_sentence() -> None:
    async with demo_fleet() as (_fleet, spec):
        pass
    with pytest.raises(BenchError, match="no node 'spark9' in the config"):
        find_instance(spec, "spark9")
    with pytest.raises(BenchError, match="no vLLM instance 'x' with a URL"):
        find_instance(spec, "spark1/x")
    with pytest.raises(BenchError, match="serves 0 vLLM instances"):
        find_instance(spec, "spark4")  # a tensor-parallel worker: no HTTP
    assert find_instance(spec, "spark2/gemma4")[1].name == "gemma4"


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "sparktui", *argv],
        check=False,
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
        cwd=ROOT,
    )


@pytest.mark.slow
def test_the_command_saves_prints_and_compares(tmp_path: Path) -> None:
    before, after = tmp_path / "before.json", tmp_path / "after.json"
    bench = [sys.executable, "-m", "sparktui", "bench", "spark2", "--cases", "short", "--requests", "1"]
    ran = _cli("demo", "--", *bench, "--out", str(before))
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert "| Short (64 tok) | 1 |" in ran.stdout and f"saved to {before}" in ran.stderr
    saved = json.loads(before.read_text())
    assert saved["target"] == "spark2/gemma4" and saved["cases"][0]["stats"]["completion_tokens"] == 64
    ran = _cli("demo", "--", *bench, "--out", str(after), "--compare", str(before))
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert "| Case | Metric | Before | After | Change |" in ran.stdout
    compared = _cli("bench", "--compare", str(before), str(after))
    assert compared.returncode == 0 and "| Short (64 tok) | decode tok/s/req |" in compared.stdout
    assert compared.stdout.splitlines()[0].startswith("Before: spark2/gemma4")


def test_a_file_that_is_not_a_result_is_refused_with_exit_2(tmp_path: Path) -> None:
    junk = tmp_path / "junk.json"
    junk.write_text('{"nodes": []}')
    ran = _cli("bench", "--compare", str(junk), str(junk))
    assert (
        ran.returncode == 2
        and ran.stderr.strip() == f"sparktui bench: {junk}: not a sparktui bench result (no schema_version and cases)"
    )
    assert _cli("bench").returncode == 2


REQUESTS = 3  # a case's requests in the Ctrl-C test


@pytest.mark.slow
def test_ctrl_c_stops_the_command_and_keeps_the_cases_that_finished(tmp_path: Path) -> None:
    config, out = tmp_path / "demo.toml", tmp_path / "run.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    python = [sys.executable, "-m", "sparktui"]
    demo = subprocess.Popen(
        [*python, "demo", "--serve-only", "--write-config", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        deadline = time.monotonic() + 120  # the demo's start, on a busy machine
        while not config.exists():
            assert demo.poll() is None and time.monotonic() < deadline, "the demo fleet wrote no config"
            time.sleep(0.1)  # the poll interval of the condition above
        # Three requests a case: the long case outlasts a test process starved of CPU for a while before
        # its Ctrl-C lands (with one, under the load script, the case finished first: exit 0).
        argv = ["--config", str(config), "bench", "spark1", "--cases", "short", "long", "--requests", str(REQUESTS)]
        bench = subprocess.Popen(
            [*python, *argv, "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        watchdog = threading.Timer(300, bench.kill)  # a hung read below ends the test, not the suite
        watchdog.start()
        try:
            assert bench.stderr is not None
            for line in bench.stderr:  # without a terminal: one line as each case starts
                if "Long (600 tok)" in line:
                    break
            bench.send_signal(signal.SIGINT)
            stdout, stderr = bench.communicate(timeout=120)
        finally:
            watchdog.cancel()
    finally:
        demo.terminate()
        demo.wait(timeout=20)
    assert bench.returncode == 1, f"exit {bench.returncode} (-9: the watchdog)\n{stderr}\n{stdout}"
    assert "stopped early: stopped by Ctrl-C" in stdout and f"| Short (64 tok) | {REQUESTS} |" in stdout
    saved = json.loads(out.read_text())
    assert saved["complete"] is False and [c["name"] for c in saved["cases"]] == ["short"]
