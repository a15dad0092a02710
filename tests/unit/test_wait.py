"""The tests' one wait helper: it waits on the condition, sync or async, and fails naming what it waited for."""

from __future__ import annotations

import asyncio

import pytest

from tests.support.wait import wait_until


async def test_an_async_check_is_awaited_until_it_holds() -> None:
    asked: list[int] = []

    async def third_time() -> bool:
        await asyncio.sleep(0)
        asked.append(1)
        return len(asked) >= 3

    await wait_until(third_time, 5.0, interval_s=0.001)
    assert len(asked) == 3


async def test_a_check_that_never_holds_fails_naming_what_and_the_detail() -> None:
    with pytest.raises(AssertionError, match=r"^the door opening did not happen within 0.05 s; it is shut$"):
        await wait_until(lambda: False, 0.05, what="the door opening", detail=lambda: "it is shut", interval_s=0.01)
