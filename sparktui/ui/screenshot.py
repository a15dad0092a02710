"""``sparktui screenshot``: SVG screenshots of the dashboard on the demo fleet, made the same way every
time (a seed, the simulation stepped, the clock frozen), for the docs."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from sparktui.config import parse_config
from sparktui.demo.fleet import FLEETS, DemoFleet
from sparktui.demo.scenarios import SCENARIOS
from sparktui.model.logbuffer import LogLine
from sparktui.model.observations import HostUpdate
from sparktui.sources.host import HostCollector, wants_host_state
from sparktui.sources.http import make_poll_client
from sparktui.sources.logs import LogStream, followed_logs
from sparktui.sources.poller import FleetPoller, fleet_origins
from sparktui.sources.ssh import NodeSsh
from sparktui.ui.app import SparkApp, make_app

SCREENS = ("fleet", "node", "logs", "kiosk")
STEP_S = 2.0


@contextlib.asynccontextmanager
async def stepped_demo(
    *, theme: str, kiosk: bool = False, seed: int = 7, scenario: str = "healthy", seconds: float = 60.0
) -> AsyncIterator[SparkApp]:
    """The dashboard (not yet running) holding ``seconds`` of a demo scenario's simulated time, polled
    every 2 s with the clock frozen after: the same picture every time, for the screenshots and the tests
    that check what a scenario's screens say."""
    chosen = SCENARIOS[scenario]
    fleet = DemoFleet(FLEETS[chosen.fleet], seed=seed, scenario=chosen)
    await fleet.start()
    try:
        spec = parse_config(fleet.config_toml(), source="demo.toml")
        app = make_app(spec, collect=False, clock=lambda: fleet.now, theme=theme, kiosk=kiosk)
        latest: dict[tuple[str, bool], HostUpdate] = {}  # a node's last frame, and its last fabric reading

        def keep(update: HostUpdate) -> None:
            latest[(update.node, update.fabric is not None)] = update

        hosts = [
            # the fabric as often as the frames: the simulation runs faster than the wall clock here
            asyncio.create_task(HostCollector(n, spec, clock=lambda: fleet.now, fabric_every_s=0.5).run(keep))
            for n in spec.nodes
            if wants_host_state(n) and not n.local
        ]
        # The instances' and the kernel's logs, streamed over SSH as the dashboard does (the node screen's
        # tail, the log view).
        ssh = {n.name: NodeSsh(n) for n in spec.nodes if n.ssh.enabled and not n.local}

        def to_app(node: str) -> Callable[[str, list[LogLine]], None]:
            return lambda instance, lines: app.monitor.log_batch(node, instance, lines)

        logs = [
            asyncio.create_task(LogStream(ssh[n.name], vllm, on_batch=to_app(n.name)).run())
            for n in spec.nodes
            if n.name in ssh
            for vllm in followed_logs(n)
        ]
        try:
            async with make_poll_client(fleet_origins(spec), ca_file=spec.ca_file) as client:
                # Stamped with the simulation's wall time too: what a server says of its own times (an
                # Ollama model's expiry) is judged against the simulation's clock, which runs ahead here.
                poller = FleetPoller(spec, client, clock=lambda: fleet.now, wall_clock=lambda: fleet.clock.epoch)
                while fleet.elapsed < seconds:
                    await fleet.advance(STEP_S)
                    for observation in await poller.poll_all():
                        app.state.apply(observation)
                    await asyncio.sleep(0.05)  # let the host samplers' frames of this moment arrive
                    for key, update in list(latest.items()):
                        app.state.apply_host(update)
                        if key[1]:
                            del latest[key]  # counters: each reading once
                    app.refresh_views()
        finally:
            for task in hosts + logs:
                task.cancel()
            for task in hosts + logs:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            for connection in ssh.values():
                await connection.close()
        yield app
    finally:
        await fleet.stop()


async def capture(
    out: Path,
    *,
    theme: str,
    screen: str,
    size: tuple[int, int] = (160, 48),
    seed: int = 7,
    scenario: str = "healthy",
    seconds: float = 60.0,
    node: int = 1,
) -> Path:
    """Run the demo for ``seconds`` of simulated time, polling every 2 s, then save one screen."""
    async with (
        stepped_demo(theme=theme, kiosk=screen == "kiosk", seed=seed, scenario=scenario, seconds=seconds) as app,
        app.run_test(size=size) as pilot,
    ):
        await pilot.pause()
        if screen in ("node", "logs"):
            for _ in range(node - 1):
                await pilot.press("down")
            await pilot.press("enter")
            await pilot.pause()
        if screen == "logs":
            await pilot.press("l")
            await pilot.pause()
        out.parent.mkdir(parents=True, exist_ok=True)
        app.save_screenshot(filename=out.name, path=str(out.parent))
    return out


def main(
    out: Path, *, theme: str, screen: str, size: tuple[int, int], seed: int, scenario: str, seconds: float = 60.0
) -> int:
    path = asyncio.run(
        capture(out, theme=theme, screen=screen, size=size, seed=seed, scenario=scenario, seconds=seconds)
    )
    print(path)
    return 0
