"""End to end in a real terminal: ``sparktui demo`` in tmux, driven with send-keys, read with
capture-pane."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from sparktui.ui.keys import all_bindings
from tests.support.fixture_fleet import Faults, fleet_config, start_node

TMUX = shutil.which("tmux")
pytestmark = [
    pytest.mark.tmux,
    pytest.mark.skipif(TMUX is None and os.environ.get("CI") != "true", reason="tmux not installed"),
]


# The environment the terminal's programs get: this process's, without COLUMNS and LINES. Something in a
# pytest run exports COLUMNS=80 LINES=24 into the C environment (not os.environ): inherited by tmux, they
# made the dashboard draw at 80x24 in the 160x48 pane, and the tests saw a terminal nobody uses.
_TERMINAL_ENV = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}


class Tmux:
    def __init__(self) -> None:
        assert TMUX is not None, "tmux is required (apt-get install tmux)"
        self.tmux: str = TMUX
        self.socket = f"sparktui-test-{uuid.uuid4().hex[:8]}"
        self.session = "dash"

    def run(self, *args: str) -> str:
        result = subprocess.run(
            [self.tmux, "-L", self.socket, *args], capture_output=True, text=True, check=True, env=_TERMINAL_ENV
        )
        return str(result.stdout)

    def start(self, command: str) -> None:
        self.run("new-session", "-d", "-s", self.session, "-x", "160", "-y", "48", command)
        self.run("set-option", "-t", self.session, "remain-on-exit", "on")

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", self.session)

    def keys(self, *keys: str) -> None:
        self.run("send-keys", "-t", self.session, *keys)

    def wait_for(self, text: str, timeout_s: float) -> float:
        started = time.monotonic()
        while time.monotonic() - started < timeout_s:
            if text in self.screen():
                return time.monotonic() - started
            time.sleep(0.05)
        raise AssertionError(f"{text!r} did not appear within {timeout_s} s; the screen:\n{self.screen()}")

    def kill(self) -> None:
        subprocess.run([self.tmux, "-L", self.socket, "kill-server"], capture_output=True, check=False)


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    session = Tmux()
    try:
        yield session
    finally:
        session.kill()


@pytest.mark.slow
def test_demo_dashboard_in_a_real_terminal(tmux: Tmux, tmp_path: Path) -> None:
    # The shell records the exit status itself: tmux's #{pane_dead_status} was seen empty on CI although
    # the dashboard had exited (tmux had not recorded it), which said nothing about sparktui.
    status_file = tmp_path / "status"
    tmux.start(f"sh -c '{sys.executable} -m sparktui demo; echo $? > {status_file}'")
    tmux.wait_for("4 nodes", timeout_s=20)  # the demo fleet starts first
    fleet_after = tmux.wait_for("spark4", timeout_s=3)  # then every node is on screen within 3 s
    assert fleet_after < 3
    tmux.wait_for("tok/s", timeout_s=10)
    screen = tmux.screen()
    for node in ("spark1", "spark2", "spark3", "└ spark4"):
        assert node in screen
    assert "Mem avail" in screen and "GPU" in screen  # drawn at the pane's 160 columns, not at 80
    tmux.keys("Enter")
    tmux.wait_for("Throughput", timeout_s=5)
    tmux.wait_for("Speculative decoding", timeout_s=5)
    tmux.keys("Escape")
    tmux.wait_for("Gen t/s", timeout_s=5)
    tmux.keys("q")
    deadline = time.monotonic() + 30  # the demo fleet is stopped first: slow on a loaded machine
    while not (status_file.exists() and status_file.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert status_file.exists(), f"the dashboard did not exit within 30 s of q; screen:\n{tmux.screen()}"
    assert status_file.read_text().strip() == "0"  # exited cleanly, status 0
    # The terminal is restored: no alternate screen, no dashboard left on it.
    assert "Gen t/s" not in tmux.screen()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_signal_ends_the_kiosk_and_gives_the_terminal_back(tmux: Tmux, tmp_path: Path, sig: signal.Signals) -> None:
    # A service stopping the kiosk (SIGTERM) or its terminal going away (SIGHUP): the app exits the way
    # it does on a key, so the terminal leaves the alternate screen and gets its cursor back.
    status_file = tmp_path / "status"
    tmux.start(f"sh -c '{sys.executable} -m sparktui --kiosk demo; echo $? > {status_file}; exec sh'")
    tmux.wait_for("sparktui kiosk", timeout_s=30)
    tmux.wait_for("updated", timeout_s=10)
    assert tmux.run("display", "-p", "-t", tmux.session, "#{alternate_on}").strip() == "1"
    shell = psutil.Process(int(tmux.run("display", "-p", "-t", tmux.session, "#{pane_pid}")))
    kiosk = next(p for p in shell.children() if "--kiosk" in p.cmdline())
    kiosk.send_signal(sig)
    deadline = time.monotonic() + 30  # the demo fleet is stopped after the app: slow on a loaded machine
    while not (status_file.exists() and status_file.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert status_file.exists(), f"the kiosk did not exit within 30 s of {sig.name}; screen:\n{tmux.screen()}"
    assert status_file.read_text().strip() == "0"
    assert tmux.run("display", "-p", "-t", tmux.session, "#{alternate_on}").strip() == "0"
    assert tmux.run("display", "-p", "-t", tmux.session, "#{cursor_flag}").strip() == "1"
    assert "sparktui kiosk" not in tmux.screen()


@pytest.mark.parametrize("mode", ["dashboard", "kiosk"])
@pytest.mark.slow
def test_a_recording_that_can_no_longer_be_written_is_on_the_screen_and_the_dashboard_goes_on(
    tmux: Tmux, tmp_path: Path, mode: str
) -> None:
    # prlimit caps the size of the files the dashboard writes: past it the kernel refuses SQLite's
    # writes (EFBIG), as a full disk would (tests/integration/test_record_write_failure.py for watch).
    node = start_node("spark1", "mtp2-steady", "nvidia_gpu_exporter.prom", advance_every_s=0.5)
    try:
        config = tmp_path / "fleet.toml"
        config.write_text(fleet_config([node], interval_s=0.25))
        recording = tmp_path / "rec.db"
        kiosk = " --kiosk" if mode == "kiosk" else ""
        tmux.start(f"prlimit --fsize=120000 {sys.executable} -m sparktui --config {config}{kiosk} --record {recording}")
        tmux.wait_for("recording stopped: disk I/O error", timeout_s=120)
        # It goes on: the node going down after the recording stopped is on the screen too.
        node.vllm.endpoint.faults = Faults(health_status=503)
        tmux.wait_for("spark1 DOWN", timeout_s=60)
        assert "recording stopped: disk I/O error" in tmux.screen()
    finally:
        for server in node.servers():
            server.stop()


@pytest.mark.slow
def test_a_nodes_second_engine_opens_on_its_own_row_and_i_steps_through_them(tmux: Tmux) -> None:
    # spark1 runs a llama.cpp fallback beside its vLLM: its own fleet row opens the node screen on it,
    # and i shows the node's other instance in the same panels.
    tmux.start(f"{sys.executable} -m sparktui demo")
    tmux.wait_for("qwen3-8b", timeout_s=30)
    row = next(n for n, line in enumerate(tmux.screen().splitlines()) if "qwen3-8b" in line)
    first = next(n for n, line in enumerate(tmux.screen().splitlines()) if line.lstrip().startswith("spark1"))
    tmux.keys(*["Down"] * (row - first))
    tmux.keys("Enter")
    tmux.wait_for("qwen3-8b (llama.cpp, 2 of 2, i next)", timeout_s=10)
    tmux.wait_for("llama.cpp b11434", timeout_s=10)  # the engine panel is the fallback's
    tmux.keys("i")
    tmux.wait_for("qwen36 (vLLM, 1 of 2, i next)", timeout_s=10)
    tmux.wait_for("Speculative decoding", timeout_s=10)
    # An action key acts on the instance the screen shows: the warmup's dialog names the vLLM now.
    tmux.keys("w")
    tmux.wait_for("vLLM qwen36 at", timeout_s=10)
    tmux.keys("n")
    tmux.keys("i")
    tmux.wait_for("qwen3-8b (llama.cpp, 2 of 2, i next)", timeout_s=10)
    tmux.keys("w")
    tmux.wait_for("llama.cpp qwen3-8b at", timeout_s=10)
    tmux.keys("n")


def test_the_mixed_fleet_shows_every_engine_on_one_screen_with_dashes_for_what_each_lacks(tmux: Tmux) -> None:
    # sparktui demo --fleet mixed: vLLM, Ollama, SGLang, TensorRT-LLM, NIM and llama.cpp at 160x48.
    tmux.start(f"{sys.executable} -m sparktui demo --fleet mixed")
    tmux.wait_for("Engine", timeout_s=30)  # the engine column: the fleet runs several kinds
    tmux.wait_for("Llama-3.1-8B-Instru", timeout_s=20)  # TensorRT-LLM's model, named by its /v1/models
    rows = {}
    for line in tmux.screen().splitlines():
        cells = line.split()
        for label in ("vLLM", "Ollama", "SGLang", "TensorRT…", "NIM", "llama.cpp"):
            if len(cells) > 3 and cells[3] == label:
                rows[label] = cells
    assert set(rows) == {"vLLM", "Ollama", "SGLang", "TensorRT…", "NIM", "llama.cpp"}, tmux.screen()
    # Ollama counts no tokens: its generation, requests and KV are "–", what it holds is its model cell.
    ollama = " ".join(rows["Ollama"])
    assert "1/3 models loaded – – –/– –" in ollama, ollama
    # Each on its node: two engines share spark1 and spark4, one row each.
    assert [rows[label][0] for label in ("vLLM", "Ollama", "SGLang", "TensorRT…", "NIM", "llama.cpp")] == [
        "spark1",
        "spark1",
        "spark2",
        "spark3",
        "spark4",
        "spark4",
    ]


def _footer_hints(row: str) -> list[str] | None:
    """The footer row as its hints (``key label``), or None when one is not whole: each is a key (one
    word: ``r``, ``esc``, ``^p``) and the full label of a binding of the dashboard, a space between."""
    labels = sorted({b.description for b in all_bindings() if b.description} | {"Commands"}, key=len, reverse=True)
    hints: list[str] = []
    rest = row.strip()
    while rest:
        key, _, after = rest.partition(" ")
        label = next((lab for lab in labels if after == lab or after.startswith(lab + " ")), None)
        if not key or label is None:
            return None
        hints.append(f"{key} {label}")
        rest = after[len(label) :].lstrip(" ")
    return hints


@pytest.mark.slow
def test_the_footer_is_whole_at_80x24_120x40_and_160x48_on_the_fleet_and_node_screens(
    tmux: Tmux, tmp_path: Path
) -> None:
    # The operator's report (issue 36): "p Pa▏^p Commandsg" at 120, "a Ac" at 80, a lone "!" at 160.
    status_file = tmp_path / "status"
    tmux.start(f"sh -c '{sys.executable} -m sparktui demo; echo $? > {status_file}'")
    tmux.wait_for("4 nodes", timeout_s=30)
    for screen, back in (("Gen t/s", None), ("Throughput", "Escape")):
        if back is not None:
            tmux.keys("Enter")
            tmux.wait_for(screen, timeout_s=10)
        for width, height in ((80, 24), (120, 40), (160, 48)):
            tmux.run("resize-window", "-t", tmux.session, "-x", str(width), "-y", str(height))
            deadline = time.monotonic() + 10
            hints: list[str] | None = None
            while time.monotonic() < deadline:
                rows = tmux.screen().splitlines()
                hints = _footer_hints(rows[-1]) if len(rows) == height else None
                if hints and len(rows[-1]) <= width and "x Fix" in hints:
                    break
                time.sleep(0.05)
            assert hints and "x Fix" in hints, f"{screen} at {width}x{height}: a cut footer\n{tmux.screen()}"
        if back is not None:
            tmux.keys(back)
            tmux.wait_for("Gen t/s", timeout_s=10)  # an escape followed at once by q reads as alt+q
    tmux.keys("q")  # the demo fleet stops with the dashboard, not left behind when the terminal goes
    deadline = time.monotonic() + 30
    while not (status_file.exists() and status_file.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert status_file.exists() and status_file.read_text().strip() == "0"
