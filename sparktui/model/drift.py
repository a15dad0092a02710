"""Fleet drift: what each vLLM instance runs, side by side, with mismatches between the ranks of one
multi-node job (and between instances serving the same model) flagged.

A rank that runs another vLLM version, another block size or another KV-cache dtype than its head is a
classic source of hangs and garbage on two-node Spark jobs; so is a launch command that differs in
one flag. Everything here comes from what is already collected: ``/version``, the metrics'
``cache_config_info`` labels and spec-decode positions, and the ``vllm serve`` command line from the
host sampler's process list. The NCCL library each rank's vLLM processes have mapped (by sha256, from
the fabric reading: the pip wheel's and the system's can carry the same version string and behave
differently) is compared between the ranks of a job too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from sparktui.model.fabric import short_sums
from sparktui.model.fleet import FleetState, NodeState
from sparktui.model.numbers import is_digits
from sparktui.model.units import NO_DATA

# The cache_config_info labels that matter when two ranks must agree.
CACHE_KEYS = ("gpu_memory_utilization", "block_size", "cache_dtype", "enable_prefix_caching", "num_gpu_blocks")
FIELDS = ("version", "model", "spec_tokens", *CACHE_KEYS, "nccl", "command")


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


def nccl_value(node: NodeState) -> str | None:
    """The sha256 of the NCCL library the node's vLLM processes mapped (as ``short_sums`` shows it;
    several when they map different ones); None when not known."""
    sample = node.fabric
    if sample is None:
        return None
    sums = sorted({lib.sha256 for lib in sample.nccl if lib.sha256})
    return short_sums(sums) if sums else None


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
    values["nccl"] = nccl_value(node)
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
        for field in _compared(key):
            known = {m.values.get(field) for m in members if m.values.get(field) is not None}
            if len(known) > 1:
                for member in members:
                    if member.values.get(field) is not None:
                        mismatches.setdefault((member.node, member.instance), set()).add(field)
    return DriftReport(rows, {k: tuple(sorted(v)) for k, v in mismatches.items()})


# --- what the drift screen shows: the differences first, per group, nodes as columns ----------------

FIELD_LABELS = {
    "version": "vLLM version",
    "model": "model",
    "spec_tokens": "draft tokens",
    "gpu_memory_utilization": "GPU memory share",
    "block_size": "block size",
    "cache_dtype": "KV-cache dtype",
    "enable_prefix_caching": "prefix caching",
    "num_gpu_blocks": "GPU blocks",
    "nccl": "NCCL library (sha256)",
    "command": "launch command",
}
_BOOLEANS = {"true": "yes", "false": "no"}


def shown_value(value: str | None) -> str:
    """A reported value as the drift screen shows it: ``–`` unknown, ``yes``/``no`` for booleans,
    thousands separated for long counts."""
    if value is None:
        return NO_DATA
    text = value.strip()
    if text.lower() in _BOOLEANS:
        return _BOOLEANS[text.lower()]
    if is_digits(text) and len(text) > 4:
        return f"{int(text):,}"
    return text


@dataclass(frozen=True, slots=True)
class DriftLine:
    """One field across a group's members: what each shows, and whether they disagree."""

    field: str
    label: str
    values: tuple[str, ...]  # one per member, as shown
    differs: bool  # they disagree where they must agree
    varies: bool = False  # they disagree (a model's hosts may, on the draft length or the memory share)


@dataclass(frozen=True, slots=True)
class CommandWord:
    """A word of a launch command (a flag with its value counts as one) and whether the group's other
    members lack it."""

    text: str
    differs: bool


@dataclass(frozen=True, slots=True)
class DriftGroup:
    """Instances that must agree (the ranks of a job, or the hosts of one model; one instance alone
    when nothing runs beside it), side by side."""

    title: str
    members: tuple[str, ...]  # column headings: the node, or node/instance where a node has two
    lines: tuple[DriftLine, ...]  # every field but the command
    commands: tuple[tuple[CommandWord, ...] | None, ...]  # per member; None: not known
    commands_must_match: bool = False  # the ranks of a job; the hosts of a model may differ in flags

    @property
    def alone(self) -> bool:
        return len(self.members) == 1

    @property
    def differing(self) -> tuple[DriftLine, ...]:
        return tuple(line for line in self.lines if line.differs)

    @property
    def command_differs(self) -> bool:
        """The members' commands differ where they must match (the detail marks any difference)."""
        return self.commands_must_match and any(word.differs for words in self.commands if words for word in words)


def command_words(command: str) -> tuple[str, ...]:
    """A command line as words, each flag with its value (``--max-model-len 32768``) as one."""
    words = command.split()
    out: list[str] = []
    for word in words:
        if out and out[-1].startswith("--") and "=" not in out[-1] and " " not in out[-1] and not word.startswith("-"):
            out[-1] = f"{out[-1]} {word}"
        else:
            out.append(word)
    return tuple(out)


def _command_diff(commands: Sequence[str | None]) -> tuple[tuple[CommandWord, ...] | None, ...]:
    split = [command_words(c) if c is not None else None for c in commands]
    known = [set(words) for words in split if words is not None]
    common = set.intersection(*known) if known else set()
    return tuple(
        None if words is None else tuple(CommandWord(w, len(known) > 1 and w not in common) for w in words)
        for words in split
    )


def _compared(key: str) -> tuple[str, ...]:
    # The ranks of a job compare everything they both report (a worker serves no HTTP, so its unknowns
    # are left out); the hosts of one model only what must match for the same weights to behave alike.
    return FIELDS if key.startswith("job:") else ("version", *CACHE_KEYS[1:3])


def _group(title: str, members: Sequence[DriftRow], compared: Sequence[str]) -> DriftGroup:
    nodes = [m.node for m in members]
    headings = tuple(m.node if nodes.count(m.node) == 1 else f"{m.node}/{m.instance}" for m in members)
    lines = []
    for field in FIELDS:
        if field == "command":
            continue
        raw = [m.values.get(field) for m in members]
        known = {v for v in raw if v is not None}
        varies = len(known) > 1
        shown = tuple(shown_value(v) for v in raw)
        lines.append(DriftLine(field, FIELD_LABELS[field], shown, field in compared and varies, varies))
    commands = _command_diff([m.values.get("command") for m in members])
    return DriftGroup(title, headings, tuple(lines), commands, "command" in compared)


def drift_groups(report: DriftReport) -> tuple[DriftGroup, ...]:
    """The report as the screen reads it: the groups whose members disagree first (the most differences
    first), then those that agree, then each instance with nothing to compare to."""
    grouped = _groups(report.rows)
    groups = []
    for key, members in grouped.items():
        kind, name = key.split(":", 1)
        groups.append(_group(f"{kind} {name}", members, _compared(key)))
    in_a_group = {(m.node, m.instance) for members in grouped.values() for m in members}
    alone = [
        _group(f"{row.values.get('model') or row.instance}", [row], ())
        for row in report.rows
        if (row.node, row.instance) not in in_a_group
    ]
    groups.sort(key=lambda g: (-(len(g.differing) + g.command_differs), g.title))
    return (*groups, *alone)
