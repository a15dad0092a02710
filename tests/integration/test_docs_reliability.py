"""docs/reliability.md cites a test for each fault: every one it cites must exist, so the table cannot rot."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "reliability.md"
CITED = re.compile(r"`(tests/[\w/]+\.py)::(test_\w+)(?:\[([^\]`]+)\])?`")
MIN_ROWS = 40


def _tests_in(path: Path) -> set[str]:
    """The test functions defined at the top level of ``path`` (sync or async)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test_")
    }


def _fault_rows(text: str) -> list[str]:
    """The rows of the fault tables: table lines with a cited test (headers and rules have none)."""
    return [line for line in text.splitlines() if line.startswith("|") and CITED.search(line)]


def test_every_test_the_fault_matrix_cites_exists() -> None:
    text = DOC.read_text(encoding="utf-8")
    cited = CITED.findall(text)
    assert cited, "docs/reliability.md cites no test"
    missing: list[str] = []
    for path, name, case in cited:
        file = ROOT / path
        if not file.is_file():
            missing.append(f"{path}::{name} (no such file)")
        elif name not in _tests_in(file):
            missing.append(f"{path}::{name} (no such test)")
        elif case and f'"{case}"' not in file.read_text(encoding="utf-8"):
            missing.append(f"{path}::{name}[{case}] (no such case id)")
    assert not missing, "docs/reliability.md cites tests that do not exist:\n" + "\n".join(missing)


def test_every_row_of_the_fault_matrix_cites_a_test_and_there_are_enough() -> None:
    text = DOC.read_text(encoding="utf-8")
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| fault ")]
    uncited = [row for row in rows if not CITED.search(row)]
    assert not uncited, "rows without a cited test (list the fault under 'Not covered yet' instead):\n" + "\n".join(
        uncited
    )
    assert len(_fault_rows(text)) >= MIN_ROWS
