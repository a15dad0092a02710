"""Starting the dashboard: on a configured fleet, or on the demo fleet served by a child process."""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sparktui.config import ConfigError, load_config
from sparktui.model.specs import FleetSpec
from sparktui.record.recorder import Recorder
from sparktui.ui.app import make_app

DEMO_START_TIMEOUT_S = 60.0


def run_dashboard(
    fleet: FleetSpec,
    *,
    read_only: bool = False,
    kiosk: bool = False,
    theme: str | None = None,
    recorder: Recorder | None = None,
) -> int:
    """The dashboard; with ``recorder``, everything collected (and every tick and finding) is recorded too."""
    app = make_app(fleet, read_only=read_only, kiosk=kiosk, theme=theme, recorder=recorder, freeze_gc=True)
    try:
        app.run()
    finally:
        if recorder is not None:
            recorder.close()
    return app.return_code or 0


def run_demo_dashboard(
    *,
    nodes: int | None,
    seed: int,
    scenario: str,
    fleet: str = "default",
    fault_every_s: float | None = None,
    read_only: bool = False,
    kiosk: bool = False,
    theme: str | None = None,
) -> int:
    """The demo fleet in its own process (so the dashboard's CPU is its own), the dashboard here."""
    with tempfile.TemporaryDirectory(prefix="sparktui-demo-") as tmp:
        config = Path(tmp) / "demo.toml"
        command = [
            sys.executable,
            "-m",
            "sparktui",
            "demo",
            "--serve-only",
            "--write-config",
            str(config),
            "--seed",
            str(seed),
            "--scenario",
            scenario,
            "--fleet",
            fleet,
        ]
        if nodes is not None:
            command += ["--nodes", str(nodes)]
        if fault_every_s is not None:
            command += ["--fault-every", str(fault_every_s)]
        log = Path(tmp) / "demo.log"
        with log.open("wb") as out:
            child = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)

        def stop(signum: int, _frame: object) -> None:
            raise SystemExit(128 + signum)  # unwinds through the finally below, which stops the fleet

        previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGHUP)}
        try:
            deadline = time.monotonic() + DEMO_START_TIMEOUT_S
            while not config.exists():
                if child.poll() is not None or time.monotonic() > deadline:
                    print(f"sparktui demo: the demo fleet did not start:\n{log.read_text()}", file=sys.stderr)
                    return 1
                time.sleep(0.05)
            time.sleep(0.1)  # the file is written in one go, but let the servers settle
            try:
                spec = load_config(config)
            except ConfigError as exc:
                print(str(exc), file=sys.stderr)
                return 1
            return run_dashboard(spec, read_only=read_only, kiosk=kiosk, theme=theme)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            child.terminate()
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.kill()
