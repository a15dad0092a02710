"""The demo's exporters, written with prometheus_client as the real ones are.

``VllmExposition`` registers every family of vLLM 0.33 (``engines.vllm.families.FAMILIES``) in its own
registry with the process/platform/GC collectors, pre-creates the children vLLM pre-creates, and
receives the simulated engine's events (it is the engine's ``MetricsSink``). The GPU exporters write
the exposition of nvidia_gpu_exporter (``nvidia_smi_*``, GB10: no memory series) and of
ateska/dgx-spark-prometheus (bare names with a ``host`` label).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)

from sparktui.demo.sim import ModelProfile
from sparktui.engines.vllm.families import CACHE_CONFIG_DEFAULTS, FAMILIES, Family, request_token_buckets

NO_ENGINE_LABEL = ("mode", "model_name", "outcome", "request_type")  # families registered without engine


class VllmExposition:
    """One vLLM server's ``/metrics``. A restart is a new ``VllmExposition`` (fresh counters)."""

    def __init__(self, profile: ModelProfile, engine: str = "0") -> None:
        self.profile = profile
        self.model_name = profile.served_name
        self.engine = engine
        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        self._counters: dict[str, Counter] = {}
        self._gauges: dict[str, Gauge] = {}
        self._histograms: dict[str, Histogram] = {}
        self._label_names: dict[str, tuple[str, ...]] = {}
        self._base = {"model_name": self.model_name, "engine": engine}
        k = profile.num_speculative_tokens
        for family in FAMILIES:
            if family.name.startswith("vllm:spec_decode_") and k == 0:
                continue  # registered only with --speculative-config
            fixed = dict(family.fixed)
            if "position" in fixed:
                fixed["position"] = tuple(str(i) for i in range(k))
            self._register(family, fixed)
        config = dict(CACHE_CONFIG_DEFAULTS)
        config.update(
            block_size=str(profile.block_size),
            num_gpu_blocks=str(profile.kv_capacity_tokens // profile.block_size),
            gpu_memory_utilization=str(profile.gpu_memory_utilization),
            kv_cache_size_tokens=str(profile.kv_capacity_tokens),
            kv_cache_max_concurrency=f"{profile.kv_capacity_tokens / profile.max_model_len:.2f}",
        )
        info = Gauge(
            "vllm:cache_config_info",
            "Information of the LLMEngine CacheConfig",
            ["engine", *sorted(config)],
            registry=self.registry,
        )
        info.labels(engine=engine, **config).set(1)
        self.http_requests = Counter(
            "http_requests_total",
            "Total number of requests by method, status and handler.",
            ["handler", "method", "status"],
            registry=self.registry,
        )
        self.http_duration = Histogram(
            "http_request_duration_seconds",
            "Latency with only few buckets by handler.",
            ["handler", "method"],
            buckets=(0.1, 0.5, 1.0),
            registry=self.registry,
        )

    def _register(self, family: Family, fixed: dict[str, tuple[str, ...]]) -> None:
        registry = self.registry
        name, help_text, labels = family.name, family.help, family.labels
        self._label_names[name] = labels
        metric: Counter | Gauge | Histogram
        if family.kind == "counter":
            metric = self._counters[name] = Counter(name, help_text, labels, registry=registry)
        elif family.kind == "gauge":
            metric = self._gauges[name] = Gauge(name, help_text, labels, registry=registry)
        else:
            buckets = family.buckets
            if buckets == "request_tokens":
                buckets = request_token_buckets(self.profile.max_model_len)
            metric = self._histograms[name] = Histogram(name, help_text, labels, buckets=buckets, registry=registry)
        base = {k: v for k, v in self._base.items() if k in labels}
        free = [label for label in labels if label not in base]
        if not free:
            metric.labels(**base)
        elif all(label in fixed for label in free):
            # vLLM creates every (reason, position, source...) child at start, at 0.
            combos: list[dict[str, str]] = [{}]
            for label in free:
                combos = [dict(c, **{label: value}) for c in combos for value in fixed[label]]
            for combo in combos:
                metric.labels(**base, **combo)
        if name == "vllm:engine_sleep_state":
            for state in fixed.get("sleep_state", ()):
                self._gauges[name].labels(**base, sleep_state=state).set(1 if state == "awake" else 0)

    def _labels(self, name: str, extra: dict[str, str]) -> dict[str, str]:
        names = self._label_names[name]
        out = {k: v for k, v in self._base.items() if k in names}
        out.update(extra)
        return out

    # --- MetricsSink ----------------------------------------------------------------------------

    def add(self, counter: str, value: float, **labels: str) -> None:
        if value <= 0:
            return
        self._counters[counter].labels(**self._labels(counter, labels)).inc(value)

    def observe(self, histogram: str, value: float, count: int = 1) -> None:
        child = self._histograms[histogram].labels(**self._base)
        for _ in range(count):
            child.observe(value)

    def set_gauge(self, gauge: str, value: float, **labels: str) -> None:
        self._gauges[gauge].labels(**self._labels(gauge, labels)).set(value)

    def count_http(self, handler: str, status: int, seconds: float) -> None:
        if handler in ("/metrics", "/health", "/version"):
            return  # the instrumentator excludes these, as in vLLM
        self.http_requests.labels(handler=handler, method="GET", status=f"{status // 100}xx").inc()
        self.http_duration.labels(handler=handler, method="GET").observe(seconds)

    def render(self, names: Collection[str] | None = None) -> bytes:
        """The exposition; with ``names``, only those samples (and their families' HELP/TYPE), as vLLM's
        ``/metrics?name[]=...`` answers (prometheus_client's app, which vLLM mounts, honours it)."""
        return generate_latest(self.registry.restricted_registry(names) if names else self.registry)


@dataclass
class GpuState:
    """What a GPU exporter reports for one GB10."""

    temperature_c: float = 41.0
    power_w: float = 11.0
    utilization: float = 0.0
    sm_clock_mhz: float = 2418.0
    throttle: tuple[str, ...] = ()  # the clock-event reasons active (sparktui.model.exporters names)


NVIDIA_NAME = "NVIDIA GB10"
CLOCK_EVENT_REASONS = (
    "gpu_idle",
    "applications_clocks_setting",
    "sw_power_cap",
    "hw_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
    "sync_boost",
    "sw_thermal_slowdown",
)
NVIDIA_UUID = "5d3a6f0e-0000-0000-0000-00000000gb10"


def nvidia_gpu_exporter_page(gpu: GpuState, host: str) -> str:
    """utkuozdemir/nvidia_gpu_exporter on a GB10: nvidia-smi answers [N/A] for memory, so the exporter
    emits no ``nvidia_smi_memory_*`` series at all."""
    uuid = NVIDIA_UUID
    lines = [
        "# HELP nvidia_smi_gpu_info A metric with a constant '1' value labeled by gpu uuid, name, "
        "driver_model_current, driver_model_pending, vbios_version, driver_version.",
        "# TYPE nvidia_smi_gpu_info gauge",
        'nvidia_smi_gpu_info{driver_model_current="[N/A]",driver_model_pending="[N/A]",'
        f'driver_version="590.48.01",name="{NVIDIA_NAME}",uuid="{uuid}",vbios_version="[N/A]"}} 1',
    ]

    def gauge(name: str, value: float, help_text: str) -> None:
        lines.extend((f"# HELP {name} {help_text}", f"# TYPE {name} gauge", f'{name}{{uuid="{uuid}"}} {value:g}'))

    gauge("nvidia_smi_temperature_gpu", round(gpu.temperature_c), "temperature.gpu")
    gauge("nvidia_smi_power_draw_watts", round(gpu.power_w, 2), "power.draw [W]")
    gauge("nvidia_smi_utilization_gpu_ratio", round(gpu.utilization, 2), "utilization.gpu [%]")
    gauge("nvidia_smi_clocks_current_graphics_clock_hz", gpu.sm_clock_mhz * 1e6, "clocks.current.graphics [MHz]")
    gauge("nvidia_smi_clocks_current_sm_clock_hz", gpu.sm_clock_mhz * 1e6, "clocks.current.sm [MHz]")
    gauge("nvidia_smi_pstate", 0 if gpu.utilization > 0.05 else 8, "pstate")
    # Driver 590's spelling (older drivers: clocks_throttle_reasons_*), one 0/1 gauge per reason.
    for reason in CLOCK_EVENT_REASONS:
        gauge(
            f"nvidia_smi_clocks_event_reasons_{reason}", int(reason in gpu.throttle), f"clocks_event_reasons.{reason}"
        )
    lines.extend(
        (
            "# HELP nvidia_smi_last_collect_success Whether the last collection of nvidia-smi data was successful.",
            "# TYPE nvidia_smi_last_collect_success gauge",
            "nvidia_smi_last_collect_success 1",
        )
    )
    return "\n".join(lines) + "\n"


def dgx_spark_exporter_page(gpu: GpuState, host: str, mem_total: float, mem_used: float) -> str:
    """ateska/dgx-spark-prometheus: bare names, every series labelled with ``host``."""
    rows = [
        ("gpu_utilization_percent", "GPU utilization percentage", round(gpu.utilization * 100)),
        ("gpu_temperature_celsius", "GPU temperature in Celsius", round(gpu.temperature_c)),
        ("gpu_frequency_mhz", "GPU graphics clock in MHz", round(gpu.sm_clock_mhz)),
        ("gpu_power_watts", "GPU power draw in watts", round(gpu.power_w, 2)),
        ("memory_total_bytes", "Total RAM in bytes", mem_total),
        ("memory_used_bytes", "Used RAM in bytes (total - free - buffers - cached)", mem_used),
    ]
    lines: list[str] = []
    for name, help_text, value in rows:
        lines.extend((f"# HELP {name} {help_text}", f"# TYPE {name} gauge", f'{name}{{host="{host}"}} {value:g}'))
    return "\n".join(lines) + "\n"
