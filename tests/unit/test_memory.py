"""Host memory ledger, PSI and launch readiness against tests/data/proc and tests/data/exporters.

Expected numbers are computed by hand from the fixture lines (bytes = kB × 1024).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sparktui.model.memory import (
    GIB,
    HostMemory,
    MemoryPressure,
    host_memory_from_exposition,
    launch_readiness,
    parse_meminfo,
    parse_pressure,
    pressure_from_exposition,
)
from sparktui.model.promtext import parse

DATA = Path(__file__).resolve().parents[1] / "data"
GB10_MEMTOTAL = 127600748 * 1024  # MemTotal:       127600748 kB -> 130663165952


def _gb10() -> HostMemory:
    return parse_meminfo((DATA / "proc" / "meminfo-gb10.txt").read_text())


# --- /proc/meminfo ----------------------------------------------------------------------------------


def test_parse_meminfo_gb10_fields_in_bytes() -> None:
    mem = _gb10()
    assert mem.mem_total == GB10_MEMTOTAL == 130663165952
    assert mem.mem_available == 64953448 * 1024
    assert mem.mem_free == 24186532 * 1024
    assert mem.buffers == 531864 * 1024
    assert mem.cached == 45361720 * 1024
    assert mem.shmem == 6144852 * 1024
    assert mem.dirty == 2316 * 1024
    assert mem.writeback == 0
    assert mem.sreclaimable == 1623040 * 1024
    assert mem.available_estimated is False


def test_meminfo_used_droppable_and_available_fraction() -> None:
    mem = _gb10()
    assert mem.used == (127600748 - 64953448) * 1024 == 64150835200
    assert mem.page_cache_droppable == (45361720 - 6144852) * 1024 == 40158072832
    assert mem.available_fraction == pytest.approx(64953448 / 127600748)


def test_meminfo_without_memavailable_keeps_it_none_not_zero() -> None:
    mem = parse_meminfo("MemTotal:        1000 kB\nMemFree:          400 kB\nCached:           300 kB\n")
    assert mem.mem_available is None
    assert mem.used is None
    assert mem.available_fraction is None
    assert mem.page_cache_droppable is None  # Shmem missing


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("<html><body>502 Bad Gateway</body></html>\n", "/proc/meminfo line 1 is not 'Key: value [kB]'"),
        ("MemTotal:       127600748 kB\nMemFree: lots kB\n", "/proc/meminfo line 2 is not 'Key: value [kB]'"),
        ("MemTotal:       127600748 MB\n", "/proc/meminfo line 1 is not 'Key: value [kB]'"),
        ("", "/proc/meminfo is empty"),
        ("MemFree:          400 kB\n", "/proc/meminfo has no MemTotal line"),
    ],
)
def test_parse_meminfo_garbage_raises_a_clear_one_line_value_error(text: str, message: str) -> None:
    with pytest.raises(ValueError, match="^" + message.replace("[", r"\[").replace("]", r"\]")) as info:
        parse_meminfo(text)
    assert "\n" not in str(info.value)


# --- /proc/pressure/memory -----------------------------------------------------------------------------


def test_parse_pressure_fixture() -> None:
    psi = parse_pressure((DATA / "proc" / "pressure-memory.txt").read_text())
    # some avg10=1.84 avg60=0.97 avg300=0.41 total=73518294
    assert (psi.some_avg10, psi.some_avg60) == (1.84, 0.97)
    assert psi.some_total_s == pytest.approx(73.518294)  # µs -> s
    # full avg10=0.72 avg60=0.38 avg300=0.15 total=29865107
    assert (psi.full_avg10, psi.full_avg60) == (0.72, 0.38)
    assert psi.full_total_s == pytest.approx(29.865107)


def test_parse_pressure_without_full_line_leaves_full_none() -> None:
    psi = parse_pressure("some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
    assert psi.some_avg10 == 0.0
    assert psi.some_total_s == 0.0
    assert psi.full_avg10 is None
    assert psi.full_total_s is None


@pytest.mark.parametrize(
    "text",
    ["some avg10=abc avg60=0.00 avg300=0.00 total=0\n", "cpu 12 34\n", "full avg10=0.00 total=0\n"],
)
def test_parse_pressure_garbage_raises_value_error(text: str) -> None:
    with pytest.raises(ValueError, match=r"^/proc/pressure/memory line 1 is not"):
        parse_pressure(text)


# --- from exporter scrapes ----------------------------------------------------------------------------


def test_host_memory_from_node_exporter_capture() -> None:
    mem = host_memory_from_exposition(parse((DATA / "exporters" / "node_exporter.prom").read_text()))
    assert mem == HostMemory(
        mem_total=3.831959552e09,
        mem_available=None,  # the capture has no node_memory_MemAvailable_bytes: None, not 0
        mem_free=2.30883328e08,
        buffers=2.256896e07,
        cached=9.53229312e08,
        shmem=6.0809216e08,
        dirty=1.077248e06,
        writeback=0.0,
        sreclaimable=4.5846528e07,
    )
    assert mem.used is None
    assert mem.page_cache_droppable == 9.53229312e08 - 6.0809216e08 == 345137152


def test_host_memory_from_dgx_spark_is_total_and_estimated_used() -> None:
    mem = host_memory_from_exposition(parse((DATA / "exporters" / "dgx_spark_prometheus.prom").read_text()))
    assert mem is not None
    assert mem.mem_total == 1.30663165952e11  # memory_total_bytes
    assert mem.used == 1.10476818432e11  # memory_used_bytes, the exporter's own (approximate) number
    assert mem.available_estimated is True
    assert mem.mem_free is None
    assert mem.cached is None


def test_host_memory_from_gpu_only_scrape_is_none() -> None:
    assert host_memory_from_exposition(parse((DATA / "exporters" / "dcgm_exporter.prom").read_text())) is None


def test_pressure_from_node_exporter_capture_has_totals_only() -> None:
    psi = pressure_from_exposition(parse((DATA / "exporters" / "node_exporter.prom").read_text()))
    # node_pressure_memory_waiting_seconds_total 0 / node_pressure_memory_stalled_seconds_total 0
    assert psi == MemoryPressure(some_total_s=0.0, full_total_s=0.0)


def test_pressure_from_scrape_without_psi_is_none() -> None:
    dgx_spark = parse((DATA / "exporters" / "dgx_spark_prometheus.prom").read_text())
    assert pressure_from_exposition(dgx_spark) is None


# --- launch readiness -------------------------------------------------------------------------------


def test_launch_ready_when_memavailable_covers_ceil_of_total_times_utilization() -> None:
    result = launch_readiness(_gb10(), 0.5)
    # ceil(130663165952 × 0.5) = 65331582976 <= MemAvailable 66512330752
    assert result.ready is True
    assert result.needed_bytes == 65331582976
    assert result.available_bytes == 66512330752
    assert result.shortfall_bytes == 0
    assert result.reason == (
        "needs 60.8 GiB (0.5 × 121.7 GiB MemTotal), 61.9 GiB available: fits with 1.1 GiB to spare"
    )


def test_launch_not_ready_when_cache_is_already_counted_in_memavailable() -> None:
    result = launch_readiness(_gb10(), 0.55)
    # ceil(130663165952 × 0.55) = ceil(71864741273.6) = 71864741274; short by 71864741274 − 66512330752.
    assert result.ready is False
    assert result.needed_bytes == 71864741274
    assert result.shortfall_bytes == 5352410522
    assert result.droppable_bytes == 40158072832
    # MemFree + (Cached − Shmem) = 24767008768 + 40158072832 = 64925081600 < MemAvailable: no gain.
    assert result.would_fit_after_drop is False
    assert result.reason == (
        "needs 66.9 GiB (0.55 × 121.7 GiB MemTotal), 61.9 GiB available: short by 5.0 GiB; "
        "dropping 37.4 GiB of page cache would not help much: MemAvailable already counts it"
    )


def test_launch_not_ready_but_fits_after_dropping_page_cache() -> None:
    # The field report's shape: MemAvailable far below MemFree + page cache.
    mem = HostMemory(mem_total=GB10_MEMTOTAL, mem_available=30 * GIB, mem_free=11 * GIB, cached=100 * GIB, shmem=GIB)
    result = launch_readiness(mem, 0.85, device_total_bytes=120 * GIB)
    # ceil(120 GiB × 0.85) = 102 GiB = 109521666048 bytes; short by 72 GiB; 11 + 99 = 110 GiB after drop.
    assert result.ready is False
    assert result.needed_bytes == 109521666048
    assert result.shortfall_bytes == 72 * GIB
    assert result.droppable_bytes == 99 * GIB
    assert result.would_fit_after_drop is True
    assert result.reason == (
        "needs 102.0 GiB (0.85 × 120.0 GiB device total), 30.0 GiB available: short by 72.0 GiB; "
        "dropping 99.0 GiB of page cache would fit"
    )


def test_launch_not_ready_even_after_dropping_page_cache() -> None:
    mem = HostMemory(mem_total=GB10_MEMTOTAL, mem_available=30 * GIB, mem_free=20 * GIB, cached=71 * GIB, shmem=GIB)
    result = launch_readiness(mem, 0.85, device_total_bytes=120 * GIB)
    # 20 + 70 = 90 GiB after drop < 102 GiB needed.
    assert result.ready is False
    assert result.would_fit_after_drop is False
    assert result.reason.endswith("dropping 70.0 GiB of page cache would leave about 90.0 GiB, still short")


def test_launch_uses_memfree_when_memavailable_exceeds_memtotal() -> None:
    # psutil: "if avail > total: avail = free" (container-distorted values).
    mem = HostMemory(mem_total=100 * GIB, mem_available=150 * GIB, mem_free=40 * GIB)
    result = launch_readiness(mem, 0.5)
    assert result.available_bytes == 40 * GIB
    assert result.ready is False
    assert result.shortfall_bytes == 10 * GIB


def test_launch_readiness_unknown_without_memavailable() -> None:
    mem = HostMemory(mem_total=GB10_MEMTOTAL, mem_free=20 * GIB)
    result = launch_readiness(mem, 0.5)
    assert result.ready is None
    assert result.needed_bytes == 65331582976
    assert result.available_bytes is None
    assert "MemAvailable" in result.reason


def test_launch_readiness_unknown_from_dgx_spark_estimate() -> None:
    mem = host_memory_from_exposition(parse((DATA / "exporters" / "dgx_spark_prometheus.prom").read_text()))
    assert mem is not None
    result = launch_readiness(mem, 0.5)
    assert result.ready is None
    assert "only total and used" in result.reason


def test_launch_readiness_unknown_without_total() -> None:
    result = launch_readiness(HostMemory(mem_available=50 * GIB), 0.5)
    assert result.ready is None
    assert "total is unknown" in result.reason


@pytest.mark.parametrize("utilization", [0.0, 1.2, -0.5, float("nan")])
def test_launch_readiness_rejects_utilization_outside_vllm_range(utilization: float) -> None:
    result = launch_readiness(_gb10(), utilization)
    assert result.ready is None
    assert "outside vLLM's range (0, 1]" in result.reason
