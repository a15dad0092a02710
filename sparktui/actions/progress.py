"""An action while it runs, as the screens show it from its first second: its title, how long it has
run, the step it is on and the last line of its progress (pure; the dashboard feeds it the runner's
progress lines, ``ProgressCallback``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from sparktui.model.units import fmt_duration

MAX_LINES = 200  # progress lines kept of one running action (a warmup that polls for minutes)


@dataclass(slots=True)
class RunningAction:
    """One confirmed action until it ends. ``started`` is on the dashboard's clock, ``at`` its wall-clock
    time as the action log shows it."""

    title: str
    started: float
    at: str
    nodes: tuple[str, ...] = ()  # the nodes it acts on
    step: str | None = None  # "step 2/3: restart spark1/qwen36" of a fix
    last: str | None = None  # the newest progress line
    lines: list[str] = field(default_factory=list)

    def heard(self, message: str) -> None:
        """A progress line of the runner's."""
        text = message.strip()
        if not text:
            return
        if text.startswith("step "):
            self.step = text
        self.last = text
        self.lines.append(message)
        del self.lines[:-MAX_LINES]

    def summary(self, now: float) -> str:
        """One line: "fix spark1: … · running 34s · step 2/3: restart spark1/qwen36 · [1/2] …"."""
        parts = [self.title, f"running {fmt_duration(max(0.0, now - self.started))}"]
        if self.step is not None:
            parts.append(self.step)
        if self.last is not None and self.last != self.step and not self.last.endswith(": started"):
            parts.append(self.last)
        return " · ".join(parts)
