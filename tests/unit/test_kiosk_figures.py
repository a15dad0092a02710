"""The kiosk's decisions without Textual: the large figures' font and fit, the grid the tiles share,
a tile's figures from the views, the burn-in shift; and where ``sparktui demo``'s event lines go."""

from __future__ import annotations

import io
import os
from dataclasses import replace
from pathlib import Path

import pytest

from sparktui.demo.run import events_file
from sparktui.model.levels import Level
from sparktui.model.specs import Thresholds
from sparktui.model.status import State
from sparktui.model.units import NO_DATA, fmt_gib, fmt_in_seconds, fmt_pct, fmt_rate
from sparktui.ui.bigfont import DASH, big_height, big_lines, big_width, figure_scale
from sparktui.ui.kiosk_figures import (
    BANNER_ALERTS,
    SHIFTS,
    BannerLine,
    best_grid,
    burn_in_shift,
    kiosk_banner,
    kiosk_clock,
    kiosk_tile,
    memory_words,
    serving_instance,
    tile_score,
)
from tests.support.ui_data import fed_app


@pytest.mark.parametrize("scale", [1, 2, 3, 5])
def test_a_large_figure_takes_the_cells_it_says(scale: int) -> None:
    lines = big_lines("1,234.5%", scale)
    assert len(lines) == big_height(scale)
    assert {len(line) for line in lines} == {big_width("1,234.5%", scale)}
    assert set("".join(lines)) <= {" ", "▀", "▄", "█"}


def test_a_figure_is_drawn_at_the_largest_scale_that_fits() -> None:
    text = "96%"
    for width, height in ((40, 10), (80, 30), (20, 3)):
        scale = figure_scale(text, width, height)
        assert scale >= 1
        assert big_width(text, scale) <= width and big_height(scale) <= height
        assert big_width(text, scale + 1) > width or big_height(scale + 1) > height
    assert figure_scale(text, 80, 30) > figure_scale(text, 40, 10)
    assert figure_scale(text, 8, 10) == 0  # too narrow even at scale 1
    assert figure_scale(text, 40, 2) == 0  # too low
    assert figure_scale("12 GiB", 80, 30) == 0  # letters: written as text
    assert figure_scale(NO_DATA, 80, 30) >= 1  # no data is drawn as large as data


@pytest.mark.parametrize("scale", [1, 2, 3, 4, 6])
def test_no_data_is_drawn_large_as_a_thin_dash_not_a_block(scale: int) -> None:
    """A big "–" was a bar of full blocks 12 cells by 2 at scale 4: a grey block, not a dash."""
    lines = big_lines(NO_DATA, scale)
    assert len(lines) == big_height(scale)
    assert {len(line) for line in lines} == {big_width(NO_DATA, scale)}
    drawn = [line for line in lines if line.strip()]
    assert drawn == [DASH * big_width(NO_DATA, scale)]  # one row, a line across
    assert lines.index(drawn[0]) == big_height(scale) // 2  # in the middle, where a minus is
    assert not set("".join(lines)) & {"█", "▀", "▄"}


def test_the_tiles_take_the_shape_that_draws_their_figures_largest() -> None:
    assert best_grid(1, 200, 58, tile_score) == (1, 1)
    assert best_grid(4, 160, 46, tile_score) == (2, 2)
    columns, rows = best_grid(8, 200, 58, tile_score)
    assert columns * rows - 8 <= 1  # at most one empty place
    chosen = tile_score(200 // columns, 58 // rows)
    for other in range(1, 9):
        assert chosen >= tile_score(200 // other, 58 // -(-8 // other))


def test_a_tile_shows_the_views_numbers_and_nothing_for_a_down_node() -> None:
    views = {v.name: v for v in fed_app().views}
    spark1 = views["spark1"]
    instance = serving_instance(spark1)
    assert instance is not None and instance.rates is not None and spark1.host_memory is not None
    tile = kiosk_tile(spark1)
    assert tile.state is State.UP and tile.reason == ""
    texts = {f.key: f.text for f in tile.figures}
    assert texts["gen"] == fmt_rate(instance.rates.generation_tokens_per_s, "")
    assert texts["kv"] == fmt_pct(instance.kv_usage, 0)
    assert texts["mem"] == fmt_gib(spark1.host_memory.mem_available)
    assert [f.key for f in kiosk_tile(spark1, acceptance=True).figures] == ["gen", "kv", "ttft", "accept", "mem"]
    down = kiosk_tile(views["spark3"])
    assert down.state is State.DOWN
    assert down.reason == "qwen235: /health connection refused"
    assert {f.text for f in down.figures} == {NO_DATA} and down.requests == ""


def test_a_down_node_shows_its_hosts_fresh_memory_reading() -> None:
    """A node whose engine is down still has its host's memory reading (SSH, not the engine): the
    reading its memory alerts cite. Its engine's figures stay "–"."""
    spark1 = next(v for v in fed_app().views if v.name == "spark1")
    assert spark1.host_memory is not None and spark1.ledger is not None
    down = replace(spark1, status=replace(spark1.status, state=State.DOWN))
    tile = kiosk_tile(down, acceptance=True, limits=Thresholds(mem_available_warn_gib=999, mem_available_crit_gib=998))
    figures = {f.key: f for f in tile.figures}
    assert tile.state is State.DOWN
    assert figures["mem"].text == fmt_gib(spark1.host_memory.mem_available) and figures["mem"].level is Level.CRIT
    assert tile.ledger == spark1.ledger
    assert {figures[k].text for k in ("gen", "kv", "ttft", "accept")} == {NO_DATA}
    stale_host = replace(down, host_age_s=down.host_stale_after_s + 1)  # an old reading is not shown as current
    old = kiosk_tile(stale_host)
    assert {f.text for f in old.figures} == {NO_DATA} and old.ledger is None


def test_the_memory_words_are_the_figures_a_memory_finding_cites() -> None:
    spark1 = next(v for v in fed_app().views if v.name == "spark1")
    memory = spark1.host_memory
    assert memory is not None and memory.page_cache_droppable is not None and memory.shmem is not None
    assert memory_words(memory) == (
        f"MemAvailable {fmt_gib(memory.mem_available)} of {fmt_gib(memory.mem_total)} · "
        f"page cache drop_caches can free (Cached − Shmem) {fmt_gib(memory.page_cache_droppable)} · "
        f"Shmem {fmt_gib(memory.shmem)}"
    )
    assert kiosk_tile(spark1).memory_words == memory_words(memory)
    assert memory_words(None) == NO_DATA
    assert kiosk_tile(replace(spark1, host_age_s=spark1.host_stale_after_s + 1)).memory_words == NO_DATA


def test_ttft_figures_share_one_unit_whatever_their_size() -> None:
    """One tile said "825" (ms) beside another's "2.07" (s): every TTFT figure is in seconds."""
    spark1 = next(v for v in fed_app().views if v.name == "spark1")
    instance = serving_instance(spark1)
    assert instance is not None and instance.rates is not None
    ttft = instance.rates.latency["ttft"]
    assert ttft is not None
    for p90, number in ((0.8251, "0.83"), (2.07, "2.07"), (0.0175, "0.02"), (0.001, "<0.01"), (12.34, "12.3")):
        rates = replace(instance.rates, latency={**instance.rates.latency, "ttft": replace(ttft, p90=p90)})
        view = replace(spark1, instances=(replace(instance, rates=rates),))
        figure = next(f for f in kiosk_tile(view).figures if f.key == "ttft")
        assert (figure.number, figure.unit) == (number, "s"), p90
    assert fmt_in_seconds(None) == NO_DATA
    assert fmt_in_seconds(123.4) == "123 s" and fmt_in_seconds(1234.0) == "1,234 s"


def test_the_banner_lines_each_carry_their_own_severity() -> None:
    """The banner was red as a whole once anything was critical, so a warning read as critical."""
    views = fed_app().views  # spark3 and spark4 are down
    firing = [("crit", "CRIT spark3 node-down: …"), ("warn", "WARN spark1 gpu-warm: …")]
    lines = kiosk_banner(views, firing, ["recording stopped: disk full"])
    assert lines[0].severity == "crit" and lines[0].text.startswith("spark3 DOWN: ")
    assert "spark4 DOWN" in lines[0].text
    assert lines[1:] == (
        BannerLine("crit", "CRIT spark3 node-down: …"),
        BannerLine("warn", "WARN spark1 gpu-warm: …"),
        BannerLine("warn", "recording stopped: disk full"),
    )
    many = [("warn", f"WARN {n}") for n in range(5)]
    assert len(kiosk_banner(views, many, [])) == 1 + BANNER_ALERTS
    up = [v for v in views if v.status.state is State.UP]
    assert kiosk_banner(up, [("warn", "WARN x")], []) == (BannerLine("warn", "WARN x"),)
    assert kiosk_banner(up, [], []) == ()


def test_a_figure_past_its_threshold_carries_its_level() -> None:
    """The kiosk's figures were plain whatever their value (issue 18): each carries its level against
    the config's thresholds, which the widget colours."""
    spark1 = next(v for v in fed_app().views if v.name == "spark1")
    calm = {f.key: f.level for f in kiosk_tile(spark1, limits=Thresholds(kv_usage_warn=1.0)).figures}
    tight = Thresholds(
        kv_usage_warn=0.01, ttft_p90_warn_s=0.001, mem_available_warn_gib=999, mem_available_crit_gib=998
    )
    hot = {f.key: f.level for f in kiosk_tile(spark1, limits=tight).figures}
    assert calm["kv"] is Level.OK and hot["kv"] is Level.WARN
    assert hot["ttft"] is Level.WARN and hot["mem"] is Level.CRIT
    assert calm["gen"] is None  # throughput has no threshold


def test_the_clock_without_any_data_is_a_warning() -> None:
    clock = kiosk_clock(())
    assert clock.stale and NO_DATA in clock.text


def test_the_burn_in_shift_steps_once_a_period_and_cycles() -> None:
    every = 60.0
    seen = [burn_in_shift(t, every) for t in (0.0, 59.9, 60.0, 61.0, 120.0)]
    assert seen == [SHIFTS[0], SHIFTS[0], SHIFTS[1], SHIFTS[1], SHIFTS[2]]
    assert burn_in_shift(len(SHIFTS) * every, every) == SHIFTS[0]
    for (x0, y0), (x1, y1) in zip(SHIFTS, SHIFTS[1:] + SHIFTS[:1], strict=True):
        assert abs(x1 - x0) + abs(y1 - y0) == 1  # one cell at a time


def test_demo_events_go_to_a_file_while_a_command_has_the_terminal(tmp_path: Path) -> None:
    controller, terminal = os.openpty()
    try:
        with open(terminal, "w", closefd=False) as tty:
            assert tty.isatty()
            path = events_file(["sparktui", "--kiosk"], tty)
            assert path is not None and path.name.startswith("sparktui-demo-events-")
            assert events_file([], tty) is None  # --serve-only: its own terminal, the events are its output
    finally:
        os.close(controller)
        os.close(terminal)
    assert events_file(["sparktui", "snapshot"], io.StringIO()) is None  # piped: a log reader greps them
