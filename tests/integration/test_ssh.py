"""NodeSsh against a real OpenSSH server on 127.0.0.1: commands, host key and auth problems, reconnects.

Every wait is bounded (``asyncio.timeout``), so a broken reconnect fails a test instead of hanging it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shlex
import socket
import time
from collections.abc import AsyncGenerator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sparktui.sources.ssh import MAX_COMMAND_OUTPUT, NodeSsh, SshProblemKind, SshState, StreamEvent
from tests.support.sshd import UNIT_EXEC_127_CRASH_LOOP, UNIT_RUNNING, VLLM_EXEC, Sshd, container_inspect
from tests.support.wait import wait_until

TICKS = "i=0; while :; do echo tick $i; i=$((i + 1)); sleep 0.1; done"


def ssh_for(server: Sshd, **ssh: Any) -> NodeSsh:
    return NodeSsh(server.node(**ssh), use_agent=False)


async def next_event(
    events: AsyncGenerator[StreamEvent, None],
    want: Callable[[StreamEvent], bool],
    timeout_s: float,
    seen: list[StreamEvent] | None = None,
) -> StreamEvent:
    """The first event that ``want`` accepts, within ``timeout_s``; the others go to ``seen``."""
    async with asyncio.timeout(timeout_s):
        async for event in events:
            if seen is not None:
                seen.append(event)
            if want(event):
                return event
    raise AssertionError("the stream ended")


def state_of(ssh: NodeSsh) -> SshState:
    """Read the state afresh (mypy would keep the narrowing of an earlier ``assert ssh.state is ...``)."""
    return ssh.state


def is_line(event: StreamEvent) -> bool:
    return event.line is not None


def is_problem(event: StreamEvent) -> bool:
    return event.problem is not None


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts TCP connections and never says anything (a hung sshd)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


# --- commands ---------------------------------------------------------------------------------------------


async def test_run_returns_stdout_stderr_and_exit_status(sshd: Sshd) -> None:
    async with ssh_for(sshd) as ssh:
        result = await ssh.run("echo out; echo err >&2; exit 3", timeout_s=5)
        assert (result.exit_status, result.stdout, result.stderr, result.problem) == (
            3,
            "out\n",
            "err\n",
            None,
        )
        assert not result.ok
        assert ssh.state is SshState.CONNECTED and ssh.problem is None
        fed = await ssh.run("tr a-z A-Z", timeout_s=5, stdin="vllm\n")
        assert fed.ok and fed.stdout == "VLLM\n"
        unfed = await ssh.run("cat; echo done", timeout_s=5)  # no stdin given: it is closed, not left open
        assert unfed.ok and unfed.stdout == "done\n"
        killed = await ssh.run("kill -9 $$", timeout_s=5)
        assert (killed.exit_status, killed.exit_signal, killed.problem) == (None, "KILL", None)


async def test_a_commands_output_is_capped_keeping_the_tail_and_saying_how_much_was_dropped(sshd: Sshd) -> None:
    printed = "".join(f"{i}\n" for i in range(1, 300_001))  # 2.1 MB: over the default cap of 1 MiB
    async with ssh_for(sshd) as ssh:
        small = await ssh.run("seq 1 300000; seq 1 300000 >&2", timeout_s=30, max_output=1000)
        default = await ssh.run("seq 1 300000", timeout_s=30)
    assert small.ok
    for got in (small.stdout, small.stderr):
        note, tail = got.split("\n", 1)
        assert note == f"[{len(printed) - 1000:,} characters of output dropped; the last 1,000 follow]"
        assert tail == printed[-1000:]
    note, tail = default.stdout.split("\n", 1)
    assert note == f"[{len(printed) - MAX_COMMAND_OUTPUT:,} characters of output dropped; the last 1,048,576 follow]"
    assert tail == printed[-MAX_COMMAND_OUTPUT:]


async def test_a_commands_output_comes_back_without_escape_sequences(sshd: Sshd) -> None:
    async with ssh_for(sshd) as ssh:
        result = await ssh.run(r"printf 'a\tb\033]2;pwned\007\r\nc\033[2Jd\n'; printf 'e\033[31mf\n' >&2", timeout_s=5)
    assert (result.stdout, result.stderr) == ("a\tb\ncd\n", "ef\n")


async def test_commands_share_one_connection(sshd: Sshd) -> None:
    async with ssh_for(sshd) as ssh:
        await ssh.run("true", timeout_s=5)
        port = ssh.local_port
        assert port is not None
        results = await asyncio.gather(*(ssh.run("true", timeout_s=5) for _ in range(3)))
        assert all(r.ok for r in results)
        assert ssh.local_port == port
        assert sshd.session(port) is not None  # one sshd session serves them all


async def test_stubs_come_first_on_the_session_path(sshd: Sshd) -> None:
    async with ssh_for(sshd) as ssh:
        result = await ssh.run("command -v systemctl journalctl docker", timeout_s=5)
    assert result.stdout.split() == [str(sshd.stub_dir / name) for name in ("systemctl", "journalctl", "docker")]


async def test_stub_systemctl_and_docker_answer_from_state_and_record_calls(sshd: Sshd) -> None:
    sshd.set_unit("vllm-crash.service", UNIT_EXEC_127_CRASH_LOOP)
    sshd.set_unit("vllm-ok.service", UNIT_RUNNING)
    sshd.set_container("vllm-ctr", container_inspect("vllm-ctr", restarts=2))
    props = "ActiveState,SubState,ExecMainStatus,NRestarts,ExecMainStartTimestamp,ExecStart"
    async with ssh_for(sshd) as ssh:
        crash = await ssh.run(f"systemctl show vllm-crash.service -p {props}", timeout_s=5)
        running = await ssh.run("systemctl is-active vllm-ok.service", timeout_s=5)
        exec_start = await ssh.run("systemctl show vllm-ok.service -p ExecStart --value", timeout_s=5)
        unknown = await ssh.run("systemctl show no-such.service -p LoadState --value", timeout_s=5)
        inspect = await ssh.run("docker inspect vllm-ctr", timeout_s=5)
        missing = await ssh.run("docker inspect vllm-gone", timeout_s=5)
    shown = dict(line.split("=", 1) for line in crash.stdout.splitlines())
    assert shown["ActiveState"] == "activating" and shown["SubState"] == "auto-restart"
    assert shown["ExecMainStatus"] == "127" and shown["NRestarts"] == "57"
    assert shown["ExecMainStartTimestamp"] == "Sat 2026-05-30 14:31:02 UTC"
    assert shown["ExecStart"].startswith("{ path=/workspace/vllm-head-090.sh ;")
    assert (running.exit_status, running.stdout) == (0, "active\n")
    assert unknown.stdout == "not-found\n"
    assert json.loads(inspect.stdout)[0]["RestartCount"] == 2
    assert json.loads(inspect.stdout)[0]["Name"] == "/vllm-ctr"
    assert (missing.exit_status, missing.stdout, missing.stderr) == (
        1,
        "[]\n",
        "Error: No such object: vllm-gone\n",
    )
    assert f"systemctl show vllm-crash.service -p {props}" in sshd.calls()
    assert "docker inspect vllm-ctr" in sshd.calls()
    assert exec_start.stdout.startswith(f"{{ path={VLLM_EXEC} ; argv[]={VLLM_EXEC} serve ")


async def test_concurrent_commands_are_capped_per_node(fresh_sshd: Sshd) -> None:
    async with NodeSsh(fresh_sshd.node(), max_commands=4, use_agent=False) as ssh:
        await ssh.run("true", timeout_s=5)  # connect first: time only the commands
        started = time.monotonic()
        # The server starts a session about every 0.1 s (the account's shell rc files), so each command
        # lasts long enough for four of them to overlap.
        results = await asyncio.gather(*(ssh.run("stub-inflight 0.6", timeout_s=10) for _ in range(8)))
        elapsed = time.monotonic() - started
    assert all(r.ok for r in results)
    assert fresh_sshd.inflight_max() == 4  # never more than the cap, and the cap was used
    assert elapsed >= 1.2  # two rounds of 0.6 s


async def test_command_over_its_deadline_is_a_timeout_and_the_connection_stays(sshd: Sshd) -> None:
    async with ssh_for(sshd) as ssh:
        result = await ssh.run("sleep 5", timeout_s=0.5)
        assert result.problem is not None and result.problem.kind is SshProblemKind.TIMEOUT
        assert "`sleep 5` did not finish within 0.5 s" in result.problem.message
        assert result.exit_status is None and result.elapsed_s < 1.5
        after = await ssh.run("echo still here", timeout_s=5)
    assert after.ok and after.stdout == "still here\n"


async def test_command_cut_off_by_a_lost_connection_is_lost_and_not_run_again(fresh_sshd: Sshd) -> None:
    async with ssh_for(fresh_sshd) as ssh:
        assert (await ssh.run("true", timeout_s=5)).ok
        assert ssh.local_port is not None
        running = asyncio.create_task(ssh.run("stub-inflight 3", timeout_s=10))
        inflight = fresh_sshd.state_dir / "inflight.log"
        await wait_until(
            lambda: inflight.exists() and "start" in inflight.read_text(), 10.0, what="the command started"
        )
        fresh_sshd.kill_session(ssh.local_port)
        result = await running
        assert result.problem is not None and result.problem.kind is SshProblemKind.LOST
        assert result.exit_status is None and result.elapsed_s < 2
        assert (fresh_sshd.state_dir / "inflight.log").read_text().count("start") == 1  # not re-run
        after = await ssh.run("echo reconnected", timeout_s=5)  # the next command connects again
    assert after.ok and after.stdout == "reconnected\n"


# --- refused connections: each one a problem with a sentence, never accepted -----------------------------


async def test_unknown_host_key_is_refused_and_the_fix_in_the_message_works(sshd: Sshd, tmp_path: Path) -> None:
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text("")
    async with ssh_for(sshd, known_hosts=known_hosts) as ssh:
        result = await ssh.run("true", timeout_s=5)
    problem = result.problem
    assert problem is not None and problem.kind is SshProblemKind.HOST_KEY_UNKNOWN
    assert problem.message.startswith(f"spark1 (127.0.0.1:{sshd.port}): host key is not in {known_hosts}")
    fix = problem.message.split("then run: ", 1)[1]
    assert fix == f"ssh-keyscan -p {sshd.port} 127.0.0.1 >> {known_hosts}"
    keyscan = await asyncio.create_subprocess_shell(fix, stderr=asyncio.subprocess.DEVNULL)
    assert await asyncio.wait_for(keyscan.wait(), 10) == 0
    async with ssh_for(sshd, known_hosts=known_hosts) as ssh:
        assert (await ssh.run("true", timeout_s=5)).ok


async def test_missing_known_hosts_file_is_an_unknown_host_key(sshd: Sshd, tmp_path: Path) -> None:
    async with ssh_for(sshd, known_hosts=tmp_path / "absent") as ssh:
        result = await ssh.run("true", timeout_s=5)
    assert result.problem is not None and result.problem.kind is SshProblemKind.HOST_KEY_UNKNOWN
    assert f"{tmp_path / 'absent'} does not exist" in result.problem.message


async def test_changed_host_key_is_refused_as_changed(sshd: Sshd, tmp_path: Path) -> None:
    known_hosts = sshd.known_hosts_with_other_key(tmp_path / "known_hosts")
    async with ssh_for(sshd, known_hosts=known_hosts) as ssh:
        result = await ssh.run("true", timeout_s=5)
    problem = result.problem
    assert problem is not None and problem.kind is SshProblemKind.HOST_KEY_CHANGED
    assert "CHANGED" in problem.message and "attack" in problem.message and "reinstalled" in problem.message
    remove = problem.message.split("remove the old key with: ", 1)[1].split(", then", 1)[0]
    assert remove == f"ssh-keygen -f {known_hosts} -R '[127.0.0.1]:{sshd.port}'"
    keygen = await asyncio.create_subprocess_exec(*shlex.split(remove), stdout=asyncio.subprocess.DEVNULL)
    assert await asyncio.wait_for(keygen.wait(), 10) == 0
    assert f"[127.0.0.1]:{sshd.port}" not in known_hosts.read_text()


async def test_rejected_key_is_auth_rejected(sshd: Sshd) -> None:
    stranger = sshd.new_key(f"stranger_{time.monotonic_ns()}")
    async with ssh_for(sshd, key_file=stranger) as ssh:
        result = await ssh.run("true", timeout_s=5)
    assert result.problem is not None and result.problem.kind is SshProblemKind.AUTH_REJECTED
    assert f"rejected the key {stranger} for user {sshd.user}" in result.problem.message
    assert "authorized_keys" in result.problem.message


async def test_a_node_that_takes_no_keys_says_so_not_add_the_key(fresh_sshd: Sshd) -> None:
    fresh_sshd.only_passwords()
    async with ssh_for(fresh_sshd) as ssh:
        result = await ssh.run("true", timeout_s=10)
    problem = result.problem
    assert problem is not None and problem.kind is SshProblemKind.AUTH_REJECTED
    assert (
        f"the node offers only password and keyboard-interactive login to user {fresh_sshd.user}, and sparktui "
        "logs in with keys; set PubkeyAuthentication yes" in problem.message
    ), problem.message
    assert "rejected the key" not in problem.message


async def test_missing_key_file_is_no_key(sshd: Sshd, tmp_path: Path) -> None:
    async with ssh_for(sshd, key_file=tmp_path / "id_missing") as ssh:
        result = await ssh.run("true", timeout_s=5)
    assert result.problem is not None and result.problem.kind is SshProblemKind.NO_KEY
    assert f"cannot read the key file {tmp_path / 'id_missing'} (No such file or directory)" in result.problem.message


async def test_nothing_listening_is_refused(sshd: Sshd) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    async with ssh_for(sshd, port=port) as ssh:
        result = await ssh.run("true", timeout_s=5)
    assert result.problem is not None and result.problem.kind is SshProblemKind.REFUSED
    assert result.problem.message.startswith(f"spark1 (127.0.0.1:{port}): connection refused")


async def test_server_that_never_answers_is_a_timeout(sshd: Sshd, silent_port: int) -> None:
    async with ssh_for(sshd, port=silent_port, connect_timeout_s=0.5) as ssh:
        result = await ssh.run("true", timeout_s=5)
    assert result.problem is not None and result.problem.kind is SshProblemKind.TIMEOUT
    assert "no answer within 0.5 s" in result.problem.message
    assert result.elapsed_s < 2


async def test_unresolvable_host_is_unreachable(sshd: Sshd) -> None:
    node = sshd.node().model_copy(update={"host": "no-such-node.invalid"})
    async with NodeSsh(node, use_agent=False) as ssh:
        result = await ssh.run("true", timeout_s=10)
    assert result.problem is not None and result.problem.kind is SshProblemKind.UNREACHABLE
    assert result.problem.message.startswith("spark1 (no-such-node.invalid:")


async def test_host_key_problems_are_retried_slowly_not_worked_around(sshd: Sshd, tmp_path: Path) -> None:
    known_hosts = sshd.known_hosts_with_other_key(tmp_path / "known_hosts")

    def connections_seen() -> int:
        return sshd.log_file.read_text().count("Connection from 127.0.0.1")

    before = connections_seen()
    async with ssh_for(sshd, known_hosts=known_hosts) as ssh:
        first = await ssh.run("true", timeout_s=5)
        again = [await ssh.run("true", timeout_s=5) for _ in range(5)]
        assert ssh.state is SshState.DISCONNECTED and ssh.problem == first.problem
    assert all(r.problem == first.problem and r.elapsed_s < 0.1 for r in again)
    assert connections_seen() - before == 1  # one attempt, then the 30 s wait for a person


# --- streams: loss, stall, restart -------------------------------------------------------------------------


async def test_stream_reconnects_after_its_session_is_killed(fresh_sshd: Sshd) -> None:
    async with ssh_for(fresh_sshd) as ssh:
        events = ssh.stream(TICKS, read_timeout_s=5)
        async with contextlib.aclosing(events):
            await next_event(events, is_line, 5)
            first_port = ssh.local_port
            assert first_port is not None
            fresh_sshd.kill_session(first_port)
            killed = time.monotonic()
            lost = await next_event(events, is_problem, 5)
            assert lost.problem is not None and lost.problem.kind is SshProblemKind.LOST
            seen: list[StreamEvent] = []
            line = await next_event(events, is_line, 5, seen)
            assert line.line == "tick 0"  # the command was started again
            assert any(e.connected for e in seen)
            assert ssh.local_port not in (None, first_port)
            assert time.monotonic() - killed < 2


async def test_stalled_stream_is_detected_by_its_read_timeout_and_reconnects(fresh_sshd: Sshd) -> None:
    async with ssh_for(fresh_sshd) as ssh:
        events = ssh.stream(TICKS, read_timeout_s=1.5)
        async with contextlib.aclosing(events):
            await next_event(events, is_line, 5)
            assert ssh.local_port is not None
            fresh_sshd.freeze_session(ssh.local_port)
            frozen = time.monotonic()
            stalled = await next_event(events, is_problem, 8)
            detected_after = time.monotonic() - frozen
            assert stalled.problem is not None and stalled.problem.kind is SshProblemKind.STALLED
            assert "no output for 1.5 s" in stalled.problem.message
            assert 1.0 < detected_after < 4
            await next_event(events, is_line, 5)
            assert time.monotonic() - frozen < 6


@pytest.mark.slow
async def test_stalled_idle_connection_is_detected_by_keepalive(fresh_sshd: Sshd) -> None:
    async with ssh_for(fresh_sshd) as ssh:  # default keepalive: 2 s, 2 unanswered
        assert (await ssh.run("true", timeout_s=5)).ok
        assert ssh.local_port is not None
        fresh_sshd.freeze_session(ssh.local_port)
        frozen = time.monotonic()
        # Nothing to await for a keepalive failure but the state.
        await wait_until(lambda: ssh.state is not SshState.CONNECTED, 10.0, what="the frozen connection given up")
        assert time.monotonic() - frozen < 8
        assert ssh.problem is not None and ssh.problem.kind is SshProblemKind.STALLED
        assert "stopped answering keepalives" in ssh.problem.message
        again = await ssh.run("echo back", timeout_s=5)  # a new connection; the frozen one is left
    assert again.ok and again.stdout == "back\n"


async def test_stream_comes_back_after_sshd_stops_and_restarts(fresh_sshd: Sshd) -> None:
    async with ssh_for(fresh_sshd) as ssh:
        events = ssh.stream(TICKS, read_timeout_s=5)
        async with contextlib.aclosing(events):
            await next_event(events, is_line, 5)
            fresh_sshd.stop()
            lost = await next_event(events, is_problem, 5)
            assert lost.problem is not None and lost.problem.kind is SshProblemKind.LOST
            refused = await next_event(events, is_problem, 5)
            assert refused.problem is not None and refused.problem.kind is SshProblemKind.REFUSED
            assert ssh.state is SshState.DISCONNECTED
            await asyncio.sleep(0.5)  # the scenario: sshd stays down a while (the reconnects back off meanwhile)
            fresh_sshd.start()
            restarted = time.monotonic()
            seen: list[StreamEvent] = []
            back = await next_event(events, is_line, 8, seen)
            assert back.line == "tick 0" and any(e.connected for e in seen)
            assert time.monotonic() - restarted < 3  # bounded by the backoff (0.2, 0.4, 0.8 s...)
            assert state_of(ssh) is SshState.CONNECTED and ssh.problem is None


async def test_one_node_down_does_not_hold_up_another(sshd_factory: Callable[[str], Sshd]) -> None:
    down, up = sshd_factory("spark1"), sshd_factory("spark2")
    async with (
        NodeSsh(down.node("spark1"), use_agent=False) as ssh_down,
        NodeSsh(up.node("spark2"), use_agent=False) as ssh_up,
    ):
        events = ssh_up.stream(TICKS, read_timeout_s=5)
        async with contextlib.aclosing(events):
            await next_event(events, is_line, 5)
            assert (await ssh_down.run("true", timeout_s=5)).ok
            down.stop()
            lines = 0
            async with asyncio.timeout(5):
                async for event in events:
                    assert event.problem is None, event.problem
                    lines += event.line is not None
                    if lines == 10:
                        break
            failed = await ssh_down.run("true", timeout_s=5)
            assert failed.problem is not None and failed.elapsed_s < 1
            assert failed.problem.message.startswith(f"spark1 (127.0.0.1:{down.port})")
            assert (await ssh_up.run("true", timeout_s=5)).ok


async def test_a_command_that_ends_is_run_again(sshd: Sshd) -> None:
    async with ssh_for(sshd) as ssh:
        events = ssh.stream("echo once; exit 7", read_timeout_s=5)
        async with contextlib.aclosing(events):
            assert (await next_event(events, is_line, 5)).line == "once"
            ended = await next_event(events, is_problem, 5)
            assert ended.problem is not None and ended.problem.kind is SshProblemKind.EXITED
            assert "exited with status 7" in ended.problem.message
            assert (await next_event(events, is_line, 5)).line == "once"
            assert ssh.problem is None  # the connection itself is fine


async def test_stream_reports_a_host_key_problem_and_keeps_waiting(sshd: Sshd, tmp_path: Path) -> None:
    known_hosts = sshd.known_hosts_with_other_key(tmp_path / "known_hosts")
    async with ssh_for(sshd, known_hosts=known_hosts) as ssh:
        events = ssh.stream(TICKS, read_timeout_s=5)
        async with contextlib.aclosing(events):
            first = await next_event(events, lambda e: True, 5)
            assert first.problem is not None and first.problem.kind is SshProblemKind.HOST_KEY_CHANGED
            with pytest.raises(TimeoutError):  # the next try is 30 s away: nothing in between
                await next_event(events, lambda e: True, 0.5)


async def test_close_during_a_connect_attempt_ends_the_waiting_commands(sshd: Sshd, silent_port: int) -> None:
    ssh = ssh_for(sshd, port=silent_port, connect_timeout_s=5)
    waiting = asyncio.create_task(ssh.run("true", timeout_s=10))
    await wait_until(lambda: ssh.state is SshState.CONNECTING, 5.0, what="the connect attempt under way")
    await ssh.close()
    async with asyncio.timeout(2):
        result = await waiting  # a result, not a CancelledError from the shared attempt
    assert result.problem is not None and "closed" in result.problem.message


async def test_close_stops_streams_and_commands(sshd: Sshd) -> None:
    ssh = ssh_for(sshd)
    events = ssh.stream(TICKS, read_timeout_s=5)
    await next_event(events, is_line, 5)
    await ssh.close()
    assert ssh.state is SshState.CLOSED
    async with asyncio.timeout(5):
        rest = [event async for event in events]
    assert all(event.connected is False for event in rest)  # it ended without reconnecting
    result = await ssh.run("true", timeout_s=5)
    assert result.problem is not None and "closed" in result.problem.message


async def test_stream_splits_lines_across_reads_and_cuts_an_endless_line(
    sshd: Sshd, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lines come whole whatever the reads' boundaries; a last line without a newline still comes; a
    run with no newline is cut at the line cap instead of growing without end."""
    from sparktui.sources import ssh as ssh_module

    monkeypatch.setattr(ssh_module, "STREAM_CHUNK", 7)  # reads end mid-line all the time
    monkeypatch.setattr(ssh_module, "STREAM_MAX_LINE", 50)
    command = "printf 'alpha beta\\r\\ngamma\\n\\ndelta epsilon zeta\\n'; head -c 120 /dev/zero | tr '\\0' x; exit 3"
    async with ssh_for(sshd) as ssh:
        events = ssh.stream(command, read_timeout_s=5)
        lines: list[str] = []
        async with contextlib.aclosing(events):
            while len(lines) < 7:
                event = await next_event(events, lambda e: e.line is not None or e.problem is not None, 5)
                if event.problem is not None:
                    break
                assert event.line is not None
                lines.append(event.line)
    assert lines == ["alpha beta", "gamma", "", "delta epsilon zeta", "x" * 50, "x" * 50, "x" * 20]


async def test_the_connection_uses_aes_gcm_when_the_server_offers_it(sshd: Sshd) -> None:
    """The cheaper cipher for the host sampler's steady stream (see PREFERRED_CIPHERS)."""
    async with ssh_for(sshd) as ssh:
        result = await ssh.run("true", timeout_s=5)
        assert result.exit_status == 0
        conn = ssh._conn  # the live connection, to ask what was negotiated
        assert conn is not None
        assert conn.get_extra_info("send_cipher") == "aes128-gcm@openssh.com"
        assert conn.get_extra_info("recv_cipher") == "aes128-gcm@openssh.com"
