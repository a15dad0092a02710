"""The host sampler: a POSIX sh loop run on each node over SSH, and its local twin.

``sampler_command`` builds the command the SSH layer runs once per connection; it prints one frame
(format: ``sparktui.model.host``) per interval until its output closes. ``LocalSampler`` builds the
same ``HostSample`` on the machine sparktui runs on, from /proc, /dev/shm, psutil and local
``systemctl``/``docker``; it blocks, so async callers use ``asyncio.to_thread``.

Cost on the node (docs/performance.md, ``benchmarks/bench_sampler.py``): a plain frame starts no
process. One long-lived ``perl`` (Time::HiRes) prints a tick per interval at a fixed rate, with a
``sleep`` per frame as the fallback where perl is missing; /proc files are read with the shell's
``read`` builtin; the clock is /proc/uptime plus an offset from ``date`` once a minute. The process
scan (one ``grep`` over every /proc/PID/cmdline, whose cost grows with the node's process count) and
the /dev/shm listing run every ``process_every`` frames; ``systemctl show`` / ``docker inspect`` (the
costliest: a D-Bus or Go client start) every ``service_every`` frames, under ``timeout`` so a hung
docker daemon cannot stall the loop. After a stall the loop skips the ticks it missed.

The command runs under ``sh -c`` whatever the login shell; unit and container names are validated
by the config and quoted here as well.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

# No type stubs for psutil in the test extras; the ignore stays harmless if types-psutil appears.
import psutil  # type: ignore[import-untyped, unused-ignore]

from sparktui.model.host import (
    MAX_SHM_ENTRIES,
    SECTIONS,
    CpuFrequency,
    HostProcess,
    HostSample,
    ServiceState,
    ShmEntry,
    exec_target,
    is_vllm_process,
    parse_cpufreq,
    parse_properties,
    problem_lines,
    process_kind,
    service_state,
    shm_kind,
    short_args,
    unknown_service,
)
from sparktui.model.memory import HostMemory, MemoryPressure, parse_meminfo, parse_pressure
from sparktui.model.specs import NodeSpec

Manager = Literal["systemd", "docker"]

PRESSURE_PATH = "/proc/pressure/memory"
SHM_DIR = "/dev/shm"
PROCESS_EVERY = 10
SERVICE_EVERY = 10
SERVICE_TIMEOUT_S = 10.0
MAX_PROCESSES = 200
CLOCK_EVERY = 60  # frames between re-reads of the wall clock (between them: /proc/uptime)

# The same as host.VLLM_PROCESS_RE; each first letter in brackets so the pattern does not match the
# command lines that carry it (this script's shell and subshells, grep itself). A probe name that
# looks like vLLM ("vllm-serve.service") would still match them: the loop also skips command lines
# holding the script's "sparktui-sampler" marker.
GREP_PATTERN = "[V]LLM::|[v]llm.serve|[v]llm[.]entrypoints"

SYSTEMD_PROPERTIES = (
    "LoadState,ActiveState,SubState,ExecMainStatus,NRestarts,"
    "ExecMainStartTimestamp,ExecMainStartTimestampMonotonic,ExecStart"
)
DOCKER_FORMAT = (
    "Status={{.State.Status}}{{println}}RestartCount={{.RestartCount}}{{println}}"
    "ExitCode={{.State.ExitCode}}{{println}}StartedAt={{.State.StartedAt}}{{println}}"
    "Error={{.State.Error}}"
)
PSI_MISSING = (
    "(kernel without PSI: needs Linux 4.20+ with CONFIG_PSI, and not booted with psi=0; "
    "enable with the psi=1 boot option)"
)
PSI_UNREADABLE = "(PSI disabled? boot with psi=1)"
CPUFREQ_DIR = "/sys/devices/system/cpu"


@dataclass(frozen=True, slots=True)
class ServiceProbe:
    """Which service manager runs a vLLM instance: ``instance`` is the ServerSpec name."""

    instance: str
    manager: Manager
    name: str


def service_probes(node: NodeSpec) -> tuple[ServiceProbe, ...]:
    """The probes of a node's vLLM instances that name a systemd unit or a docker container."""
    probes: list[ServiceProbe] = []
    for vllm in node.vllm:
        if vllm.unit is not None:
            probes.append(ServiceProbe(vllm.name, "systemd", vllm.unit))
        elif vllm.container is not None:
            probes.append(ServiceProbe(vllm.name, "docker", vllm.container))
    return tuple(probes)


def _check_word(what: str, value: str) -> str:
    # The frame's ==service header is split on spaces; the config's patterns already forbid these.
    if not value or value.startswith("-") or any(c.isspace() or not c.isprintable() for c in value):
        raise ValueError(f"{what} {value!r} must be non-empty, printable, without spaces or a leading '-'")
    return value


# The loop. Functions and variables are short because the text goes over SSH once per connection;
# docs: the module docstring of sparktui.model.host (format) and this module's (cost).
_SCRIPT = r"""# sparktui-sampler
nl='
'
iv=@IV@; pe=@PE@; se=@SE@; count=@COUNT@; ts=@TS@; mp=@MP@; cfd=@CFD@
psi=@PSI@; shm=@SHM@; pat=@PAT@; df=@DF@; sp=@SP@
to=; command -v timeout >/dev/null 2>&1 && to="timeout $ts"
tk=$(getconf CLK_TCK 2>/dev/null); case $tk in ''|*[!0-9]*) tk=100;; esac
pg=$(getconf PAGESIZE 2>/dev/null); case $pg in ''|*[!0-9]*) pg=4096;; esac
bt=0; while read -r k v _; do [ "$k" = btime ] && { bt=$v; break; }; done < /proc/stat
hp=; while read -r _ m t o _; do
  [ "$m" = /proc ] && [ "$t" = proc ] || continue
  case ,$o, in *,hidepid=0,*|*,hidepid=off,*) ;; *,hidepid=*) hp=${o#*hidepid=}; hp=${hp%%,*};; esac
done < /proc/self/mounts 2>/dev/null
gp=; printf 'x\000y\n' | grep -a -q -E '^x.y$' 2>/dev/null ||
  gp='grep -a -E (GNU grep) is not available'
fs=1; command -v perl >/dev/null 2>&1 || sleep 0.01 2>/dev/null || fs=
one() { r=; _i=$IFS; IFS=$nl; set -f
  for _l in $1; do case $_l in ''|'[]') continue;; esac; r="${r:+$r | }$_l"; done; IFS=$_i; set +f; }
now() { read -r ul < /proc/uptime; u=${ul%% *}; n=$(( ${u%.*} * 100 + 1${u#*.} - 100 )); }
cal() { now; d=$(date +%s.%N 2>/dev/null); s=${d%%.*}; f=${d#*.}; f=${f%"${f#??}"}
  case $s in ''|*[!0-9]*) off=$((bt * 100)); return;; esac
  case $f in [0-9][0-9]) ;; *) f=00;; esac
  off=$(( s * 100 + 1$f - 100 - n )); }
sec() { b=
  [ -r "$2" ] && { while IFS= read -r l || [ -n "$l" ]; do b=$b$l$nl; done < "$2"; } 2>/dev/null
  if [ -n "$b" ]; then printf '==%s\n%s' "$1" "$b"
  elif [ -e "$2" ]; then printf '==%s unavailable %s could not be read %s\n' "$1" "$2" "$4"
  else printf '==%s unavailable %s does not exist %s\n' "$1" "$2" "$3"; fi; }
shs() { if [ ! -d "$shm" ]; then printf '==shm unavailable %s does not exist\n' "$shm"; return; fi
  o=$(LC_ALL=C ls -lnAqsk -- "$shm" 2>&1); rc=$?
  if [ $rc -ne 0 ]; then one "$o"
    printf '==shm unavailable ls %s exited %s: %.300s\n' "$shm" $rc "$r"; return; fi
  printf '==shm\n%s\n' "$o"; }
prs() { if [ -n "$gp" ]; then printf '==processes unavailable %s\n' "$gp"; return; fi
  printf '==processes clk_tck=%s pagesize=%s btime=%s%s\n' $tk $pg $bt "${hp:+ hidepid=$hp}"
  grep -a -s -H -E "$pat" /proc/[0-9]*/cmdline | tr '\0' ' ' | { c=0
    while IFS= read -r l; do
      p=${l%%:*}; p=${p#/proc/}; p=${p%/cmdline}
      case $p in ''|*[!0-9]*) continue;; esac
      case $l in *sparktui-sampler*) continue;; esac
      s=; m=; { read -r s < "/proc/$p/stat"; read -r m < "/proc/$p/statm"; } 2>/dev/null
      [ -n "$s" ] || continue
      printf 'stat %s\nstatm %s %s\nargs %s %.300s\n' "$s" "$p" "$m" "$p" "${l#*:}"
      c=$((c + 1)); [ $c -lt $mp ] || break
    done; }; }
cpf() { b=; for d in "$cfd"/cpufreq/policy[0-9]*; do c=; m=; h=
    { read -r c < "$d/scaling_cur_freq"; read -r m < "$d/scaling_max_freq"
      read -r h < "$d/cpuinfo_max_freq"; } 2>/dev/null
    [ -n "$c" ] || continue; b="$b${d##*/} $c $m $h$nl"; done
  printf '==cpufreq\n%s' "$b"; }
bad() { one "$6"; r="$4 exited $5: $r"; [ "$5" -eq 124 ] && [ -n "$to" ] && r="$4 timed out after ${ts}s"
  printf '==service %s %s %s unavailable %.300s\n' "$1" "$2" "$3" "$r"; }
sd() { if ! command -v systemctl >/dev/null 2>&1; then
    printf '==service %s systemd %s unavailable systemctl not found on PATH\n' "$1" "$2"; return; fi
  o=$($to systemctl show -p "$sp" -- "$2" 2>&1); rc=$?
  if [ $rc -ne 0 ]; then bad "$1" systemd "$2" systemctl $rc "$o"; return; fi
  printf '==service %s systemd %s\n%s\n' "$1" "$2" "$o"
  case $o in *"argv[]="*) ;; *) return;; esac
  a=${o#*"argv[]="}; a=${a%%" ;"*}; set -f; set -- $a; set +f; x=${1-}
  case ${1##*/} in sh|bash|dash|zsh|python|python3|python3.[0-9]*) case ${2-} in /*) x=$2;; esac;; esac
  [ -n "$x" ] || return
  if [ -e "$x" ]; then xe=yes
  else case $x in /*) xe=no; d=$x
    while d=${d%/*}; [ -n "$d" ]; do
      if [ -e "$d" ]; then [ -d "$d" ] && [ ! -x "$d" ] && xe=unknown; break; fi
    done;; *) xe=unknown;; esac; fi
  printf 'ExecPath=%s\nExecPathExists=%s\n' "$x" $xe; }
dk() { if ! command -v docker >/dev/null 2>&1; then
    printf '==service %s docker %s unavailable docker not found on PATH\n' "$1" "$2"; return; fi
  o=$($to docker inspect --type container --format "$df" -- "$2" 2>&1); rc=$?
  if [ $rc -ne 0 ]; then bad "$1" docker "$2" docker $rc "$o"; return; fi
  printf '==service %s docker %s\n%s\n' "$1" "$2" "$o"; }
due() { [ "$1" -gt 0 ] && [ $(( (seq - 1) % $1 )) -eq 0 ]; }
frame() { seq=$((seq + 1))
  [ $((seq % @CLOCK@)) -eq 0 ] && cal
  now; e=$((off + n))
  printf '==sparktui-sample 1 %d.%02d %d\n' $((e / 100)) $((e % 100)) $seq
  sec meminfo /proc/meminfo
  sec pressure "$psi" @PSI_MISSING@ @PSI_UNREADABLE@
  sec loadavg /proc/loadavg
  printf '==uptime\n%s\n' "$ul"
  if due $pe; then shs; prs; cpf; fi
  if due $se; then printf '==services %d\n' @NSERVICES@
@PROBES@  fi
  printf '==sparktui-end %d\n' $seq
  [ $count -eq 0 ] || [ $seq -lt $count ]; }
cal; seq=0
if perl -MTime::HiRes -e 1 2>/dev/null; then
  perl -MTime::HiRes=time,sleep -e '$| = 1; $i = $ARGV[0] / 100; $n = time;
    while (1) { printf "%d\n", $n * 100; $n += $i; $d = $n - time;
      if ($d > 0) { sleep $d } else { $n = time } }' $iv |
  while read -r t; do now; [ "$t" -lt $((off + n - iv)) ] && continue; frame || exit 0; done
else nx=$n
  while frame; do nx=$((nx + iv)); now; r=$((nx - n))
    if [ $r -le 0 ]; then nx=$n
    elif [ -n "$fs" ]; then f=$((r % 100)); [ $f -lt 10 ] && f=0$f; sleep $((r / 100)).$f
    else sleep $(( (r + 99) / 100 )); fi
  done
fi
"""


def sampler_script(
    interval_s: float,
    services: Sequence[ServiceProbe],
    *,
    process_every: int = PROCESS_EVERY,
    service_every: int = SERVICE_EVERY,
    count: int = 0,
    pressure_path: str = PRESSURE_PATH,
    shm_dir: str = SHM_DIR,
    service_timeout_s: float = SERVICE_TIMEOUT_S,
    cpufreq_dir: str = CPUFREQ_DIR,
) -> str:
    """The sh script text. ``process_every``/``service_every`` = 0 never refresh those sections;
    ``count`` > 0 stops after that many frames (tests, benchmarks); 0 runs until output closes."""
    interval_cs = round(interval_s * 100)
    if interval_cs < 1:
        raise ValueError(f"sampler interval must be at least 0.01 s (got {interval_s})")
    for what, every in (("process_every", process_every), ("service_every", service_every), ("count", count)):
        if every < 0:
            raise ValueError(f"{what} must be 0 or more (got {every})")
    probes = []
    for probe in services:
        _check_word("instance", probe.instance)
        _check_word("unit" if probe.manager == "systemd" else "container", probe.name)
        function = {"systemd": "sd", "docker": "dk"}[probe.manager]
        probes.append(f"    {function} {shlex.quote(probe.instance)} {shlex.quote(probe.name)}\n")
    values = {
        "@IV@": str(interval_cs),
        "@PE@": str(process_every),
        "@SE@": str(service_every),
        "@COUNT@": str(count),
        "@TS@": f"{service_timeout_s:g}",
        "@MP@": str(MAX_PROCESSES),
        "@PSI@": shlex.quote(pressure_path),
        "@SHM@": shlex.quote(shm_dir),
        "@PAT@": shlex.quote(GREP_PATTERN),
        "@DF@": shlex.quote(DOCKER_FORMAT),
        "@SP@": shlex.quote(SYSTEMD_PROPERTIES),
        "@CLOCK@": str(CLOCK_EVERY),
        "@PSI_MISSING@": shlex.quote(PSI_MISSING),
        "@PSI_UNREADABLE@": shlex.quote(PSI_UNREADABLE),
        "@CFD@": shlex.quote(cpufreq_dir),
        "@NSERVICES@": str(len(probes)),
        "@PROBES@": "".join(probes),
    }
    script = _SCRIPT
    for key, value in values.items():
        script = script.replace(key, value)
    return script


def sampler_command(
    interval_s: float,
    services: Sequence[ServiceProbe],
    *,
    process_every: int = PROCESS_EVERY,
    service_every: int = SERVICE_EVERY,
    count: int = 0,
    pressure_path: str = PRESSURE_PATH,
    shm_dir: str = SHM_DIR,
    service_timeout_s: float = SERVICE_TIMEOUT_S,
) -> str:
    """The command line for the node's login shell: ``exec sh -c '<script>'``."""
    script = sampler_script(
        interval_s,
        services,
        process_every=process_every,
        service_every=service_every,
        count=count,
        pressure_path=pressure_path,
        shm_dir=shm_dir,
        service_timeout_s=service_timeout_s,
    )
    return f"exec sh -c {shlex.quote(script)} sparktui-sampler"


# --- the local machine ----------------------------------------------------------------------------


def _exists(path: str) -> bool | None:
    """True/False, or None when a directory on the way cannot be searched or the path is relative."""
    if not path.startswith("/"):
        return None
    try:
        Path(path).stat()
    except (FileNotFoundError, NotADirectoryError):
        return False
    except PermissionError:
        return None
    return True


def _first_lines(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip() and line.strip() != "[]"]
    return " | ".join(lines)[:300]


def local_cpu_frequency(problems: dict[str, str], root: Path = Path(CPUFREQ_DIR)) -> CpuFrequency | None:
    """What the sampler's ``==cpufreq`` section holds, read from this machine's sysfs (None, and no
    problem, on a machine without cpufreq: a VM, a kernel without the driver)."""
    lines = []
    for policy in sorted(root.glob("cpufreq/policy[0-9]*")):
        values = []
        for name in ("scaling_cur_freq", "scaling_max_freq", "cpuinfo_max_freq"):
            try:
                values.append((policy / name).read_text().strip())
            except OSError:
                break
        if values:
            lines.append(" ".join([policy.name, *values]))
    try:
        return parse_cpufreq(lines)
    except ValueError as exc:
        problems["cpufreq"] = str(exc)
        return None


class LocalSampler:
    """Host state of the machine sparktui runs on, as one ``HostSample`` per ``sample()`` call.

    Sync and blocking (file reads, a psutil process scan, ``systemctl``/``docker`` subprocesses
    with a timeout): call it with ``asyncio.to_thread``. Like the remote loop it refreshes the
    process list and /dev/shm every ``process_every`` calls and services every ``service_every``
    calls; combine samples with ``host.merge``. ``search_path`` is the PATH used to find
    ``systemctl`` and ``docker`` (default: this process's PATH).
    """

    def __init__(
        self,
        *,
        process_every: int = PROCESS_EVERY,
        service_every: int = SERVICE_EVERY,
        proc: str = "/proc",
        pressure_path: str = PRESSURE_PATH,
        shm_dir: str = SHM_DIR,
        search_path: str | None = None,
        service_timeout_s: float = SERVICE_TIMEOUT_S,
    ) -> None:
        self.process_every = process_every
        self.service_every = service_every
        self.proc = Path(proc)
        self.pressure_path = Path(pressure_path)
        self.shm_dir = Path(shm_dir)
        self.search_path = search_path if search_path is not None else os.environ.get("PATH", os.defpath)
        self.service_timeout_s = service_timeout_s
        self.calls = 0

    def _due(self, every: int) -> bool:
        return every > 0 and (self.calls - 1) % every == 0

    def sample(self, services: Sequence[ServiceProbe]) -> HostSample:
        self.calls += 1
        epoch = time.time()
        problems: dict[str, str] = {}
        refreshed = dict.fromkeys(("meminfo", "pressure", "loadavg", "uptime"), epoch)

        memory = HostMemory()
        try:
            memory = parse_meminfo((self.proc / "meminfo").read_text())
        except (OSError, ValueError) as exc:
            problems["meminfo"] = str(exc)
        pressure = self._pressure(problems)
        load: tuple[float, float, float] | None = None
        try:
            load = os.getloadavg()
        except OSError as exc:
            problems["loadavg"] = str(exc)
        uptime: float | None = None
        try:
            uptime = float((self.proc / "uptime").read_text().split()[0])
        except (OSError, ValueError, IndexError) as exc:
            problems["uptime"] = f"/proc/uptime: {exc}"

        shm: tuple[ShmEntry, ...] | None = None
        processes: tuple[HostProcess, ...] | None = None
        cpu_freq: CpuFrequency | None = None
        if self._due(self.process_every):
            refreshed["shm"] = refreshed["processes"] = refreshed["cpufreq"] = epoch
            shm = self._shm(problems)
            processes = self._processes()
            cpu_freq = local_cpu_frequency(problems)
        services_map: dict[str, ServiceState] | None = None
        if self._due(self.service_every):
            refreshed["services"] = epoch
            boot = None if uptime is None else epoch - uptime
            services_map = {probe.instance: self._service(probe, boot) for probe in services}

        return HostSample(
            remote_epoch=epoch,
            memory=memory,
            pressure=pressure,
            pressure_problem=problems.get("pressure"),
            shm=shm,
            processes=processes,
            load=load,
            uptime_s=uptime,
            services=services_map,
            problems=problem_lines(problems, services_map),
            seq=self.calls,
            refreshed={name: refreshed[name] for name in SECTIONS if name in refreshed},
            section_problems=problems,
            cpu_freq=cpu_freq,
        )

    def _pressure(self, problems: dict[str, str]) -> MemoryPressure | None:
        path = self.pressure_path
        try:
            return parse_pressure(path.read_text())
        except FileNotFoundError:
            problems["pressure"] = f"{path} does not exist {PSI_MISSING}"
        except OSError as exc:
            problems["pressure"] = f"{path} could not be read ({exc.strerror}) {PSI_UNREADABLE}"
        except ValueError as exc:
            problems["pressure"] = str(exc)
        return None

    def _shm(self, problems: dict[str, str]) -> tuple[ShmEntry, ...] | None:
        entries: list[ShmEntry] = []
        try:
            with os.scandir(self.shm_dir) as scan:
                for entry in scan:
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue  # removed while listing
                    entries.append(ShmEntry(entry.name, st.st_size, shm_kind(entry.name), st.st_blocks * 512))
        except OSError as exc:
            problems["shm"] = f"{self.shm_dir}: {exc.strerror or exc}"
            return None
        entries.sort(key=lambda e: e.name)
        if len(entries) > MAX_SHM_ENTRIES:
            problems["shm"] = f"{len(entries)} entries, only the first {MAX_SHM_ENTRIES} kept"
            entries = entries[:MAX_SHM_ENTRIES]
        return tuple(entries)

    def _processes(self) -> tuple[HostProcess, ...]:
        found: list[HostProcess] = []
        own = os.getpid()
        for proc in psutil.process_iter(["pid", "ppid", "cmdline", "memory_info", "create_time"]):
            info = proc.info
            cmdline = info.get("cmdline")
            if not cmdline or info["pid"] == own:
                continue
            args = " ".join(cmdline)
            if not is_vllm_process(args):
                continue
            mem = info.get("memory_info")
            rss = int(mem.rss) if mem is not None else 0
            anon = max(0, int(mem.rss) - int(mem.shared)) if mem is not None else None
            found.append(
                HostProcess(
                    pid=int(info["pid"]),
                    ppid=int(info["ppid"] or 0),
                    rss_bytes=rss,
                    start_epoch=info.get("create_time"),
                    kind=process_kind(args),
                    args=short_args(args),
                    rss_anon_bytes=anon,
                    start_ticks=_start_ticks(int(info["pid"])),
                )
            )
            if len(found) >= MAX_PROCESSES:
                break
        return tuple(sorted(found, key=lambda p: p.pid))

    def _run(self, argv: list[str]) -> tuple[int, str] | str:
        """(exit code, stdout + stderr), or a one-line reason it did not run."""
        binary = shutil.which(argv[0], path=self.search_path)
        if binary is None:
            return f"{argv[0]} not found on PATH"
        try:
            done = subprocess.run(
                [binary, *argv[1:]],
                capture_output=True,
                text=True,
                timeout=self.service_timeout_s,
                check=False,
                env={**os.environ, "PATH": self.search_path, "LC_ALL": "C"},
            )
        except subprocess.TimeoutExpired:
            return f"{argv[0]} timed out after {self.service_timeout_s:g}s"
        except OSError as exc:
            return f"{argv[0]} could not run: {exc.strerror or exc}"
        return done.returncode, done.stdout + done.stderr

    def _service(self, probe: ServiceProbe, boot_epoch: float | None) -> ServiceState:
        if probe.manager == "systemd":
            argv = ["systemctl", "show", "-p", SYSTEMD_PROPERTIES, "--", probe.name]
        else:
            argv = ["docker", "inspect", "--type", "container", "--format", DOCKER_FORMAT, "--", probe.name]
        result = self._run(argv)
        if isinstance(result, str):
            return unknown_service(probe.instance, probe.manager, probe.name, result)
        code, output = result
        if code != 0:
            reason = f"{argv[0]} exited {code}: {_first_lines(output)}"
            return unknown_service(probe.instance, probe.manager, probe.name, reason)
        props = parse_properties(output)
        if probe.manager == "systemd":
            target = exec_target(props.get("ExecStart", ""))
            if target:
                exists = _exists(target)
                props["ExecPath"] = target
                props["ExecPathExists"] = {True: "yes", False: "no", None: "unknown"}[exists]
        return service_state(probe.instance, probe.manager, probe.name, props, boot_epoch=boot_epoch)


def _start_ticks(pid: int) -> int | None:
    """/proc/PID/stat's field 22 (start time in clock ticks since boot), which psutil does not give raw."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
        return int(text.rpartition(")")[2].split()[19])
    except (OSError, ValueError, IndexError):
        return None
