"""A running action's one line: its title, elapsed time, step and last progress line."""

from __future__ import annotations

from sparktui.actions.progress import MAX_LINES, RunningAction


def test_a_running_fix_says_its_step_its_time_and_its_last_line() -> None:
    running = RunningAction("fix spark1: page-cache-blocks-start", started=100.0, at="00:21:07")
    assert running.summary(100.4) == "fix spark1: page-cache-blocks-start · running 0s"
    running.heard("fix spark1: page-cache-blocks-start: started (drop-caches → restart → warmup)")
    running.heard("step 2/3: restart spark1/qwen36")
    assert (
        running.summary(134.0) == "fix spark1: page-cache-blocks-start · running 34s · step 2/3: restart spark1/qwen36"
    )
    running.heard("    waiting for http://spark1:8000/health: connection refused (12 s)")
    assert running.summary(150.0).endswith(
        "step 2/3: restart spark1/qwen36 · waiting for http://spark1:8000/health: connection refused (12 s)"
    )


def test_a_running_action_keeps_a_bounded_log_of_its_progress() -> None:
    running = RunningAction("warmup spark1/qwen36", started=0.0, at="00:00:00")
    for index in range(MAX_LINES + 50):
        running.heard(f"line {index}")
    running.heard("   ")  # nothing to say: not a line
    assert len(running.lines) == MAX_LINES and running.lines[-1] == f"line {MAX_LINES + 49}"
