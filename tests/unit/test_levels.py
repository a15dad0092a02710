"""Levels against the config's thresholds: what turns a cell amber or red."""

from __future__ import annotations

import pytest

from sparktui.model.levels import (
    FALLING_MIN_POINTS,
    GIB,
    Level,
    falling_level,
    gpu_temp_level,
    kv_level,
    memory_level,
    ttft_level,
    waiting_level,
)
from sparktui.model.specs import Thresholds

T = Thresholds(
    kv_usage_warn=0.9, waiting_warn=8, ttft_p90_warn_s=10.0, mem_available_warn_gib=8, mem_available_crit_gib=4
)


@pytest.mark.parametrize(("kv", "level"), [(None, None), (0.0, Level.OK), (0.899, Level.OK), (0.9, Level.WARN)])
def test_kv_warns_from_its_threshold(kv: float | None, level: Level | None) -> None:
    assert kv_level(kv, T) is level


def test_nan_has_no_level() -> None:
    assert kv_level(float("nan"), T) is None


@pytest.mark.parametrize(("waiting", "level"), [(None, None), (7, Level.OK), (8, Level.WARN), (83, Level.WARN)])
def test_waiting_warns_from_its_threshold(waiting: float | None, level: Level | None) -> None:
    assert waiting_level(waiting, T) is level


def test_waiting_threshold_zero_never_warns() -> None:
    assert waiting_level(1000, Thresholds(waiting_warn=0)) is Level.OK


@pytest.mark.parametrize(("ttft", "level"), [(None, None), (10.0, Level.OK), (10.01, Level.WARN), (16.8, Level.WARN)])
def test_ttft_warns_above_its_threshold(ttft: float | None, level: Level | None) -> None:
    assert ttft_level(ttft, T) is level


@pytest.mark.parametrize(
    ("gib", "level"), [(None, None), (20.0, Level.OK), (8.0, Level.OK), (7.9, Level.WARN), (3.9, Level.CRIT)]
)
def test_memory_available_is_warning_then_critical(gib: float | None, level: Level | None) -> None:
    assert memory_level(None if gib is None else gib * GIB, T) is level


def test_gpu_temperature_warns_from_its_threshold() -> None:
    assert gpu_temp_level(84.9, T) is Level.OK
    assert gpu_temp_level(85.0, T) is Level.WARN
    assert gpu_temp_level(None, T) is None


def test_a_falling_acceptance_length_warns_a_steady_one_does_not() -> None:
    steady = [2.6] * FALLING_MIN_POINTS
    assert falling_level(steady) is Level.OK
    assert falling_level([*steady, 2.6 * 0.84]) is Level.WARN  # 16 % under the median
    assert falling_level([*steady, 2.6 * 0.90]) is Level.OK
    assert falling_level([2.6, 1.0]) is None  # too short to judge


def test_levels_rank_in_severity_order() -> None:
    assert Level.OK.rank < Level.WARN.rank < Level.CRIT.rank
