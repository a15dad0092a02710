"""The detectors: one function per ``[rule.detector]`` name of the catalogue, grouped by what they read
(``host``: host state and the service manager; ``numbers``: an instance's rates and gauges; ``gpu``: the
GPU exporter; ``fabric``: the ranks of a multi-node job), and ``DETECTORS``, the one registry of them.

A detector answers a ``Check`` (the condition holds, with its evidence), ``NO``, or None when this
evaluation cannot tell; ``engine.py`` turns those into findings (hysteresis, action holds). Per-instance
detectors run on every evaluation, held or not: they keep their baselines in ``InstanceMemory``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from sparktui.diagnosis.catalogue import Rule
from sparktui.diagnosis.detectors.fabric import link_degraded, nccl_mismatch, rank_spinning
from sparktui.diagnosis.detectors.gpu import gpu_clock_low, gpu_power_low, gpu_thermal
from sparktui.diagnosis.detectors.host import (
    exec_not_found,
    held_models_block_start,
    launch_not_ready,
    restarts_rising,
    shm_leftovers,
    stale_workers,
    unreachable,
)
from sparktui.diagnosis.detectors.numbers import (
    decode_slow,
    kv_preemptions,
    never_served,
    position_collapse,
    requests_without_tokens,
    status,
)
from sparktui.diagnosis.state import Check, Ctx, InstanceMemory
from sparktui.model.fleet import InstanceView

NodeCheck = Callable[[Ctx, Rule], "Check | None"]
InstanceCheck = Callable[[Ctx, Rule, InstanceView, InstanceMemory], "Check | None"]


@dataclass(frozen=True, slots=True)
class Detector:
    """What a named detector judges: the node as a whole, or each of its instances."""

    node: NodeCheck | None = None
    instance: InstanceCheck | None = None


# One implementation per signature of the catalogue (catalogue.DETECTOR_SIGNATURES): a test keeps them equal.
DETECTORS: Mapping[str, Detector] = {
    "launch-not-ready": Detector(instance=launch_not_ready),
    "held-models-block-start": Detector(instance=held_models_block_start),
    "shm-leftovers": Detector(node=shm_leftovers),
    "stale-workers": Detector(node=stale_workers),
    "exec-not-found": Detector(instance=exec_not_found),
    "restarts-rising": Detector(instance=restarts_rising),
    "requests-without-tokens": Detector(instance=requests_without_tokens),
    "decode-slow": Detector(instance=decode_slow),
    "position-collapse": Detector(instance=position_collapse),
    "kv-preemptions": Detector(instance=kv_preemptions),
    "never-served": Detector(instance=never_served),
    "status": Detector(instance=status),
    "unreachable": Detector(node=unreachable),
    "gpu-thermal": Detector(node=gpu_thermal),
    "gpu-clock-low": Detector(node=gpu_clock_low),
    "gpu-power-low": Detector(node=gpu_power_low),
    "link-degraded": Detector(node=link_degraded),
    "rank-spinning": Detector(node=rank_spinning),
    "nccl-mismatch": Detector(node=nccl_mismatch),
}
