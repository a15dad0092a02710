"""What the commands share: loading the fleet with its one-line error, and the exit status of a bad config."""

from __future__ import annotations

import errno
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sparktui.model.specs import FleetSpec
    from sparktui.monitor.core import Monitor

EXIT_CONFIG = 2
EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE  # what a shell reports for a tool its reader stopped reading
# A write to stdout that fails for a reason of the file behind it (a full disk behind ``>``, ``/dev/full``,
# a quota, a file-size limit, an I/O error): one line, never a traceback.
STDOUT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO})


def guarded_output(run: Callable[[], int], command: str) -> int:
    """``run()``, its stdout flushed before it returns: a reader that went away (``| head``) ends it
    quietly with ``EXIT_BROKEN_PIPE``; stdout that cannot be written is one line on stderr and exit 2."""
    try:
        code = run()
        sys.stdout.flush()  # a closed or full stdout is told here, not in a traceback at exit
        return code
    except BrokenPipeError:
        # Nothing more to say to the reader, nor to flush at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except OSError as exc:
        if exc.errno not in STDOUT_ERRNOS:
            raise
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # what is still buffered goes nowhere at exit
        print(f"sparktui {command}: cannot write the output ({exc.strerror or exc})", file=sys.stderr)
        return EXIT_CONFIG


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


def collect_state(fleet: FleetSpec, interval_s: float, canary: bool = True) -> tuple[Monitor, float] | None:
    """The one-shot core (``Monitor.once``) for ``snapshot`` and ``check``, fed and ticked once: read from
    Prometheus once when configured, else polled twice ``interval_s`` apart, with a canary to each
    instance that is up but moved no token (unless not ``canary``); None after one line on stderr when
    Prometheus fails."""
    import asyncio

    if fleet.prometheus is not None:
        from sparktui.config import catalogue_for
        from sparktui.monitor.core import Monitor
        from sparktui.sources import prometheus

        try:
            return asyncio.run(prometheus.collect(Monitor.once(fleet, catalogue_for(fleet.diagnosis)), window_s=60.0))
        except prometheus.PrometheusError as exc:
            print(str(exc), file=sys.stderr)
            return None
    from sparktui.headless.snapshot import collect

    return asyncio.run(collect(fleet, polls=2, interval_s=max(0.0, interval_s), canary=canary))
