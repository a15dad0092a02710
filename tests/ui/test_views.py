"""The fleet-wide lists over the dashboard: the alerts with their rules' state, and the drift."""

from __future__ import annotations

import io

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from sparktui.diagnosis.alerts import RuleState, default_rules, status_timing
from sparktui.model.drift import DriftReport
from sparktui.model.specs import AlertRuleSpec
from sparktui.ui.alerts_screen import AlertsScreen
from sparktui.ui.app import SparkApp, make_app
from sparktui.ui.fleet_views import DriftDetailScreen, DriftScreen
from sparktui.ui.lists import KeyedOptionList
from tests.support.ui_data import Clock, fed_app, feed, fire_node_down, fleet_spec
from tests.unit.test_drift import ROWS


def plain(renderable: RenderableType, width: int = 150) -> str:
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


def shown_options(app: SparkApp, width: int = 150) -> list[str]:
    options = app.screen.query_one(KeyedOptionList)
    prompts = [options.get_option_at_index(i).prompt for i in range(options.option_count)]
    assert all(isinstance(prompt, Table | Text | Group) for prompt in prompts)
    return [plain(prompt, width) for prompt in prompts if isinstance(prompt, Table | Text | Group)]


def app_with_a_slow_node_down_rule(**options: object) -> SparkApp:
    """The default rules and one more on node_down held for 10 min: spark3, refused since the start,
    fires the 30 s rule and is still pending on this one."""
    spec = fleet_spec()
    slow = AlertRuleSpec(name="node-down-long", metric="node_down", for_s=600.0, severity="crit")
    spec = spec.model_copy(update={"alerts": (*default_rules(spec.thresholds), slow)})
    clock = Clock()
    app = make_app(spec, collect=False, clock=clock, **options)
    feed(app, clock)
    fire_node_down(app)
    return app


async def test_the_alerts_screen_lists_firing_then_pending_then_the_quiet_rules() -> None:
    app = app_with_a_slow_node_down_rule()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("exclamation_mark")
        await pilot.pause()
        assert isinstance(app.screen, AlertsScreen)
        shown = shown_options(app)
        states = [s.state for s in app.screen.statuses]
        assert states == sorted(
            states, key=[RuleState.FIRING, RuleState.SILENCED, RuleState.PENDING, RuleState.OK].index
        )
        firing = next(i for i, line in enumerate(shown) if "spark3/node-down " in line)
        pending = next(i for i, line in enumerate(shown) if "spark3/node-down-long" in line)
        quiet = next(i for i, line in enumerate(shown) if "kv-cache-full" in line)
        assert firing < pending < quiet
        assert shown[firing].startswith("firing crit") and "rule: node down for 30 s" in shown[firing]
        status = app.screen.statuses[pending]
        assert status.state is RuleState.PENDING
        assert shown[pending].startswith("pending crit")
        assert status_timing(status, app.clock()) in shown[pending] and "of 10 min" in shown[pending]
        assert shown[quiet].startswith("ok") and "KV-cache usage ≥ 90.0% for 5 min" in shown[quiet]
        options = app.screen.query_one(KeyedOptionList)
        assert options.border_title is not None and "pending" in str(options.border_title)


async def test_silencing_a_pending_alert_marks_it_and_keeps_the_cursor() -> None:
    app = app_with_a_slow_node_down_rule()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("exclamation_mark")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, AlertsScreen)
        pending = next(i for i, s in enumerate(screen.statuses) if s.state is RuleState.PENDING)
        await pilot.press(*["j"] * pending)
        key = screen.statuses[pending].key
        await pilot.press("s")
        await pilot.pause()
        assert key is not None and app.alerts.silenced_until(key, app.clock()) is not None
        highlighted = screen.query_one(KeyedOptionList).highlighted
        assert highlighted is not None and screen.statuses[highlighted].key == key
        assert "silenced for 60 min more" in shown_options(app)[highlighted]


async def test_drift_shows_the_differences_first_and_the_commands_in_the_detail_at_80x24() -> None:
    app = fed_app()
    async with app.run_test(size=(80, 24)) as pilot:
        app.push_screen(DriftScreen(DriftReport(ROWS, {})))
        await pilot.pause()
        first = shown_options(app, width=76)[0]
        assert "model gpt-oss" in first and "2 differences" in first
        table = [line.split() for line in first.splitlines()]
        assert ["vLLM", "version", "0.33.0", "0.30.1"] in table and ["KV-cache", "dtype", "auto", "fp8"] in table
        assert "vllm serve" not in first and "prefix" not in first  # only what differs; no command in the table
        await pilot.press("enter")
        await pilot.pause()
        detail = app.screen
        assert isinstance(detail, DriftDetailScreen) and detail.group.title == "model gpt-oss"
        shown = [s.content for s in detail.query(Static)]
        rows = [line.split() for s in shown if isinstance(s, Table) for line in plain(s, width=76).splitlines()]
        assert ["prefix", "caching", "yes", "no"] in rows and ["GPU", "blocks", "40,123", "39,811"] in rows
        (command,) = [s for s in shown if isinstance(s, Text) and s.plain.startswith("b: vllm serve")]
        marked = [command.plain[span.start : span.end] for span in command.spans if "reverse" in str(span.style)]
        assert marked == ["--kv-cache-dtype fp8"]
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, DriftScreen)
