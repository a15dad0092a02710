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

from textual.binding import Binding

import sparktui.ui
from sparktui.actions.plans import Refusal, plan_action
from sparktui.diagnosis.catalogue import Severity
from sparktui.diagnosis.engine import Finding
from sparktui.record.replay import ReplaySource
from sparktui.ui.actions_ui import ConfirmAction
from sparktui.ui.alerts_screen import AlertsScreen
from sparktui.ui.fleet_screen import FleetScreen
from sparktui.ui.keys import CONTEXTS, action_key, all_bindings, binding_ids, keys_markdown
from sparktui.ui.render import finding_text
from sparktui.ui.replay import ReplayApp
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
        await pilot.press("down", "s")
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
    assert action_key("kill-workers") == "k" and action_key("restart", {"restart": "exclamation_mark"}) == "!"
    assert action_key("no-such-action") is None
