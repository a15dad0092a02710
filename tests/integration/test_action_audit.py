"""An action's audit comes first: its ``started`` record (time, user, node, command) is written and synced
before the first command is sent, and an action whose record cannot be written is refused with one line
and sends nothing, whichever way it was asked (the runner, which the dashboard uses; a fix; ``sparktui
action``). The refusals are real: /dev/full answers ENOSPC, ``prlimit --fsize`` makes the kernel refuse
the file's growth (EFBIG), a read-only tmpfs mount answers EROFS, and root without CAP_DAC_OVERRIDE meets
the permission bits. Against the real sshd of tests/support/sshd.py, whose stubs log every call."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sparktui.actions.audit import AUDIT_ENV, AuditLog
from sparktui.actions.plans import (
    ActionPlan,
    ActionSettings,
    FixPlan,
    plan_drop_caches,
    plan_fix,
    plan_restart,
)
from sparktui.actions.runner import ActionRunner, Outcome
from sparktui.model.specs import FleetSpec, ServerSpec
from tests.support.actions import FAST, config_for, full_device, run_once
from tests.support.sshd import Sshd

ROOT = Path(__file__).resolve().parents[2]
UNIT = "vllm-audit.service"
# No /health to wait for: the restart's command is what these tests look at.
QUICK = ActionSettings(
    command_timeout_s=10.0, ready_timeout_s=0.2, health_poll_s=0.05, warmup_request_timeout_s=1.0, margin_s=5.0
)


def fleet_for(server: Sshd) -> FleetSpec:
    node = server.node("spark1").model_copy(
        update={"vllm": (ServerSpec(name="v", url="http://127.0.0.1:1", unit=UNIT),)}
    )
    return FleetSpec(nodes=(node,))


def restart_plan(fleet: FleetSpec) -> ActionPlan:
    plan = plan_restart(fleet, "spark1", settings=QUICK)
    assert isinstance(plan, ActionPlan), plan
    return plan


def logins(server: Sshd) -> int:
    """SSH logins the server accepted so far (LogLevel VERBOSE logs each)."""
    return server.log_file.read_text().count("Accepted publickey")


def refusal(path: Path, reason: str) -> str:
    return f"cannot write the audit log {path}: {reason}; fix that or set {AUDIT_ENV} to a writable file"


# --- the started record, on disk first ---------------------------------------------------------------


async def test_the_started_record_is_on_disk_and_synced_before_the_first_command_runs(
    fresh_sshd: Sshd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    audit_path = tmp_path / "state" / "audit.log"
    seen = fresh_sshd.state_dir / "audit-as-the-restart-saw-it"
    # The command itself, on the node, reads the audit log as it runs.
    fresh_sshd.set_unit_hook(UNIT, "restart", f"cat '{audit_path}' > '{seen}'\n")
    synced: list[str] = []
    fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        fsync(fd)
        if Path(f"/proc/self/fd/{fd}").readlink() == audit_path:
            synced.append(audit_path.read_text())

    monkeypatch.setattr(os, "fsync", recording_fsync)
    fleet = fleet_for(fresh_sshd)
    plan = restart_plan(fleet)
    result = await run_once(ActionRunner(fleet, audit=AuditLog(audit_path, user="milo")), plan)
    assert fresh_sshd.calls()[:2] == [f"sudo -n systemctl restart {UNIT}", f"systemctl restart {UNIT}"]
    lines = [json.loads(line) for line in seen.read_text().splitlines()]
    assert [r["event"] for r in lines] == ["started"]  # nothing else yet: the step's line comes after it
    (started,) = lines
    assert (started["user"], started["node"], started["action"]) == ("milo", "spark1", "restart")
    assert started["command"] == list(plan.commands) and started["time"].endswith("+00:00")
    assert synced and synced[0] == seen.read_text()  # synced before the command was sent
    events = [r["event"] for r in AuditLog(audit_path).records()]
    assert events == ["started", "step", "step", "action"], result.lines()  # the result follows as before


# --- refused: nothing is sent --------------------------------------------------------------------------


async def test_a_full_disk_refuses_the_action_before_anything_is_sent(fresh_sshd: Sshd) -> None:
    dev_full = full_device()
    fleet = fleet_for(fresh_sshd)
    plans: list[ActionPlan | FixPlan] = [restart_plan(fleet)]
    # drop-caches reads /proc/meminfo before its first step: the record comes before that read too.
    drop = plan_drop_caches(fleet, "spark1", None, settings=FAST)
    assert isinstance(drop, ActionPlan)
    fix = plan_fix(fleet, "spark1", ("drop-caches", "restart"), finding="page-cache-blocks-start", settings=QUICK)
    assert isinstance(fix, FixPlan), fix
    plans += [drop, fix]
    for plan in plans:
        runner = ActionRunner(fleet, audit=AuditLog(dev_full))  # every write: ENOSPC
        progress: list[str] = []
        result = await run_once(runner, plan, progress.append)
        assert result.outcome is Outcome.REFUSED, result.lines()
        assert result.message == (
            f"{plan.title}: refused: {refusal(dev_full, 'the disk is full (No space left on device)')}"
        )
        assert "\n" not in result.message and progress == [result.message]
        assert not result.steps and not result.parts
    assert fresh_sshd.calls() == []
    assert logins(fresh_sshd) == 0  # not even a connection: no remote command of any kind


class FullAtTheRestart(AuditLog):
    """A log whose disk fills up just when the restart's record comes: that record goes to /dev/full."""

    def write(self, event: str, **fields: object) -> None:
        if event == "started" and fields.get("action") == "restart":
            AuditLog(full_device(), user=self.user).write(event, **fields)  # ENOSPC, from the kernel
        super().write(event, **fields)


async def test_a_full_disk_in_the_middle_of_a_fix_stops_it_before_the_next_action_is_sent(
    fresh_sshd: Sshd, tmp_path: Path
) -> None:
    full_device()
    fleet = fleet_for(fresh_sshd)
    fix = plan_fix(fleet, "spark1", ("drop-caches", "restart"), finding="page-cache-blocks-start", settings=QUICK)
    assert isinstance(fix, FixPlan), fix
    audit = FullAtTheRestart(tmp_path / "audit.log")
    result = await run_once(ActionRunner(fleet, audit=audit, memory=lambda _node: None), fix)
    assert result.outcome is Outcome.FAILED
    assert [p.outcome for p in result.parts] == [Outcome.OK, Outcome.REFUSED]
    full = refusal(tmp_path / "audit.log", "the disk is full (No space left on device)")
    assert f"stopped at step 2/2: restart spark1/v: refused: {full}" in result.message
    calls = fresh_sshd.calls()
    assert [c for c in calls if "drop_caches" in c] and not [c for c in calls if "systemctl restart" in c]
    events = [(r["event"], r["action"]) for r in audit.records()]
    assert events == [
        ("started", "fix"),
        ("started", "drop-caches"),
        ("step", "drop-caches"),
        ("action", "drop-caches"),
        ("fix", "fix"),
    ]


# --- sparktui action: one line, for each reason ------------------------------------------------------


def run_cli(
    config: Path, audit: Path, *, wrap: tuple[str, ...] = (), action: str = "restart"
) -> subprocess.CompletedProcess[str]:
    """``sparktui action spark1 ACTION --yes`` in a process of its own, under ``wrap`` (prlimit, unshare,
    setpriv)."""
    return subprocess.run(
        [*wrap, sys.executable, "-m", "sparktui", "--config", str(config), "action", "spark1", action, "--yes"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1", AUDIT_ENV: str(audit)},
        check=False,
    )


def cli_config(server: Sshd, tmp_path: Path) -> Path:
    """spark1 through ``server``; its vLLM answers nothing (a restart is planned all the same)."""
    config = tmp_path / "config.toml"
    config.write_text(config_for(server, "http://127.0.0.1:1", UNIT))
    return config


def the_one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def test_cli_refuses_when_the_audit_log_cannot_grow_and_sends_no_command(fresh_sshd: Sshd, tmp_path: Path) -> None:
    """The kernel refuses to let the file grow (``prlimit --fsize``, EFBIG, as a full disk would refuse
    with ENOSPC): the restart is refused after the state was collected, before its command."""
    if shutil.which("prlimit") is None:
        pytest.skip("no prlimit here")
    audit = tmp_path / "audit.log"
    earlier = "".join(json.dumps({"event": "step", "n": n}) + "\n" for n in range(2000))
    audit.write_text(earlier)
    limit = len(earlier) + 40  # room for part of a record, not a whole one
    done = run_cli(cli_config(fresh_sshd, tmp_path), audit, wrap=("prlimit", f"--fsize={limit}"))
    reason = "the file cannot grow: it is at the size limit for files (File too large)"
    assert the_one_line(done) == f"sparktui action: restart spark1/qwen36: refused: {refusal(audit, reason)}"
    assert "restart spark1/qwen36?" in done.stdout  # the plan was made and shown
    assert not [c for c in fresh_sshd.calls() if c.startswith("sudo") or "restart" in c], fresh_sshd.calls()
    assert audit.read_text() == earlier  # the part of the record that fitted was cut off again


def test_cli_refuses_an_audit_path_under_a_regular_file_before_collecting(fresh_sshd: Sshd, tmp_path: Path) -> None:
    passwd = tmp_path / "passwd"
    passwd.write_text("root:x:0:0:root:/root:/bin/bash\n")
    audit = passwd / "audit.log"
    done = run_cli(cli_config(fresh_sshd, tmp_path), audit)
    assert the_one_line(done) == (
        f"sparktui action: restart spark1: refused: {refusal(audit, f'{passwd} is a file, not a folder')}"
    )
    assert fresh_sshd.calls() == [] and logins(fresh_sshd) == 0
    deeper = passwd / "sparktui" / "state" / "audit.log"
    done = run_cli(cli_config(fresh_sshd, tmp_path), deeper)
    assert f"{passwd} is a file, not a folder" in the_one_line(done)


def _read_only_mount(folder: Path) -> tuple[str, ...]:
    """A wrapper that runs its command with a read-only tmpfs on ``folder``, in a mount namespace of its
    own (root: plain; otherwise as root of a new user namespace)."""
    if shutil.which("unshare") is None:
        pytest.skip("no unshare here")
    user = () if os.geteuid() == 0 else ("-r",)
    wrap = ("unshare", *user, "-m", "sh", "-c", 'mount -t tmpfs -o ro tmpfs "$0" && exec "$@"', str(folder))
    probe = subprocess.run([*wrap, "true"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"cannot mount a read-only tmpfs here: {probe.stderr.strip()}")
    return wrap


@pytest.mark.parametrize("missing", [False, True], ids=["in-it", "missing-folder-in-it"])
def test_cli_refuses_an_audit_log_on_a_read_only_file_system(fresh_sshd: Sshd, tmp_path: Path, missing: bool) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    wrap = _read_only_mount(folder)
    audit = folder / "sparktui" / "audit.log" if missing else folder / "audit.log"
    done = run_cli(cli_config(fresh_sshd, tmp_path), audit, wrap=wrap)
    if missing:
        reason = f"cannot create the folder {folder / 'sparktui'}: {folder} is on a read-only file system"
    else:
        reason = f"{folder} is on a read-only file system"
    assert the_one_line(done) == f"sparktui action: restart spark1: refused: {refusal(audit, reason)}"
    assert fresh_sshd.calls() == [] and logins(fresh_sshd) == 0


def _without_permission_overrides() -> tuple[str, ...]:
    """Root meets the permission bits only without CAP_DAC_OVERRIDE (and _READ_SEARCH); others always do."""
    if os.geteuid() != 0:
        return ()
    if shutil.which("setpriv") is None:
        pytest.skip("no setpriv here to drop root's CAP_DAC_OVERRIDE")
    return ("setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--")


@pytest.mark.parametrize("case", ["file", "folder", "missing-folder"])
def test_cli_refuses_an_audit_log_it_has_no_permission_to_write(fresh_sshd: Sshd, tmp_path: Path, case: str) -> None:
    wrap = _without_permission_overrides()
    folder = tmp_path / "locked"
    folder.mkdir()
    config = cli_config(fresh_sshd, tmp_path)
    user = _user()
    if case == "file":
        audit = folder / "audit.log"
        audit.write_text("")
        audit.chmod(0o400)
        reason = f"permission denied: {audit} is not writable by {user}"
    elif case == "folder":
        audit = folder / "audit.log"
        reason = f"permission denied: the folder {folder} is not writable by {user}"
    else:
        audit = folder / "sparktui" / "audit.log"
        reason = (
            f"cannot create the folder {folder / 'sparktui'}: permission denied ({folder} is not writable by {user})"
        )
    folder.chmod(0o500)
    try:
        done = run_cli(config, audit, wrap=wrap)
    finally:
        folder.chmod(0o700)
    assert the_one_line(done) == f"sparktui action: restart spark1: refused: {refusal(audit, reason)}"
    assert fresh_sshd.calls() == [] and logins(fresh_sshd) == 0


def _user() -> str:
    from sparktui.actions.audit import local_user

    return local_user()


# --- the runner's reasons, one line each -----------------------------------------------------------------


def test_an_audit_path_that_is_a_folder_is_named_so(tmp_path: Path) -> None:
    audit = AuditLog(tmp_path)
    assert audit.started(action="restart") == refusal(tmp_path, f"{tmp_path} is a folder, not a file")
    assert audit.check() == refusal(tmp_path, f"{tmp_path} is a folder, not a file")


def test_every_record_is_synced_and_a_new_files_folder_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[str] = []
    fsync = os.fsync

    def recording(fd: int) -> None:
        synced.append(str(Path(f"/proc/self/fd/{fd}").readlink()))
        fsync(fd)

    monkeypatch.setattr(os, "fsync", recording)
    path = tmp_path / "new" / "audit.log"
    audit = AuditLog(path)
    assert audit.started(action="restart", node="spark1", command=["x"]) is None
    audit.write("action", result="ok")
    assert synced == [str(path), str(path.parent), str(path)]
    assert [r["event"] for r in audit.records()] == ["started", "action"]
