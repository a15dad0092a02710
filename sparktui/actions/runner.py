"""Runs recovery plans: commands over SSH (or locally for a ``local`` node), readiness and warmup over
HTTP, one action at a time per node, with timeouts, live progress and an audit log.

``ActionRunner.run(plan)`` never raises (except cancellation): whatever happens ends in an
``ActionResult`` whose ``message`` is one line. The runner itself refuses every action when it is
constructed ``read_only`` (the dashboard's ``--read-only`` and kiosk modes, whatever asks), when one of
the plan's nodes is busy with another action (refused, not queued), and when the audit log cannot be
written: every action (and every fix) writes and fsyncs its ``started`` record before its first command
is sent, here, whatever asked for it (the CLI, the dashboard, a fix), and is refused when that fails.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import json
import os
import signal
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from urllib.parse import urlsplit

from sparktui.actions.audit import AuditLog
from sparktui.actions.plans import ActionPlan, BenchPlan, FixPlan, Refusal, Step, StepKind, Warmup
from sparktui.actions.registry import ActionKind
from sparktui.model.bench import BenchRun
from sparktui.model.commands import KILLED_RE, NOT_KILLED, NOT_KILLED_RE
from sparktui.model.memory import GIB, HostMemory, parse_meminfo
from sparktui.model.safe_text import safe_lines
from sparktui.model.specs import FleetSpec, NodeSpec
from sparktui.model.units import fmt_gib, fmt_seconds
from sparktui.sources._httpx import httpx
from sparktui.sources.http import fetch, make_client
from sparktui.sources.ssh import (
    MAX_COMMAND_OUTPUT,
    REMOTE_TIMED_OUT,
    STREAM_CHUNK,
    NodeSsh,
    SshProblemKind,
    read_tail,
)

ProgressCallback = Callable[[str], None]
# A bench as the entry point runs and shows it: the run (finished or stopped), or why it could not start.
BenchWork = Callable[[], Awaitable[BenchRun | str]]
MemoryReader = Callable[[str], HostMemory | None]  # node name -> its latest host memory, if known
Clock = Callable[[], float]

TAIL_CHARS = 2000
MEMINFO_COMMAND = "cat /proc/meminfo"
_PASSWORD_SIGNS = ("a password is required", "a terminal is required", "no tty present")


class Outcome(StrEnum):
    OK = "ok"
    FAILED = "failed"
    REFUSED = "refused"


@dataclass(frozen=True, slots=True)
class StepResult:
    """One step as it ran: the exact command, how it ended, the tail of its output, how long it took."""

    step: Step
    ok: bool
    message: str  # one line: "exit status 0", "timed out: ...", "sudo on spark1 needs a password ..."
    exit_status: int | None = None
    stdout_tail: str = ""
    stderr_tail: str = ""
    duration_s: float = 0.0
    timed_out: bool = False


@dataclass(frozen=True, slots=True)
class WarmupResult:
    model: str
    ttfts_s: tuple[float, ...]  # each request's time to first token, in order
    target_s: float

    @property
    def reached(self) -> bool:
        return bool(self.ttfts_s) and self.ttfts_s[-1] < self.target_s

    @property
    def first_s(self) -> float | None:
        return self.ttfts_s[0] if self.ttfts_s else None

    @property
    def last_s(self) -> float | None:
        return self.ttfts_s[-1] if self.ttfts_s else None


@dataclass(frozen=True, slots=True)
class ActionResult:
    """How an action ended. ``plan`` is None when it was refused before a plan existed, and for a fix,
    whose actions' results are its ``parts`` (the last one the action that failed, if one did)."""

    kind: ActionKind
    node: str
    title: str
    outcome: Outcome
    message: str  # one line, for the notification
    plan: ActionPlan | None = None
    steps: tuple[StepResult, ...] = ()
    duration_s: float = 0.0
    warmup: WarmupResult | None = None
    ttft_before_s: float | None = None
    memory_before: HostMemory | None = None  # drop caches: MemAvailable before and after
    memory_after: HostMemory | None = None
    parts: tuple[ActionResult, ...] = ()

    @property
    def ok(self) -> bool:
        return self.outcome is Outcome.OK

    @property
    def freed_bytes(self) -> float | None:
        """Drop caches: how much MemAvailable grew (None when either side is unknown)."""
        before = self.memory_before.mem_available if self.memory_before is not None else None
        after = self.memory_after.mem_available if self.memory_after is not None else None
        return None if before is None or after is None else after - before

    def lines(self) -> tuple[str, ...]:
        """The report: the one-line message, then each step with its exit status and output tail (a fix:
        each of its actions' reports)."""
        out = [self.message]
        if self.parts:
            return (*out, *(f"  {line}" for part in self.parts for line in part.lines()))
        for number, step in enumerate(self.steps, 1):
            out.append(f"  {number}. {step.step.command}")
            out.append(f"     {step.message} ({fmt_seconds(step.duration_s)})")
            out.extend(f"     | {line}" for line in _last_lines(step.stdout_tail))
            out.extend(f"     ! {line}" for line in _last_lines(step.stderr_tail))
        return tuple(out)


@dataclass(frozen=True, slots=True)
class _Ran:
    """What running one command gave, over SSH or locally."""

    exit_status: int | None
    stdout: str
    stderr: str
    problem: str | None = None
    timed_out: bool = False


class ActionRunner:
    """Runs ``ActionPlan``s; one action at a time per node.

    ``ssh_for`` gives the node's shared ``NodeSsh`` (the dashboard's); without it the runner opens its
    own connections and ``close()`` closes them. ``client`` is the HTTP client for readiness and warmup
    (one of the runner's own when None). ``memory`` returns a node's latest host memory for the drop
    caches ledger; without it the runner reads ``/proc/meminfo`` itself before and after. ``clock``
    times the steps and the TTFT (the demo's step mode passes its simulated clock).
    """

    def __init__(
        self,
        fleet: FleetSpec,
        *,
        read_only: bool = False,
        audit: AuditLog | None = None,
        ssh_for: Callable[[NodeSpec], NodeSsh] | None = None,
        client: httpx.AsyncClient | None = None,
        memory: MemoryReader | None = None,
        clock: Clock = time.monotonic,
        memory_settle_s: float = 5.0,
    ) -> None:
        self.fleet = fleet
        self._read_only = read_only
        self.audit = audit if audit is not None else AuditLog()
        self._ssh_for = ssh_for
        self._own_ssh: dict[str, NodeSsh] = {}
        self._client = client
        self._memory = memory
        self.clock = clock
        self.memory_settle_s = memory_settle_s
        self._busy: dict[str, str] = {}  # node -> title of the action running on it

    @property
    def read_only(self) -> bool:
        return self._read_only

    def busy(self, node: str) -> str | None:
        """The title of the action running on ``node``, or None when it is free."""
        return self._busy.get(node)

    def refusal(self, plan: ActionPlan | FixPlan | BenchPlan | Refusal) -> str | None:
        """Why ``run(plan)`` would be refused right now (read-only, a busy node, a refused plan), or None.
        The dashboard can ask before it shows the confirmation; ``run`` checks again."""
        if self._read_only:
            return f"read-only: {plan.kind.value} refused (sparktui runs with --read-only or --kiosk)"
        if isinstance(plan, Refusal):
            return plan.reason
        for node in plan.nodes:
            running = self._busy.get(node)
            if running is not None:
                return (
                    f"{node} is busy: {running} is running; one action at a time per node, "
                    "wait for it to finish (not queued)"
                )
        return None

    async def run(
        self, plan: ActionPlan | FixPlan | Refusal, on_progress: ProgressCallback | None = None
    ) -> ActionResult:
        """Run the plan (after the operator confirmed it); returns how it ended, never raises. A fix runs
        its actions in order, each audited as on its own, and stops at the first that fails."""
        progress = on_progress or (lambda _message: None)
        refused = self.refusal(plan)
        if refused is not None:
            return await self._refused(plan, refused, progress)
        assert not isinstance(plan, Refusal)
        for node in plan.nodes:  # no await since the check above: nothing can take the nodes between
            self._busy[node] = plan.title
        try:
            if isinstance(plan, FixPlan):
                return await self._run_fix(plan, progress)
            return await self._run(plan, progress)
        finally:
            for node in plan.nodes:
                self._busy.pop(node, None)

    async def run_bench(
        self, plan: BenchPlan, work: BenchWork, on_progress: ProgressCallback | None = None
    ) -> ActionResult:
        """A bench, audited like an action: refused as one (read-only, a busy node), its ``started``
        record on disk before ``work`` sends anything, its node locked while it runs (no restart under
        a bench, no bench under a restart), and an ``action`` record with how it ended."""
        progress = on_progress or (lambda _message: None)
        refused = self.refusal(plan)
        if refused is not None:
            return await self._refused(plan, refused, progress)
        action_id = uuid.uuid4().hex[:12]
        fields: dict[str, object] = {
            "action_id": action_id,
            "action": plan.kind.value,
            "node": plan.node,
            "target": [t.what for t in plan.targets],
            "command": list(plan.commands),
        }
        self._busy[plan.node] = plan.title
        try:
            problem = await asyncio.to_thread(self.audit.started, **fields)
            if problem is not None:
                return await self._refused(plan, problem, progress, audit=False)
            started = self.clock()
            progress(f"{plan.title}: started")
            try:
                ran = await work()
            except asyncio.CancelledError:
                with contextlib.suppress(OSError):  # no await here: the task is being cancelled
                    self.audit.write(
                        "action",
                        **fields,
                        duration_s=round(self.clock() - started, 3),
                        result="cancelled",
                        message=f"{plan.title}: cancelled (sparktui stopped)",
                    )
                raise
        finally:
            self._busy.pop(plan.node, None)
        duration = self.clock() - started
        if isinstance(ran, str):
            outcome, message = Outcome.FAILED, f"{plan.title}: not run: {ran}"
        else:
            outcome = Outcome.OK if ran.complete else Outcome.FAILED
            done = f"{len(ran.cases)} of {len(plan.cases)} cases"
            message = f"{plan.title}: " + (
                f"done in {fmt_seconds(duration)} ({done})" if ran.complete else f"stopped ({done}: {ran.problem})"
            )
        await self._audit(
            progress,
            "action",
            **fields,
            duration_s=round(duration, 3),
            result=outcome.value,
            message=message,
        )
        progress(message)
        return ActionResult(plan.kind, plan.node, plan.title, outcome, message, duration_s=duration)

    async def close(self) -> None:
        """Close the SSH connections the runner opened itself."""
        owned, self._own_ssh = self._own_ssh, {}
        await asyncio.gather(*(ssh.close() for ssh in owned.values()), return_exceptions=True)

    # --- running -----------------------------------------------------------------------------------------

    async def _run_fix(self, fix: FixPlan, progress: ProgressCallback) -> ActionResult:
        """The fix's actions one after another (the nodes stay locked between them); the first that
        fails ends it, and the rest are not run."""
        fix_id = uuid.uuid4().hex[:12]
        problem = await asyncio.to_thread(
            self.audit.started,
            fix_id=fix_id,
            action=ActionKind.FIX.value,
            node=fix.node,
            finding=fix.finding,
            actions=[a.value for a in fix.actions],
            target=[t.what for t in fix.targets],
            command=list(fix.commands),
        )
        if problem is not None:
            return await self._refused(fix, problem, progress, audit=False)
        started = self.clock()
        count = len(fix.plans)
        progress(f"{fix.title}: started ({fix.sequence})")
        parts: list[ActionResult] = []
        failure: str | None = None
        for number, plan in enumerate(fix.plans, 1):
            progress(f"step {number}/{count}: {plan.title}")
            part = await self._run(plan, _prefixed(progress, f"step {number}/{count}: "), {"fix_id": fix_id})
            parts.append(part)
            if not part.ok:
                rest = [p.title for p in fix.plans[number:]]
                failure = f"stopped at step {number}/{count}: {part.message}" + (
                    f"; not run: {', '.join(rest)}" if rest else ""
                )
                break
        duration = self.clock() - started
        message = f"{fix.title}: " + (failure or f"ok in {fmt_seconds(duration)} ({fix.sequence})")
        result = ActionResult(
            ActionKind.FIX,
            fix.node,
            fix.title,
            Outcome.FAILED if failure is not None else Outcome.OK,
            message,
            steps=tuple(step for part in parts for step in part.steps),
            duration_s=duration,
            warmup=next((p.warmup for p in reversed(parts) if p.warmup is not None), None),
            parts=tuple(parts),
        )
        await self._audit(
            progress,
            "fix",
            fix_id=fix_id,
            action=ActionKind.FIX.value,
            node=fix.node,
            finding=fix.finding,
            actions=[a.value for a in fix.actions],
            command=list(fix.commands),
            duration_s=round(duration, 3),
            result=result.outcome.value,
            message=message,
        )
        progress(message)
        return result

    async def _run(
        self, plan: ActionPlan, progress: ProgressCallback, extra: dict[str, object] | None = None
    ) -> ActionResult:
        """One action; ``extra`` fields (a fix's id) go on each of its audit lines."""
        extra = extra or {}
        action_id = uuid.uuid4().hex[:12]
        # On disk before anything is sent to the node (drop caches reads /proc/meminfo first), or not run.
        problem = await asyncio.to_thread(
            self.audit.started,
            action_id=action_id,
            action=plan.kind.value,
            node=plan.node,
            target=[t.what for t in plan.targets],
            command=list(plan.commands),
            **({"processes": [p.record() for p in plan.processes]} if plan.processes else {}),
            **extra,
        )
        if problem is not None:
            return await self._refused(plan, problem, progress, audit=False)
        started = self.clock()
        progress(f"{plan.title}: started")
        memory_before = await self._read_memory(plan.node) if plan.kind is ActionKind.DROP_CACHES else None
        results: list[StepResult] = []
        warmup: WarmupResult | None = None
        failure: str | None = None
        async with contextlib.AsyncExitStack() as stack:
            client = self._client
            if client is None and any(s.kind is not StepKind.COMMAND for s in plan.steps):
                client = await stack.enter_async_context(make_client(ca_file=self.fleet.ca_file))
            current: tuple[int, Step, float] | None = None
            try:
                async with asyncio.timeout(plan.timeout_s):
                    for number, step in enumerate(plan.steps, 1):
                        progress(f"[{number}/{len(plan.steps)}] {step.what}")
                        current = (number, step, self.clock())
                        done, found = await self._step(step, client, progress)
                        current = None
                        warmup = found or warmup
                        results.append(done)
                        await self._audit_step(plan, action_id, done, progress, extra)
                        progress(f"[{number}/{len(plan.steps)}] {done.message} ({fmt_seconds(done.duration_s)})")
                        if not done.ok:
                            failure = f"failed at step {number}/{len(plan.steps)} ({step.what}): {done.message}"
                            break
            except TimeoutError:
                failure = f"did not finish within {plan.timeout_s:g} s overall"
                if current is not None:
                    number, step, step_started = current
                    cut = StepResult(
                        step,
                        ok=False,
                        message=f"timed out: the action's overall timeout ({plan.timeout_s:g} s) ended it",
                        duration_s=self.clock() - step_started,
                        timed_out=True,
                    )
                    results.append(cut)
                    await self._audit_step(plan, action_id, cut, progress, extra)
                    failure = f"failed at step {number}/{len(plan.steps)} ({step.what}): {failure}"
            except asyncio.CancelledError:
                with contextlib.suppress(OSError):  # no await here: the task is being cancelled
                    self.audit.write(
                        "action",
                        action_id=action_id,
                        action=plan.kind.value,
                        node=plan.node,
                        command=list(plan.commands),
                        duration_s=round(self.clock() - started, 3),
                        result="cancelled",
                        message=f"{plan.title}: cancelled (sparktui stopped or the action was cancelled)",
                        **extra,
                    )
                raise
        memory_after = None
        if plan.kind is ActionKind.DROP_CACHES and failure is None:
            memory_after = await self._read_memory_after(plan.node, memory_before)
        duration = self.clock() - started
        result = ActionResult(
            plan.kind,
            plan.node,
            plan.title,
            Outcome.FAILED if failure is not None else Outcome.OK,
            "",
            plan=plan,
            steps=tuple(results),
            duration_s=duration,
            warmup=warmup,
            ttft_before_s=plan.ttft_before_s,
            memory_before=memory_before,
            memory_after=memory_after,
        )
        result = replace(result, message=_summary(result, failure))
        await self._audit(
            progress,
            "action",
            action_id=action_id,
            action=plan.kind.value,
            node=plan.node,
            target=[t.what for t in plan.targets],
            command=list(plan.commands),
            duration_s=round(duration, 3),
            result=result.outcome.value,
            message=result.message,
            **extra,
        )
        progress(result.message)
        return result

    async def _step(
        self, step: Step, client: httpx.AsyncClient | None, progress: ProgressCallback
    ) -> tuple[StepResult, WarmupResult | None]:
        if step.kind is StepKind.COMMAND:
            return await self._command_step(step), None
        assert client is not None
        if step.kind is StepKind.WAIT_HEALTHY:
            return await self._health_step(step, client, progress), None
        return await self._warmup_step(step, client, progress)

    async def _command_step(self, step: Step) -> StepResult:
        started = self.clock()
        ran = await self._execute(step.node, step.command, step.timeout_s)
        duration = self.clock() - started
        stdout, stderr = _tail(ran.stdout), _tail(ran.stderr)
        if ran.timed_out:
            message = f"timed out: `{step.command}` on {step.node} did not finish within {step.timeout_s:g} s"
        elif ran.problem is not None:
            message = ran.problem
        elif ran.exit_status == 0:
            message = "exit status 0"
        elif step.needs_root and any(sign in ran.stderr for sign in _PASSWORD_SIGNS):
            command = step.sudo or step.command.removeprefix("sudo -n ")
            message = (
                f"sudo on {step.node} needs a password for '{command}': allow it without a password "
                "(see docs/actions.md)"
            )
        else:
            last = _last_lines(ran.stderr, 1)
            message = f"exit status {ran.exit_status}" + (f": {last[0]}" if last else "")
        return StepResult(
            step,
            ok=ran.problem is None and not ran.timed_out and ran.exit_status == 0,
            message=message,
            exit_status=ran.exit_status,
            stdout_tail=stdout,
            stderr_tail=stderr,
            duration_s=duration,
            timed_out=ran.timed_out,
        )

    async def _health_step(self, step: Step, client: httpx.AsyncClient, progress: ProgressCallback) -> StepResult:
        assert step.url is not None
        started = self.clock()
        wall = time.monotonic()
        last_said = ""
        said_at = -1e9
        interval = max(0.05, step.poll_s)
        while True:
            remaining = step.timeout_s - (time.monotonic() - wall)
            if remaining <= 0:
                return StepResult(
                    step,
                    ok=False,
                    message=f"timed out: {step.url} did not answer 200 within {step.timeout_s:g} s "
                    f"(last: {last_said or 'no answer'})",
                    duration_s=self.clock() - started,
                    timed_out=True,
                )
            answer = await fetch(client, step.url, timeout_s=max(0.1, min(5.0, remaining)), max_bytes=64 * 1024)
            if answer.ok and answer.status == 200:
                return StepResult(
                    step, ok=True, message=f"{urlsplit(step.url).path} answered 200", duration_s=self.clock() - started
                )
            said = answer.problem()
            now = time.monotonic()
            if said != last_said or now - said_at >= 10.0:
                progress(f"    waiting for {step.url}: {said} ({now - wall:.0f} s)")
                last_said, said_at = said, now
            await asyncio.sleep(min(interval, max(0.0, remaining)))

    async def _warmup_step(
        self, step: Step, client: httpx.AsyncClient, progress: ProgressCallback
    ) -> tuple[StepResult, WarmupResult | None]:
        warmup = step.warmup
        assert warmup is not None
        started = self.clock()

        def failed(message: str, result: WarmupResult | None = None) -> tuple[StepResult, WarmupResult | None]:
            return StepResult(step, ok=False, message=message, duration_s=self.clock() - started), result

        model = warmup.model
        if model is None:
            found = await _model_name(client, warmup)
            if isinstance(found, _Problem):
                return failed(found.message)
            model = found
        ttfts: list[float] = []
        for attempt in range(1, warmup.max_requests + 1):
            ttft = await self._one_request(client, warmup, model)
            if isinstance(ttft, _Problem):
                result = WarmupResult(model, tuple(ttfts), warmup.ttft_target_s) if ttfts else None
                return failed(f"warmup request {attempt}: {ttft.message}", result)
            ttfts.append(ttft)
            progress(f"    warmup {attempt}/{warmup.max_requests}: TTFT {fmt_seconds(ttft)}")
            if ttft < warmup.ttft_target_s:
                break
        result = WarmupResult(model, tuple(ttfts), warmup.ttft_target_s)
        shown = " → ".join(fmt_seconds(t) for t in ttfts)
        if result.reached:
            message = f"TTFT {shown} (under {fmt_seconds(warmup.ttft_target_s)})"
        else:
            message = f"TTFT {shown}: still not under {fmt_seconds(warmup.ttft_target_s)} after {len(ttfts)} requests"
        return StepResult(step, ok=True, message=message, duration_s=self.clock() - started), result

    async def _one_request(self, client: httpx.AsyncClient, warmup: Warmup, model: str) -> float | _Problem:
        """One streaming chat completion; its TTFT (to the first chunk that carries text)."""
        timeout = warmup.request_timeout_s
        headers = _auth(warmup)
        sent = self.clock()
        first: float | None = None
        try:
            async with asyncio.timeout(timeout):
                async with client.stream(
                    "POST",
                    warmup.endpoint,
                    json=warmup.body(model),
                    headers=headers,
                    timeout=httpx.Timeout(timeout),
                ) as response:
                    if response.status_code != 200:
                        body = (await response.aread())[:300].decode("utf-8", errors="replace")
                        first_line = body.strip().splitlines()[0] if body.strip() else ""
                        return _Problem(f"HTTP {response.status_code} from {warmup.endpoint} {first_line}".strip())
                    chunks = 0
                    async for line in response.aiter_lines():
                        if not line.startswith("data:"):
                            continue
                        data = line[5:].strip()
                        if data == "[DONE]":
                            break
                        chunks += 1
                        if first is None and _carries_token(data):
                            first = self.clock() - sent
                    if first is None:
                        return _Problem("the answer streamed no token" if chunks else "the answer was not a stream")
        except TimeoutError:
            return _Problem(f"no complete answer within {timeout:g} s")
        except httpx.HTTPError as exc:
            return _Problem(f"{warmup.endpoint}: {_one_line(exc)}")
        return first

    # --- commands: over SSH, or locally -------------------------------------------------------------------

    async def _execute(self, node_name: str, command: str, timeout_s: float) -> _Ran:
        node = self.fleet.node(node_name)
        if node is None:
            return _Ran(None, "", "", problem=f"no node named {node_name!r} in the config")
        if node.local:
            return await _run_local(command, timeout_s)
        # Under the node's own ``timeout``: a command given up on here (a restart that hangs in
        # ExecStop) is stopped there too, not left running beside the next attempt.
        result = await self._ssh(node).run_bounded(command, bound_s=timeout_s)
        if result.exit_status in REMOTE_TIMED_OUT:
            return _Ran(None, result.stdout, result.stderr, timed_out=True)
        if result.problem is not None:
            timed_out = result.problem.kind is SshProblemKind.TIMEOUT
            return _Ran(None, result.stdout, result.stderr, problem=result.problem.message, timed_out=timed_out)
        if result.exit_status is None:
            signal_name = result.exit_signal or "a signal"
            return _Ran(None, result.stdout, result.stderr, problem=f"`{command}` was killed by {signal_name}")
        return _Ran(result.exit_status, result.stdout, result.stderr)

    def _ssh(self, node: NodeSpec) -> NodeSsh:
        if self._ssh_for is not None:
            return self._ssh_for(node)
        found = self._own_ssh.get(node.name)
        if found is None:
            found = self._own_ssh[node.name] = NodeSsh(node)
        return found

    # --- memory (drop caches) -------------------------------------------------------------------------

    async def _read_memory(self, node: str) -> HostMemory | None:
        if self._memory is not None:
            return self._memory(node)
        ran = await self._execute(node, MEMINFO_COMMAND, 10.0)
        if ran.exit_status != 0:
            return None
        try:
            memory = parse_meminfo(ran.stdout)
        except ValueError:
            return None
        return memory if memory.mem_available is not None else None

    async def _read_memory_after(self, node: str, before: HostMemory | None) -> HostMemory | None:
        """After the drop: the reader's first sample with more MemAvailable than ``before`` (a sample
        read on the node before the drop landed can still arrive after it, a little different), else
        its latest after ``memory_settle_s``; or /proc/meminfo read again."""
        if self._memory is None:
            return await self._read_memory(node)
        deadline = time.monotonic() + self.memory_settle_s
        latest = self._memory(node)
        while not _grew(before, latest) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
            latest = self._memory(node)
        return latest

    # --- refusals and the audit log ----------------------------------------------------------------------

    async def _refused(
        self,
        plan: ActionPlan | FixPlan | BenchPlan | Refusal,
        reason: str,
        progress: ProgressCallback,
        *,
        audit: bool = True,
    ) -> ActionResult:
        title = plan.title if not isinstance(plan, Refusal) else f"{plan.kind.value} {plan.node}"
        if audit:
            await self._audit(
                progress,
                "refused",
                action=plan.kind.value,
                node=plan.node,
                target=[t.what for t in plan.targets] if not isinstance(plan, Refusal) else [],
                command=list(plan.commands) if not isinstance(plan, Refusal) else [],
                result=Outcome.REFUSED.value,
                message=reason,
            )
        message = f"{title}: refused: {reason}"
        progress(message)
        return ActionResult(
            plan.kind,
            plan.node,
            title,
            Outcome.REFUSED,
            message,
            plan=plan if isinstance(plan, ActionPlan) else None,
        )

    async def audit_refusal(
        self,
        action: str,
        node: str | None,
        reason: str,
        *,
        plan: ActionPlan | FixPlan | BenchPlan | Refusal | None = None,
        where: str,
    ) -> None:
        """A ``refused`` line for an action refused before ``run`` (by the dashboard: read-only, the kiosk,
        a plan that cannot be made, a busy node). ``where`` says what refused it."""
        await self._audit(
            lambda _message: None,
            "refused",
            action=action,
            node=node,
            target=[t.what for t in plan.targets] if not isinstance(plan, Refusal | None) else [],
            command=list(plan.commands) if not isinstance(plan, Refusal | None) else [],
            result=Outcome.REFUSED.value,
            message=reason,
            refused_by=where,
        )

    async def _audit_step(
        self,
        plan: ActionPlan,
        action_id: str,
        result: StepResult,
        progress: ProgressCallback,
        extra: dict[str, object],
    ) -> None:
        step = result.step
        outcome = "ok" if result.ok else ("timeout" if result.timed_out else "failed")
        await self._audit(
            progress,
            "step",
            action_id=action_id,
            action=plan.kind.value,
            node=step.node,
            target=[t.what for t in plan.targets if t.node == step.node] or [step.what],
            step=step.what,
            command=step.command,
            exit_status=result.exit_status,
            duration_s=round(result.duration_s, 3),
            result=outcome,
            message=result.message,
            **extra,
        )

    async def _audit(self, progress: ProgressCallback, event: str, **fields: object) -> None:
        try:
            await asyncio.to_thread(self.audit.write, event, **fields)
        except OSError as exc:
            progress(f"audit log {self.audit.path}: cannot write ({exc})")


# --- helpers ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Problem:
    message: str


class _Decoded:
    """A local process's output as text, decoded as it is read (a character split between two reads
    is kept whole)."""

    def __init__(self, stream: asyncio.StreamReader | None) -> None:
        self._stream = stream
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    async def read(self, n: int = -1, /) -> str:
        if self._stream is None:
            return ""
        while chunk := await self._stream.read(n if n > 0 else STREAM_CHUNK):
            text = self._decoder.decode(chunk)
            if text:
                return text
        return self._decoder.decode(b"", final=True)


async def _run_local(command: str, timeout_s: float) -> _Ran:
    """Run ``command`` with ``sh -c`` on this machine; on timeout its whole process group is killed. Of
    its output the last MAX_COMMAND_OUTPUT characters of each stream are kept and escape sequences
    removed, as over SSH."""
    try:
        process = await asyncio.create_subprocess_shell(
            command,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        return _Ran(None, "", "", problem=f"cannot start `{command}` locally: {exc.strerror or exc}")
    try:
        async with asyncio.timeout(timeout_s):
            out, err = await asyncio.gather(
                read_tail(_Decoded(process.stdout), MAX_COMMAND_OUTPUT),
                read_tail(_Decoded(process.stderr), MAX_COMMAND_OUTPUT),
            )
            await process.wait()
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            await process.wait()
        return _Ran(None, "", "", timed_out=True)
    except asyncio.CancelledError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        raise
    status = process.returncode
    out, err = safe_lines(out), safe_lines(err)  # printed in the report: made safe as over SSH
    if status is not None and status < 0:
        return _Ran(None, out, err, problem=f"`{command}` was killed by signal {-status}")
    return _Ran(status, out, err)


def _auth(warmup: Warmup) -> dict[str, str]:
    key = warmup.api_key
    return {"Authorization": f"Bearer {key.get_secret_value()}"} if key is not None else {}


async def _model_name(client: httpx.AsyncClient, warmup: Warmup) -> str | _Problem:
    url = f"{warmup.base_url}/v1/models"
    answer = await fetch(client, url, timeout_s=10.0, max_bytes=1024 * 1024, headers=_auth(warmup))
    if not answer.ok:
        return _Problem(f"cannot learn the model name: {url}: {answer.problem()}")
    try:
        found = json.loads(answer.body)
        return str(found["data"][0]["id"])
    except (ValueError, KeyError, IndexError, TypeError, RecursionError):
        return _Problem(f"cannot learn the model name: {url} is not an OpenAI model list")


def _carries_token(data: str) -> bool:
    """Whether a streamed chunk carries generated text (content, reasoning or a tool call)."""
    try:
        chunk = json.loads(data)
    except (ValueError, RecursionError):
        return False
    choices = chunk.get("choices") if isinstance(chunk, dict) else None
    if not isinstance(choices, list):
        return False
    for choice in choices:
        if not isinstance(choice, dict):
            continue
        delta = choice.get("delta") or {}
        if isinstance(delta, dict) and any(
            delta.get(key) for key in ("content", "reasoning_content", "reasoning", "tool_calls")
        ):
            return True
        if choice.get("text"):
            return True
    return False


def _grew(before: HostMemory | None, after: HostMemory | None) -> bool:
    """Whether ``after`` is a sample taken after a drop: more MemAvailable than ``before`` (when either
    is unknown, any other sample)."""
    if after is None or after == before:
        return False
    if before is None or before.mem_available is None or after.mem_available is None:
        return True
    return after.mem_available > before.mem_available


def _prefixed(progress: ProgressCallback, prefix: str) -> ProgressCallback:
    return lambda message: progress(prefix + message)


def _tail(text: str, limit: int = TAIL_CHARS) -> str:
    return text if len(text) <= limit else "…" + text[-(limit - 1) :]


def _last_lines(text: str, count: int = 5) -> list[str]:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-count:]


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__


def _summary(result: ActionResult, failure: str | None) -> str:
    title = result.title
    if failure is not None:
        return f"{title}: {failure}"
    parts = [f"{title}: ok in {fmt_seconds(result.duration_s)}"]
    if result.kind is ActionKind.DROP_CACHES:
        before, after = result.memory_before, result.memory_after
        freed = result.freed_bytes
        if before is not None and after is not None and freed is not None:
            change = round(freed / GIB, 1) or 0.0  # no "-0.0"
            parts.append(
                f"MemAvailable {fmt_gib(before.mem_available)} → {fmt_gib(after.mem_available)} ({change:+.1f} GiB)"
            )
        else:
            parts.append("MemAvailable before/after unknown")
    if result.kind is ActionKind.KILL_WORKERS:
        # The kill command says which PIDs it killed and which it left because they had changed.
        said = "\n".join(step.stdout_tail for step in result.steps)
        parts.append(f"killed {len(KILLED_RE.findall(said))} stale worker(s)")
        parts += [NOT_KILLED.format(pid=pid) for pid in NOT_KILLED_RE.findall(said)]
    warmup = result.warmup
    if warmup is not None:
        ttft = f"TTFT before {fmt_seconds(result.ttft_before_s)}" if result.ttft_before_s is not None else "TTFT"
        label = "after restart" if result.kind is ActionKind.RESTART else "first"
        ttft += f", {label} {fmt_seconds(warmup.first_s)}"
        if len(warmup.ttfts_s) > 1:
            ttft += f", warm {fmt_seconds(warmup.last_s)}"
        if not warmup.reached:
            ttft += f" (not under {fmt_seconds(warmup.target_s)})"
        parts.append(ttft)
    return "; ".join(parts)


__all__: Sequence[str] = (
    "ActionResult",
    "ActionRunner",
    "MemoryReader",
    "Outcome",
    "ProgressCallback",
    "StepResult",
    "WarmupResult",
)
