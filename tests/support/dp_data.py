"""The two-engine data-parallel fixture (``tests/data/vllm-0.32/dp2``) and a fleet fed with it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sparktui.config import parse_config
from sparktui.engines import readings
from sparktui.model.fleet import FleetState
from sparktui.model.observations import FetchKind, HttpResult, NodeObservation, ServerObservation
from sparktui.model.specs import FleetSpec

DP2 = Path(__file__).resolve().parents[1] / "data" / "vllm-0.32" / "dp2"
EXPECTED: dict[str, Any] = json.loads((DP2 / "expected.json").read_text())

CONFIG = """
poll_interval_s = 1.0
[[nodes]]
name = "spark-dp"
host = "192.168.1.21"
[[nodes.vllm]]
name = "qwen-dp2"
port = 8000
"""


def dp2_scrapes() -> list[tuple[float, str]]:
    """(simulated time, body) of each scrape, in order."""
    entries = json.loads((DP2 / "scrapes.json").read_text())
    return [(float(e["t"]), (DP2 / e["file"]).read_text()) for e in entries]


def ok(url: str, body: str = "") -> HttpResult:
    return HttpResult(url=url, kind=FetchKind.OK, status=200, body=body.encode(), elapsed_s=0.01)


def dp2_observations(node: str = "spark-dp", instance: str = "qwen-dp2") -> list[NodeObservation]:
    """One poll per scrape: /health 200 and the scrape, timed at the scrape's own time."""
    version = ok("v", '{"version": "0.32.0"}')
    return [
        NodeObservation(
            node=node,
            t=t,
            wall=1e9 + t,
            vllm=(ServerObservation(instance, ok("h"), ok("m", body), version),),
        )
        for t, body in dp2_scrapes()
    ]


def dp2_fleet(config: str = CONFIG) -> tuple[FleetState, float]:
    """A fleet whose one instance served the whole dp2 scenario, and the time of its last scrape."""
    spec: FleetSpec = parse_config(config, source="dp2-test.toml")
    state = FleetState(spec, readings())
    observations = dp2_observations()
    for observation in observations:
        state.apply(observation)
    return state, observations[-1].t
