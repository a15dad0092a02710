"""The one way tests wait: on a condition, with a deadline, never on a sleep of a guessed length."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable


async def wait_until(
    check: Callable[[], object],
    timeout_s: float = 10.0,
    *,
    what: str = "the condition",
    detail: Callable[[], str] | None = None,
    interval_s: float = 0.02,
) -> None:
    """Poll ``check()`` on the event loop until it holds; fail naming ``what`` (and ``detail()``, the
    state worth seeing) when it has not held within ``timeout_s`` seconds of wall-clock time.

    ``check`` may be a coroutine function (asking a server, say): its result is awaited each time.
    """
    deadline = time.monotonic() + timeout_s
    while not await _holds(check):
        if time.monotonic() >= deadline:
            extra = f"; {detail()}" if detail is not None else ""
            raise AssertionError(f"{what} did not happen within {timeout_s:g} s{extra}")
        await asyncio.sleep(interval_s)


async def _holds(check: Callable[[], object]) -> bool:
    result = check()
    if inspect.isawaitable(result):
        result = await result
    return bool(result)
