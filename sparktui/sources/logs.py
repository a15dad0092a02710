"""A vLLM instance's log, streamed over SSH into a ``LogBuffer``.

``journalctl -u UNIT -f -o short-iso -n N`` for a systemd unit, ``docker logs -f --timestamps --tail N
NAME`` for a container, run through ``NodeSsh.stream`` (which reconnects by itself). Lines are parsed,
grouped in batches by time and count (a burst of thousands of lines is a handful of updates, not
thousands), appended to the buffer and handed to ``on_batch``. After a reconnect the command prints
its last N lines again: the ones already held are dropped (``ReplayFilter``) and a gap marker notes
that lines may be missing there.

The node's kernel log comes the same way, one stream per node: ``journalctl -k -f -o short-iso -n N``,
or where there is no journal (no journalctl, or it may not be read) the last N lines of ``dmesg
--time-format iso`` and then ``dmesg -W`` for the new ones. Its lines are held under the name
``KERNEL_LOG`` beside the instances' logs.
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
from collections.abc import Callable
from datetime import UTC, datetime

from sparktui.model.logbuffer import (
    GAP_RECONNECTED,
    GAP_RESTARTED,
    KERNEL_LOG,
    LogBuffer,
    LogFormat,
    LogLine,
    ReplayFilter,
    parse_log_line,
)
from sparktui.model.specs import NodeSpec, ServerSpec
from sparktui.sources.ssh import NodeSsh, SshProblem, SshProblemKind, StreamEvent

DEFAULT_TAIL_LINES = 200
BATCH_INTERVAL_S = 0.1
BATCH_MAX_LINES = 200

OnBatch = Callable[[str, list[LogLine]], None]


def log_command(vllm: ServerSpec, tail_lines: int = DEFAULT_TAIL_LINES) -> tuple[str, LogFormat] | None:
    """The command that follows the instance's log and the format of its lines; None when the instance
    has neither a unit nor a container. The names were validated by the spec and are quoted anyway."""
    if vllm.unit is not None:
        return f"journalctl -u {shlex.quote(vllm.unit)} -f -o short-iso -n {int(tail_lines)}", "journal"
    if vllm.container is not None:
        return (
            f"docker logs -f --timestamps --tail {int(tail_lines)} {shlex.quote(vllm.container)}",
            "docker",
        )
    return None


def kernel_log_command(tail_lines: int = DEFAULT_TAIL_LINES) -> tuple[str, LogFormat]:
    """The command that follows the node's kernel log: the journal's, else dmesg's (which has no
    ``-n``: its last lines, then ``-W``, only what is new)."""
    count = int(tail_lines)
    return (
        f"journalctl -k -f -o short-iso -n {count} || "
        f"{{ dmesg --time-format iso | tail -n {count}; exec dmesg -W --time-format iso; }}",
        "kernel",
    )


def followed_logs(node: NodeSpec) -> list[ServerSpec | None]:
    """The logs sparktui follows on a node, as ``LogStream`` takes them: each instance that has a unit
    or a container, then None, the node's kernel log."""
    return [*(vllm for vllm in node.vllm if vllm.unit is not None or vllm.container is not None), None]


class LogStream:
    """Follows one vLLM instance's log (``vllm``), or with ``vllm`` None the node's kernel log;
    ``run()`` is a task that goes on until it is cancelled."""

    def __init__(
        self,
        ssh: NodeSsh,
        vllm: ServerSpec | None,
        buffer: LogBuffer | None = None,
        *,
        tail_lines: int = DEFAULT_TAIL_LINES,
        batch_interval_s: float = BATCH_INTERVAL_S,
        batch_max_lines: int = BATCH_MAX_LINES,
        read_timeout_s: float | None = None,
        on_batch: OnBatch | None = None,
    ) -> None:
        found = log_command(vllm, tail_lines) if vllm is not None else kernel_log_command(tail_lines)
        if found is None:
            assert vllm is not None
            raise ValueError(f"vLLM instance {vllm.name!r} has neither a unit nor a container to read logs from")
        self.command, self.format = found
        self.instance = vllm.name if vllm is not None else KERNEL_LOG
        self.buffer = buffer if buffer is not None else LogBuffer()
        self.problem: SshProblem | None = None  # why the stream is down now, None while it streams
        self.streaming = False
        self.restarts = 0
        self._ssh = ssh
        self._batch_interval_s = batch_interval_s
        self._batch_max_lines = batch_max_lines
        # None by default: a quiet log is normal; a dead link is caught by the connection's keepalives.
        self._read_timeout_s = read_timeout_s
        self._on_batch = on_batch
        self._replay = ReplayFilter(tail_lines)
        self._last_problem: SshProblem | None = None
        self._was_connected = False
        self._marker_due: str | None = None

    async def run(self) -> None:
        queue: asyncio.Queue[StreamEvent] = asyncio.Queue(maxsize=self._batch_max_lines * 4)
        async with asyncio.TaskGroup() as group:
            group.create_task(self._read(queue), name=f"log-read-{self.instance}")
            await self._batches(queue)

    async def _read(self, queue: asyncio.Queue[StreamEvent]) -> None:
        # A full queue holds the reader back, and with it the SSH channel's flow control.
        events = self._ssh.stream(self.command, read_timeout_s=self._read_timeout_s)
        async with contextlib.aclosing(events):
            async for event in events:
                await queue.put(event)

    async def _batches(self, queue: asyncio.Queue[StreamEvent]) -> None:
        loop = asyncio.get_running_loop()
        while True:
            event = await queue.get()
            deadline = loop.time() + self._batch_interval_s
            pending: list[tuple[datetime | None, str]] = []
            stored: list[LogLine] = []
            while True:
                self._take(event, pending, stored)
                if len(pending) >= self._batch_max_lines:
                    break
                try:
                    async with asyncio.timeout_at(deadline):
                        event = await queue.get()
                except TimeoutError:
                    break
            stored.extend(self.buffer.append_batch(pending))
            if stored and self._on_batch is not None:
                self._on_batch(self.instance, stored)

    def _take(self, event: StreamEvent, pending: list[tuple[datetime | None, str]], stored: list[LogLine]) -> None:
        if event.line is not None:
            timestamp, text = parse_log_line(self.format, event.line)
            if not self._replay.accept(timestamp, text):
                return
            if self._marker_due is not None:
                self._mark(self._marker_due, pending, stored)
            pending.append((timestamp, text))
        elif event.connected:
            if self._was_connected:
                self.restarts += 1
                self._replay.restart()
                if self._last_problem is not None and self._last_problem.kind is SshProblemKind.EXITED:
                    # The command ended by itself (a stopped container): mark the restart only when
                    # new lines come, or a stopped container would add a marker at every retry.
                    self._marker_due = self._marker_due or GAP_RESTARTED
                else:
                    self._mark(GAP_RECONNECTED, pending, stored)
            self._was_connected = True
            self._last_problem = None
            self.problem = None
            self.streaming = True
        elif event.problem is not None:
            self._last_problem = event.problem
            self.problem = event.problem
            self.streaming = False

    def _mark(self, text: str, pending: list[tuple[datetime | None, str]], stored: list[LogLine]) -> None:
        # Keep the order: the lines read before, then the marker, then the new lines.
        stored.extend(self.buffer.append_batch(pending))
        pending.clear()
        stored.append(self.buffer.mark_gap(text, datetime.now(UTC)))
        self._marker_due = None
