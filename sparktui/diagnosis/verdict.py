"""A node's one verdict: its status as its observations and its open findings judge it together.

The model derives a status from what it observed (``/health``, the service manager, the host); the
diagnosis derives findings from the same observations over time. Shown side by side they could
disagree: a node green ``● up`` with an open CRIT (a GPU Xid, a wedged engine), ``▲ degraded`` while a
crash loop's CRIT is open. ``judged`` joins them, in the monitor core and nowhere else, so every
consumer (the fleet table, the node screen's banner, the kiosk, ``check``, ``snapshot``, ``watch``, the
alert rules) reads one status:

- an open CRIT finding on an instance that is not serving cleanly (loading, degraded, down, unknown) makes
  that instance ``down``: the finding is why it does not serve (a crash loop from its first failed
  start, a wedged engine whose ``/health`` still answers 200);
- any other open CRIT finding (a GPU fault, a spinning rank, on a node whose engine still answers) makes
  its subject ``failing``;
- an open WARN finding makes its subject at least ``degraded``;
- INFO findings judge nothing (a cold JIT is how a start looks, not a fault).

A finding never lowers a status (a down instance with a WARN stays down), and a node whose polls stopped
stays ``stale``: its findings are the last it had. A raised subject's first reasons are the findings'
titles, so the banner says what the findings panel says, then what was observed. The diagnosis itself
reads the observed status, never the judged one: a finding must not keep itself open.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from sparktui.diagnosis.catalogue import Severity
from sparktui.diagnosis.state import Finding
from sparktui.model.fleet import InstanceView, NodeView
from sparktui.model.status import State, Status

# The state an open finding of each severity raises its subject to (INFO: none).
FLOOR = {Severity.WARN: State.DEGRADED, Severity.CRIT: State.FAILING}


def finding_floor(finding: Finding, observed: State) -> State | None:
    """The least state ``finding`` allows its subject, observed in ``observed``; None: no floor.
    A CRIT on a subject that is not serving cleanly is why it does not serve: ``down``."""
    floor = FLOOR.get(finding.severity)
    if floor is State.FAILING and observed is not State.UP:
        return State.DOWN
    return floor


def raised(status: Status, findings: Sequence[Finding], label: str | None = None) -> Status:
    """``status`` raised by ``findings`` (each to its ``finding_floor``); the reasons of a raised
    status are the findings' titles that raised it (``label``: the instance's name before each)."""
    floors = [(f, finding_floor(f, status.state)) for f in findings]
    top = max((s for _, s in floors if s is not None), key=lambda s: s.rank, default=None)
    if top is None or top.rank <= status.state.rank or status.state is State.STALE:
        return status
    prefix = f"{label}: " if label else ""
    titles = (f"{prefix}{f.title}" for f, s in floors if s is top)
    return Status(top, tuple(dict.fromkeys((*titles, *status.reasons))))


def judged(view: NodeView, findings: Sequence[Finding]) -> NodeView:
    """``view`` with its instances' and its own status raised by its open ``findings`` (the module
    docstring's rules). Without a finding that raises anything, ``view`` itself."""
    active = [f for f in findings if f.active and f.severity in FLOOR]
    if not active:
        return view
    names = {i.name for i in view.instances}
    instances = tuple(_judged_instance(i, [f for f in active if f.instance == i.name]) for i in view.instances)
    node_findings = [f for f in active if f.instance not in names]
    parts = [view.status, *(i.status for i in instances if i.status.state.rank > view.status.state.rank)]
    status = Status.worst(parts) if len(parts) > 1 else view.status
    if view.status.state is State.STALE:
        status = view.status
    status = raised(status, node_findings)
    if status == view.status and instances == view.instances:
        return view
    return replace(view, status=status, instances=instances)


def _judged_instance(instance: InstanceView, findings: Sequence[Finding]) -> InstanceView:
    status = raised(instance.status, findings, instance.name)
    return instance if status == instance.status else replace(instance, status=status)
