"""``sparktui init``: real HTTP servers on 127.0.0.1, the real sshd with stub systemctl/docker, and the
pure parts (``vllm serve`` command lines from the operators' write-ups, the TOML rendering)."""

from __future__ import annotations

import json
import re
import socket
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlsplit

import pytest

from sparktui.cli import main
from sparktui.config import parse_config
from sparktui.discovery import commands as d
from sparktui.model.exporters import ExporterKind
from sparktui.model.observations import FetchKind, HttpResult
from sparktui.model.specs import FleetSpec, VllmSpec
from tests.fixture_fleet import (
    DATA,
    EXPORTERS,
    Endpoint,
    _Handler,
    _QuietServer,
    free_port,
    node_exporter_page,
    scenario_scrapes,
)
from tests.sshd import Sshd, container_inspect

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
    data = container_inspect(name)
    bindings = {"8000/tcp": [{"HostIp": "", "HostPort": str(host_port)}]} if host_port else {}
    data.update(
        Path="vllm",
        Args=["serve", *serve_args],
        Config={"Image": image, "Entrypoint": ["vllm", "serve"], "Cmd": list(serve_args)},
        HostConfig={"NetworkMode": "bridge", "PortBindings": bindings, "RestartPolicy": {"Name": "no"}},
        NetworkSettings={"Ports": bindings},
    )
    return data


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


def by_url(fleet: FleetSpec) -> dict[str | None, VllmSpec]:
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
    assert node.name == d.config_name(socket.gethostname().split(".")[0])
    assert node.host == "127.0.0.1"
    assert (node.ssh.user, node.ssh.port) == (server.user, server.port)
    assert (node.ssh.key_file, node.ssh.known_hosts) == (server.client_key, server.known_hosts)
    vllms = by_url(spec)
    assert set(vllms) == {f"http://127.0.0.1:{fleet.qwen.port}", f"http://127.0.0.1:{fleet.gemma.port}"}
    qwen, gemma = vllms[f"http://127.0.0.1:{fleet.qwen.port}"], vllms[f"http://127.0.0.1:{fleet.gemma.port}"]
    assert (qwen.unit, qwen.container, qwen.gpu_memory_utilization) == ("vllm-qwen36.service", None, 0.55)
    assert (gemma.unit, gemma.container, gemma.gpu_memory_utilization) == (None, "vllm-gemma4", 0.80)
    assert node.gpu_exporter is not None and node.node_exporter is not None
    assert node.gpu_exporter.url == f"http://127.0.0.1:{fleet.gpu.port}/metrics"
    assert node.node_exporter.url == f"http://127.0.0.1:{fleet.node.port}/metrics"
    assert {(s.name, s.kind, s.url) for s in node.services} == {
        ("asr", "asr", f"http://127.0.0.1:{fleet.asr.port}/health"),
        ("ollama", "ollama", f"http://127.0.0.1:{fleet.ollama.port}/api/tags"),
    }
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
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "config.toml"
    out.write_text("# mine\n")

    refused = main(["init", "127.0.0.1", "--no-ssh", "--output", str(out), *unused_ports()])

    err = capsys.readouterr().err
    assert refused == 2
    assert out.read_text() == "# mine\n"
    (line,) = stderr_lines(err)
    assert str(out) in line and "--force" in line

    forced = main(["init", "127.0.0.1", "--no-ssh", "--output", str(out), "--force", *unused_ports()])

    assert forced == 0, capsys.readouterr().err
    assert out.read_text().startswith("# sparktui fleet config, written by `sparktui init 127.0.0.1`")
    assert parse_config(out.read_text(), env={}).nodes[0].host == "127.0.0.1"
    assert not list(tmp_path.glob(".*.tmp"))


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
    }
    assert all(v.unit is None and v.container is None for v in node.vllm)
    assert {s.kind for s in node.services} == {"asr", "ollama"}
    fix = f"ssh-keyscan -p {server.port} 127.0.0.1 >> {empty}"
    lines = out.read_text().splitlines()
    skipped = lines.index("# SSH discovery skipped:")
    assert "host key is not in" in lines[skipped + 1] and lines[skipped + 1].endswith(fix)
    (line,) = [line for line in stderr_lines(captured.err) if "host key" in line]
    assert line.startswith("sparktui init: SSH discovery skipped for 127.0.0.1") and line.endswith(fix)


def test_print_writes_the_config_to_stdout_and_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    configured = tmp_path / "xdg" / "config.toml"
    monkeypatch.setenv("SPARKTUI_CONFIG", str(configured))

    code = main(["init", "spark-a.invalid", "192.168.1.12", "--no-ssh", "--print", "--timeout", "0.3"])

    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert not configured.exists()
    spec = parse_config(captured.out, env={})
    assert [(n.name, n.host) for n in spec.nodes] == [
        ("spark-a.invalid", "spark-a.invalid"),
        ("192.168.1.12", "192.168.1.12"),
    ]


def test_the_default_output_is_the_configured_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    configured = tmp_path / "xdg" / "sparktui" / "config.toml"
    monkeypatch.setenv("SPARKTUI_CONFIG", str(configured))

    code = main(["init", "127.0.0.1", "--no-ssh", *unused_ports()])

    assert code == 0, capsys.readouterr().err
    assert parse_config(configured.read_text(), env={}).nodes[0].host == "127.0.0.1"


def test_bad_ports_and_hosts_are_usage_errors_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["init", "127.0.0.1", "--print", "--vllm-ports", "8000,http"]) == 2
    assert main(["init", "http://spark1:8000", "--print"]) == 2
    assert main(["init", "127.0.0.1", "--print", "--service-ports", "whisper=9000"]) == 2
    lines = stderr_lines(capsys.readouterr().err)
    assert len(lines) == 3 and all(line.startswith("sparktui init: ") for line in lines)
    assert "'http' is not a port" in lines[0]
    assert "without a scheme" in lines[1]
    assert "KIND one of asr, tts, ollama, http" in lines[2]


# --- pure: command lines from the operators' write-ups (shared/context) -------------------------------

# context/000: Spark 1's systemd unit, ExecStart as written in the unit file.
QWEN36_UNIT = r"""/usr/bin/docker run --rm \
--name vllm-qwen36 \
--gpus all \
--ipc=host \
--ulimit memlock=-1 \
--ulimit stack=67108864 \
-p 8001:8000 \
-e VLLM_FLASHINFER_MOE_BACKEND=latency \
-e VLLM_USE_V1=1 \
-v /home/milo/.cache/huggingface:/root/.cache/huggingface \
nvcr.io/nvidia/vllm:26.04-py3 \
vllm serve RedHatAI/Qwen3.6-35B-A3B-NVFP4 \
--tokenizer Qwen/Qwen3.6-35B-A3B \
--quantization compressed-tensors \
--kv-cache-dtype fp8 \
--trust-remote-code \
--max-model-len 131072 \
--gpu-memory-utilization 0.55 \
--enable-auto-tool-choice \
--tool-call-parser qwen3_coder \
--reasoning-parser qwen3 \
--speculative-config '{"method":"mtp","num_speculative_tokens":2}' \
--enable-prefix-caching \
--max-num-batched-tokens 8192 \
--host 0.0.0.0 \
--port 8000"""

# context/000: Spark 2, a vllm/vllm-openai image (entrypoint `vllm serve`): model and flags after the image.
GEMMA4_UNIT = r"""/usr/bin/docker run --rm \
--name vllm-gemma4 \
--gpus all \
--ipc=host \
--ulimit memlock=-1 \
--ulimit stack=67108864 \
-p 8001:8000 \
-e VLLM_DISABLE_COMPILE_CACHE=1 \
-v /home/milo/.cache/huggingface:/root/.cache/huggingface \
vllm/vllm-openai:gemma4-0505-arm64-cu130 \
google/gemma-4-26B-A4B-it \
--quantization fp8 \
--kv-cache-dtype fp8 \
--trust-remote-code \
--max-model-len 65536 \
--gpu-memory-utilization 0.80 \
--enable-auto-tool-choice \
--tool-call-parser hermes \
--speculative-config \
'{"method":"mtp","model":"google/gemma-4-26B-A4B-it-assistant","num_speculative_tokens":4}' \
--enable-prefix-caching \
--host 0.0.0.0 \
--max-num-batched-tokens 8192 \
--port 8000"""

# context/001 §7.1.3: --served-model-name, --shm-size (an option with a value before the image).
CODER_NEXT = r"""docker run -d --name qwen3-coder-next --ipc=host --restart unless-stopped \
--gpus all --shm-size 32gb -p 8000:8000 \
-e HF_HOME=/models -v ~/vllm:/models \
vllm/vllm-openai:cu130-nightly \
Qwen/Qwen3-Coder-Next-FP8 \
--served-model-name qwen3-coder-next --host 0.0.0.0 --port 8000 \
--attention-backend flashinfer \
--enable-prefix-caching \
--enable-auto-tool-choice --tool-call-parser qwen3_coder \
--gpu-memory-utilization 0.85 --max-model-len 170000 \
--max-num-seqs 4 --max-num-batched-tokens 32768"""

# context/001 §7.3.2: `vllm serve` inside a bash -c string, with escaped JSON and a --flag=value.
NEMOTRON_OMNI = r"""docker run -d --name nemotron-omni --ipc=host --restart unless-stopped \
--gpus all --shm-size 16g -p 8000:8000 \
-e HF_HOME=/models -v ~/vllm:/models -e HF_TOKEN="$HF_TOKEN" \
--entrypoint /bin/bash \
vllm/vllm-openai:v0.20.0 -c \
"pip install vllm[audio] && vllm serve nvidia/Nemotron-3-Nano-Omni-30B-A3B-Reasoning-NVFP4 \
--served-model-name nemotron-omni --host 0.0.0.0 --port 8000 --trust-remote-code \
--gpu-memory-utilization 0.8 --max-model-len 131072 \
--max-num-seqs 8 --max-num-batched-tokens 32768 --enable-prefix-caching \
--limit-mm-per-prompt '{\"video\":1,\"image\":1,\"audio\":1}' \
--media-io-kwargs '{\"video\":{\"fps\":2,\"num_frames\":256}}' \
--allowed-local-media-path=/ \
--reasoning-parser nemotron_v3" """

# context/002: the head's launch script (multi-node, --port 8000 and --master-port 29501).
DS4_HEAD = r"""vllm serve /models/DeepSeek-V4-Flash \
--served-model-name deepseek-v4-flash \
--host 0.0.0.0 --port 8000 \
--trust-remote-code \
--tensor-parallel-size 2 --pipeline-parallel-size 1 \
--kv-cache-dtype fp8 --block-size 256 \
--enable-prefix-caching --enable-chunked-prefill \
--max-model-len 200000 --max-num-seqs 4 \
--max-num-batched-tokens 16384 \
--gpu-memory-utilization 0.90 \
--disable-custom-all-reduce \
--compilation-config '{"cudagraph_mode":"FULL_AND_PIECEWISE","custom_ops":["all"]}' \
--speculative-config '{"method":"deepseek_mtp","num_speculative_tokens":2}' \
--tokenizer-mode deepseek_v4 --tool-call-parser deepseek_v4 \
--enable-auto-tool-choice --reasoning-parser deepseek_v4 \
--default-chat-template-kwargs '{"thinking":true}' \
--load-format safetensors \
--nnodes 2 --node-rank 0 \
--master-addr 10.0.0.1 --master-port 29501"""

# context/004: the benchmark's two-node config, written with --flag=value.
QWEN235_EQUALS = (
    "vllm serve Qwen/Qwen3-235B-A22B-GPTQ-Int4 --tensor-parallel-size=2 --attention-backend=TRITON_ATTN "
    "--quantization=gptq_marlin --kv-cache-dtype=fp8 --gpu-memory-utilization=0.87"
)


def test_context_000_qwen36_unit_docker_run_with_vllm_serve_and_port_mapping() -> None:
    command = d.analyse_command(d.split_command_line(QWEN36_UNIT))
    assert command.vllm is not None
    assert (command.container, command.image) == ("vllm-qwen36", "nvcr.io/nvidia/vllm:26.04-py3")
    assert (command.vllm.port, command.host_port) == (8000, 8001)
    assert command.port_how == "`-p 8001:8000` (`--port 8000` in the container)"
    assert command.vllm.model == "RedHatAI/Qwen3.6-35B-A3B-NVFP4"
    assert command.vllm.gpu_memory_utilization == 0.55
    assert command.vllm.speculative == "mtp, 2 speculative tokens"
    assert command.vllm.host == "0.0.0.0"


def test_context_000_gemma4_image_entrypoint_takes_the_model_and_flags_after_the_image() -> None:
    command = d.analyse_command(d.split_command_line(GEMMA4_UNIT))
    assert command.vllm is not None
    assert (command.container, command.host_port) == ("vllm-gemma4", 8001)
    assert command.vllm.model == "google/gemma-4-26B-A4B-it"
    assert command.vllm.gpu_memory_utilization == 0.80
    assert command.vllm.speculative == ("mtp, 4 speculative tokens, drafter google/gemma-4-26B-A4B-it-assistant")


def test_context_001_served_model_name_and_options_with_values_before_the_image() -> None:
    command = d.analyse_command(d.split_command_line(CODER_NEXT))
    assert command.vllm is not None
    assert (command.container, command.image) == ("qwen3-coder-next", "vllm/vllm-openai:cu130-nightly")
    assert command.vllm.served_model_name == "qwen3-coder-next"
    assert (command.vllm.model, command.vllm.gpu_memory_utilization) == ("Qwen/Qwen3-Coder-Next-FP8", 0.85)
    assert command.host_port == 8000


def test_context_001_vllm_serve_inside_a_bash_c_string_with_escaped_json() -> None:
    command = d.analyse_command(d.split_command_line(NEMOTRON_OMNI))
    assert command.vllm is not None
    assert command.vllm.model == "nvidia/Nemotron-3-Nano-Omni-30B-A3B-Reasoning-NVFP4"
    assert command.vllm.served_model_name == "nemotron-omni"
    assert (command.vllm.gpu_memory_utilization, command.vllm.port, command.host_port) == (0.8, 8000, 8000)


def test_context_002_multi_node_head_reads_port_not_master_port_and_worker_is_headless() -> None:
    head = d.parse_vllm_args(d.find_vllm_serve(d.split_command_line(DS4_HEAD)) or [])
    assert (head.port, head.nnodes, head.headless, head.gpu_memory_utilization) == (8000, 2, False, 0.90)
    assert head.served_model_name == "deepseek-v4-flash"
    assert head.speculative == "deepseek_mtp, 2 speculative tokens"
    worker = d.parse_vllm_args(
        d.find_vllm_serve(d.split_command_line(DS4_HEAD.replace("--node-rank 0", "--node-rank 1 --headless"))) or []
    )
    assert worker.headless


def test_context_004_flag_equals_value_form() -> None:
    args = d.parse_vllm_args(d.find_vllm_serve(d.split_command_line(QWEN235_EQUALS)) or [])
    assert (args.model, args.gpu_memory_utilization, args.port, args.port_given) == (
        "Qwen/Qwen3-235B-A22B-GPTQ-Int4",
        0.87,
        8000,
        False,
    )


def test_systemctl_show_exec_start_of_a_script_unit_and_an_env_vllm_unit() -> None:
    host = DATA / "host"
    script = d.parse_systemctl_show(
        "Id=vllm-ds4-head.service\n" + (host / "systemctl-show-vllm-ds4-head.service.txt").read_text()
    )
    env = d.parse_systemctl_show("Id=vllm.service\n" + (host / "systemctl-show-vllm.service.txt").read_text())
    assert script[0].exec_start == (("/bin/bash", "/home/milo/vllm-scripts/vllm-head-090.sh"),)
    assert (script[0].active, script[0].sub) == ("activating", "auto-restart")
    command = d.analyse_command(env[0].exec_start[0])
    assert command.vllm is not None
    assert (command.vllm.model, command.vllm.gpu_memory_utilization) == ("Qwen/Qwen3.6-35B-A3B-FP8", 0.85)
    assert (command.host_port, command.port_how) == (8000, "`--port 8000`")


def test_docker_exec_unit_names_its_container_and_script() -> None:
    # context/002: ExecStart=/usr/bin/docker exec vllm_ds4 bash /workspace/vllm-head-090.sh
    argv = ["/usr/bin/docker", "exec", "vllm_ds4", "bash", "/workspace/vllm-head-090.sh"]
    command = d.analyse_command(argv)
    assert (command.vllm, command.container, command.host_port) == (None, "vllm_ds4", None)
    assert command.runs == "a script in container vllm_ds4 (/workspace/vllm-head-090.sh)"


@pytest.mark.parametrize(
    ("text", "container_port", "host_port"),
    [
        ("8001:8000", 8000, 8001),
        ("0.0.0.0:8001:8000/tcp", 8000, 8001),
        ("[::1]:8001:8000", 8000, 8001),
        ("127.0.0.1::8000", 8000, None),
        ("8000", 8000, None),
    ],
)
def test_publish_mappings(text: str, container_port: int, host_port: int | None) -> None:
    mapping = d.parse_publish(text)
    assert mapping is not None and (mapping.container_port, mapping.host_port) == (container_port, host_port)


def test_network_host_and_unpublished_ports() -> None:
    host_net = d.analyse_command(
        d.split_command_line("docker run --network host vllm/vllm-openai:v0.20.0 m/x --port 8010")
    )
    assert host_net.host_port == 8010
    unpublished = d.analyse_command(d.split_command_line("docker run -d vllm/vllm-openai:v0.20.0 m/x"))
    assert unpublished.host_port is None
    assert unpublished.port_how == "container port 8000 (vLLM's default port 8000) is not published with `-p`"


# --- pure: what answers on a port, and the rendering --------------------------------------------------


def answer(path: str, status: int, body: bytes = b"") -> HttpResult:
    return HttpResult(url=f"http://h:1{path}", kind=FetchKind.OK, status=status, body=body)


def refused(path: str) -> HttpResult:
    return HttpResult(url=f"http://h:1{path}", kind=FetchKind.REFUSED, error="connection refused")


def test_an_openai_server_without_version_is_not_taken_for_vllm() -> None:
    results = {path: answer(path, 404) for path in d.PROBE_PATHS}
    results["/v1/models"] = answer("/v1/models", 200, json.dumps({"data": [{"id": "m"}]}).encode())
    finding = d.classify_port(8001, "vllm", results)
    assert isinstance(finding, d.NoAnswer) and "not vLLM" in finding.reason
    vllm = dict(results, **{"/version": answer("/version", 200, b'{"version":"0.19.0"}')})
    assert d.classify_port(8001, "vllm", vllm) == d.VllmAnswer(8001, "0.19.0", ("m",), needs_api_key=False)
    locked = dict(vllm, **{"/v1/models": answer("/v1/models", 401)})
    assert d.classify_port(8001, "vllm", locked) == d.VllmAnswer(8001, "0.19.0", (), needs_api_key=True)
    gone = {path: refused(path) for path in d.PROBE_PATHS}
    assert d.classify_port(9835, "exporter", gone) == d.NoAnswer(9835, "exporter", "connection refused")


def test_exporters_are_told_apart_by_metric_names_not_ports() -> None:
    for file, kind in [
        ("dcgm_exporter.prom", ExporterKind.DCGM),
        ("nvidia_gpu_exporter.prom", ExporterKind.NVIDIA_GPU_EXPORTER),
        ("node_exporter.prom", ExporterKind.NODE_EXPORTER),
    ]:
        results = {path: answer(path, 404) for path in d.PROBE_PATHS}
        results["/metrics"] = answer("/metrics", 200, (EXPORTERS / file).read_bytes())
        assert d.classify_port(9835, "exporter", results) == d.ExporterAnswer(9835, kind)


def test_text_from_the_host_cannot_escape_its_comment_or_break_the_file() -> None:
    hostile = 'evil"\n[[nodes]]\nname = "x'
    report = d.HostReport(
        host="10.0.0.7",
        name="spark-7",
        name_how="the host argument",
        findings=(
            d.VllmAnswer(8000, "0.1\n[thresholds]", (hostile,), needs_api_key=True),
            d.VllmAnswer(8001, "0.2", ("a/" + hostile,), needs_api_key=False),
        ),
        ssh=None,
        ssh_skipped="10.0.0.7: host key is not in x\ny; verify it",
    )
    text = d.render_config([report], d.SshSettings(user="milo"), written_at="2026-11-26 10:00 UTC", hosts=["10.0.0.7"])
    spec = parse_config(text, env={})
    (node,) = spec.nodes
    assert [v.url for v in node.vllm] == ["http://10.0.0.7:8000", "http://10.0.0.7:8001"]
    assert len({v.name for v in node.vllm}) == 2
    assert node.ssh.user == "milo"
    assert "# api_key_env = " in text  # suggested, not set: the variable may not exist
    assert all(len(line) <= 400 for line in text.splitlines())


def test_node_names_come_from_hostnames_made_valid_and_unique() -> None:
    names = d.node_names(["10.0.0.1", "10.0.0.2", "fe80::1", "spark"], ["spark1.lan\n", "spark1", None, " "])
    assert [name for name, _ in names] == ["spark1", "spark1-2", "fe80-1", "spark"]


def test_a_script_unit_is_paired_with_the_only_vllm_left_and_a_headless_worker_is_only_a_comment() -> None:
    # context/002: the head's unit execs a script in a `sleep infinity` container on the host network.
    head = d.UnitInfo(
        "vllm-ds4-head.service",
        "active",
        "running",
        "DeepSeek V4 Flash (vLLM head)",
        (("/usr/bin/docker", "exec", "vllm_ds4", "bash", "/workspace/vllm-head-090.sh"),),
    )
    container = d.ContainerInfo(
        "vllm_ds4",
        "ghcr.io/spark-arena/dgx-vllm-eugr-nightly:latest",
        "running",
        ("sleep", "infinity"),
        host_network=True,
    )
    worker_argv = DS4_HEAD.replace("--node-rank 0", "--node-rank 1 --headless")
    worker = d.UnitInfo("vllm-ds4-worker.service", "active", "running", "", (tuple(d.split_command_line(worker_argv)),))
    report = d.HostReport(
        host="192.168.1.11",
        name="spark1",
        name_how="the host's `hostname`, over SSH",
        findings=(d.VllmAnswer(8000, "0.19.0", ("deepseek-v4-flash",), needs_api_key=False),),
        ssh=d.SshFindings("spark1", (head, worker), (container,)),
    )

    text = d.render_config([report], d.SshSettings(), written_at="2026-11-26 10:00 UTC", hosts=["192.168.1.11"])

    (vllm,) = parse_config(text, env={}).nodes[0].vllm
    assert (vllm.url, vllm.unit, vllm.container) == ("http://192.168.1.11:8000", "vllm-ds4-head.service", None)
    flat = unwrapped(text)
    assert "Paired by elimination: unit vllm-ds4-head.service is the only vLLM launch" in flat
    assert "a script in container vllm_ds4 (/workspace/vllm-head-090.sh)" in flat
    assert "out: unit vllm-ds4-worker.service (active (running)), runs `vllm serve`; a multi-node worker" in flat
