"""The host sampler: the real sh command on this machine's /proc, stub systemctl/docker, LocalSampler.

The command runs under ``/bin/sh -c`` exactly as the SSH layer sends it; only the service managers are
stand-ins (executable stubs first on PATH that record their arguments and print the outputs in
tests/data/host).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from sparktui.model.host import FrameSplitter, HostSample, ServiceState, is_vllm_process, merge, parse_frame
from sparktui.model.memory import parse_meminfo
from sparktui.model.specs import NodeSpec
from sparktui.sources.sampler import (
    GREP_PATTERN,
    LocalSampler,
    ServiceProbe,
    local_cpu_frequency,
    sampler_command,
    sampler_script,
    service_probes,
)
from tests.conftest import DATA

HOST = DATA / "host"
SHM_NAME = "psm_test123"
SHM_SIZE = 12345
MISSING_EXEC = "/home/milo/vllm-scripts/vllm-head-090.sh"
PROBES = (
    ServiceProbe("ds4", "systemd", "vllm-ds4-head.service"),
    ServiceProbe("web", "systemd", "vllm.service"),
    ServiceProbe("nope", "systemd", "nope.service"),
    ServiceProbe("qwen", "docker", "qwen36-35b"),
    ServiceProbe("gone", "docker", "gone"),
)
TOOLS = ("sh", "getconf", "grep", "tr", "ls", "sleep", "date", "timeout", "cat")


def this_mem_total() -> float | None:
    return parse_meminfo(Path("/proc/meminfo").read_text()).mem_total


def run_frames(command: str, *, path: str | None = None, cwd: Path | None = None) -> list[HostSample]:
    env = {**os.environ, "PATH": path if path is not None else os.environ["PATH"]}
    done = subprocess.run(
        ["/bin/sh", "-c", command],
        capture_output=True,
        encoding="utf-8",
        errors="replace",
        timeout=60,
        env=env,
        cwd=cwd,
        check=True,
    )
    assert done.stderr == ""
    splitter = FrameSplitter()
    frames = [parse_frame(f) for line in done.stdout.splitlines() if (f := splitter.feed(line)) is not None]
    assert (splitter.discarded, splitter.skipped_lines) == (0, 0)
    return frames


def write_stub(directory: Path, name: str, body: str) -> None:
    stub = directory / name
    stub.write_text("#!/bin/sh\n" + body)
    stub.chmod(0o755)


@pytest.fixture
def stubs(tmp_path: Path) -> tuple[Path, Path]:
    """(bin dir with systemctl and docker stubs, the log of their arguments)."""
    bin_dir, log = tmp_path / "stubs", tmp_path / "stub.log"
    bin_dir.mkdir()
    data, logq = shlex.quote(str(HOST)), shlex.quote(str(log))
    write_stub(
        bin_dir,
        "systemctl",
        f"""printf 'systemctl %s\\n' "$*" >> {logq}
for last; do :; done
f={data}/systemctl-show-$last.txt
if [ -f "$f" ]; then cat "$f"; exit 0; fi
echo "Failed to get properties: Access denied" >&2; exit 1
""",
    )
    write_stub(
        bin_dir,
        "docker",
        f"""printf 'docker %s\\n' "$*" >> {logq}
for last; do :; done
if [ -f {data}/docker-inspect-$last.txt ]; then cat {data}/docker-inspect-$last.txt; exit 0; fi
if [ -f {data}/docker-inspect-$last.err ]; then cat {data}/docker-inspect-$last.err >&2; exit 1; fi
echo "permission denied while trying to connect to the Docker daemon socket" >&2; exit 1
""",
    )
    return bin_dir, log


@pytest.fixture
def minimal_path(tmp_path: Path) -> str:
    """A PATH with the tools the loop uses and no systemctl or docker."""
    bin_dir = tmp_path / "minimal-bin"
    bin_dir.mkdir()
    for tool in TOOLS:
        found = shutil.which(tool)
        assert found is not None, tool
        (bin_dir / tool).symlink_to(found)
    return str(bin_dir)


@pytest.fixture
def fake_worker() -> Iterator[subprocess.Popen[bytes]]:
    """A process whose command line reads like a vLLM worker's after setproctitle."""
    sleep = shutil.which("sleep")
    assert sleep is not None
    proc = subprocess.Popen(["VLLM::Worker_TP0", "30"], executable=sleep)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture
def shm_file() -> Iterator[Path]:
    path = Path("/dev/shm") / SHM_NAME
    path.write_bytes(b"\x01" * SHM_SIZE)
    try:
        yield path
    finally:
        path.unlink(missing_ok=True)


# --- the real command on this machine -------------------------------------------------------------


def test_real_command_frames_parse_and_match_this_machine(fake_worker: subprocess.Popen[bytes], shm_file: Path) -> None:
    before = time.time()
    frames = run_frames(sampler_command(0.05, [], count=3, process_every=2, service_every=0))
    assert [f.seq for f in frames] == [1, 2, 3]
    first = frames[0]
    assert first.memory.mem_total == this_mem_total()
    assert first.pressure is not None or first.pressure_problem is not None
    assert first.load is not None and first.uptime_s is not None
    assert before - 2 < first.remote_epoch < time.time() + 2
    assert first.services is None  # service_every=0: never refreshed

    assert first.processes is not None
    (worker,) = [p for p in first.processes if p.pid == fake_worker.pid]
    assert (worker.kind, worker.ppid, worker.args) == ("worker", os.getpid(), "VLLM::Worker_TP0 30")
    assert worker.rss_bytes > 0
    assert worker.start_epoch is not None and abs(worker.start_epoch - before) < 5

    assert first.shm is not None
    (entry,) = [e for e in first.shm if e.name == SHM_NAME]
    assert (entry.size_bytes, entry.kind) == (SHM_SIZE, "psm")
    assert entry.allocated_bytes == shm_file.stat().st_blocks * 512


def test_every_nth_sections_are_omitted_between_refreshes(fake_worker: subprocess.Popen[bytes]) -> None:
    frames = run_frames(sampler_command(0.05, [], count=3, process_every=2, service_every=0))
    assert [f.processes is not None for f in frames] == [True, False, True]
    assert [f.shm is not None for f in frames] == [True, False, True]
    assert "processes" not in frames[1].refreshed
    merged = merge(frames[0], frames[1])
    assert merged.processes == frames[0].processes
    assert merged.memory == frames[1].memory


def _uptime() -> float:
    return float(Path("/proc/uptime").read_text().split()[0])


def test_frames_come_at_the_interval() -> None:
    before = _uptime()  # the sampler runs on this machine: the same clock as its frames' uptime
    frames = run_frames(sampler_command(0.2, [], count=3, process_every=0, service_every=0))
    last = frames[-1].uptime_s
    assert [f.seq for f in frames] == [1, 2, 3] and last is not None
    # Fixed rate (next += interval): the third frame is due two intervals after the loop starts, never
    # sooner, on /proc/uptime's 10 ms steps. (Measured from before the start, not from the first frame:
    # on a busy machine a late first frame is followed by the next one on schedule, sooner than 0.2 s.)
    assert round(last - before, 2) >= 0.39


def test_without_perl_the_loop_falls_back_to_sleep(minimal_path: str) -> None:
    assert shutil.which("perl", path=minimal_path) is None
    frames = run_frames(sampler_command(0.1, [], count=3, process_every=0, service_every=0), path=minimal_path)
    assert [f.seq for f in frames] == [1, 2, 3]
    first, last = frames[0].uptime_s, frames[-1].uptime_s
    assert first is not None and last is not None
    # Two intervals of 0.1 s between them, read from /proc/uptime (hundredths): at least 0.19 s, compared
    # in hundredths (18525.05 - 18524.86 is 0.18999999999869 as a float: a flake under load).
    assert round(last - first, 2) >= 0.19


def test_missing_psi_file_is_reported_and_not_fatal() -> None:
    frames = run_frames(
        sampler_command(0.05, [], count=1, pressure_path="/nonexistent/pressure/memory", service_every=0)
    )
    (frame,) = frames
    assert frame.pressure is None
    assert frame.pressure_problem is not None
    assert frame.pressure_problem.startswith("/nonexistent/pressure/memory does not exist (kernel without PSI")
    assert frame.memory.mem_total == this_mem_total()


def test_missing_shm_dir_is_reported_and_not_fatal() -> None:
    (frame,) = run_frames(sampler_command(0.05, [], count=1, shm_dir="/nonexistent-shm", service_every=0))
    assert frame.shm is None
    assert frame.section_problems["shm"] == "/nonexistent-shm does not exist"
    assert frame.processes is not None


def test_systemd_and_docker_sections_from_stub_commands(stubs: tuple[Path, Path]) -> None:
    bin_dir, log = stubs
    assert not Path(MISSING_EXEC).exists()
    (frame,) = run_frames(
        sampler_command(0.05, PROBES, count=1, process_every=0), path=f"{bin_dir}:{os.environ['PATH']}"
    )
    assert frame.services is not None
    services = frame.services
    assert list(services) == ["ds4", "web", "nope", "qwen", "gone"]

    ds4 = services["ds4"]
    assert (ds4.state, ds4.sub_state, ds4.exit_status, ds4.restarts) == (
        "activating",
        "auto-restart",
        127,
        14,
    )
    assert (ds4.exec_path, ds4.exec_exists) == (MISSING_EXEC, False)
    assert ds4.problem == f"ExecStart path {MISSING_EXEC} does not exist on the node"
    assert ds4.starting and ds4.restarting
    assert frame.boot_epoch is not None and ds4.started_epoch == pytest.approx(frame.boot_epoch + 5400.5)

    web = services["web"]
    assert (web.state, web.sub_state, web.exec_path, web.exec_exists, web.problem) == (
        "active",
        "running",
        "/usr/bin/env",
        True,
        None,
    )
    assert web.running

    assert services["nope"].problem == "unit nope.service not found"

    qwen = services["qwen"]
    assert (qwen.state, qwen.restarts, qwen.exit_status) == ("restarting", 23, 2)

    gone = services["gone"]
    assert (gone.state, gone.problem) == ("unknown", "docker exited 1: Error: No such container: gone")

    calls = log.read_text().splitlines()
    assert calls[0] == (
        "systemctl show -p LoadState,ActiveState,SubState,ExecMainStatus,NRestarts,ExecMainStartTimestamp,"
        "ExecMainStartTimestampMonotonic,ExecStart -- vllm-ds4-head.service"
    )
    assert calls[3].startswith("docker inspect --type container --format Status={{.State.Status}}")
    assert calls[3].endswith(" -- qwen36-35b")
    assert len(calls) == 5


def test_services_are_omitted_between_refreshes(stubs: tuple[Path, Path]) -> None:
    bin_dir, log = stubs
    frames = run_frames(
        sampler_command(0.05, PROBES[:1], count=3, process_every=0, service_every=2),
        path=f"{bin_dir}:{os.environ['PATH']}",
    )
    assert [f.services is not None for f in frames] == [True, False, True]
    assert len(log.read_text().splitlines()) == 2


def test_no_systemctl_or_docker_installed_gives_unknown_with_the_reason(minimal_path: str) -> None:
    probes = [ServiceProbe("a", "systemd", "vllm.service"), ServiceProbe("b", "docker", "vllm")]
    (frame,) = run_frames(sampler_command(0.05, probes, count=1, process_every=0), path=minimal_path)
    assert frame.services == {
        "a": ServiceState("a", "systemd", "vllm.service", "unknown", problem="systemctl not found on PATH"),
        "b": ServiceState("b", "docker", "vllm", "unknown", problem="docker not found on PATH"),
    }
    assert frame.memory.mem_total == this_mem_total()


def test_a_hung_service_manager_is_cut_off_by_the_timeout(tmp_path: Path) -> None:
    bin_dir = tmp_path / "hung"
    bin_dir.mkdir()
    write_stub(bin_dir, "systemctl", "exec sleep 30\n")
    started = time.monotonic()
    (frame,) = run_frames(
        sampler_command(
            0.05, [ServiceProbe("a", "systemd", "u.service")], count=1, process_every=0, service_timeout_s=0.5
        ),
        path=f"{bin_dir}:{os.environ['PATH']}",
    )
    assert time.monotonic() - started < 20
    assert frame.services is not None
    assert frame.services["a"].problem == "systemctl timed out after 0.5s"


def test_names_are_quoted_not_interpreted(stubs: tuple[Path, Path], tmp_path: Path) -> None:
    bin_dir, log = stubs
    hostile = "x;touch${IFS}pwned;$(touch${IFS}pwned2)"
    run_frames(
        sampler_command(0.05, [ServiceProbe("i", "docker", hostile)], count=1, process_every=0),
        path=f"{bin_dir}:{os.environ['PATH']}",
        cwd=tmp_path,
    )
    assert not (tmp_path / "pwned").exists() and not (tmp_path / "pwned2").exists()
    assert log.read_text().splitlines()[0].endswith(f" -- {hostile}")


def test_the_sampler_does_not_list_its_own_shell(
    stubs: tuple[Path, Path], fake_worker: subprocess.Popen[bytes]
) -> None:
    bin_dir, _ = stubs
    # A unit name the vLLM pattern matches: it is in the script text, so in the shell's command line.
    probe = ServiceProbe("s", "systemd", "vllm-serve.service")
    assert re.search(GREP_PATTERN, sampler_script(1, [probe])) is not None
    (frame,) = run_frames(sampler_command(0.05, [probe], count=1), path=f"{bin_dir}:{os.environ['PATH']}")
    assert frame.processes is not None
    assert [p.pid for p in frame.processes if p.pid in (fake_worker.pid, os.getpid())] == [fake_worker.pid]
    assert not any("sparktui-sampler" in p.args or "nl=" in p.args for p in frame.processes)


def test_grep_pattern_matches_what_the_model_calls_vllm() -> None:
    samples = [
        "VLLM::Worker_TP0",
        "VLLM::EngineCore",
        "python3 /usr/local/bin/vllm serve m --port 8000",
        "/usr/bin/python3 -m vllm.entrypoints.openai.api_server",
        "vllm-serve",
        "sleep 30",
        "bash /workspace/vllm-head.sh",
        GREP_PATTERN,
    ]
    for text in samples:
        assert (re.search(GREP_PATTERN, text) is not None) == is_vllm_process(text), text
    assert re.search(GREP_PATTERN, GREP_PATTERN) is None
    assert re.search(GREP_PATTERN, sampler_script(1, PROBES)) is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"interval_s": 0.001}, "at least 0.01 s"),
        ({"process_every": -1}, "process_every must be 0 or more"),
        ({"services": [ServiceProbe("a b", "systemd", "u")]}, "instance 'a b' must be"),
        ({"services": [ServiceProbe("a", "docker", "-rm")]}, "container '-rm' must be"),
        ({"services": [ServiceProbe("a", "systemd", "u\nx")]}, "unit 'u\\nx' must be"),
    ],
)
def test_sampler_command_rejects_bad_arguments(kwargs: dict[str, object], message: str) -> None:
    args: dict[str, object] = {"interval_s": 1.0, "services": [], **kwargs}
    with pytest.raises(ValueError, match=re.escape(message)):
        sampler_command(**args)  # type: ignore[arg-type]


def test_service_probes_come_from_unit_or_container() -> None:
    node = NodeSpec.model_validate(
        {
            "name": "spark1",
            "host": "192.168.1.11",
            "vllm": [
                {"name": "ds4", "port": 8000, "unit": "vllm-ds4-head.service"},
                {"name": "qwen", "port": 8001, "container": "qwen36-35b"},
                {"name": "bare", "port": 8002},
            ],
        }
    )
    assert service_probes(node) == (
        ServiceProbe("ds4", "systemd", "vllm-ds4-head.service"),
        ServiceProbe("qwen", "docker", "qwen36-35b"),
    )


# --- LocalSampler ---------------------------------------------------------------------------------


def test_local_sampler_reads_this_machine(fake_worker: subprocess.Popen[bytes], shm_file: Path) -> None:
    sample = LocalSampler().sample([])
    assert sample.memory.mem_total == this_mem_total()
    assert sample.load is not None and sample.uptime_s is not None
    assert abs(sample.remote_epoch - time.time()) < 5
    assert sample.processes is not None
    (worker,) = [p for p in sample.processes if p.pid == fake_worker.pid]
    assert (worker.kind, worker.ppid, worker.args) == ("worker", os.getpid(), "VLLM::Worker_TP0 30")
    assert sample.shm is not None
    (entry,) = [e for e in sample.shm if e.name == SHM_NAME]
    assert (entry.size_bytes, entry.kind, entry.allocated_bytes) == (
        SHM_SIZE,
        "psm",
        shm_file.stat().st_blocks * 512,
    )
    assert sample.services == {}


def test_local_sampler_without_systemctl_or_docker_reports_unknown(tmp_path: Path) -> None:
    probes = [ServiceProbe("a", "systemd", "vllm.service"), ServiceProbe("b", "docker", "vllm")]
    sample = LocalSampler(search_path=str(tmp_path)).sample(probes)
    assert sample.services == {
        "a": ServiceState("a", "systemd", "vllm.service", "unknown", problem="systemctl not found on PATH"),
        "b": ServiceState("b", "docker", "vllm", "unknown", problem="docker not found on PATH"),
    }
    assert sample.memory.mem_total == this_mem_total()
    assert sample.problems == (
        "a (systemd vllm.service): systemctl not found on PATH",
        "b (docker vllm): docker not found on PATH",
    )


def test_local_sampler_reports_a_missing_psi_file(tmp_path: Path) -> None:
    sample = LocalSampler(pressure_path=str(tmp_path / "memory")).sample([])
    assert sample.pressure is None
    assert sample.pressure_problem is not None and "does not exist (kernel without PSI" in sample.pressure_problem


def test_local_sampler_refreshes_processes_every_nth_call(fake_worker: subprocess.Popen[bytes]) -> None:
    sampler = LocalSampler(process_every=2, service_every=2)
    first, second, third = (sampler.sample([]) for _ in range(3))
    assert [s.processes is not None for s in (first, second, third)] == [True, False, True]
    assert [s.services is not None for s in (first, second, third)] == [True, False, True]
    assert merge(first, second).processes == first.processes


def test_local_sampler_and_remote_command_agree_on_stub_services(stubs: tuple[Path, Path]) -> None:
    bin_dir, _ = stubs
    path = f"{bin_dir}:{os.environ['PATH']}"
    local = LocalSampler(search_path=path).sample(PROBES).services
    (frame,) = run_frames(sampler_command(0.05, PROBES, count=1, process_every=0), path=path)
    remote = frame.services
    assert local is not None and remote is not None
    for name, state in remote.items():
        other = local[name]
        assert other.started_epoch == pytest.approx(state.started_epoch, abs=1.0)
        assert other == replace(state, started_epoch=other.started_epoch), name


def test_local_sampler_times_out_a_hung_service_manager(tmp_path: Path) -> None:
    write_stub(tmp_path, "docker", "exec sleep 30\n")
    sampler = LocalSampler(search_path=f"{tmp_path}:{os.environ['PATH']}", service_timeout_s=0.5)
    services = sampler.sample([ServiceProbe("a", "docker", "c")]).services
    assert services is not None
    assert services["a"].problem == "docker timed out after 0.5s"


# --- CPU frequency (issue 21): the CPUs capped at 1.5 GHz, as operators saw on Sparks --------------


def gb10_cpufreq(root: Path, cap_khz: int | None = None) -> None:
    """A GB10's cpufreq policies as the kernel lays them out (written for the test, no capture): one
    per cluster, ten Cortex-X925 (3.9 GHz) and ten Cortex-A725 (2.808 GHz), kHz; ``cap_khz`` caps
    scaling_max_freq."""
    for policy, top in ((0, 3_900_000), (10, 2_808_000)):
        limit = min(top, cap_khz) if cap_khz else top
        folder = root / "cpufreq" / f"policy{policy}"
        folder.mkdir(parents=True)
        for name, value in (("scaling_cur_freq", limit), ("scaling_max_freq", limit), ("cpuinfo_max_freq", top)):
            (folder / name).write_text(f"{value}\n")
    (root / "cpufreq" / "boost").write_text("0\n")  # not a policy


def test_cpu_frequency_is_read_every_nth_frame_and_a_cap_is_seen(tmp_path: Path) -> None:
    gb10_cpufreq(tmp_path, cap_khz=1_500_000)
    script = sampler_script(0.05, [], count=3, process_every=2, service_every=0, cpufreq_dir=str(tmp_path))
    first, second, third = run_frames(f"exec sh -c {shlex.quote(script)} sparktui-sampler")
    assert second.cpu_freq is None and "cpufreq" not in second.refreshed  # between refreshes
    for frame in (first, third):
        freq = frame.cpu_freq
        assert freq is not None and (freq.policies, freq.mean_hz, freq.limit_hz, freq.top_hz) == (
            2,
            1.5e9,
            1.5e9,
            3.9e9,
        )
        assert freq.capped and freq.text == "CPU 1.50 GHz (1.50-1.50), capped at 1.50 of 3.90 GHz"
    merged = merge(first, second)
    assert merged.cpu_freq == first.cpu_freq  # carried to the frame that did not read it


def test_without_cpufreq_there_is_no_reading_and_no_problem(tmp_path: Path) -> None:
    script = sampler_script(0.05, [], count=1, service_every=0, cpufreq_dir=str(tmp_path))
    (frame,) = run_frames(f"exec sh -c {shlex.quote(script)} sparktui-sampler")
    assert frame.cpu_freq is None and "cpufreq" in frame.refreshed  # read, and nothing there: a VM
    assert "cpufreq" not in frame.section_problems
    assert frame.memory.mem_total == this_mem_total()  # the rest of the frame is whole


def test_the_local_sampler_reads_the_same_cpufreq_tree(tmp_path: Path) -> None:
    gb10_cpufreq(tmp_path)
    problems: dict[str, str] = {}
    freq = local_cpu_frequency(problems, tmp_path)
    assert freq is not None and not freq.capped and problems == {}
    assert (freq.min_hz, freq.max_hz, freq.top_hz) == (2.808e9, 3.9e9, 3.9e9)
    assert local_cpu_frequency(problems, tmp_path / "none") is None and problems == {}
