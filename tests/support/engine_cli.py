"""``sparktui`` run as the operator runs it, on one config file, for the engines' end-to-end tests."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any


def run_sparktui(config_file: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sparktui", "--config", str(config_file), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def snapshot_instance(config_file: Path) -> dict[str, Any]:
    """The one instance of a one-node fleet, as ``snapshot --json`` gives it (two scrapes 0.5 s apart)."""
    result = run_sparktui(config_file, "snapshot", "--json", "--interval", "0.5")
    assert result.returncode == 0, result.stderr
    (node,) = json.loads(result.stdout)["nodes"]
    (instance,) = node["instances"]
    return dict(instance)
