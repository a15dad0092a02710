"""Detectors of the GPU exporter's reading: thermal clock events, a busy GPU at a low clock or a low
power draw."""

from __future__ import annotations

from sparktui.diagnosis.catalogue import Rule
from sparktui.diagnosis.state import NO, Check, Ctx
from sparktui.model.exporters import THERMAL_THROTTLE, GpuReading, throttle_words


def gpu_now(ctx: Ctx) -> GpuReading | None:
    """The GPU exporter's reading, when it is fresh (a stale one cannot tell)."""
    node = ctx.node
    if node.gpu is None or node.gpu_age_s is None or node.gpu_age_s > node.stale_after_s:
        return None
    return node.gpu


def _gpu_words(gpu: GpuReading) -> str:
    """``87 °C, 20.4 W, 96 % busy, SM 810 MHz (of 2,418 MHz)``: what the reading has."""
    bits = []
    if gpu.temperature_c is not None:
        bits.append(f"{gpu.temperature_c:.0f} °C")
    if gpu.power_w is not None:
        bits.append(f"{gpu.power_w:.1f} W")
    if gpu.utilization is not None:
        bits.append(f"{gpu.utilization * 100:.0f} % busy")
    if gpu.sm_clock_hz is not None:
        top = f" (of {gpu.max_sm_clock_hz / 1e6:,.0f} MHz)" if gpu.max_sm_clock_hz else ""
        bits.append(f"SM {gpu.sm_clock_hz / 1e6:,.0f} MHz{top}")
    return ", ".join(bits)


def gpu_thermal(ctx: Ctx, rule: Rule) -> Check | None:
    gpu = gpu_now(ctx)
    if gpu is None or gpu.throttle is None:
        return None
    thermal = tuple(reason for reason in gpu.throttle if reason in THERMAL_THROTTLE)
    if not thermal:
        return NO
    return Check(True, (f"GPU clocks held back by {throttle_words(thermal)}: {_gpu_words(gpu)} (at {ctx.at()})",))


def gpu_clock_low(ctx: Ctx, rule: Rule) -> Check | None:
    gpu = gpu_now(ctx)
    if gpu is None or gpu.utilization is None or gpu.sm_clock_hz is None:
        return None
    mhz = gpu.sm_clock_hz / 1e6
    low = mhz < rule.param("low_clock_mhz") or (
        gpu.max_sm_clock_hz is not None and gpu.sm_clock_hz < rule.param("low_fraction") * gpu.max_sm_clock_hz
    )
    if gpu.utilization < rule.param("min_utilization") or not low:
        return NO
    reasons = [r for r in gpu.throttle or () if r != "gpu_idle"]
    why = f"; clock-event reasons: {throttle_words(tuple(reasons))}" if reasons else ""
    if gpu.throttle is not None and not reasons:
        why = "; no clock-event reason is active"
    return Check(True, (f"GPU busy with its clock low: {_gpu_words(gpu)}{why} (at {ctx.at()})",))


def gpu_power_low(ctx: Ctx, rule: Rule) -> Check | None:
    gpu = gpu_now(ctx)
    if gpu is None or gpu.utilization is None or gpu.power_w is None:
        return None
    if gpu.utilization < rule.param("min_utilization") or gpu.power_w >= rule.param("max_power_w"):
        return NO
    return Check(
        True,
        (
            f"GPU reads {gpu.utilization * 100:.0f} % busy but draws {gpu.power_w:.1f} W, under "
            f"{rule.param('max_power_w'):.0f} W: {_gpu_words(gpu)} (at {ctx.at()})",
        ),
    )
