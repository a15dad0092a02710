"""The table of actions is the one source: the key bindings, the CLI's choices, the fix's words and the
audit's ``action`` all take each action's id from it, spelt one way (the palette: tests/ui/test_bench_ui.py)."""

from __future__ import annotations

import argparse

import pytest
from textual.actions import parse
from textual.binding import Binding

from sparktui.actions.plans import ACTION_WORDS
from sparktui.actions.registry import ACTIONS, ActionKind, Mode, action_spec, cli_choices, refused_in
from sparktui.cli import action as cli_action
from sparktui.diagnosis.catalogue import ACTIONS as FIX_STEPS
from sparktui.ui.keys import ACTION_BINDINGS, binding_ids


def test_every_action_key_binding_comes_from_the_table() -> None:
    bindings = [b for b in ACTION_BINDINGS if isinstance(b, Binding) and b.id != "action-log"]
    assert [(b.id, b.key, b.description) for b in bindings] == [(a.id.value, a.key, a.label) for a in ACTIONS]
    for binding in bindings:
        _, name, parameters = parse(binding.action)
        assert (name, parameters) == ("act", (binding.id,)), binding  # the id is the only name it has


def test_the_cli_takes_its_choices_from_the_table() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    cli_action.add_parser(sub)
    assert parser.parse_args(["action", "spark1", "drop-caches"]).action == "drop-caches"
    with pytest.raises(SystemExit):
        parser.parse_args(["action", "spark1", "drop_caches"])  # one spelling: the other is refused
    choices = next(a.choices for a in sub.choices["action"]._actions if a.dest == "action")
    assert tuple(choices or ()) == cli_choices() == tuple(a.id.value for a in ACTIONS if a.in_cli)
    assert "bench" not in cli_choices()  # it has `sparktui bench` of its own


def test_each_action_has_one_spelling() -> None:
    ids = [a.id.value for a in ACTIONS]
    assert len(ids) == len(set(ids)) and set(ids) == {k.value for k in ActionKind}
    for action in ACTIONS:
        assert "_" not in action.id.value  # no drop_caches beside drop-caches
        assert action_spec(action.id.value) is action and ActionKind(action.id.value) is action.id
        assert action.id.value in binding_ids()  # the keymap remaps it by the same name
        assert ACTION_WORDS[action.id] == action.words
    assert set(FIX_STEPS) <= set(ids)  # a finding's fix names the table's actions


def test_read_only_and_the_kiosk_refuse_every_action_of_the_table() -> None:
    assert refused_in(Mode.READ_ONLY) == refused_in(Mode.KIOSK) == {a.id.value for a in ACTIONS}
