"""The systemd units shipped in contrib/systemd pass ``systemd-analyze verify`` (every key known, every
command there), and the docs show them as they are shipped."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
UNITS = sorted((ROOT / "contrib" / "systemd").glob("*.service"))
INSTALLED = "/opt/sparktui/venv/bin/sparktui"  # where the units expect sparktui; the test points it here
DOCS = {"sparktui-watch.service": ROOT / "docs" / "alerts.md", "sparktui-kiosk.service": ROOT / "docs" / "kiosk.md"}


def _sparktui() -> Path:
    found = Path(sys.executable).parent / "sparktui"
    if not found.exists():
        pytest.skip("no sparktui script beside the interpreter (install the package)")
    return found


@pytest.mark.parametrize("unit", UNITS, ids=lambda p: p.name)
def test_the_unit_passes_systemd_analyze_verify_without_a_warning(unit: Path, tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.fail("systemd-analyze is needed (Debian's systemd package; .ci/run installs it)")
    text = unit.read_text()
    assert INSTALLED in text
    copy = tmp_path / unit.name
    copy.write_text(text.replace(INSTALLED, str(_sparktui())))
    done = subprocess.run([analyze, "verify", str(copy)], capture_output=True, text=True, timeout=60, check=False)
    assert (done.returncode, done.stdout + done.stderr) == (0, "")


@pytest.mark.parametrize("unit", UNITS, ids=lambda p: p.name)
def test_the_docs_show_the_unit_as_shipped(unit: Path) -> None:
    blocks = re.findall(r"```ini\n(.*?)```", DOCS[unit.name].read_text(), re.S)
    assert unit.read_text() in blocks, f"{DOCS[unit.name].name} should show {unit.name} as shipped"


def test_every_shipped_unit_is_documented() -> None:
    assert sorted(DOCS) == [unit.name for unit in UNITS]
