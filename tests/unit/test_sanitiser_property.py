"""Property: whatever text a remote puts in any string-bearing field it sends, nothing that comes out of
sparktui can drive a terminal or hide text.

Arbitrary Unicode (C0 and C1 controls written as UTF-8, bidirectional and zero-width characters, tag
characters, ST- and BEL-terminated OSC, DCS, CSI) goes into every field a remote fills that the model
keeps as text: the label values of a vLLM scrape (``model_name``, ``engine``, ``finished_reason``,
``source``), a GPU exporter's labels (the GPU's name, driver, UUID), ``/version``'s version and
``/v1/models``'s model ids, and the lines of a followed log. The monitor core takes them through its
one door, as every mode does; what comes out is checked: the views of every node as ``snapshot``
prints them (text and JSON) and ``check`` does, the findings, the alert events and the notification
texts made from them, and every log line a log view shows. The screens are checked on the same data
by ``tests/ui/test_hostile_text_ui.py``.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparktui.config import catalogue_for, parse_config
from sparktui.diagnosis.engine import Finding
from sparktui.headless.snapshot import render_check, render_snapshot, views_json
from sparktui.model.logbuffer import LogLine
from sparktui.model.observations import FetchKind, HttpResult, NodeObservation, ServerObservation
from sparktui.monitor.core import Monitor
from sparktui.notify.notifiers import event_json, message_text
from tests.support.fixture_fleet import gb10_nvidia_exporter_page, scenario_scrapes

# What must never come out: every C0 control but the line breaks of multi-line output, DEL, every C1
# control, and the format characters (bidi, zero-width, tags) that reorder or hide text.
FORBIDDEN = re.compile(
    "[\x00-\x09\x0b-\x1f\x7f-\x9f\u00ad\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff"
    "\U000e0001-\U000e007f]"
)
PIECES = st.sampled_from(
    [
        "\x1b]2;owned\x1b\\",  # OSC 2: the pane title, ST-terminated
        "\x1b]52;c;ZWNobyBwd25lZA==\x07",  # OSC 52: the clipboard, BEL-terminated
        "\x1bP1$r\x1b\\",  # DCS
        "\x1b[2J\x1b[H",  # CSI: clear the screen
        "\x9b31m",  # CSI as a C1 control written as UTF-8
        "\x9d0;t\x9c",  # OSC as C1, ended by the C1 ST
        "\x85",  # NEL
        "\u202e",  # right-to-left override
        "\u2066",  # left-to-right isolate
        "\u200b\u2060\ufeff",  # zero-width space, word joiner, BOM
        "\U000e0041\U000e0042",  # tag characters
        "\x00\x07\x08\x7f",
        "\r",
        "\n",
        '"',
        "\\",
    ]
)
HOSTILE = st.lists(
    st.one_of(PIECES, st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=6)),
    min_size=1,
    max_size=6,
).map("".join)

CONFIG = """
poll_interval_s = 1.0
[[nodes]]
name = "spark1"
host = "10.0.0.1"
[[nodes.vllm]]
name = "qwen"
port = 8001
unit = "vllm-qwen.service"
[nodes.gpu_exporter]
port = 9835
"""
FLEET = parse_config(CONFIG, source="property.toml")
STEADY = scenario_scrapes("mtp2-steady")
GPU = gb10_nvidia_exporter_page()


def _label(value: str) -> str:
    """``value`` as the exposition writes a label value."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _scrape(index: int, fields: dict[str, str]) -> str:
    text = STEADY[index]
    text = text.replace('model_name="RedHatAI/Qwen3.6-35B-A3B-NVFP4"', f'model_name="{_label(fields["model"])}"')
    text = text.replace('engine="0"', f'engine="{_label(fields["engine"])}"')
    text = text.replace('finished_reason="stop"', f'finished_reason="{_label(fields["reason"])}"')
    return text.replace('source="local_compute"', f'source="{_label(fields["source"])}"')


def _gpu(fields: dict[str, str]) -> str:
    gpu = fields["gpu"]
    return GPU.replace('name="NVIDIA H100 80GB HBM3"', f'name="{_label(gpu)}"').replace(
        'driver_version="590.48.01"', f'driver_version="{_label(gpu[::-1])}"'
    )


def _ok(body: str) -> HttpResult:
    return HttpResult(url="http://10.0.0.1:8001", kind=FetchKind.OK, status=200, body=body.encode(), elapsed_s=0.01)


def _fed(fields: dict[str, str]) -> Monitor:
    monitor = Monitor(FLEET, catalogue_for(FLEET.diagnosis))
    version = json.dumps({"version": fields["version"]})
    models = json.dumps({"object": "list", "data": [{"id": fields["model_id"], "max_model_len": 4096}]})
    for second in range(3):
        t = float(second)
        vllm = ServerObservation(
            "qwen", _ok(""), _ok(_scrape(second, fields)), version=_ok(version), models=_ok(models)
        )
        monitor.observation(NodeObservation("spark1", t, 1e9 + t, vllm=(vllm,), gpu_exporter=_ok(_gpu(fields))))
        stamp = datetime.fromtimestamp(1e9 + t, UTC)
        line = LogLine(second, stamp, fields["log"] + " ERROR CUDA error: out of memory " + fields["log"])
        monitor.log_batch("spark1", "qwen", [line])
        monitor.tick(t, 1e9 + t)
    return monitor


def _finding_texts(findings: tuple[Finding, ...]) -> list[str]:
    texts: list[str] = []
    for finding in findings:
        texts.extend((finding.title, finding.explanation, finding.fix, *finding.evidence))
        texts.extend(line.text for line in finding.lines)
    return texts


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.fixed_dictionaries(
        dict.fromkeys(("model", "engine", "reason", "source", "gpu", "version", "model_id", "log"), HOSTILE)
    )
)
def test_no_output_holds_a_control_or_format_character_whatever_a_remote_sends(fields: dict[str, str]) -> None:
    monitor = _fed(fields)
    views = monitor.views
    events = monitor.alerts.evaluate(views, monitor.findings, 3.0, 1e9 + 3.0)
    # JSON escapes a control character as \u001b: what a consumer reads is the decoded text.
    decoded = json.dumps(json.loads(views_json(views)), ensure_ascii=False)
    outputs = [render_snapshot(views), render_check(views), decoded]
    outputs.extend(_finding_texts(tuple(f for found in monitor.findings.values() for f in found)))
    for event in events:
        outputs.extend((message_text(event), json.dumps(event_json(event), ensure_ascii=False)))
    for buffers in monitor.log_buffers.values():
        for buffer in buffers.values():
            outputs.extend(line.text for line in buffer.tail(100))
    for output in outputs:
        found = FORBIDDEN.search(output)
        assert found is None, f"{found.group()!r} in {output[max(0, found.start() - 60) : found.end() + 20]!r}"
        assert "ZWNobyBwd25lZA" not in output  # an escape sequence goes whole, with what it carried
