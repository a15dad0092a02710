"""The host model: frames, their parser, merge, the memory ledger, leftovers and stale workers.

Values are hand-computed from the files in tests/data/host (see its README): bytes = kB × 1024,
RSS = pages × 4096, start = btime + ticks / 100.
"""

from __future__ import annotations

import math

import pytest

from sparktui.model.host import (
    FrameSplitter,
    HostProcess,
    HostSample,
    ServiceState,
    ShmEntry,
    exec_target,
    ledger,
    leftovers,
    merge,
    parse_frame,
    parse_properties,
    process_kind,
    service_state,
    shm_kind,
    stale_workers,
)
from sparktui.model.memory import GIB, HostMemory, launch_readiness, parse_meminfo, parse_pressure
from tests.conftest import DATA

HOST = DATA / "host"
BTIME = 1780124292  # 2026-05-30 06:58:12 UTC, the btime in every data frame
DEVICE_TOTAL = 119.67 * GIB  # the "(x/119.67 GiB)" of the vLLM log line in context/002


def frames_of(text: str) -> list[str]:
    splitter = FrameSplitter()
    return [frame for line in text.splitlines() if (frame := splitter.feed(line)) is not None]


def data_frame(name: str) -> HostSample:
    (frame,) = frames_of((HOST / name).read_text())
    return parse_frame(frame)


def serving() -> tuple[HostSample, HostSample]:
    first, second = frames_of((HOST / "frames-serving.txt").read_text())
    return parse_frame(first), parse_frame(second)


def meminfo_sample(text: str, processes: tuple[HostProcess, ...] | None = ()) -> HostSample:
    frame = (
        "==sparktui-sample 1 1780133292.00 1\n==meminfo\n"
        + text
        + ("==processes clk_tck=100 pagesize=4096 btime=1780124292\n" if processes == () else "")
        + "==sparktui-end 1\n"
    )
    return parse_frame(frame)


# --- parsing the data frames --------------------------------------------------------------------


def test_incident_frame_reads_memory_pressure_load_and_uptime() -> None:
    sample = data_frame("frame-incident.txt")
    assert sample.seq == 217
    assert sample.remote_epoch == pytest.approx(1780129724.17)
    assert sample.memory == parse_meminfo((HOST / "meminfo-pagecache-90g.txt").read_text())
    assert sample.memory.mem_total == 127600748 * 1024
    assert sample.pressure is not None
    assert sample.pressure.some_avg10 == 12.48
    assert sample.pressure.full_total_s == pytest.approx(902.318554)
    assert sample.pressure_problem is None
    assert sample.load == (0.31, 0.42, 0.40)
    assert sample.uptime_s == 5432.17
    assert sample.boot_epoch == pytest.approx(BTIME)
    assert sample.problems == (
        "ds4 (systemd vllm-ds4-head.service): ExecStart path /home/milo/vllm-scripts/vllm-head-090.sh "
        "does not exist on the node",
    )


def test_incident_frame_lists_shm_entries_with_kind_size_and_allocation() -> None:
    shm = data_frame("frame-incident.txt").shm
    assert shm is not None
    assert [(e.name, e.kind) for e in shm] == [
        ("lttng-ust-wait-8", "other"),
        ("nccl-Hq3vDk", "nccl"),
        ("psm_2b7e41f0", "psm"),
        ("psm_91c04ad3", "psm"),
        ("sem.mp-4f2kq1x9", "sem"),
        ("sem.mp-ze8r0w1b", "sem"),
        ("vllm_offload_7d2f9a0c-51e4-4b8e-a3f6-0c9d2e1b7a44.mmap", "vllm_offload"),
    ]
    offload = shm[-1]
    assert offload.size_bytes == 17179869184  # 16 GiB apparent, sparse
    assert offload.allocated_bytes == 1835008 * 1024  # 1.75 GiB really held
    assert offload.held_bytes == 1879048192
    assert shm[1].size_bytes == 0 and shm[1].allocated_bytes == 0


def test_incident_frame_has_an_empty_process_list_not_an_unknown_one() -> None:
    sample = data_frame("frame-incident.txt")
    assert sample.processes == ()
    assert "processes" in sample.refreshed


def test_crash_looping_unit_shows_status_127_restarts_and_the_missing_exec_path() -> None:
    services = data_frame("frame-incident.txt").services
    assert services is not None
    ds4 = services["ds4"]
    assert (ds4.manager, ds4.name, ds4.state, ds4.sub_state) == (
        "systemd",
        "vllm-ds4-head.service",
        "activating",
        "auto-restart",
    )
    assert ds4.exit_status == 127
    assert ds4.restarts == 14
    assert ds4.exec_path == "/home/milo/vllm-scripts/vllm-head-090.sh"
    assert ds4.exec_exists is False
    # boot (btime) + ExecMainStartTimestampMonotonic 5400.5 s
    assert ds4.started_epoch == pytest.approx(BTIME + 5400.5)
    assert ds4.starting and ds4.restarting
    assert not ds4.running and not ds4.failed


def test_restarting_container_shows_restart_count_exit_code_and_start_time() -> None:
    services = data_frame("frame-incident.txt").services
    assert services is not None
    qwen = services["qwen"]
    assert (qwen.manager, qwen.name, qwen.state) == ("docker", "qwen36-35b", "restarting")
    assert qwen.restarts == 23
    assert qwen.exit_status == 2
    # 2026-05-30T08:29:41.118204733Z = btime (06:58:12) + 1 h 31 min 29.118204 s
    assert qwen.started_epoch == pytest.approx(BTIME + 5489.118204)
    assert qwen.starting and qwen.restarting and not qwen.running and not qwen.failed
    assert qwen.problem is None


def test_unavailable_pressure_section_is_reported_not_fatal() -> None:
    sample = data_frame("frame-stale-workers.txt")
    assert sample.pressure is None
    assert sample.pressure_problem is not None
    assert sample.pressure_problem.startswith("/proc/pressure/memory does not exist")
    assert sample.problems[0].startswith("pressure: /proc/pressure/memory does not exist")
    assert "pressure" in sample.refreshed
    assert sample.memory.mem_total == 127600748 * 1024


def test_processes_come_from_stat_and_statm_with_kind_rss_and_start_time() -> None:
    first, _ = serving()
    assert first.processes is not None
    api, engine, worker = first.processes
    assert (api.pid, api.ppid, api.kind) == (4127, 4101, "serve")
    assert api.args == (
        "python3 /usr/local/bin/vllm serve openai/gpt-oss-120b --port 8000 --gpu-memory-utilization 0.85"
    )
    assert api.rss_bytes == 551936 * 4096
    assert api.rss_anon_bytes == (551936 - 120832) * 4096
    assert api.start_epoch == BTIME + 600.0  # starttime 60000 ticks / 100
    assert (engine.pid, engine.ppid, engine.kind, engine.args) == (
        4398,
        4127,
        "engine_core",
        "VLLM::EngineCore",
    )
    assert engine.start_epoch == BTIME + 615.0
    assert (worker.pid, worker.ppid, worker.kind, worker.args) == (4412, 4398, "worker", "VLLM::Worker_TP0")
    assert worker.rss_anon_bytes == (393216 - 131072) * 4096


def test_running_container_is_running() -> None:
    first, _ = serving()
    assert first.services is not None
    state = first.services["gptoss"]
    assert state.running and not state.starting and not state.failed and not state.restarting
    assert state.started_epoch == pytest.approx(BTIME + 596.482913)  # 07:08:12.482913775Z


def test_stopped_unit_is_neither_running_nor_failed_and_keeps_its_exec_path() -> None:
    services = data_frame("frame-stale-workers.txt").services
    assert services is not None
    unit = services["ds4w"]
    assert (unit.state, unit.sub_state, unit.exit_status) == ("inactive", "dead", 0)
    assert not unit.running and not unit.failed and not unit.starting
    assert (unit.exec_path, unit.exec_exists) == ("/usr/bin/docker", True)
    assert unit.started_epoch == pytest.approx(BTIME + 580.25)


# --- services from properties -------------------------------------------------------------------


def test_exec_target_is_argv0_or_the_script_an_interpreter_runs() -> None:
    assert exec_target("{ path=/usr/bin/env ; argv[]=/usr/bin/env vllm serve m ; ignore_errors=no }") == (
        "/usr/bin/env"
    )
    assert exec_target("{ path=/bin/bash ; argv[]=/bin/bash /home/milo/x.sh ; ignore_errors=no }") == (
        "/home/milo/x.sh"
    )
    assert exec_target("{ path=/usr/bin/python3.12 ; argv[]=/usr/bin/python3.12 /opt/s.py ; x=y }") == "/opt/s.py"
    assert exec_target("{ path=/bin/bash ; argv[]=/bin/bash -c 'vllm serve' ; ignore_errors=no }") == "/bin/bash"
    assert exec_target("{ path=/usr/bin/docker ; argv[]=/usr/bin/docker exec c bash /w/s.sh ; x=y }") == (
        "/usr/bin/docker"
    )
    assert exec_target("") is None


def test_unit_not_found_is_a_problem() -> None:
    props = parse_properties((HOST / "systemctl-show-nope.service.txt").read_text())
    state = service_state("x", "systemd", "nope.service", props, boot_epoch=float(BTIME))
    assert state.state == "inactive"
    assert state.problem == "unit nope.service not found"
    assert state.started_epoch is None  # monotonic 0 and an empty timestamp: never started
    assert state.exec_path is None


def test_systemd_start_time_falls_back_to_the_utc_timestamp_without_boot_time() -> None:
    props = parse_properties((HOST / "systemctl-show-vllm-ds4-head.service.txt").read_text())
    state = service_state("ds4", "systemd", "vllm-ds4-head.service", props, boot_epoch=None)
    assert state.started_epoch == BTIME + 5400  # "Sat 2026-05-30 08:28:12 UTC", whole seconds


@pytest.mark.parametrize(
    ("manager", "state", "exit_status", "expected"),
    [
        ("systemd", "active", 0, (False, True, False)),
        ("systemd", "activating", None, (True, False, False)),
        ("systemd", "failed", 1, (False, False, True)),
        ("systemd", "inactive", 0, (False, False, False)),
        ("docker", "running", 0, (False, True, False)),
        ("docker", "created", 0, (True, False, False)),
        ("docker", "restarting", 1, (True, False, False)),
        ("docker", "exited", 137, (False, False, True)),
        ("docker", "exited", 0, (False, False, False)),
        ("docker", "dead", None, (False, False, True)),
        ("docker", "unknown", None, (False, False, False)),
    ],
)
def test_service_state_starting_running_failed_follow_the_manager(
    manager: str, state: str, exit_status: int | None, expected: tuple[bool, bool, bool]
) -> None:
    service = ServiceState("i", manager, "n", state, exit_status=exit_status)
    assert (service.starting, service.running, service.failed) == expected


def test_docker_state_error_becomes_the_problem() -> None:
    props = parse_properties(
        "Status=created\nRestartCount=0\nExitCode=127\nStartedAt=0001-01-01T00:00:00Z\n"
        'Error=failed to create task: exec: "vllm": executable file not found in $PATH\n'
    )
    state = service_state("v", "docker", "v", props)
    assert state.problem == 'failed to create task: exec: "vllm": executable file not found in $PATH'
    assert state.started_epoch is None  # docker's zero time: never started


@pytest.mark.parametrize(
    ("args", "kind"),
    [
        ("python3 /usr/local/bin/vllm serve m --port 8000", "serve"),
        ("/usr/bin/python3 -m vllm.entrypoints.openai.api_server --model m", "serve"),
        ("VLLM::APIServer", "serve"),
        ("VLLM::EngineCore_DP0", "engine_core"),
        ("VLLM::Worker_TP0_EP0", "worker"),
        ("VLLM::Something", "other"),
    ],
)
def test_process_kind_from_args(args: str, kind: str) -> None:
    assert process_kind(args) == kind


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("psm_1a2b3c", "psm"),
        ("sem.mp-x1y2", "sem"),
        ("sem.loky-12-ab", "sem"),
        ("nccl-AbC123", "nccl"),
        ("vllm_offload_e1.mmap", "vllm_offload"),
        ("pulse-shm-1", "other"),
        ("psm", "other"),
    ],
)
def test_shm_kind_from_name(name: str, kind: str) -> None:
    assert shm_kind(name) == kind


# --- malformed frames -----------------------------------------------------------------------------

GOOD_HEAD = "==sparktui-sample 1 1780133292.00 7"
MEMINFO = "==meminfo\nMemTotal: 1024 kB\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty host sample frame"),
        ("==meminfo\nMemTotal: 1 kB\n==sparktui-end 1\n", "does not start with ==sparktui-sample"),
        ("==sparktui-sample 2 1780133292.00 7\n==sparktui-end 7\n", "is not '==sparktui-sample 1 EPOCH SEQ'"),
        ("==sparktui-sample 1 1780133292.00\n==sparktui-end 7\n", "is not '==sparktui-sample 1 EPOCH SEQ'"),
        ("==sparktui-sample 1 noon 7\n==sparktui-end 7\n", "bad epoch or sequence"),
        ("==sparktui-sample 1 inf 7\n==sparktui-end 7\n", "bad epoch"),
        (GOOD_HEAD + "\n" + MEMINFO, "host sample 7 has no end marker"),
        (GOOD_HEAD + "\nMemTotal: 1 kB\n==sparktui-end 7\n", "line 2 is outside any section"),
        (GOOD_HEAD + "\n" + MEMINFO + MEMINFO + "==sparktui-end 7\n", "has two meminfo sections"),
        (GOOD_HEAD + "\n== meminfo\n==sparktui-end 7\n", "line 2 is not a section header"),
        (
            GOOD_HEAD + "\n==service a systemd u\nActiveState=active\n==sparktui-end 7\n",
            "without a services header",
        ),
        (GOOD_HEAD + "\n==services 2\n==service a systemd u\n==sparktui-end 7\n", "announces 2 services"),
        (
            GOOD_HEAD + "\n==services 1\n==service a launchd u\n==sparktui-end 7\n",
            "is not '==service INSTANCE",
        ),
    ],
)
def test_malformed_frame_raises_one_clear_line(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=r".") as caught:
        parse_frame(text)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_bad_content_makes_its_section_unavailable_and_keeps_the_rest() -> None:
    text = (
        GOOD_HEAD + "\n==meminfo\nMemTotal 1024 kB\n==loadavg\n0.10 0.20 0.30 1/2 3\n"
        "==shm\ntotal 0\nthis is not ls\n==sparktui-end 7\n"
    )
    sample = parse_frame(text)
    assert sample.memory == HostMemory()
    assert sample.section_problems["meminfo"].startswith("/proc/meminfo line 1 is not 'Key: value [kB]'")
    assert sample.shm is None
    assert "/dev/shm listing row is not" in sample.section_problems["shm"]
    assert sample.load == (0.10, 0.20, 0.30)
    assert set(sample.refreshed) == {"meminfo", "loadavg", "shm"}


def test_unknown_section_is_a_problem_not_an_error() -> None:
    sample = parse_frame(GOOD_HEAD + "\n" + MEMINFO + "==gpu\nsomething\n==sparktui-end 7\n")
    assert sample.memory.mem_total == 1024 * 1024
    assert sample.section_problems["gpu"].startswith("unknown section ignored")


def test_hidepid_is_reported_with_the_process_list() -> None:
    text = GOOD_HEAD + "\n==processes clk_tck=100 pagesize=4096 btime=1 hidepid=invisible\n==sparktui-end 7\n"
    sample = parse_frame(text)
    assert sample.processes == ()
    assert "hidepid=invisible" in sample.section_problems["processes"]


def test_process_args_may_hold_any_character_but_newline() -> None:
    # after the comm: state, ppid, 17 fields, starttime (6000 ticks), vsize, rss, 28 more
    stat = "stat 77 (python3) S 1 " + " ".join(["0"] * 17) + " 6000 0 100 " + " ".join(["0"] * 28)
    text = (
        GOOD_HEAD + "\n==processes clk_tck=100 pagesize=4096 btime=1000\n"
        f"{stat}\nstatm 77 500 100 40 0 0 0 0\nargs 77 vllm serve m --chat-template \u2028x\x1cy\r\n"
        "junk row\n==sparktui-end 7\n"
    )
    sample = parse_frame(text)
    assert sample.processes is not None
    (proc,) = sample.processes
    assert (proc.pid, proc.kind, proc.args) == (77, "serve", "vllm serve m --chat-template \u2028x\x1cy")
    assert (proc.rss_bytes, proc.rss_anon_bytes, proc.start_epoch) == (100 * 4096, 60 * 4096, 1060.0)
    assert sample.section_problems["processes"] == "1 unreadable process rows skipped"


def test_shm_listing_is_capped_at_1000_entries() -> None:
    rows = "".join(f"4 -rw------- 1 0 0 32 May 30 07:41 sem.mp-{i:05d}\n" for i in range(1200))
    sample = parse_frame(GOOD_HEAD + "\n==shm\ntotal 4800\n" + rows + "==sparktui-end 7\n")
    assert sample.shm is not None and len(sample.shm) == 1000
    assert sample.section_problems["shm"] == "1200 entries, only the first 1000 kept"


# --- the frame splitter ---------------------------------------------------------------------------


def test_splitter_skips_banner_lines_and_returns_whole_frames() -> None:
    splitter = FrameSplitter()
    lines = (HOST / "frames-serving.txt").read_text().splitlines(keepends=True)
    frames = [frame for line in lines if (frame := splitter.feed(line)) is not None]
    assert [parse_frame(f).seq for f in frames] == [41, 42]
    assert splitter.skipped_lines == 3
    assert splitter.discarded == 0


def test_splitter_drops_a_frame_cut_short_by_the_next_header() -> None:
    splitter = FrameSplitter()
    text = GOOD_HEAD + "\n" + MEMINFO + GOOD_HEAD.replace(" 7", " 8") + "\n" + MEMINFO + "==sparktui-end 8\n"
    frames = [f for line in text.splitlines() if (f := splitter.feed(line)) is not None]
    assert len(frames) == 1 and parse_frame(frames[0]).seq == 8
    assert splitter.discarded == 1
    assert splitter.last_problem is not None and "without its end marker" in splitter.last_problem


def test_splitter_discards_a_frame_past_its_size_bound_and_recovers() -> None:
    splitter = FrameSplitter(max_bytes=200)
    big = GOOD_HEAD + "\n==shm\n" + "x" * 300 + "\n" + "y\n" * 3 + "==sparktui-end 7\n"
    small = GOOD_HEAD.replace(" 7", " 8") + "\n" + MEMINFO + "==sparktui-end 8\n"
    frames = [f for line in (big + small).splitlines() if (f := splitter.feed(line)) is not None]
    assert [parse_frame(f).seq for f in frames] == [8]
    assert splitter.discarded == 1
    assert splitter.last_problem == "a frame larger than 200 bytes was discarded"


def test_splitter_joins_lines_split_across_chunks() -> None:
    splitter = FrameSplitter()
    text = "garbage\n" + GOOD_HEAD + "\n" + MEMINFO + "==sparktui-end 7\n" + GOOD_HEAD
    chunks = [text[i : i + 5] for i in range(0, len(text), 5)]
    frames = [frame for chunk in chunks for frame in splitter.feed_chunk(chunk)]
    assert len(frames) == 1
    assert parse_frame(frames[0]).memory.mem_total == 1024 * 1024
    assert splitter.skipped_lines == 1


def test_splitter_bounds_a_partial_line_without_newline() -> None:
    splitter = FrameSplitter(max_bytes=100)
    assert splitter.feed_chunk(GOOD_HEAD + "\n" + "z" * 150) == []
    assert splitter.discarded == 1
    frames = splitter.feed_chunk("zz\n==sparktui-end 7\n" + GOOD_HEAD + "\n" + MEMINFO + "==sparktui-end 7\n")
    assert len(frames) == 1


# --- merge ----------------------------------------------------------------------------------------


def test_merge_carries_forward_sections_the_new_frame_did_not_refresh() -> None:
    first, second = serving()
    assert second.processes is None and second.shm is None and second.services is None
    merged = merge(first, second)
    assert merged.remote_epoch == second.remote_epoch == pytest.approx(BTIME + 9001.0)
    assert merged.load == (2.38, 2.17, 1.97)  # refreshed: the new value
    assert merged.uptime_s == 9001.0
    assert merged.processes == first.processes
    assert merged.shm == first.shm
    assert merged.services == first.services
    assert merged.refreshed["processes"] == first.remote_epoch
    assert merged.refreshed["meminfo"] == second.remote_epoch


def test_merge_replaces_a_section_refreshed_as_unavailable() -> None:
    first, _ = serving()
    text = GOOD_HEAD + "\n==shm unavailable ls /dev/shm exited 2: Permission denied\n==sparktui-end 7\n"
    merged = merge(first, parse_frame(text))
    assert merged.shm is None
    assert merged.processes == first.processes
    assert merged.problems == ("shm: ls /dev/shm exited 2: Permission denied",)


def test_merge_carries_the_problems_of_carried_sections() -> None:
    stale = data_frame("frame-stale-workers.txt")
    merged = merge(stale, parse_frame(GOOD_HEAD + "\n" + MEMINFO + "==sparktui-end 7\n"))
    assert merged.pressure_problem == stale.pressure_problem
    assert merged.problems == stale.problems
    assert merged.memory.mem_total == 1024 * 1024


def test_merge_with_no_previous_sample_is_the_new_one() -> None:
    first, _ = serving()
    assert merge(None, first) is first


# --- the ledger and launch readiness --------------------------------------------------------------


def test_ledger_of_this_machine_meminfo() -> None:
    # meminfo-this-vm.txt, captured on the 24 GB test VM: MemTotal 24684084 kB, MemFree 24188668,
    # MemAvailable 24266784, Buffers 2904, Cached 249140, Shmem 8872.
    sample = meminfo_sample((HOST / "meminfo-this-vm.txt").read_text())
    book = ledger(sample)
    assert book.total == 24684084 * 1024 == 25276502016
    assert book.free == 24188668 * 1024
    assert book.available == 24266784 * 1024
    assert book.reclaimable_cache == (249140 - 8872) * 1024 == 246034432
    assert book.shmem == 8872 * 1024
    # used = 24684084 − 24188668 − 2904 − 249140 = 243372 kB; no vLLM process
    assert book.other_used == 243372 * 1024
    assert book.vllm_used == 0 and book.vllm_rss == 0 and book.vllm_running is False
    segments = book.segments()
    assert [label for label, _ in segments] == ["vLLM", "other", "reclaimable cache", "shmem", "free"]
    assert sum(v for _, v in segments) == book.total
    assert segments[2][1] == (249140 - 8872 + 2904) * 1024

    ready = launch_readiness(sample.memory, 0.9)
    # needs ceil(25276502016 × 0.9) = 22748851815 (22748851814.4 rounded up); has 24849186816
    assert ready.ready is True
    assert ready.needed_bytes == 22748851815
    assert ready.available_bytes == 24266784 * 1024 == 24849186816


def test_ledger_of_gb10_serving_frame_attributes_vllm_anonymous_rss() -> None:
    first, _ = serving()
    book = ledger(first)
    # meminfo-gb10.txt: used = 127600748 − 24186532 − 531864 − 45361720 = 57520632 kB
    used = 57520632 * 1024
    # anon pages: (551936 − 120832) + (1441792 − 131072) + (393216 − 131072) = 2003968
    assert book.vllm_used == 2003968 * 4096 == 8208252928
    assert book.vllm_rss == (551936 + 1441792 + 393216) * 4096 == 9776922624
    assert book.other_used == used - 8208252928 == 50692874240
    assert book.reclaimable_cache == 40158072832  # (45361720 − 6144852) kB
    assert book.shmem == 6144852 * 1024
    assert book.shm_leftovers == (102400 + 4) * 1024  # psm_ + sem.mp- in use
    assert book.vllm_running is True
    assert sum(v for _, v in book.segments()) == book.total == 130663165952

    ready = launch_readiness(first.memory, 0.85)
    # needs ceil(130663165952 × 0.85) = 111063691060; MemAvailable 66512330752
    assert ready.ready is False
    assert ready.needed_bytes == 111063691060
    assert ready.shortfall_bytes == 111063691060 - 66512330752
    # MemFree + droppable = (24186532 + 39216868) kB = 64925081600 < MemAvailable: dropping won't help
    assert ready.would_fit_after_drop is False
    assert "would not help much" in ready.reason


def test_ledger_of_the_90_gib_page_cache_incident() -> None:
    sample = data_frame("frame-incident.txt")
    book = ledger(sample)
    assert book.total == 130663165952  # 127600748 kB
    assert book.free == 11537204 * 1024 == 11814096896
    assert book.available == 31467392 * 1024 == 32222609408
    assert book.buffers == 412688 * 1024 == 422592512
    assert book.reclaimable_cache == (96470528 - 2104320) * 1024 == 96630996992  # 90.00 GiB
    assert book.shmem == 2104320 * 1024 == 2154823680
    # used = 127600748 − 11537204 − 412688 − 96470528 = 19180328 kB, nothing of it vLLM's
    assert book.vllm_used == 0 and book.vllm_running is False
    assert book.other_used == 19180328 * 1024 == 19640655872
    # leftovers: 2 × psm 102400 KiB + 2 × sem.mp 4 KiB + nccl 0 + vllm_offload 1835008 KiB
    assert book.shm_leftovers == (2 * 102400 + 2 * 4 + 1835008) * 1024 == 2088771584
    assert sum(v for _, v in book.segments()) == book.total


def test_launch_readiness_of_the_90_gib_page_cache_incident() -> None:
    memory = data_frame("frame-incident.txt").memory
    at_09 = launch_readiness(memory, 0.9, device_total_bytes=DEVICE_TOTAL)
    needed = math.ceil(DEVICE_TOTAL * 0.9)  # 107.703 GiB
    assert at_09.ready is False
    assert at_09.needed_bytes == needed
    assert at_09.shortfall_bytes == needed - 32222609408  # 77.70 GiB short
    # after a drop: MemFree + (Cached − Shmem) = 11537204 + 94366208 = 105903412 kB = 101.0 GiB
    assert at_09.would_fit_after_drop is False
    assert at_09.reason.endswith("dropping 90.0 GiB of page cache would leave about 101.0 GiB, still short")
    at_08 = launch_readiness(memory, 0.8, device_total_bytes=DEVICE_TOTAL)  # needs 95.74 GiB
    assert at_08.ready is False
    assert at_08.would_fit_after_drop is True
    assert at_08.reason.endswith("dropping 90.0 GiB of page cache would fit")


def test_ledger_without_meminfo_has_no_segments() -> None:
    sample = parse_frame(GOOD_HEAD + "\n==meminfo unavailable /proc/meminfo could not be read\n==sparktui-end 7\n")
    book = ledger(sample)
    assert book.total is None
    assert book.segments() == ()


def test_ledger_with_unknown_processes_leaves_vllm_at_zero_and_running_unknown() -> None:
    sample = meminfo_sample((HOST / "meminfo-this-vm.txt").read_text(), processes=None)
    book = ledger(sample)
    assert sample.processes is None
    assert book.vllm_rss is None and book.vllm_running is None
    assert book.vllm_used == 0
    assert book.other_used == 243372 * 1024


def test_pressure_of_the_stale_frame_data_matches_the_pressure_parser() -> None:
    first, _ = serving()
    assert first.pressure == parse_pressure((DATA / "proc" / "pressure-memory.txt").read_text())


# --- leftovers and stale workers ------------------------------------------------------------------


def test_leftovers_are_the_leak_kinds_while_no_vllm_process_runs() -> None:
    found = leftovers(data_frame("frame-incident.txt"))
    assert [e.name for e in found] == [
        "nccl-Hq3vDk",
        "psm_2b7e41f0",
        "psm_91c04ad3",
        "sem.mp-4f2kq1x9",
        "sem.mp-ze8r0w1b",
        "vllm_offload_7d2f9a0c-51e4-4b8e-a3f6-0c9d2e1b7a44.mmap",
    ]


def test_no_leftovers_while_a_vllm_process_runs() -> None:
    first, _ = serving()
    assert first.shm is not None and any(e.kind == "psm" for e in first.shm)
    assert leftovers(first) == ()
    assert leftovers(data_frame("frame-stale-workers.txt")) == ()  # stale workers may hold them


def test_no_leftovers_when_the_process_list_is_unknown() -> None:
    _, second = serving()
    shm = (ShmEntry("psm_1", 10, "psm"),)
    sample = HostSample(second.remote_epoch, second.memory, None, None, shm, None, None, None, None, (), seq=1)
    assert leftovers(sample) == ()


def test_stale_workers_are_workers_alive_while_the_service_is_stopped() -> None:
    stale = data_frame("frame-stale-workers.txt")
    assert stale.services is not None and not stale.services["ds4w"].running
    found = stale_workers(stale, service_running=False)
    assert [(p.pid, p.ppid, p.args) for p in found] == [(5120, 1, "VLLM::Worker_TP0_EP0")]
    assert stale_workers(stale, service_running=True) == ()


def test_no_stale_workers_while_serving_or_when_processes_are_unknown() -> None:
    first, second = serving()
    assert stale_workers(first, service_running=True) == ()
    assert stale_workers(second, service_running=False) == ()  # second frame: no process list


def test_ledger_counts_what_vllm_reserved_when_it_is_more_than_its_rss() -> None:
    first, _ = serving()
    used = 57520632 * 1024  # as in the test above
    reserved = 0.30 * 130663165952  # gpu_memory_utilization 0.30 of MemTotal: 39.2 GB, more than the RSS
    book = ledger(first, vllm_reserved=reserved)
    assert book.vllm_used == pytest.approx(reserved)
    assert book.other_used == pytest.approx(used - reserved)
    assert sum(v for _, v in book.segments()) == pytest.approx(book.total)
    # Reserved beyond what is used (the pool is not all touched yet) is capped at used.
    assert ledger(first, vllm_reserved=0.9 * 130663165952).vllm_used == used
    # Less than the RSS: the RSS stands.
    assert ledger(first, vllm_reserved=1.0).vllm_used == 2003968 * 4096
