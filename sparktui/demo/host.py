"""A demo node's host: unified memory, page cache, /dev/shm, load and PSI of one simulated GB10.

The numbers are those the node sampler reads (``/proc/meminfo``, ``/proc/pressure/memory``,
``/proc/loadavg``, ``/proc/uptime``, ``ls /dev/shm``, ``/proc/PID/stat``) and are rendered here in
those files' exact formats; ``sparktui.demo.sshserver`` puts them into the sampler's frames
(``sparktui.model.host``).

Memory model (bytes; one consistent ledger, MemTotal 127600748 kB as on a GB10):

- *used* (MemTotal − MemFree − Buffers − Cached) = kernel and slab + the anonymous memory of the
  OS, the side services and vLLM's processes + what the NVIDIA driver allocates for CUDA. A vLLM
  instance's CUDA allocation is ``gpu_memory_utilization × device total`` (119.67 GiB, what
  ``cudaMemGetInfo`` reports on a GB10) once its KV cache is allocated, less while it starts: the
  weights as they load, a CUDA context before. Driver memory is in no process's RSS.
- *page cache*: files read from disk stay cached. Model loads read their checkpoint (its size in
  GiB at the load's pace); other file I/O adds a little. When MemFree would fall below the kernel's
  watermark, the cache is reclaimed (ordinary cache first, then the oldest checkpoint), and reclaim
  shows as memory pressure (PSI).
- *held cache* (the GB10 field behaviour of vLLM issue #48140 and MiaAI-Lab #47, see
  ``reference/exporters/vllm_free_memory.md``): page cache of checkpoints read by earlier loads of
  models this node does not serve (model swaps, evaluation scripts) is not counted in MemAvailable
  until it is dropped, although the kernel's formula would count it. The node's own served
  checkpoints are counted as ordinary cache, so a plain restart of a served model starts. How the
  real kernel and driver arrive at the low figure is not known; this rule reproduces what operators
  saw (context/002: 110 GiB in page cache, vLLM reading 4.75 GiB free, ``drop_caches`` giving it
  back) and keeps everything else ordinary.
- *MemAvailable* = MemFree − reserve + ordinary file cache − min(it / 2, low watermark) +
  SReclaimable − min(it / 2, low watermark), as the kernel computes it, with held cache left out.
- *Shmem* = tmpfs (64 MiB) + every /dev/shm file; ``drop_caches`` cannot free it.
- ``drop_caches`` (``echo 3``) frees every clean page of the cache (held or not), most of
  SReclaimable and the Buffers.
"""

from __future__ import annotations

import math
import random
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import UTC, datetime

from sparktui.demo.vllmlog import InstanceLog

GIB = 1024**3
MIB = 1024**2
KIB = 1024
MEM_TOTAL_KB = 127600748
MEM_TOTAL = MEM_TOTAL_KB * KIB
DEVICE_TOTAL_GIB = 119.67  # cudaMemGetInfo's total on a GB10, the T of vLLM's "(x/T GiB)"
DEVICE_TOTAL = math.floor(DEVICE_TOTAL_GIB * GIB)
SWAP_TOTAL_KB = 16777212
CLK_TCK = 100
PAGE_SIZE = 4096
CORES = 20  # GB10: 10 Cortex-X925 + 10 Cortex-A725

FREE_FLOOR = 0.45 * GIB  # kswapd reclaims to keep MemFree above this
RESERVE = 0.35 * GIB  # totalreserve_pages
WMARK_LOW = 0.3 * GIB
TMPFS_BASE = 64 * MIB
OTHER_FILE_IO = 2.0 * MIB  # bytes/s of ordinary page cache growth (logs, pip, editors...)
OTHER_CACHE_MAX = 4.0 * GIB


@dataclass
class SimClock:
    """The simulation's time: ``now`` seconds since the fleet was made, ``epoch`` the node clock."""

    epoch0: float
    now: float = 0.0

    @property
    def epoch(self) -> float:
        return self.epoch0 + self.now


@dataclass
class SimProcess:
    """A vLLM process as ``/proc/PID/stat``, ``statm`` and ``cmdline`` show it."""

    pid: int
    ppid: int
    comm: str  # at most 15 characters, as the kernel keeps it
    args: str
    start_epoch: float
    rss: float
    shared: float
    threads: int = 40
    state: str = "S"

    @property
    def anon(self) -> float:
        return max(0.0, self.rss - self.shared)


@dataclass
class ShmFile:
    name: str
    size: int  # apparent size
    allocated: int  # what it holds in Shmem
    mtime: float


@dataclass
class CachedFile:
    """Page cache of one checkpoint (or of ordinary file I/O, ``name`` "other")."""

    size: float
    held: bool


@dataclass
class CheckpointRead:
    """Reading a checkpoint from disk at ``rate`` bytes/s (a model load, an evaluation script)."""

    name: str
    left: float
    rate: float
    held: bool


@dataclass
class BaseUsage:
    """What a node uses besides vLLM, in bytes."""

    kernel: float = 0.85 * GIB  # page tables, kernel stacks, vmalloc, driver
    slab_reclaimable: float = 1.4 * GIB
    slab_unreclaimable: float = 0.6 * GIB
    os_anon: float = 1.9 * GIB  # systemd, sshd, docker, the desktop session
    services_anon: float = 0.0  # ASR, TTS, Ollama


KERNEL_BOOT_LINES = (
    (0.0, "Booting Linux on physical CPU 0x0000000000 [0x410fd871]"),
    (0.0, "Linux version 6.11.0-1016-nvidia (buildd@bos03-arm64-013) #16-Ubuntu SMP PREEMPT_DYNAMIC"),
    (3.2, "NVRM: loading NVIDIA UNIX Open Kernel Module for aarch64  580.95.05  Release Build"),
    (4.1, "mlx5_core 0000:01:00.0: firmware version: 28.45.1020"),
    (5.0, "mlx5_core 0000:01:00.0 enp1s0f0np0: Link up"),
)


def _fmt_ls_time(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%b %e %H:%M")


@dataclass
class SimHost:
    """One node's memory, page cache, /dev/shm, load and pressure."""

    name: str
    clock: SimClock
    rng: random.Random
    boot_epoch: float
    base: BaseUsage = field(default_factory=BaseUsage)
    cache: OrderedDict[str, CachedFile] = field(default_factory=OrderedDict)
    reads: list[CheckpointRead] = field(default_factory=list)
    shm: dict[str, ShmFile] = field(default_factory=dict)
    buffers: float = 0.38 * GIB
    sreclaimable: float = 0.0
    dirty: float = 2 * MIB
    device_alloc: float = 0.0  # CUDA allocations of every vLLM process (set each step)
    processes_anon: float = 0.0
    processes_rss: float = 0.0
    busy: float = 0.0  # runnable work, for the load average
    load: list[float] = field(default_factory=lambda: [0.3, 0.35, 0.4])
    psi_some: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])
    psi_full: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])
    psi_some_total_us: float = 0.0
    psi_full_total_us: float = 0.0
    evicted_recently: float = 0.0  # bytes reclaimed in the last step
    reclaim_slack: float = 0.0  # kswapd stops at a slightly different point each time
    last_pid: int = 0
    threads: int = 1180
    kernel_log: InstanceLog = field(init=False)  # what ``journalctl -k`` shows
    cpu_cap_khz: int | None = None  # a cap on the CPUs' policy (scaling_max_freq), set by a scenario

    def __post_init__(self) -> None:
        self.kernel_log = InstanceLog(self.name)
        self.booted()
        if not self.sreclaimable:
            self.sreclaimable = self.base.slab_reclaimable
        self.cache.setdefault("other", CachedFile(1.2 * GIB, held=False))
        uptime = self.clock.epoch - self.boot_epoch
        self.psi_some_total_us = uptime * 0.004 * 1e6
        self.psi_full_total_us = uptime * 0.0015 * 1e6

    # --- the ledger ------------------------------------------------------------------------------

    def booted(self) -> None:
        """The kernel's lines of a boot (at ``boot_epoch``) that a kernel log of a Spark starts with."""
        for offset, text in KERNEL_BOOT_LINES:
            self.kernel_log.add(self.boot_epoch + offset, "kernel", text)

    def cpufreq_text(self) -> str:
        """The sampler's ``==cpufreq`` rows (kHz) of a GB10's two clusters (policies): ten Cortex-X925
        and ten Cortex-A725 cores, near their ceiling under load, lower at rest; ``cpu_cap_khz`` caps them."""
        rows = []
        for policy, top in ((0, 3_900_000), (10, 2_808_000)):
            limit = min(top, self.cpu_cap_khz) if self.cpu_cap_khz else top
            busy = min(1.0, self.busy / 2.0)
            rows.append(f"policy{policy} {round(limit * (0.55 + 0.45 * busy))} {limit} {top}")
        return "\n".join(rows) + "\n"

    def kernel(self, text: str) -> None:
        """The kernel logs a line now."""
        self.kernel_log.add(self.clock.epoch, "kernel", text)

    def file_cache(self) -> float:
        return sum(f.size for f in self.cache.values())

    def held_cache(self) -> float:
        return sum(f.size for f in self.cache.values() if f.held)

    def shmem(self) -> float:
        return TMPFS_BASE + sum(f.allocated for f in self.shm.values())

    def used(self) -> float:
        """MemTotal − MemFree − Buffers − Cached."""
        b = self.base
        return (
            b.kernel
            + self.sreclaimable
            + b.slab_unreclaimable
            + b.os_anon
            + b.services_anon
            + self.processes_anon
            + self.device_alloc
        )

    def free(self) -> float:
        return MEM_TOTAL - self.used() - self.buffers - self.file_cache() - self.shmem()

    def available(self) -> float:
        """MemAvailable (what vLLM reads as free memory on a GB10): the kernel's estimate, without
        the held cache (see the module docstring)."""
        ordinary = self.file_cache() - self.held_cache() + self.buffers
        counted = ordinary - min(ordinary / 2, WMARK_LOW)
        reclaimable = self.sreclaimable - min(self.sreclaimable / 2, WMARK_LOW)
        return max(0.0, self.free() - RESERVE + counted + reclaimable)

    # --- the page cache --------------------------------------------------------------------------

    def read(self, name: str, nbytes: float, *, held: bool) -> None:
        """``nbytes`` of a file come from disk into the page cache (most recently used)."""
        if nbytes <= 0:
            return
        entry = self.cache.pop(name, None) or CachedFile(0.0, held)
        entry.size += nbytes
        entry.held = held
        self.cache[name] = entry
        self._reclaim()

    def touch(self, name: str, *, held: bool) -> float:
        """A load finds ``name`` in the cache: mark it used; returns how much of it is cached."""
        entry = self.cache.pop(name, None)
        if entry is None:
            return 0.0
        entry.held = held
        self.cache[name] = entry
        return entry.size

    def queue_read(self, name: str, size_gib: float, gib_per_s: float, *, held: bool) -> None:
        self.reads.append(CheckpointRead(name, size_gib * GIB, gib_per_s * GIB, held))

    @property
    def reading(self) -> bool:
        return bool(self.reads)

    def _reclaim(self) -> None:
        """Keep MemFree above the floor: ordinary cache goes first, then the oldest checkpoints."""
        need = FREE_FLOOR - self.free()
        if need <= 0:
            return
        need += self.reclaim_slack
        for held in (False, True):
            for name in list(self.cache):
                entry = self.cache[name]
                if entry.held is not held or need <= 0:
                    continue
                take = min(entry.size, need)
                entry.size -= take
                need -= take
                self.evicted_recently += take
                if entry.size <= 0 and name != "other":
                    del self.cache[name]
        if need > 0:  # nothing left to reclaim: the dirty and clean buffers go last
            take = min(self.buffers - 16 * MIB, need)
            if take > 0:
                self.buffers -= take

    def drop_caches(self) -> None:
        """``sync; echo 3 > /proc/sys/vm/drop_caches``: clean page cache, dentries and inodes."""
        self.dirty = 0.0
        for entry in self.cache.values():
            entry.size = 0.0
        self.cache = OrderedDict((("other", CachedFile(40 * MIB, held=False)),))
        self.buffers = 12 * MIB
        self.sreclaimable = 0.22 * GIB

    def spawn_pid(self) -> int:
        """A new process's PID (others start between two vLLM processes, as on a real node)."""
        self.last_pid += self.rng.randint(3, 240)
        return self.last_pid

    # --- /dev/shm ---------------------------------------------------------------------------------

    def add_shm(self, name: str, size: int, allocated: int | None = None) -> None:
        self.shm[name] = ShmFile(name, size, size if allocated is None else allocated, self.clock.epoch)
        self._reclaim()

    def remove_shm(self, name: str) -> bool:
        return self.shm.pop(name, None) is not None

    # --- time ----------------------------------------------------------------------------------------

    def advance(self, dt: float) -> None:
        if dt <= 0:
            return
        self.evicted_recently = 0.0
        self.reclaim_slack = self.rng.uniform(0.0, 0.35) * GIB
        # Reads in progress: one checkpoint at a time, in order.
        reading = 0.0
        while self.reads and dt > 0:
            current = self.reads[0]
            take = min(current.left, current.rate * dt)
            self.read(current.name, take, held=current.held)
            current.left -= take
            reading += take
            if current.left <= 0:
                self.reads.pop(0)
            else:
                break
        other = self.cache.get("other")
        if other is not None and other.size < OTHER_CACHE_MAX:
            self.read("other", OTHER_FILE_IO * dt, held=False)
        self.sreclaimable = min(self.base.slab_reclaimable, self.sreclaimable + 2 * MIB * dt)
        self.buffers = min(0.4 * GIB, self.buffers + 0.2 * MIB * dt)
        self.dirty = max(0.0, min(96 * MIB, self.dirty + self.rng.uniform(-2, 2.2) * MIB * dt))
        self._reclaim()
        self._pressure(dt)
        self._load(dt, reading)

    def _pressure(self, dt: float) -> None:
        """PSI: tasks stall while the kernel reclaims memory for them."""
        evicted_gib_s = self.evicted_recently / GIB / dt
        tight = self.free() < FREE_FLOOR * 1.5
        some = min(85.0, 9.0 * evicted_gib_s + (0.4 if tight else 0.0) + self.rng.uniform(0.0, 0.08))
        if not evicted_gib_s and not tight:
            some = self.rng.uniform(0.0, 0.05) if self.rng.random() < 0.2 else 0.0
        full = some * 0.45
        for averages, value in ((self.psi_some, some), (self.psi_full, full)):
            for index, window in enumerate((10.0, 60.0, 300.0)):
                averages[index] += (value - averages[index]) * (1 - math.exp(-dt / window))
        self.psi_some_total_us += some / 100 * dt * 1e6
        self.psi_full_total_us += full / 100 * dt * 1e6

    def _load(self, dt: float, reading: float) -> None:
        runnable = 0.25 + self.busy + (1.1 if reading > 0 else 0.0) + self.rng.uniform(-0.1, 0.1)
        for index, window in enumerate((60.0, 300.0, 900.0)):
            self.load[index] += (runnable - self.load[index]) * (1 - math.exp(-dt / window))
        self.load = [max(0.0, x) for x in self.load]

    # --- the files, as the sampler reads them ---------------------------------------------------

    def meminfo_text(self) -> str:
        total = MEM_TOTAL
        shmem = self.shmem()
        file_cache = self.file_cache()
        cached = file_cache + shmem
        free = self.free()
        anon = self.base.os_anon + self.base.services_anon + self.processes_anon
        held = self.held_cache()
        active_file = (file_cache - held) * 0.55 + held * 0.15
        inactive_file = file_cache - active_file
        active_anon = anon * 0.55 + shmem * 0.3
        inactive_anon = anon + shmem - active_anon
        slab = self.sreclaimable + self.base.slab_unreclaimable
        commit_limit = SWAP_TOTAL_KB * KIB + total / 2
        committed = anon + shmem + 9.5 * GIB + self.device_alloc * 0.02
        mapped = 0.9 * GIB + self.processes_rss * 0.2
        rows: list[tuple[str, float | None]] = [
            ("MemTotal", total),
            ("MemFree", free),
            ("MemAvailable", self.available()),
            ("Buffers", self.buffers),
            ("Cached", cached),
            ("SwapCached", 0),
            ("Active", active_anon + active_file),
            ("Inactive", inactive_anon + inactive_file),
            ("Active(anon)", active_anon),
            ("Inactive(anon)", inactive_anon),
            ("Active(file)", active_file),
            ("Inactive(file)", inactive_file),
            ("Unevictable", 30 * MIB),
            ("Mlocked", 27 * MIB),
            ("SwapTotal", SWAP_TOTAL_KB * KIB),
            ("SwapFree", SWAP_TOTAL_KB * KIB),
            ("Zswap", 0),
            ("Zswapped", 0),
            ("Dirty", self.dirty),
            ("Writeback", 0),
            ("AnonPages", anon),
            ("Mapped", mapped),
            ("Shmem", shmem),
            ("KReclaimable", self.sreclaimable),
            ("Slab", slab),
            ("SReclaimable", self.sreclaimable),
            ("SUnreclaim", self.base.slab_unreclaimable),
            ("KernelStack", 33 * MIB),
            ("PageTables", 58 * MIB),
            ("SecPageTables", 0),
            ("NFS_Unstable", 0),
            ("Bounce", 0),
            ("WritebackTmp", 0),
            ("CommitLimit", commit_limit),
            ("Committed_AS", committed),
            ("VmallocTotal", 133143592960 * KIB),
            ("VmallocUsed", 178 * MIB),
            ("VmallocChunk", 0),
            ("Percpu", 26880 * KIB),
            ("HardwareCorrupted", 0),
            ("AnonHugePages", anon * 0.4),
            ("ShmemHugePages", 0),
            ("ShmemPmdMapped", 0),
            ("FileHugePages", 0),
            ("FilePmdMapped", 0),
            ("CmaTotal", 0),
            ("CmaFree", 0),
            ("HugePages_Total", None),
            ("HugePages_Free", None),
            ("HugePages_Rsvd", None),
            ("HugePages_Surp", None),
            ("Hugepagesize", 2048 * KIB),
            ("Hugetlb", 0),
        ]
        lines = []
        for key, value in rows:
            label = f"{key}:"
            if value is None:  # a count, not a size
                lines.append(f"{label:<16}{0:>8}")
            else:
                lines.append(f"{label:<16}{max(0, int(value // KIB)):>8} kB")
        return "\n".join(lines) + "\n"

    def pressure_text(self) -> str:
        s, f = self.psi_some, self.psi_full
        return (
            f"some avg10={s[0]:.2f} avg60={s[1]:.2f} avg300={s[2]:.2f} total={int(self.psi_some_total_us)}\n"
            f"full avg10={f[0]:.2f} avg60={f[1]:.2f} avg300={f[2]:.2f} total={int(self.psi_full_total_us)}\n"
        )

    def loadavg_text(self) -> str:
        running = max(1, round(self.busy + self.rng.uniform(0, 1.5)))
        return f"{self.load[0]:.2f} {self.load[1]:.2f} {self.load[2]:.2f} {running}/{self.threads} {self.last_pid}\n"

    def uptime_s(self) -> float:
        return max(0.0, self.clock.epoch - self.boot_epoch)

    def uptime_text(self) -> str:
        uptime = self.uptime_s()
        busy = min(1.0, self.load[0] / CORES)
        return f"{uptime:.2f} {uptime * CORES * (1 - busy):.2f}\n"

    def shm_text(self) -> str:
        """``LC_ALL=C ls -lnAqsk /dev/shm``."""
        files = sorted(self.shm.values(), key=lambda f: f.name)
        rows = [
            f"{math.ceil(f.allocated / KIB):>7} -rw------- 1 0 0 {f.size:>11} {_fmt_ls_time(f.mtime)} {f.name}"
            for f in files
        ]
        total = sum(math.ceil(f.allocated / KIB) for f in files)
        return "\n".join([f"total {total}", *rows]) + "\n"

    def start_ticks(self, proc: SimProcess) -> int:
        """/proc/PID/stat's field 22: the process's start in clock ticks since boot."""
        return max(0, round((proc.start_epoch - self.boot_epoch) * CLK_TCK))

    def processes_text(self, processes: list[SimProcess]) -> str:
        """The ``==processes`` section body: stat, statm and args rows per vLLM process."""
        out: list[str] = []
        for proc in sorted(processes, key=lambda p: p.pid):
            start_ticks = self.start_ticks(proc)
            rss_pages = round(proc.rss / PAGE_SIZE)
            shared_pages = round(proc.shared / PAGE_SIZE)
            vsize = int(proc.rss * 3.1)
            run_ticks = max(0, round((self.clock.epoch - proc.start_epoch) * CLK_TCK * 0.6))
            fields = [
                proc.state,
                proc.ppid,
                proc.pid,
                proc.pid,
                0,
                -1,
                4194560,
                912345,
                0,
                17,
                0,
                run_ticks,
                run_ticks // 8,
                0,
                0,
                20,
                0,
                proc.threads,
                0,
                start_ticks,
                vsize,
                rss_pages,
                18446744073709551615,
                187650000000000,
                187650000123456,
                281474000000000,
                0,
                0,
                0,
                0,
                16781312,
                1266,
                0,
                0,
                0,
                17,
                5,
                0,
                0,
                0,
                0,
                0,
            ]
            stat = f"{proc.pid} ({proc.comm[:15]}) " + " ".join(str(x) for x in fields)
            size_pages = round(vsize / PAGE_SIZE)
            out.append(f"stat {stat}")
            out.append(f"statm {proc.pid} {size_pages} {rss_pages} {shared_pages} 1 0 {rss_pages} 0")
            out.append(f"args {proc.pid} {proc.args} ")
        return "\n".join(out) + ("\n" if out else "")
