"""The pure half of ``sparktui init``: ``vllm serve`` command lines from the operators' write-ups, what
answers on a port, names, and the TOML rendering (``sparktui.discovery``)."""

from __future__ import annotations

import json
import re

import pytest

from sparktui.config import parse_config
from sparktui.discovery.commands import (
    analyse_command,
    find_vllm_serve,
    parse_publish,
    split_command_line,
)
from sparktui.discovery.launches import vllm_launches
from sparktui.discovery.names import node_names
from sparktui.discovery.probes import (
    PROBE_PATHS,
    ExporterAnswer,
    NoAnswer,
    VllmAnswer,
    classify_port,
    split_host_port,
)
from sparktui.discovery.render import HostReport, SshFindings, SshSettings, render_config
from sparktui.discovery.units import ContainerInfo, UnitInfo, parse_systemctl_show
from sparktui.engines.vllm.command import parse_server_args as parse_vllm_args
from sparktui.model.exporters import ExporterKind
from sparktui.model.observations import FetchKind, HttpResult
from tests.support.fixture_fleet import DATA, EXPORTERS


def unwrapped(text: str) -> str:
    """The config with wrapped comment paragraphs joined, for looking up phrases."""
    return re.sub(r"\n#\s+", " ", text)


# --- command lines from the operators' write-ups (shared/context) -------------------------------------

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
    command = analyse_command(split_command_line(QWEN36_UNIT))
    assert command.vllm is not None
    assert (command.container, command.image) == ("vllm-qwen36", "nvcr.io/nvidia/vllm:26.04-py3")
    assert (command.vllm.port, command.host_port) == (8000, 8001)
    assert command.port_how == "`-p 8001:8000` (`--port 8000` in the container)"
    assert command.vllm.model == "RedHatAI/Qwen3.6-35B-A3B-NVFP4"
    assert command.vllm.gpu_memory_utilization == 0.55
    assert command.vllm.speculative == "mtp, 2 speculative tokens"
    assert command.vllm.host == "0.0.0.0"


def test_context_000_gemma4_image_entrypoint_takes_the_model_and_flags_after_the_image() -> None:
    command = analyse_command(split_command_line(GEMMA4_UNIT))
    assert command.vllm is not None
    assert (command.container, command.host_port) == ("vllm-gemma4", 8001)
    assert command.vllm.model == "google/gemma-4-26B-A4B-it"
    assert command.vllm.gpu_memory_utilization == 0.80
    assert command.vllm.speculative == ("mtp, 4 speculative tokens, drafter google/gemma-4-26B-A4B-it-assistant")


def test_context_001_served_model_name_and_options_with_values_before_the_image() -> None:
    command = analyse_command(split_command_line(CODER_NEXT))
    assert command.vllm is not None
    assert (command.container, command.image) == ("qwen3-coder-next", "vllm/vllm-openai:cu130-nightly")
    assert command.vllm.served_model_name == "qwen3-coder-next"
    assert (command.vllm.model, command.vllm.gpu_memory_utilization) == ("Qwen/Qwen3-Coder-Next-FP8", 0.85)
    assert command.host_port == 8000


def test_context_001_vllm_serve_inside_a_bash_c_string_with_escaped_json() -> None:
    command = analyse_command(split_command_line(NEMOTRON_OMNI))
    assert command.vllm is not None
    assert command.vllm.model == "nvidia/Nemotron-3-Nano-Omni-30B-A3B-Reasoning-NVFP4"
    assert command.vllm.served_model_name == "nemotron-omni"
    assert (command.vllm.gpu_memory_utilization, command.vllm.port, command.host_port) == (0.8, 8000, 8000)


def test_context_002_multi_node_head_reads_port_not_master_port_and_worker_is_headless() -> None:
    head = parse_vllm_args(find_vllm_serve(split_command_line(DS4_HEAD)) or [])
    assert (head.port, head.nnodes, head.headless, head.gpu_memory_utilization) == (8000, 2, False, 0.90)
    assert head.served_model_name == "deepseek-v4-flash"
    assert head.speculative == "deepseek_mtp, 2 speculative tokens"
    worker = parse_vllm_args(
        find_vllm_serve(split_command_line(DS4_HEAD.replace("--node-rank 0", "--node-rank 1 --headless"))) or []
    )
    assert worker.headless


def test_context_004_flag_equals_value_form() -> None:
    args = parse_vllm_args(find_vllm_serve(split_command_line(QWEN235_EQUALS)) or [])
    assert (args.model, args.gpu_memory_utilization, args.port, args.port_given) == (
        "Qwen/Qwen3-235B-A22B-GPTQ-Int4",
        0.87,
        8000,
        False,
    )


def test_systemctl_show_exec_start_of_a_script_unit_and_an_env_vllm_unit() -> None:
    host = DATA / "host"
    script = parse_systemctl_show(
        "Id=vllm-ds4-head.service\n" + (host / "systemctl-show-vllm-ds4-head.service.txt").read_text()
    )
    env = parse_systemctl_show("Id=vllm.service\n" + (host / "systemctl-show-vllm.service.txt").read_text())
    assert script[0].exec_start == (("/bin/bash", "/home/milo/vllm-scripts/vllm-head-090.sh"),)
    assert (script[0].active, script[0].sub) == ("activating", "auto-restart")
    command = analyse_command(env[0].exec_start[0])
    assert command.vllm is not None
    assert (command.vllm.model, command.vllm.gpu_memory_utilization) == ("Qwen/Qwen3.6-35B-A3B-FP8", 0.85)
    assert (command.host_port, command.port_how) == (8000, "`--port 8000`")


def test_docker_exec_unit_names_its_container_and_script() -> None:
    # context/002: ExecStart=/usr/bin/docker exec vllm_ds4 bash /workspace/vllm-head-090.sh
    argv = ["/usr/bin/docker", "exec", "vllm_ds4", "bash", "/workspace/vllm-head-090.sh"]
    command = analyse_command(argv)
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
    mapping = parse_publish(text)
    assert mapping is not None and (mapping.container_port, mapping.host_port) == (container_port, host_port)


def test_network_host_and_unpublished_ports() -> None:
    host_net = analyse_command(split_command_line("docker run --network host vllm/vllm-openai:v0.20.0 m/x --port 8010"))
    assert host_net.host_port == 8010
    unpublished = analyse_command(split_command_line("docker run -d vllm/vllm-openai:v0.20.0 m/x"))
    assert unpublished.host_port is None
    assert unpublished.port_how == "container port 8000 (vLLM's default port 8000) is not published with `-p`"
    one_port = analyse_command(split_command_line("docker run -p 9001:9000 -e X=1 ghcr.io/a/server /start.sh"))
    assert (one_port.host_port, one_port.port_how) == (9001, "`-p 9001:9000`, the only published port")
    picked = analyse_command(split_command_line("docker run -p8000 --name=v vllm/vllm-openai:v0.20.0 m/x"))
    assert (picked.container, picked.host_port) == ("v", None)
    assert picked.port_how == "`-p 8000` publishes container port 8000 on a port docker picks"


def test_container_ports_are_read_from_docker_inspect_mappings() -> None:
    def container(name: str, argv: str, ports: dict[int, int], host_network: bool = False) -> ContainerInfo:
        return ContainerInfo(name, "vllm/vllm-openai:v0.20.0", "running", tuple(argv.split()), host_network, ports)

    mapped, only, hidden, host = vllm_launches(
        [],
        [
            container("vllm-a", "vllm serve m/x --port 8000", {8000: 8001}),
            container("vllm-b", "/start.sh", {9000: 9001}),
            container("vllm-c", "vllm serve m/y --port 8002", {}),
            container("vllm-d", "/start.sh", {9000: 9001}, host_network=True),
        ],
    )
    assert (mapped.host_port, mapped.port_how) == (8001, "port mapping `8001->8000` (`--port 8000` in the container)")
    assert (only.host_port, only.port_how) == (9001, "port mapping `9001->9000`, the only published port")
    assert (hidden.host_port, hidden.port_how) == (None, "container port 8002 (`--port 8002`) is not published")
    assert (host.host_port, host.port_how) == (None, "no vllm serve command line to read the port from")


# --- what answers on a port, and the rendering --------------------------------------------------------


def answer(path: str, status: int, body: bytes = b"") -> HttpResult:
    return HttpResult(url=f"http://h:1{path}", kind=FetchKind.OK, status=status, body=body)


def refused(path: str) -> HttpResult:
    return HttpResult(url=f"http://h:1{path}", kind=FetchKind.REFUSED, error="connection refused")


def test_an_openai_server_without_version_is_not_taken_for_vllm() -> None:
    results = {path: answer(path, 404) for path in PROBE_PATHS}
    results["/v1/models"] = answer("/v1/models", 200, json.dumps({"data": [{"id": "m"}]}).encode())
    finding = classify_port(8001, "vllm", results)
    assert isinstance(finding, NoAnswer) and "not vLLM" in finding.reason
    vllm = dict(results, **{"/version": answer("/version", 200, b'{"version":"0.19.0"}')})
    assert classify_port(8001, "vllm", vllm) == VllmAnswer(8001, "0.19.0", ("m",), needs_api_key=False)
    locked = dict(vllm, **{"/v1/models": answer("/v1/models", 401)})
    assert classify_port(8001, "vllm", locked) == VllmAnswer(8001, "0.19.0", (), needs_api_key=True)
    gone = {path: refused(path) for path in PROBE_PATHS}
    assert classify_port(9835, "exporter", gone) == NoAnswer(9835, "exporter", "connection refused")


def test_a_version_and_model_ids_with_escape_sequences_come_out_safe() -> None:
    results = {path: answer(path, 404) for path in PROBE_PATHS}
    results["/version"] = answer("/version", 200, json.dumps({"version": "0.19\x1b]2;pwned\x07.0\r\n"}).encode())
    card = {"id": "Qwen\x1b[2J3\x9b1m.6"}
    results["/v1/models"] = answer("/v1/models", 200, json.dumps({"data": [card]}).encode())
    assert classify_port(8001, "vllm", results) == VllmAnswer(8001, "0.19.0 ", ("Qwen3.6",), needs_api_key=False)


def test_exporters_are_told_apart_by_metric_names_not_ports() -> None:
    for file, kind in [
        ("dcgm_exporter.prom", ExporterKind.DCGM),
        ("nvidia_gpu_exporter.prom", ExporterKind.NVIDIA_GPU_EXPORTER),
        ("node_exporter.prom", ExporterKind.NODE_EXPORTER),
    ]:
        results = {path: answer(path, 404) for path in PROBE_PATHS}
        results["/metrics"] = answer("/metrics", 200, (EXPORTERS / file).read_bytes())
        assert classify_port(9835, "exporter", results) == ExporterAnswer(9835, kind)


def test_text_from_the_host_cannot_escape_its_comment_or_break_the_file() -> None:
    hostile = 'evil"\n[[nodes]]\nname = "x'
    report = HostReport(
        host="10.0.0.7",
        name="spark-7",
        name_how="the host argument",
        findings=(
            VllmAnswer(8000, "0.1\n[thresholds]", (hostile,), needs_api_key=True),
            VllmAnswer(8001, "0.2", ("a/" + hostile,), needs_api_key=False),
        ),
        ssh=None,
        ssh_skipped="10.0.0.7: host key is not in x\ny; verify it",
    )
    text = render_config([report], SshSettings(user="milo"), written_at="2026-11-26 10:00 UTC", hosts=["10.0.0.7"])
    spec = parse_config(text, env={})
    (node,) = spec.nodes
    assert [v.url for v in node.vllm] == ["http://10.0.0.7:8000", "http://10.0.0.7:8001"]
    assert len({v.name for v in node.vllm}) == 2
    assert node.ssh.user == "milo"
    assert "# api_key_env = " in text  # suggested, not set: the variable may not exist
    assert all(len(line) <= 400 for line in text.splitlines())


def test_node_names_come_from_hostnames_made_valid_and_unique() -> None:
    names = node_names(["10.0.0.1", "10.0.0.2", "fe80::1", "spark"], ["spark1.lan\n", "spark1", None, " "])
    assert [name for name, _ in names] == ["spark1", "spark1-2", "fe80-1", "spark"]


def test_a_script_unit_is_paired_with_the_only_vllm_left_and_a_headless_worker_is_only_a_comment() -> None:
    # context/002: the head's unit execs a script in a `sleep infinity` container on the host network.
    head = UnitInfo(
        "vllm-ds4-head.service",
        "active",
        "running",
        "DeepSeek V4 Flash (vLLM head)",
        (("/usr/bin/docker", "exec", "vllm_ds4", "bash", "/workspace/vllm-head-090.sh"),),
    )
    container = ContainerInfo(
        "vllm_ds4",
        "ghcr.io/spark-arena/dgx-vllm-eugr-nightly:latest",
        "running",
        ("sleep", "infinity"),
        host_network=True,
    )
    worker_argv = DS4_HEAD.replace("--node-rank 0", "--node-rank 1 --headless")
    worker = UnitInfo("vllm-ds4-worker.service", "active", "running", "", (tuple(split_command_line(worker_argv)),))
    report = HostReport(
        host="192.168.1.11",
        name="spark1",
        name_how="the host's `hostname`, over SSH",
        findings=(VllmAnswer(8000, "0.19.0", ("deepseek-v4-flash",), needs_api_key=False),),
        ssh=SshFindings("spark1", (head, worker), (container,)),
    )

    text = render_config([report], SshSettings(), written_at="2026-11-26 10:00 UTC", hosts=["192.168.1.11"])

    (vllm,) = parse_config(text, env={}).nodes[0].vllm
    assert (vllm.url, vllm.unit, vllm.container) == ("http://192.168.1.11:8000", "vllm-ds4-head.service", None)
    flat = unwrapped(text)
    assert "Paired by elimination: unit vllm-ds4-head.service is the only vLLM launch" in flat
    assert "a script in container vllm_ds4 (/workspace/vllm-head-090.sh)" in flat
    assert "out: unit vllm-ds4-worker.service (active (running)), runs `vllm serve`; a multi-node worker" in flat


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("spark1", ("spark1", None)),
        ("spark1:2222", ("spark1", 2222)),
        ("192.168.1.11:22", ("192.168.1.11", 22)),
        ("fe80::1", ("fe80::1", None)),  # a bare IPv6 address: every colon is the address's
        ("[fe80::1]:2222", ("fe80::1", 2222)),
        ("[fe80::1]", ("fe80::1", None)),
    ],
)
def test_host_arguments_may_carry_their_ssh_port(raw: str, expected: tuple[str, int | None]) -> None:
    assert split_host_port(raw) == expected


@pytest.mark.parametrize("raw", ["spark1:0", "spark1:65536", "spark1:ssh", "spark1:", "[fe80::1]:x", "http://x:1"])
def test_a_bad_host_port_argument_says_why(raw: str) -> None:
    with pytest.raises(ValueError, match=r"SSH port|scheme|host name"):
        split_host_port(raw)
