"""GPU exporter detection and normalisation against the captures in tests/data/exporters/.

Expected numbers are read off the fixture files by hand (line quoted in each test).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sparktui.model.exporters import (
    ExporterKind,
    GpuReading,
    clock_figure,
    detect,
    gpu_reading,
    nvidia_smi_q_reading,
    throttle_from_mask,
    throttle_text,
    throttle_words,
)
from sparktui.model.promtext import Exposition, parse
from sparktui.model.units import NO_DATA

EXPORTERS = Path(__file__).resolve().parents[1] / "data" / "exporters"
MIB = 1024 * 1024


def _text(name: str) -> str:
    return (EXPORTERS / name).read_text()


def _expo(name: str) -> Exposition:
    return parse(_text(name))


def _without(text: str, fragment: str) -> str:
    """The exposition with every line (HELP, TYPE, sample) naming ``fragment`` removed."""
    return "".join(line for line in text.splitlines(keepends=True) if fragment not in line)


def _reading(text: str, host_mem_total_bytes: float | None = None) -> GpuReading:
    reading = gpu_reading(parse(text), host_mem_total_bytes)
    assert reading is not None
    return reading


# --- detection -----------------------------------------------------------------------------------


def test_detect_nvidia_gpu_exporter_from_h100_capture() -> None:
    assert detect(_expo("nvidia_gpu_exporter.prom")) is ExporterKind.NVIDIA_GPU_EXPORTER


def test_detect_dcgm_from_t4_capture() -> None:
    assert detect(_expo("dcgm_exporter.prom")) is ExporterKind.DCGM


def test_detect_node_exporter_from_memory_and_psi_capture() -> None:
    assert detect(_expo("node_exporter.prom")) is ExporterKind.NODE_EXPORTER


def test_detect_dgx_spark_from_constructed_ateska_scrape() -> None:
    assert detect(_expo("dgx_spark_prometheus.prom")) is ExporterKind.DGX_SPARK


@pytest.mark.parametrize(
    ("gpu_file", "kind"),
    [
        ("nvidia_gpu_exporter.prom", ExporterKind.NVIDIA_GPU_EXPORTER),
        ("dcgm_exporter.prom", ExporterKind.DCGM),
        ("dgx_spark_prometheus.prom", ExporterKind.DGX_SPARK),
    ],
)
def test_detect_gpu_kind_wins_over_node_exporter_in_one_scrape(gpu_file: str, kind: ExporterKind) -> None:
    both = parse(_text("node_exporter.prom") + _text(gpu_file))
    assert detect(both) is kind


def test_detect_bare_gpu_names_without_host_label_are_unknown() -> None:
    # ateska's names are generic; without its host label they prove nothing.
    expo = parse("gpu_temperature_celsius 58\nmemory_used_bytes 1e9\n")
    assert detect(expo) is ExporterKind.UNKNOWN


def test_detect_unknown_for_an_unrelated_go_process() -> None:
    go_only = "".join(
        line
        for line in _text("dgx_spark_prometheus.prom").splitlines(keepends=True)
        if line.startswith(("go_", "process_", "promhttp_", "# HELP go_", "# TYPE go_"))
    )
    assert detect(parse(go_only)) is ExporterKind.UNKNOWN


# --- nvidia_gpu_exporter (H100 capture) -----------------------------------------------------------


def test_nvidia_reading_equals_h100_capture() -> None:
    reading = _reading(_text("nvidia_gpu_exporter.prom"))
    assert reading.kind is ExporterKind.NVIDIA_GPU_EXPORTER
    # nvidia_smi_gpu_info{...,name="NVIDIA H100 80GB HBM3",...} 1
    assert reading.name == "NVIDIA H100 80GB HBM3"
    assert reading.temperature_c == 59  # nvidia_smi_temperature_gpu 59
    assert reading.power_w == 631.95  # nvidia_smi_power_draw_watts 631.95
    assert reading.utilization == 1.0  # nvidia_smi_utilization_gpu_ratio 1 (already 0..1)
    assert reading.sm_clock_hz == 1.98e9  # nvidia_smi_clocks_current_sm_clock_hz 1.98e+09 (already Hz)
    assert reading.memory_total_bytes == 8.5520809984e10  # nvidia_smi_memory_total_bytes
    assert reading.memory_used_bytes == 2.0780679168e10  # nvidia_smi_memory_used_bytes
    assert reading.unified_memory is False
    assert reading.collect_ok is True  # nvidia_smi_last_collect_success 1
    assert reading.problems == ()


def test_nvidia_without_memory_series_is_unified_with_memory_none_not_zero() -> None:
    # What a GB10 scrape looks like: nvidia-smi answers [N/A] for memory.*, so the exporter omits
    # nvidia_smi_memory_{total,used,free,reserved}_bytes.
    gb10_like = _without(_text("nvidia_gpu_exporter.prom"), "nvidia_smi_memory_")
    assert "nvidia_smi_memory_total_bytes" not in parse(gb10_like)
    reading = _reading(gb10_like)
    assert reading.unified_memory is True
    assert reading.memory_total_bytes is None
    assert reading.memory_used_bytes is None
    # The other readings are untouched.
    assert (reading.temperature_c, reading.power_w, reading.utilization) == (59, 631.95, 1.0)
    assert reading.problems == ()


def test_nvidia_memory_total_within_3_percent_of_host_ram_is_unified() -> None:
    text = _text("nvidia_gpu_exporter.prom")
    gpu_total = 8.5520809984e10
    unified = _reading(text, host_mem_total_bytes=gpu_total * 1.02)
    assert unified.unified_memory is True
    assert unified.memory_total_bytes is None
    assert unified.memory_used_bytes is None
    discrete = _reading(text, host_mem_total_bytes=gpu_total * 1.05)
    assert discrete.unified_memory is False
    assert discrete.memory_total_bytes == gpu_total


def test_nvidia_failed_collection_sets_collect_ok_false_with_a_problem() -> None:
    text = _text("nvidia_gpu_exporter.prom").replace(
        "nvidia_smi_last_collect_success 1\n", "nvidia_smi_last_collect_success 0\n"
    )
    reading = _reading(text)
    assert reading.collect_ok is False
    assert any("last collection failed" in problem for problem in reading.problems)


def test_nvidia_failed_collection_without_gpu_series_is_reported_not_none() -> None:
    text = "nvidia_smi_command_exit_code 9\nnvidia_smi_failed_scrapes_total 3\nnvidia_smi_last_collect_success 0\n"
    reading = _reading(text)
    assert reading.collect_ok is False
    assert reading.temperature_c is None
    assert reading.memory_total_bytes is None


def test_nvidia_several_gpus_takes_index_0_and_says_so() -> None:
    # GPU index 0 has the higher uuid here, so "index 0" must win over "lowest uuid".
    text = "".join(
        f'nvidia_smi_gpu_info{{index="{index}",name="GPU{index}",uuid="{uuid}"}} 1\n'
        f'nvidia_smi_temperature_gpu{{uuid="{uuid}"}} {temp}\n'
        f'nvidia_smi_utilization_gpu_ratio{{uuid="{uuid}"}} {util}\n'
        for index, uuid, temp, util in (("1", "aaaa", 70, 0.5), ("0", "bbbb", 42, 0.25))
    )
    reading = _reading(text)
    assert reading.name == "GPU0"
    assert reading.temperature_c == 42
    assert reading.utilization == 0.25
    assert any("2 GPUs" in problem and "bbbb" in problem for problem in reading.problems)


def test_nvidia_several_gpus_without_info_uses_the_index_series() -> None:
    text = (
        'nvidia_smi_index{uuid="aaaa"} 1\nnvidia_smi_index{uuid="bbbb"} 0\n'
        'nvidia_smi_temperature_gpu{uuid="aaaa"} 70\nnvidia_smi_temperature_gpu{uuid="bbbb"} 42\n'
    )
    assert _reading(text).temperature_c == 42


def test_nvidia_several_gpus_without_index_takes_lowest_uuid() -> None:
    text = 'nvidia_smi_temperature_gpu{uuid="bbbb"} 70\nnvidia_smi_temperature_gpu{uuid="aaaa"} 42\n'
    reading = _reading(text)
    assert reading.temperature_c == 42
    assert any("aaaa" in problem for problem in reading.problems)


# --- dcgm-exporter (T4 capture) ------------------------------------------------------------------


def test_dcgm_reading_equals_t4_capture() -> None:
    reading = _reading(_text("dcgm_exporter.prom"))
    assert reading.kind is ExporterKind.DCGM
    assert reading.name == "Tesla T4"  # modelName="Tesla T4"
    assert reading.temperature_c == 25  # DCGM_FI_DEV_GPU_TEMP 25
    assert reading.power_w == 8.969  # DCGM_FI_DEV_POWER_USAGE 8.969000
    assert reading.utilization == 0.0  # DCGM_FI_DEV_GPU_UTIL 0 (percent)
    assert reading.sm_clock_hz == 300e6  # DCGM_FI_DEV_SM_CLOCK 300 (MHz)
    # No FB_TOTAL: total = FB_FREE 15109 + FB_USED 0 MiB.
    assert reading.memory_total_bytes == 15109 * MIB == 15842934784
    assert reading.memory_used_bytes == 0.0  # DCGM_FI_DEV_FB_USED 0: a real reported 0
    assert reading.unified_memory is False
    assert reading.collect_ok is None
    assert reading.problems == ()


def test_dcgm_int64_blank_sentinel_is_none() -> None:
    text = _text("dcgm_exporter.prom").replace('"} 25\n', '"} 9223372036854775794\n')
    reading = _reading(text)
    assert reading.temperature_c is None
    assert any("DCGM_FI_DEV_GPU_TEMP" in problem for problem in reading.problems)
    assert reading.power_w == 8.969


def test_dcgm_fp64_blank_sentinel_is_none() -> None:
    text = _text("dcgm_exporter.prom").replace('"} 8.969000\n', '"} 140737488355328.000000\n')
    assert _reading(text).power_w is None


def test_dcgm_without_fb_series_is_unified_with_memory_none() -> None:
    # GB10 with DCGM: "all FB_* absent (field not registered)" (dcgm_exporter.md §4).
    reading = _reading(_without(_text("dcgm_exporter.prom"), "DCGM_FI_DEV_FB_"))
    assert reading.unified_memory is True
    assert reading.memory_total_bytes is None
    assert reading.memory_used_bytes is None
    assert reading.temperature_c == 25


def test_dcgm_several_gpus_takes_gpu_0_and_says_so() -> None:
    t4 = _text("dcgm_exporter.prom")
    # A second GPU with index 1 but the lower UUID, at 61 °C.
    second = t4.replace('gpu="0"', 'gpu="1"').replace("GPU-20c56d28", "GPU-00000000")
    second = second.replace('"} 25\n', '"} 61\n')
    reading = _reading(second + t4)
    assert reading.temperature_c == 25
    assert any("2 GPUs" in problem and "gpu=0" in problem for problem in reading.problems)


# --- dgx-spark-prometheus (constructed ateska scrape) ----------------------------------------------


def test_dgx_spark_reading_equals_constructed_scrape() -> None:
    reading = _reading(_text("dgx_spark_prometheus.prom"))
    assert reading.kind is ExporterKind.DGX_SPARK
    assert reading.name is None  # ateska exports no GPU name
    assert reading.temperature_c == 58  # gpu_temperature_celsius 58
    assert reading.power_w == 41.37  # gpu_power_watts 41.37
    assert reading.utilization == pytest.approx(0.96)  # gpu_utilization_percent 96
    assert reading.sm_clock_hz == 2405e6  # gpu_frequency_mhz 2405
    assert reading.collect_ok is None
    assert reading.problems == ()


def test_dgx_spark_host_memory_series_are_not_gpu_memory() -> None:
    # memory_total_bytes 1.30663165952e+11 is host RAM: the GPU reading must not report it.
    reading = _reading(_text("dgx_spark_prometheus.prom"))
    assert reading.memory_total_bytes is None
    assert reading.memory_used_bytes is None
    assert reading.unified_memory is True


def test_dgx_spark_zero_temperature_and_power_are_no_data() -> None:
    text = (
        _text("dgx_spark_prometheus.prom")
        .replace('gpu_temperature_celsius{host="spark-01"} 58', 'gpu_temperature_celsius{host="spark-01"} 0')
        .replace('gpu_power_watts{host="spark-01"} 41.37', 'gpu_power_watts{host="spark-01"} 0')
    )
    reading = _reading(text)
    assert reading.temperature_c is None
    assert reading.power_w is None
    assert reading.utilization == pytest.approx(0.96)
    assert any("temperature_c, power_w read 0" in problem for problem in reading.problems)


def test_dgx_spark_without_gpu_series_has_no_reading() -> None:
    # The sbaik2 fork omits the GPU families when nvidia-smi times out; memory stays.
    assert gpu_reading(parse(_without(_text("dgx_spark_prometheus.prom"), "gpu_"))) is None


def test_node_exporter_scrape_has_no_gpu_reading() -> None:
    assert gpu_reading(_expo("node_exporter.prom")) is None


# --- throttling and clocks (issue 21) ------------------------------------------------------------

SMI = EXPORTERS / "nvidia-smi-h100"


def _set(text: str, series: str, value: str) -> str:
    """The exposition with every sample of ``series`` (exactly that name) set to ``value``."""
    out = [
        f"{line.rsplit(' ', 1)[0]} {value}" if line.split("{", 1)[0].split(" ", 1)[0] == series else line
        for line in text.splitlines()
    ]
    return "\n".join(out) + "\n"


def test_nvidia_capture_reports_no_active_reason_and_its_max_clock() -> None:
    reading = _reading(_text("nvidia_gpu_exporter.prom"))
    assert reading.throttle == ()  # every nvidia_smi_clocks_event_reasons_* reads 0 under this load
    assert reading.max_sm_clock_hz == 1.98e9  # nvidia_smi_clocks_max_sm_clock_hz 1.98e+09


def test_nvidia_active_reasons_are_read_in_both_spellings() -> None:
    text = _set(_text("nvidia_gpu_exporter.prom"), "nvidia_smi_clocks_event_reasons_sw_thermal_slowdown", "1")
    text = _set(text, "nvidia_smi_clocks_event_reasons_sw_power_cap", "1")
    assert _reading(text).throttle == ("sw_power_cap", "sw_thermal_slowdown")
    older = text.replace("nvidia_smi_clocks_event_reasons_", "nvidia_smi_clocks_throttle_reasons_")
    assert _reading(older).throttle == ("sw_power_cap", "sw_thermal_slowdown")  # drivers before 590


def test_nvidia_without_reason_series_says_none_not_unthrottled() -> None:
    text = _without(_text("nvidia_gpu_exporter.prom"), "clocks_event_reasons")
    assert _reading(text).throttle is None


@pytest.mark.parametrize(
    ("mask", "reasons"),
    # nvidia-smi's clocks_event_reasons.active in loaded-query.csv: 0x…1 idle, then 0x…4 once the load runs
    [(0x1, ("gpu_idle",)), (0x4, ("sw_power_cap",)), (0x24, ("sw_power_cap", "sw_thermal_slowdown")), (0, ())],
)
def test_dcgm_clock_event_bitmask_is_decoded_with_nvmls_bits(mask: int, reasons: tuple[str, ...]) -> None:
    text = _text("dcgm_exporter.prom")
    assert _reading(text).throttle is None  # the T4 capture carries no reasons field
    labels = 'gpu="0",UUID="GPU-20c56d28-0da5-6d26-a36a-e7af1ce2586e",device="nvidia0",modelName="Tesla T4"'
    line = f"DCGM_FI_DEV_CLOCKS_EVENT_REASONS{{{labels}}} {mask}\n"
    assert _reading(text + line).throttle == reasons
    assert _reading(text + line.replace("CLOCKS_EVENT_REASONS", "CLOCK_THROTTLE_REASONS")).throttle == reasons


def test_the_csv_masks_of_the_h100_capture_decode_to_the_reasons_its_columns_name() -> None:
    rows = [line.split(", ") for line in (SMI / "loaded-query.csv").read_text().splitlines()]
    header, data = rows[0], rows[1:]
    mask, power_cap = header.index("clocks_event_reasons.active"), header.index("clocks_event_reasons.sw_power_cap")
    for row in data:
        decoded = throttle_from_mask(int(row[mask], 16))
        assert ("sw_power_cap" in decoded) == (row[power_cap] == "Active"), row


def test_nvidia_smi_q_idle_and_loaded_from_the_h100_capture() -> None:
    idle = nvidia_smi_q_reading((SMI / "idle-q.txt").read_text())
    assert idle is not None and idle.kind is ExporterKind.NVIDIA_SMI
    assert (idle.name, idle.temperature_c, idle.power_w, idle.utilization) == ("NVIDIA H100 80GB HBM3", 34, 106.25, 0.0)
    assert (idle.sm_clock_hz, idle.max_sm_clock_hz, idle.throttle) == (345e6, 1980e6, ("gpu_idle",))
    loaded = nvidia_smi_q_reading((SMI / "loaded-q-perf.txt").read_text())
    assert loaded is not None
    # "SW Power Cap: Active", "Average Power Draw: 694.37 W", "SM: 1350 MHz", "GPU Current Temp: 54 C"
    assert (loaded.throttle, loaded.power_w, loaded.sm_clock_hz, loaded.temperature_c) == (
        ("sw_power_cap",),
        694.37,
        1350e6,
        54,
    )
    assert loaded.utilization is None  # not asked in that capture: no data, not 0
    assert throttle_words(("sw_power_cap", "sw_thermal_slowdown")) == "SW power cap, SW thermal slowdown"


def test_nvidia_smi_q_without_a_gpu_is_none() -> None:
    assert nvidia_smi_q_reading("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.") is None


def test_the_clock_figure_says_what_holds_the_clock_back_and_no_data_without_reasons() -> None:
    busy = _reading(_text("nvidia_gpu_exporter.prom"))
    assert clock_figure(busy) == ("GPU SM 1,980 MHz, throttle none", False)
    hot = _set(_text("nvidia_gpu_exporter.prom"), "nvidia_smi_clocks_event_reasons_sw_thermal_slowdown", "1")
    hot = _set(hot, "nvidia_smi_clocks_current_sm_clock_hz", "8.1e+08")
    assert clock_figure(_reading(hot)) == ("GPU SM 810 MHz, throttle SW thermal slowdown", True)
    idle = nvidia_smi_q_reading((SMI / "idle-q.txt").read_text())
    assert idle is not None and clock_figure(idle) == ("GPU SM 345 MHz, throttle none", False)  # idle is no throttle
    ateska = _reading(_text("dgx_spark_prometheus.prom"))
    assert clock_figure(ateska) == ("GPU SM 2,405 MHz", False)  # no reasons reported: none claimed
    assert throttle_text(ateska) == NO_DATA
