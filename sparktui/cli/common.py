"""What the commands share: loading the fleet with its one-line error, and the exit status of a bad config."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sparktui.model.fleet import FleetState
    from sparktui.model.specs import FleetSpec

EXIT_CONFIG = 2


def print_warning(line: str) -> None:
    """A warning the loader has (a config others can read that holds a secret): one line on stderr."""
    print(line, file=sys.stderr)


def load_fleet(path: Path | None) -> FleetSpec | None:
    """The fleet of the config at ``path`` (None: the configured one), or None after one line on stderr.
    With a [prometheus] table and no [[nodes]], the fleet is whatever Prometheus scrapes."""
    import asyncio

    from sparktui.config import ConfigError, load_config

    try:
        fleet = load_config(path, warn=print_warning)
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        return None
    if fleet.prometheus is None or fleet.nodes:
        return fleet
    from sparktui.sources.prometheus import PrometheusError, with_discovered_nodes

    try:
        return asyncio.run(with_discovered_nodes(fleet))
    except PrometheusError as exc:
        print(str(exc), file=sys.stderr)
        return None


def collect_state(fleet: FleetSpec, interval_s: float, canary: bool = True) -> tuple[FleetState, float] | None:
    """The fleet's state for ``snapshot`` and ``check``: read from Prometheus once when configured, else
    polled twice ``interval_s`` apart, with a canary to each instance that is up but moved no token
    (unless not ``canary``); None after one line on stderr when Prometheus fails."""
    import asyncio

    if fleet.prometheus is not None:
        from sparktui.sources import prometheus

        try:
            return asyncio.run(prometheus.collect(fleet, window_s=60.0))
        except prometheus.PrometheusError as exc:
            print(str(exc), file=sys.stderr)
            return None
    from sparktui.headless.snapshot import collect

    return asyncio.run(collect(fleet, polls=2, interval_s=max(0.0, interval_s), canary=canary))
