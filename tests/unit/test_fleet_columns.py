"""The fleet table's columns fit the terminal, with and without the engine column of a mixed fleet."""

from __future__ import annotations

from sparktui.ui.fleet_screen import fit_columns


def test_a_mixed_fleets_columns_fit_every_width_from_80_with_the_scroll_bars_margin() -> None:
    # (A fleet of one engine kind keeps its layout, which at 154-166 columns uses the scroll bar's margin.)
    for width in range(80, 240):
        shown = fit_columns(width, True)
        assert sum(c.width + 2 for c in shown) + 2 <= width, (width, [c.key for c in shown])


def test_a_mixed_fleet_shows_its_engine_column_from_100_and_the_prompt_rate_gives_way_first() -> None:
    assert "engine" not in {c.key for c in fit_columns(99, True)}
    assert "engine" in {c.key for c in fit_columns(100, True)}
    at_160 = {c.key for c in fit_columns(160, True)}
    assert "engine" in at_160 and "prompt" not in at_160 and {"model", "trend", "gpu"} <= at_160
    assert "engine" not in {c.key for c in fit_columns(200, False)}
