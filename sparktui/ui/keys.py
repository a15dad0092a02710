"""Every key binding of the dashboard, in one place, each with an id the config's keymap can remap.

The screens, the app and the table take their ``BINDINGS`` from the lists here; ``docs/keys.md`` and
the help screen are rendered from them (``keys_markdown``; ``python -m sparktui.ui.keys`` prints it),
so none of them can drift. No destructive action sits on a Ctrl chord (tmux uses them).
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from textual.binding import Binding, BindingType
from textual.keys import format_key, key_to_character

from sparktui.actions.registry import ACTIONS

# --- the dashboard ------------------------------------------------------------------------------------

APP_BINDINGS: list[BindingType] = [
    Binding("q", "quit", "Quit", id="quit"),
    Binding("question_mark", "help", "Help", id="help", key_display="?"),
    Binding("t", "cycle_theme", "Theme", id="theme"),
    Binding("p", "toggle_pause", "Pause", id="pause"),
    Binding("f", "findings", "Findings", id="findings"),
    Binding("v", "drift", "Drift", id="drift"),
    Binding("exclamation_mark", "alerts", "Alerts", id="alerts", key_display="!"),
    Binding("f8", "screenshot", "Screenshot", id="screenshot", show=False),
    # Textual would add its own ctrl+p, without an id; this one is in the keymap and the help.
    Binding("ctrl+p", "command_palette", "Commands", id="command-palette", show=False, priority=True),
]

# The actions, on the node shown (node screen) or highlighted (fleet screen), from the table of actions
# (sparktui/actions/registry.py): its key, its label, its id as the binding's id and as the one argument
# of the app's ``act``. Each asks for a confirmation that names the node, the target and the exact
# commands; refused (and the refusal audited) in read-only and kiosk mode by the action controller.
_TABLE: list[BindingType] = [Binding(a.key, a.textual_action, a.label, id=a.id.value) for a in ACTIONS]
ACTION_BINDINGS: list[BindingType] = [
    *_TABLE[:-1],
    Binding("a", "action_log", "Actions", id="action-log"),  # the footer's order: the log before the bench
    _TABLE[-1],
]


FLEET_BINDINGS: list[BindingType] = [
    Binding("enter", "open_node", "Open node", id="open-node"),
    Binding("slash", "filter", "Filter", id="filter", key_display="/"),
    Binding("escape", "clear_filter", "Clear filter", id="clear-filter", show=False),
    *(Binding(str(n), f"pick_node({n})", f"Node {n}", id=f"pick-node-{n}", show=False) for n in range(1, 10)),
]

NODE_BINDINGS: list[BindingType] = [
    Binding("escape", "back", "Fleet", id="back"),
    Binding("l", "open_logs", "Logs", id="logs"),
    Binding("left", "previous_node", "Prev node", id="previous-node", show=False),
    Binding("right", "next_node", "Next node", id="next-node", show=False),
    Binding("i", "next_instance", "Instance", id="node-instance"),
]


def _navigation(
    prefix: str, up: str, down: str, first: str, last: str, *, ends: tuple[str, str] = ("First", "Last")
) -> list[BindingType]:
    """Moving through a list or page: the arrows, the pages, the ends, and vim's keys beside them
    (j/k, g/G), each with an id of its own (``table-down``, ``table-down-vim``) so either can be remapped."""
    return [
        Binding("up", up, "Up", id=f"{prefix}-up", show=False),
        Binding("down", down, "Down", id=f"{prefix}-down", show=False),
        Binding("k", up, "Up", id=f"{prefix}-up-vim", show=False),
        Binding("j", down, "Down", id=f"{prefix}-down-vim", show=False),
        Binding("pageup", "page_up", "Page up", id=f"{prefix}-page-up", show=False),
        Binding("pagedown", "page_down", "Page down", id=f"{prefix}-page-down", show=False),
        Binding("home", first, ends[0], id=f"{prefix}-first", show=False),
        Binding("end", last, ends[1], id=f"{prefix}-last", show=False),
        Binding("g", first, ends[0], id=f"{prefix}-first-vim", show=False),
        Binding("G", last, ends[1], id=f"{prefix}-last-vim", show=False),
    ]


# The log view (``l`` on the node screen). No key of the app's actions (r d K w x a) nor of the screens
# (f findings, v drift): wrap is ``e``, follow ``F`` (and End, G: the last line).
LOG_BINDINGS: list[BindingType] = [
    Binding("escape,l", "back", "Node", id="log-back"),
    Binding("slash", "search", "Search", id="log-search", key_display="/"),
    Binding("n", "next_match", "Next match", id="log-next-match"),
    Binding("N", "previous_match", "Prev match", id="log-previous-match"),
    Binding("F", "follow", "Follow", id="log-follow"),
    Binding("e", "toggle_wrap", "Wrap", id="log-wrap"),
    Binding("i", "next_instance", "Instance", id="log-instance"),
    Binding("b", "kernel_log", "Kernel", id="log-kernel"),  # the box under the engine: its kernel log
    *_navigation("log", "scroll_lines(-1)", "scroll_lines(1)", "first", "follow", ends=("First line", "Follow")),
    Binding("left", "scroll_columns(-8)", "Left", id="log-left", show=False),
    Binding("right", "scroll_columns(8)", "Right", id="log-right", show=False),
]

TABLE_BINDINGS: list[BindingType] = [
    *_navigation("table", "cursor_up", "cursor_down", "first", "last"),
    Binding("left", "scroll_left", "Scroll left", id="table-scroll-left", show=False),
    Binding("right", "scroll_right", "Scroll right", id="table-scroll-right", show=False),
    Binding("enter", "select", "Select", id="table-select", show=False),
]

# The lists over the dashboard (alerts, drift): they replace Textual's OptionList keys (which have no id).
LIST_BINDINGS: list[BindingType] = [
    *_navigation("list", "cursor_up", "cursor_down", "first", "last"),
    Binding("enter", "select", "Open", id="list-select", show=False),
]

# The scrolled pages (help, findings, a drift group's detail): they replace Textual's scrolling keys.
SCROLL_BINDINGS: list[BindingType] = _navigation(
    "scroll", "scroll_up", "scroll_down", "scroll_home", "scroll_end", ends=("Top", "Bottom")
)

# --- dialogs and lists over the dashboard -------------------------------------------------------------

CONFIRM_BINDINGS: list[BindingType] = [
    Binding("y", "dismiss(True)", "Run it", id="confirm-yes"),
    Binding("n,escape", "dismiss(False)", "Cancel", id="confirm-no"),
]

ALERTS_BINDINGS: list[BindingType] = [
    Binding("s", "silence", "Silence 1 h", id="silence-alert"),
    Binding("escape,q,exclamation_mark", "dismiss", "Close", id="close-alerts"),
]

FINDINGS_BINDINGS: list[BindingType] = [Binding("escape,q,f", "dismiss", "Close", id="close-findings")]

DRIFT_BINDINGS: list[BindingType] = [Binding("escape,q,v", "dismiss", "Close", id="close-drift")]

DRIFT_DETAIL_BINDINGS: list[BindingType] = [Binding("escape,q", "dismiss", "Back", id="close-drift-detail")]

ACTION_LOG_BINDINGS: list[BindingType] = [Binding("escape,q,a", "dismiss", "Close", id="close-action-log")]

BENCH_BINDINGS: list[BindingType] = [Binding("escape,q", "stop_or_close", "Stop / close", id="close-bench")]

HELP_BINDINGS: list[BindingType] = [Binding("escape,q,question_mark", "dismiss", "Close", id="close-help")]

# --- the kiosk and the replay -------------------------------------------------------------------------

UNLOCK_ID = "kiosk-unlock"
KIOSK_BINDINGS: list[BindingType] = [
    # The key is set from [kiosk] unlock_key through the keymap; without one it is refused.
    Binding("ctrl+shift+f12", "unlock", "Unlock", id=UNLOCK_ID, show=False, priority=True),
]

SEEK_S = 10.0
LONG_SEEK_S = 60.0
REPLAY_BINDINGS: list[BindingType] = [
    Binding("space", "play_pause", "Play/pause", id="replay-play", key_display="space"),
    Binding("full_stop", "step", "Step", id="replay-step", key_display="."),
    Binding("left_square_bracket", f"seek({-SEEK_S})", "−10 s", id="replay-back", key_display="["),
    Binding("right_square_bracket", f"seek({SEEK_S})", "+10 s", id="replay-forward", key_display="]"),
    Binding("left_curly_bracket", f"seek({-LONG_SEEK_S})", "−60 s", id="replay-back-long", key_display="{", show=False),
    Binding(
        "right_curly_bracket", f"seek({LONG_SEEK_S})", "+60 s", id="replay-forward-long", key_display="}", show=False
    ),
    Binding("plus,equals_sign", "faster", "Faster", id="replay-faster", key_display="+"),
    Binding("minus", "slower", "Slower", id="replay-slower", key_display="-"),
]


@dataclass(frozen=True, slots=True)
class KeyContext:
    """Where a list of bindings applies: one table of the key reference."""

    title: str
    bindings: list[BindingType]
    note: str = ""


CONTEXTS: tuple[KeyContext, ...] = (
    KeyContext(
        "Everywhere",
        APP_BINDINGS,
        "Textual's own keys too: ctrl+q quits, tab moves the focus, and in the command palette ↑ ↓ enter pick"
        " and escape closes.",
    ),
    KeyContext(
        "Recovery actions",
        ACTION_BINDINGS,
        "On the fleet and node screens. They come from the table of actions (`sparktui/actions/registry.py`):"
        " each binding's id is the action's one name, the same in `sparktui action NODE ID`, the command"
        " palette and the audit log's `action`, and every key runs `act(ID)`. Each asks for a confirmation;"
        " refused (and the refusal audited) in read-only and kiosk mode, the bench too.",
    ),
    KeyContext("Fleet screen", FLEET_BINDINGS),
    KeyContext("Node screen", NODE_BINDINGS),
    KeyContext(
        "Log view",
        LOG_BINDINGS,
        "Every log of the node. It follows the end until you scroll up; escape clears a search, then goes back.",
    ),
    KeyContext("Table navigation", TABLE_BINDINGS, "The fleet screen's list of nodes."),
    KeyContext("Lists", LIST_BINDINGS, "The alerts and the drift."),
    KeyContext("Scrolling", SCROLL_BINDINGS, "Help, findings and a drift detail."),
    KeyContext("Confirm dialog", CONFIRM_BINDINGS, "Nothing runs without it."),
    KeyContext("Alerts", ALERTS_BINDINGS, "Silencing is off in kiosk mode."),
    KeyContext("Findings", FINDINGS_BINDINGS),
    KeyContext("Drift", DRIFT_BINDINGS),
    KeyContext("Drift detail", DRIFT_DETAIL_BINDINGS),
    KeyContext("Action log", ACTION_LOG_BINDINGS),
    KeyContext("Bench", BENCH_BINDINGS, "The first press stops a running bench and keeps what finished."),
    KeyContext("Help", HELP_BINDINGS),
    KeyContext(
        "Kiosk",
        KIOSK_BINDINGS,
        "The kiosk takes no other key. Its unlock key is `[kiosk] unlock_key` (which wins over the keymap);"
        " without one, no key unlocks it.",
    ),
    KeyContext("Replay", REPLAY_BINDINGS, "`sparktui replay`, besides the keys above (no recovery action)."),
)

# The dashboard-wide keys (the app's and the recovery actions') are live under every screen and widget
# below: none of these may bind one of them, so a navigation key never shadows an action or runs one.
DASHBOARD_WIDE: tuple[list[BindingType], ...] = (APP_BINDINGS, ACTION_BINDINGS)
UNDER_THE_DASHBOARD: tuple[list[BindingType], ...] = (
    FLEET_BINDINGS,
    NODE_BINDINGS,
    TABLE_BINDINGS,
    LIST_BINDINGS,
    SCROLL_BINDINGS,
)

HEADER = """\
# Keys

Generated from `sparktui/ui/keys.py` (`python -m sparktui.ui.keys > docs/keys.md`); the help screen
(`?`) shows the same keys on one screen, with the config's remapping applied. Remap any binding by
its id in the config's `[keymap]`, one key per id, named as Textual names keys (`question_mark`,
`full_stop`, `ctrl+u`; `K` is shift+k):

```toml
[keymap]
open-node = "o"
theme = "f2"
confirm-yes = "j"
```

The new key replaces every default key of that binding (`confirm-no = "c"` leaves `escape` free). An
unknown id is reported when the dashboard starts, and the default key stays. A key remapped onto one
that the same screen already uses takes it over.
"""


def _bindings(bindings: list[BindingType]) -> list[Binding]:
    return [b for b in bindings if isinstance(b, Binding)]


def all_bindings() -> list[Binding]:
    """Every binding of every context."""
    return [b for context in CONTEXTS for b in _bindings(context.bindings)]


def binding_ids() -> set[str]:
    """Every binding id a keymap may name."""
    return {b.id for b in all_bindings() if b.id}


# Punctuation shown as typed; ``vertical_line`` and ``grave_accent`` keep their names (they would break the table).
_SHOWN_AS_TYPED = frozenset(string.punctuation) - {"|", "`"}


def _key_text(key: str) -> str:
    """A key as the user reads it: the punctuation it types (``!``, ``/``), else its name (``escape``, ``f8``)."""
    if len(key) == 1:
        return key
    for shown in (key_to_character(key), format_key(key)):
        if shown in _SHOWN_AS_TYPED:
            return shown
    return key


def action_key(action: str, keymap: Mapping[str, str] | None = None) -> str | None:
    """The key that runs a recovery action, named by its binding id (``drop-caches``, as a finding's
    ``action``), as the user reads it: the keymap's key when remapped, else the default."""
    found = next((b for b in _bindings(ACTION_BINDINGS) if b.id == action), None)
    if found is None:
        return None
    key = (keymap or {}).get(action) or found.key.split(",")[0].strip()
    return _key_text(key)


def _keys_cell(binding: Binding) -> str:
    return ", ".join(f"`{_key_text(key.strip())}`" for key in binding.key.split(","))


def keys_markdown() -> str:
    """The key reference (docs/keys.md and the help screen): one table per context."""
    lines = HEADER.splitlines()
    for context in CONTEXTS:
        lines += ["", f"## {context.title}", ""]
        if context.note:
            lines += [context.note, ""]
        lines += ["| key | action | id | description |", "|---|---|---|---|"]
        picks_listed = False
        for binding in _bindings(context.bindings):
            if binding.id and binding.id.startswith("pick-node-"):
                if not picks_listed:
                    picks_listed = True
                    lines.append("| `1`…`9` | `pick_node(N)` | `pick-node-N` | open the Nth node |")
                continue
            lines.append(f"| {_keys_cell(binding)} | `{binding.action}` | `{binding.id}` | {binding.description} |")
    return "\n".join(lines) + "\n"


# --- the help screen: every key of every context, compact ------------------------------------------------

# Short names for the keys the help shows (docs/keys.md keeps Textual's names, which the keymap takes).
_SHORT = {
    "up": "↑",
    "down": "↓",
    "left": "←",
    "right": "→",
    "pageup": "PgUp",
    "pagedown": "PgDn",
    "escape": "esc",
}


@dataclass(frozen=True, slots=True)
class HelpSection:
    """One context of the help: (keys, what they do) rows, bindings with one action merged."""

    title: str
    rows: tuple[tuple[str, str], ...]

    @property
    def lines(self) -> int:
        return 1 + len(self.rows)  # the title, then one line per row


def _help_keys(binding: Binding, keymap: Mapping[str, str]) -> list[str]:
    keys = keymap.get(binding.id, binding.key) if binding.id else binding.key
    if binding.id == UNLOCK_ID and binding.id not in keymap:
        return ["unlock_key"]
    return [_SHORT.get(key.strip(), _key_text(key.strip())) for key in keys.split(",")]


def help_sections(keymap: Mapping[str, str] | None = None) -> tuple[HelpSection, ...]:
    """Every context's keys for the help screen, as remapped by ``keymap`` (binding id -> key)."""
    keymap = keymap or {}
    sections = []
    for context in CONTEXTS:
        merged: dict[tuple[str, str], list[str]] = {}
        picks = [b for b in _bindings(context.bindings) if b.id and b.id.startswith("pick-node-")]
        for binding in _bindings(context.bindings):
            if binding in picks:
                continue
            merged.setdefault((binding.action, binding.description), []).extend(_help_keys(binding, keymap))
        if picks:
            remapped = any(b.id in keymap for b in picks)
            shown = [k for b in picks for k in _help_keys(b, keymap)] if remapped else ["1…9"]
            merged[("pick_node", "Open the Nth node")] = shown
        rows = tuple((" ".join(keys), description) for (_, description), keys in merged.items())
        sections.append(HelpSection(context.title, rows))
    return tuple(sections)


def pack_columns(sections: Sequence[HelpSection], columns: int) -> list[list[HelpSection]]:
    """``sections`` in order over at most ``columns`` columns, the tallest column as short as it can be
    (a blank line between two sections of a column)."""
    count = len(sections)
    columns = max(1, min(columns, count))

    def height(part: Sequence[HelpSection]) -> int:
        return sum(s.lines for s in part) + max(0, len(part) - 1)

    # best[c][i]: the tallest column when the first i sections fill c columns; cut[c][i] where the last starts
    best = [[0] + [10**9] * count] + [[10**9] * (count + 1) for _ in range(columns)]
    cut = [[0] * (count + 1) for _ in range(columns + 1)]
    best[0][0] = 0
    for c in range(1, columns + 1):
        for i in range(count + 1):
            for j in range(i + 1):
                tallest = max(best[c - 1][j], height(sections[j:i]))
                if tallest < best[c][i]:
                    best[c][i], cut[c][i] = tallest, j
    packed: list[list[HelpSection]] = []
    end = count
    for c in range(columns, 0, -1):
        start = cut[c][end]
        packed.insert(0, list(sections[start:end]))
        end = start
    return [column for column in packed if column]


if __name__ == "__main__":
    print(keys_markdown(), end="")
