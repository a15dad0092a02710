"""The fleet screen's table widget: rows by key, a cursor that follows its row, rendering only what
changed, keys and mouse."""

from __future__ import annotations

from rich.text import Text
from textual.app import App, ComposeResult

from sparktui.ui.table import RowTable, TableColumn

COLUMNS = (TableColumn("name", "Name", 8), TableColumn("value", "Value", 6))


class TableApp(App[None]):
    def __init__(self) -> None:
        super().__init__()
        self.highlighted: list[str] = []
        self.selected: list[str] = []

    def compose(self) -> ComposeResult:
        yield RowTable(id="t")

    def on_mount(self) -> None:
        self.query_one(RowTable).set_columns(COLUMNS)

    def on_row_table_row_highlighted(self, event: RowTable.RowHighlighted) -> None:
        self.highlighted.append(event.key)

    def on_row_table_row_selected(self, event: RowTable.RowSelected) -> None:
        self.selected.append(event.key)


def rows(*names: str, value: str = "1") -> list[tuple[str, tuple[Text | str, ...]]]:
    return [(name, (name, value)) for name in names]


def screen_lines(app: App[None]) -> list[str]:
    table = app.query_one(RowTable)
    return [table.render_line(y).text for y in range(table.size.height)]


async def test_rows_show_under_the_header_padded_and_cut_to_their_columns() -> None:
    app = TableApp()
    async with app.run_test(size=(40, 10)) as pilot:
        table = app.query_one(RowTable)
        table.set_rows([("a", ("alpha", "12")), ("b", ("a-very-long-name", Text("7", style="red")))])
        await pilot.pause()
        lines = screen_lines(app)
        assert lines[0].startswith(" Name      Value ")
        assert lines[1].startswith(" alpha     12     ")
        assert lines[2].startswith(" a-very-…  7      ")  # cut with an ellipsis at the column's width
        assert table.row_count == 2 and table.get_row_at(1)[0] == "a-very-long-name"


async def test_the_cursor_stays_on_its_row_when_rows_move_and_clamps_when_it_goes() -> None:
    app = TableApp()
    async with app.run_test(size=(40, 10)) as pilot:
        table = app.query_one(RowTable)
        table.set_rows(rows("a", "b", "c"))
        await pilot.press("down")
        assert table.row_keys[table.cursor_row] == "b"
        table.set_rows(rows("c", "b", "a"))
        await pilot.pause()
        assert table.cursor_row == 1 and table.row_keys[1] == "b"
        table.set_rows(rows("x", "y", "c"))  # b is gone: the cursor keeps its place
        await pilot.pause()
        assert table.cursor_row == 1
        table.set_rows(rows("x"))
        await pilot.pause()
        assert table.cursor_row == 0
        assert app.highlighted[-1] == "x"


async def test_only_rows_whose_cells_changed_are_rendered_again() -> None:
    app = TableApp()
    async with app.run_test(size=(40, 10)) as pilot:
        table = app.query_one(RowTable)
        table.set_rows(rows("a", "b", "c"))
        await pilot.pause()
        rendered: list[tuple[Text | str, ...] | None] = []
        original = table._render_cells

        def counting(values: object, style: object) -> object:
            rendered.append(values)  # type: ignore[arg-type]
            return original(values, style)  # type: ignore[arg-type]

        table._render_cells = counting  # type: ignore[assignment,method-assign]
        table.set_rows([*rows("a", "b"), ("c", ("c", "2"))])
        await pilot.pause()
        assert rendered == [("c", "2")]
        assert screen_lines(app)[3].startswith(" c         2 ")


async def test_keys_move_the_cursor_scroll_it_into_view_and_enter_selects() -> None:
    app = TableApp()
    async with app.run_test(size=(40, 6)) as pilot:  # room for the header and five rows
        table = app.query_one(RowTable)
        names = [f"n{i:02d}" for i in range(40)]
        table.set_rows(rows(*names))
        await pilot.press("end")
        await pilot.pause()
        assert table.cursor_row == 39
        assert screen_lines(app)[-1].startswith(" n39")  # scrolled so the cursor shows
        await pilot.press("home", "down", "down", "enter")
        assert app.selected == ["n02"]
        await pilot.press("pagedown")
        assert table.cursor_row > 2


async def test_a_click_moves_the_cursor_and_a_click_on_the_highlighted_row_selects() -> None:
    app = TableApp()
    async with app.run_test(size=(40, 10)) as pilot:
        table = app.query_one(RowTable)
        table.set_rows(rows("a", "b", "c"))
        await pilot.pause()
        await pilot.click(RowTable, offset=(2, 0))  # the header
        assert table.cursor_row == 0 and app.selected == []
        await pilot.click(RowTable, offset=(2, 3))
        assert table.cursor_row == 2 and app.selected == []
        await pilot.click(RowTable, offset=(2, 3))
        assert app.selected == ["c"]


async def test_the_cursor_keeps_the_cells_own_colours_and_marks_its_row_with_a_band() -> None:
    """A status coloured red stays red on the cursor row (a cursor painting every row in the colour of
    "up" hid a down node, issue 18); the row stands out by its background and bold text."""
    app = TableApp()
    async with app.run_test(size=(40, 10)) as pilot:
        table = app.query_one(RowTable)
        down = Text("down", style="#F0625D")
        table.set_rows([("a", ("a", down)), ("b", ("b", Text("down", style="#F0625D")))])
        await pilot.pause()
        on_cursor, off_cursor = table.render_line(1), table.render_line(2)
        red = [seg for seg in on_cursor if seg.text.strip() == "down"]
        assert red and all(seg.style is not None and seg.style.color is not None for seg in red)
        assert {
            seg.style.color.triplet.hex for seg in red if seg.style and seg.style.color and seg.style.color.triplet
        } == {"#f0625d"}
        assert all(seg.style is not None and seg.style.bold for seg in red)
        backgrounds = (
            {seg.style.bgcolor for seg in on_cursor if seg.style},
            {seg.style.bgcolor for seg in off_cursor if seg.style},
        )
        assert backgrounds[0].isdisjoint(backgrounds[1])  # the cursor's band differs from the row below
