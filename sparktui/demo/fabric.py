"""The demo's fabric: the ConnectX-7 port between the two ranks of a tensor-parallel job, and the NCCL
library their vLLM processes map, answered as the fabric command (``model.fabric.fabric_command``) and
``sha256sum`` would on a real node.

Traffic follows the job's head: each token the head's engine computes (prompt or generated) moves one
all-reduce per layer over the link, ``BYTES_PER_TOKEN`` each way (Qwen3-235B: 94 layers x 2 all-reduces
x a 4,096-wide bf16 hidden state, about 1.5 MB). A degraded link (``SimNic.degraded``, the ``fabric``
scenario) drops and pauses: ``rx_discards_phy``, ``rx_out_of_buffer``, ``rx_symbol_err_phy`` and pause
frames rise at the rates the reports show.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from sparktui.model.fabric import COUNTERS

BYTES_PER_TOKEN = 94 * 2 * 4096 * 2
RDMA_SHARE = 0.9995  # of the port's bytes: the rest is the nodes' TCP (ssh, Ray's control plane)
NIC_NAME = "enp1s0f0np0"


@dataclass(frozen=True, slots=True)
class NcclBuild:
    """A libnccl file as a node has it: where, how large, when written, and which build."""

    path: str
    size: int
    mtime: int
    build: str

    @property
    def sha256(self) -> str:
        """The file's checksum (the demo's stand-in for its bytes)."""
        return hashlib.sha256(f"libnccl {self.build} {self.size}".encode()).hexdigest()


# The pip wheel's (nvidia-nccl-cu13) and the system package's: the same version string, other bytes.
PIP_NCCL = NcclBuild(
    "/usr/local/lib/python3.12/dist-packages/nvidia/nccl/lib/libnccl.so.2", 312_745_832, 1_767_225_600, "2.27.7 pip"
)
SYSTEM_NCCL = NcclBuild("/usr/lib/aarch64-linux-gnu/libnccl.so.2.27.7", 298_116_400, 1_765_843_200, "2.27.7 deb")
# A degraded link's loss per second (the numbers of tests/data/fabric's readings).
DEGRADED_PER_S = {
    "rx_discards_phy": 143.0,
    "rx_out_of_buffer": 221.0,
    "rx_symbol_err_phy": 0.3,
    "rx_pause_ctrl_phy": 1840.0,
}


@dataclass
class SimNic:
    """One mlx5 port: link state, negotiated speed and the counters ``ethtool -S`` prints."""

    name: str = NIC_NAME
    operstate: str = "up"
    speed_mbps: int = 200_000
    degraded: bool = False
    counters: dict[str, float] = field(default_factory=lambda: dict.fromkeys(COUNTERS, 0.0))
    nccl: NcclBuild = PIP_NCCL  # what its vLLM processes map
    _carry: dict[str, float] = field(default_factory=dict)

    def carry(self, tokens: float, dt: float) -> None:
        """``tokens`` computed by the job over ``dt`` seconds: their all-reduces each way."""
        if self.operstate != "up":
            return
        moved = tokens * BYTES_PER_TOKEN
        for direction in ("rx", "tx"):
            self.counters[f"{direction}_bytes_phy"] += moved
            self.counters[f"{direction}_vport_rdma_unicast_bytes"] += moved * RDMA_SHARE
            self.counters[f"{direction}_bytes"] += moved * (1 - RDMA_SHARE)
        if self.degraded:
            for name, per_s in DEGRADED_PER_S.items():
                self.counters[name] += per_s * dt

    def sysfs_lines(self) -> list[str]:
        speed = str(self.speed_mbps) if self.operstate == "up" else "-1"
        return [f"=== nic {self.name}", f"operstate {self.operstate}", f"speed {speed}"]

    def ethtool_text(self) -> str:
        lines = ["NIC statistics:"]
        lines += [f"     {name}: {int(self.counters[name])}" for name in COUNTERS]
        return "\n".join(lines) + "\n"
