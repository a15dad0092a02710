"""``sparktui demo``: start the simulated fleet on 127.0.0.1, write its config, and run a command
against it (or serve until interrupted)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from sparktui.demo.fleet import DEFAULT_NODES, DemoFleet, scaled_nodes
from sparktui.demo.scenarios import Scenario


async def serve(
    *,
    nodes: int | None,
    seed: int,
    command: Sequence[str],
    config_out: Path | None,
    scenario: Scenario | None = None,
    quiet: bool = False,
) -> int:
    fleet = DemoFleet(scaled_nodes(nodes) if nodes else DEFAULT_NODES, seed=seed, scenario=scenario)
    await fleet.start()
    clock = asyncio.create_task(fleet.run_clock())
    with tempfile.TemporaryDirectory(prefix="sparktui-demo-") as tmp:
        config = config_out or Path(tmp) / "demo.toml"
        config.write_text(fleet.config_toml())
        try:
            if not quiet:
                print(f"sparktui demo: {len(fleet.nodes)} simulated DGX Sparks on 127.0.0.1 (seed {seed})")
                for line in fleet.endpoints():
                    print("  " + line)
                print(f"config: {config}")
                if scenario is not None and scenario.events:
                    print(f"scenario {scenario.name}: {scenario.summary}")
            if command:
                env = dict(os.environ, SPARKTUI_CONFIG=str(config))
                process = await asyncio.create_subprocess_exec(*command, env=env)
                return await process.wait()
            if not quiet:
                print(f"try: SPARKTUI_CONFIG={config} sparktui snapshot    (Ctrl-C stops the fleet)")
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, stop.set)
            await stop.wait()
            return 0
        finally:
            clock.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await clock
            await fleet.stop()


def main(
    nodes: int | None,
    seed: int,
    command: Sequence[str],
    config_out: Path | None,
    scenario: Scenario | None = None,
) -> int:
    try:
        return asyncio.run(
            serve(nodes=nodes, seed=seed, command=command, config_out=config_out, scenario=scenario)
        )
    except KeyboardInterrupt:
        return 0
    except OSError as exc:
        print(f"sparktui demo: cannot start the fleet: {exc}", file=sys.stderr)
        return 1
