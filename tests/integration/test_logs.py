"""LogStream against a real OpenSSH server whose journalctl and docker are stubs that follow a file."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import psutil
import pytest

from sparktui.model.logbuffer import GAP_RECONNECTED, GAP_RESTARTED, KERNEL_LOG, LogBuffer, LogLine
from sparktui.model.specs import NodeSpec, ServerSpec
from sparktui.sources.logs import LogStream, kernel_log_command, log_command
from sparktui.sources.ssh import NodeSsh
from tests.conftest import DATA
from tests.support.sshd import DOCKER_FAILED_START, FREE_MEMORY_ERROR, JOURNAL_FAILED_START, Sshd
from tests.support.wait import wait_until


def _following(path: Path) -> bool:
    """Whether a process (the stub journalctl's ``tail -F``) has ``path`` open at its end."""
    size = path.stat().st_size if path.exists() else 0
    for process in psutil.process_iter(["name"]):
        if process.info["name"] != "tail":
            continue
        try:
            files = process.open_files()
        except psutil.Error:  # ended meanwhile, or not ours
            continue
        if any(f.path == str(path) and f.position >= size for f in files):
            return True
    return False


UNIT = "vllm.service"
CONTAINER = "vllm-qwen3"


def unit_vllm(unit: str = UNIT) -> ServerSpec:
    return ServerSpec(name="qwen3", port=8000, unit=unit)


def container_vllm(container: str = CONTAINER) -> ServerSpec:
    return ServerSpec(name="qwen3", port=8000, container=container)


@contextlib.asynccontextmanager
async def running(stream: LogStream) -> AsyncIterator[LogStream]:
    task = asyncio.create_task(stream.run())
    try:
        yield stream
    finally:
        task.cancel()
        await asyncio.wait([task])
        assert task.cancelled(), task.exception()


def texts(buffer: LogBuffer) -> list[str]:
    return [line.text for line in buffer]


def test_log_commands_follow_the_unit_or_the_container() -> None:
    assert log_command(unit_vllm("vllm@qwen3.service"), 50) == (
        "journalctl -u vllm@qwen3.service -f -o short-iso -n 50",
        "journal",
    )
    assert log_command(container_vllm(), 50) == (
        f"docker logs -f --timestamps --tail 50 {CONTAINER}",
        "docker",
    )
    assert log_command(ServerSpec(name="w", role="worker", job="tp")) is None
    with pytest.raises(ValueError, match="neither a unit nor a container"):
        LogStream(NodeSsh(NodeSpec(name="spark1", host="127.0.0.1")), ServerSpec(name="w", role="worker", job="tp"))


async def test_journal_lines_reach_the_buffer_with_their_timestamps(fresh_sshd: Sshd) -> None:
    fresh_sshd.append_journal(UNIT, JOURNAL_FAILED_START)
    async with NodeSsh(fresh_sshd.node(), use_agent=False) as ssh:
        stream = LogStream(ssh, unit_vllm())
        async with running(stream):
            await wait_until(lambda: len(stream.buffer) == len(JOURNAL_FAILED_START))
            assert stream.streaming and stream.problem is None
            found = stream.buffer.search("Free memory on device cuda:0")
            assert [line.text for line in found] == [f"ValueError: {FREE_MEMORY_ERROR}"]
            assert found[0].timestamp == datetime(2026, 11, 26, 9, 59, 5, tzinfo=UTC)
            assert all(line.timestamp is not None for line in stream.buffer)
            # it keeps following: a line written now arrives
            fresh_sshd.append_journal(UNIT, ["2026-11-26T10:00:12+0000 spark1 systemd[1]: Started vllm.service."])
            await wait_until(lambda: texts(stream.buffer)[-1] == "Started vllm.service.")
    assert f"journalctl -u {UNIT} -f -o short-iso -n 200" in fresh_sshd.calls()


async def test_docker_lines_reach_the_buffer_with_their_timestamps(fresh_sshd: Sshd) -> None:
    fresh_sshd.set_container(CONTAINER)
    fresh_sshd.append_docker_log(CONTAINER, DOCKER_FAILED_START)
    async with NodeSsh(fresh_sshd.node(), use_agent=False) as ssh:
        stream = LogStream(ssh, container_vllm())
        async with running(stream):
            await wait_until(lambda: len(stream.buffer) == len(DOCKER_FAILED_START))
            last = stream.buffer.tail(1)[0]
            assert last.text == f"(EngineCore_DP0 pid=212) ValueError: {FREE_MEMORY_ERROR}"
            assert last.timestamp == datetime(2026, 11, 26, 9, 59, 5, 4511, tzinfo=UTC)
            fresh_sshd.append_docker_log(CONTAINER, ["2026-11-26T10:00:12.5Z INFO Started server process"])
            await wait_until(lambda: texts(stream.buffer)[-1] == "INFO Started server process")
    assert f"docker logs -f --timestamps --tail 200 {CONTAINER}" in fresh_sshd.calls()


KERNEL_JOURNAL = (DATA / "kernel" / "journalctl-k.txt").read_text().splitlines()[1:]
KERNEL_DMESG = (DATA / "kernel" / "dmesg-iso.txt").read_text().splitlines()


def test_the_kernel_log_command_reads_the_journal_and_falls_back_to_dmesg() -> None:
    command, fmt = kernel_log_command(50)
    assert fmt == "kernel"
    assert command == (
        "journalctl -k -f -o short-iso -n 50 || "
        "{ dmesg --time-format iso | tail -n 50; exec dmesg -W --time-format iso; }"
    )


async def test_the_kernel_journal_reaches_its_own_buffer_and_keeps_following(fresh_sshd: Sshd) -> None:
    fresh_sshd.append_kernel_log(KERNEL_JOURNAL)
    batches: list[str] = []
    async with NodeSsh(fresh_sshd.node(), use_agent=False) as ssh:
        stream = LogStream(ssh, None, on_batch=lambda name, lines: batches.append(name))
        async with running(stream):
            await wait_until(lambda: len(stream.buffer) == len(KERNEL_JOURNAL))
            assert stream.instance == KERNEL_LOG and set(batches) == {KERNEL_LOG}
            (oom, _) = stream.buffer.search("NV_ERR_NO_MEMORY")
            assert oom.text.startswith("NVRM: nvCheckOkFailedNoLog: Check failed: Out of memory")
            assert oom.timestamp == datetime(2026, 5, 30, 8, 33, 9, tzinfo=UTC)
            fresh_sshd.append_kernel_log(["2026-05-30T10:06:00+0000 spark1 kernel: NVRM: Xid (PCI:000f:01:00): 43, x"])
            await wait_until(lambda: texts(stream.buffer)[-1] == "NVRM: Xid (PCI:000f:01:00): 43, x")
    assert "journalctl -k -f -o short-iso -n 200" in fresh_sshd.calls()
    assert not any(call.startswith("dmesg") for call in fresh_sshd.calls())


async def test_without_a_journal_the_kernel_log_comes_from_dmesg_then_its_new_lines(fresh_sshd: Sshd) -> None:
    fresh_sshd.remove_journal()
    fresh_sshd.append_kernel_log(KERNEL_DMESG, journal=False)
    async with NodeSsh(fresh_sshd.node(), use_agent=False) as ssh:
        stream = LogStream(ssh, None)
        async with running(stream):
            # journalctl's complaint stays in the view: it says why the lines are dmesg's.
            await wait_until(lambda: len(stream.buffer) == 1 + len(KERNEL_DMESG))
            assert texts(stream.buffer)[0] == "No journal files were found."
            assert texts(stream.buffer)[-1] == "thermal thermal_zone0: critical temperature reached, shutting down"
            assert all(line.timestamp is not None for line in stream.buffer.tail(len(KERNEL_DMESG)))
            await wait_until(lambda: "dmesg -W --time-format iso" in fresh_sshd.calls())
            dmesg = fresh_sshd.state_dir / "dmesg.log"
            await wait_until(lambda: _following(dmesg), 10.0, what=f"a tail -F following {dmesg}")
            fresh_sshd.append_kernel_log(
                ["2026-05-30T10:06:00,000001+00:00 mlx5_core 0000:01:00.0: Link up"], journal=False
            )
            await wait_until(lambda: texts(stream.buffer)[-1] == "mlx5_core 0000:01:00.0: Link up")
    assert len(stream.buffer) == 1 + len(KERNEL_DMESG) + 1  # the ring buffer was read once, then only what is new


async def test_a_burst_arrives_in_a_few_bounded_batches(fresh_sshd: Sshd) -> None:
    batches: list[tuple[str, list[LogLine]]] = []
    fresh_sshd.append_journal(UNIT, [])  # an empty journal: the stub prints "-- No entries --", follows
    async with NodeSsh(fresh_sshd.node(), use_agent=False) as ssh:
        stream = LogStream(ssh, unit_vllm(), on_batch=lambda name, lines: batches.append((name, lines)))
        async with running(stream):
            await wait_until(lambda: len(stream.buffer) == 1)
            # The burst must be followed, not tailed: wait until the follower has the file open at its end.
            journal = fresh_sshd.state_dir / "journal" / f"{UNIT}.log"
            await wait_until(lambda: _following(journal), 10.0, what=f"a tail -F following {journal}")
            burst = [f"2026-11-26T10:00:{i // 100:02d}+0000 spark1 vllm[1]: request {i}" for i in range(1000)]
            fresh_sshd.append_journal(UNIT, burst)
            await wait_until(lambda: len(stream.buffer) == 1001)
    delivered = [line for _, lines in batches for line in lines]
    assert [line.text for line in delivered] == ["-- No entries --"] + [f"request {i}" for i in range(1000)]
    assert all(name == "qwen3" for name, _ in batches)
    assert all(len(lines) <= 200 for _, lines in batches)
    assert len(batches) <= 20


async def test_reconnect_marks_a_gap_and_does_not_repeat_lines(fresh_sshd: Sshd) -> None:
    fresh_sshd.append_journal(UNIT, JOURNAL_FAILED_START)
    async with NodeSsh(fresh_sshd.node(), use_agent=False) as ssh:
        stream = LogStream(ssh, unit_vllm())
        async with running(stream):
            await wait_until(lambda: len(stream.buffer) == len(JOURNAL_FAILED_START))
            assert ssh.local_port is not None
            fresh_sshd.kill_session(ssh.local_port)
            missed = "2026-11-26T10:00:12+0000 spark1 systemd[1]: Started vllm.service."
            fresh_sshd.append_journal(UNIT, [missed])  # written while the stream was down
            await wait_until(lambda: stream.restarts == 1 and texts(stream.buffer)[-1] == "Started vllm.service.")
            assert stream.streaming
            fresh_sshd.append_journal(UNIT, ["2026-11-26T10:00:13+0000 spark1 vllm[9]: INFO ready"])
            await wait_until(lambda: texts(stream.buffer)[-1] == "INFO ready")
    lines = list(stream.buffer)
    expected_old = [text for _, text in (line.split(": ", 1) for line in JOURNAL_FAILED_START)]
    assert [line.text for line in lines] == [
        *expected_old,
        GAP_RECONNECTED,
        "Started vllm.service.",
        "INFO ready",
    ]
    assert [line.gap for line in lines].count(True) == 1


async def test_a_stopped_container_log_is_read_again_with_a_restart_marker(fresh_sshd: Sshd) -> None:
    fresh_sshd.set_container(CONTAINER, running=False)  # docker logs -f ends at once
    fresh_sshd.append_docker_log(CONTAINER, DOCKER_FAILED_START)
    async with NodeSsh(fresh_sshd.node(), use_agent=False) as ssh:
        stream = LogStream(ssh, container_vllm())
        async with running(stream):
            await wait_until(lambda: stream.restarts >= 1)
            fresh_sshd.set_container(CONTAINER, running=True)
            fresh_sshd.append_docker_log(CONTAINER, ["2026-11-26T10:00:12.5Z INFO Started server process"])
            await wait_until(lambda: texts(stream.buffer)[-1] == "INFO Started server process")
    body = [line for line in stream.buffer if not line.gap]
    assert [line.text for line in body][: len(DOCKER_FAILED_START)] == [
        line.split(" ", 1)[1] for line in DOCKER_FAILED_START
    ]
    assert len(body) == len(DOCKER_FAILED_START) + 1  # replayed lines were not added twice
    assert [line.text for line in stream.buffer if line.gap] == [GAP_RESTARTED]  # once, not per retry
    assert [line.gap for line in stream.buffer][-2:] == [True, False]  # right before the new line


async def test_a_small_buffer_keeps_the_newest_lines_and_counts_the_dropped(fresh_sshd: Sshd) -> None:
    buffer = LogBuffer(max_lines=50)
    fresh_sshd.append_journal(UNIT, [f"2026-11-26T10:00:00+0000 spark1 vllm[1]: line {i}" for i in range(300)])
    async with NodeSsh(fresh_sshd.node(), use_agent=False) as ssh:
        stream = LogStream(ssh, unit_vllm(), buffer, tail_lines=300)
        async with running(stream):
            await wait_until(lambda: buffer.next_seq == 300)
    assert texts(buffer) == [f"line {i}" for i in range(250, 300)]
    assert buffer.dropped == 250
