"""A demo vLLM instance's process tree and the service manager that runs it (a systemd unit or a
docker container), driven by the simulation's clock.

A start is an *attempt*: the API server and the engine core start, the worker initialises its device
and runs vLLM's start-up memory check (``request_memory``: free = the host's MemAvailable on a GB10,
``ceil(device total × gpu_memory_utilization)`` needed), then loads the weights (read from disk into
the page cache unless cached), profiles, allocates the KV cache and captures CUDA graphs, and serves.
A failed check ends the attempt with vLLM's exact ValueError in the log, exit status 1, and the
``/dev/shm`` segments of the attempt left behind; systemd (``Restart=on-failure``, ``RestartSec=10``)
or docker (``unless-stopped``) starts it again, counting NRestarts / RestartCount: a crash loop, until
the memory is there. ``systemctl restart`` flushes NRestarts (as systemd does for a manual start);
``docker restart`` leaves RestartCount alone.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Literal

from sparktui.demo.host import DEVICE_TOTAL, GIB, MIB, SimClock, SimHost, SimProcess
from sparktui.demo.sim import Engine, EngineState, MetricsSink, ModelProfile
from sparktui.demo.vllmlog import (
    LOG_STATS_INTERVAL_S,
    InstanceLog,
    StatsWindow,
    engine_stats_line,
    free_memory_error,
    mfu_line,
    spec_decode_line,
    vllm_text,
)

Manager = Literal["systemd", "docker"]
VLLM_VERSION = "0.33.0"
SYSTEMD_RESTART_SEC = 10.0
DOCKER_RESTART_MAX_S = 60.0
# A dead engine core: the API server answers /health 503 for about this long, then exits (seen on the
# real engine, vLLM 0.32's CPU build, with its EngineCore killed) and its manager restarts it.
API_EXIT_AFTER_DEAD_S = 1.0
VENV = "/home/spark/vllm/.venv"
IMAGE = "vllm/vllm-openai:v0.33.0"  # what a demo container runs
SITE = f"{VENV}/lib/python3.12/site-packages/vllm"
RING_BUFFER_BYTES = 100 * MIB  # vLLM's shm MessageQueue: max_chunk_bytes 10 MiB x 10 chunks
CONTEXT_BYTES = 0.6 * GIB  # CUDA context and NCCL buffers, allocated before the memory check


class Phase(StrEnum):
    RUNNING = "running"  # the main process lives: starting or serving
    RESTART_WAIT = "restart-wait"  # it failed; the manager starts it again after a delay
    STOPPED = "stopped"


@dataclass
class Attempt:
    """One start of the main process, in simulated seconds."""

    started: float
    check_at: float
    weights_until: float
    ready_at: float
    load_s: float
    checked: bool = False
    weights_logged: bool = False
    ready_logged: bool = False
    cached_at_start: float = 0.0


class TeeSink:
    """The engine's metric events go to the exposition and to the log's interval counters."""

    def __init__(self, exposition: MetricsSink, stats: StatsWindow) -> None:
        self.exposition = exposition
        self.stats = stats

    def add(self, counter: str, value: float, **labels: str) -> None:
        self.exposition.add(counter, value, **labels)
        self.stats.add(counter, value, labels)

    def observe(self, histogram: str, value: float, count: int = 1) -> None:
        self.exposition.observe(histogram, value, count)

    def set_gauge(self, gauge: str, value: float, **labels: str) -> None:
        self.exposition.set_gauge(gauge, value, **labels)


def _systemd_time(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%a %Y-%m-%d %H:%M:%S UTC")


def _docker_time(epoch: float) -> str:
    stamp = datetime.fromtimestamp(epoch, UTC)
    nanos = round((epoch % 1) * 1e9) % 1_000_000_000
    return f"{stamp.strftime('%Y-%m-%dT%H:%M:%S')}.{nanos:09d}Z"


class VllmService:
    """One vLLM instance on one node: its processes, its manager's state and its log."""

    def __init__(
        self,
        *,
        instance: str,
        manager: Manager,
        name: str,
        role: str,
        profile: ModelProfile,
        engine: Engine,
        host: SimHost,
        log: InstanceLog,
        clock: SimClock,
        rng: random.Random,
        on_process_start: Callable[[], None],
        port: int = 8000,
    ) -> None:
        self.instance = instance
        self.manager: Manager = manager
        self.name = name
        self.role = role
        self.profile = profile
        self.engine = engine
        self.host = host
        self.log = log
        self.clock = clock
        self.rng = rng
        self.on_process_start = on_process_start
        self.port = port
        self.stats = StatsWindow()
        self.phase = Phase.STOPPED
        self.attempt: Attempt | None = None
        self.restarts = 0  # NRestarts / RestartCount
        self.exit_status = 0
        self.main_start_epoch = clock.epoch
        self.restart_at = 0.0
        self.main_pid = 0
        self.core_pid = 0
        self.worker_pid = 0
        self.shim_pid = host.spawn_pid() if manager == "docker" else 1
        self.shm_names: list[str] = []
        self.uses_shm = True  # vLLM's segments in /dev/shm (the demo's other engines' servers make none)
        self.engine_dead_logged = False
        self.dead_since: float | None = None  # when the engine core died (the API server exits soon after)
        self.last_log_at = 0.0
        self.last_throughput = (0.0, 0.0)
        self.seen_request_id = engine.next_id
        self.clients_back_at: float | None = None  # a failed-over workload returns at this time
        self.failover_return_s: float | None = None
        self._log_at: float | None = None  # writing history: the time of the lines
        # Where the API answers on the host (the demo's HTTP server; None: no HTTP, a headless worker).
        # A unit's vLLM listens there itself; a container's listens on 8000, published there by docker.
        self.published_port: int | None = None

    # --- what the node sees -----------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self.phase is Phase.RUNNING

    @property
    def headless(self) -> bool:
        return self.role == "worker"

    def serve_args(self) -> str:
        p = self.profile
        listens = self.published_port if self.manager == "systemd" and self.published_port else self.port
        parts = [
            "serve",
            p.served_name,
            "--port",
            str(listens),
            "--gpu-memory-utilization",
            f"{p.gpu_memory_utilization:g}",
            "--max-model-len",
            str(p.max_model_len),
            "--max-num-seqs",
            str(p.max_num_seqs),
        ]
        if p.num_speculative_tokens:
            parts += [
                "--speculative-config",
                f'{{"method":"mtp","num_speculative_tokens":{p.num_speculative_tokens}}}',
            ]
        if self.engine.mfu_metrics:
            parts.append("--enable-mfu-metrics")
        if self.role in ("head", "worker"):
            parts += ["--tensor-parallel-size", "2", "--nnodes", "2"]
            parts += ["--node-rank", "1", "--headless"] if self.headless else ["--node-rank", "0"]
        return " ".join(parts)

    def exec_path(self) -> str:
        return f"{VENV}/bin/vllm" if self.manager == "systemd" else "/usr/local/bin/vllm"

    def processes(self) -> list[SimProcess]:
        """The instance's live processes, as /proc shows them."""
        if self.phase is not Phase.RUNNING or self.main_pid == 0:
            return []
        attempt = self.attempt
        now = self.clock.now
        started_epoch = self.main_start_epoch
        python = f"{VENV}/bin/python3" if self.manager == "systemd" else "/usr/bin/python3"
        out = [
            SimProcess(
                self.main_pid,
                self.shim_pid,
                "vllm",
                f"{python} {self.exec_path()} {self.serve_args()}",
                started_epoch,
                rss=(0.7 if self.headless else 1.15) * GIB,
                shared=0.22 * GIB,
                threads=63,
            )
        ]
        progress = 1.0
        if attempt is not None and self.engine.state is EngineState.LOADING:
            progress = min(1.0, max(0.1, (now - attempt.started) / max(1.0, attempt.load_s)))
        core_alive = self.engine.state is not EngineState.DEAD
        if not self.headless and self.core_pid and core_alive:
            out.append(
                SimProcess(
                    self.core_pid,
                    self.main_pid,
                    "VLLM::EngineCore",
                    "VLLM::EngineCore",
                    started_epoch + 1.5,
                    rss=(0.5 + 1.1 * progress) * GIB,
                    shared=0.3 * GIB,
                    threads=71,
                )
            )
        if self.role in ("head", "worker") and self.worker_pid and core_alive:
            rank = 1 if self.headless else 0
            parent = self.main_pid if self.headless else self.core_pid
            out.append(
                SimProcess(
                    self.worker_pid,
                    parent,
                    f"VLLM::Worker_TP{rank}",
                    f"VLLM::Worker_TP{rank}",
                    started_epoch + 2.5,
                    rss=(0.3 + 0.6 * progress) * GIB,
                    shared=0.12 * GIB,
                    threads=40,
                )
            )
        return out

    def device_alloc(self) -> float:
        """What the instance's processes hold through the NVIDIA driver (in no RSS)."""
        if self.phase is not Phase.RUNNING:
            return 0.0
        state = self.engine.state
        if state is EngineState.DEAD:
            return 0.0  # the engine core (and its allocations) is gone; the API server lives
        full = self.profile.gpu_memory_utilization * DEVICE_TOTAL
        attempt = self.attempt
        if state is not EngineState.LOADING or attempt is None:
            return full
        now = self.clock.now
        if now < attempt.check_at or not attempt.checked:
            return CONTEXT_BYTES
        if now < attempt.weights_until:
            span = max(1e-6, attempt.weights_until - attempt.check_at)
            return CONTEXT_BYTES + self.profile.weights_gib * GIB * (now - attempt.check_at) / span
        return full

    def systemd_state(self) -> tuple[str, str]:
        """(ActiveState, SubState) of the unit."""
        if self.phase is Phase.RUNNING:
            return "active", "running"
        if self.phase is Phase.RESTART_WAIT:
            return "activating", "auto-restart"
        return "inactive", "dead"

    def systemd_properties(self) -> list[str]:
        """``systemctl show -p …`` for the unit, then the sampler's ExecPath lines."""
        active, sub = self.systemd_state()
        start = _systemd_time(self.main_start_epoch)
        mono = max(0, round((self.main_start_epoch - self.host.boot_epoch) * 1e6))
        stop = "n/a" if self.phase is Phase.RUNNING else start
        code = "(null)" if self.phase is Phase.RUNNING else "exited"
        status = "0/0" if self.phase is Phase.RUNNING else str(self.exit_status)
        exec_path = self.exec_path()
        return [
            f"NRestarts={self.restarts}",
            f"ExecMainStartTimestamp={start}",
            f"ExecMainStartTimestampMonotonic={mono}",
            f"ExecMainStatus={self.exit_status if self.phase is not Phase.RUNNING else 0}",
            f"ExecStart={{ path={exec_path} ; argv[]={exec_path} {self.serve_args()} ; ignore_errors=no ; "
            f"start_time=[{start}] ; stop_time=[{stop}] ; pid={self.main_pid} ; code={code} ; "
            f"status={status} }}",
            "LoadState=loaded",
            f"ActiveState={active}",
            f"SubState={sub}",
            f"ExecPath={exec_path}",
            "ExecPathExists=yes",
        ]

    @property
    def description(self) -> str:
        return f"vLLM {self.profile.served_name}"

    def exec_start(self) -> str:
        """The unit's ``ExecStart`` as ``systemctl show`` prints it (argv joined by spaces, unquoted)."""
        start = _systemd_time(self.main_start_epoch)
        exec_path = self.exec_path()
        return (
            f"{{ path={exec_path} ; argv[]={exec_path} {self.serve_args()} ; ignore_errors=no ; "
            f"start_time=[{start}] ; stop_time=[n/a] ; pid={self.main_pid} ; code=(null) ; status=0/0 }}"
        )

    @property
    def docker_status(self) -> str:
        return {Phase.RUNNING: "running", Phase.RESTART_WAIT: "restarting", Phase.STOPPED: "exited"}[self.phase]

    def container_inspect(self) -> dict[str, object]:
        """The container as ``docker inspect`` prints it (the fields a reader of it looks at)."""
        status = self.docker_status
        args = self.serve_args().split()  # no argument holds a space (the speculative config is compact JSON)
        bindings = (
            {f"{self.port}/tcp": [{"HostIp": "0.0.0.0", "HostPort": str(self.published_port)}]}
            if self.published_port
            else {}
        )
        return {
            "Id": hashlib.sha256(f"{self.host.name}/{self.name}".encode()).hexdigest(),
            "Created": _docker_time(self.main_start_epoch),
            "Path": self.exec_path(),
            "Args": args,
            "State": {
                "Status": status,
                "Running": status == "running",
                "Restarting": status == "restarting",
                "ExitCode": 0 if self.phase is Phase.RUNNING else self.exit_status,
                "StartedAt": _docker_time(self.main_start_epoch),
            },
            "Name": f"/{self.name}",
            "RestartCount": self.restarts,
            "Config": {"Image": IMAGE, "Entrypoint": [self.exec_path()], "Cmd": args},
            "HostConfig": {
                "NetworkMode": "bridge",
                "PortBindings": bindings,
                "RestartPolicy": {"Name": "unless-stopped", "MaximumRetryCount": 0},
                "IpcMode": "host",
            },
            "NetworkSettings": {"Ports": bindings},
        }

    def docker_properties(self) -> list[str]:
        """``docker inspect --format …`` for the container (the sampler's template)."""
        status = self.docker_status
        exit_code = 0 if self.phase is Phase.RUNNING else self.exit_status
        return [
            f"Status={status}",
            f"RestartCount={self.restarts}",
            f"ExitCode={exit_code}",
            f"StartedAt={_docker_time(self.main_start_epoch)}",
            "Error=",
        ]

    # --- log helpers ------------------------------------------------------------------------------

    @property
    def _ident(self) -> str:
        return f"vllm[{self.main_pid}]"

    def _pid_in_log(self, host_pid: int, container_pid: int) -> int:
        return host_pid if self.manager == "systemd" else container_pid

    def _epoch(self) -> float:
        return self.clock.epoch if self._log_at is None else self._log_at

    def _vllm(self, level: str, where: str, message: str, process: str) -> None:
        epoch = self._epoch()
        pids = {
            "APIServer": self._pid_in_log(self.main_pid, 1),
            "EngineCore_DP0": self._pid_in_log(self.core_pid, 212),
            "Worker_TP0": self._pid_in_log(self.worker_pid, 298),
            "Worker_TP1": self._pid_in_log(self.worker_pid, 177),
        }
        label = f"{process} pid={pids[process]}" if process in pids else None
        self.log.add(epoch, self._ident, vllm_text(epoch, level, where, message, label))

    def _uvicorn(self, text: str) -> None:
        """uvicorn's own lines (and its access log) carry no vLLM logger header."""
        pid = self._pid_in_log(self.main_pid, 1)
        self.log.add(self._epoch(), self._ident, f"(APIServer pid={pid}) INFO:     {text}")

    def _systemd(self, text: str) -> None:
        if self.manager == "systemd":
            self.log.add(self._epoch(), "systemd[1]", text, journal_only=True)

    @property
    def _front(self) -> str:
        """The process that logs the start-up: the API server, or the worker of a headless node."""
        return "Worker_TP1" if self.headless else "APIServer"

    @property
    def _core(self) -> str:
        return "Worker_TP1" if self.headless else "EngineCore_DP0"

    # --- commands ---------------------------------------------------------------------------------

    def start(self, *, load_s: float | None = None, cold_jit_s: float | None = None, manual: bool = True) -> None:
        """Start the main process (``systemctl start``, ``docker start``, or an automatic restart)."""
        if self.phase is Phase.RUNNING:
            return
        if manual and self.manager == "systemd":
            self.restarts = 0  # systemd flushes NRestarts when a job starts the unit
        self._begin_attempt(
            self.profile.load_s if load_s is None else load_s,
            self.profile.cold_jit_s if cold_jit_s is None else cold_jit_s,
        )

    def stop(self) -> None:
        """``systemctl stop`` / ``docker stop``: vLLM shuts down cleanly and removes its segments."""
        if self.phase is Phase.STOPPED:
            return
        was_running = self.phase is Phase.RUNNING
        if was_running:
            self._systemd(f"Stopping {self.name} - vLLM {self.profile.served_name}...")
            if not self.headless:
                self._vllm("INFO", "launcher.py:110", "Shutting down FastAPI HTTP server.", "APIServer")
                self._uvicorn("Shutting down")
                self._uvicorn("Application shutdown complete.")
            for name in self.shm_names:
                self.host.remove_shm(name)
        self.shm_names = []
        self.engine.stop()
        self.phase = Phase.STOPPED
        self.attempt = None
        self.dead_since = None
        self.exit_status = 0
        self.main_pid = self.core_pid = self.worker_pid = 0
        if self.manager == "systemd":
            if was_running:
                self._systemd(f"{self.name}: Deactivated successfully.")
            self._systemd(f"Stopped {self.name} - vLLM {self.profile.served_name}.")
        self.log.end_docker_followers()

    def adopt(self, started_epoch: float) -> None:
        """The fleet starts with the instance serving since ``started_epoch`` (loaded at boot): its
        processes, segments, cached weights and start-up log lines as they would be."""
        p = self.profile
        load_s = p.load_s
        self.phase = Phase.RUNNING
        self._spawn(started_epoch - load_s)
        self.host.read(p.served_name, p.weights_gib * GIB, held=False)
        init = min(8.0, 0.25 * load_s)
        weights_until = init + 0.6 * (load_s - init)
        start = self.main_start_epoch
        try:
            self._log_at = start
            self._log_start()
            self._log_at = start + init
            self._log_init()
            self._vllm("INFO", "gpu_model_runner.py:3338", f"Starting to load model {p.served_name}...", self._core)
            self._log_at = start + weights_until
            self._log_weights(weights_until - init)
            self._log_at = start + load_s
            self._log_ready(load_s - weights_until)
        finally:
            self._log_at = None
        self.last_log_at = self.clock.now

    def power_loss(self) -> None:
        """The node lost power: every process is gone at once, nothing is logged or cleaned up."""
        self.engine.stop()
        self.phase = Phase.STOPPED
        self.attempt = None
        self.dead_since = None
        self.main_pid = self.core_pid = self.worker_pid = 0
        self.shm_names = []
        self.clients_back_at = None
        self.log.end_docker_followers()

    def restart(self, *, load_s: float | None = None, cold_jit_s: float | None = None) -> None:
        """``systemctl restart`` / ``docker restart``."""
        self.stop()
        self.start(load_s=load_s, cold_jit_s=cold_jit_s, manual=True)

    def kill(self, pid: int) -> bool:
        """SIGKILL one of the instance's processes; False if it is not one of them."""
        if self.phase is not Phase.RUNNING or pid == 0:
            return False
        if pid == self.main_pid:
            self._crash(status=9, reason="killed")
            return True
        alive = {p.pid for p in self.processes()}
        if pid not in alive:
            return False
        # The engine core or a worker died: the API server lives on, /health answers 503.
        self.engine.state = EngineState.DEAD
        return True

    # --- time -------------------------------------------------------------------------------------

    def advance(self, dt: float) -> None:
        now = self.clock.now
        if self.phase is Phase.RESTART_WAIT and now >= self.restart_at:
            self.restarts += 1
            if self.manager == "systemd":
                self._systemd(f"{self.name}: Scheduled restart job, restart counter is at {self.restarts}.")
            self._begin_attempt(self.profile.load_s, self.profile.cold_jit_s)
        attempt = self.attempt
        if self.phase is Phase.RUNNING and attempt is not None:
            self._attempt_step(attempt, now, dt)
        if self.phase is Phase.RUNNING:
            self._serving_step(now)
        self.seen_request_id = self.engine.next_id

    def _begin_attempt(self, load_s: float, cold_jit_s: float) -> None:
        now = self.clock.now
        init = min(8.0, 0.25 * load_s)
        weights_until = init + 0.6 * (load_s - init)
        self.attempt = Attempt(now, now + init, now + weights_until, now + load_s, load_s)
        self.phase = Phase.RUNNING
        self.exit_status = 0
        self.engine_dead_logged = False
        self.dead_since = None
        self._spawn(self.clock.epoch)
        self.stats.reset()
        self.on_process_start()
        self.engine.restart(load_s, cold_jit_s)
        self._log_start()

    def _spawn(self, start_epoch: float) -> None:
        """New processes, and the segments they create in /dev/shm: the engine core's message
        queue and a multiprocessing semaphore."""
        self.main_start_epoch = start_epoch
        self.main_pid = self.host.spawn_pid()
        self.core_pid = 0 if self.headless else self.host.spawn_pid()
        self.worker_pid = self.host.spawn_pid() if self.role in ("head", "worker") else 0
        semaphore = "".join(self.rng.choice("abcdefghijklmnopqrstuvwxyz0123456789_") for _ in range(8))
        if not self.uses_shm:
            return
        self.shm_names = [f"psm_{self.rng.getrandbits(32):08x}", f"sem.mp-{semaphore}"]
        self.host.add_shm(self.shm_names[0], RING_BUFFER_BYTES)
        self.host.add_shm(self.shm_names[1], 32, 4096)
        for name in self.shm_names:
            self.host.shm[name].mtime = start_epoch

    def _log_start(self) -> None:
        p = self.profile
        self._systemd(f"Started {self.name} - vLLM {p.served_name}.")
        front = self._front
        if not self.headless:
            self._vllm("INFO", "api_server.py:1885", f"vLLM API server version {VLLM_VERSION}", front)
        args = {
            "model_tag": p.served_name,
            "port": self.port,
            "max_model_len": p.max_model_len,
            "gpu_memory_utilization": p.gpu_memory_utilization,
            "max_num_seqs": p.max_num_seqs,
        }
        if p.num_speculative_tokens:
            args["speculative_config"] = {"method": "mtp", "num_speculative_tokens": p.num_speculative_tokens}
        if self.role in ("head", "worker"):
            args.update(tensor_parallel_size=2, nnodes=2, node_rank=1 if self.headless else 0)
            if self.headless:
                args["headless"] = True
        self._vllm("INFO", "utils.py:328", f"non-default args: {args}", front)

    def _attempt_step(self, attempt: Attempt, now: float, dt: float) -> None:
        p = self.profile
        if not attempt.checked and now >= attempt.check_at:
            attempt.checked = True
            self._log_init()
            free = self.host.available()
            if free < math.ceil(DEVICE_TOTAL * p.gpu_memory_utilization):
                self._fail_memory_check(free)
                return
            self._vllm("INFO", "gpu_model_runner.py:3338", f"Starting to load model {p.served_name}...", self._core)
            attempt.cached_at_start = self.host.touch(p.served_name, held=False)
        if attempt.checked and now < attempt.weights_until:
            # Weights not in the page cache come from disk at the load's pace.
            missing = max(0.0, p.weights_gib * GIB - attempt.cached_at_start)
            span = max(1e-6, attempt.weights_until - attempt.check_at)
            self.host.read(p.served_name, missing * min(1.0, dt / span), held=False)
        if attempt.checked and not attempt.weights_logged and now >= attempt.weights_until:
            attempt.weights_logged = True
            self._log_weights(attempt.weights_until - attempt.check_at)
        if self.engine.state is EngineState.UP and not attempt.ready_logged:
            attempt.ready_logged = True
            self._log_ready(attempt.ready_at - attempt.weights_until)
            self.attempt = None
            if self.failover_return_s is not None and self.engine.load_factor == 0.0:
                self.clients_back_at = now + self.failover_return_s

    def _log_init(self) -> None:
        p = self.profile
        core = self._core
        self._vllm(
            "INFO",
            "core.py:95",
            f"Initializing a V1 LLM engine (v{VLLM_VERSION}) with config: model='{p.served_name}', "
            f"speculative_config={self._spec_config()}, tokenizer='{p.served_name}', "
            f"dtype=torch.bfloat16, max_seq_len={p.max_model_len}, download_dir=None, "
            f"load_format=auto, tensor_parallel_size={2 if self.role != 'single' else 1}, "
            "pipeline_parallel_size=1, quantization=None, enforce_eager=False, "
            "kv_cache_dtype=auto, device_config=cuda, seed=0, "
            "compilation_config={'level': 3, 'cudagraph_mode': FULL_AND_PIECEWISE}",
            core,
        )

    def _log_weights(self, took: float) -> None:
        p = self.profile
        self._vllm("INFO", "default_loader.py:291", f"Loading weights took {took * 0.93:.2f} seconds", self._core)
        self._vllm(
            "INFO",
            "gpu_model_runner.py:3420",
            f"Model loading took {p.weights_gib:.2f} GiB memory and {took:.2f} seconds",
            self._core,
        )

    def _spec_config(self) -> str:
        p = self.profile
        if not p.num_speculative_tokens:
            return "None"
        return f"SpeculativeConfig(method='mtp', model='{p.served_name}', num_spec_tokens={p.num_speculative_tokens})"

    def _log_ready(self, init_s: float) -> None:
        p = self.profile
        core = self._core
        kv_gib = p.gpu_memory_utilization * DEVICE_TOTAL / GIB - p.weights_gib - 2.2
        if self.headless:
            self._vllm("INFO", "gpu_worker.py:359", f"Available KV cache memory: {kv_gib:.2f} GiB", core)
            self._vllm("INFO", "gpu_model_runner.py:4230", "Graph capturing finished in 9 secs, took 0.61 GiB", core)
            return
        self._vllm("INFO", "gpu_worker.py:359", f"Available KV cache memory: {kv_gib:.2f} GiB", core)
        self._vllm("INFO", "kv_cache_utils.py:1229", f"GPU KV cache size: {p.kv_capacity_tokens:,} tokens", core)
        self._vllm(
            "INFO",
            "kv_cache_utils.py:1234",
            f"Maximum concurrency for {p.max_model_len:,} tokens per request: "
            f"{p.kv_capacity_tokens / p.max_model_len:.2f}x",
            core,
        )
        self._vllm("INFO", "gpu_model_runner.py:4230", "Graph capturing finished in 9 secs, took 0.61 GiB", core)
        self._vllm(
            "INFO",
            "core.py:250",
            f"init engine (profile, create kv cache, warmup model) took {init_s:.2f} seconds",
            core,
        )
        self._vllm(
            "INFO", "api_server.py:1934", f"Starting vLLM API server 0 on http://0.0.0.0:{self.port}", "APIServer"
        )
        self._uvicorn(f"Started server process [{self._pid_in_log(self.main_pid, 1)}]")
        self._uvicorn("Waiting for application startup.")
        self._uvicorn("Application startup complete.")

    def _fail_memory_check(self, free: float) -> None:
        """vLLM's start-up check failed: the traceback, then the process exits with status 1."""
        p = self.profile
        error = free_memory_error(free, DEVICE_TOTAL, p.gpu_memory_utilization)
        core = self._core
        where = "core.py:866"
        self._vllm("ERROR", where, "EngineCore failed to start.", core)
        for text in (
            "Traceback (most recent call last):",
            f'  File "{SITE}/v1/engine/core.py", line 857, in run_engine_core',
            "    engine_core = EngineCoreProc(*args, **kwargs)",
            f'  File "{SITE}/v1/worker/gpu_worker.py", line 389, in init_device',
            "    self.requested_memory = request_memory(init_snapshot, self.cache_config)",
            f'  File "{SITE}/v1/worker/utils.py", line 435, in request_memory',
            "    raise ValueError(",
            f"ValueError: {error}",
        ):
            self._vllm("ERROR", where, text, core)
        label = f"{core} pid={self._pid_in_log(self.core_pid or self.worker_pid, 212)}"
        self.log.add(self.clock.epoch, self._ident, f"({label}) ValueError: {error}")
        if not self.headless:
            api = f"APIServer pid={self._pid_in_log(self.main_pid, 1)}"
            self.log.add(
                self.clock.epoch,
                self._ident,
                f"({api}) RuntimeError: Engine core initialization failed. See root cause above. "
                "Failed core proc(s): {}",
            )
        self._crash(status=1, reason="exited")

    def _crash(self, *, status: int, reason: str) -> None:
        """The main process died: segments stay in /dev/shm, the manager schedules a restart."""
        self.engine.stop()
        self.attempt = None
        self.dead_since = None
        self.shm_names = []  # left behind: nobody unlinks them
        self.exit_status = status
        self.main_pid = self.core_pid = self.worker_pid = 0
        self.phase = Phase.RESTART_WAIT
        if self.manager == "systemd":
            how = "code=killed, status=9/KILL" if reason == "killed" else f"code=exited, status={status}/FAILURE"
            result = "signal" if reason == "killed" else "exit-code"
            self._systemd(f"{self.name}: Main process exited, {how}")
            self._systemd(f"{self.name}: Failed with result '{result}'.")
            self.restart_at = self.clock.now + SYSTEMD_RESTART_SEC
        else:
            # docker's restart delay doubles from 100 ms, up to a minute.
            self.restart_at = self.clock.now + min(DOCKER_RESTART_MAX_S, 0.1 * 2 ** min(self.restarts, 10))
            self.log.end_docker_followers()

    def _serving_step(self, now: float) -> None:
        engine = self.engine
        if engine.state is EngineState.DEAD and not self.engine_dead_logged:
            self.engine_dead_logged = True
            self._vllm("ERROR", "core.py:972", "EngineCore encountered a fatal error.", self._core)
            if not self.headless:
                self._vllm("ERROR", "async_llm.py:480", "AsyncLLM output_handler failed.", "APIServer")
                api = f"APIServer pid={self._pid_in_log(self.main_pid, 1)}"
                self.log.add(
                    self.clock.epoch,
                    self._ident,
                    f"({api}) vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. "
                    "See stack trace (above) for the root cause.",
                )
        if engine.state is EngineState.DEAD:
            if self.dead_since is None:
                self.dead_since = now
            elif now - self.dead_since >= API_EXIT_AFTER_DEAD_S:
                self._crash(status=1, reason="exited")  # the API server follows its engine core
                return
        if self.clients_back_at is not None and now >= self.clients_back_at:
            self.clients_back_at = None
            engine.load_factor = 1.0
        if engine.state is not EngineState.UP or self.headless:
            return
        for _ in range(self.seen_request_id, engine.next_id):
            client = f"192.168.1.{self.rng.randint(20, 60)}:{self.rng.randint(32768, 60999)}"
            self._uvicorn(f'{client} - "POST /v1/chat/completions HTTP/1.1" 200 OK')
        if now - self.last_log_at >= LOG_STATS_INTERVAL_S:
            elapsed = now - self.last_log_at if self.last_log_at else LOG_STATS_INTERVAL_S
            self.last_log_at = now
            self._log_stats(min(elapsed, 2 * LOG_STATS_INTERVAL_S))

    def _log_stats(self, elapsed: float) -> None:
        engine = self.engine
        capacity = self.profile.kv_capacity_tokens
        usage = min(1.0, engine.kv_used_tokens() / capacity) if capacity else 0.0
        line, prompt, generation = engine_stats_line(
            self.stats, elapsed, len(engine.running), len(engine.waiting), usage
        )
        idle = not any((prompt, generation, *self.last_throughput))
        self.last_throughput = (prompt, generation)
        if not idle:  # vLLM logs an idle engine at debug level only
            self._vllm("INFO", "loggers.py:257", line, "APIServer")
            spec = spec_decode_line(self.stats, elapsed, self.profile.num_speculative_tokens)
            if spec is not None:
                self._vllm("INFO", "metrics.py:100", spec, "APIServer")
            mfu = mfu_line(self.stats, elapsed)
            if mfu is not None:
                self._vllm("INFO", "perf.py:1725", mfu, "APIServer")
        self.stats.reset()
