"""The headless commands' collection and output: ``snapshot`` and ``check``. Plain text or JSON, no Textual, no Rich."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Iterable, Mapping

from sparktui import installed_version
from sparktui.config import catalogue_for
from sparktui.model.canary import canary_text
from sparktui.model.derive import EngineRates
from sparktui.model.engines import EngineView, data_parallel_summary, kv_line
from sparktui.model.exporters import throttle_text
from sparktui.model.fabric import fabric_lines
from sparktui.model.fleet import FleetState, InstanceView, NodeView
from sparktui.model.observations import HostUpdate
from sparktui.model.replicas import SLOWEST_MIN_REQUESTS, ModelReplicas, model_replicas
from sparktui.model.specs import FleetSpec
from sparktui.model.status import State
from sparktui.model.units import (
    NO_DATA,
    engine_lines,
    fmt_count,
    fmt_gib,
    fmt_latency,
    fmt_number,
    fmt_pct,
    fmt_rate,
    fmt_seconds,
    fmt_tokens,
    fmt_waiting,
    roofline_parts,
    to_jsonable,
)
from sparktui.monitor.core import Monitor
from sparktui.sources.canary import CanarySender
from sparktui.sources.host import HostCollector, wants_host_state
from sparktui.sources.http import make_poll_client
from sparktui.sources.poller import FleetPoller, fleet_origins


def one_shot_canaries(fleet: FleetSpec, wanted: bool = True) -> FleetSpec:
    """``fleet`` with its canary fitted to a one-shot command: one canary to each instance that answers
    ``/health`` 200 but generated no token between the command's scrapes (the command's whole window
    is its idle time), sent after them; none at all when not ``wanted``."""
    if not wanted:
        return fleet.model_copy(update={"canary": fleet.canary.model_copy(update={"enabled": False})})
    return fleet.model_copy(update={"canary": fleet.canary.model_copy(update={"idle_s": 1e-6, "interval_s": 0.0})})


async def collect(fleet: FleetSpec, polls: int, interval_s: float, *, canary: bool = False) -> tuple[Monitor, float]:
    """Poll every node ``polls`` times, ``interval_s`` apart, while host state streams in, into the
    one-shot core (``Monitor.once``); return it, ticked at the end, and the time of the end. With
    ``canary``, an instance that is up but moved no token over the polls gets a canary
    (``one_shot_canaries``), and one more poll takes the answers in."""
    fleet = one_shot_canaries(fleet, canary and fleet.canary.enabled)
    monitor = Monitor.once(fleet, catalogue_for(fleet.diagnosis))
    state = monitor.state
    hosted = [node for node in fleet.nodes if wants_host_state(node)]
    # Host state: connect, run the sampler, take its first frame (or the reason there is none).
    deadline = time.monotonic() + max((n.ssh.connect_timeout_s for n in hosted), default=0.0) + 3.0
    heard = asyncio.Event()

    def on_host(update: HostUpdate) -> None:
        monitor.host(update)
        if all(_host_heard(state, n.name) for n in hosted):
            heard.set()

    # The fabric read at each poll, so two readings give its rates over the polls.
    tasks = [
        asyncio.create_task(HostCollector(node, fleet, fabric_every_s=max(interval_s, 0.5)).run(on_host))
        for node in hosted
    ]
    try:
        async with make_poll_client(fleet_origins(fleet), ca_file=fleet.ca_file) as client:
            canaries = CanarySender(fleet)
            try:
                poller = FleetPoller(fleet, client, canaries=canaries)
                for index in range(polls):
                    if index:
                        await asyncio.sleep(interval_s)
                    observations = await poller.poll_all()
                    for observation in observations:
                        monitor.observation(observation)
                for observation in observations:
                    poller.send_canaries(monitor, observation)
                if canaries.in_flight:
                    await canaries.wait()
                    for observation in await poller.poll_all():
                        monitor.observation(observation)
            finally:
                await canaries.aclose()
        if hosted:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(heard.wait(), max(0.0, deadline - time.monotonic()))
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    now = time.monotonic()
    monitor.tick(now)
    return monitor, now


def _host_heard(state: FleetState, node: str) -> bool:
    found = state.nodes[node]
    return found.host is not None or found.host_problem is not None


def exit_code(views: Iterable[NodeView]) -> int:
    """0 when every node is healthy, 1 when something is degraded, 2 when anything is down."""
    return max((v.status.state.severity for v in views), default=2)


# --- text rendering -------------------------------------------------------------------------------


def _rates_lines(rates: EngineRates | None, lacks: Mapping[str, str]) -> list[str]:
    latency_lacks = f"   ({lacks['latency']})" if "latency" in lacks else ""
    if "requests" in lacks:  # no counters at all (Ollama): every rate is "–", whatever the window
        return [
            f"    generation {NO_DATA}   prompt {NO_DATA}   finished {NO_DATA}   ({lacks['requests']})",
            f"    TTFT {NO_DATA}   ITL {NO_DATA}   e2e {NO_DATA}{latency_lacks}",
        ]
    if rates is None:
        return ["    no rates yet: needs two scrapes of the engine's metrics"]
    latency = "   ".join(
        fmt_latency(label, rates.latency.get(key)) for key, label in (("ttft", "TTFT"), ("itl", "ITL"), ("e2e", "e2e"))
    )
    lines = [
        f"    generation {fmt_rate(rates.generation_tokens_per_s, ' tok/s')}   "
        f"prompt {fmt_rate(rates.prompt_tokens_per_s, ' tok/s')} "
        f"(computed {fmt_rate(rates.prompt_tokens_computed_per_s, ' tok/s')})   "
        f"finished {fmt_rate(rates.requests_finished_per_s, ' req/s')}   "
        f"prefix hit {fmt_pct(rates.prefix_cache_hit_rate)}   "
        f"preemptions {fmt_number(rates.preemptions)}",
        f"    {latency}{latency_lacks}",
    ]
    spec = rates.spec_decode
    if spec is not None:
        per_pos = " ".join(fmt_pct(a, 0) for a in spec.per_position)
        conditional = " ".join(fmt_pct(c, 0) for c in spec.conditional)
        lines.append(
            f"    spec decode k={spec.num_speculative_tokens}: acceptance {fmt_pct(spec.acceptance_rate)}   "
            f"mean length {fmt_number(spec.mean_acceptance_length, 2)}   per position {per_pos}   "
            f"conditional {conditional}"
        )
        weak = spec.weak_last_position
        if weak is not None:
            lines.append(
                f"    hint: draft position {weak} adds only {fmt_number(spec.per_position[weak], 2)} tokens "
                f"per step ({fmt_pct(spec.conditional[weak], 0)} after position {weak - 1}); "
                f"num_speculative_tokens={weak} may decode faster"
            )
    if rates.reset:
        lines.append("    note: the server restarted inside this window (counters reset)")
    return lines


def _data_parallel_lines(view: InstanceView) -> list[str]:
    """Each engine of a data-parallel instance; nothing for one engine."""
    if not view.engines:
        return []
    return [f"    data parallel: {data_parallel_summary(view.engines)}", *map(_engine_line, view.engines)]


def _engine_line(engine: EngineView) -> str:
    """One engine of a data-parallel instance: its own numbers over the window, and its share."""
    rates = engine.rates
    gen = rates.generation_tokens_per_s if rates else None
    share = "" if engine.share_ratio is None else f" ({fmt_number(engine.share_ratio, 2)}x its share"
    share += ", imbalanced)" if engine.imbalanced else (")" if share else "")
    return (
        f"      engine {engine.engine}: generation {fmt_rate(gen, ' tok/s')}{share}   "
        f"prompt {fmt_rate(rates.prompt_tokens_per_s if rates else None, ' tok/s')}   "
        f"running {fmt_number(engine.running)}   waiting {fmt_number(engine.waiting)}   "
        f"KV {fmt_pct(engine.kv_usage)} of {fmt_tokens(engine.kv_capacity_tokens)} tokens   "
        f"{fmt_latency('TTFT', rates.latency.get('ttft') if rates else None)}   "
        f"prefix hit {fmt_pct(rates.prefix_cache_hit_rate if rates else None)}"
    )


def _instance_lines(view: InstanceView) -> list[str]:
    head = f"  {view.name}  {view.url or '(worker)'}  {view.status.state.value}"
    if view.version:
        head += f"  {view.engine} {view.version}"
    if view.model_name:
        head += f"  {view.model_name}"
    lines = [head]
    mark = "" if view.status.state is State.UP else "! "  # an up instance's reason is news, not a problem
    lines.extend(f"    {mark}{reason}" for reason in view.status.reasons)
    if view.models:
        lines.append("    models: " + ", ".join(m.words for m in view.models))
        lines.extend(f"      {numbers.words}" for numbers in view.model_numbers)
    if view.launch is not None:
        lines.append(f"    launch readiness: {view.launch.reason}")
    if view.url is None:
        lines.append("    tensor-parallel worker: no HTTP of its own; its numbers are the head's")
        return lines
    if view.status.state in (State.DOWN, State.UNKNOWN, State.LOADING) and not view.engine_stats:
        return lines
    if view.metrics_problem is not None:
        return lines  # its /metrics could not be used: the reason above says why, no numbers follow
    if not view.engine_stats and view.models:
        lines.append("    no model loaded: its numbers are its loaded models'")
        return lines
    if not view.engine_stats:
        lines.append(f"    up without engine stats (--disable-log-stats): no {view.engine} numbers to show")
        return lines
    lines.append(
        f"    running {fmt_number(view.running)}   "
        f"waiting {fmt_waiting(view.waiting, view.waiting_for_capacity, view.waiting_deferred)}   "
        f"KV cache {kv_line(view.kv)}"
    )
    lines.extend(_rates_lines(view.rates, view.lacks))
    if "spec_accept_length" in view.reported and (view.rates is None or view.rates.spec_decode is None):
        rate, length = view.reported.get("spec_accept_rate"), view.reported["spec_accept_length"]
        lines.append(
            f"    spec decode (as {view.engine} reports it): acceptance {fmt_pct(rate)}"
            f"   mean length {fmt_number(length, 2)}   per draft position: –"
        )
    if view.rates is not None:
        lines.append("    roofline: " + "   ".join(roofline_parts(view.roofline)))
    if "requests" not in view.lacks:
        lines.extend(f"    {line}" for line in engine_lines(view.rates))
    lines.extend(_data_parallel_lines(view))
    if view.canary is not None:
        lines.append(f"    {canary_text(view.canary)}")
    return lines


def _node_lines(view: NodeView) -> list[str]:
    lines = [f"{view.name}  ({view.host})  {view.status.state.value}"]
    for instance in view.instances:
        lines.extend(_instance_lines(instance))
    gpu = view.gpu
    if gpu is not None:
        memory = "unified with the host" if gpu.unified_memory else fmt_gib(gpu.memory_used_bytes)
        lines.append(
            f"  GPU ({gpu.kind.value}): {fmt_number(gpu.temperature_c)} °C   "
            f"{fmt_number(gpu.power_w, 1)} W   util {fmt_pct(gpu.utilization, 0)}   SM clock "
            f"{fmt_number(None if gpu.sm_clock_hz is None else gpu.sm_clock_hz / 1e6)} MHz   memory {memory}"
            + (f"   throttle {throttle_text(gpu)}" if gpu.throttle is not None else "")
        )
    lines.extend(f"  {line}" for line in fabric_lines(view.fabric, view.jobs))
    lines.extend(_memory_lines(view))
    lines.extend(_host_lines(view))
    for service in view.services:
        latency = fmt_seconds(service.latency_s)
        lines.append(f"  service {service.name} ({service.kind}): {service.status.state.value}   {latency}")
    other = [r for r in view.status.reasons if not any(r in i.status.reasons for i in view.instances)]
    lines.extend(f"  ! {reason}" for reason in other)
    return lines


def _memory_lines(view: NodeView) -> list[str]:
    mem = view.host_memory
    if mem is None:
        return []
    lines = [
        f"  memory: {fmt_gib(mem.mem_total)} total   {fmt_gib(mem.mem_available)} available   "
        f"{fmt_gib(mem.mem_free)} free   page cache droppable {fmt_gib(mem.page_cache_droppable)}   "
        f"shmem {fmt_gib(mem.shmem)}"
    ]
    ledger = view.ledger
    if ledger is not None and ledger.segments():
        parts = "   ".join(f"{label} {fmt_gib(size)}" for label, size in ledger.segments())
        lines.append(f"  unified memory: {parts}")
    pressure = view.pressure
    if pressure is not None and pressure.some_avg10 is not None:
        lines.append(
            f"  memory pressure (PSI): some {fmt_number(pressure.some_avg10, 2)}% (10 s) "
            f"{fmt_number(pressure.some_avg60, 2)}% (60 s)   "
            f"full {fmt_number(pressure.full_avg10, 2)}% (10 s)"
        )
    return lines


def _host_lines(view: NodeView) -> list[str]:
    host = view.host_state
    lines: list[str] = []
    if host is not None:
        load = " ".join(f"{x:.2f}" for x in host.load) if host.load else NO_DATA
        uptime = f"{host.uptime_s / 86400:.1f} days" if host.uptime_s is not None else NO_DATA
        processes = host.processes
        count = len(processes) if processes is not None else None
        cpu = host.cpu_freq.text if host.cpu_freq is not None else f"CPU {NO_DATA} GHz"
        lines.append(f"  host: load {load}   up {uptime}   vLLM processes {fmt_number(count)}   {cpu}")
        for instance in view.instances:
            service = instance.service
            if service is None:
                continue
            detail = f"{service.state}" + (f" ({service.sub_state})" if service.sub_state else "")
            restarts = f", {service.restarts} restarts" if service.restarts else ""
            lines.append(f"  {service.manager} {service.name}: {detail}{restarts}")
        lines.extend(f"  ! host: {problem}" for problem in host.problems)
    if view.shm_leftovers:
        held = sum(e.held_bytes for e in view.shm_leftovers)
        names = ", ".join(e.name for e in view.shm_leftovers[:4])
        more = f" and {len(view.shm_leftovers) - 4} more" if len(view.shm_leftovers) > 4 else ""
        lines.append(f"  /dev/shm leftovers with no vLLM running: {fmt_gib(held)} in {names}{more}")
    return lines


def _replicas_lines(found: ModelReplicas) -> list[str]:
    """A model served by several instances: its latency over all of them (merged buckets), each
    replica's own p90 TTFT with its requests, and the slowest one."""
    names = ", ".join(r.where for r in found.replicas)
    lines = [f"replicas of {found.model}: {len(found.replicas)} instances ({names}), {found.reporting} reporting"]
    ttft = found.latency.get("ttft")
    if ttft is None or not ttft.count:
        lines.append("  no requests in the window")
        return lines
    lines.append(f"  fleet over {fmt_number(ttft.count)} requests (merged buckets):")
    for row in ((("ttft", "TTFT"), ("e2e", "e2e")), (("itl", "ITL"), ("tpot", "TPOT"), ("queue", "queue"))):
        lines.append("    " + "   ".join(fmt_latency(label, found.latency.get(key)) for key, label in row))
    own = "   ".join(
        f"{r.where} {fmt_seconds(r.ttft.p90 if r.ttft else None, r.ttft.floor if r.ttft else None)} "
        f"({fmt_number(r.requests)} req)"
        for r in found.replicas
    )
    lines.append(f"  per replica TTFT p90: {own}")
    slowest = found.slowest
    if slowest is not None and slowest.ttft is not None:
        lines.append(
            f"  slowest: {slowest.where}, TTFT p90 {fmt_seconds(slowest.ttft.p90, slowest.ttft.floor)} "
            f"over {fmt_number(slowest.requests)} requests"
        )
    else:
        lines.append(f"  slowest: {NO_DATA} (needs two replicas with {SLOWEST_MIN_REQUESTS} requests or more each)")
    if found.coarsened:
        lines.append(
            f"  note: bucket bounds differ between replicas ({', '.join(found.coarsened)}): merged on the shared ones"
        )
    return lines


def render_snapshot(views: Iterable[NodeView]) -> str:
    views = list(views)
    blocks = ["\n".join(_node_lines(v)) for v in views]
    blocks.extend("\n".join(_replicas_lines(found)) for found in model_replicas(views))
    return "\n\n".join(blocks) + "\n"


def render_check(views: Iterable[NodeView]) -> str:
    views = list(views)
    lines: list[str] = []
    for view in views:
        if view.status.state is State.UP:
            continue
        reasons = view.status.reasons or ("no reason given",)
        lines.extend(f"{view.name}: {view.status.state.value}: {reason}" for reason in reasons)
    counts: dict[str, int] = {}
    for view in views:
        counts[view.status.state.value] = counts.get(view.status.state.value, 0) + 1
    summary = ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))
    lines.append(f"{fmt_count(len(views), 'node')}: {summary}")
    return "\n".join(lines) + "\n"


JSON_SCHEMA_VERSION = 1  # of the payload below; sparktui.headless.json_schema describes it (docs/json.md)


def views_json(views: Iterable[NodeView], code: int | None = None) -> str:
    views = list(views)
    payload: dict[str, object] = {
        "schema_version": JSON_SCHEMA_VERSION,
        "sparktui": installed_version(),
        "nodes": to_jsonable(views),
        "replicas": to_jsonable(model_replicas(views)),
    }
    if code is not None:
        payload["exit_code"] = code
    return json.dumps(payload, indent=2)
