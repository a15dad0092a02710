"""The difference column of ``sparktui snapshot --compare``: in the number's own terms."""

from __future__ import annotations

import pytest

from sparktui.engines import registry
from sparktui.engines.vllm.promql import NUMBERS
from sparktui.headless.compare import _difference
from sparktui.sources.promql import engine_numbers

SHARE = next(number for number in NUMBERS if number.percent)
RATE = next(number for number in NUMBERS if not number.percent and number.unit)


@pytest.mark.parametrize(
    ("direct", "prometheus", "shown"),
    [(0.0, 0.0045, "+0.45 pp"), (0.30, 0.31, "+1.00 pp"), (0.5, 0.25, "-25.00 pp"), (0.2, 0.2, "same")],
)
def test_a_share_differs_in_percentage_points(direct: float, prometheus: float, shown: str) -> None:
    assert _difference(SHARE, direct, prometheus) == shown


def test_another_number_differs_relatively_or_in_its_unit_from_zero() -> None:
    assert _difference(RATE, 100.0, 101.0) == "+1.0 %"
    assert _difference(RATE, 0.0, 2.5) == f"+2.5{RATE.unit}"


def test_no_difference_without_both_sides() -> None:
    assert _difference(SHARE, None, 0.3) == _difference(RATE, 1.0, None) == ""


def test_each_engine_gives_the_numbers_compared_for_it() -> None:
    assert engine_numbers("vllm") == registry()["vllm"].numbers == NUMBERS
    assert len({number.key for number in NUMBERS}) == len(NUMBERS)
    for kind in ("sglang", "trtllm", "nim", "llamacpp"):
        assert engine_numbers(kind) == registry()[kind].numbers != ()
    assert engine_numbers("ollama") == engine_numbers("no-such-engine") == ()
