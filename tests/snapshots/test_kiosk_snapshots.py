"""SVG snapshots of the kiosk: its fleet page (tiles sharing the screen, figures large when there is
room) and a node page, at 80x24 and 160x48, from ``tests/support/ui_data.py``'s fleet (spark3 and its
worker down). Local time is fixed (the clock shows it). Update with ``--snapshot-update`` after a
deliberate change, and look at the pictures before committing."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from textual.pilot import Pilot

from sparktui.ui.kiosk_screen import KioskScreen
from tests.support.ui_data import ONE_TICK_S, fed_app, local_zone

SnapCompare = Callable[..., bool]


@pytest.fixture(autouse=True)
def utc() -> Iterator[None]:
    with local_zone("UTC"):
        yield


async def _node_page(pilot: Pilot[None]) -> None:
    screen = pilot.app.screen
    assert isinstance(screen, KioskScreen)
    screen.rotate()  # spark1's page
    await pilot.pause()


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
@pytest.mark.parametrize("page", ["fleet", "node"])
def test_kiosk(snap_compare: SnapCompare, size: tuple[int, int], page: str) -> None:
    app = fed_app(kiosk=True, render_every_s=ONE_TICK_S)
    assert snap_compare(app, terminal_size=size, run_before=_node_page if page == "node" else None)
