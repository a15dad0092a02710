"""SVG snapshots of every screen and dialog at 80x24 and 160x48 in the dark theme, and of the fleet and
node screens in the light theme too, from deterministic data (``tests/support/ui_data.py``). Update with
``pytest tests/snapshots/test_snapshots.py --snapshot-update`` after a deliberate change, and look at
the pictures (``rsvg-convert``) before committing."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from textual.pilot import Pilot

from tests.support.ui_data import fed_app

SnapCompare = Callable[..., bool]

# Each screen as the operator reaches it: the keys pressed from the fleet screen.
SCREENS: dict[str, tuple[str, ...]] = {
    "fleet": (),
    "node": ("enter",),
    "logs": ("enter", "l"),
    "findings": ("f",),
    "drift": ("v",),
    "alerts": ("exclamation_mark",),
    "help": ("question_mark",),
    "confirm": ("down", "r"),  # restart spark2's vllm-gemma4.service: the exact command, y/n
    "action-log": ("a",),
    "kiosk": (),
}
SIZES = {"80x24": (80, 24), "160x48": (160, 48)}
CASES = [(screen, size, "spark-dark") for screen in SCREENS for size in SIZES] + [
    (screen, size, "spark-light") for screen in ("fleet", "node") for size in SIZES
]


def _keys(keys: tuple[str, ...]) -> Callable[[Pilot[None]], object]:
    async def run_before(pilot: Pilot[None]) -> None:
        for key in keys:
            await pilot.press(key)
            await pilot.pause()

    return run_before


@pytest.mark.parametrize(("screen", "size", "theme"), CASES, ids=[f"{s}-{z}-{t}" for s, z, t in CASES])
def test_screens(snap_compare: SnapCompare, screen: str, size: str, theme: str) -> None:
    app = fed_app(theme=theme, kiosk=screen == "kiosk")
    assert snap_compare(app, terminal_size=SIZES[size], run_before=_keys(SCREENS[screen]))
