"""Shared test helpers: fixture locations."""

from __future__ import annotations

from pathlib import Path

pytest_plugins = ["tests.sshd"]

DATA = Path(__file__).parent / "data"
VLLM_FIXTURES = DATA / "vllm-0.33"
