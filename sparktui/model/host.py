"""Host state of one node: the sampler's frames, their parser, and the unified-memory ledger.

A small POSIX sh loop (``sparktui.sources.sampler``) runs on each node over SSH and prints one
*frame* per interval; on the local machine ``LocalSampler`` builds the same ``HostSample`` from
/proc and psutil. This module is pure: text in, frozen data out.

Frame format (version 1)
------------------------
Every line of a frame starts a section or belongs to the section above it. Marker lines begin with
``==``; no content line can (content lines are /proc text, ``ls`` rows, ``stat``/``statm``/``args``
rows and ``Key=value`` rows)::

    ==sparktui-sample 1 <remote epoch, seconds.centiseconds> <seq>
    ==meminfo                       /proc/meminfo verbatim                      every frame
    ==pressure                      /proc/pressure/memory verbatim              every frame
    ==loadavg                       /proc/loadavg verbatim                      every frame
    ==uptime                        /proc/uptime verbatim                       every frame
    ==shm                           `LC_ALL=C ls -lnAqsk /dev/shm` output       every Nth frame
    ==processes clk_tck=100 pagesize=4096 btime=<boot epoch> [hidepid=<v>]      every Nth frame
    stat <the /proc/PID/stat line>
    statm <pid> <the /proc/PID/statm line>
    args <pid> <command line, NULs as spaces, at most 300 bytes>
    ==cpufreq                                                                   every Nth frame
    <policyN> <scaling_cur_freq> <scaling_max_freq> <cpuinfo_max_freq>  (kHz, one cpufreq policy
                             (a frequency domain) a line; none without cpufreq: a VM, no driver)
    ==services <number of probes>                                               every Mth frame
    ==service <instance> systemd <unit>
    <systemctl show -p LoadState,ActiveState,SubState,ExecMainStatus,NRestarts,
     ExecMainStartTimestamp,ExecMainStartTimestampMonotonic,ExecStart output>
    ExecPath=<the ExecStart binary, or the script an interpreter runs>
    ExecPathExists=yes|no|unknown
    ==service <instance> docker <container>
    Status=… RestartCount=… ExitCode=… StartedAt=… Error=…   (one Key=value a line)
    ==sparktui-end <seq>

Any section header may instead read ``==<name> unavailable <reason>`` (``==service`` headers put it
after the three names): the node could not produce it (PSI missing from the kernel, systemctl not
installed, permission denied, a timeout) and says why in one line. That is reported in
``HostSample.problems``, never an error.

A section that is *absent* from a frame was not refreshed in it (the sampler reads /dev/shm and the
process table every Nth frame and asks systemd/docker every Mth, to stay cheap; see
docs/performance.md). Its ``HostSample`` field is None and its name is missing from ``refreshed``;
``merge`` carries the previous value forward. A section that is present but empty (``==shm`` with no
files, ``==services 0``) is an empty tuple or mapping: refreshed, and empty.

``parse_frame`` raises ValueError for a malformed frame: a missing or bad header or end marker, a
header line that is not a section, a line outside any section, a repeated section. Content that does
not parse inside a known section (an odd ``ls`` row, a meminfo line) makes that section unavailable
with the parser's message, so one bad section never hides the others.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from sparktui.model.memory import KIB, HostMemory, MemoryPressure, parse_meminfo, parse_pressure
from sparktui.model.numbers import is_digits

FORMAT_VERSION = 1
BEGIN = "==sparktui-sample"
END = "==sparktui-end"
MARK = "=="
UNAVAILABLE = "unavailable"

# In frame order. "services" covers all ``==service`` sections of a frame.
SECTIONS = ("meminfo", "pressure", "loadavg", "uptime", "shm", "processes", "cpufreq", "services")

MAX_FRAME_BYTES = 4 * 1024 * 1024
MAX_SHM_ENTRIES = 1000
# A `vllm serve` line with a speculative config runs to several hundred characters, and the drift
# screen compares the flags past the first two hundred too; still a bound on what a node may send.
MAX_ARGS_CHARS = 2000

# Which command lines are vLLM's (the sampler's grep pattern matches the same, see sampler.py).
VLLM_PROCESS_RE = re.compile(r"VLLM::|vllm.serve|vllm[.]entrypoints")

# /dev/shm names vLLM, NCCL and Python multiprocessing leave behind after a crash or SIGKILL
# (reference/exporters/linux_memory.md §4), by kind.
SHM_PREFIXES: tuple[tuple[str, str], ...] = (
    ("psm_", "psm"),
    ("sem.mp-", "sem"),
    ("sem.loky-", "sem"),
    ("nccl-", "nccl"),
    ("vllm_offload_", "vllm_offload"),
)
LEFTOVER_KINDS = frozenset(kind for _, kind in SHM_PREFIXES)

DOCKER_ZERO_TIME = "0001-01-01T00:00:00Z"


# --- data ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ShmEntry:
    """One entry of /dev/shm. ``size_bytes`` is the apparent size (``ls -l``); ``allocated_bytes``
    the memory the file really holds (``ls -s``, st_blocks): a sparse ``vllm_offload_*.mmap`` can
    be far larger than what it occupies in Shmem."""

    name: str
    size_bytes: int
    kind: str  # "psm" | "sem" | "nccl" | "vllm_offload" | "other"
    allocated_bytes: int | None = None

    @property
    def held_bytes(self) -> int:
        """Memory the entry holds: allocated when known, else its apparent size."""
        return self.size_bytes if self.allocated_bytes is None else self.allocated_bytes


@dataclass(frozen=True, slots=True)
class HostProcess:
    """A vLLM-related process. ``rss_anon_bytes`` is RSS minus file and shmem pages (statm
    resident − shared): the part that is in neither Cached nor Shmem."""

    pid: int
    ppid: int
    rss_bytes: int
    start_epoch: float | None
    kind: str  # "serve" | "worker" | "engine_core" | "other"
    args: str
    rss_anon_bytes: int | None = None
    # /proc/PID/stat's field 22: the start time in clock ticks since boot, exact (``start_epoch`` is
    # derived from it); with the PID it tells the process from a later one that reuses the PID.
    start_ticks: int | None = None


@dataclass(frozen=True, slots=True)
class ServiceState:
    """A vLLM instance's systemd unit or docker container, as its manager reports it.

    ``state`` is systemd's ActiveState or docker's State.Status, "unknown" when it could not be
    read (then ``problem`` says why). ``exit_status`` is ExecMainStatus / State.ExitCode;
    ``restarts`` NRestarts / RestartCount. ``exec_path`` is the ExecStart binary, or the script
    when ExecStart runs an interpreter on one (``/bin/bash /home/x/serve.sh``), and
    ``exec_exists`` whether it exists on the node (None: unknown, e.g. a directory the SSH user
    cannot search). When ExecStart is ``docker exec … script``, the script lives in the container
    and only ExecMainStatus 127 and NRestarts show it is gone.
    """

    instance: str
    manager: str  # "systemd" | "docker"
    name: str
    state: str
    sub_state: str | None = None
    exit_status: int | None = None
    restarts: int | None = None
    started_epoch: float | None = None
    exec_path: str | None = None
    exec_exists: bool | None = None
    problem: str | None = None

    @property
    def starting(self) -> bool:
        """systemd "activating" (which includes waiting out RestartSec), docker restarting/created."""
        if self.manager == "systemd":
            return self.state == "activating"
        return self.state in ("restarting", "created")

    @property
    def running(self) -> bool:
        return self.state == ("active" if self.manager == "systemd" else "running")

    @property
    def failed(self) -> bool:
        """systemd "failed"; docker dead, or exited with a non-zero code."""
        if self.manager == "systemd":
            return self.state == "failed"
        return self.state == "dead" or (self.state == "exited" and self.exit_status not in (None, 0))

    @property
    def restarting(self) -> bool:
        """Between two attempts of a crash loop: systemd auto-restart, docker restarting."""
        return self.sub_state == "auto-restart" or (self.manager == "docker" and self.state == "restarting")


@dataclass(frozen=True, slots=True)
class CpuFrequency:
    """The CPUs' clocks from cpufreq, in Hz, over its policies (frequency domains: a policy's CPUs
    share one clock): now (mean, lowest, highest), the policies' ceiling (``scaling_max_freq``: what a
    power or thermal cap lowers) and the hardware's (``cpuinfo_max_freq``). On GB10 the two kinds of
    core have different ceilings: the highest is kept."""

    policies: int
    mean_hz: float
    min_hz: float
    max_hz: float
    limit_hz: float | None
    top_hz: float | None

    @property
    def capped(self) -> bool:
        """The policy holds the CPUs below what the hardware can do (by more than 5 %)."""
        return self.limit_hz is not None and self.top_hz is not None and self.limit_hz < 0.95 * self.top_hz

    @property
    def text(self) -> str:
        """``CPU 1.50 GHz (1.49-1.50), capped at 1.50 of 3.90 GHz`` for the screen."""
        ghz = f"CPU {self.mean_hz / 1e9:.2f} GHz"
        if self.policies > 1:
            ghz += f" ({self.min_hz / 1e9:.2f}-{self.max_hz / 1e9:.2f})"
        if self.capped and self.limit_hz is not None and self.top_hz is not None:
            return f"{ghz}, capped at {self.limit_hz / 1e9:.2f} of {self.top_hz / 1e9:.2f} GHz"
        if self.top_hz is not None:
            return f"{ghz}, max {self.top_hz / 1e9:.2f} GHz"
        return ghz


def parse_cpufreq(lines: Iterable[str]) -> CpuFrequency | None:
    """``policyN cur_khz scaling_max_khz cpuinfo_max_khz`` lines → CpuFrequency (a missing max: "");
    None for no line (a machine without cpufreq: a VM, a kernel without the driver)."""
    current: list[float] = []
    limits: list[float] = []
    tops: list[float] = []
    for line in lines:
        fields = line.split()
        if not fields:
            continue
        try:
            values = [float(v) * 1e3 for v in fields[1:4]]
        except ValueError:
            raise ValueError(f"cpufreq line is not 'policyN cur max top' in kHz: {_snippet(line)}") from None
        if not values or not all(math.isfinite(v) and v > 0 for v in values):
            raise ValueError(f"cpufreq line is not 'policyN cur max top' in kHz: {_snippet(line)}")
        current.append(values[0])
        if len(values) > 1:
            limits.append(values[1])
        if len(values) > 2:
            tops.append(values[2])
    if not current:
        return None
    return CpuFrequency(
        policies=len(current),
        mean_hz=sum(current) / len(current),
        min_hz=min(current),
        max_hz=max(current),
        limit_hz=max(limits) if limits else None,
        top_hz=max(tops) if tops else None,
    )


@dataclass(frozen=True, slots=True)
class HostSample:
    """One node's host state at ``remote_epoch`` (the node's clock).

    A field is None when its section was not refreshed (see the module docstring) or could not be
    read; ``section_problems`` tells the two apart and says why, and ``problems`` lists every
    problem (sections, then services) as one line each. ``refreshed`` maps each section to the
    remote epoch it was last read at (after ``merge``, older for carried sections).
    """

    remote_epoch: float
    memory: HostMemory
    pressure: MemoryPressure | None
    pressure_problem: str | None
    shm: tuple[ShmEntry, ...] | None
    processes: tuple[HostProcess, ...] | None
    load: tuple[float, float, float] | None
    uptime_s: float | None
    services: Mapping[str, ServiceState] | None
    problems: tuple[str, ...]
    seq: int = 0
    refreshed: Mapping[str, float] = field(default_factory=dict)
    section_problems: Mapping[str, str] = field(default_factory=dict)
    cpu_freq: CpuFrequency | None = None

    @property
    def boot_epoch(self) -> float | None:
        return None if self.uptime_s is None else self.remote_epoch - self.uptime_s


def problem_lines(section_problems: Mapping[str, str], services: Mapping[str, ServiceState] | None) -> tuple[str, ...]:
    """The one-line problems of a sample: each section's, then each service's."""
    lines = [f"{section}: {why}" for section, why in section_problems.items()]
    for state in (services or {}).values():
        if state.problem is not None:
            lines.append(f"{state.instance} ({state.manager} {state.name}): {state.problem}")
    return tuple(lines)


# --- small parsers shared with LocalSampler -----------------------------------------------------


def shm_kind(name: str) -> str:
    for prefix, kind in SHM_PREFIXES:
        if name.startswith(prefix):
            return kind
    return "other"


def process_kind(args: str) -> str:
    """serve (the API server), worker, engine_core or other, from a vLLM process's command line."""
    if "VLLM::Worker" in args:
        return "worker"
    if "VLLM::EngineCore" in args:
        return "engine_core"
    if "VLLM::APIServer" in args or "vllm serve" in args or "vllm.entrypoints" in args:
        return "serve"
    return "other"


def is_vllm_process(args: str) -> bool:
    return VLLM_PROCESS_RE.search(args) is not None


def short_args(args: str) -> str:
    args = args.replace("\0", " ").strip()
    return args if len(args) <= MAX_ARGS_CHARS else args[: MAX_ARGS_CHARS - 1] + "…"


def parse_properties(text: str) -> dict[str, str]:
    """``Key=value`` lines (systemctl show, the docker format) → dict; other lines are ignored
    (a docker State.Error can span lines)."""
    props: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key and key.replace("_", "").isalnum():
            props.setdefault(key, value)
    return props


_INTERPRETERS = re.compile(r"^(?:sh|bash|dash|zsh|python|python3(?:\.\d+)?)$")


def exec_target(exec_start: str) -> str | None:
    """The path whose absence makes a systemd ExecStart fail, from ``systemctl show -p ExecStart``:
    argv[0], or argv[1] when argv[0] is a shell or Python running a script by absolute path.
    The sampler's shell does the same (sampler.py ``sd``)."""
    _, found, rest = exec_start.partition("argv[]=")
    if not found:
        return None
    argv = rest.split(" ;", 1)[0].split()
    if not argv:
        return None
    if _INTERPRETERS.match(argv[0].rsplit("/", 1)[-1]) and len(argv) > 1 and argv[1].startswith("/"):
        return argv[1]
    return argv[0]


def _int(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value.strip())
    except ValueError:
        return None


def _systemd_started(props: Mapping[str, str], boot_epoch: float | None) -> float | None:
    mono = _int(props.get("ExecMainStartTimestampMonotonic"))
    if mono and boot_epoch is not None:
        # CLOCK_MONOTONIC µs since boot; /proc/uptime is CLOCK_BOOTTIME (equal unless suspended).
        return boot_epoch + mono / 1e6
    text = (props.get("ExecMainStartTimestamp") or "").strip()
    day, _, zone = text.rpartition(" ")
    if zone in ("UTC", "GMT") and day:
        try:
            parsed = datetime.strptime(day, "%a %Y-%m-%d %H:%M:%S")
        except ValueError:
            return None
        return parsed.replace(tzinfo=UTC).timestamp()
    return None


def _docker_started(text: str | None) -> float | None:
    if not text or text.strip() in ("", DOCKER_ZERO_TIME, "<no value>"):
        return None
    try:
        return datetime.fromisoformat(text.strip()).timestamp()
    except ValueError:
        return None


def service_state(
    instance: str,
    manager: str,
    name: str,
    props: Mapping[str, str],
    *,
    boot_epoch: float | None = None,
) -> ServiceState:
    """A ServiceState from the ``Key=value`` output of the sampler's systemd or docker probe."""
    problems: list[str] = []
    if manager == "systemd":
        if props.get("LoadState") == "not-found":
            problems.append(f"unit {name} not found")
        exists_text = props.get("ExecPathExists")
        exists = {"yes": True, "no": False}.get(exists_text or "")
        exec_path = props.get("ExecPath") or None
        if exists is False and exec_path:
            problems.append(f"ExecStart path {exec_path} does not exist on the node")
        return ServiceState(
            instance,
            manager,
            name,
            state=props.get("ActiveState") or "unknown",
            sub_state=props.get("SubState") or None,
            exit_status=_int(props.get("ExecMainStatus")),
            restarts=_int(props.get("NRestarts")),
            started_epoch=_systemd_started(props, boot_epoch),
            exec_path=exec_path,
            exec_exists=exists,
            problem="; ".join(problems) or None,
        )
    error = (props.get("Error") or "").strip()
    if error:
        problems.append(error)
    return ServiceState(
        instance,
        manager,
        name,
        state=props.get("Status") or "unknown",
        sub_state=None,
        exit_status=_int(props.get("ExitCode")),
        restarts=_int(props.get("RestartCount")),
        started_epoch=_docker_started(props.get("StartedAt")),
        problem="; ".join(problems) or None,
    )


def unknown_service(instance: str, manager: str, name: str, problem: str) -> ServiceState:
    return ServiceState(instance, manager, name, state="unknown", problem=problem)


# --- frame splitting ----------------------------------------------------------------------------


class FrameSplitter:
    """Cuts a stream of lines into whole frames.

    ``feed`` returns a frame's text (header to end marker) when its end marker arrives, else None.
    Lines outside a frame are skipped (SSH banners, a frame cut short by a reconnect). A frame that
    grows past ``max_bytes`` is dropped up to its end marker, a frame interrupted by the next header
    is dropped; each drop is counted in ``discarded`` and described in ``last_problem``.
    ``feed_chunk`` accepts arbitrary text chunks and keeps a trailing partial line (bounded too).
    """

    def __init__(self, max_bytes: int = MAX_FRAME_BYTES) -> None:
        self.max_bytes = max_bytes
        self.discarded = 0
        self.skipped_lines = 0
        self.last_problem: str | None = None
        self._lines: list[str] | None = None
        self._size = 0
        self._overflow = False
        self._partial = ""

    def _drop(self, why: str) -> None:
        self.discarded += 1
        self.last_problem = why

    def feed(self, line: str) -> str | None:
        line = line.rstrip("\r\n")
        if line.startswith(BEGIN + " ") or line == BEGIN:
            if self._lines is not None:  # (an overflowing frame was counted when it overflowed)
                self._drop("a frame ended without its end marker (sampler restarted or output cut)")
            self._lines, self._size, self._overflow = [line], len(line) + 1, False
            return None
        if self._overflow:
            if line.startswith(END):
                self._overflow = False
            return None
        if self._lines is None:
            self.skipped_lines += 1
            return None
        self._size += len(line) + 1
        if self._size > self.max_bytes:
            self._lines, self._overflow = None, True
            self._drop(f"a frame larger than {self.max_bytes} bytes was discarded")
            return None
        self._lines.append(line)
        if line.startswith(END):
            text = "\n".join(self._lines) + "\n"
            self._lines = None
            return text
        return None

    def feed_chunk(self, chunk: str) -> list[str]:
        """Feed raw text; returns the frames it completed."""
        lines = (self._partial + chunk).split("\n")
        self._partial = lines.pop()
        frames = [frame for line in lines if (frame := self.feed(line)) is not None]
        if len(self._partial) > self.max_bytes:
            self._partial = ""
            if self._lines is None:
                self.skipped_lines += 1
            else:  # skip the rest of this frame: its next line would be this line's tail
                self._lines, self._overflow = None, True
                self._drop(f"a line longer than {self.max_bytes} bytes was discarded")
        return frames


# --- frame parsing ------------------------------------------------------------------------------


@dataclass(slots=True)
class _Section:
    name: str
    args: str
    lines: list[str]


def _snippet(line: str) -> str:
    return repr(line if len(line) <= 60 else line[:57] + "...")


def _split_sections(text: str) -> tuple[float, int, list[_Section]]:
    # Only "\n" ends a line: a command line may hold other characters str.splitlines() splits on.
    lines = text.rstrip("\n").split("\n") if text else []
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines:
        raise ValueError("empty host sample frame")
    head = lines[0].split()
    if not head or head[0] != BEGIN:
        raise ValueError(f"host sample frame does not start with {BEGIN}: {_snippet(lines[0])}")
    if len(head) != 4 or head[1] != str(FORMAT_VERSION):
        raise ValueError(f"host sample header is not '{BEGIN} {FORMAT_VERSION} EPOCH SEQ': {_snippet(lines[0])}")
    try:
        epoch, seq = float(head[2]), int(head[3])
    except ValueError:
        raise ValueError(f"host sample header has a bad epoch or sequence: {_snippet(lines[0])}") from None
    if not math.isfinite(epoch):
        raise ValueError(f"host sample header has a bad epoch: {_snippet(lines[0])}")
    if not lines[-1].startswith(END):
        raise ValueError(f"host sample {seq} has no end marker {END}")
    sections: list[_Section] = []
    for line_no, line in enumerate(lines[1:-1], start=2):
        if line.startswith(MARK):
            name, _, args = line[len(MARK) :].partition(" ")
            if not name or not name.replace("_", "").isalnum():
                raise ValueError(f"host sample {seq} line {line_no} is not a section header: {_snippet(line)}")
            sections.append(_Section(name, args, []))
        elif not sections:
            raise ValueError(f"host sample {seq} line {line_no} is outside any section: {_snippet(line)}")
        else:
            sections[-1].lines.append(line)
    return epoch, seq, sections


def _unavailable(args: str) -> str | None:
    """The reason from ``unavailable REASON`` header arguments, else None."""
    word, _, reason = args.partition(" ")
    return (reason.strip() or "no reason given") if word == UNAVAILABLE else None


def _parse_load(lines: list[str]) -> tuple[float, float, float]:
    parts = lines[0].split() if lines else []
    try:
        return float(parts[0]), float(parts[1]), float(parts[2])
    except (IndexError, ValueError):
        raise ValueError(f"/proc/loadavg is not 'avg1 avg5 avg15 …': {_snippet(' '.join(lines))}") from None


def _parse_uptime(lines: list[str]) -> float:
    parts = lines[0].split() if lines else []
    try:
        return float(parts[0])
    except (IndexError, ValueError):
        raise ValueError(f"/proc/uptime is not 'seconds idle': {_snippet(' '.join(lines))}") from None


def parse_shm_listing(lines: Iterable[str]) -> tuple[tuple[ShmEntry, ...], str | None]:
    """``LC_ALL=C ls -lnAqsk`` rows → entries sorted by name, and a note if the list was capped.

    Row: ``BLOCKS MODE LINKS UID GID SIZE MON DAY TIME|YEAR NAME`` (BLOCKS in KiB)."""
    entries: list[ShmEntry] = []
    for line in lines:
        if not line.strip() or line.startswith("total "):
            continue
        parts = line.split(None, 9)
        if len(parts) != 10 or not is_digits(parts[0]) or not is_digits(parts[5]):
            raise ValueError(
                f"/dev/shm listing row is not 'blocks mode links uid gid size date name': {_snippet(line)}"
            )
        name = parts[9]
        if parts[1].startswith("l"):
            name = name.split(" -> ", 1)[0]
        entries.append(ShmEntry(name, int(parts[5]), shm_kind(name), int(parts[0]) * KIB))
    entries.sort(key=lambda e: e.name)
    if len(entries) > MAX_SHM_ENTRIES:
        return tuple(entries[:MAX_SHM_ENTRIES]), f"{len(entries)} entries, only the first {MAX_SHM_ENTRIES} kept"
    return tuple(entries), None


def _header_values(args: str) -> dict[str, str]:
    return dict(pair.partition("=")[::2] for pair in args.split() if "=" in pair)


def _parse_processes(section: _Section) -> tuple[tuple[HostProcess, ...], str | None]:
    head = _header_values(section.args)
    try:
        clk_tck, pagesize = int(head["clk_tck"]), int(head["pagesize"])
        btime = float(head["btime"])
    except (KeyError, ValueError):
        raise ValueError(f"processes header lacks clk_tck, pagesize or btime: {_snippet(section.args)}") from None
    if clk_tck <= 0 or pagesize <= 0:
        raise ValueError(f"processes header has a zero clk_tck or pagesize: {_snippet(section.args)}")
    stats: dict[int, list[str]] = {}
    statm: dict[int, list[str]] = {}
    args: dict[int, str] = {}
    bad = 0
    for line in section.lines:
        tag, _, rest = line.partition(" ")
        if tag == "stat":
            pid_text, _, tail = rest.partition(" ")
            fields = tail.rpartition(")")[2].split()  # the comm in (…) may hold spaces and ')'
            if not is_digits(pid_text) or len(fields) < 22:
                bad += 1
                continue
            stats.setdefault(int(pid_text), fields)
        elif tag in ("statm", "args"):
            pid_text, _, tail = rest.partition(" ")
            if not is_digits(pid_text):
                bad += 1
                continue
            if tag == "statm":
                statm.setdefault(int(pid_text), tail.split())
            else:
                args.setdefault(int(pid_text), tail)
        else:
            bad += 1
    processes: list[HostProcess] = []
    for pid, fields in stats.items():
        # Fields after the comm: [0] state (3rd field of stat), [1] ppid, [19] starttime, [21] rss.
        try:
            ppid, start_ticks, rss_pages = int(fields[1]), int(fields[19]), int(fields[21])
        except ValueError:
            bad += 1
            continue
        anon: int | None = None
        m = statm.get(pid, [])
        if len(m) >= 3 and is_digits(m[1]) and is_digits(m[2]):
            rss_pages = int(m[1])
            anon = max(0, int(m[1]) - int(m[2])) * pagesize
        text = args.get(pid, "")
        processes.append(
            HostProcess(
                pid=pid,
                ppid=ppid,
                rss_bytes=rss_pages * pagesize,
                start_epoch=btime + start_ticks / clk_tck if btime > 0 else None,
                kind=process_kind(text),
                args=short_args(text),
                rss_anon_bytes=anon,
                start_ticks=start_ticks,
            )
        )
    processes.sort(key=lambda p: p.pid)
    notes = []
    if bad:
        notes.append(f"{bad} unreadable process rows skipped")
    hidepid = head.get("hidepid")
    if hidepid:
        notes.append(
            f"/proc is mounted with hidepid={hidepid}: vLLM processes of other users are hidden "
            "unless the SSH user is root"
        )
    return tuple(processes), "; ".join(notes) or None


def _parse_services(head: _Section, parts: list[_Section], boot_epoch: float | None) -> dict[str, ServiceState]:
    words = head.args.split()
    expected = _int(words[0]) if words else None
    if expected is None:
        raise ValueError(f"services header is not '==services COUNT': {_snippet(head.args)}")
    if expected != len(parts):
        raise ValueError(f"services header announces {expected} services, the frame has {len(parts)}")
    services: dict[str, ServiceState] = {}
    for part in parts:
        fields = part.args.split(" ", 3)
        if len(fields) < 3 or fields[1] not in ("systemd", "docker"):
            raise ValueError(f"service header is not '==service INSTANCE systemd|docker NAME': {_snippet(part.args)}")
        instance, manager, name = fields[:3]
        reason = _unavailable(fields[3]) if len(fields) == 4 else None
        if reason is not None:
            services[instance] = unknown_service(instance, manager, name, reason)
        else:
            props = parse_properties("\n".join(part.lines))
            services[instance] = service_state(instance, manager, name, props, boot_epoch=boot_epoch)
    return services


@dataclass(slots=True)
class _Parsed:
    """The sections of one frame as they are parsed (None: absent or unavailable)."""

    memory: HostMemory | None = None
    pressure: MemoryPressure | None = None
    load: tuple[float, float, float] | None = None
    uptime: float | None = None
    shm: tuple[ShmEntry, ...] | None = None
    processes: tuple[HostProcess, ...] | None = None
    services: dict[str, ServiceState] | None = None
    cpu_freq: CpuFrequency | None = None


def _parse_section(out: _Parsed, section: _Section, service_parts: list[_Section], epoch: float) -> str | None:
    """Parse one available section into ``out``; returns a note for ``section_problems``."""
    name, text = section.name, "\n".join(section.lines)
    if name == "meminfo":
        out.memory = parse_meminfo(text)
    elif name == "pressure":
        out.pressure = parse_pressure(text)
    elif name == "loadavg":
        out.load = _parse_load(section.lines)
    elif name == "uptime":
        out.uptime = _parse_uptime(section.lines)
    elif name == "shm":
        out.shm, note = parse_shm_listing(section.lines)
        return note
    elif name == "processes":
        out.processes, note = _parse_processes(section)
        return note
    elif name == "cpufreq":
        out.cpu_freq = parse_cpufreq(section.lines)
    elif name == "services":
        boot = None if out.uptime is None else epoch - out.uptime
        out.services = _parse_services(section, service_parts, boot)
    return None


def parse_frame(text: str) -> HostSample:
    """One frame's text (from ``FrameSplitter``) → HostSample; ValueError (one line) if malformed."""
    epoch, seq, sections = _split_sections(text)
    by_name: dict[str, _Section] = {}
    service_parts: list[_Section] = []
    section_problems: dict[str, str] = {}
    for section in sections:
        if section.name == "service":
            service_parts.append(section)
        elif section.name in by_name:
            raise ValueError(f"host sample {seq} has two {section.name} sections")
        else:
            by_name[section.name] = section
    if service_parts and "services" not in by_name:
        raise ValueError(f"host sample {seq} has service sections without a services header")

    out = _Parsed()
    for name in SECTIONS:  # in this order: services need the uptime for the boot time
        if name not in by_name:
            continue
        section = by_name[name]
        reason = _unavailable(section.args)
        if reason is not None:
            section_problems[name] = reason
            continue
        try:
            note = _parse_section(out, section, service_parts, epoch)
        except ValueError as exc:
            if name == "services":  # our own Key=value block: a broken one is a broken frame
                raise ValueError(f"host sample {seq}: {exc}") from None
            section_problems[name] = str(exc)
        else:
            if note:
                section_problems[name] = note
    for name in by_name:
        if name not in SECTIONS:
            section_problems[name] = "unknown section ignored (sampler and dashboard versions differ?)"

    return HostSample(
        remote_epoch=epoch,
        memory=out.memory if out.memory is not None else HostMemory(),
        pressure=out.pressure,
        pressure_problem=section_problems.get("pressure"),
        shm=out.shm,
        processes=out.processes,
        load=out.load,
        uptime_s=out.uptime,
        services=out.services,
        problems=problem_lines(section_problems, out.services),
        seq=seq,
        refreshed={name: epoch for name in SECTIONS if name in by_name},
        section_problems=section_problems,
        cpu_freq=out.cpu_freq,
    )


def merge(previous: HostSample | None, new: HostSample) -> HostSample:
    """``new``, with every section it did not refresh taken from ``previous`` (value, refresh time
    and problem). A section ``new`` refreshed wins even when it is unavailable now."""
    if previous is None:
        return new
    carried = [name for name in SECTIONS if name not in new.refreshed and name in previous.refreshed]
    if not carried:
        return new
    take = set(carried)
    refreshed = dict(new.refreshed)
    problems_map = {k: v for k, v in new.section_problems.items() if k not in take}
    for name in carried:
        refreshed[name] = previous.refreshed[name]
        if name in previous.section_problems:
            problems_map[name] = previous.section_problems[name]
    services = previous.services if "services" in take else new.services
    return replace(
        new,
        memory=previous.memory if "meminfo" in take else new.memory,
        pressure=previous.pressure if "pressure" in take else new.pressure,
        pressure_problem=previous.pressure_problem if "pressure" in take else new.pressure_problem,
        load=previous.load if "loadavg" in take else new.load,
        uptime_s=previous.uptime_s if "uptime" in take else new.uptime_s,
        shm=previous.shm if "shm" in take else new.shm,
        processes=previous.processes if "processes" in take else new.processes,
        cpu_freq=previous.cpu_freq if "cpufreq" in take else new.cpu_freq,
        services=services,
        refreshed={name: refreshed[name] for name in SECTIONS if name in refreshed},
        section_problems=problems_map,
        problems=problem_lines(problems_map, services),
    )


# --- what the dashboard derives -----------------------------------------------------------------


def leftovers(sample: HostSample) -> tuple[ShmEntry, ...]:
    """/dev/shm entries of the kinds vLLM, NCCL and multiprocessing leak, while no vLLM process
    runs (the shm-leftovers signature). Empty when the process list or /dev/shm is unknown."""
    if sample.shm is None or sample.processes is None or sample.processes:
        return ()
    return tuple(entry for entry in sample.shm if entry.kind in LEFTOVER_KINDS)


def stale_workers(sample: HostSample, service_running: bool) -> tuple[HostProcess, ...]:
    """``VLLM::Worker*`` processes alive while their service or container is stopped (the
    stale-workers signature: they hold port 29501 and memory, and survive ``pkill`` in a
    host-network container)."""
    if service_running or sample.processes is None:
        return ()
    return tuple(p for p in sample.processes if p.kind == "worker")


@dataclass(frozen=True, slots=True)
class MemoryLedger:
    """Where a node's unified memory is, in bytes; None where the sample lacks the input.

    From /proc/meminfo: ``total`` MemTotal, ``available`` MemAvailable (what vLLM's start-up
    check compares), ``free`` MemFree, ``buffers`` Buffers, ``reclaimable_cache`` Cached − Shmem
    (what ``drop_caches`` can free, with Buffers), ``shmem`` Shmem (tmpfs and /dev/shm, which
    ``drop_caches`` cannot free). From the process list: ``vllm_rss`` the summed RSS of vLLM's
    processes and ``vllm_used`` the part of it the bar attributes to vLLM. From /dev/shm:
    ``shm_leftovers`` the bytes held by entries of the leftover kinds (psm_, sem.mp-, nccl-,
    vllm_offload_), always counted; ``vllm_running`` says whether any vLLM process runs, i.e.
    whether they are leftovers (False) or in use (True); None when the process list is unknown.
    ``models_held``: the part of ``other`` that servers loading models on demand say their loaded models
    hold (Ollama's ``/api/ps`` sizes), at most ``other``; None where no such server says so.

    What /proc can and cannot attribute, on GB10's unified memory: RSS counts only pages mapped
    into a process's page tables as anonymous, file or shmem memory. File pages (an mmapped
    safetensors file) are also in Cached and shmem pages also in Shmem, so the bar takes only the
    anonymous part (statm resident − shared) as vLLM's. Memory the NVIDIA driver allocates for
    CUDA (weights, KV cache) is counted in no process's RSS unless the driver maps it as ordinary
    pages; /proc does not say which, so that memory is in ``other_used`` and the vLLM segment is
    a lower bound. Per-process GPU memory needs ``nvidia-smi --query-compute-apps`` (not sampled).

    The arithmetic of ``segments()``, which add up to MemTotal::

        used       = MemTotal − MemFree − Buffers − Cached        (anon, slab, kernel, driver)
        vLLM       = min(Σ vLLM anonymous RSS (RSS where unknown; 0 with no process list), used)
        other      = used − vLLM                                  (less "models held", shown apart)
        cache      = (Cached − Shmem) + Buffers                   ("reclaimable cache")
        shmem      = Cached − (Cached − Shmem) = min(Shmem, Cached)
        free       = MemFree
        vLLM + other + cache + shmem + free = MemTotal

    ``used`` is clamped at 0 should a sample break the kernel's MemFree + Buffers + Cached ≤
    MemTotal. MemAvailable is not a segment: it overlaps the cache (≈ MemFree + most of the file
    cache + half of SReclaimable); show it as a marker on the bar.
    """

    total: float | None
    available: float | None
    free: float | None
    buffers: float | None
    vllm_rss: float | None
    vllm_used: float | None
    other_used: float | None
    reclaimable_cache: float | None
    shmem: float | None
    shm_leftovers: float | None
    vllm_running: bool | None
    models_held: float | None = None

    def segments(self) -> tuple[tuple[str, float], ...]:
        """(label, bytes) parts in bar order, summing to ``total``; () when an input is missing."""
        if (
            self.total is None
            or self.free is None
            or self.buffers is None
            or self.reclaimable_cache is None
            or self.shmem is None
            or self.vllm_used is None
            or self.other_used is None
        ):
            return ()
        held = () if not self.models_held else (("models held", self.models_held),)
        return (
            ("vLLM", self.vllm_used),
            *held,
            ("other", self.other_used - (self.models_held or 0.0)),
            ("reclaimable cache", self.reclaimable_cache + self.buffers),
            ("shmem", self.shmem),
            ("free", self.free),
        )


def ledger(sample: HostSample, vllm_reserved: float | None = None, models_held: float | None = None) -> MemoryLedger:
    """The memory ledger of a sample (see ``MemoryLedger`` for the arithmetic).

    ``vllm_reserved`` is what the running vLLM instances reserved at start-up (their
    ``gpu_memory_utilization`` × the total): on unified memory the driver's allocations are in no
    process's RSS, so when it is given the vLLM segment is the larger of the two, capped at ``used``.
    ``models_held``: what the node's servers that load models on demand say their loaded models hold
    (driver memory too, in no vLLM's RSS: a part of ``other``, capped at it).
    """
    mem = sample.memory
    processes = sample.processes
    vllm_rss = None if processes is None else float(sum(p.rss_bytes for p in processes))
    vllm_anon = (
        None
        if processes is None
        else float(sum(p.rss_bytes if p.rss_anon_bytes is None else p.rss_anon_bytes for p in processes))
    )
    shm_leftovers = (
        None if sample.shm is None else float(sum(e.held_bytes for e in sample.shm if e.kind in LEFTOVER_KINDS))
    )
    running = None if processes is None else bool(processes)
    reclaimable = mem.page_cache_droppable
    shmem_part: float | None = None
    used: float | None = None
    if (
        mem.mem_total is not None
        and mem.mem_free is not None
        and mem.buffers is not None
        and mem.cached is not None
        and reclaimable is not None
    ):
        used = max(0.0, mem.mem_total - mem.mem_free - mem.buffers - mem.cached)
        shmem_part = mem.cached - reclaimable
    vllm_used = None if used is None else min(max(vllm_anon or 0.0, vllm_reserved or 0.0), used)
    other_used = None if used is None or vllm_used is None else used - vllm_used
    held = None if models_held is None or other_used is None else min(max(0.0, models_held), other_used)
    return MemoryLedger(
        total=mem.mem_total,
        available=mem.mem_available,
        free=mem.mem_free,
        buffers=mem.buffers,
        vllm_rss=vllm_rss,
        vllm_used=vllm_used,
        other_used=other_used,
        reclaimable_cache=reclaimable,
        shmem=shmem_part if shmem_part is not None else mem.shmem,
        shm_leftovers=shm_leftovers,
        vllm_running=running,
        models_held=held,
    )
