"""Recovery actions as plans: which exact commands, in which order, on which nodes. Pure: no I/O.

A plan is built from the config (``FleetSpec``) and the latest ``NodeView``s (service state, host
sample); the runner (``sparktui.actions.runner``) executes it and the confirmation dialog shows it
verbatim. Every shell command comes from ``sparktui.model.commands`` (validated names, ``shlex``
quoting); a request that makes no sense (nothing to kill, no unit or container, a worker whose head is
not in the config, a hostile name...) is a ``Refusal`` with a one-line reason, never a plan.

The sequences are those of the operator write-ups (../shared/context/002, 004 and
reference/spark-failures.md): kill stale ``VLLM::Worker`` processes; ``sync`` and drop the page cache,
then remove the ``/dev/shm`` leftovers no process holds; restart the unit or container, the workers of
a multi-node job before its head; then wait for ``/health`` and warm the JIT with a tiny request.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum

from pydantic import SecretStr

from sparktui.actions.registry import ACTIONS, ActionKind
from sparktui.diagnosis.catalogue import Catalogue
from sparktui.diagnosis.engine import Finding
from sparktui.engines import registry
from sparktui.model.bench import DEFAULT_CASES, DEFAULT_CONCURRENCY
from sparktui.model.commands import (
    SHM_NAME_RE,
    ProcessIdentity,
    UnsafeName,
    drop_caches_commands,
    kill_workers_command,
    restart_command,
)
from sparktui.model.fleet import InstanceView, NodeView
from sparktui.model.host import HostProcess, HostSample, leftovers, stale_workers
from sparktui.model.specs import FleetSpec, NodeSpec, ServerSpec, meant_instances
from sparktui.model.status import State
from sparktui.model.units import fmt_count, fmt_duration, fmt_gib, fmt_seconds


class StepKind(StrEnum):
    COMMAND = "command"  # a shell command on the node (over SSH, or locally for a ``local`` node)
    WAIT_HEALTHY = "wait-healthy"  # GET /health until it answers 200
    WARMUP = "warmup"  # tiny streaming chat completions until the TTFT is under the target


@dataclass(frozen=True, slots=True)
class ActionSettings:
    """Timeouts and warmup parameters. The defaults fit a DGX Spark: a cold start takes 8-15 minutes
    (weights, torch.compile, CUDA graphs), the first request after it 25-60 s (JIT)."""

    command_timeout_s: float = 120.0  # systemctl/docker restart (the stop can take a while), sync
    remove_timeout_s: float = 30.0  # rm of /dev/shm leftovers
    kill_timeout_s: float = 15.0
    ready_timeout_s: float = 900.0  # /health 200 after a restart
    health_poll_s: float = 1.0
    warmup_request_timeout_s: float = 120.0  # one request, the cold JIT included
    warmup_ttft_target_s: float = 2.0  # warm when a request's TTFT is under this
    warmup_max_requests: int = 5
    warmup_prompt: str = "Hi"
    chat_template_kwargs: Mapping[str, object] | None = None  # e.g. {"enable_thinking": False}
    margin_s: float = 10.0  # the overall timeout is the steps' timeouts plus this


DEFAULT_SETTINGS = ActionSettings()


@dataclass(frozen=True, slots=True)
class Warmup:
    """Tiny chat completions on the instance's real path (model name, chat template kwargs,
    ``max_tokens`` 3, streaming to time the first token), repeated until the TTFT is under
    ``ttft_target_s`` or ``max_requests`` were sent."""

    base_url: str
    model: str | None  # None: the runner asks /v1/models
    ttft_target_s: float
    max_requests: int
    request_timeout_s: float
    prompt: str = "Hi"
    max_tokens: int = 3
    chat_template_kwargs: Mapping[str, object] | None = None
    api_key: SecretStr | None = field(default=None, repr=False)

    @property
    def endpoint(self) -> str:
        return f"{self.base_url}/v1/chat/completions"

    def body(self, model: str) -> dict[str, object]:
        body: dict[str, object] = {
            "model": model,
            "messages": [{"role": "user", "content": self.prompt}],
            "max_tokens": self.max_tokens,
            "stream": True,
        }
        if self.chat_template_kwargs:
            body["chat_template_kwargs"] = dict(self.chat_template_kwargs)
        return body

    def shown(self) -> str:
        """The request as the confirmation shows it (the API key never: only that one is sent)."""
        body = json.dumps(self.body(self.model or "<first id of /v1/models>"), separators=(",", ":"))
        key = " with the instance's API key" if self.api_key is not None else ""
        return f"POST {self.endpoint} {body}{key}"


@dataclass(frozen=True, slots=True)
class Step:
    """One thing the runner does. ``command`` is the exact text: the shell command sent to ``node``,
    or the HTTP request for the HTTP steps."""

    kind: StepKind
    node: str
    what: str  # one line for progress and the audit log: "restart systemd unit vllm.service on spark2"
    command: str
    timeout_s: float
    instance: str | None = None
    url: str | None = None  # WAIT_HEALTHY: the /health URL
    warmup: Warmup | None = None
    poll_s: float = 1.0  # WAIT_HEALTHY: how often /health is asked
    sudo: str | None = None  # what a longer command runs under ``sudo -n``, as a password refusal names it

    @property
    def needs_root(self) -> bool:
        return self.sudo is not None or self.command.startswith("sudo -n ")


@dataclass(frozen=True, slots=True)
class Target:
    node: str
    what: str  # "systemd unit vllm.service: active (running), up 2h03m; pids 48213, 48250"


@dataclass(frozen=True, slots=True)
class ActionPlan:
    """What an action will do; shown verbatim in the confirmation, then run by ``ActionRunner``."""

    kind: ActionKind
    node: str  # the node it was asked on
    instance: str | None
    targets: tuple[Target, ...]
    steps: tuple[Step, ...]
    timeout_s: float  # overall
    notes: tuple[str, ...] = ()
    ttft_before_s: float | None = None  # restart and warmup: the instance's mean TTFT from /metrics
    warnings: tuple[str, ...] = ()  # what running it now would break (requests in flight, a load under way)
    # kill-workers: each process as the plan saw it (PID, start time, command line); the kill command
    # checks them again on the node and kills only those still the same.
    processes: tuple[ProcessIdentity, ...] = ()

    @property
    def title(self) -> str:
        where = f"{self.node}/{self.instance}" if self.instance else self.node
        return f"{self.kind.value} {where}"

    @property
    def nodes(self) -> tuple[str, ...]:
        """Every node the plan touches (each is locked while it runs), in order."""
        seen = dict.fromkeys([self.node, *(step.node for step in self.steps)])
        return tuple(seen)

    @property
    def commands(self) -> tuple[str, ...]:
        """The exact commands and requests, in order."""
        return tuple(step.command for step in self.steps)

    def confirmation(self) -> tuple[str, ...]:
        """The lines of the confirmation: the action, the target(s), the exact commands, the timeout."""
        lines = [f"{self.title}?"]
        lines += [f"  target on {t.node}: {t.what}" for t in self.targets]
        lines.append("  will run, in this order:")
        for number, step in enumerate(self.steps, 1):
            where = f"on {step.node}" if step.kind is StepKind.COMMAND else "over HTTP"
            lines.append(f"    {number}. {where}: {step.command}")
        lines.append(f"  timeout: {fmt_duration(self.timeout_s)} overall")
        lines += [f"  note: {note}" for note in self.notes]
        lines += [f"  warning: {warning}" for warning in self.warnings]
        return tuple(lines)


@dataclass(frozen=True, slots=True)
class Refusal:
    """An action that was not planned (or not run), and why, in one line."""

    kind: ActionKind
    node: str
    reason: str


@dataclass(frozen=True, slots=True)
class FixPlan:
    """A finding's whole fix: one ``ActionPlan`` per action, in order, every one planned before anything
    runs (``plan_fix``). The runner runs them one after another and stops at the first that fails."""

    node: str
    finding: str  # the rule id of the finding it fixes
    finding_title: str
    plans: tuple[ActionPlan, ...]

    @property
    def kind(self) -> ActionKind:
        return ActionKind.FIX

    @property
    def title(self) -> str:
        return f"fix {self.node}: {self.finding}"

    @property
    def actions(self) -> tuple[ActionKind, ...]:
        return tuple(plan.kind for plan in self.plans)

    @property
    def sequence(self) -> str:
        """The actions as the operator reads them: "drop caches → restart → warm up"."""
        return fix_sequence_text(a.value for a in self.actions)

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(n for plan in self.plans for n in plan.nodes))

    @property
    def targets(self) -> tuple[Target, ...]:
        return tuple(t for plan in self.plans for t in plan.targets)

    @property
    def commands(self) -> tuple[str, ...]:
        return tuple(c for plan in self.plans for c in plan.commands)

    @property
    def warnings(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(w for plan in self.plans for w in plan.warnings))

    @property
    def timeout_s(self) -> float:
        return sum(plan.timeout_s for plan in self.plans)

    def confirmation(self) -> tuple[str, ...]:
        """Every action of the fix with its targets and exact commands, in order, then the overall timeout."""
        count = len(self.plans)
        lines = [f"{self.title}?", f"  {self.finding_title}: {self.sequence}"]
        lines.append(f"  {count} actions, in this order; the first that fails stops the rest:")
        for number, plan in enumerate(self.plans, 1):
            own = plan.confirmation()
            lines.append(f"  step {number}/{count}: {plan.title}")
            lines += [f"  {line}" for line in own[1:] if not line.lstrip().startswith("warning: ")]
        lines.append(f"  timeout: {fmt_duration(self.timeout_s)} overall")
        lines += [f"  warning: {warning}" for warning in self.warnings]
        return tuple(lines)


# The prefill sweep stops here in the dashboard (the command goes to max_model_len unless told):
# a 128k prompt takes minutes to prefill on a Spark, and the screen is for a quick look.
DASHBOARD_PREFILL_MAX = 32768


@dataclass(frozen=True, slots=True)
class BenchPlan:
    """``sparktui bench`` on one instance, from the dashboard: every case, the prefill sweep to
    ``DASHBOARD_PREFILL_MAX``. The runner audits it like an action; the dashboard runs and shows it."""

    node: str
    instance: str
    spec: ServerSpec
    cases: tuple[str, ...] = DEFAULT_CASES
    concurrency: tuple[int, ...] = DEFAULT_CONCURRENCY
    prefill_max: int = DASHBOARD_PREFILL_MAX

    @property
    def kind(self) -> ActionKind:
        return ActionKind.BENCH

    @property
    def title(self) -> str:
        return f"bench {self.target_name}"

    @property
    def target_name(self) -> str:
        return f"{self.node}/{self.instance}"

    @property
    def nodes(self) -> tuple[str, ...]:
        return (self.node,)

    @property
    def targets(self) -> tuple[Target, ...]:
        return (Target(self.node, f"{engine_label(self.spec)} {self.instance} at {self.spec.base_url}"),)

    @property
    def commands(self) -> tuple[str, ...]:
        """What it sends, for the audit log: the cases' streamed completions to the instance."""
        return (f"streamed completions to {self.spec.base_url} (cases: {', '.join(self.cases)})",)

    @property
    def warnings(self) -> tuple[str, ...]:
        return ()

    def confirmation(self) -> tuple[str, ...]:
        """What will be sent, to what, and what it costs."""
        return (
            f"Benchmark {self.target_name} ({self.spec.base_url})?",
            f"  cases: {', '.join(self.cases)}",
            f"  concurrency up to {max(self.concurrency)}, prefill up to {self.prefill_max:,} tokens",
            "  It sends streamed completions like real traffic for a few minutes: other clients of this",
            "  instance are slowed meanwhile, and the numbers include their requests.",
            "  The result is saved as JSON in the folder sparktui was started from.",
        )


# The actions as a finding's fix names them, in the operator's words (the table's).
ACTION_WORDS: Mapping[str, str] = {spec.id: spec.words for spec in ACTIONS}


def fix_sequence_text(actions: Iterable[str]) -> str:
    """``("drop-caches", "restart", "warmup")`` as "drop caches → restart → warm up"."""
    return " → ".join(ACTION_WORDS.get(a, a.replace("-", " ")) for a in actions)


# --- planning -----------------------------------------------------------------------------------------


def plan_action(
    kind: ActionKind | str,
    fleet: FleetSpec,
    node: str,
    *,
    instance: str | None = None,
    views: Iterable[NodeView] = (),
    settings: ActionSettings = DEFAULT_SETTINGS,
) -> ActionPlan | Refusal:
    """Plan ``kind`` on ``node`` (``instance``: which vLLM of the node, needed when it runs several)."""
    try:
        action = ActionKind(kind)
    except ValueError:
        choices = ", ".join(k.value for k in ActionKind)
        return Refusal(ActionKind.RESTART, node, f"unknown action {kind!r}; choose one of: {choices}")
    if action is ActionKind.FIX:
        return Refusal(action, node, "a fix is a finding's sequence of actions: it is planned by plan_fix")
    if action is ActionKind.BENCH:
        return Refusal(action, node, "a bench is not a command on the node: it is planned by plan_bench")
    if action is ActionKind.RESTART:
        return plan_restart(fleet, node, instance, views=views, settings=settings)
    if action is ActionKind.WARMUP:
        return plan_warmup(fleet, node, instance, views=views, settings=settings)
    view = _views(views).get(node)
    if action is ActionKind.DROP_CACHES:
        return plan_drop_caches(fleet, node, view, settings=settings)
    return plan_kill_workers(fleet, node, view, settings=settings)


def plan_bench(fleet: FleetSpec, node: str) -> BenchPlan | Refusal:
    """A bench of the node's first instance that serves HTTP (its first vLLM beside another engine)."""
    spec = fleet.node(node)
    if spec is None:
        return _no_node(ActionKind.BENCH, fleet, node)
    serving = meant_instances([v for v in spec.vllm if v.base_url is not None])
    if not serving:
        return Refusal(ActionKind.BENCH, node, f"bench: {node} has no vLLM instance that serves HTTP")
    return BenchPlan(node, serving[0].name, serving[0])


def plan_restart(
    fleet: FleetSpec,
    node: str,
    instance: str | None = None,
    *,
    views: Iterable[NodeView] = (),
    settings: ActionSettings = DEFAULT_SETTINGS,
) -> ActionPlan | Refusal:
    """Restart a vLLM instance through its unit or container; a multi-node job restarts every rank,
    workers first, then the head (each command returns before the next is sent), then waits for the
    head's /health and warms it up."""
    kind = ActionKind.RESTART
    found = _node_and_instance(kind, fleet, node, instance)
    if isinstance(found, Refusal):
        return found
    spec, vllm = found
    by_name = _views(views)
    ranks: list[tuple[NodeSpec, ServerSpec]] = [(spec, vllm)]
    notes: list[str] = []
    if vllm.role in ("head", "worker") and vllm.job is not None:
        job = vllm.job
        heads = [(n, v) for n in fleet.nodes for v in n.vllm if v.job == job and v.role == "head"]
        workers = [(n, v) for n in fleet.nodes for v in n.vllm if v.job == job and v.role == "worker"]
        if not heads:
            return Refusal(
                kind,
                node,
                f"{node}/{vllm.name} is a worker of job {job!r}, whose head is not in the config: "
                "a worker restarted alone cannot rejoin; add the head, then restart the job",
            )
        ranks = [*workers, heads[0]]
        if not workers:
            notes.append(f"job {job!r} has no worker in the config: only its head is restarted")
        else:
            notes.append(f"job {job!r}: {len(workers)} worker(s) restart first, then the head")
    steps: list[Step] = []
    targets: list[Target] = []
    warnings: list[str] = []
    for rank_node, rank in ranks:
        transport = _transport_refusal(kind, rank_node)
        if transport is not None:
            return transport
        try:
            command = restart_command(rank)
        except UnsafeName as exc:
            return Refusal(kind, node, f"{rank_node.name}/{rank.name}: {exc}")
        manager = _manager_text(rank)
        role = f" ({rank.role} of job {rank.job!r})" if rank.job is not None else ""
        steps.append(
            Step(
                StepKind.COMMAND,
                rank_node.name,
                f"restart {manager} on {rank_node.name}{role}",
                command,
                settings.command_timeout_s,
                instance=rank.name,
            )
        )
        targets.append(Target(rank_node.name, _service_text(rank_node, rank, by_name.get(rank_node.name))))
        rank_view = _instance_view(by_name.get(rank_node.name), rank.name)
        warnings += filter(None, (_in_flight(rank_node.name, rank_view), _still_starting(rank_node, rank, rank_view)))
    head_node, head = ranks[-1]
    head_view = _instance_view(by_name.get(head_node.name), head.name)
    if head.base_url is not None:
        health = _health_path(head)
        steps.append(
            Step(
                StepKind.WAIT_HEALTHY,
                head_node.name,
                f"wait for {head_node.name}/{head.name} to answer {health} 200",
                f"GET {head.base_url}{health} until 200 (every {settings.health_poll_s:g} s)",
                settings.ready_timeout_s,
                instance=head.name,
                url=f"{head.base_url}{health}",
                poll_s=settings.health_poll_s,
            )
        )
        steps.append(_warmup_step(head_node, head, head_view, settings))
    else:
        notes.append(f"{head_node.name}/{head.name} has no URL: readiness and warmup are skipped")
    return ActionPlan(
        kind,
        node,
        vllm.name,
        tuple(targets),
        tuple(steps),
        _overall(steps, settings),
        tuple(notes),
        ttft_before_s=_ttft_mean(head_view),
        warnings=tuple(warnings),
    )


def plan_drop_caches(
    fleet: FleetSpec,
    node: str,
    view: NodeView | None,
    *,
    settings: ActionSettings = DEFAULT_SETTINGS,
) -> ActionPlan | Refusal:
    """``sync`` and drop the page cache, then remove the /dev/shm leftovers no process holds (the
    leftover kinds, only while no vLLM process runs: ``model.host.leftovers``)."""
    kind = ActionKind.DROP_CACHES
    spec = fleet.node(node)
    if spec is None:
        return _no_node(kind, fleet, node)
    transport = _transport_refusal(kind, spec)
    if transport is not None:
        return transport
    host = view.host_state if view is not None else None
    notes: list[str] = []
    entries = leftovers(host) if host is not None else ()
    safe = [e for e in entries if not e.name.startswith("-") and SHM_NAME_RE.match(e.name)]
    odd = [e.name for e in entries if e not in safe]
    if odd:
        notes.append(f"{len(odd)} leftover name(s) not removed, not a plain name: {', '.join(map(repr, odd[:3]))}")
    if host is None:
        notes.append("host state unknown: /dev/shm leftovers not checked, none removed")
    elif host.shm is None or host.processes is None:
        notes.append("/dev/shm or the process list not read yet: leftovers not checked, none removed")
    elif host.processes and any(e.kind != "other" for e in host.shm):
        notes.append("vLLM processes are running: their /dev/shm segments are in use and kept")
    try:
        commands = drop_caches_commands([e.name for e in safe])
    except UnsafeName as exc:  # pragma: no cover - the names were checked above
        return Refusal(kind, node, str(exc))
    steps = [
        Step(
            StepKind.COMMAND,
            node,
            f"sync and drop the page cache on {node}",
            commands[0],
            settings.command_timeout_s,
        )
    ]
    if len(commands) > 1:
        steps.append(
            Step(
                StepKind.COMMAND,
                node,
                f"remove {len(safe)} /dev/shm leftover(s) on {node}",
                commands[1],
                settings.remove_timeout_s,
            )
        )
    targets = [Target(node, _page_cache_text(host))]
    if safe:
        held = sum(e.held_bytes for e in safe)
        names = ", ".join(e.name for e in safe[:4]) + (f" and {len(safe) - 4} more" if len(safe) > 4 else "")
        targets.append(Target(node, f"/dev/shm leftovers ({fmt_gib(held)}, no vLLM process running): {names}"))
    return ActionPlan(kind, node, None, tuple(targets), tuple(steps), _overall(steps, settings), tuple(notes))


def plan_kill_workers(
    fleet: FleetSpec,
    node: str,
    view: NodeView | None,
    *,
    settings: ActionSettings = DEFAULT_SETTINGS,
) -> ActionPlan | Refusal:
    """SIGKILL the ``VLLM::Worker*`` processes alive while no vLLM service of the node runs
    (``model.host.stale_workers``): they hold port 29501 and memory, and survive ``pkill`` in a
    host-network container. The plan carries each one's PID, start time and command line as the last
    host sample read them; the command checks them again on the node when it runs, and a process that
    exited or was replaced since (its PID reused) is not killed (``model.commands.kill_workers_command``)."""
    kind = ActionKind.KILL_WORKERS
    spec = fleet.node(node)
    if spec is None:
        return _no_node(kind, fleet, node)
    transport = _transport_refusal(kind, spec)
    if transport is not None:
        return transport
    host = view.host_state if view is not None else None
    if view is None or host is None or host.processes is None:
        return Refusal(kind, node, f"the process list of {node} is not known yet: nothing to kill")
    if not spec.vllm:
        return Refusal(kind, node, f"no vLLM is configured on {node}: cannot tell stale workers from live ones")
    services = [_instance_view(view, v.name) for v in spec.vllm]
    unknown = [v.name for v, i in zip(spec.vllm, services, strict=True) if i is None or i.service is None]
    if unknown:
        return Refusal(
            kind,
            node,
            f"the unit or container state of {node}/{unknown[0]} is not known (no unit or container configured, "
            "or not sampled yet): cannot tell stale workers from live ones",
        )
    live = [
        i.service
        for i in services
        if i is not None and i.service is not None and (i.service.running or i.service.starting)
    ]
    if live:
        service = live[0]
        return Refusal(
            kind,
            node,
            f"{service.manager} {service.name} is {service.state} on {node}: its workers are not stale",
        )
    workers = stale_workers(host, service_running=False)
    if not workers:
        return Refusal(kind, node, f"nothing to kill: no VLLM::Worker process on {node}")
    unknown_start = [p.pid for p in workers if p.start_ticks is None]
    if unknown_start:
        return Refusal(
            kind,
            node,
            f"the start time of PID {unknown_start[0]} on {node} was not read: the kill could not check that "
            "it is still the same process",
        )
    identities = tuple(ProcessIdentity(p.pid, p.start_ticks or 0, p.args) for p in workers)
    try:
        command = kill_workers_command(identities)
    except UnsafeName as exc:
        return Refusal(kind, node, str(exc))
    step = Step(
        StepKind.COMMAND,
        node,
        f"kill {len(workers)} stale VLLM::Worker process(es) on {node}",
        command,
        settings.kill_timeout_s,
        sudo="kill -9",
    )
    targets = tuple(Target(node, _process_text(p, host)) for p in workers)
    warnings = tuple(filter(None, (_in_flight(node, i) for i in services)))
    return ActionPlan(
        kind, node, None, targets, (step,), _overall([step], settings), warnings=warnings, processes=identities
    )


def _health_path(spec: ServerSpec) -> str:
    """Where the instance's engine says it is up (``PollPlan.health_path``: SGLang's ``/ready``)."""
    found = registry().get(spec.engine)
    return found.polling.health_path if found is not None else "/health"


def engine_label(spec: ServerSpec) -> str:
    """The instance's engine as people say it ("vLLM", "llama.cpp"), for a target line."""
    found = registry().get(spec.engine)
    return found.label if found is not None else spec.engine


def plan_warmup(
    fleet: FleetSpec,
    node: str,
    instance: str | None = None,
    *,
    views: Iterable[NodeView] = (),
    settings: ActionSettings = DEFAULT_SETTINGS,
) -> ActionPlan | Refusal:
    """Tiny streaming chat completions until the TTFT is under the target (the cold-JIT fix)."""
    kind = ActionKind.WARMUP
    found = _node_and_instance(kind, fleet, node, instance)
    if isinstance(found, Refusal):
        return found
    spec, vllm = found
    if vllm.base_url is None:
        head = next(
            (f"{n.name}/{v.name}" for n in fleet.nodes for v in n.vllm if v.job == vllm.job and v.role == "head"),
            None,
        )
        where = f"; warm up its job's head, {head}" if head else ""
        return Refusal(kind, node, f"{node}/{vllm.name} is a tensor-parallel worker with no HTTP{where}")
    view = _instance_view(_views(views).get(node), vllm.name)
    step = _warmup_step(spec, vllm, view, settings)
    state = f" ({view.status.state.value})" if view else ""
    target = Target(node, f"{engine_label(vllm)} {vllm.name} at {vllm.base_url}{state}")
    return ActionPlan(
        kind,
        node,
        vllm.name,
        (target,),
        (step,),
        _overall([step], settings),
        ttft_before_s=_ttft_mean(view),
    )


def plan_fix(
    fleet: FleetSpec,
    node: str,
    actions: Sequence[str],
    *,
    finding: str,
    finding_title: str = "",
    instance: str | None = None,
    views: Iterable[NodeView] = (),
    settings: ActionSettings = DEFAULT_SETTINGS,
) -> FixPlan | Refusal:
    """Plan every action of a fix up front, on the state known now; one refused action refuses the whole
    fix (nothing runs). A restart followed by a warm-up of the same instance leaves the warm-up to that
    step, so no request is sent twice."""
    kind = ActionKind.FIX
    if not actions:
        return Refusal(kind, node, f"{finding} has no fix that sparktui can apply")
    plans: list[ActionPlan] = []
    for number, action in enumerate(actions, 1):
        plan = plan_action(action, fleet, node, instance=instance, views=views, settings=settings)
        if isinstance(plan, Refusal):
            return Refusal(
                kind, node, f"step {number}/{len(actions)} ({action}) is refused, so nothing runs: {plan.reason}"
            )
        plans.append(plan)
    for index, (plan, following) in enumerate(itertools.pairwise(list(plans))):
        last = plan.steps[-1] if plan.steps else None
        if (
            plan.kind is ActionKind.RESTART
            and following.kind is ActionKind.WARMUP
            and last is not None
            and last.kind is StepKind.WARMUP
            and (last.node, last.instance) == (following.node, following.instance)
        ):
            steps = plan.steps[:-1]
            plans[index] = replace(plan, steps=steps, timeout_s=_overall(steps, settings))
    return FixPlan(node, finding, finding_title or finding, tuple(plans))


def finding_fix(finding: Finding, catalogue: Catalogue) -> tuple[str, ...]:
    """The actions that apply a finding's fix, in order (its rule's ``fix_actions``)."""
    try:
        return catalogue.rule(finding.id).fix_actions
    except KeyError:  # a finding of another catalogue (a recording's): its one action, if any
        return (finding.action,) if finding.action else ()


def plan_finding_fix(
    fleet: FleetSpec,
    node: str,
    findings: Iterable[Finding],
    catalogue: Catalogue,
    *,
    views: Iterable[NodeView] = (),
    settings: ActionSettings = DEFAULT_SETTINGS,
) -> FixPlan | Refusal:
    """The fix of the worst open finding of ``node`` that has one (the ``fix`` key)."""
    mine = [f for f in findings if f.node == node and f.active and finding_fix(f, catalogue)]
    if not mine:
        return Refusal(ActionKind.FIX, node, f"no open finding on {node} has a fix that sparktui can apply")
    worst = max(mine, key=lambda f: f.severity.rank)  # the first of the worst: findings come worst first
    return plan_fix(
        fleet,
        node,
        finding_fix(worst, catalogue),
        finding=worst.id,
        finding_title=worst.title,
        instance=worst.instance,
        views=views,
        settings=settings,
    )


# --- helpers ------------------------------------------------------------------------------------------


def _views(views: Iterable[NodeView]) -> dict[str, NodeView]:
    return {v.name: v for v in views}


def _no_node(kind: ActionKind, fleet: FleetSpec, node: str) -> Refusal:
    names = ", ".join(n.name for n in fleet.nodes)
    return Refusal(kind, node, f"no node named {node!r} in the config (nodes: {names})")


def _node_and_instance(
    kind: ActionKind, fleet: FleetSpec, node: str, instance: str | None
) -> tuple[NodeSpec, ServerSpec] | Refusal:
    spec = fleet.node(node)
    if spec is None:
        return _no_node(kind, fleet, node)
    if not spec.vllm:
        return Refusal(kind, node, f"no vLLM is configured on {node}")
    if instance is None:
        meant = meant_instances(spec.vllm)  # a llama.cpp fallback beside one vLLM: the vLLM
        if len(meant) > 1:
            names = ", ".join(v.name for v in meant)
            return Refusal(kind, node, f"{node} runs {len(meant)} vLLM instances ({names}): name one")
        return spec, meant[0]
    vllm = next((v for v in spec.vllm if v.name == instance), None)
    if vllm is None:
        names = ", ".join(v.name for v in spec.vllm)
        return Refusal(kind, node, f"no vLLM named {instance!r} on {node} (it runs: {names})")
    return spec, vllm


def _transport_refusal(kind: ActionKind, node: NodeSpec) -> Refusal | None:
    if node.local or node.ssh.enabled:
        return None
    return Refusal(kind, node.name, f"actions on {node.name} need SSH, and ssh.enabled is false for it")


def _instance_view(view: NodeView | None, name: str) -> InstanceView | None:
    if view is None:
        return None
    return next((i for i in view.instances if i.name == name), None)


def _manager_text(vllm: ServerSpec) -> str:
    if vllm.unit is not None:
        return f"systemd unit {vllm.unit}"
    return f"docker container {vllm.container}"


def _service_text(node: NodeSpec, vllm: ServerSpec, view: NodeView | None) -> str:
    """The unit or container, its state and uptime, and the vLLM PIDs when they can only be its own."""
    text = _manager_text(vllm)
    instance = _instance_view(view, vllm.name)
    host = view.host_state if view is not None else None
    service = instance.service if instance is not None else None
    details: list[str] = []
    if service is not None:
        state = service.state + (f" ({service.sub_state})" if service.sub_state else "")
        if host is not None and service.started_epoch is not None and (service.running or service.starting):
            state += f", up {fmt_duration(host.remote_epoch - service.started_epoch)}"
        if service.restarts:
            state += f", {service.restarts} restarts"
        details.append(state)
    elif instance is not None:
        details.append(f"{instance.status.state.value} (unit/container state not sampled)")
    if host is not None and host.processes and len(node.vllm) == 1:
        pids = [p.pid for p in host.processes if p.kind in ("serve", "engine_core")]
        if pids:
            details.append("pid " + ", ".join(str(p) for p in pids[:6]))
    return text + (": " + "; ".join(details) if details else "")


def _in_flight(node: str, instance: InstanceView | None) -> str | None:
    """The requests a restart or a kill would cut off, as the instance's last poll counted them (none
    when it is down or its numbers are stale: those requests are already lost)."""
    if instance is None or instance.status.state in (State.DOWN, State.STALE, State.UNKNOWN):
        return None
    running, waiting = _count(instance.running), _count(instance.waiting)
    if not running and not waiting:
        return None
    parts = [f"{fmt_count(running, 'request')} running"] if running else []
    if waiting:
        parts.append(f"{waiting} waiting" if running else f"{fmt_count(waiting, 'request')} waiting")
    return f"{node}/{instance.name}: {', '.join(parts)} will be cut off"


def _still_starting(node: NodeSpec, vllm: ServerSpec, instance: InstanceView | None) -> str | None:
    """A restart while the unit or container is still starting, or the instance still loading (a
    systemd unit is active as soon as vLLM's process runs), throws the load so far away. Not while
    systemd waits between two attempts of a crash loop: no load is under way then."""
    if instance is None:
        return None
    service = instance.service
    if service is not None and service.sub_state == "auto-restart":
        return None
    if not (service is not None and service.starting) and instance.status.state is not State.LOADING:
        return None
    what = f"unit {vllm.unit}" if vllm.unit is not None else f"container {vllm.container}"
    return f"the {what} on {node.name} is still starting: a restart begins the load again"


def _count(value: float | None) -> int:
    return 0 if value is None or math.isnan(value) else max(0, round(value))


def _page_cache_text(host: HostSample | None) -> str:
    if host is None or host.memory.mem_total is None:
        return "the page cache (memory not sampled yet)"
    mem = host.memory
    return (
        f"the page cache: MemAvailable {fmt_gib(mem.mem_available)} of {fmt_gib(mem.mem_total)}, "
        f"droppable cache {fmt_gib(mem.page_cache_droppable)}"
    )


def _process_text(process: HostProcess, host: HostSample) -> str:
    up = f", up {fmt_duration(host.remote_epoch - process.start_epoch)}" if process.start_epoch is not None else ""
    return f"pid {process.pid} ({process.args or 'VLLM::Worker'}{up}, RSS {fmt_gib(process.rss_bytes)})"


def _ttft_mean(view: InstanceView | None) -> float | None:
    if view is None or view.rates is None:
        return None
    ttft = view.rates.latency.get("ttft")
    if ttft is None or not ttft.count:
        return None
    return ttft.mean


def _warmup_step(node: NodeSpec, vllm: ServerSpec, view: InstanceView | None, settings: ActionSettings) -> Step:
    assert vllm.base_url is not None
    model = None
    if view is not None:
        model = view.served_models[0] if view.served_models else view.model_name
    warmup = Warmup(
        base_url=vllm.base_url,
        model=model,
        ttft_target_s=settings.warmup_ttft_target_s,
        max_requests=max(1, settings.warmup_max_requests),
        request_timeout_s=settings.warmup_request_timeout_s,
        prompt=settings.warmup_prompt,
        chat_template_kwargs=settings.chat_template_kwargs,
        api_key=vllm.api_key,
    )
    return Step(
        StepKind.WARMUP,
        node.name,
        f"warm up {node.name}/{vllm.name}: up to {warmup.max_requests} requests until TTFT < "
        f"{fmt_seconds(warmup.ttft_target_s)}",
        warmup.shown(),
        warmup.request_timeout_s * warmup.max_requests,
        instance=vllm.name,
        url=warmup.endpoint,
        warmup=warmup,
    )


def _overall(steps: Iterable[Step], settings: ActionSettings) -> float:
    return sum(step.timeout_s for step in steps) + settings.margin_s
