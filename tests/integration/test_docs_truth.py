"""The docs stay inside the repository: every link resolves, and no citation points where a reader of
this repository cannot follow (the team's shared folder, its write-ups by file name)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
# The catalogues whose rules cite write-ups: the main one and vLLM's own (llama.cpp's cite its source tree).
CATALOGUES = [ROOT / "sparktui" / "data" / "failures.toml", ROOT / "sparktui" / "engines" / "vllm" / "failures.toml"]
CITED = [*DOCS, ROOT / "pyproject.toml", *CATALOGUES]
# What leaves the repository: the shared folder beside a checkout, its references and write-ups by name.
OUTSIDE = re.compile(r"\.\./shared|shared/(reference|context|fixtures)|context/\d{3}_[0-9a-f]+|\breference/[a-z]")
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~)")


def _prose(text: str) -> str:
    """The text outside fenced code blocks (a link in a code sample is not a link)."""
    out, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line.strip()):
            fenced = not fenced
            continue
        if not fenced:
            out.append(line)
    return "\n".join(out)


def _anchors(path: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation but ``-`` and ``_`` dropped, spaces to ``-``."""
    found = set()
    for line in _prose(path.read_text()).splitlines():
        heading = re.match(r"^#{1,6}\s+(.*)$", line)
        if heading:
            text = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower())
            found.add(text.replace(" ", "-"))
    return found


@pytest.mark.parametrize("path", CITED, ids=lambda p: str(p.relative_to(ROOT)))
def test_nothing_cites_what_is_outside_the_repository(path: Path) -> None:
    hits = [
        f"{path.name}:{n}: {line.strip()[:100]}"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert not hits, "\n".join(hits)


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(path: Path) -> None:
    broken = []
    for target in LINK.findall(_prose(path.read_text())):
        if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        if not linked.exists() or ROOT not in linked.parents:
            broken.append(f"{target}: no such file in the repository")
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
            broken.append(f"{target}: no heading #{anchor} in {linked.name}")
    assert not broken, "\n".join(broken)


def test_every_catalogue_source_is_a_listed_write_up_or_an_issue() -> None:
    listed = set(re.findall(r"^\| (\d{3}) \|", (ROOT / "docs" / "sources.md").read_text(), re.M))
    rules = [rule for path in CATALOGUES for rule in tomllib.loads(path.read_text())["rule"]]
    unknown = []
    for rule in rules:
        for part in filter(None, (p.strip() for p in rule.get("source", "").split(","))):
            write_up = re.fullmatch(r"(?:write-up|report) (\d{3})", part)
            if not (write_up and write_up.group(1) in listed) and not re.fullmatch(r"issue \d+", part):
                unknown.append(f"{rule['id']}: {part}")
    assert listed and not unknown, unknown
