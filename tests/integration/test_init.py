"""``sparktui init`` end to end: real HTTP servers on 127.0.0.1 and the real sshd with stub systemctl/docker
(the pure parts, command lines and rendering, are tested in test_discovery.py)."""

from __future__ import annotations

import re
import socket
import stat
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlsplit

import pytest

from sparktui.cli import main
from sparktui.config import parse_config
from sparktui.discovery.names import config_name
from sparktui.model.specs import FleetSpec, ServerSpec
from tests.support.fixture_fleet import (
    DATA,
    EXPORTERS,
    Endpoint,
    _Handler,
    _QuietServer,
    free_port,
    node_exporter_page,
    scenario_scrapes,
)
from tests.support.sshd import Sshd, container_inspect, published_container

VLLM_PATHS = ("/version", "/v1/models", "/metrics", "/health")


# --- fixture servers: each answers only the paths the real server has ---------------------------------


class _OnlyHandler(_Handler):
    """The fixture handler, limited to some paths (it serves /version on every endpoint otherwise)."""

    paths: ClassVar[frozenset[str]] = frozenset()
    pages: ClassVar[Mapping[str, bytes]] = {}

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        if path in self.pages:
            self._send(200, self.pages[path])
        elif path in self.paths:
            super().do_GET()
        else:
            self._send(404, b'{"detail":"Not Found"}')


class PathServer:
    def __init__(self, endpoint: Endpoint, paths: Sequence[str] = (), pages: Mapping[str, bytes] | None = None) -> None:
        handler = type(
            f"Only_{endpoint.name}",
            (_OnlyHandler,),
            {"endpoint": endpoint, "paths": frozenset(paths), "pages": dict(pages or {})},
        )
        self.httpd = _QuietServer(("127.0.0.1", 0), handler)
        self.port: int = self.httpd.server_address[1]
        self._thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@dataclass
class Fleet:
    qwen: PathServer
    gemma: PathServer
    gpu: PathServer
    node: PathServer
    asr: PathServer
    ollama: PathServer
    tts_port: int  # nothing listens there

    def probe_args(self) -> list[str]:
        return [
            "--vllm-ports",
            f"{self.qwen.port},{self.gemma.port}",
            "--service-ports",
            f"asr={self.asr.port},tts={self.tts_port},ollama={self.ollama.port}",
            "--exporter-ports",
            str(self.gpu.port),
            "--ports",
            str(self.node.port),  # found by what it answers, not by its role
        ]


def vllm_server(name: str, model: str) -> PathServer:
    return PathServer(Endpoint(name=name, model_id=model, scrapes=scenario_scrapes("mtp2-steady")), VLLM_PATHS)


@pytest.fixture
def fleet() -> Iterator[Fleet]:
    host_page = node_exporter_page(
        (DATA / "proc" / "meminfo-gb10.txt").read_text(), (DATA / "proc" / "pressure-memory.txt").read_text()
    )
    servers = Fleet(
        qwen=vllm_server("qwen36", "RedHatAI/Qwen3.6-35B-A3B-NVFP4"),
        gemma=vllm_server("gemma4", "google/gemma-4-26B-A4B-it"),
        gpu=PathServer(
            Endpoint(name="gpu", static_metrics=(EXPORTERS / "dgx_spark_prometheus.prom").read_text()),
            ["/metrics"],
        ),
        node=PathServer(Endpoint(name="node", static_metrics=host_page), ["/metrics"]),
        asr=PathServer(Endpoint(name="asr"), ["/health"]),
        ollama=PathServer(Endpoint(name="ollama"), pages={"/api/tags": b'{"models":[{"name":"qwen3:8b"}]}'}),
        tts_port=free_port(),
    )
    yield servers
    for server in (servers.qwen, servers.gemma, servers.gpu, servers.node, servers.asr, servers.ollama):
        server.stop()


@pytest.fixture(autouse=True)
def no_agent(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the test's key is offered, whatever agent the machine running the tests has."""
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)


def ssh_args(server: Sshd, known_hosts: Path | None = None) -> list[str]:
    return [
        "--user",
        server.user,
        "--port",
        str(server.port),
        "--key",
        str(server.client_key),
        "--known-hosts",
        str(known_hosts or server.known_hosts),
    ]


def unused_ports() -> list[str]:
    """Probe options that point every role at a port nothing listens on (fast: connection refused)."""
    return [
        "--vllm-ports",
        str(free_port()),
        "--service-ports",
        f"asr={free_port()}",
        "--exporter-ports",
        str(free_port()),
    ]


def exec_start(argv: str, pid: int = 4127) -> str:
    """``ExecStart`` as ``systemctl show`` prints it: the argv joined by spaces, unquoted."""
    path = argv.split(maxsplit=1)[0]
    return (
        f"{{ path={path} ; argv[]={argv} ; ignore_errors=no ; start_time=[Sat 2026-05-30 07:01:40 UTC] ; "
        f"stop_time=[n/a] ; pid={pid} ; code=(null) ; status=0/0 }}"
    )


def unit(description: str, argv: str, active: str = "active", sub: str = "running") -> dict[str, str]:
    return {
        "LoadState": "loaded",
        "ActiveState": active,
        "SubState": sub,
        "Description": description,
        "ExecStart": exec_start(argv),
        "FragmentPath": "/etc/systemd/system/x.service",
    }


def vllm_container(name: str, image: str, serve_args: Sequence[str], host_port: int | None) -> dict[str, Any]:
    """``docker inspect`` of a vllm/vllm-openai container: entrypoint ``vllm serve``, Cmd the arguments."""
    argv = ["vllm", "serve", *serve_args]
    return published_container(name, image, argv, container_port=8000, host_port=host_port, entrypoint=argv[:2])


def qwen_unit_argv(host_port: int, name: str = "vllm-qwen36") -> str:
    """context/000's Qwen3.6 ExecStart, published on ``host_port``."""
    return (
        f"/usr/bin/docker run --rm --name {name} --gpus all --ipc=host --ulimit memlock=-1 "
        f"-p {host_port}:8000 -e VLLM_USE_V1=1 -v /home/milo/.cache/huggingface:/root/.cache/huggingface "
        "nvcr.io/nvidia/vllm:26.04-py3 vllm serve RedHatAI/Qwen3.6-35B-A3B-NVFP4 "
        "--tokenizer Qwen/Qwen3.6-35B-A3B --kv-cache-dtype fp8 --max-model-len 131072 "
        "--gpu-memory-utilization 0.55 "
        '--speculative-config {"method":"mtp","num_speculative_tokens":2} '
        "--enable-prefix-caching --host 0.0.0.0 --port 8000"
    )


GEMMA_ARGS = [
    "google/gemma-4-26B-A4B-it",
    "--quantization",
    "fp8",
    "--max-model-len",
    "65536",
    "--gpu-memory-utilization",
    "0.80",
    "--speculative-config",
    '{"method":"mtp","model":"google/gemma-4-26B-A4B-it-assistant","num_speculative_tokens":4}',
    "--host",
    "0.0.0.0",
    "--port",
    "8000",
]


def by_url(fleet: FleetSpec) -> dict[str | None, ServerSpec]:
    return {v.url: v for v in fleet.nodes[0].vllm}


def unwrapped(text: str) -> str:
    """The config with wrapped comment paragraphs joined, for looking up phrases."""
    return re.sub(r"\n#\s+", " ", text)


def stderr_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line]


# --- against real servers -----------------------------------------------------------------------------


def test_written_config_validates_and_has_every_service_with_urls_units_containers_and_gpu_utilization(
    fleet: Fleet, sshd_factory: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server: Sshd = sshd_factory("init")
    server.set_unit("vllm-qwen36.service", unit("vLLM Qwen3.6-35B-A3B NVFP4", qwen_unit_argv(fleet.qwen.port)))
    server.set_unit("ssh.service", unit("OpenBSD Secure Shell server", "/usr/sbin/sshd -D"))
    server.set_container(
        "vllm-gemma4",
        vllm_container("vllm-gemma4", "vllm/vllm-openai:gemma4-0505-arm64-cu130", GEMMA_ARGS, fleet.gemma.port),
    )
    webui = container_inspect("open-webui")
    webui.update(Path="bash", Args=["start.sh"], Config={"Image": "ghcr.io/open-webui/open-webui:main"})
    server.set_container("open-webui", webui)
    out = tmp_path / "fleet.toml"

    code = main(["init", "127.0.0.1", "--output", str(out), *ssh_args(server), *fleet.probe_args()])

    captured = capsys.readouterr()
    assert code == 0, captured.err
    text = out.read_text()
    spec = parse_config(text, source=str(out), env={})
    (node,) = spec.nodes
    assert node.name == config_name(socket.gethostname().split(".")[0])
    assert node.host == "127.0.0.1"
    assert (node.ssh.user, node.ssh.port) == (server.user, server.port)
    assert (node.ssh.key_file, node.ssh.known_hosts) == (server.client_key, server.known_hosts)
    vllms = {url: v for url, v in by_url(spec).items() if v.engine == "vllm"}
    assert set(vllms) == {f"http://127.0.0.1:{fleet.qwen.port}", f"http://127.0.0.1:{fleet.gemma.port}"}
    qwen, gemma = vllms[f"http://127.0.0.1:{fleet.qwen.port}"], vllms[f"http://127.0.0.1:{fleet.gemma.port}"]
    assert (qwen.unit, qwen.container, qwen.gpu_memory_utilization) == ("vllm-qwen36.service", None, 0.55)
    assert (gemma.unit, gemma.container, gemma.gpu_memory_utilization) == (None, "vllm-gemma4", 0.80)
    assert node.gpu_exporter is not None and node.node_exporter is not None
    assert node.gpu_exporter.url == f"http://127.0.0.1:{fleet.gpu.port}/metrics"
    assert node.node_exporter.url == f"http://127.0.0.1:{fleet.node.port}/metrics"
    assert {(s.name, s.kind, s.url) for s in node.services} == {
        ("asr", "asr", f"http://127.0.0.1:{fleet.asr.port}/health"),
    }
    # an Ollama given with --service-ports ollama=PORT is probed there and written as an engine
    assert [(v.name, v.engine, v.port) for v in node.vllm if v.engine == "ollama"] == [
        ("ollama", "ollama", fleet.ollama.port)
    ]
    # how each value was found, and what was probed and not found
    flat = unwrapped(text)
    assert f"on this port by `-p {fleet.qwen.port}:8000` (`--port 8000` in the container)" in flat
    assert "--gpu-memory-utilization in the ExecStart of vllm-qwen36.service" in flat
    assert "dgx-spark-prometheus" in text and "node_exporter" in text
    assert f"#   TTS on port {fleet.tts_port}: connection refused" in text
    assert "open-webui" not in text and "ssh.service" not in text
    assert "mtp, 2 speculative tokens" in text
    assert "systemctl list-units --type=service --all --no-legend --plain --no-pager" in server.calls()
    assert f"wrote {out}" in captured.out


def test_what_the_host_listens_on_is_probed_too_and_only_what_answers_is_written(
    fleet: Fleet, sshd_factory: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The usual ports find nothing here (each list is one closed port); ``ss`` shows the exporters, the
    ASR service and a vLLM on ports of their own, an engine core's socket and sshd, and a port where
    nothing init knows answers."""
    server: Sshd = sshd_factory("init-listeners")
    silent = PathServer(Endpoint(name="silent"), [])  # answers 404 to everything
    closed = str(fleet.tts_port)
    server.set_listeners(
        [
            (fleet.qwen.port, None),  # a container's port: docker-proxy, root's, has no name
            (fleet.gpu.port, "python3"),
            (fleet.node.port, "node_exporter"),
            (fleet.asr.port, "python3"),
            (silent.port, "python3"),
            (fleet.gemma.port, "VLLM::EngineCor"),  # would answer, but an engine's socket is never probed
            (server.port, "sshd"),
        ]
    )
    out = tmp_path / "fleet.toml"
    try:
        usual = ["--vllm-ports", closed, "--service-ports", f"tts={closed}", "--exporter-ports", closed]
        code = main(["init", "127.0.0.1", "--output", str(out), *ssh_args(server), *usual])
    finally:
        silent.stop()

    captured = capsys.readouterr()
    assert code == 0, captured.err
    text = out.read_text()
    (node,) = parse_config(text, source=str(out), env={}).nodes
    assert set(by_url(parse_config(text, env={}))) == {f"http://127.0.0.1:{fleet.qwen.port}"}
    assert node.gpu_exporter is not None and node.gpu_exporter.url == f"http://127.0.0.1:{fleet.gpu.port}/metrics"
    assert node.node_exporter is not None and node.node_exporter.url == f"http://127.0.0.1:{fleet.node.port}/metrics"
    assert [(s.kind, s.url) for s in node.services] == [("http", f"http://127.0.0.1:{fleet.asr.port}/health")]
    assert str(silent.port) not in text and str(fleet.gemma.port) not in text
    assert "ss -Hltnp" in server.calls()
    assert "7 listening ports (ss -ltnp)" in unwrapped(text)


def test_a_unit_that_runs_a_container_is_written_once_as_the_unit(
    fleet: Fleet, sshd_factory: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server: Sshd = sshd_factory("init-merge")
    server.set_unit("vllm-qwen36.service", unit("vLLM Qwen3.6", qwen_unit_argv(fleet.qwen.port)))
    serve = ["RedHatAI/Qwen3.6-35B-A3B-NVFP4", "--gpu-memory-utilization", "0.55", "--port", "8000"]
    server.set_container(
        "vllm-qwen36", vllm_container("vllm-qwen36", "nvcr.io/nvidia/vllm:26.04-py3", serve, fleet.qwen.port)
    )

    code = main(
        [
            *("init", "127.0.0.1", "--print", *ssh_args(server), "--vllm-ports", str(fleet.qwen.port)),
            *("--service-ports", f"asr={fleet.tts_port}", "--exporter-ports", str(fleet.tts_port)),
        ]
    )

    captured = capsys.readouterr()
    assert code == 0, captured.err
    (vllm,) = parse_config(captured.out, env={}).nodes[0].vllm
    assert (vllm.unit, vllm.container, vllm.gpu_memory_utilization) == ("vllm-qwen36.service", None, 0.55)
    assert "container vllm-qwen36 is written as the unit" in unwrapped(captured.out)


def test_a_live_vllm_unit_whose_port_does_not_answer_is_still_written_with_a_comment(
    sshd_factory: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    server: Sshd = sshd_factory("init-down")
    port = free_port()
    argv = f"/home/spark/vllm/.venv/bin/vllm serve Qwen/Qwen3-Next-80B-A3B-Instruct-FP8 --port {port} "
    argv += "--gpu-memory-utilization 0.9"
    server.set_unit("vllm.service", unit("vLLM", argv, active="activating", sub="auto-restart"))

    code = main(["init", "127.0.0.1", "--print", *ssh_args(server), *unused_ports()])

    captured = capsys.readouterr()
    assert code == 0, captured.err
    (vllm,) = parse_config(captured.out, env={}).nodes[0].vllm
    assert (vllm.url, vllm.unit, vllm.gpu_memory_utilization) == (
        f"http://127.0.0.1:{port}",
        "vllm.service",
        0.9,
    )
    assert f"did not answer during init; port from `--port {port}`" in captured.out
    assert "activating (auto-restart)" in captured.out


def test_an_existing_file_is_not_overwritten_without_force_and_is_with_it(
    fleet: Fleet, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "config.toml"
    out.write_text("# mine\n")

    refused = main(["init", "127.0.0.1", "--no-ssh", "--output", str(out), *unused_ports()])

    err = capsys.readouterr().err
    assert refused == 2
    assert out.read_text() == "# mine\n"
    (line,) = stderr_lines(err)
    assert str(out) in line and "--force" in line

    forced = main(["init", "127.0.0.1", "--no-ssh", "--output", str(out), "--force", *fleet.probe_args()])

    assert forced == 0, capsys.readouterr().err
    assert out.read_text().startswith("# sparktui fleet config, written by `sparktui init 127.0.0.1`")
    assert parse_config(out.read_text(), env={}).nodes[0].host == "127.0.0.1"
    assert not list(tmp_path.glob(".*.tmp"))


def test_the_written_config_is_readable_by_its_owner_only(
    fleet: Fleet, tmp_path: Path, capsys: pytest.CaptureFixture[str], umask_022: None
) -> None:
    new = tmp_path / "new.toml"
    assert main(["init", "127.0.0.1", "--no-ssh", "--output", str(new), *fleet.probe_args()]) == 0
    old = tmp_path / "old.toml"
    old.write_text("# mine\n")
    old.chmod(0o644)
    assert main(["init", "127.0.0.1", "--no-ssh", "--output", str(old), "--force", *fleet.probe_args()]) == 0
    capsys.readouterr()
    assert stat.S_IMODE(new.stat().st_mode) == 0o600
    assert stat.S_IMODE(old.stat().st_mode) == 0o600


def test_unknown_host_key_still_writes_the_http_config_with_a_comment_and_one_stderr_line_naming_the_fix(
    fleet: Fleet, sshd_factory: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server: Sshd = sshd_factory("init-hostkey")
    server.set_unit("vllm-qwen36.service", unit("vLLM Qwen3.6", qwen_unit_argv(fleet.qwen.port)))
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    out = tmp_path / "fleet.toml"

    code = main(["init", "127.0.0.1", "-o", str(out), *ssh_args(server, empty), *fleet.probe_args()])

    captured = capsys.readouterr()
    assert code == 0, captured.err
    spec = parse_config(out.read_text(), env={})
    (node,) = spec.nodes
    assert node.name == "127.0.0.1"  # no hostname without SSH: the host argument
    assert set(by_url(spec)) == {
        f"http://127.0.0.1:{fleet.qwen.port}",
        f"http://127.0.0.1:{fleet.gemma.port}",
        f"http://127.0.0.1:{fleet.ollama.port}",
    }
    assert all(v.unit is None and v.container is None for v in node.vllm)
    assert {s.kind for s in node.services} == {"asr"}
    fix = f"ssh-keyscan -p {server.port} 127.0.0.1 >> {empty}"
    lines = out.read_text().splitlines()
    skipped = lines.index("# SSH discovery skipped:")
    assert "host key is not in" in lines[skipped + 1] and lines[skipped + 1].endswith(fix)
    (line,) = [line for line in stderr_lines(captured.err) if "host key" in line]
    assert line.startswith("sparktui init: SSH discovery skipped for 127.0.0.1") and line.endswith(fix)


@pytest.mark.slow
def test_print_writes_the_config_to_stdout_and_no_file(
    fleet: Fleet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    configured = tmp_path / "xdg" / "config.toml"
    monkeypatch.setenv("SPARKTUI_CONFIG", str(configured))

    code = main(
        ["init", "spark-a.invalid", "127.0.0.1", "--no-ssh", "--print", "--timeout", "0.3", *fleet.probe_args()]
    )

    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert not configured.exists()
    spec = parse_config(captured.out, env={})
    assert [(n.name, n.host) for n in spec.nodes] == [
        ("spark-a.invalid", "spark-a.invalid"),
        ("127.0.0.1", "127.0.0.1"),
    ]


def test_the_default_output_is_the_configured_path(
    fleet: Fleet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    configured = tmp_path / "xdg" / "sparktui" / "config.toml"
    monkeypatch.setenv("SPARKTUI_CONFIG", str(configured))

    code = main(["init", "127.0.0.1", "--no-ssh", *fleet.probe_args()])

    assert code == 0, capsys.readouterr().err
    assert parse_config(configured.read_text(), env={}).nodes[0].host == "127.0.0.1"


def test_bad_ports_and_hosts_are_usage_errors_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["init", "127.0.0.1", "--print", "--vllm-ports", "8000,http"]) == 2
    assert main(["init", "http://spark1:8000", "--print"]) == 2
    assert main(["init", "127.0.0.1", "--print", "--service-ports", "whisper=9000"]) == 2
    assert main(["init", "127.0.0.1:70000", "--print"]) == 2
    lines = stderr_lines(capsys.readouterr().err)
    assert len(lines) == 4 and all(line.startswith("sparktui init: ") for line in lines)
    assert "'http' is not a port" in lines[0]
    assert "without a scheme" in lines[1]
    assert "KIND one of asr, tts, ollama, http" in lines[2]
    assert "SSH port after the host must be 1 to 65535" in lines[3]


def test_finding_nothing_exits_1_writes_nothing_and_says_what_to_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "fleet.toml"

    code = main(["init", "127.0.0.1", "--no-ssh", "--output", str(out), *unused_ports()])

    assert code == 1
    assert not out.exists()
    lines = stderr_lines(capsys.readouterr().err)
    assert lines[-1].startswith("sparktui init: found nothing to watch") and "Nothing written." in lines[-1]


def test_a_host_port_argument_is_that_hosts_ssh_port(
    fleet: Fleet, sshd_factory: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """``HOST:PORT`` reaches an SSH server on a port of its own without --port (which applies to every
    host): the demo's nodes, say, all on 127.0.0.1."""
    server: Sshd = sshd_factory("init-hostport")
    server.set_unit("vllm-qwen36.service", unit("vLLM Qwen3.6", qwen_unit_argv(fleet.qwen.port)))
    login = ["--user", server.user, "--key", str(server.client_key), "--known-hosts", str(server.known_hosts)]

    code = main(["init", f"127.0.0.1:{server.port}", "--print", *login, *fleet.probe_args()])

    captured = capsys.readouterr()
    assert code == 0, captured.err
    (node,) = parse_config(captured.out, env={}).nodes
    assert (node.host, node.ssh.port) == ("127.0.0.1", server.port)
    assert {v.unit for v in node.vllm} == {"vllm-qwen36.service", None}  # the unit came over SSH
    assert f"# 127.0.0.1:{server.port}" in captured.out
