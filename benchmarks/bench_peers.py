"""The dashboard's CPU beside the other vLLM terminal monitors, watching the same endpoints.

    python benchmarks/bench_peers.py [--nodes 8] [--seconds 30] [--warmup 10] [--venv DIR] [--write docs/performance.md]

``vllm-htop`` and ``vllmpytop`` come from PyPI into their own venv (``--venv``, default
/tmp/sparktui-peers-venv, made and filled with the pinned versions when missing). A fresh
``sparktui demo --serve-only --nodes N`` serves the endpoints. The monitors are started one after
another, each in its own tmux server (a session of 160x48 per process), and, after a warm-up, all
measured together over the same seconds:

- sparktui's dashboard on the fleet screen with a config of the vLLM endpoints alone (the peers' work);
- sparktui's dashboard on the fleet screen, and a second one on the first node's screen (Enter sent);
- ``vllm-htop`` with every vLLM URL (it takes several: one table row each);
- ``vllmpytop``, one process per vLLM URL (it watches one), all measured together.

CPU is user + system of every process of the tool (its process tree) over the window; the tmux
server's own CPU (drawing what the tool writes) is reported apart. Targets: on the vLLM endpoints alone,
sparktui at or below half the lightest of them per endpoint; doing everything, at or below the lightest.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from _common import SPARKTUI, cpu_s, demo_fleet, machine_line, require_tool, stop_on_sigterm, tree_cpu_s, write_section

from sparktui.config import load_config

SECTION = "bench_peers"
HEADING = """## The dashboard beside vllm-htop and vllmpytop (issue: performance)

Targets (issue 23): on equal work, sparktui watching the vLLM endpoints alone (no GPU exporter, services
or SSH) costs at most half what the lightest of `vllm-htop` and `vllmpytop` (PyPI) costs per vLLM
endpoint; doing everything it does (in tmux, on the fleet screen and on a node screen), at most what the
lightest costs; on the same 8 demo endpoints, measured together.

Command: `python benchmarks/bench_peers.py --seconds 30 --write docs/performance.md`"""
PEERS = {"vllm-htop": "0.5.0", "vllmpytop": "0.3.0"}  # the versions measured; pip installs these
PEER_DEPENDENCIES = ("prometheus-client", "nvidia-ml-py")  # vllmpytop's, reported as pip resolved them
DEFAULT_VENV = Path("/tmp/sparktui-peers-venv")
EQUAL_WORK_TARGET = 0.5  # issue 23: on the peers' work alone (the vLLM endpoints), half the lightest's CPU
WIDTH, HEIGHT = 160, 48
READY_TIMEOUT_S = 60.0
PIP_TIMEOUT_S = 600.0


@dataclass(frozen=True, slots=True)
class Measured:
    """One monitor watching the endpoints: its CPU and the tmux server's over the window."""

    name: str
    endpoints: int
    seconds: float = 0.0
    cpu_s: float = 0.0
    tmux_cpu_s: float = 0.0
    processes: int = 0
    shows: str = ""
    problem: str | None = None  # why it could not run here

    @property
    def core_pct(self) -> float:
        return self.cpu_s / self.seconds * 100 if self.seconds else float("nan")

    @property
    def per_endpoint_pct(self) -> float:
        return self.core_pct / self.endpoints

    @property
    def tmux_pct(self) -> float:
        return self.tmux_cpu_s / self.seconds * 100 if self.seconds else float("nan")


# --- tmux ---------------------------------------------------------------------------------------------


@dataclass
class Tmux:
    """A tmux server of our own (``-L``), one 160x48 session per process; ``kill()`` ends it all."""

    tmux: str
    socket: str
    sessions: list[str] = field(default_factory=list)
    pids: list[int] = field(default_factory=list)
    socket_path: Path | None = None  # tmux leaves the file behind when its server is killed

    def run(self, *args: str) -> str:
        done = subprocess.run([self.tmux, "-L", self.socket, *args], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"tmux {args[0]}: {done.stderr.strip()}")
        return done.stdout

    def start(self, session: str, argv: Sequence[str]) -> None:
        """Run ``argv`` in a new session; when it exits the pane says so and stays, for its last words."""
        script = '"$@"; echo "[exited with status $?]"; exec sleep 86400'
        self.run(
            "new-session", "-d", "-s", session, "-x", str(WIDTH), "-y", str(HEIGHT), "sh", "-c", script, "sh", *argv
        )
        self.sessions.append(session)
        if self.socket_path is None:
            self.socket_path = Path(self.run("display", "-p", "#{socket_path}").strip())
        self.pids.append(int(self.run("display", "-p", "-t", session, "#{pane_pid}").strip()))

    def server_pid(self) -> int:
        return int(self.run("display", "-p", "#{pid}").strip())

    def screen(self, session: str) -> str:
        return self.run("capture-pane", "-p", "-t", session)

    def keys(self, session: str, *keys: str) -> None:
        self.run("send-keys", "-t", session, *keys)

    def wait_for(self, session: str, pattern: str, timeout_s: float = READY_TIMEOUT_S) -> str:
        """The screen once ``pattern`` (a regex) is on it; RuntimeError with the screen if it never comes."""
        deadline = time.monotonic() + timeout_s
        while True:
            screen = self.screen(session)
            if re.search(pattern, screen):
                return screen
            if "[exited with status" in screen or time.monotonic() > deadline:
                raise RuntimeError(screen.strip())
            time.sleep(0.3)

    def tool_cpu_s(self) -> float:
        """CPU of every process in every session (the ``sh`` that waits for each tool included)."""
        return sum(tree_cpu_s(pid) for pid in self.pids)

    def process_count(self) -> int:
        count = 0
        for pid in self.pids:
            with contextlib.suppress(psutil.NoSuchProcess):
                count += len(psutil.Process(pid).children(recursive=True))
        return count

    def kill(self) -> None:
        """Kill the server (its panes get SIGHUP), then anything of ours still alive."""
        doomed: list[psutil.Process] = []
        for pid in self.pids:
            with contextlib.suppress(psutil.NoSuchProcess):
                root = psutil.Process(pid)
                doomed += [root, *root.children(recursive=True)]
        subprocess.run([self.tmux, "-L", self.socket, "kill-server"], capture_output=True, check=False)
        _, alive = psutil.wait_procs(doomed, timeout=5)
        for process in alive:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
        if self.socket_path is not None:
            self.socket_path.unlink(missing_ok=True)


@contextlib.contextmanager
def tmux_server(tmux: str, name: str) -> Iterator[Tmux]:
    server = Tmux(tmux, f"sparktui-bench-peers-{os.getpid()}-{name}")
    try:
        yield server
    finally:
        server.kill()


# --- the peers' venv ----------------------------------------------------------------------------------


def _installed(venv: Path, names: Sequence[str]) -> dict[str, str]:
    probe = "import importlib.metadata as m, json, sys\n"
    probe += "found = {}\nfor name in sys.argv[1:]:\n"
    probe += "    try: found[name] = m.version(name)\n    except m.PackageNotFoundError: pass\n"
    probe += "print(json.dumps(found))"
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", probe, *names], capture_output=True, text=True, check=False
    )
    found: dict[str, str] = json.loads(done.stdout) if done.returncode == 0 else {}
    return found


def ensure_peers(venv: Path) -> tuple[dict[str, str], str | None]:
    """The peers' versions in ``venv`` (made and filled with the pinned versions when missing), or why
    they could not be installed."""
    if not (venv / "bin" / "python").exists():
        print(f"bench_peers: making {venv} ...", file=sys.stderr, flush=True)
        done = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            return {}, f"python -m venv {venv} failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}"
    if _installed(venv, list(PEERS)) != PEERS:
        print(f"bench_peers: pip install into {venv} ...", file=sys.stderr, flush=True)
        pins = [f"{name}=={version}" for name, version in PEERS.items()]
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *pins]
        try:
            done = subprocess.run(pip, capture_output=True, text=True, check=False, timeout=PIP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return {}, f"pip install {' '.join(pins)} took over {PIP_TIMEOUT_S:g} s"
        if done.returncode != 0:
            errors = [line for line in done.stderr.splitlines() if "ERROR" in line] or done.stderr.splitlines() or ["?"]
            return {}, f"pip install {' '.join(pins)} failed: {errors[-1].strip()}"
    return _installed(venv, [*PEERS, *PEER_DEPENDENCIES]), None


# --- the monitors -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Subject:
    """A monitor running in its own tmux server, ready to be measured."""

    name: str
    endpoints: int
    server: Tmux
    shows: str


SHOWS_FLEET = (
    "every node on one screen: state, model, tok/s, KV, TTFT/TPOT, spec-decode acceptance, GPU (exporter), "
    "host memory and page cache (SSH), side services, findings; fed by each node's vLLM /health and /metrics, "
    "GPU exporter, services, SSH host sampler and log stream"
)
SHOWS_NODE = (
    "one node in depth: throughput and latency history, spec decoding by position, KV and memory ledger, "
    "processes, unit, findings; the whole fleet still polled"
)
SHOWS_HTOP = (
    "one table row per endpoint (run/wait, req/s, KV %, prefix hits, tok/s, TTFT/TPOT p95, a trend), a cluster "
    "line, load-balance and imbalance checks, recent events; reads /metrics only (no health, GPU or host), a new "
    "connection per URL per poll"
)


SHOWS_EQUAL = (
    "the fleet screen fed by each vLLM's /health and /metrics only (no GPU exporter, services or SSH: the "
    "peers' work): state, model, tok/s, KV, TTFT/TPOT, spec-decode acceptance, the diagnosis of what it sees"
)


def vllm_only_config(config: Path, out: Path) -> Path:
    """The demo's config with each node's vLLM endpoints only: SSH off, no GPU exporter, no services."""
    fleet = load_config(config)
    lines = [f"poll_interval_s = {fleet.poll_interval_s:g}", f"timeout_s = {fleet.timeout_s:g}", ""]
    for node in fleet.nodes:
        lines += [
            "[[nodes]]",
            f'name = "{node.name}"',
            f'host = "{node.host}"',
            "",
            "[nodes.ssh]",
            "enabled = false",
            "",
        ]
        for vllm in node.vllm:
            if vllm.base_url:
                lines += ["[[nodes.vllm]]", f'name = "{vllm.name}"', f'url = "{vllm.base_url}"', ""]
    out.write_text("\n".join(lines))
    return out


def start_sparktui(
    server: Tmux, config: Path, nodes: int, *, node_screen: bool, equal_work: bool = False
) -> Subject | Measured:
    """The dashboard on the fleet screen, or (Enter sent) on the first node's screen; ``equal_work``:
    on the fleet screen with a config of the vLLM endpoints alone."""
    name = (
        "sparktui, fleet screen, vLLM endpoints only"
        if equal_work
        else f"sparktui, {'node' if node_screen else 'fleet'} screen"
    )
    server.start("ui", [str(SPARKTUI), "--config", str(config)])
    try:
        server.wait_for("ui", rf"\b{nodes} nodes\b")
    except RuntimeError as exc:
        return Measured(name, nodes, problem=f"the fleet screen did not show {nodes} nodes: {_one_line(str(exc))}")
    if not node_screen:
        return Subject(name, nodes, server, SHOWS_EQUAL if equal_work else SHOWS_FLEET)
    server.keys("ui", "Enter")
    try:
        server.wait_for("ui", "Throughput", timeout_s=15)
    except RuntimeError as exc:
        return Measured(name, nodes, problem=f"Enter did not open a node screen: {_one_line(str(exc))}")
    return Subject(name, nodes, server, SHOWS_NODE)


def start_vllm_htop(server: Tmux, venv: Path, urls: Sequence[str]) -> Subject | Measured:
    """vllm-htop with every URL (table view: one row each)."""
    name = f"vllm-htop {PEERS['vllm-htop']} (one process, {len(urls)} URLs)"
    server.start("htop", [str(venv / "bin" / "vllm-htop"), "--url", *urls, "--interval", "1"])
    try:
        server.wait_for("htop", rf"{len(urls)}/{len(urls)} up")
    except RuntimeError as exc:
        return Measured(name, len(urls), problem=f"it did not show every endpoint up: {_one_line(str(exc))}")
    return Subject(name, len(urls), server, SHOWS_HTOP)


def start_vllmpytop(server: Tmux, venv: Path, urls: Sequence[str]) -> Subject | Measured:
    """One vllmpytop per URL (it watches one), GPU panel left on as a user would: there is no NVML here."""
    name = f"vllmpytop {PEERS['vllmpytop']} ({len(urls)} processes, one per URL)"
    for index, url in enumerate(urls):
        server.start(f"pytop{index}", [str(venv / "bin" / "vllmpytop"), "--url", url, "--interval", "1"])
    gpu_line = ""
    for index in range(len(urls)):
        try:
            screen = server.wait_for(f"pytop{index}", r"\bup \d+")
        except RuntimeError as exc:
            return Measured(name, len(urls), problem=f"it did not show its endpoint up: {_one_line(str(exc))}")
        gpu_line = gpu_line or next((line for line in screen.splitlines() if "GPU unavailable" in line), "")
    gpu = gpu_line.strip("│ ").strip() or "the GPU panel drawn"
    shows = (
        f"one endpoint per process: a GPU panel from local NVML (here, with no GPU: “{gpu}”, and it runs on), "
        "throughput and latency charts, a requests panel that needs --log-file or --docker; reads /metrics only, "
        "a new connection per poll"
    )
    return Subject(name, len(urls), server, shows)


def measure_together(subjects: Sequence[Subject], seconds: float) -> list[Measured]:
    """Every subject's CPU (its processes, and its tmux server's apart) over the same ``seconds``."""
    tmux_pids = [s.server.server_pid() for s in subjects]
    started = time.monotonic()
    before = [(s.server.tool_cpu_s(), cpu_s(pid)) for s, pid in zip(subjects, tmux_pids, strict=True)]
    time.sleep(seconds)
    after = [(s.server.tool_cpu_s(), cpu_s(pid)) for s, pid in zip(subjects, tmux_pids, strict=True)]
    wall = time.monotonic() - started
    return [
        Measured(s.name, s.endpoints, wall, a[0] - b[0], a[1] - b[1], s.server.process_count(), s.shows)
        for s, b, a in zip(subjects, before, after, strict=True)
    ]


def _one_line(text: str, limit: int = 300) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit] + "…"


# --- all of it, and the report ------------------------------------------------------------------------


def measure(nodes: int, seconds: float, warmup_s: float, venv: Path) -> tuple[list[Measured], dict[str, str]]:
    """Start every monitor against one demo fleet, each in its own tmux server, then measure them all
    over the same seconds."""
    tmux = require_tool("tmux", "apt-get install tmux")
    versions, problem = ensure_peers(venv)
    with demo_fleet(nodes) as demo, contextlib.ExitStack() as stack:
        fleet = load_config(demo.config)
        urls = [v.base_url for node in fleet.nodes for v in node.vllm if v.base_url]

        def server(name: str) -> Tmux:
            return stack.enter_context(tmux_server(tmux, name))

        print("bench_peers: starting sparktui (fleet screen, node screen) ...", file=sys.stderr, flush=True)
        only = vllm_only_config(demo.config, demo.config.with_name("vllm-only.toml"))
        started = [
            start_sparktui(server("sparktui-equal"), only, nodes, node_screen=False, equal_work=True),
            start_sparktui(server("sparktui-fleet"), demo.config, nodes, node_screen=False),
            start_sparktui(server("sparktui-node"), demo.config, nodes, node_screen=True),
        ]
        if problem is None:
            print("bench_peers: starting vllm-htop and vllmpytop ...", file=sys.stderr, flush=True)
            started += [
                start_vllm_htop(server("vllm-htop"), venv, urls),
                start_vllmpytop(server("vllmpytop"), venv, urls),
            ]
        else:
            started += [Measured(f"{name} {version}", len(urls), problem=problem) for name, version in PEERS.items()]
        subjects = [s for s in started if isinstance(s, Subject)]
        print(f"bench_peers: warm-up {warmup_s:g} s, then {seconds:g} s measured ...", file=sys.stderr, flush=True)
        time.sleep(warmup_s)
        measured = iter(measure_together(subjects, seconds))
        return [next(measured) if isinstance(s, Subject) else s for s in started], versions


def _verdict(results: Sequence[Measured]) -> str:
    ours = [r for r in results if r.name.startswith("sparktui") and r.problem is None]
    peers = [r for r in results if not r.name.startswith("sparktui") and r.problem is None]
    if not ours or not peers:
        return "No verdict: " + ("sparktui" if not ours else "no peer") + " could be measured."
    lightest = min(peers, key=lambda r: r.per_endpoint_pct)
    lines = [f"The lightest peer per endpoint: {lightest.name}, {lightest.per_endpoint_pct:.2f} % of a core."]
    for r in ours:
        ratio = r.per_endpoint_pct / lightest.per_endpoint_pct
        target = EQUAL_WORK_TARGET if r.shows == SHOWS_EQUAL else 1.0
        verdict = "met" if ratio <= target else "not met"
        lines.append(
            f"- {r.name}: {r.per_endpoint_pct:.2f} % per endpoint = {ratio:.2f}x, target {target:g}x ({verdict})."
        )
    return "\n".join(lines)


def report(results: Sequence[Measured], versions: dict[str, str], seconds: float, warmup_s: float) -> str:
    rows = [
        "| monitor | endpoints | processes | CPU, % of a core | **per endpoint** | tmux server | what it shows |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        if r.problem is not None:
            rows.append(f"| {r.name} | {r.endpoints} | – | could not run | – | – | {r.problem} |")
            continue
        rows.append(
            f"| {r.name} | {r.endpoints} | {r.processes} | {r.core_pct:.1f} | **{r.per_endpoint_pct:.2f}** | "
            f"{r.tmux_pct:.1f} | {r.shows} |"
        )
    pinned = ", ".join(f"{name} {versions.get(name, f'{version} (not installed)')}" for name, version in PEERS.items())
    dependencies = ", ".join(f"{name} {versions[name]}" for name in PEER_DEPENDENCIES if name in versions)
    if dependencies:
        pinned += f" (with {dependencies})"
    return "\n".join(
        [
            *rows,
            "",
            "Targets: watching the vLLM endpoints alone (the peers' work), sparktui at or below half the "
            "lightest peer's CPU per endpoint; doing everything it does, at or below the lightest peer's:",
            _verdict(results),
            "",
            f"Every monitor measured together over the same {seconds:g} s, after a {warmup_s:g} s warm-up, "
            f"against the same {results[0].endpoints if results else 0} demo vLLM endpoints, at a 1 s interval, "
            "in tmux "
            f"({WIDTH}x{HEIGHT}). sparktui also watches each node's GPU exporter, side services and host over SSH "
            "(sampler and log stream), which the peers do not: its per-endpoint figure carries all of that. "
            "processes: the tool's processes (each under a waiting `sh`). tmux server: the terminal's own CPU "
            f"for drawing the tool's output, not in the tool's figure. Peers from PyPI: {pinned}.",
            "",
            f"Measured on {machine_line()}.",
        ]
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--nodes", type=int, default=8, help="demo nodes, one vLLM endpoint each (default 8)")
    ap.add_argument("--seconds", type=float, default=30.0, help="the measured window of each monitor")
    ap.add_argument("--warmup", type=float, default=10.0, help="seconds each monitor runs before it is measured")
    ap.add_argument("--venv", type=Path, default=DEFAULT_VENV, help=f"the peers' venv (default {DEFAULT_VENV})")
    ap.add_argument("--write", type=Path, help="replace this benchmark's section of PATH (docs/performance.md)")
    args = ap.parse_args()
    if args.nodes < 1 or args.seconds <= 0 or args.warmup < 0:
        raise SystemExit("bench_peers: --nodes must be at least 1, --seconds above 0 and --warmup not negative")
    stop_on_sigterm()
    try:
        results, versions = measure(args.nodes, args.seconds, args.warmup, args.venv)
    except KeyboardInterrupt:
        print("bench_peers: interrupted; everything it started is stopped", file=sys.stderr)
        return 130
    body = report(results, versions, args.seconds, args.warmup)
    print(body)
    if args.write:
        write_section(args.write, SECTION, body, heading=HEADING)
    return 0


if __name__ == "__main__":
    sys.exit(main())
