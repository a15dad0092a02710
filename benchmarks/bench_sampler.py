"""CPU the host sampler costs the node, per sample: the real command under ``sh -c``.

    python benchmarks/bench_sampler.py [--extra-processes 500] [--repeat 3] [--write docs/performance.md]

CPU is user + system time of the shell and every process it spawns, read with
``getrusage(RUSAGE_CHILDREN)`` around the run (the kernel adds a reaped child's CPU, and that of
everything it reaped, to its parent). Steady state per sample is
``(cpu(60 frames) − cpu(10 frames)) / 50``: the start-up (getconf, date, the grep check) cancels
out, and 50 is a multiple of both refresh periods. The interval is 0.05 s, long enough that the loop
never runs behind and skips a ``sleep``. The process scan costs in proportion to the number of
processes, so everything is measured twice: with this machine's processes, and with
``--extra-processes`` idle ``sleep`` processes added (a DGX Spark desktop install runs 600-1,000).
The figures are medians of ``--repeat`` runs. One row runs the loop with perl hidden from PATH (its
``sleep`` fallback).

The first table measures single commands the same way (a loop of N calls in one shell): it is why the
loop reads /proc with ``read`` builtins, scans processes with one ``grep`` instead of ``pgrep`` or
``ps``, and refreshes the expensive parts every Nth frame.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from _common import write_section

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sparktui.model.fabric import FABRIC_EVERY_S, fabric_command  # noqa: E402
from sparktui.sources.sampler import (  # noqa: E402
    DOCKER_FORMAT,
    GREP_PATTERN,
    PROCESS_EVERY,
    SERVICE_EVERY,
    SYSTEMD_PROPERTIES,
    ServiceProbe,
    sampler_command,
)

QUICK_ARGS = ("--repeat", "1")  # benchmarks/run_all.py --quick
INTERVAL_S = 0.05
SHORT, LONG = 10, 60
TARGET_MS = 5.0
PROBES = (ServiceProbe("vllm", "systemd", "vllm.service"), ServiceProbe("tts", "docker", "tts"))
TOOLS = ("sh", "getconf", "grep", "tr", "ls", "sleep", "date", "timeout", "cat", "systemctl", "docker")

HEADING = """## Host sampler CPU per sample on the node (issue: host state and logs over SSH)

Target: under 5 ms of CPU per sample on the node, for the shell loop that `sparktui/sources/sampler.py`
runs over SSH, counting the shell and every process it starts.

How: a plain frame (meminfo, PSI, loadavg, uptime) starts no process. One long-lived `perl`
(Time::HiRes; perl-base is Essential on Debian and Ubuntu) prints a tick per interval at a fixed rate;
where perl is missing the loop runs one `sleep` per frame, which costs more inside the loop (cold
caches after a real sleep) than the tight-loop figure below suggests: compare the two plain-frame rows.
/proc files are read with the shell's `read` builtin (cheaper than a `cat`), and the clock is
/proc/uptime plus an offset taken from `date` once a minute. The process scan is one `grep` over every
`/proc/PID/cmdline`; `pgrep` and `ps` read far more per process and cost several times as much. The
scan grows with the number of processes, so it runs with the /dev/shm listing every 10th frame.
`systemctl show` and `docker inspect` are the costliest (a client start-up each, under `timeout` so a
hung docker daemon cannot stall the loop), so they also run every 10th frame. After a stall the loop
skips the ticks it missed rather than catching up. On this machine `systemctl` has no systemd to talk
to and `docker` no daemon, so their rows are lower bounds of a real node's cost: re-measure there.

The fabric command (`sparktui/model/fabric.py`: the RDMA NICs' /sys files and `ethtool -S`, the
libnccl each vLLM process maps) is not part of the loop: it runs on its own every 10 s, like
`nvidia-smi -q`, so its cost per run is spread over the samples of those 10 s. It is measured on a
constructed /sys/class/net with two mlx5 interfaces, an `ethtool` stand-in that prints a real-shaped
mlx5 `ethtool -S` (a fork and exec like the real one, without its ioctl), and four processes'
/proc/PID/maps; re-measure on a Spark.

Command: `python benchmarks/bench_sampler.py --write docs/performance.md`

"""
FABRIC_PROCESSES = 4  # a tensor-parallel rank's vLLM processes: API server, engine core, workers
SAMPLES_PER_FABRIC = 10  # at the default 1 s poll, the samples one fabric reading is spread over
ETHTOOL_SAMPLE = ROOT / "tests" / "data" / "fabric" / "ethtool-S-mlx5-0.txt"


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def cpu_of(argv: list[str], env: dict[str, str]) -> float:
    before = children_cpu_s()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return children_cpu_s() - before


def median_ms(measure: Callable[[], float], repeat: int) -> float:
    return statistics.median(measure() for _ in range(repeat)) * 1000


@contextmanager
def extra_processes(count: int) -> Iterator[None]:
    sleep = shutil.which("sleep") or "sleep"
    procs = [subprocess.Popen([sleep, "600"]) for _ in range(count)]
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait()


def process_count() -> int:
    return sum(1 for path in Path("/proc").iterdir() if path.name.isdigit())


def component_rows() -> list[tuple[str, str, int, str | None]]:
    """(label, sh snippet, calls per measurement, the tool it needs)."""
    pattern = f"'{GREP_PATTERN}'"
    return [
        ("`sleep 0` (one fork + exec; every frame sleeps once)", "sleep 0", 200, "sleep"),
        ("`date +%s.%N`", "date +%s.%N >/dev/null", 200, "date"),
        ("`cat /proc/meminfo`", "cat /proc/meminfo >/dev/null", 200, "cat"),
        (
            "`read` loop over /proc/meminfo (used)",
            "b=; while IFS= read -r l; do b=$b$l; done < /proc/meminfo",
            200,
            None,
        ),
        ("`ls -lnAqsk /dev/shm` (used)", "LC_ALL=C ls -lnAqsk /dev/shm >/dev/null", 200, "ls"),
        ("`pgrep -f` with the vLLM pattern", f"pgrep -f {pattern} >/dev/null", 50, "pgrep"),
        ("`ps -eo pid,ppid,rss,etimes,args`", "ps -eo pid=,ppid=,rss=,etimes=,args= >/dev/null", 50, "ps"),
        (
            "`grep` over /proc/*/cmdline (used)",
            f"grep -a -s -H -E {pattern} /proc/[0-9]*/cmdline >/dev/null",
            50,
            "grep",
        ),
        (
            "`systemctl show -p …` (no systemd here: fails fast)",
            f"systemctl show -p {SYSTEMD_PROPERTIES} -- vllm.service >/dev/null 2>&1",
            20,
            "systemctl",
        ),
        (
            "`timeout 10 docker inspect …` (no daemon here)",
            f"timeout 10 docker inspect --type container --format '{DOCKER_FORMAT}' -- tts >/dev/null 2>&1",
            20,
            "docker",
        ),
    ]


def measure_component(snippet: str, calls: int, repeat: int) -> float:
    loop = f"i=0; while [ $i -lt {calls} ]; do i=$((i + 1)); {snippet}; done"
    env = dict(os.environ)
    return median_ms(lambda: cpu_of(["/bin/sh", "-c", loop], env) / calls, repeat)


def command_rows() -> list[tuple[str, dict[str, object]]]:
    return [
        ("plain frame: meminfo, PSI, loadavg, uptime", {"process_every": 0, "service_every": 0}),
        (
            "plain frame without perl (one `sleep` per frame)",
            {"process_every": 0, "service_every": 0, "no_perl": True},
        ),
        ("+ /dev/shm and process scan every frame", {"process_every": 1, "service_every": 0}),
        (
            "+ 1 systemd and 1 docker probe every frame",
            {"process_every": 1, "service_every": 1, "services": PROBES},
        ),
        (
            f"**defaults**: scan every {PROCESS_EVERY}th frame, services every {SERVICE_EVERY}th, 1 systemd + 1 docker",
            {"process_every": PROCESS_EVERY, "service_every": SERVICE_EVERY, "services": PROBES},
        ),
    ]


@contextmanager
def path_without_perl() -> Iterator[str]:
    """A PATH of symlinks to the tools the loop uses, perl left out."""
    with tempfile.TemporaryDirectory() as tmp:
        for tool in TOOLS:
            found = shutil.which(tool)
            if found is not None:
                (Path(tmp) / tool).symlink_to(found)
        yield tmp


def measure_command(options: dict[str, object], repeat: int) -> float:
    services = options.get("services", ())
    assert isinstance(services, tuple)
    every = {k: v for k, v in options.items() if k in ("process_every", "service_every")}
    with path_without_perl() as no_perl:
        env = {**os.environ, "PATH": no_perl} if options.get("no_perl") else dict(os.environ)

        def run(count: int) -> float:
            command = sampler_command(INTERVAL_S, services, count=count, **every)  # type: ignore[arg-type]
            return cpu_of(["/bin/sh", "-c", command], env)

        return median_ms(lambda: (run(LONG) - run(SHORT)) / (LONG - SHORT), repeat)


def measure_fabric(repeat: int, runs: int = 20) -> float:
    """CPU ms of one run of the fabric command (see the heading)."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "drivers" / "mlx5_core").mkdir(parents=True)
        for name in ("enp1s0f0np0", "enp1s0f1np1"):
            (root / "net" / name / "device").mkdir(parents=True)
            (root / "net" / name / "device" / "driver").symlink_to(root / "drivers" / "mlx5_core")
            (root / "net" / name / "operstate").write_text("up\n")
            (root / "net" / name / "speed").write_text("200000\n")
        (root / "bin").mkdir()
        stub = root / "bin" / "ethtool"
        stub.write_text(f"#!/bin/sh\nexec cat {ETHTOOL_SAMPLE}\n")
        stub.chmod(0o755)
        env = {**os.environ, "PATH": f"{root / 'bin'}:{os.environ.get('PATH', '')}"}
        sleep = shutil.which("sleep") or "sleep"
        procs = [subprocess.Popen([sleep, "600"]) for _ in range(FABRIC_PROCESSES)]
        try:
            names = ("enp1s0f0np0", "enp1s0f1np1")  # the steady state: the first answer named them
            command = fabric_command([p.pid for p in procs], net_dir=str(root / "net"), interfaces=names)
            loop = f"i=0; while [ $i -lt {runs} ]; do i=$((i + 1)); sh -c {shlex.quote(command)}; done"
            return median_ms(lambda: cpu_of(["/bin/sh", "-c", loop], env) / runs, repeat)
        finally:
            for proc in procs:
                proc.kill()
                proc.wait()


def measure(extra: int, repeat: int) -> tuple[str, float]:
    base = process_count()
    lines = [
        f"Single commands, CPU ms per call ({base} processes on the machine, then {base + extra}):",
        "",
        f"| command | {base} processes | {base + extra} processes |",
        "|---|---|---|",
    ]
    components = component_rows()
    commands = command_rows()
    small = [
        None if tool and shutil.which(tool) is None else measure_component(snippet, calls, repeat)
        for _, snippet, calls, tool in components
    ]
    small_cmd = [measure_command(options, repeat) for _, options in commands]
    with extra_processes(extra):
        many = process_count()
        large = [
            None if tool and shutil.which(tool) is None else measure_component(snippet, calls, repeat)
            for _, snippet, calls, tool in components
        ]
        large_cmd = [measure_command(options, repeat) for _, options in commands]

    def cell(value: float | None) -> str:
        return "not installed" if value is None else f"{value:.2f}"

    for (label, *_), a, b in zip(components, small, large, strict=True):
        lines.append(f"| {label} | {cell(a)} | {cell(b)} |")
    lines += [
        "",
        f"The sampler command, CPU ms per sample (steady state, {INTERVAL_S:g} s interval):",
        "",
        f"| frame | {base} processes | {many} processes |",
        "|---|---|---|",
    ]
    for (label, _), a, b in zip(commands, small_cmd, large_cmd, strict=True):
        lines.append(f"| {label} | {a:.2f} | {b:.2f} |")
    fabric = measure_fabric(repeat)
    spread = fabric / SAMPLES_PER_FABRIC
    headline = large_cmd[-1]
    verdict = "meets" if headline < TARGET_MS else "misses"
    lines += [
        "",
        f"Default schedule with {many} processes: **{headline:.2f} ms of CPU per sample**, which {verdict} the "
        f"{TARGET_MS:g} ms target.",
        "",
        f"The fabric command, a command of its own every {FABRIC_EVERY_S:g} s (2 mlx5 interfaces, {FABRIC_PROCESSES} "
        f"vLLM processes): {fabric:.2f} ms of CPU per run, {spread:.2f} ms per sample spread over the "
        f"{SAMPLES_PER_FABRIC} samples of a 1 s poll ({headline + spread:.2f} ms with the sampler's).",
        "",
        f"Measured on {platform.python_implementation()} {platform.python_version()}, "
        f"{platform.machine()}, Linux {platform.release()}, {os.cpu_count()} CPUs, /bin/sh = "
        f"{Path('/bin/sh').resolve().name}; repeat {repeat}.",
    ]
    return "\n".join(lines), headline


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--extra-processes", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--write", type=Path, help="replace the bench_sampler section of this file")
    args = parser.parse_args(argv)
    body, _ = measure(args.extra_processes, args.repeat)
    print(body)
    if args.write is not None:
        write_section(args.write, "bench_sampler", body, heading=HEADING)
        print(f"\nwrote {args.write}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
