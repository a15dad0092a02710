"""The import direction of DESIGN.md: a pure model, and headless commands that never load a UI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HEADLESS_MODULES = [
    "sparktui.cli",
    "sparktui.cli.common",
    "sparktui.cli.options",
    "sparktui.headless",
    "sparktui.headless.snapshot",
    "sparktui.headless.watch",
    "sparktui.headless.compare",
    "sparktui.headless.action",
    "sparktui.headless.init",
    "sparktui.sources.promql",
    "sparktui.sources.probe",
    "sparktui.config",
    "sparktui.sources.poller",
    "sparktui.model.fleet",
]


def test_import_linter_contracts_hold() -> None:
    lint_imports = Path(sys.executable).parent / "lint-imports"
    result = subprocess.run([str(lint_imports), "--no-cache"], cwd=ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_headless_commands_do_not_load_textual_or_rich() -> None:
    code = (
        "import sys\n"
        + "".join(f"import {m}\n" for m in HEADLESS_MODULES)
        + "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'rich'))\n"
        + "print(','.join(loaded))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""


def test_the_model_imports_no_io_library_at_runtime() -> None:
    code = (
        "import sys, pkgutil, importlib, sparktui.model as m\n"
        "for info in pkgutil.iter_modules(m.__path__):\n"
        "    importlib.import_module('sparktui.model.' + info.name)\n"
        "bad = {'httpx', 'asyncssh', 'textual', 'rich', 'psutil', 'asyncio'} & "
        "{n.split('.')[0] for n in sys.modules}\n"
        "print(','.join(sorted(bad)))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""


def _printed_by_a_fresh_interpreter(code: str) -> list[str]:
    """The lines ``code`` prints, run by a new Python: nothing the tests imported is loaded there."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    return done.stdout.splitlines()


def test_specs_import_no_io_or_ui_libraries() -> None:
    code = (
        "import sys, sparktui.model.specs\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('httpx', 'asyncio', 'asyncssh', 'textual', 'rich', 'psutil') or m == 'sparktui.config')\n"
        "print(','.join(bad))\n"
    )
    assert _printed_by_a_fresh_interpreter(code) == [""]


def test_the_log_buffer_imports_only_the_standard_library() -> None:
    code = (
        "import sys\n"
        "before = set(sys.modules)\n"
        "import sparktui.model.logbuffer\n"
        "new = {m.split('.')[0] for m in set(sys.modules) - before}\n"
        "print(','.join(sorted(new - set(sys.stdlib_module_names) - {'sparktui'})))\n"
        "print('asyncio' in sys.modules)\n"
    )
    assert _printed_by_a_fresh_interpreter(code) == ["", "False"]


def _import_graph(*args: str) -> subprocess.CompletedProcess[str]:
    script = ROOT / "scripts" / "import_graph.py"
    return subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, check=False)


def test_no_import_runs_up_or_sideways_between_layers() -> None:
    result = _import_graph("--check")
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_drawing_in_docs_architecture_is_the_code() -> None:
    drawing = _import_graph().stdout
    assert "flowchart TD" in drawing and "monitor -->" in drawing
    assert drawing in (ROOT / "docs" / "architecture.md").read_text(), (
        "docs/architecture.md is out of date: python scripts/import_graph.py --write"
    )
