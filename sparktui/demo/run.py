"""``sparktui demo``: start the simulated fleet on 127.0.0.1 (HTTP and SSH), write its config and
SSH keys to a temporary directory, and run a command against it (or serve until interrupted).
Every server stops and the directory is removed on exit."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

from sparktui.demo.fleet import FLEETS, DemoFleet, scaled_nodes
from sparktui.demo.scenarios import Scenario


async def serve(
    *,
    nodes: int | None,
    seed: int,
    command: Sequence[str],
    config_out: Path | None,
    scenario: Scenario | None = None,
    quiet: bool = False,
    fleet_name: str = "default",
) -> int:
    events = events_file(command, sys.stdout)
    fleet = DemoFleet(
        scaled_nodes(nodes) if nodes else FLEETS[fleet_name],
        seed=seed,
        scenario=scenario,
        on_event=None if quiet else _print_event if events is None else _event_writer(events),
    )
    with tempfile.TemporaryDirectory(prefix="sparktui-demo-") as tmp:
        clock: asyncio.Task[None] | None = None
        # Ctrl-C, SIGTERM or a closed terminal (SIGHUP), even while the servers start, stop the fleet
        # (and the command) cleanly: the finally below runs and the directory is removed.
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            loop.add_signal_handler(sig, stop.set)
        try:
            await fleet.start(state_dir=Path(tmp))
            clock = asyncio.create_task(fleet.run_clock())
            config = config_out or Path(tmp) / "demo.toml"
            config.write_text(fleet.config_toml())
            if not quiet:
                where = ", ".join(sorted({node.address for node in fleet.nodes}))
                print(f"sparktui demo: {len(fleet.nodes)} simulated DGX Sparks on {where} (seed {seed})")
                for line in fleet.endpoints():
                    print("  " + line)
                print(f"config: {config}   SSH key and known_hosts: {tmp}")
                if scenario is not None and scenario.events:
                    print(f"scenario {scenario.name}: {scenario.summary}")
                    for event in scenario.events:
                        print(f"  {event.at_s:5.0f} s  {event.what}")
                    if scenario.every_s:
                        print(f"  (again every {scenario.every_s:g} s, until stopped)")
            if command and not stop.is_set():
                if events is not None and not quiet and scenario is not None and scenario.events:
                    print(f"scenario events go to {events} while the command has the terminal")
                sys.stdout.flush()  # our lines before the command's
                env = dict(os.environ, SPARKTUI_CONFIG=str(config))
                process = await asyncio.create_subprocess_exec(*command, env=env)
                return await _wait_or_stop(process, stop)
            if not quiet:
                print(f"try: SPARKTUI_CONFIG={config} sparktui snapshot    (Ctrl-C stops the fleet)")
                init = fleet.init_command()
                if init is not None:
                    print(f"or write a config as for your own Sparks: {init} --print")
            await stop.wait()
            return 0
        finally:
            if clock is not None:
                clock.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await clock
            await fleet.stop()


def _print_event(line: str) -> None:
    """One line per scenario event as it happens (a soak's faults: what a log reader greps for)."""
    print(f"event {line}", flush=True)


def events_file(command: Sequence[str], stdout: TextIO) -> Path | None:
    """Where the scenario's event lines go instead of stdout: a file, when a command runs on the
    terminal (it is most likely the dashboard, and a line printed there lands over its picture). None:
    stdout, for ``--serve-only`` and for a command whose output is piped (a log reader greps them)."""
    if not command or not stdout.isatty():
        return None
    return Path(tempfile.gettempdir()) / f"sparktui-demo-events-{os.getpid()}.log"


def _event_writer(path: Path) -> Callable[[str], None]:
    def write(line: str) -> None:
        with path.open("a", encoding="utf-8") as out:
            out.write(f"event {line}\n")

    return write


async def _wait_or_stop(process: asyncio.subprocess.Process, stop: asyncio.Event) -> int:
    """The command's exit status; if the demo is told to stop first, the command is ended too."""
    exited = asyncio.ensure_future(process.wait())
    stopping = asyncio.ensure_future(stop.wait())
    await asyncio.wait({exited, stopping}, return_when=asyncio.FIRST_COMPLETED)
    stopping.cancel()
    if not exited.done():
        with contextlib.suppress(ProcessLookupError):
            process.terminate()
        try:
            await asyncio.wait_for(asyncio.shield(exited), 10.0)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
    return await exited


def main(
    nodes: int | None,
    seed: int,
    command: Sequence[str],
    config_out: Path | None,
    scenario: Scenario | None = None,
    *,
    fleet: str = "default",
) -> int:
    try:
        return asyncio.run(
            serve(nodes=nodes, seed=seed, command=command, config_out=config_out, scenario=scenario, fleet_name=fleet)
        )
    except KeyboardInterrupt:
        return 0
    except OSError as exc:
        print(f"sparktui demo: cannot start the fleet: {exc}", file=sys.stderr)
        return 1
