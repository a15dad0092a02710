"""Status of a node, a vLLM instance or a service: one state and the reasons for it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum


class State(StrEnum):
    UP = "up"
    UNKNOWN = "unknown"
    LOADING = "loading"
    DEGRADED = "degraded"
    FAILING = "failing"  # serving, with an open CRIT finding (``diagnosis.verdict``)
    STALE = "stale"
    DOWN = "down"

    @property
    def rank(self) -> int:
        return _RANK[self]

    @property
    def serving(self) -> bool:
        """Whether an instance in this state answers requests (its numbers are live)."""
        return self in (State.UP, State.DEGRADED, State.FAILING)

    @property
    def severity(self) -> int:
        """0 healthy, 1 needs a look, 2 down or unreachable (``sparktui check`` exit codes)."""
        return _SEVERITY[self]


_RANK = {state: index for index, state in enumerate(State)}
_SEVERITY = {
    State.UP: 0,
    State.UNKNOWN: 1,
    State.LOADING: 1,
    State.DEGRADED: 1,
    State.FAILING: 2,
    State.STALE: 2,
    State.DOWN: 2,
}


@dataclass(frozen=True, slots=True)
class Status:
    state: State
    reasons: tuple[str, ...] = ()

    @property
    def summary(self) -> str:
        return f"{self.state.value}: {'; '.join(self.reasons)}" if self.reasons else self.state.value

    @staticmethod
    def worst(statuses: Iterable[Status]) -> Status:
        """The worst state, with the reasons of every part in that state."""
        items = list(statuses)
        if not items:
            return Status(State.UNKNOWN, ("nothing configured to watch",))
        worst_state = max((s.state for s in items), key=lambda s: s.rank)
        reasons = tuple(r for s in items if s.state is worst_state for r in s.reasons)
        return Status(worst_state, reasons)


UP = Status(State.UP)
