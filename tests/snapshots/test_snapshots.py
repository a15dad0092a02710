"""SVG snapshots of the fleet and node screens, in two themes and two sizes, from deterministic data
(``tests/support/ui_data.py``). Update with ``pytest tests/snapshots/test_snapshots.py --snapshot-update`` after a
deliberate change, and look at the report before committing."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from textual.pilot import Pilot

from tests.support.ui_data import fed_app

SnapCompare = Callable[..., bool]


async def _open_node(pilot: Pilot[None]) -> None:
    await pilot.press("enter")
    await pilot.pause()


@pytest.mark.parametrize("theme", ["spark-dark", "spark-light"])
@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
@pytest.mark.parametrize("screen", ["fleet", "node"])
def test_screens(snap_compare: SnapCompare, theme: str, size: tuple[int, int], screen: str) -> None:
    app = fed_app(theme=theme)
    assert snap_compare(app, terminal_size=size, run_before=_open_node if screen == "node" else None)
