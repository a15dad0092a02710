"""Command palette entries: open a node, switch theme, pause, and (unless read-only) the actions of the
table (sparktui/actions/registry.py) on each node. The kiosk refuses the palette altogether."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider

from sparktui.actions.registry import ACTIONS
from sparktui.ui.base import spark_app


class FleetCommands(Provider):
    def _entries(self) -> list[tuple[str, str, Callable[[], object]]]:
        spark = spark_app(self.app)
        entries: list[tuple[str, str, Callable[[], object]]] = []
        for view in spark.views:
            entries.append(
                (
                    f"Open node {view.name}",
                    f"{view.status.state.value}: {view.host}",
                    partial(spark.open_node, view.name),
                )
            )
        for name in spark.theme_names:
            entries.append((f"Theme: {name}", "switch the colours", partial(setattr, spark, "theme", name)))
        entries.append(("Pause or resume updates", "the model keeps collecting", spark.action_toggle_pause))
        if not spark.read_only:
            for view in spark.views:
                for action in ACTIONS:
                    if action.in_palette:
                        entries.append(
                            (
                                f"{action.label} on {view.name}",
                                f"{action.confirmation}; asks first",
                                partial(spark.start_action, action.id.value, view.name),
                            )
                        )
        return entries

    async def discover(self) -> Hits:
        for title, help_text, callback in self._entries():
            yield DiscoveryHit(title, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, help_text, callback in self._entries():
            score = matcher.match(title)
            if score > 0:
                yield Hit(score, matcher.highlight(title), callback, help=help_text)
