"""A finding's fix, run: its actions in order through the demo fleet's own SSH server (the drop really
drops the simulated page cache, the restart really restarts the simulated unit) and over HTTP, stopping
at the first action that fails; and ``sparktui action NODE fix`` against a real sshd with stub
systemctl and sudo (tests/stubs), stopping at the warm-up that the fixture server cannot answer."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparktui.actions.audit import AUDIT_ENV, AuditLog
from sparktui.actions.plans import ActionKind, ActionSettings, FixPlan, plan_fix
from sparktui.actions.runner import ActionRunner, Outcome
from sparktui.cli import main
from sparktui.config import load_catalogue, parse_config
from sparktui.demo.fleet import DemoFleet, InstanceSpec
from sparktui.demo.fleet import NodeSpec as DemoNodeSpec
from sparktui.headless.snapshot import collect
from tests.support.fixture_fleet import Endpoint, FixtureServer
from tests.support.sshd import Sshd

FAST = ActionSettings(
    command_timeout_s=10.0,
    remove_timeout_s=10.0,
    kill_timeout_s=10.0,
    ready_timeout_s=20.0,
    health_poll_s=0.05,
    warmup_request_timeout_s=20.0,
    warmup_ttft_target_s=5.0,
    warmup_max_requests=3,
    margin_s=5.0,
)
FINDING = "page-cache-blocks-start"
STEPS = load_catalogue().rule(FINDING).fix_actions  # drop-caches, restart, warmup
DROP = "sudo -n sh -c 'sync; echo 3 > /proc/sys/vm/drop_caches'"


async def test_a_fix_on_the_demo_fleet_runs_in_order_and_stops_at_the_first_failing_step(tmp_path: Path) -> None:
    fleet = DemoFleet(
        nodes=(DemoNodeSpec("spark1", (InstanceSpec("qwen36", "qwen36", unit="vllm-qwen36.service"),), "nvidia"),),
        seed=11,
    )
    await fleet.start()

    async def fast_clock() -> None:  # 50x wall speed
        while True:
            await asyncio.sleep(0.01)
            await fleet.advance(0.5)

    clock = asyncio.create_task(fast_clock())
    audit = AuditLog(tmp_path / "audit.log", user="tester")
    try:
        spec = parse_config(fleet.config_toml(), source="demo.toml")
        state, now = await collect(spec, polls=1, interval_s=0.0)
        views = state.view(now, window_s=None)
        # The config names a unit the node does not have: the restart (step 2) fails there.
        node = spec.nodes[0]
        wrong = node.vllm[0].model_copy(update={"unit": "vllm-gone.service"})
        broken = spec.model_copy(update={"nodes": (node.model_copy(update={"vllm": (wrong,)}),)})
        plan = plan_fix(broken, "spark1", STEPS, finding=FINDING, views=views, settings=FAST)
        assert isinstance(plan, FixPlan), plan
        runner = ActionRunner(broken, audit=audit, clock=lambda: fleet.now, memory=lambda _node: None)
        progress: list[str] = []
        try:
            async with asyncio.timeout(60):
                result = await runner.run(plan, on_progress=progress.append)
        finally:
            await runner.close()
        demo_ssh = fleet.node("spark1").ssh
        assert demo_ssh is not None
        sent = [c for c in demo_ssh.commands if "sampler" not in c and not c.startswith("journalctl")]
        assert sent == [DROP, "sudo -n systemctl restart vllm-gone.service"]  # in order; nothing after
        assert result.outcome is Outcome.FAILED
        assert [part.kind for part in result.parts] == [ActionKind.DROP_CACHES, ActionKind.RESTART]
        assert result.parts[0].ok and not result.parts[1].ok
        assert result.message.startswith(f"fix spark1: {FINDING}: stopped at step 2/3: restart spark1/qwen36: ")
        assert "Unit vllm-gone.service not found" in result.message
        assert result.message.endswith("; not run: warmup spark1/qwen36")
        assert progress.index("step 1/3: drop-caches spark1") < progress.index("step 2/3: restart spark1/qwen36")
        assert not any(line.startswith("step 3/3") for line in progress)
        records = audit.records()
        assert [(r["event"], r["action"], r["result"]) for r in records] == [
            ("step", "drop-caches", "ok"),
            ("action", "drop-caches", "ok"),
            ("step", "restart", "failed"),
            ("action", "restart", "failed"),
            ("fix", "fix", "failed"),
        ]
        assert len({r["fix_id"] for r in records}) == 1  # every line names the fix it belongs to

        # The same fix with the right unit: every step, and the node serves warm again.
        plan = plan_fix(spec, "spark1", STEPS, finding=FINDING, views=views, settings=FAST)
        assert isinstance(plan, FixPlan), plan
        fleet.node("spark1").instances[0].engine.load_factor = 0.0  # only the warm-up's requests
        runner = ActionRunner(spec, audit=audit, clock=lambda: fleet.now, memory=lambda _node: None)
        try:
            async with asyncio.timeout(60):
                result = await runner.run(plan)
        finally:
            await runner.close()
        assert result.ok, result.lines()
        assert [part.kind for part in result.parts] == [ActionKind.DROP_CACHES, ActionKind.RESTART, ActionKind.WARMUP]
        assert "sudo -n systemctl restart vllm-qwen36.service" in demo_ssh.commands
        assert result.parts[1].steps[-1].message == "/health answered 200"  # the restart waited for the load
        assert result.warmup is not None and result.warmup.reached
    finally:
        clock.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await clock
        await fleet.stop()


@pytest.fixture
def vllm_server() -> Iterator[FixtureServer]:
    server = FixtureServer(Endpoint(name="fix-vllm")).start()
    yield server
    server.stop()


def test_cli_fix_confirms_every_step_with_yes_and_stops_at_the_failing_one(
    fresh_sshd: Sshd,
    vllm_server: FixtureServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    unit = "vllm-cli-fix.service"
    config = tmp_path / "config.toml"
    config.write_text(f"""
poll_interval_s = 0.5
timeout_s = 1.0

[[nodes]]
name = "spark1"
host = "{fresh_sshd.host}"

[nodes.ssh]
user = "{fresh_sshd.user}"
port = {fresh_sshd.port}
key_file = "{fresh_sshd.client_key}"
known_hosts = "{fresh_sshd.known_hosts}"
connect_timeout_s = 3.0

[[nodes.vllm]]
name = "qwen36"
url = "{vllm_server.url}"
unit = "{unit}"
""")
    monkeypatch.setenv(AUDIT_ENV, str(tmp_path / "audit.log"))
    code = main(["--config", str(config), "action", "spark1", "fix"])  # one poll of a healthy node finds nothing
    out, err = capsys.readouterr()
    assert code == 2
    assert "no open finding on spark1 has a fix" in err and "name the finding with --finding ID" in err

    code = main(["--config", str(config), "action", "spark1", "fix", "--finding", FINDING])
    out, err = capsys.readouterr()
    assert code == 2 and "not run: no terminal to confirm on" in err  # no terminal, no --yes: plan only
    assert f"fix spark1: {FINDING}?" in out and "step 3/3: warmup spark1/qwen36" in out
    assert not [c for c in fresh_sshd.calls() if "drop_caches" in c or "systemctl restart" in c]

    code = main(["--config", str(config), "action", "spark1", "fix", "--finding", FINDING, "--yes"])
    out, err = capsys.readouterr()
    assert code == 1, out + err
    for number, name in enumerate(("drop-caches spark1", "restart spark1/qwen36", "warmup spark1/qwen36"), 1):
        assert f"step {number}/3: {name}" in out
    calls = fresh_sshd.calls()
    assert calls.index("sudo -n sh -c sync; echo 3 > /proc/sys/vm/drop_caches") < calls.index(
        f"sudo -n systemctl restart {unit}"
    )
    # The fixture server answers no chat completion: the warm-up, the last step, fails and says why.
    assert f"fix spark1: {FINDING}: stopped at step 3/3: warmup spark1/qwen36: failed at step 1/1" in out
    records = AuditLog(tmp_path / "audit.log").records()
    assert records[-1]["event"] == "fix" and records[-1]["result"] == "failed"
