"""What the benchmark scripts share: the demo fleet in its own process, quantiles, CPU time of a
process, the machine line, and writing a script's own section of ``docs/performance.md``.

Benchmarks run as scripts (``python benchmarks/bench_x.py``), so this is imported as ``_common``.
"""

from __future__ import annotations

import contextlib
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import psutil

SPARKTUI = Path(sys.executable).parent / "sparktui"


@dataclass(frozen=True, slots=True)
class DemoProcess:
    config: Path  # the fleet config the demo wrote, for ``sparktui --config``
    process: subprocess.Popen[bytes]

    @property
    def pid(self) -> int:
        return self.process.pid


@contextlib.contextmanager
def demo_fleet(nodes: int, *extra: str, settle_s: float = 1.0, timeout_s: float = 60.0) -> Iterator[DemoProcess]:
    """``sparktui demo --serve-only --nodes N`` in its own process, until the block ends.

    Yields once the demo has written its config (every server listening) and ``settle_s`` has passed.
    """
    with tempfile.TemporaryDirectory(prefix="sparktui-bench-") as tmp:
        config = Path(tmp) / "demo.toml"
        process = subprocess.Popen(
            [str(SPARKTUI), "demo", "--serve-only", "--nodes", str(nodes), "--write-config", str(config), *extra],
            stdout=subprocess.DEVNULL,
            env=dict(os.environ),
        )
        try:
            deadline = time.monotonic() + timeout_s
            while not config.exists():
                if process.poll() is not None:
                    raise SystemExit(f"the demo fleet exited with status {process.returncode} before serving")
                if time.monotonic() > deadline:
                    raise SystemExit(f"the demo fleet did not write its config within {timeout_s:g} s")
                time.sleep(0.1)
            time.sleep(settle_s)
            yield DemoProcess(config, process)
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def quantile(values: Sequence[float], q: float) -> float:
    """The nearest-rank quantile of ``values`` (``q`` in 0..1); NaN when empty."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far."""
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def machine_line() -> str:
    """The machine and versions a figure was measured on, for the docs."""
    cpus = os.cpu_count() or 0
    memory = psutil.virtual_memory().total / 2**30
    versions = ", ".join(
        f"{name} {metadata.version(name)}" for name in ("sparktui", "textual", "httpx", "asyncssh", "prometheus-client")
    )
    return (
        f"{platform.system()} {platform.machine()}, {cpus} cores, {memory:.0f} GiB, "
        f"Python {platform.python_version()}; {versions}"
    )


def write_section(path: Path, name: str, body: str, *, heading: str = "") -> None:
    """Replace the ``<!-- name:start -->``…``<!-- name:end -->`` block of ``path``.

    When the block is missing it is appended, after ``heading`` (a section title and prose that live
    outside the block, so later runs leave them as edited).
    """
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    doc = path.read_text() if path.exists() else "# Performance\n"
    block = f"{start}\n{body.rstrip()}\n{end}"
    if start in doc and end in doc:
        doc = doc[: doc.index(start)] + block + doc[doc.index(end) + len(end) :]
    else:
        lead = f"{heading.strip()}\n\n" if heading.strip() else ""
        doc = doc.rstrip("\n") + "\n\n" + lead + block + "\n"
    path.write_text(doc)


def tree_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process and every descendant so far (children that have exited and
    been waited for are in their parent's ``children_*`` times)."""
    root = psutil.Process(pid)
    total = 0.0
    for process in [root, *root.children(recursive=True)]:
        with contextlib.suppress(psutil.NoSuchProcess, psutil.ZombieProcess):
            times = process.cpu_times()
            total += times.user + times.system + times.children_user + times.children_system
    return total


def require_tool(name: str, hint: str) -> str:
    """The path of ``name`` on PATH, or exit with one line naming it and how to install it."""
    import shutil

    found = shutil.which(name)
    if found is None:
        raise SystemExit(f"{name} is not installed: {hint}")
    return found


def stop_on_sigterm() -> None:
    """SIGTERM ends the script as Ctrl-C does, so its ``finally`` blocks stop what it started."""
    import signal

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)


class TmuxServer:
    """A tmux server of the benchmark's own (its socket), already running before any timing starts:
    its own start-up is not what is measured."""

    def __init__(self, tmux: str, name: str) -> None:
        self.base = [tmux, "-L", f"{name}-{os.getpid()}"]

    def launch(self, session: str, command: str, width: int, height: int) -> None:
        subprocess.run(
            [*self.base, "new-session", "-d", "-s", session, "-x", str(width), "-y", str(height), command], check=True
        )

    def capture(self, session: str) -> str:
        done = subprocess.run(
            [*self.base, "capture-pane", "-p", "-t", session], capture_output=True, text=True, check=False
        )
        return done.stdout

    def send(self, session: str, *keys: str) -> None:
        subprocess.run([*self.base, "send-keys", "-t", session, *keys], check=False, capture_output=True)

    def kill(self, session: str) -> None:
        subprocess.run([*self.base, "kill-session", "-t", session], check=False, capture_output=True)


@contextlib.contextmanager
def tmux_server(tmux: str, name: str) -> Iterator[TmuxServer]:
    server = TmuxServer(tmux, name)
    subprocess.run([*server.base, "new-session", "-d", "-s", "hold", "sleep 3600"], check=True)
    try:
        yield server
    finally:
        subprocess.run([*server.base, "kill-server"], check=False, capture_output=True)
