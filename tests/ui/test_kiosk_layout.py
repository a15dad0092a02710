"""The kiosk's picture with Pilot: tiles that share the whole screen, figures drawn large when there is
room, the clock and its warning, the burn-in shift on the app's clock, dead nodes without numbers."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest
from textual.color import Color
from textual.geometry import Region
from textual.widgets import Static

from sparktui.model.status import State
from sparktui.model.units import NO_DATA
from sparktui.ui.app import SparkApp
from sparktui.ui.kiosk_figures import SHIFTS
from sparktui.ui.kiosk_screen import FigureCell, KioskScreen, NodeTile
from tests.support.ui_data import NOW, fed_app, local_zone, serving_fleet_app

SIZES = [(80, 24), (160, 48), (200, 60)]


@pytest.fixture
def eastern() -> Iterator[None]:
    """Local time is US Eastern standard time (no DST rule: the same the year round)."""
    with local_zone("EST+5"):
        yield


def _kiosk(app: SparkApp) -> KioskScreen:
    screen = app.screen
    assert isinstance(screen, KioskScreen)
    return screen


def _tiles(app: SparkApp) -> list[NodeTile]:
    return list(_kiosk(app).query(NodeTile))


def _covered(regions: list[Region], width: int, height: int) -> float:
    cells = {(x, y) for r in regions for x in range(r.x, r.right) for y in range(r.y, r.bottom)}
    return len({(x, y) for x, y in cells if 0 <= x < width and 0 <= y < height}) / (width * height)


@pytest.mark.parametrize("nodes", [1, 4, 8])
@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
async def test_the_tiles_share_the_whole_screen(nodes: int, size: tuple[int, int]) -> None:
    app = serving_fleet_app(nodes, kiosk=True)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        tiles = _tiles(app)
        assert len(tiles) == nodes
        width, height = size
        # Everything but the title line and the burn-in margin (two columns, one row) is tiles.
        assert _covered([t.region for t in tiles], width, height) >= 0.8
        assert max(t.region.bottom for t in tiles) >= height - 1
        assert max(t.region.right for t in tiles) >= width - 3
        for tile in tiles:  # every figure is on screen, large or not
            for cell in tile.query(FigureCell):
                assert cell.region.height >= 1 and cell.figure.text, (tile.node, cell.id)


@pytest.mark.parametrize("nodes", [1, 4])
async def test_figures_are_large_at_160x48_and_grow_with_the_screen(nodes: int) -> None:
    scales = {}
    for size in ((160, 48), (200, 60)):
        app = serving_fleet_app(nodes, kiosk=True)
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            cells = [c for t in _tiles(app) for c in t.query(FigureCell)]
            assert all(c.scale >= 1 for c in cells), [(c.id, c.scale, c.content_size) for c in cells]
            scales[size] = min(c.scale for c in cells)
    assert scales[(200, 60)] >= scales[(160, 48)]
    if nodes == 1:
        assert scales[(160, 48)] >= 3  # one node on a large screen: figures many rows high


async def test_eight_nodes_at_80x24_write_their_figures_as_text() -> None:
    app = serving_fleet_app(8, kiosk=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        for tile in _tiles(app):
            cell = tile.query_one("#fig-gen", FigureCell)
            assert cell.scale == 0
            view = next(v for v in app.views if v.name == tile.node)
            assert view.status.state is State.UP
            assert cell.figure.number in str(cell.render())  # the number itself, at normal size


async def test_the_clock_says_when_the_newest_data_came_and_turns_warning_when_it_stops(eastern: None) -> None:
    app = fed_app(kiosk=True)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        clock = _kiosk(app).query_one("#kiosk-clock", Static)
        # The newest data: the polls at t=28 (wall 1e9 + 28: 01:47:08 UTC, 20:47:08 in EST), 2 s ago.
        assert str(clock.content) == "updated 20:47:08 EST · 2 s ago"
        assert not clock.has_class("stale")
        fresh_background = clock.styles.background
        app.clock.t = NOW + 60  # type: ignore[attr-defined]  # a minute with no data from any node
        app.refresh_views()
        await pilot.pause()
        assert str(clock.content) == "updated 20:47:08 EST · 62 s ago"
        assert clock.has_class("stale")
        warning = Color.parse(app.get_css_variables()["warning"])
        assert clock.styles.background == warning != fresh_background


async def test_the_picture_moves_on_the_clock_against_burn_in() -> None:
    app = fed_app(kiosk=True)
    every = app.fleet.kiosk.shift_every_s
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        screen = _kiosk(app)
        start = int(NOW // every) * every
        positions = []
        for step in range(len(SHIFTS) + 1):
            app.clock.t = start + step * every  # type: ignore[attr-defined]
            for node in app.state.nodes.values():
                node.last_t = app.clock.t  # type: ignore[attr-defined]  # the data stays fresh
            app.refresh_views()
            await pilot.pause()
            region = screen.query_one("#tile-spark1", NodeTile).region
            positions.append((region.x, region.y))
            assert max(t.region.right for t in _tiles(app)) <= 160  # nothing pushed off the screen
        moves = [(b[0] - a[0], b[1] - a[1]) for a, b in itertools.pairwise(positions)]
        assert all(move != (0, 0) and max(map(abs, move)) == 1 for move in moves), moves
        assert len(set(positions)) == len(SHIFTS) and positions[-1] == positions[0]  # a cycle


async def test_a_down_or_stale_node_shows_no_numbers_only_its_reason() -> None:
    app = fed_app(kiosk=True)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        tile = _kiosk(app).query_one("#tile-spark3", NodeTile)
        assert "DOWN" in str(tile.query_one("#head", Static).content)
        assert "/health connection refused" in str(tile.query_one("#head", Static).content)
        assert {c.figure.text for c in tile.query(FigureCell)} == {NO_DATA}
        spark1 = _kiosk(app).query_one("#tile-spark1", NodeTile)
        assert NO_DATA not in {c.figure.text for c in spark1.query(FigureCell)}
        app.clock.t = NOW + 60  # type: ignore[attr-defined]
        app.refresh_views()
        await pilot.pause()
        assert "STALE" in str(spark1.query_one("#head", Static).content)
        assert {c.figure.text for c in spark1.query(FigureCell)} == {NO_DATA}
