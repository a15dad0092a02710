"""The bandwidth roofline: how much of a GPU's memory bandwidth (and compute) a served model uses.

Decode on a DGX Spark's GB10 is bound by its unified memory's bandwidth. With ``--enable-mfu-metrics``
vLLM counts its own estimate of the FLOPs, bytes read and bytes written per GPU
(``vllm:estimated_{flops,read_bytes,write_bytes}_per_gpu_total``, ``vllm/v1/metrics/perf.py``) and logs
``MFU: x TF/s/device y GB/s/device`` from the same numbers. The series are always registered, at 0
without the flag, so "absent" and "flat" both mean there is nothing to show, and the reason says why.

Formulas (``docs/metrics.md``, "The roofline"), per GPU, over a window of Δt seconds:
FLOP/s = Δflops / Δt, bytes/s = (Δread + Δwrite) / Δt; with several engines (data parallel, each on its
own GPUs) the counters are summed over engines by the normaliser, so per GPU is that sum over the number
of engines. The share of the node's peak is achieved / peak.
"""

from __future__ import annotations

from dataclasses import dataclass

from sparktui.model.counters import Deltas
from sparktui.model.scrape import ModelScrape

# Counter keys of vllm.COUNTERS.
FLOPS, READ_BYTES, WRITE_BYTES = "estimated_flops", "estimated_read_bytes", "estimated_write_bytes"
MFU_KEYS = (FLOPS, READ_BYTES, WRITE_BYTES)

# NVIDIA's GB10 (DGX Spark): 128 GB LPDDR5x, 256-bit, 8533 MT/s = 273 GB/s (NVIDIA's DGX Spark spec
# sheet). No peak FLOP/s default: NVIDIA quotes only "1 PFLOP FP4 (sparse)", and vLLM's estimate counts
# operations of whatever precision the model runs, so no one figure is its roof.
GB10_MEMORY_BANDWIDTH_GB_S = 273.0

MFU_HINT = "start vLLM with --enable-mfu-metrics"
NOT_EXPORTED = "this vLLM exports no MFU counters: a newer vLLM started with --enable-mfu-metrics"
IDLE = "no engine step in the window"


@dataclass(frozen=True, slots=True)
class Achieved:
    """What vLLM estimates one GPU did per second over a window; both None with the ``reason``."""

    flops_per_s: float | None
    memory_bytes_per_s: float | None
    reason: str | None = None  # why there are no numbers (None when there are)


def achieved(deltas: Deltas, latest: ModelScrape) -> Achieved:
    """FLOP/s and memory bytes/s per GPU over the window of ``deltas``, from vLLM's estimated counters.

    None with a reason when the counters are absent (a vLLM without them), never counted (all 0 at the
    latest scrape although the engine has served tokens: the flag is off), or flat over the window (an
    idle engine)."""
    increases = [deltas.get(key) for key in MFU_KEYS]
    totals = [latest.counters.get(key) for key in MFU_KEYS]
    if any(value is None for value in totals):
        return Achieved(None, None, latest.lacks.get("mfu", NOT_EXPORTED))
    if not any(totals):
        # Registered but never counted: the flag is off, once the engine has done any work at all.
        worked = latest.counters.get("generation_tokens") or latest.counters.get("prompt_tokens")
        return Achieved(None, None, MFU_HINT if worked else IDLE)
    flops, read, write = (value or 0.0 for value in increases)
    if deltas.seconds <= 0 or not (flops or read or write):
        return Achieved(None, None, IDLE)
    per_gpu = deltas.seconds * max(1, len(latest.engines))
    return Achieved(flops / per_gpu, (read + write) / per_gpu)


def share_of_peak(value: float | None, peak: float | None) -> float | None:
    """``value`` as a fraction of ``peak`` (None when either is unknown or the peak is not positive)."""
    if value is None or peak is None or peak <= 0:
        return None
    return value / peak


@dataclass(frozen=True, slots=True)
class Roofline:
    """An instance's achieved memory bandwidth and FLOP/s per GPU against its node's peaks.

    ``peak_flops_per_s`` is None when the node's ``peak_tflops`` is not configured: no compute share."""

    memory_bytes_per_s: float | None
    flops_per_s: float | None
    peak_memory_bytes_per_s: float
    peak_flops_per_s: float | None
    reason: str | None = None  # why the achieved numbers are "–"

    JSON_PROPERTIES = ("memory_share", "flops_share")

    @property
    def memory_share(self) -> float | None:
        return share_of_peak(self.memory_bytes_per_s, self.peak_memory_bytes_per_s)

    @property
    def flops_share(self) -> float | None:
        return share_of_peak(self.flops_per_s, self.peak_flops_per_s)

    @classmethod
    def of(cls, found: Achieved, peak_memory_gb_s: float, peak_tflops: float | None) -> Roofline:
        return cls(
            memory_bytes_per_s=found.memory_bytes_per_s,
            flops_per_s=found.flops_per_s,
            peak_memory_bytes_per_s=peak_memory_gb_s * 1e9,
            peak_flops_per_s=None if peak_tflops is None else peak_tflops * 1e12,
            reason=found.reason,
        )
