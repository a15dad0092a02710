"""Fleet drift: what each vLLM instance runs, side by side, with mismatches between the ranks of one
multi-node job (and between instances serving the same model) flagged.

A rank that runs another vLLM version, another block size or another KV-cache dtype than its head is a
classic source of hangs and garbage on two-node Spark jobs; so is a launch command that differs in
one flag. Everything here comes from what is already collected: ``/version``, the metrics'
``cache_config_info`` labels and spec-decode positions, and the ``vllm serve`` command line from the
host sampler's process list.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from sparktui.model.fleet import FleetState, NodeState

# The cache_config_info labels that matter when two ranks must agree.
CACHE_KEYS = ("gpu_memory_utilization", "block_size", "cache_dtype", "enable_prefix_caching", "num_gpu_blocks")
FIELDS = ("version", "model", "spec_tokens", *CACHE_KEYS, "command")


@dataclass(frozen=True, slots=True)
class DriftRow:
    node: str
    instance: str
    job: str | None
    role: str
    values: Mapping[str, str | None]  # FIELDS -> what this instance reports (None: unknown)


@dataclass(frozen=True, slots=True)
class DriftReport:
    rows: tuple[DriftRow, ...]
    mismatches: Mapping[tuple[str, str], tuple[str, ...]]  # (node, instance) -> fields that differ from peers

    def differs(self, node: str, instance: str, field: str) -> bool:
        return field in self.mismatches.get((node, instance), ())


# Flags that legitimately differ between the ranks of one job (or the hosts of one model).
RANK_FLAGS = {
    "--node-rank": 1,
    "--headless": 0,
    "--port": 1,
    "--host": 1,
    "--data-parallel-rank": 1,
    "--data-parallel-start-rank": 1,
    "--data-parallel-address": 1,
    "--master-addr": 1,
}


def normalized_command(args: str) -> str:
    """A ``vllm serve`` command line without the flags that differ by rank or host by design."""
    words = args.split()
    kept: list[str] = []
    skip = 0
    for word in words:
        if skip:
            skip -= 1
            continue
        flag = word.split("=", 1)[0]
        if flag in RANK_FLAGS:
            skip = 0 if "=" in word else RANK_FLAGS[flag]
            continue
        kept.append(word)
    return " ".join(kept)


def _command(node: NodeState) -> str | None:
    host = node.host
    if host is None or host.processes is None:
        return None
    serving = [p for p in host.processes if p.kind == "serve"]
    return serving[0].args if serving else None


def _row(node: NodeState, instance_name: str) -> DriftRow:
    instance = node.instances[instance_name]
    spec = instance.spec
    latest = instance.tracker.latest
    values: dict[str, str | None] = dict.fromkeys(FIELDS)
    values["version"] = instance.version
    if latest is not None and latest.models:
        model = latest.models[min(latest.models)]
        values["model"] = model.model_name
        positions = [k for k in model.counters if k.startswith("spec_accepted_pos:")]
        values["spec_tokens"] = str(len(positions)) if positions else "0"
        config = next(iter(latest.cache_config.values()), None)
        if config is not None:
            for key in CACHE_KEYS:
                values[key] = config.labels.get(key)
    elif instance.served_models:
        values["model"] = instance.served_models[0]
    command = _command(node) if len(node.instances) == 1 else None
    values["command"] = normalized_command(command) if command else None
    return DriftRow(node.spec.name, instance_name, spec.job, spec.role, values)


def _groups(rows: Iterable[DriftRow]) -> dict[str, list[DriftRow]]:
    """Instances that must agree: the ranks of a job, and instances serving the same model."""
    groups: dict[str, list[DriftRow]] = {}
    for row in rows:
        if row.job:
            groups.setdefault(f"job:{row.job}", []).append(row)
        model = row.values.get("model")
        if model:
            groups.setdefault(f"model:{model}", []).append(row)
    return {key: members for key, members in groups.items() if len(members) > 1}


def drift_report(state: FleetState) -> DriftReport:
    rows = tuple(_row(node, name) for node in state.nodes.values() for name in node.instances)
    mismatches: dict[tuple[str, str], set[str]] = {}
    for key, members in _groups(rows).items():
        # A worker serves no HTTP: compare only what the ranks both report.
        fields = FIELDS if key.startswith("job:") else ("version", *CACHE_KEYS[1:3])
        for field in fields:
            known = {m.values.get(field) for m in members if m.values.get(field) is not None}
            if len(known) > 1:
                for member in members:
                    if member.values.get(field) is not None:
                        mismatches.setdefault((member.node, member.instance), set()).add(field)
    return DriftReport(rows, {k: tuple(sorted(v)) for k, v in mismatches.items()})
