"""Each headless command, run through the real CLI in a fresh interpreter, loads no UI: no Textual, no Rich,
nothing of ``sparktui.ui``. Each test also checks that the command really ran (its exit status and a line
of its output), so an early crash cannot pass for a clean import list.

Every target is real and fast: a config whose one node is on a 127.0.0.1 port nothing listens on (a quick
"down"), a small real recording, closed ports for ``init``.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.integration.test_record import write_fixture_recording
from tests.support.fixture_fleet import free_port

ROOT = Path(__file__).resolve().parents[2]

# Runs the command as the console script does, then prints what UI modules it loaded on the last line.
DRIVER = """\
import sys
from sparktui.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
loaded = sorted(
    m for m in sys.modules
    if m.split(".")[0] in ("textual", "rich") or m == "sparktui.ui" or m.startswith("sparktui.ui.")
)
print(f"\\nexit={code} ui-modules={','.join(loaded)}")
"""


@dataclass(frozen=True, slots=True)
class Ran:
    code: int | str | None
    ui_modules: list[str]
    out: str  # stdout without the driver's last line
    err: str


def run_cli(*argv: str, cwd: Path = ROOT) -> Ran:
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, *argv],
        cwd=cwd,
        stdin=subprocess.DEVNULL,  # not a terminal: `action` must not wait for an answer
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    body, _, last = done.stdout.rstrip("\n").rpartition("\n")
    assert last.startswith("exit="), f"the driver did not finish:\n{done.stdout}\n{done.stderr}"
    code_text, modules = last.removeprefix("exit=").split(" ui-modules=")
    code: int | str | None = int(code_text) if code_text.lstrip("-").isdigit() else code_text
    return Ran(code, [m for m in modules.split(",") if m], body, done.stderr)


@pytest.fixture
def down_config(tmp_path: Path) -> Path:
    """One node whose vLLM port nothing listens on: collection ends at once with the node down."""
    config = tmp_path / "fleet.toml"
    config.write_text(
        f'timeout_s = 0.5\n[[nodes]]\nname = "spark1"\nhost = "127.0.0.1"\n[nodes.ssh]\nenabled = false\n'
        f"[[nodes.vllm]]\nport = {free_port()}\n"
    )
    return config


def test_check_loads_no_ui(down_config: Path) -> None:
    ran = run_cli("--config", str(down_config), "check", "--interval", "0")
    assert ran.ui_modules == []
    assert ran.code == 2, ran.err  # down
    assert "spark1" in ran.out


def test_check_alerts_loads_no_ui(down_config: Path) -> None:
    ran = run_cli("--config", str(down_config), "check", "--alerts", "--interval", "0")
    assert ran.ui_modules == []
    assert ran.code == 2, ran.err  # node-down is crit
    assert "alert" in ran.out.splitlines()[-1]


def test_snapshot_loads_no_ui(down_config: Path) -> None:
    ran = run_cli("--config", str(down_config), "snapshot", "--json", "--interval", "0")
    assert ran.ui_modules == []
    assert ran.code == 0, ran.err
    assert '"name": "spark1"' in ran.out


def test_watch_loads_no_ui(down_config: Path) -> None:
    ran = run_cli("--config", str(down_config), "watch", "--for", "1", "--journal", "no")
    assert ran.ui_modules == []
    assert ran.code == 0, ran.err
    lines = ran.out.splitlines()
    assert lines[0].startswith("info event=start nodes=1") and lines[-1].startswith("info event=stop")


def test_action_loads_no_ui(down_config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPARKTUI_AUDIT_LOG", str(tmp_path / "audit.log"))
    ran = run_cli("--config", str(down_config), "action", "spark1", "warmup")
    assert ran.ui_modules == []
    assert ran.code == 2, ran.out  # refused (the node is down) or not confirmed (no terminal): it ran
    assert ran.err.startswith("sparktui action: ")


def test_export_loads_no_ui(tmp_path: Path) -> None:
    recording = write_fixture_recording(tmp_path / "fleet.db", seconds=5)
    out = tmp_path / "fleet.csv"
    ran = run_cli("export", str(recording), "--to", "csv", "--metrics", "status", "-o", str(out))
    assert ran.ui_modules == []
    assert ran.code == 0, ran.err
    assert out.read_text().splitlines()[0] == "time,t,node,status"
    assert "rows written to" in ran.err


def test_bench_loads_no_ui_without_a_terminal(down_config: Path) -> None:
    ran = run_cli("--config", str(down_config), "bench", "spark1", "--cases", "short")
    assert ran.ui_modules == []
    assert ran.code == 2, ran.out  # the instance is down: refused in one line, having run
    assert ran.err.startswith("sparktui bench: ") and "/v1/models gave no model (connection refused)" in ran.err


def test_config_check_loads_no_ui(down_config: Path) -> None:
    ran = run_cli("config", "check", str(down_config))
    assert ran.ui_modules == []
    assert ran.code == 0, ran.err
    assert ran.out.strip() == f"{down_config}: ok: 1 node, 1 vLLM instance, 0 side services"


def test_init_loads_no_ui() -> None:
    vllm, asr, exporter = free_port(), free_port(), free_port()
    ran = run_cli(
        "init",
        "127.0.0.1",
        "--print",
        "--no-ssh",
        "--vllm-ports",
        str(vllm),
        "--service-ports",
        f"asr={asr}",
        "--exporter-ports",
        str(exporter),
        "--timeout",
        "0.5",
    )
    assert ran.ui_modules == []
    assert ran.code == 1, ran.err  # it probed, built and validated a config, and found nothing to write
    assert "nothing found" in ran.err and "found nothing to watch" in ran.err


def test_the_driver_sees_the_ui_when_a_command_loads_it() -> None:
    """The check above can fail: a command that opens the UI shows up in the list."""
    code = "import sparktui.ui.themes\n" + DRIVER
    done = subprocess.run(
        [sys.executable, "-c", code, "--version"], capture_output=True, text=True, check=False, timeout=60
    )
    assert "sparktui.ui.themes" in done.stdout.rstrip().rpartition("\n")[2]


COMMANDS = (
    *("snapshot", "check", "watch", "demo", "init", "action", "serve", "replay", "export", "screenshot", "config"),
    "completion",
    "bench",
)


def test_help_of_the_cli_and_of_every_command() -> None:
    top = subprocess.run(
        [sys.executable, "-m", "sparktui", "--help"], capture_output=True, text=True, check=False, timeout=60, cwd=ROOT
    )
    assert top.returncode == 0, top.stderr
    assert top.stdout.startswith("usage: sparktui ")
    assert "{" + ",".join(COMMANDS) + "}" in top.stdout
    for command in (*((c,) for c in COMMANDS), ("config", "check")):
        ran = run_cli(*command, "--help")
        assert ran.code == 0, (command, ran.err)
        assert ran.out.startswith(f"usage: sparktui {' '.join(command)} "), (command, ran.out[:200])
        assert ran.ui_modules == [], command  # building the parser loads no command's heavy parts
