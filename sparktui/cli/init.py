"""``sparktui init HOST [HOST ...]``: its arguments; ``sparktui.headless.init`` probes the hosts and writes
the config."""

from __future__ import annotations

import argparse
from pathlib import Path

INIT_DESCRIPTION = """\
Probe each HOST and write a commented config for it: one [[nodes]] per host, named from its hostname.

Over HTTP (all at once, short timeouts), every port below is asked /version, /v1/models,
/prometheus/metrics, /v1/version, /v1/health/ready, /server_info, /api/version, /api/tags and /props,
then /metrics (never of a trtllm-serve: reading its /metrics drains its stats), then /health (never of
an SGLang: its /health runs a generation); what answers says what it is: an Ollama ({"version": ...} on
/api/version and the models on its disk on /api/tags; engine = "ollama"), a NIM ({"release": ...} on
/v1/version, or /v1/health/ready; engine = "nim"), a TensorRT-LLM trtllm-serve (trtllm_ names on
/prometheus/metrics or owned_by "tensorrt_llm" on /v1/models; engine = "trtllm"), an SGLang
(/server_info with its server arguments, sglang: names on /metrics or owned_by "sglang" on /v1/models;
engine = "sglang"), a vLLM ({"version": ...} on /version), a llama.cpp llama-server (/props with its
build_info; written with engine = "llamacpp"), a GPU exporter or node_exporter (/metrics, told apart by
metric names) or a side service (/health). Over SSH (with --user, --port, --key, --known-hosts), the
systemd units and docker containers that run vLLM, llama-server, SGLang or trtllm-serve are read, with
their command lines: --port (and docker's -p HOST:CONTAINER), vLLM's --gpu-memory-utilization and
--served-model-name, llama-server's -m, --alias and --models-dir, SGLang's --model-path,
--served-model-name and --enable-metrics, trtllm-serve's MODEL, --host and --extra_llm_api_options; NIM
containers by their nvcr.io/nim image and NIM_SERVER_PORT; and Ollama's `ollama serve` units and
ollama/ollama containers with their OLLAMA_HOST (by default Ollama listens on 127.0.0.1 only: then
sparktui must run on its node); each is matched with the server answering on its host port.

Every value in the file has a comment saying how it was found; what was probed and not found is
listed in comments. The file is validated before it is written, and an existing file is only
replaced with --force. An SSH problem (unknown host key...) is reported in one line and skips SSH
for that host only; its HTTP findings are still written. docs/init.md has the details and an example."""

INIT_EPILOG = """\
ports probed by default:
  vLLM           8000, 8001                      (--vllm-ports replaces them)
  llama-server   8080                            (--llamacpp-ports replaces it)
  SGLang         30000                           (--sglang-ports replaces it)
  TensorRT-LLM   8355, 8356                      (--trtllm-ports replaces them)
  NIM            8000 (vLLM's too: what answers decides) (--nim-ports replaces it)
  Ollama         11434                           (--ollama-ports replaces it)
  services       asr=8765, tts=8882              (--service-ports replaces them)
  exporters      9835, 9400, 9100                (--exporter-ports replaces them)
  --ports adds ports to the list, each recognised by what it answers.

examples:
  sparktui init 192.168.1.11 192.168.1.12 --user milo
  sparktui init spark1 --print --no-ssh
  sparktui init 127.0.0.1 --vllm-ports 18001,18002 --service-ports asr=18765 --exporter-ports 19835
"""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    init = sub.add_parser(
        "init",
        help="probe hosts and write a commented config",
        description=INIT_DESCRIPTION,
        epilog=INIT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    init.add_argument("hosts", nargs="+", metavar="HOST", help="host name or IP address of a node")
    where = init.add_mutually_exclusive_group()
    where.add_argument(
        "--output",
        "-o",
        type=Path,
        metavar="FILE",
        help="write here (default: --config, else $SPARKTUI_CONFIG, else the XDG config path)",
    )
    where.add_argument(
        "--print", dest="print_config", action="store_true", help="print the config to stdout, write no file"
    )
    init.add_argument("--force", action="store_true", help="overwrite the file if it exists")
    ssh = init.add_argument_group("SSH (written into each node's [nodes.ssh])")
    ssh.add_argument("--user", help="SSH user (default: your user name)")
    ssh.add_argument("--port", type=int, help="SSH port (default 22)")
    ssh.add_argument("--key", type=Path, metavar="FILE", help="private key (default: the SSH agent, ~/.ssh/id_*)")
    ssh.add_argument(
        "--known-hosts",
        type=Path,
        metavar="FILE",
        help="known_hosts to check host keys against (default ~/.ssh/known_hosts)",
    )
    ssh.add_argument("--no-ssh", action="store_true", help="probe over HTTP only")
    probe = init.add_argument_group("probing")
    probe.add_argument("--ports", metavar="PORTS", help="more ports to probe, comma-separated (8002,9500)")
    probe.add_argument("--vllm-ports", metavar="PORTS", help="vLLM ports instead of 8000,8001")
    probe.add_argument("--llamacpp-ports", metavar="PORTS", help="llama-server ports instead of 8080")
    probe.add_argument("--sglang-ports", metavar="PORTS", help="SGLang ports instead of 30000")
    probe.add_argument("--trtllm-ports", metavar="PORTS", help="TensorRT-LLM ports instead of 8355,8356")
    probe.add_argument("--nim-ports", metavar="PORTS", help="NIM ports instead of 8000")
    probe.add_argument("--ollama-ports", metavar="PORTS", help="Ollama ports instead of 11434")
    probe.add_argument(
        "--service-ports",
        metavar="KIND=PORT,...",
        help=(
            "side services instead of asr=8765,tts=8882 (KIND: asr, tts, http; ollama=PORT is probed too, "
            "and an Ollama that answers is written as an engine)"
        ),
    )
    probe.add_argument("--exporter-ports", metavar="PORTS", help="exporter ports instead of 9835,9400,9100")
    probe.add_argument(
        "--timeout", type=float, default=2.0, metavar="SECONDS", help="timeout of each HTTP probe (default 2)"
    )
    return init


def run(args: argparse.Namespace) -> int:
    from sparktui.headless import init

    return init.main(args)
