"""The dashboard with Pilot: navigation, filter, themes, pause, resize, help, stale nodes."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console
from textual.command import CommandList, CommandPalette
from textual.pilot import Pilot
from textual.widgets import Static

from sparktui.actions.audit import AuditLog
from sparktui.actions.plans import Refusal, plan_action
from sparktui.actions.progress import RunningAction
from sparktui.actions.registry import ACTIONS
from sparktui.model.observations import FetchKind, HttpResult, NodeObservation, ServerObservation
from sparktui.model.specs import KioskSpec
from sparktui.model.status import State
from sparktui.ui.actions_ui import ConfirmAction
from sparktui.ui.alerts_screen import AlertsScreen
from sparktui.ui.app import SparkApp, make_app
from sparktui.ui.fleet_screen import FleetScreen
from sparktui.ui.fleet_views import DriftScreen, FindingsScreen
from sparktui.ui.help_screen import HelpScreen, KeyReference
from sparktui.ui.keys import help_sections
from sparktui.ui.kiosk_screen import BannerRow, KioskScreen
from sparktui.ui.node_screen import NodeScreen
from sparktui.ui.table import RowTable
from sparktui.ui.themes import ThemeFileError, theme_from_toml
from tests.support.fixture_fleet import put_to_sleep, scenario_scrapes
from tests.support.ui_data import NOW, Clock, fed_app, feed, fire_node_down, fleet_spec
from tests.support.wait import wait_until


def _table(app: SparkApp) -> RowTable:
    return app.screen.query_one("#fleet", RowTable)


def _plain(widget: Static) -> str:
    """What a panel shows, as plain text."""
    console = Console(width=150, record=True, file=io.StringIO())
    console.print(widget.content)
    return console.export_text()


def _row_labels(app: SparkApp) -> list[str]:
    table = _table(app)
    return [str(table.get_row_at(i)[0]) for i in range(table.row_count)]


async def test_fleet_screen_lists_every_node_with_the_worker_under_its_head() -> None:
    app = fed_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, FleetScreen)
        assert _row_labels(app) == ["spark1", "spark2", "spark3", "└ spark4"]
        summary = str(app.screen.query_one("#summary", Static).content)
        # spark2's last draft position is weak (a WARN finding): degraded, as its findings say
        assert "4 nodes" in summary and "1 up" in summary and "1 degraded" in summary and "2 down" in summary
        banner = str(app.screen.query_one("#crit-banner", Static).content)
        assert "spark3 DOWN: qwen235: /health connection refused" in banner


async def test_enter_opens_the_node_and_escape_returns() -> None:
    app = fed_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("down", "enter")
        await pilot.pause()
        assert isinstance(app.screen, NodeScreen) and app.screen.node == "spark2"
        title = str(app.screen.query_one("#title", Static).content)
        assert title.startswith("spark2 (192.168.1.12)")
        await pilot.press("right")
        await pilot.pause()
        assert isinstance(app.screen, NodeScreen) and app.screen.node == "spark3"
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, FleetScreen)
        await pilot.press("1")
        await pilot.pause()
        assert isinstance(app.screen, NodeScreen) and app.screen.node == "spark1"


async def test_node_screen_shows_the_numbers_of_the_model() -> None:
    app = fed_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("enter")
        await pilot.pause()
        screen = app.screen
        view = next(v for v in app.views if v.name == "spark1")
        rates = view.instances[0].rates
        assert rates is not None and rates.spec_decode is not None
        spec_panel = _plain(screen.query_one("#spec", Static))
        assert f"mean length {rates.spec_decode.mean_acceptance_length:.2f}" in spec_panel
        assert "89%" in spec_panel and "63%" in spec_panel  # position 1, conditional
        assert "total 121.7 GiB" in _plain(screen.query_one("#memory", Static))
        assert "docker vllm_gptoss: running" in _plain(screen.query_one("#requests", Static))


async def test_filter_keeps_matching_rows_and_escape_clears_it() -> None:
    app = fed_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("slash", *"down")
        await pilot.pause()
        assert _row_labels(app) == ["spark3", "└ spark4"]
        await pilot.press("escape")
        await pilot.pause()
        assert len(_row_labels(app)) == 4


async def test_t_cycles_the_themes_and_the_palette_follows() -> None:
    app = fed_app()
    async with app.run_test(size=(120, 40)) as pilot:
        assert app.theme == "spark-dark"
        dark_ok = app.colours["status-ok"]
        await pilot.press("t")
        await pilot.pause()
        assert app.theme == "spark-light"
        assert app.colours["status-ok"] != dark_ok
        await pilot.press("t", "t")
        await pilot.pause()
        assert app.theme == "spark-dark"


async def test_pause_freezes_the_screen_while_collection_goes_on() -> None:
    app = fed_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("p")
        await pilot.pause()
        assert "PAUSED" in str(app.screen.query_one("#summary", Static).content)
        before = _table(app).get_row_at(0)
        app.clock.t = NOW + 100  # type: ignore[attr-defined]  # time passes: every node goes stale
        app.refresh_views()
        await pilot.pause()
        assert _table(app).get_row_at(0) == before
        assert app.views[0].status.state is State.STALE  # the model moved on
        await pilot.press("p")
        await pilot.pause()
        assert "stale" in str(_table(app).get_row_at(0)[1])


async def test_resize_from_80x24_to_200x60_adapts_the_columns() -> None:
    app = fed_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        narrow = [c.label for c in _table(app).columns]
        assert narrow == ["Node", "Status", "Gen t/s", "Run/Wait", "KV", "TTFT p90", "Find", "Age"]
        await pilot.resize_terminal(200, 60)
        await pilot.pause()
        wide = [c.label for c in _table(app).columns]
        assert "Model" in wide and "Mem avail" in wide and "GPU" in wide and "BW" in wide and len(wide) == 16
        assert len(_row_labels(app)) == 4


async def test_help_shows_the_key_reference_and_closes_with_escape() -> None:
    app = fed_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        assert app.screen.query_one(KeyReference).sections == help_sections()  # what docs/keys.md holds
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, FleetScreen)


async def test_stale_nodes_are_shown_and_bannered() -> None:
    app = fed_app()
    async with app.run_test(size=(160, 48)) as pilot:
        app.clock.t = NOW + 60  # type: ignore[attr-defined]
        app.refresh_views()
        await pilot.pause()
        assert all("stale" in str(_table(app).get_row_at(i)[1]) for i in range(4))
        assert "STALE" in str(app.screen.query_one("#crit-banner", Static).content)


async def test_kiosk_refuses_every_key_palette_and_click() -> None:
    app = fed_app(kiosk=True)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, KioskScreen)
        theme = app.theme
        for key in ("q", "ctrl+q", "ctrl+c", "t", "p", "enter", "question_mark", "slash", "1", "ctrl+p", "escape"):
            await pilot.press(key)
            await pilot.pause()
            assert isinstance(app.screen, KioskScreen), key  # no screen opened, nothing quit
        await pilot.click("#tile-spark1")
        await pilot.pause()
        assert isinstance(app.screen, KioskScreen)
        assert app.theme == theme and not app.paused and app.is_running
        for action in ("quit", "cycle_theme", "toggle_pause", "help", "command_palette"):
            assert app.check_action(action, ()) is False, action
        for listed in ACTIONS:
            assert app.check_action("act", (listed.id.value,)) is False, listed.id


async def test_kiosk_rotates_pages_and_banners_down_nodes() -> None:
    app = fed_app(kiosk=True)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, KioskScreen)
        banner = screen.query_one("#kiosk-banner")
        assert banner.has_class("shown") and "spark3 DOWN" in str(banner.query(BannerRow).first().content)
        screen.rotate()
        await pilot.pause()
        assert screen.page == 1 and screen.query_one("#kiosk-node").has_class("shown")
        assert "spark1" in str(screen.query_one("#node-title", Static).content)
        for _ in range(4):
            screen.rotate()
        assert screen.page == 0  # fleet, then four nodes, then the fleet again


async def test_kiosk_unlock_key_leaves_for_the_read_only_dashboard() -> None:
    spec = fleet_spec().model_copy(update={"kiosk": KioskSpec(unlock_key="ctrl+u")})
    clock = Clock()
    app = make_app(spec, collect=False, clock=clock, kiosk=True)
    feed(app, clock)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("ctrl+u")
        await pilot.pause()
        assert isinstance(app.screen, FleetScreen)
        assert not app.kiosk and app.read_only
        for action in ACTIONS:
            assert app.check_action("act", (action.id.value,)) is False


async def test_findings_show_on_the_fleet_row_and_the_node_screen() -> None:
    app = fed_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        table = _table(app)
        spark2 = table.get_row_at(1)
        assert str(spark2[-2]) == "1 ▲"  # one finding, a warning
        await pilot.press("down", "enter")
        await pilot.pause()
        panel = _plain(app.screen.query_one("#findings", Static))
        assert "Findings (1)" in panel
        assert "draft position 2 (the last of 3) accepted in 0.163 of drafts" in panel
        assert "fix: " in panel


def _palette_highlights(app: SparkApp, text: str) -> bool:
    """Whether the command palette is open with a highlighted match whose prompt contains ``text``."""
    if not isinstance(app.screen, CommandPalette):
        return False
    matches = app.screen.query_one(CommandList)
    index = matches.highlighted
    return index is not None and text in str(matches.get_option_at_index(index).prompt)


async def test_command_palette_opens_a_node_by_name() -> None:
    app = fed_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"open node spark2")
        await wait_until(
            lambda: _palette_highlights(app, "spark2"), 10.0, what="the palette highlighting spark2's command"
        )
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, NodeScreen) and app.screen.node == "spark2"


async def test_read_only_refuses_the_action_keys_in_the_app_and_the_runner() -> None:
    app = fed_app(read_only=True)
    async with app.run_test(size=(160, 48)) as pilot:
        for key in ("r", "d", "K", "w"):
            await pilot.press(key)
            await pilot.pause()
            assert isinstance(app.screen, FleetScreen), key  # no confirmation was offered
        plan = plan_action("warmup", app.fleet, "spark1", views=app.views)
        assert not isinstance(plan, Refusal)
        result = await app.actions.run(plan)
        assert result.outcome.value == "refused"


@pytest.mark.parametrize("mode", ["read_only", "kiosk"])
async def test_every_action_refused_in_the_dashboard_is_audited(
    mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "audit.log"
    monkeypatch.setenv("SPARKTUI_AUDIT_LOG", str(log))
    app = fed_app(kiosk=True) if mode == "kiosk" else fed_app(read_only=True)
    async with app.run_test(size=(160, 48)) as pilot:
        for key in ("r", "d", "K", "w", "x"):
            await pilot.press(key)
            await pilot.pause()
        await wait_until(lambda: len(AuditLog(log).records()) >= 5, what="five refused lines in the audit log")
        assert not app.action_results  # nothing ran
    records = AuditLog(log).records()
    where = "kiosk" if mode == "kiosk" else "read-only"
    assert [(r["event"], r["action"], r["refused_by"], r["result"]) for r in records] == [
        ("refused", action, where, "refused") for action in ("restart", "drop-caches", "kill-workers", "warmup", "fix")
    ]
    assert all(r["message"] == f"{where}: actions are off" for r in records)


async def test_an_action_key_pressed_in_the_kiosk_is_refused_by_the_kiosk_though_unlocked_before_it_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "audit.log"
    monkeypatch.setenv("SPARKTUI_AUDIT_LOG", str(log))
    app = fed_app(kiosk=True)
    shown: list[str] = []
    monkeypatch.setattr(app, "notify", lambda message, **_: shown.append(message))
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        # The key, then the unlock key, before the action's worker has run at all.
        app.start_action("drop-caches", "spark1")
        app.unlock_kiosk()
        assert not app.kiosk
        await wait_until(lambda: len(AuditLog(log).records()) >= 1, what="the refusal in the audit log")
        assert not app.action_results
        assert shown == []  # the kiosk shows nothing it was not asked to, unlocked or not
    [record] = AuditLog(log).records()
    assert (record["action"], record["refused_by"], record["message"]) == (
        "drop-caches",
        "kiosk",
        "kiosk: actions are off",
    )


async def test_action_key_asks_for_confirmation_naming_the_exact_command() -> None:
    app = fed_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("down", "r")  # spark2, whose vLLM runs as vllm-gemma4.service
        await pilot.pause()
        assert isinstance(app.screen, ConfirmAction)
        assert "sudo -n systemctl restart vllm-gemma4.service" in app.screen.plan.commands
        await pilot.press("n")
        await pilot.pause()
        assert isinstance(app.screen, FleetScreen)
        assert app.action_results == []


async def test_findings_and_drift_screens_open_with_their_keys() -> None:
    app = fed_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("f")
        await pilot.pause()
        assert isinstance(app.screen, FindingsScreen)
        shown = " ".join(_plain(s) for s in app.screen.query(Static))
        assert "Active findings (1)" in shown and "spark2" in shown
        await pilot.press("escape", "v")
        await pilot.pause()
        assert isinstance(app.screen, DriftScreen)
        assert {(row.node, row.instance) for row in app.screen.report.rows} >= {
            ("spark1", "gptoss"),
            ("spark2", "gemma4"),
        }


async def test_alerts_show_in_the_banner_and_can_be_silenced() -> None:
    app = fed_app()
    fire_node_down(app)
    assert any(a.node == "spark3" and a.name == "node-down" for a in app.alerts.active())
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        banner = str(app.screen.query_one("#crit-banner", Static).content)
        assert "CRIT spark3 node-down" in banner
        await pilot.press("exclamation_mark")
        await pilot.pause()
        assert isinstance(app.screen, AlertsScreen)
        await pilot.press("s")
        await pilot.pause()
        assert all("spark3 node-down" not in line for line in app.alert_banner())


async def test_a_node_observed_between_render_ticks_is_drawn_as_it_arrives() -> None:
    """Freshness: a new observation reaches the screen within a frame, not at the next tick."""
    import re

    from sparktui.model.observations import NodeObservation, ServerObservation
    from tests.support.fixture_fleet import scenario_scrapes
    from tests.support.ui_data import _ok

    clock = Clock()
    hourly = fleet_spec().model_copy(update={"poll_interval_s": 3600.0})  # the render tick never comes again
    app = make_app(hourly, collect=False, clock=clock)
    feed(app, clock)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        assert _row_labels(app)[0] == "spark1"
        reqs = [c.key for c in _table(app).columns].index("reqs")
        before = str(_table(app).get_row_at(0)[reqs])
        assert before.startswith("7/")
        body = re.sub(r"(vllm:num_requests_running\{[^}]*\}) [0-9.]+", r"\1 23.0", scenario_scrapes("mtp2-steady")[29])
        clock.t = NOW + 1
        app.monitor.observation(
            NodeObservation(
                node="spark1",
                t=clock.t,
                wall=1e9 + clock.t,
                vllm=(ServerObservation("gptoss", _ok("u"), _ok("u", body)),),
            )
        )
        await wait_until(
            lambda: str(_table(app).get_row_at(0)[reqs]).startswith("23/"), 10.0, what="spark1's reqs cell redrawn"
        )
        assert not str(_table(app).get_row_at(1)[reqs]).startswith("23/")  # the other rows are as they were
        # The header adds up the rows it stands over, redrawn with them (not a tick later).
        cells = [str(_table(app).get_row_at(i)[reqs]).split("/")[0] for i in range(_table(app).row_count)]
        running = sum(int(c) for c in cells if c.isdigit())
        assert f"running {running} " in str(app.screen.query_one("#summary", Static).content)


async def test_the_render_tick_follows_the_polls_and_a_round_is_one_frame() -> None:
    """An arrival a render period after the last tick is drawn by the tick itself (one frame a round,
    the rows with their new trend point); one soon after a tick is drawn alone, without a tick. The
    period counts on the render timer's clock, whatever the app's (here the data's clock stands still)."""
    from tests.support.ui_data import _ok

    clock = Clock()
    hourly = fleet_spec().model_copy(update={"poll_interval_s": 3600.0})  # the timer's tick never comes
    app = make_app(hourly, collect=False, clock=clock)
    timer = Clock()
    app.timer_clock = timer
    feed(app, clock)
    body = scenario_scrapes("mtp2-steady")[29]

    def arrive(after_s: float) -> None:
        timer.t += after_s
        vllm = (ServerObservation("gptoss", _ok("u"), _ok("u", body)),)
        app.monitor.observation(NodeObservation(node="spark1", t=clock.t, wall=1e9 + clock.t, vllm=vllm))

    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        ticks, ticked_at = app.monitor.ticks, app.rounds.ticked_at
        arrive(60.0)  # a minute after the last tick: not a round yet
        await wait_until(lambda: not app._arrival_pending, 10.0, what="the arrival drawn")
        assert app.monitor.ticks == ticks
        arrive(3540.0)  # a render period after the tick: this arrival is the round's tick
        await wait_until(lambda: app.monitor.ticks == ticks + 1, 10.0, what="the arrival's frame ticked")
        assert ticked_at is not None and app.rounds.ticked_at == ticked_at + 3600.0
        arrive(1.0)
        await wait_until(lambda: not app._arrival_pending, 10.0, what="the arrival drawn")
        assert app.monitor.ticks == ticks + 1


async def test_on_a_node_screen_the_round_is_ticked_at_its_own_nodes_arrival() -> None:
    from tests.support.ui_data import _ok

    clock, timer = Clock(), Clock()
    hourly = fleet_spec().model_copy(update={"poll_interval_s": 3600.0})  # the timer's tick never comes
    app = make_app(hourly, collect=False, clock=clock)
    app.timer_clock = timer
    feed(app, clock)
    body = scenario_scrapes("mtp2-steady")[29]

    def arrive(node: str, instance: str) -> None:
        vllm = (ServerObservation(instance, _ok("u"), _ok("u", body)),)
        app.monitor.observation(NodeObservation(node=node, t=clock.t, wall=1e9 + clock.t, vllm=vllm))

    async with app.run_test(size=(160, 48)) as pilot:
        app.open_node("spark1")
        await wait_until(lambda: isinstance(app.screen, NodeScreen), what="spark1's node screen")
        await pilot.pause()
        ticks = app.monitor.ticks
        timer.t += 3600.0  # a round is due
        arrive("spark2", "gemma4")
        await wait_until(lambda: not app._arrival_pending, 10.0, what="spark2's arrival drawn")
        assert app.monitor.ticks == ticks  # not the shown node's: no tick yet
        arrive("spark1", "gptoss")
        await wait_until(lambda: app.monitor.ticks == ticks + 1, 10.0, what="spark1's arrival ticked")


async def test_the_node_screen_redraws_only_the_panels_whose_content_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    app = fed_app()
    async with app.run_test(size=(160, 48)) as pilot:
        app.open_node("spark1")
        await pilot.pause()
        assert isinstance(app.screen, NodeScreen)
        updated: list[str] = []
        original = Static.update

        def counting(self: Static, *args: object, **kwargs: object) -> None:
            updated.append(self.id or "")
            original(self, *args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(Static, "update", counting)
        app.refresh_views(force=True)  # the same data again: nothing to redraw
        assert updated == []
        app.theme = "spark-light"  # new colours: every panel again
        await pilot.pause()
        assert {"title", "latency", "spec", "memory", "gpu"} <= set(updated)


async def test_a_node_screen_reopened_is_the_kept_one_and_the_least_recent_is_let_go(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(SparkApp, "NODE_SCREENS_KEPT", 2)
    app = fed_app()
    async with app.run_test(size=(160, 48)) as pilot:
        app.open_node("spark1")
        await pilot.pause()
        first = app.screen
        assert isinstance(first, NodeScreen)
        await pilot.press("escape")
        assert isinstance(app.screen, FleetScreen)
        app.open_node("spark1")
        await pilot.pause()
        again: object = app.screen
        assert again is first  # not composed again
        await pilot.press("escape")
        for name in ("spark2", "spark3"):
            app.open_node(name)
            await pilot.pause()
            await pilot.press("escape")
        installed = [n for n in ("spark1", "spark2", "spark3") if app.is_screen_installed(f"node:{n}")]
        assert installed == ["spark2", "spark3"]  # spark1, opened least recently, was let go


async def test_the_cli_dashboard_freezes_its_startup_objects_once_and_tests_do_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import gc

    from sparktui.ui import app as app_module

    frozen: list[str] = []
    monkeypatch.setattr(app_module, "FREEZE_AFTER_S", 0.05)
    monkeypatch.setattr(gc, "freeze", lambda: frozen.append("freeze"))
    for freeze_gc in (False, True):
        clock = Clock()
        app = make_app(fleet_spec(), collect=False, clock=clock, freeze_gc=freeze_gc)
        feed(app, clock)
        async with app.run_test(size=(160, 48)) as pilot:
            if freeze_gc:
                await wait_until(lambda: frozen == ["freeze"], 10.0, what="gc.freeze once the app has started")
            else:  # an absence: give the 0.05 s timer time in which it would (wrongly) freeze
                await pilot.pause(0.3)
        assert frozen == (["freeze"] if freeze_gc else [])


def _scrape_nan_on_spark2(app: SparkApp) -> str:
    """spark2's next /metrics answer carries NaN KV usage; returns the reason its status should give."""
    scrape = scenario_scrapes("mtp3-poor-pos2")[29]
    bad = "\n".join(
        f"{line.rsplit(' ', 1)[0]} NaN" if line.startswith("vllm:kv_cache_usage_perc{") else line
        for line in scrape.split("\n")
    )
    _spark2_answers(app, bad)
    return "gemma4: /metrics: NaN in vllm:kv_cache_usage_perc"


def _spark2_answers(app: SparkApp, scrape: str) -> None:
    """spark2's gemma4 answers /health 200 and ``scrape`` on /metrics; the app redraws."""
    ok = HttpResult(url="u", kind=FetchKind.OK, status=200, body=b"", elapsed_s=0.01)
    metrics = HttpResult(url="u", kind=FetchKind.OK, status=200, body=scrape.encode(), elapsed_s=0.01)
    app.state.apply(
        NodeObservation(node="spark2", t=NOW, wall=1e9 + NOW, vllm=(ServerObservation("gemma4", ok, metrics),))
    )
    app.refresh_views()


async def _open_spark2_showing(pilot: Pilot[None], app: SparkApp, reason: str) -> None:
    """spark2's row (the second) shows ``reason`` in its detail; enter opens its node screen."""
    await pilot.pause()
    await pilot.press("down")
    await pilot.pause()
    assert reason in _plain(app.screen.query_one("#detail", Static))
    await pilot.press("enter")
    await pilot.pause()
    assert isinstance(app.screen, NodeScreen)


async def test_a_broken_scrape_shows_its_reason_on_the_node_in_the_dashboard() -> None:
    app = fed_app()
    reason = _scrape_nan_on_spark2(app)
    async with app.run_test(size=(160, 48)) as pilot:
        await _open_spark2_showing(pilot, app, reason)
        assert reason in _plain(app.screen.query_one("#reasons", Static))


async def test_a_broken_scrape_shows_its_reason_on_the_node_in_the_kiosk() -> None:
    app = fed_app(kiosk=True)
    reason = _scrape_nan_on_spark2(app)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, KioskScreen)
        assert reason in _plain(app.screen.query_one("#tile-spark2 #head", Static))


def test_a_theme_file_nested_thousands_deep_is_one_line_naming_it() -> None:
    with pytest.raises(ThemeFileError) as caught:
        theme_from_toml("x = " + "[" * 3000 + "]" * 3000, "deep.toml")
    assert str(caught.value) == "deep.toml: arrays or tables are nested too deeply to read"


async def test_an_asleep_engine_reads_as_asleep_on_the_fleet_row_and_the_node_screen() -> None:
    app = fed_app()
    _spark2_answers(app, put_to_sleep(scenario_scrapes("mtp3-poor-pos2")[29], 1))
    reason = "gemma4: asleep (level 1: weights offloaded to host memory)"
    async with app.run_test(size=(160, 48)) as pilot:
        await _open_spark2_showing(pilot, app, reason)
        view = next(v for v in app.views if v.name == "spark2")
        # Asleep is no problem; the weak draft position its last scrapes showed is (a WARN finding, kept
        # while asleep: nothing new is judged): degraded by that finding, the asleep reason beside it.
        findings = {f.id for f in app.findings["spark2"]}
        expected = State.DEGRADED if "spec-position-collapse" in findings else State.UP
        assert view.instances[0].status.state is expected and reason in view.instances[0].status.reasons
        assert "engine asleep (level 1: weights offloaded to host memory)" in _plain(
            app.screen.query_one("#requests", Static)
        )


async def test_a_running_action_is_in_recent_actions_and_the_action_log_from_its_first_second() -> None:
    app = fed_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        assert "none this session" in _plain(app.screen.query_one("#recent-actions", Static))
        running = RunningAction("restart spark1/qwen36", started=app.clock(), at="10:30:00", nodes=("spark1",))
        running.heard("restart spark1/qwen36: started")
        running.heard("[1/2] restart systemd unit vllm-qwen36.service")
        app.running_actions.append(running)
        app.refresh_views(force=True)
        await pilot.pause()
        recent = _plain(app.screen.query_one("#recent-actions", Static))
        assert "⟳ restart spark1/qwen36 · running 0s · [1/2] restart systemd unit vllm-qwen36.service" in recent
        await pilot.press("a")
        await pilot.pause()
        shown = "\n".join(_plain(s) for s in app.screen.query(Static))
        assert "No action run in this session" not in shown
        assert "⟳ restart spark1/qwen36 · running" in shown and "[1/2] restart systemd unit" in shown
