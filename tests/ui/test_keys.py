"""The one keymap: every binding is defined in ``sparktui/ui/keys.py`` with an id, docs/keys.md is
rendered from it, and the config's ``[keymap]`` remaps bindings of every kind of screen."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from textual.binding import Binding, BindingType
from textual.command import CommandPalette

import sparktui.ui
import sparktui.ui.keys
from sparktui.actions.plans import Refusal, plan_action
from sparktui.diagnosis.catalogue import Severity
from sparktui.diagnosis.engine import Finding
from sparktui.record.replay import ReplaySource
from sparktui.ui.actions_ui import ConfirmAction
from sparktui.ui.alerts_screen import AlertsScreen
from sparktui.ui.fleet_screen import FleetScreen
from sparktui.ui.help_screen import HelpScreen
from sparktui.ui.keys import (
    CONTEXTS,
    DASHBOARD_WIDE,
    UNDER_THE_DASHBOARD,
    HelpSection,
    action_key,
    all_bindings,
    binding_ids,
    help_sections,
    keys_markdown,
    pack_columns,
)
from sparktui.ui.lists import KeyedScroll
from sparktui.ui.render import finding_text
from sparktui.ui.replay import ReplayApp
from sparktui.ui.table import RowTable
from tests.integration.test_record import T0, write_fixture_recording
from tests.support.ui_data import fed_app, fire_node_down
from tests.support.wait import wait_until

ROOT = Path(__file__).resolve().parents[2]
REGENERATE = "python -m sparktui.ui.keys > docs/keys.md"


def test_docs_keys_md_is_the_rendered_keymap() -> None:
    assert (ROOT / "docs" / "keys.md").read_text() == keys_markdown(), f"docs/keys.md is out of date: {REGENERATE}"


def test_the_module_entry_prints_the_reference() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "sparktui.ui.keys"], capture_output=True, text=True, check=True, cwd=ROOT, timeout=60
    )
    assert done.stdout == keys_markdown()


def test_every_binding_has_an_id_of_its_own_and_a_table() -> None:
    bindings = all_bindings()
    assert all(isinstance(b, Binding) for c in CONTEXTS for b in c.bindings)
    ids = [b.id for b in bindings]
    assert None not in ids
    assert len(ids) == len(set(ids)), "two bindings share an id: a keymap entry would move both"
    assert binding_ids() == set(ids)
    reference = keys_markdown()
    for binding_id in ids:
        assert binding_id is not None
        shown = "pick-node-N" if binding_id.startswith("pick-node-") else binding_id
        assert f"`{shown}`" in reference


def test_every_class_in_the_ui_takes_its_bindings_from_the_keymap() -> None:
    """A binding written into a screen or widget would be missing from the reference and the docs."""
    defined = {id(b) for b in all_bindings()}
    owners = []
    for module_info in pkgutil.iter_modules(sparktui.ui.__path__):
        module = importlib.import_module(f"sparktui.ui.{module_info.name}")
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ != module.__name__ or "BINDINGS" not in cls.__dict__:
                continue
            owners.append(cls.__name__)
            strays = [b for b in cls.__dict__["BINDINGS"] if id(b) not in defined]
            assert not strays, f"{cls.__name__} defines bindings outside sparktui/ui/keys.py: {strays}"
    assert {"SparkApp", "ReplayApp", "FleetScreen", "ConfirmAction", "AlertsScreen", "RowTable"} <= set(owners)


def test_no_binding_is_written_outside_the_keymap_module() -> None:
    """The class scan above sees only ``BINDINGS``; a ``Binding(`` anywhere else in sparktui/ui (a
    widget's ``bindings`` argument, a helper) would escape the keymap as well."""
    strays = [
        path.name
        for path in (ROOT / "sparktui" / "ui").glob("*.py")
        if path.name != "keys.py" and "Binding(" in path.read_text()
    ]
    assert strays == []


# Textual's own, named in the help's note: quit, copy and moving the focus.
TEXTUAL_KEYS = {"ctrl+q", "ctrl+c", "super+c", "tab", "shift+tab"}


@pytest.mark.parametrize("view", ["question_mark", "exclamation_mark", "v", "f", "fleet", "enter", "a"])
async def test_every_key_live_on_a_list_or_page_is_in_the_keymap(view: str) -> None:
    """Textual's OptionList and scrolling containers bring bindings without ids (never remappable,
    never in the help): the fleet table, the lists and the pages take theirs from keys.py instead."""
    app = fed_app()
    async with app.run_test(size=(160, 48)) as pilot:
        if view != "fleet":  # the fleet screen itself, its table focused
            await pilot.press(view)
        await pilot.pause()
        live = app.screen.active_bindings
        strays = {key for key, active in live.items() if active.binding.id not in binding_ids()} - TEXTUAL_KEYS
        assert strays == set(), f"{type(app.screen).__name__}: {sorted(strays)}"
        assert {"j", "k", "g", "G"} <= set(live)


def _keys(bindings: list[BindingType]) -> list[str]:
    return [key.strip() for b in bindings if isinstance(b, Binding) for key in b.key.split(",")]


def test_no_context_binds_one_key_twice() -> None:
    for context in CONTEXTS:
        keys = _keys(context.bindings)
        assert len(keys) == len(set(keys)), f"{context.title}: {sorted(k for k in keys if keys.count(k) > 1)}"


def test_navigation_keys_never_shadow_a_dashboard_wide_key() -> None:
    """k was Kill workers while j did nothing: every list now moves on j/k, and no action sits on them."""
    wide = {key for bindings in DASHBOARD_WIDE for key in _keys(bindings)}
    for bindings in UNDER_THE_DASHBOARD:
        assert not wide & set(_keys(bindings)), sorted(wide & set(_keys(bindings)))
    assert {"j", "k", "g", "G"} <= set(_keys(sparktui.ui.keys.TABLE_BINDINGS))
    assert action_key("kill-workers") == "K"


def test_the_help_lists_every_binding_under_its_context() -> None:
    sections = {section.title: section for section in help_sections()}
    for context in CONTEXTS:
        rows = sections[context.title].rows
        descriptions = {description for _, description in rows}
        for binding in context.bindings:
            assert isinstance(binding, Binding)
            if binding.id and binding.id.startswith("pick-node-"):
                assert ("1…9", "Open the Nth node") in rows
                continue
            assert binding.description in descriptions, (context.title, binding.id)
    everywhere = {d: k for k, d in sections["Everywhere"].rows}
    assert everywhere["Commands"] == "ctrl+p"
    assert {d: k for k, d in sections["Confirm dialog"].rows} == {"Run it": "y", "Cancel": "n esc"}
    assert ("s", "Silence 1 h") in sections["Alerts"].rows
    assert ("↓ j", "Down") in sections["Table navigation"].rows


def test_the_help_shows_the_remapped_key() -> None:
    remapped = {s.title: s for s in help_sections({"kill-workers": "X", "table-down-vim": "n", "pick-node-2": "b"})}
    assert ("X", "Kill workers") in remapped["Recovery actions"].rows
    assert ("↓ n", "Down") in remapped["Table navigation"].rows
    assert ("1 b 3 4 5 6 7 8 9", "Open the Nth node") in remapped["Fleet screen"].rows


def test_columns_keep_the_order_and_make_the_tallest_column_as_short_as_it_can_be() -> None:
    sections = [HelpSection(str(n), tuple(("k", "d") for _ in range(size))) for n, size in enumerate((5, 1, 1, 5))]
    packed = pack_columns(sections, 2)
    assert [[s.title for s in column] for column in packed] == [["0", "1"], ["2", "3"]]  # 6+1+2 lines vs 2+1+6
    assert [s.title for s in pack_columns(sections, 1)[0]] == ["0", "1", "2", "3"]
    wide = pack_columns(sections, 9)
    assert all(wide) and max(sum(s.lines for s in c) + len(c) - 1 for c in wide) == 6  # never an empty column


@pytest.mark.parametrize(("size", "scrolls"), [((160, 48), False), ((80, 24), True)], ids=["160x48", "80x24"])
async def test_the_help_is_one_screen_at_160x48_and_scrolls_at_80x24(size: tuple[int, int], scrolls: bool) -> None:
    app = fed_app()
    async with app.run_test(size=size) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        page = app.screen.query_one(KeyedScroll)
        assert (page.max_scroll_y > 0) is scrolls
        await pilot.press("G")
        await pilot.pause()
        assert page.scroll_target_y == page.max_scroll_y


async def test_vim_keys_move_the_fleet_cursor_and_k_kills_nothing() -> None:
    app = fed_app()

    def told() -> list[str]:
        return [str(n.message) for n in app._notifications]

    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        table = app.screen.query_one(RowTable)
        await pilot.press("j", "j")
        assert table.cursor_row == 2
        await pilot.press("k")
        await pilot.pause()
        assert table.cursor_row == 1 and told() == []  # k moved up: no kill was planned
        await pilot.press("G")
        assert table.cursor_row == table.row_count - 1
        await pilot.press("g")
        assert table.cursor_row == 0
        await pilot.press("K")  # kill workers: spark1's plan is refused, and says why
        await wait_until(lambda: any("spark1: its workers are not stale" in m for m in told()), what="K's refusal")


async def test_the_command_palette_remapped_opens_on_the_new_key_only() -> None:
    app = fed_app(keymap={"command-palette": "f2"})
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("ctrl+p")
        await pilot.pause()
        assert isinstance(app.screen, FleetScreen)
        await pilot.press("f2")
        await pilot.pause()
        assert isinstance(app.screen, CommandPalette)


async def test_confirm_yes_remapped_runs_on_the_new_key_only() -> None:
    app = fed_app(keymap={"confirm-yes": "j"})
    answers: list[bool | None] = []
    async with app.run_test(size=(160, 48)) as pilot:
        plan = plan_action("restart", app.fleet, "spark2", views=app.views)
        assert not isinstance(plan, Refusal)
        app.push_screen(ConfirmAction(plan), answers.append)
        await pilot.pause()
        await pilot.press("y")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmAction) and answers == []  # y no longer confirms
        await pilot.press("j")
        await pilot.pause()
        assert isinstance(app.screen, FleetScreen) and answers == [True]


async def test_silence_alert_remapped_silences_on_the_new_key() -> None:
    app = fed_app(keymap={"silence-alert": "z"})
    fire_node_down(app)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("exclamation_mark")
        await pilot.pause()
        assert isinstance(app.screen, AlertsScreen)
        await pilot.press("s")
        await pilot.pause()
        assert any("spark3 node-down" in line for line in app.alert_banner())  # s no longer silences
        await pilot.press("z")
        await pilot.pause()
        assert all("spark3 node-down" not in line for line in app.alert_banner())


async def test_a_replay_key_remapped_steps_on_the_new_key(tmp_path: Path) -> None:
    source = ReplaySource(write_fixture_recording(tmp_path / "fleet.db", 60), playing=False)
    source.fleet = source.fleet.model_copy(update={"keymap": {"replay-step": "o"}})
    app = ReplayApp(source)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_until(lambda: app.ticks > 0, timeout_s=10.0)
        bindings = app.screen.active_bindings
        assert "full_stop" not in bindings
        assert bindings["o"].binding.id == "replay-step"
        await pilot.press("o")
        await wait_until(lambda: source.clock() == T0 + 1, timeout_s=10.0)


async def test_an_unknown_keymap_id_is_told_and_the_defaults_stay() -> None:
    app = fed_app(keymap={"no-such-binding": "x"})
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        assert any("'no-such-binding'" in str(n.message) for n in app._notifications)
        await pilot.press("question_mark")
        await pilot.pause()
        assert type(app.screen).__name__ == "HelpScreen"


def test_a_finding_names_the_key_that_applies_its_fix_remapped_or_not() -> None:
    """Findings said ``[drop-caches]``, an id, where the operator needs the key (issue 18)."""
    finding = Finding(
        "launch-readiness", "spark1", "qwen36", Severity.WARN, "vLLM would not start now", ("x",),
        "", "Drop the page cache.", "drop-caches", 0.0, 0.0,
    )  # fmt: skip
    colours = dict.fromkeys(("status-crit", "status-warn", "status-loading", "dim"), "#ffffff")
    assert "[d: drop caches]" in finding_text(finding, colours).plain
    assert "[x: drop caches]" in finding_text(finding, colours, keymap={"drop-caches": "x"}).plain
    # A fix of several actions is on the fix key, with its actions in order.
    blocked = replace(finding, id="page-cache-blocks-start", severity=Severity.CRIT)
    assert "[x: drop caches → restart → warm up]" in finding_text(blocked, colours).plain
    assert "[F: drop caches → restart → warm up]" in finding_text(blocked, colours, keymap={"fix": "F"}).plain
    assert action_key("kill-workers") == "K" and action_key("restart", {"restart": "exclamation_mark"}) == "!"
    assert action_key("no-such-action") is None


def _svgs(folder: Path) -> list[tuple[Path, str]]:
    return [(path, path.read_text()) for path in folder.glob("sparktui-*.svg")]


async def test_f8_saves_a_screenshot_and_says_where(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """f8 said only "Failed to save screenshot" (Textual's, into a ~/Downloads that did not exist): it
    saves in the working directory and says where."""
    monkeypatch.chdir(tmp_path)
    app = fed_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("f8")
        await wait_until(lambda: any("screenshot" in str(n.message) for n in app._notifications), what="f8's note")
        (said,) = [str(n.message) for n in app._notifications]
    ((saved, text),) = _svgs(tmp_path)
    assert said == f"screenshot saved: {saved}" and "<svg" in text
