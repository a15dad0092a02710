"""Shared test setup: fixture locations, the sshd fixtures, and the markers every test gets.

Tests live in tiers, one folder each: ``unit`` (pure functions on fixture data), ``integration`` (real
HTTP servers, sshd, Prometheus, recordings on disk, subprocesses), ``ui`` (the Textual app under
Pilot), ``snapshots`` (SVG screenshots), ``e2e`` (a real terminal, a real browser). Each test is marked
with its tier, and with what it needs beyond Python: ``sshd``, ``prometheus``, ``browser``, ``tmux``,
``vllm``, ``llamacpp`` (``pytest -m "unit"``, ``pytest -m "not sshd"``; ``pytest --markers`` lists
them). A test over about 5 s is ``slow``: every ``vllm`` test here, the others by hand (``pytest -m "not
slow"``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

# sparktui shows times in the local zone (units.fmt_clock): the tests expect them on one known clock,
# whatever the machine's zone is (the zone tests of fmt_clock pass their own).
os.environ["TZ"] = "UTC"
time.tzset()

pytest_plugins = ["tests.support.sshd", "tests.support.vllm_server", "tests.support.llama_server"]

TESTS = Path(__file__).parent
DATA = TESTS / "data"
VLLM_FIXTURES = DATA / "vllm-0.33"
TIERS = ("unit", "integration", "ui", "snapshots", "e2e")
SSHD_FIXTURES = frozenset({"sshd", "sshd_factory", "fresh_sshd"})
VLLM_FIXTURES_NEEDED = frozenset({"real_vllm", "tiny_model"})
LLAMACPP_FIXTURES_NEEDED = frozenset({"real_llama_server", "llama_models"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        tier = item.path.relative_to(TESTS).parts[0]
        if tier in TIERS:
            item.add_marker(tier)
        fixtures = set(getattr(item, "fixturenames", ()))
        if SSHD_FIXTURES & fixtures:
            item.add_marker("sshd")
        if VLLM_FIXTURES_NEEDED & fixtures:
            item.add_marker("vllm")
        if LLAMACPP_FIXTURES_NEEDED & fixtures:
            item.add_marker("llamacpp")
        if item.get_closest_marker("vllm") is not None:
            item.add_marker("slow")  # the real engine takes a minute or more to start


@pytest.fixture
def umask_022() -> Iterator[None]:
    """The usual umask (files 0644 unless created otherwise), whatever the test run was started with."""
    before = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(before)
