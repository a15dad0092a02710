"""The screens, fed what a hostile node sends in every text field it fills: nothing drawn holds an
escape sequence, a control or format character, or what an escape sequence carried (issue 32: a vLLM
label holding an OSC 2 and an OSC 52 renamed the tmux pane and wrote the operator's clipboard from the
node screen). The same fields' path through the model is the property of
``tests/unit/test_sanitiser_property.py``; here the drawn screens are read back."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

from sparktui.config import parse_config
from sparktui.model.logbuffer import LogLine
from sparktui.model.observations import FetchKind, HttpResult, NodeObservation, ServerObservation
from sparktui.ui.app import SparkApp, make_app
from sparktui.ui.kiosk_screen import KioskScreen
from sparktui.ui.log_screen import LogScreen
from sparktui.ui.node_screen import NodeScreen
from tests.support.fixture_fleet import gb10_nvidia_exporter_page, scenario_scrapes
from tests.support.ui_data import Clock

# OSC 2 (pane title) and OSC 52 (clipboard) as the attack round sent them, a CSI, C1 controls written as
# UTF-8, a NEL, a right-to-left override, zero-width and tag characters; "visible" is what should stay.
TITLE, CLIPBOARD = "pwnedtitle", "ZWNobyBwd25lZA=="
HOSTILE = (
    f"\x1b]2;{TITLE}\x1b\\\x1b]52;c;{CLIPBOARD}\x07\x1b[2J\x9b31m\x85\u202e\u200b\U000e0041visible\x9d0;{TITLE}\x9c"
)
FORBIDDEN = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff]")

CONFIG = """
poll_interval_s = 1.0
[[nodes]]
name = "spark1"
host = "192.168.1.11"
[[nodes.vllm]]
name = "qwen"
port = 8001
unit = "vllm-qwen.service"
[nodes.gpu_exporter]
port = 9835
"""


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _ok(body: str) -> HttpResult:
    return HttpResult(url="u", kind=FetchKind.OK, status=200, body=body.encode(), elapsed_s=0.01)


def _hostile_app(**options: object) -> SparkApp:
    clock = Clock()
    app = make_app(parse_config(CONFIG, source="hostile.toml"), collect=False, clock=clock, **options)
    steady = scenario_scrapes("mtp2-steady")
    label = _label(HOSTILE)
    gpu = gb10_nvidia_exporter_page().replace('name="NVIDIA H100 80GB HBM3"', f'name="{label}"')
    version = json.dumps({"version": HOSTILE})
    models = json.dumps({"object": "list", "data": [{"id": HOSTILE, "max_model_len": 4096}]})
    for second in range(0, 30, 2):
        t = clock.t = float(second)
        scrape = (
            steady[second]
            .replace('finished_reason="stop"', f'finished_reason="{label}"')
            .replace('source="local_compute"', f'source="{label}"')
            .replace('model_name="RedHatAI/Qwen3.6-35B-A3B-NVFP4"', f'model_name="{label}"')
        )
        vllm = ServerObservation("qwen", _ok(""), _ok(scrape), version=_ok(version), models=_ok(models))
        app.monitor.observation(NodeObservation("spark1", t, 1e9 + t, vllm=(vllm,), gpu_exporter=_ok(gpu)))
        stamp = datetime.fromtimestamp(1e9 + t, UTC)
        app.monitor.log_batch("spark1", "qwen", [LogLine(second, stamp, f"INFO {HOSTILE} step {second}")])
        app.refresh_views()
    return app


def _assert_clean(svg: str, where: str) -> None:
    found = FORBIDDEN.search(svg)
    assert found is None, f"{where}: {found.group()!r} drawn"
    for carried in (TITLE, CLIPBOARD[:12], "\x1b"):
        assert carried not in svg, f"{where}: {carried!r} drawn"


async def test_no_screen_draws_what_a_hostile_node_put_in_its_text() -> None:
    app = _hostile_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        _assert_clean(app.export_screenshot(), "fleet screen")
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, NodeScreen)
        node = app.export_screenshot()
        _assert_clean(node, "node screen")
        assert "visible" in node  # the hostile text was read and drawn, made plain
        await pilot.press("l")
        await pilot.pause()
        assert isinstance(app.screen, LogScreen)
        logs = app.export_screenshot()
        _assert_clean(logs, "log view")
        assert "visible" in logs


async def test_the_kiosk_draws_none_of_it_either() -> None:
    app = _hostile_app(kiosk=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, KioskScreen)
        kiosk = app.export_screenshot()
        _assert_clean(kiosk, "kiosk")
