"""``snapshot --json`` and ``check --json`` against their JSON Schema (docs/json.md): real output of the
demo fleet validates, the schema in docs/ is the one the code builds, and a payload that breaks the
contract does not validate."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from sparktui.headless.json_schema import SCHEMA_VERSION, snapshot_schema

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    built = snapshot_schema()
    Draft202012Validator.check_schema(built)
    return built


@pytest.fixture(scope="module")
def demo_json() -> dict[str, dict[str, Any]]:
    """``snapshot --json`` and ``check --json`` of the demo fleet during its incident (a node degraded,
    findings, memory pressure: most fields hold values)."""
    out: dict[str, dict[str, Any]] = {}
    for command in ("snapshot", "check"):
        done = subprocess.run(
            [sys.executable, "-m", "sparktui", "demo", "--scenario", "incident", "--",
             sys.executable, "-m", "sparktui", command, "--json"],
            capture_output=True, text=True, env=ENV, timeout=180, check=False, cwd=ROOT,
        )  # fmt: skip
        start = done.stdout.find("\n{\n")  # after the demo's own lines, the command's output
        assert start >= 0, done.stdout + done.stderr
        out[command] = json.loads(done.stdout[start:])
    return out


@pytest.mark.parametrize("command", ["snapshot", "check"])
@pytest.mark.slow
def test_the_demo_fleets_json_validates_against_the_schema(
    command: str, schema: dict[str, Any], demo_json: dict[str, dict[str, Any]]
) -> None:
    payload = demo_json[command]
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in Draft202012Validator(schema).iter_errors(payload)]
    assert not errors, "\n".join(errors[:10])
    assert payload["schema_version"] == SCHEMA_VERSION
    assert len(payload["nodes"]) == 4
    assert ("exit_code" in payload) is (command == "check")


@pytest.mark.slow
def test_a_payload_that_breaks_the_contract_does_not_validate(
    schema: dict[str, Any], demo_json: dict[str, dict[str, Any]]
) -> None:
    validator = Draft202012Validator(schema)
    renamed = json.loads(json.dumps(demo_json["snapshot"]))
    renamed["nodes"][0]["node_status"] = renamed["nodes"][0].pop("status")
    retyped = json.loads(json.dumps(demo_json["snapshot"]))
    retyped["nodes"][0]["instances"][0]["running"] = "6"
    old = {**demo_json["snapshot"], "schema_version": SCHEMA_VERSION - 1}
    for broken in (renamed, retyped, old):
        assert not validator.is_valid(broken)


def test_the_schema_in_docs_is_the_one_the_code_builds(schema: dict[str, Any]) -> None:
    committed = json.loads((ROOT / "docs" / "snapshot.schema.json").read_text())
    assert committed == schema, "regenerate it: sparktui snapshot --json-schema > docs/snapshot.schema.json"
