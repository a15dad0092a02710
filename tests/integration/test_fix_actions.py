"""A finding's fix, run: its actions in order through the demo fleet's own SSH server (the drop really
drops the simulated page cache, the restart really restarts the simulated unit) and over HTTP, stopping
at the first action that fails (``sparktui action NODE fix``: tests/integration/test_actions.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparktui.actions.audit import AuditLog
from sparktui.actions.plans import FixPlan, plan_fix
from sparktui.actions.registry import ActionKind
from sparktui.actions.runner import ActionRunner, Outcome
from sparktui.config import load_catalogue, parse_config
from sparktui.headless.snapshot import collect
from sparktui.model.fabric import FABRIC_TAG
from tests.support.actions import FAST, fast_demo, run_once

FINDING = "page-cache-blocks-start"
STEPS = load_catalogue().rule(FINDING).fix_actions  # drop-caches, restart, warmup
DROP = "sudo -n sh -c 'sync; echo 3 > /proc/sys/vm/drop_caches'"


@pytest.mark.slow
async def test_a_fix_on_the_demo_fleet_runs_in_order_and_stops_at_the_first_failing_step(tmp_path: Path) -> None:
    audit = AuditLog(tmp_path / "audit.log", user="tester")
    async with fast_demo(seed=11) as fleet:
        spec = parse_config(fleet.config_toml(), source="demo.toml")
        monitor, _now = await collect(spec, polls=1, interval_s=0.0)
        views = monitor.views
        # The config names a unit the node does not have: the restart (step 2) fails there.
        node = spec.nodes[0]
        wrong = node.vllm[0].model_copy(update={"unit": "vllm-gone.service"})
        broken = spec.model_copy(update={"nodes": (node.model_copy(update={"vllm": (wrong,)}),)})
        plan = plan_fix(broken, "spark1", STEPS, finding=FINDING, views=views, settings=FAST)
        assert isinstance(plan, FixPlan), plan
        runner = ActionRunner(broken, audit=audit, clock=lambda: fleet.now, memory=lambda _node: None)
        progress: list[str] = []
        result = await run_once(runner, plan, progress.append)
        demo_ssh = fleet.node("spark1").ssh
        assert demo_ssh is not None
        collecting = ("sampler", FABRIC_TAG)  # the host state's commands, not the fix's
        sent = [c for c in demo_ssh.commands if not any(t in c for t in collecting) and not c.startswith("journalctl")]
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
        assert [(r["event"], r["action"], r.get("result")) for r in records] == [
            ("started", "fix", None),  # on disk before the first command of the fix
            ("started", "drop-caches", None),
            ("step", "drop-caches", "ok"),
            ("action", "drop-caches", "ok"),
            ("started", "restart", None),
            ("step", "restart", "failed"),
            ("action", "restart", "failed"),
            ("fix", "fix", "failed"),
        ]
        assert len({r["fix_id"] for r in records}) == 1  # every line names the fix it belongs to
        assert records[0]["command"] == list(plan.commands) and records[4]["command"] == list(plan.plans[1].commands)

        # The same fix with the right unit: every step, and the node serves warm again.
        plan = plan_fix(spec, "spark1", STEPS, finding=FINDING, views=views, settings=FAST)
        assert isinstance(plan, FixPlan), plan
        fleet.node("spark1").instances[0].engine.load_factor = 0.0  # only the warm-up's requests
        runner = ActionRunner(spec, audit=audit, clock=lambda: fleet.now, memory=lambda _node: None)
        result = await run_once(runner, plan)
        assert result.ok, result.lines()
        assert [part.kind for part in result.parts] == [ActionKind.DROP_CACHES, ActionKind.RESTART, ActionKind.WARMUP]
        assert "sudo -n systemctl restart vllm-qwen36.service" in demo_ssh.commands
        assert result.parts[1].steps[-1].message == "/health answered 200"  # the restart waited for the load
        assert result.warmup is not None and result.warmup.reached
