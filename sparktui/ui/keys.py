"""Every key binding of the dashboard, in one place, each with an id the config's keymap can remap.

``docs/keys.md`` and the help screen are generated from these lists (``keys_markdown``), so they
cannot drift. No destructive action sits on a Ctrl chord (tmux uses them). The recovery actions
(restart, drop caches, kill workers, warmup) get their keys with the actions; their ids are reserved
here so a keymap written today keeps working.
"""

from __future__ import annotations

from textual.binding import Binding, BindingType

APP_BINDINGS: list[BindingType] = [
    Binding("q", "quit", "Quit", id="quit"),
    Binding("question_mark", "help", "Help", id="help", key_display="?"),
    Binding("t", "cycle_theme", "Theme", id="theme"),
    Binding("p", "toggle_pause", "Pause", id="pause"),
    Binding("f", "findings", "Findings", id="findings"),
    Binding("v", "drift", "Drift", id="drift"),
    Binding("exclamation_mark", "alerts", "Alerts", id="alerts", key_display="!"),
    Binding("f8", "screenshot", "Screenshot", id="screenshot", show=False),
]

FLEET_BINDINGS: list[BindingType] = [
    Binding("enter", "open_node", "Open node", id="open-node"),
    Binding("slash", "filter", "Filter", id="filter", key_display="/"),
    Binding("escape", "clear_filter", "Clear filter", id="clear-filter", show=False),
    *(Binding(str(n), f"pick_node({n})", f"Node {n}", id=f"pick-node-{n}", show=False) for n in range(1, 10)),
]

NODE_BINDINGS: list[BindingType] = [
    Binding("escape", "back", "Fleet", id="back"),
    Binding("l", "toggle_logs", "Logs", id="logs"),
    Binding("left", "previous_node", "Prev node", id="previous-node", show=False),
    Binding("right", "next_node", "Next node", id="next-node", show=False),
]

# The recovery actions, on the node shown (node screen) or highlighted (fleet screen). Each asks for a
# confirmation that names the node, the target and the exact commands. Refused in read-only and kiosk
# mode by the app's action check and by the action runner itself.
ACTION_BINDINGS: list[BindingType] = [
    Binding("r", "restart", "Restart", id="restart"),
    Binding("d", "drop_caches", "Drop caches", id="drop-caches"),
    Binding("k", "kill_workers", "Kill workers", id="kill-workers"),
    Binding("w", "warmup", "Warmup", id="warmup"),
    Binding("a", "action_log", "Actions", id="action-log"),
]
RECOVERY_ACTIONS = frozenset({"restart", "drop_caches", "kill_workers", "warmup"})

SECTIONS: tuple[tuple[str, list[BindingType]], ...] = (
    ("Everywhere", APP_BINDINGS),
    ("Recovery actions (fleet and node screens; not in read-only or kiosk mode)", ACTION_BINDINGS),
    ("Fleet screen", FLEET_BINDINGS),
    ("Node screen", NODE_BINDINGS),
)


def _key(binding: Binding) -> str:
    return binding.key_display or binding.key


def _bindings(bindings: list[BindingType]) -> list[Binding]:
    return [b for b in bindings if isinstance(b, Binding)]


def binding_ids() -> set[str]:
    """Every binding id a keymap may name."""
    ids = {b.id for _, bindings in SECTIONS for b in _bindings(bindings) if b.id}
    return ids | {"kiosk-unlock"}


def keys_markdown() -> str:
    """The key reference: one table per screen, from the bindings above."""
    lines = [
        "# Keys",
        "",
        "Generated from `sparktui/ui/keys.py`; remap any of them by id in the config's",
        "keymap.",
        "",
    ]
    for title, bindings in SECTIONS:
        lines += [f"## {title}", "", "| key | does | id |", "|---|---|---|"]
        seen: set[str] = set()
        for binding in _bindings(bindings):
            if binding.id and binding.id.startswith("pick-node-"):
                if "pick" in seen:
                    continue
                seen.add("pick")
                lines.append("| `1`…`9` | open the Nth node | `pick-node-N` |")
                continue
            lines.append(f"| `{_key(binding)}` | {binding.description} | `{binding.id}` |")
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"
