"""Detectors of the host and its service manager: whether a start would fit in memory, what a stopped
vLLM left behind (/dev/shm entries, workers), the unit's exec path and restarts, a node that answers
neither HTTP nor SSH; and the memory evidence findings quote."""

from __future__ import annotations

from sparktui.diagnosis.catalogue import Rule
from sparktui.diagnosis.state import NO, SERVING, Check, Ctx, InstanceMemory, gib, log_line, service_state, size
from sparktui.model.fleet import InstanceView
from sparktui.model.memory import GIB
from sparktui.model.scrape import ModelLoad
from sparktui.model.status import State

MAX_HELD_SHOWN = 4  # models named in the memory evidence


def launch_not_ready(ctx: Ctx, rule: Rule, inst: InstanceView, im: InstanceMemory) -> Check | None:
    if inst.status.state in SERVING:
        return NO  # a serving instance holds its memory already: the prediction does not apply
    if inst.role == "worker":
        return NO  # a tensor-parallel worker starts with its head, which is judged on its own node
    if inst.status.state is State.LOADING:
        return NO  # a start is under way: its own allocations count against MemAvailable now
    if ctx.node.is_stale("host"):
        return NO  # no fresh host state (a powered-off node): nothing to predict from
    fresh_at = ctx.memory.host_fresh_at
    if im.stopped_at is not None and (fresh_at is None or fresh_at <= im.stopped_at):
        return None  # the memory read before it stopped still counts what it held: wait for a new sample
    launch = inst.launch
    if launch is None or launch.ready is None:
        return None
    if launch.ready:
        return NO
    return Check(True, (f"{inst.name} would not start now: {launch.reason} (at {ctx.at()})",))


def held_models_block_start(ctx: Ctx, rule: Rule, inst: InstanceView, im: InstanceMemory) -> Check | None:
    """The instance would not start now (``launch_not_ready``), and the models the node's other servers
    keep loaded (an Ollama's ``/api/ps``) hold at least what it is short of: letting them go would let
    it start. The page cache is not what to drop then (``page-cache-blocks-start``'s fix does not help)."""
    not_ready = launch_not_ready(ctx, rule, inst, im)
    if not_ready is None or not not_ready.holds:
        return not_ready
    launch = inst.launch
    assert launch is not None  # launch_not_ready matched on it
    held = [
        (other, model)
        for other in ctx.node.instances
        if other.name != inst.name and other.status.state in SERVING
        for model in other.models
        if model.load is ModelLoad.LOADED and model.size_bytes is not None
    ]
    total = sum(float(model.size_bytes or 0) for _, model in held)
    if launch.shortfall_bytes is None or not held or total < launch.shortfall_bytes:
        return NO
    held.sort(key=lambda pair: (pair[1].overdue_s is None, -(pair[1].size_bytes or 0)))
    holders = sorted({f"{other.engine} {other.name}" for other, _ in held})
    lines = [
        f"{inst.name} would not start now: {launch.reason} (at {ctx.at()})",
        f"{' and '.join(holders)} hold{'s' if len(holders) == 1 else ''} {gib(total)} in loaded models, "
        f"more than the {gib(launch.shortfall_bytes)} it is short of",
        *(f"{other.engine} {other.name}: {model.words}" for other, model in held[:MAX_HELD_SHOWN]),
    ]
    return Check(True, tuple(lines))


def shm_leftovers(ctx: Ctx, rule: Rule) -> Check | None:
    host = ctx.node.host_state
    if host is None or host.shm is None or host.processes is None:
        return None
    entries = ctx.node.shm_leftovers
    if not entries or len(entries) < rule.param("min_entries"):
        return NO
    total = sum(entry.held_bytes for entry in entries)
    names = ", ".join(f"{e.name} ({size(e.held_bytes)})" for e in entries[:6])
    more = f" and {len(entries) - 6} more" if len(entries) > 6 else ""
    return Check(
        True,
        (
            f"{len(entries)} leftover entries in /dev/shm holding {size(total)} while no vLLM process "
            f"runs (at {ctx.at()}): {names}{more}",
        ),
    )


def stale_workers(ctx: Ctx, rule: Rule) -> Check | None:
    host = ctx.node.host_state
    if host is None or host.processes is None:
        return None
    workers = ctx.node.stale_workers
    if not workers or len(workers) < rule.param("min_workers"):
        return NO
    stopped = [f"{i.service.name} is {i.service.state}" for i in ctx.node.instances if i.service is not None]
    processes = "process" if len(workers) == 1 else "processes"
    evidence = [
        f"{len(workers)} VLLM::Worker {processes} alive while {', '.join(stopped) or 'the service is stopped'} "
        f"(at {ctx.at()})"
    ]
    evidence.extend(f"pid {p.pid} (parent {p.ppid}): {p.args.strip()}, RSS {size(p.rss_bytes)}" for p in workers[:6])
    return Check(True, tuple(evidence))


def exec_not_found(ctx: Ctx, rule: Rule, inst: InstanceView, im: InstanceMemory) -> Check | None:
    service = inst.service
    if service is None:
        return None
    missing = service.exec_exists is False and not service.running
    if service.exit_status != int(rule.param("exit_status")) and not missing:
        return NO
    restarts = f", {service.restarts} restarts" if service.restarts is not None else ""
    evidence = [f"{service_state(inst)}, exit status {service.exit_status}{restarts} (at {ctx.at()})"]
    if service.exec_path:
        exists = {False: "does not exist on the node", True: "exists", None: "could not be checked"}
        evidence.append(f"ExecStart runs {service.exec_path}, which {exists[service.exec_exists]}")
    return Check(True, tuple(evidence))


def restarts_rising(ctx: Ctx, rule: Rule, inst: InstanceView, im: InstanceMemory) -> Check | None:
    service = inst.service
    if service is None or service.restarts is None:
        return None
    now, count, window = ctx.now, service.restarts, rule.param("window_s")
    history = im.restarts
    if history and count < history[-1][1]:
        history.clear()  # the count went down: the unit was reset or the container recreated
    if not history or history[-1][1] != count:
        history.append((now, count))
    while len(history) > 1 and now - history[1][0] >= window:
        history.popleft()  # keep one entry at or before the window's start: the count there
    rise = count - history[0][1]
    between = service.restarting or service.failed
    rising = rise >= rule.param("min_rise") and inst.status.state not in SERVING
    if not rising and not (count >= rule.param("min_restarts") and between):
        return NO
    exit_status = f", last exit status {service.exit_status}" if service.exit_status else ""
    since = f", +{rise} since {ctx.at(history[0][0])}" if rise > 0 else ""
    evidence = [f"{service_state(inst)}: {count} restarts{since}{exit_status} (at {ctx.at()})"]
    if im.first_error is None:
        return Check(True, tuple(evidence))
    evidence.append(f"first error of the last attempt: {log_line(im.first_error)}")
    return Check(True, tuple(evidence), (im.first_error,))


def unreachable(ctx: Ctx, rule: Rule) -> Check | None:
    node, memory, now = ctx.node, ctx.memory, ctx.now
    pattern = rule.detector_patterns["unanswered"]
    probed = [i for i in node.instances if i.url is not None]
    http: tuple[str, ...] = ()
    if node.status.state is State.STALE:
        http = node.status.reasons
    elif probed and all(
        i.status.state in (State.DOWN, State.STALE) and any(pattern.search(r) for r in i.status.reasons) for i in probed
    ):
        http = tuple(r for i in probed for r in i.status.reasons)
    ssh: str | None = None
    ssh_since: float | None = None
    if node.host_problem is not None:
        ssh = node.host_problem
        ssh_since = memory.ssh_failing_since if memory.ssh_failing_since is not None else now
    elif memory.host_fresh_at is not None and now - memory.host_fresh_at >= rule.param("ssh_silent_s"):
        ssh = f"no host sample for {now - memory.host_fresh_at:.0f} s"
        ssh_since = memory.host_fresh_at  # it went silent when the last sample came
    if http:
        memory.http_failing_since = memory.http_failing_since if memory.http_failing_since is not None else now
    else:
        memory.http_failing_since = None
    memory.ssh_failing_since = ssh_since
    if node.host_state is None and node.host_problem is None:
        return None  # no SSH to this node: both paths cannot be judged
    http_since = memory.http_failing_since
    if not http or ssh is None or http_since is None or ssh_since is None:
        return NO
    if abs(http_since - ssh_since) > rule.param("together_s"):
        return NO
    return Check(
        True,
        (
            f"HTTP unanswered since {ctx.at(http_since)}: {'; '.join(http[:3])}",
            f"SSH failing since {ctx.at(ssh_since)}: {ssh}",
        ),
    )


def memory_evidence(ctx: Ctx) -> list[str]:
    node, memory = ctx.node, ctx.node.host_memory
    if memory is None or memory.mem_available is None:
        return []
    out = [f"{'; '.join(memory.cited_figures)} (at {ctx.at()})"]
    ledger = node.ledger
    if ledger is not None and ledger.shm_leftovers:
        whose = "leftovers" if ledger.vllm_running is False else "segments of the running vLLM"
        out.append(f"/dev/shm {whose} hold {size(ledger.shm_leftovers)}")
    out += held_models_evidence(ctx)
    trend = ctx.memory.available
    if trend:
        t_max, peak = max(trend, key=lambda sample: sample[1])
        fell = peak - memory.mem_available
        if fell >= GIB and t_max < ctx.now:
            out.append(f"MemAvailable fell {gib(fell)} in {ctx.now - t_max:.0f} s (from {gib(peak)})")
    return out


def held_models_evidence(ctx: Ctx) -> list[str]:
    """What the node's servers that load models on demand (an Ollama) hold of its memory, model by model,
    the overdue ones first: memory another engine's start may need (an Ollama model kept past its
    keep-alive, beside a vLLM that cannot start)."""
    held = [
        (inst, model)
        for inst in ctx.node.instances
        for model in inst.models
        if model.load is ModelLoad.LOADED and model.size_bytes is not None
    ]
    held.sort(key=lambda pair: (pair[1].overdue_s is None, -(pair[1].size_bytes or 0)))
    return [f"{inst.engine} {inst.name} holds {model.words}" for inst, model in held[:MAX_HELD_SHOWN]]
