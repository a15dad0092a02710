"""The commands in README.md and docs/ are true: every ``sparktui`` command line in a code block is one the
CLI accepts, and the blocks marked ``sh runnable`` run, as written, against the demo fleet."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparktui.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
BLOCK = re.compile(r"^```([^\n]*)\n(.*?)^```", re.S | re.M)
SHELLS = {"", "sh", "bash", "console", "shell"}
PLACEHOLDER = re.compile(r"\b[A-Z][A-Z_]{2,}\b")  # NODE, FILE, HOST: a synopsis, not a command
PROGRAM = re.compile(r"^(?:\S*/)?sparktui$")


def _blocks() -> Iterator[tuple[Path, str, str]]:
    for path in DOCS:
        for info, body in BLOCK.findall(path.read_text()):
            yield path, info.strip(), body


def _command_lines() -> list[tuple[str, list[str]]]:
    """(where, argv after the program) of every concrete sparktui command line in a shell block."""
    found = []
    for path, info, body in _blocks():
        if info.split(" ", 1)[0] not in SHELLS:
            continue
        for line in body.splitlines():
            text = line.split(" #", 1)[0].strip()
            try:
                words = shlex.split(text)
            except ValueError:
                continue
            if not words or not PROGRAM.match(words[0]):
                continue
            if any(c in text for c in "[|<>") or PLACEHOLDER.search(text):
                continue  # a synopsis (sparktui action NODE ACTION [--yes]) or a shell pipeline's tail
            found.append((f"{path.name}: {text}", words[1:]))
    return found


def test_the_docs_hold_command_lines_to_check() -> None:
    assert len(_command_lines()) >= 10


@pytest.mark.parametrize(("where", "argv"), _command_lines(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_command_line_in_the_docs_is_one_the_cli_accepts(where: str, argv: list[str]) -> None:
    try:
        build_parser().parse_args(argv)
    except SystemExit as exc:
        pytest.fail(f"{where}: the CLI refuses it (exit {exc.code})")


RUNNABLE = [(path, body) for path, info, body in _blocks() if info.split() == ["sh", "runnable"]]


@pytest.fixture(scope="module")
def demo_config(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    folder = tmp_path_factory.mktemp("demo")
    config = folder / "demo.toml"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "sparktui", "demo", "--serve-only", "--write-config", str(config)]
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, env=env)
    try:
        probe = [sys.executable, "-m", "sparktui", "--config", str(config), "check"]
        deadline = time.monotonic() + 120
        while not (
            config.exists() and subprocess.run(probe, env=env, capture_output=True, check=False).returncode == 0
        ):
            assert child.poll() is None, "the demo fleet exited"
            assert time.monotonic() < deadline, "the demo fleet never answered check with every node up"
            time.sleep(0.2)  # the poll interval of the condition above
        yield config
    finally:
        child.terminate()
        child.wait(timeout=20)


def test_the_docs_mark_blocks_runnable() -> None:
    assert RUNNABLE


@pytest.mark.parametrize(("path", "body"), RUNNABLE, ids=lambda v: v.name if isinstance(v, Path) else "")
@pytest.mark.slow
def test_runnable_blocks_run_against_the_demo_fleet(path: Path, body: str, demo_config: Path, tmp_path: Path) -> None:
    scripts = Path(sys.executable).parent
    if not (scripts / "sparktui").exists():
        pytest.skip("no sparktui script beside the interpreter (install the package)")
    env = {
        **os.environ,
        "PATH": f"{scripts}:{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(ROOT),
        "SPARKTUI_CONFIG": str(demo_config),
        "SPARKTUI_AUDIT_LOG": str(tmp_path / "audit.log"),
    }
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", body],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"{path.name}: the block failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
