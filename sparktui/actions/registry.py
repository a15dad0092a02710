"""Every action sparktui can run, in one table: pure data, no I/O.

An action's ``id`` is its one spelling everywhere: the CLI's ``sparktui action NODE ID``, the key
binding's id (which a config's ``[keymap]`` remaps), the command palette's entry, the ``action`` field
of the audit log and ``ActionKind``'s value. ``sparktui.ui.keys`` builds the action bindings from this
table, the palette lists from it, the CLI takes its choices from it, and ``sparktui.actions.controller``
reads its refusal rules; none of them keeps a list of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class ActionKind(StrEnum):
    """The actions' ids: the one spelling of each (``ActionSpec.id``)."""

    RESTART = "restart"
    DROP_CACHES = "drop-caches"
    KILL_WORKERS = "kill-workers"
    WARMUP = "warmup"
    FIX = "fix"  # a finding's whole fix: several of the above in order (``FixPlan``)
    BENCH = "bench"  # ``sparktui bench`` on the node's instance, from the dashboard (``BenchPlan``)


class PlannedBy(StrEnum):
    """How an action's plan is made (``sparktui.actions.controller.plan_for`` follows this)."""

    ACTION = "action"  # plan_action on the state shown: exact commands on the node
    FIX = "fix"  # the whole fix of a finding (the worst open one, or one named): several actions in order
    BENCH = "bench"  # a bench of the node's first instance that serves HTTP


class Mode(StrEnum):
    """A mode of sparktui that refuses some actions (the refusal is audited, ``refused_by`` the mode)."""

    READ_ONLY = "read-only"
    KIOSK = "kiosk"


ALL_MODES = frozenset(Mode)


@dataclass(frozen=True, slots=True)
class ActionSpec:
    """One row of the table."""

    id: ActionKind  # the one spelling: CLI argument, binding id, palette, audit ``action``
    key: str  # the default key (Textual's name), remappable by ``id`` in the config's [keymap]
    label: str  # the footer's and the palette's name for it
    words: str  # in the operator's words, as a finding's fix names it ("drop caches → restart → warm up")
    planned_by: PlannedBy
    confirmation: str  # what the confirmation asks about, for the palette's entry and docs/actions.md
    refused_in: frozenset[Mode] = ALL_MODES
    one_per_node: bool = True  # refused (not queued) while another action runs on the node
    audit: str = "action"  # the audit record that ends it (``started`` opens every one)
    in_palette: bool = True
    in_cli: bool = True  # ``sparktui action NODE ID`` (the bench has ``sparktui bench`` of its own)

    @property
    def textual_action(self) -> str:
        """The binding's action: every action goes through the app's ``act`` with its id, so the id is
        the only name it has (no ``drop_caches`` method beside the ``drop-caches`` id)."""
        return f"act('{self.id.value}')"


ACTIONS: tuple[ActionSpec, ...] = (
    ActionSpec(
        ActionKind.RESTART,
        "r",
        "Restart",
        "restart",
        PlannedBy.ACTION,
        "restart vLLM's unit or container, wait for /health, warm up",
    ),
    ActionSpec(
        ActionKind.DROP_CACHES,
        "d",
        "Drop caches",
        "drop caches",
        PlannedBy.ACTION,
        "sync, drop the page cache, remove /dev/shm leftovers no process holds",
    ),
    ActionSpec(
        ActionKind.KILL_WORKERS,
        "K",  # shift+k: a plain k moves the cursor up (vim) in every list, and must never kill anything
        "Kill workers",
        "kill workers",
        PlannedBy.ACTION,
        "kill the stale VLLM::Worker processes the dialog lists",
    ),
    ActionSpec(
        ActionKind.WARMUP,
        "w",
        "Warmup",
        "warm up",
        PlannedBy.ACTION,
        "tiny requests until the first token is quick",
    ),
    ActionSpec(
        ActionKind.FIX,
        "x",
        "Fix",
        "fix",
        PlannedBy.FIX,
        "the worst open finding's whole fix, its actions in order",
        audit="fix",
        in_palette=False,  # it needs a finding: the key on a node, or the CLI's --finding
    ),
    ActionSpec(
        ActionKind.BENCH,
        "b",
        "Bench",
        "bench",
        PlannedBy.BENCH,
        "sparktui bench on the node's instance: loads it like real traffic for a few minutes",
        in_cli=False,
    ),
)

BY_ID: dict[str, ActionSpec] = {spec.id.value: spec for spec in ACTIONS}


def action_spec(action_id: str) -> ActionSpec | None:
    return BY_ID.get(action_id)


def cli_choices() -> tuple[str, ...]:
    return tuple(spec.id.value for spec in ACTIONS if spec.in_cli)


def refused_in(mode: Mode) -> frozenset[str]:
    """The ids a mode refuses."""
    return frozenset(spec.id.value for spec in ACTIONS if mode in spec.refused_in)
