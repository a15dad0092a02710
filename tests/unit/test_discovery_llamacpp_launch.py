"""``sparktui init`` finds the systemd unit or docker container that runs a llama-server: its command line
read as llama-server reads it (``engines/llamacpp/command.py``, after llama.cpp's ``common/arg.cpp``),
found in an ExecStart, a ``bash -c``, a ``docker run`` of an official image or a ``docker inspect``, and
matched with the llama-server that answered ``/props`` by its host port. Hostile command lines end in a
config that loads, never in a traceback."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparktui.config import parse_config
from sparktui.discovery.commands import (
    analyse_command,
    analyse_llama_command,
    exec_start_argvs,
    find_llama_server,
    split_command_line,
)
from sparktui.discovery.launches import (
    is_llama_container,
    is_llama_unit,
    is_vllm_unit,
    llama_launches,
    vllm_launches,
)
from sparktui.discovery.probes import PROBE_PATHS, LlamaAnswer, PortFinding, VllmAnswer, classify_port
from sparktui.discovery.render import HostReport, SshFindings, SshSettings, render_config
from sparktui.discovery.units import ContainerInfo, UnitInfo, container_from_inspect, parse_systemctl_show
from sparktui.engines.llamacpp.command import DEFAULT_PORT, ServerArgs, is_server_image, parse_server_args
from sparktui.model.observations import FetchKind, HttpResult

LLAMA = Path(__file__).resolve().parents[1] / "data" / "llamacpp-11434"
WRITTEN_AT = "2026-12-07 18:00 UTC"

# How the llama.cpp docs and write-ups start it: a source build under systemd, the official CUDA image.
HOST_BUILD = (
    "/opt/llama.cpp/build/bin/llama-server -m /models/Qwen3-8B-Q4_K_M.gguf --host 0.0.0.0 --port 8081 "
    "-c 32768 -np 4 --metrics --alias qwen3-8b -ngl 99"
)
OFFICIAL_IMAGE = (
    "/usr/bin/docker run --rm --name llama --gpus all -v /srv/models:/models -p 8082:8080 "
    "ghcr.io/ggml-org/llama.cpp:server-cuda -m /models/gpt-oss-20b-mxfp4.gguf -c 16384 --metrics -ngl 99"
)


def exec_start(argv: str) -> str:
    """``ExecStart`` as ``systemctl show`` prints it: the argv joined by spaces, unquoted."""
    return f"{{ path={argv.split(maxsplit=1)[0]} ; argv[]={argv} ; ignore_errors=no ; start_time=[n/a] ; pid=1 }}"


def unit(name: str, argv: str, active: str = "active", sub: str = "running") -> UnitInfo:
    (found,) = parse_systemctl_show(
        f"Id={name}\nActiveState={active}\nSubState={sub}\nDescription=x\nExecStart={exec_start(argv)}\n"
    )
    return found


def official_container(name: str, args: list[str], host_port: int | None, *, network: str = "bridge") -> ContainerInfo:
    """``docker inspect`` of a container of ghcr.io/ggml-org/llama.cpp:server-cuda (its Dockerfile:
    ``ENTRYPOINT ["/app/llama-server"]``, ``ENV LLAMA_ARG_HOST=0.0.0.0``)."""
    bindings = {"8080/tcp": [{"HostIp": "", "HostPort": str(host_port)}]} if host_port else {}
    found = container_from_inspect(
        {
            "Name": f"/{name}",
            "Path": "/app/llama-server",
            "Args": args,
            "State": {"Status": "running"},
            "Config": {
                "Image": "ghcr.io/ggml-org/llama.cpp:server-cuda",
                "Entrypoint": ["/app/llama-server"],
                "Cmd": args,
                "Env": ["LLAMA_ARG_HOST=0.0.0.0"],
            },
            "HostConfig": {"NetworkMode": network, "PortBindings": bindings},
            "NetworkSettings": {"Ports": bindings},
        }
    )
    assert found is not None
    return found


def llama_answer(port: int, **changes: object) -> LlamaAnswer:
    def ok(path: str, body: bytes) -> HttpResult:
        return HttpResult(url=f"http://h:{port}{path}", kind=FetchKind.OK, status=200, body=body)

    results = {path: HttpResult(url=path, kind=FetchKind.OK, status=404, body=b"") for path in PROBE_PATHS}
    results["/props"] = ok("/props", (LLAMA / "idle-props.json").read_bytes())
    results["/metrics"] = ok("/metrics", (LLAMA / "idle-metrics.txt").read_bytes())
    found = classify_port(port, "llamacpp", results)
    assert isinstance(found, LlamaAnswer)
    return replace(found, **changes)  # type: ignore[arg-type]


def report(
    *findings: PortFinding, units: tuple[UnitInfo, ...] = (), containers: tuple[ContainerInfo, ...] = ()
) -> HostReport:
    return HostReport(
        host="10.0.0.7",
        name="spark7",
        name_how="the host argument",
        findings=findings,
        ssh=SshFindings("spark7", units, containers),
    )


def rendered(host: HostReport) -> str:
    return render_config([host], SshSettings(), written_at=WRITTEN_AT, hosts=[host.host])


def unwrapped(text: str) -> str:
    return re.sub(r"\n#\s+", " ", text)


# --- llama-server's options ---------------------------------------------------------------------------


def test_the_options_sparktui_uses_are_read_under_every_spelling_llama_server_takes() -> None:
    args = parse_server_args(split_command_line(HOST_BUILD))
    assert args == ServerArgs(
        port=8081,
        port_given=True,
        port_raw="8081",
        host="0.0.0.0",
        model="/models/Qwen3-8B-Q4_K_M.gguf",
        alias="qwen3-8b",
        metrics=True,
    )
    long = parse_server_args(
        ["--model", "/m/a.gguf", "--alias", " first , second", "--no-slots", "--api-key", "s3cr3t"]
    )
    assert (long.model, long.alias, long.slots, long.api_key) == ("/m/a.gguf", "first", False, True)
    assert "s3cr3t" not in repr(long)  # the key itself is never kept
    assert parse_server_args(["--models-dir", "/srv/gguf", "--models-max", "2"]).router
    assert parse_server_args(["-hf", "ggml-org/gemma-3-1b-it-GGUF"]).hf_repo == "ggml-org/gemma-3-1b-it-GGUF"


def test_equals_underscores_the_last_one_given_and_a_value_that_looks_like_an_option() -> None:
    args = parse_server_args(["--port=9001", "--models_dir", "/d", "--port", "9002", "-a", "-dash-alias", "--slots"])
    assert (args.port, args.models_dir, args.alias, args.slots) == (9002, "/d", "-dash-alias", True)


@pytest.mark.parametrize(
    ("words", "port", "how"),
    [
        ([], DEFAULT_PORT, "llama-server's default port 8080"),
        (["--port", "8090"], 8090, "`--port 8090`"),
        (["--port", "$PORT"], None, "`--port $PORT`, which init cannot read"),
        (["--port", "70000"], None, "`--port 70000`, which init cannot read"),
        (["--port", "0"], None, "`--port 0`, which init cannot read"),
        (["--port"], DEFAULT_PORT, "llama-server's default port 8080"),  # no value: llama-server refuses it
    ],
)
def test_the_port_and_how_it_was_given(words: list[str], port: int | None, how: str) -> None:
    args = parse_server_args(words)
    assert (args.port, args.port_how()) == (port, how)


def test_the_environment_llama_server_reads_is_read_and_the_command_line_wins_over_it() -> None:
    env = {
        "LLAMA_ARG_PORT": "9010",
        "LLAMA_ARG_HOST": "0.0.0.0",
        "LLAMA_ARG_MODEL": "/m/env.gguf",
        "LLAMA_ARG_ENDPOINT_METRICS": "true",
        "LLAMA_ARG_NO_ENDPOINT_SLOTS": "1",
    }
    args = parse_server_args([], env)
    assert (args.port, args.port_how(), args.host, args.model, args.metrics, args.slots) == (
        9010,
        "`LLAMA_ARG_PORT=9010`",
        "0.0.0.0",
        "/m/env.gguf",
        True,
        False,
    )
    given = parse_server_args(["--port", "9011", "-m", "/m/cli.gguf"], env)
    assert (given.port, given.port_how(), given.model) == (9011, "`--port 9011`", "/m/cli.gguf")
    assert parse_server_args([], {"LLAMA_ARG_ENDPOINT_METRICS": "maybe"}).metrics is False


def test_a_units_environment_and_a_containers_env_give_the_port() -> None:
    (service,) = parse_systemctl_show(
        "Id=llama-env.service\nActiveState=active\nSubState=running\n"
        'Environment=LLAMA_ARG_PORT=9020 "LLAMA_ARG_ALIAS=my model" not-a-variable\n'
        f"ExecStart={exec_start('/opt/llama-server -m /m/a.gguf')}\n"
    )
    assert service.environment == {"LLAMA_ARG_PORT": "9020", "LLAMA_ARG_ALIAS": "my model"}
    run = unit("llama-run.service", "docker run -e LLAMA_ARG_PORT=9000 -p 9021:9000 ghcr.io/ggml-org/llama.cpp:server")
    container = replace(official_container("llama-env", ["-m", "/m/b.gguf"], None), env={"LLAMA_ARG_PORT": "9022"})
    container = replace(container, ports={9022: 9023})
    found = {(launch.unit or launch.container): launch for launch in llama_launches((service, run), (container,))}
    assert (found["llama-env.service"].host_port, found["llama-env.service"].port_how) == (
        9020,
        "`LLAMA_ARG_PORT=9020` in the unit's ExecStart",
    )
    assert found["llama-env.service"].llama is not None and found["llama-env.service"].llama.alias == "my model"
    assert (found["llama-run.service"].host_port, found["llama-run.service"].port_how) == (
        9021,
        "`-p 9021:9000` (`LLAMA_ARG_PORT=9000` in the container) in the unit's ExecStart",
    )
    assert found["llama-env"].host_port == 9023


@pytest.mark.parametrize(
    ("image", "runs"),
    [
        ("ghcr.io/ggml-org/llama.cpp:server", True),
        ("ghcr.io/ggml-org/llama.cpp:server-cuda", True),
        ("ghcr.io/ggml-org/llama.cpp:server-cuda13", True),
        ("ghcr.io/ggerganov/llama.cpp:server-vulkan@sha256:" + "ab" * 32, True),
        ("local/llama.cpp:server-cuda", True),
        ("ghcr.io/ggml-org/llama.cpp:full-cuda", False),  # tools.sh: its first word picks the tool
        ("ghcr.io/ggml-org/llama.cpp:light", False),
        ("vllm/vllm-openai:latest", False),
    ],
)
def test_official_server_images_are_recognised_by_name(image: str, runs: bool) -> None:
    assert is_server_image(image) is runs


# --- command lines ------------------------------------------------------------------------------------


def test_a_source_build_under_systemd_is_read_from_its_exec_start() -> None:
    (argv,) = exec_start_argvs(exec_start(HOST_BUILD))
    command = analyse_llama_command(argv)
    assert command.llama is not None and command.llama.alias == "qwen3-8b"
    assert (command.host_port, command.port_how, command.container) == (8081, "`--port 8081`", None)
    assert analyse_command(argv).vllm is None  # not a vLLM


def test_llama_server_inside_bash_c_with_quoting() -> None:
    argv = split_command_line(
        '/bin/bash -c \'source /etc/llama.env && exec /usr/local/bin/llama-server -m "/m/My Model.gguf" '
        "--port=8085 > /var/log/llama.log 2>&1'"
    )
    assert find_llama_server(argv) == ["-m", "/m/My Model.gguf", "--port=8085"]
    command = analyse_llama_command(argv)
    assert command.llama is not None and (command.llama.model, command.host_port) == ("/m/My Model.gguf", 8085)


def test_the_official_image_takes_llama_servers_options_after_it_and_the_port_is_published() -> None:
    command = analyse_llama_command(split_command_line(OFFICIAL_IMAGE))
    assert command.llama is not None and command.llama.model == "/models/gpt-oss-20b-mxfp4.gguf"
    assert (command.container, command.host_port) == ("llama", 8082)
    assert command.port_how == "`-p 8082:8080` (llama-server's default port 8080 in the container)"


@pytest.mark.parametrize(
    ("line", "port", "how"),
    [
        (
            "docker run --network host ghcr.io/ggml-org/llama.cpp:server -m /m/a.gguf --port 9000",
            9000,
            "`--port 9000` with `--network host`",
        ),
        (
            "docker run --entrypoint /app/llama-server -p 9001:8080 myorg/llama:b6000 -m /m/a.gguf",
            9001,
            "`-p 9001:8080` (llama-server's default port 8080 in the container)",
        ),
        (
            "docker run -p 9002:9999 ubuntu:24.04 /opt/llama-server --port 9999 -m /m/a.gguf",
            9002,
            "`-p 9002:9999` (`--port 9999` in the container)",
        ),
        (
            "docker run ghcr.io/ggml-org/llama.cpp:server-cuda -m /m/a.gguf",
            None,
            "container port 8080 (llama-server's default port 8080) is not published with `-p`",
        ),
        ("llama-server -m /m/a.gguf --host /run/llama.sock", None, "`--host /run/llama.sock` is a UNIX socket"),
    ],
)
def test_where_a_llama_server_answers_on_the_host(line: str, port: int | None, how: str) -> None:
    command = analyse_llama_command(split_command_line(line))
    assert command.llama is not None
    assert command.host_port == port and command.port_how.startswith(how)


def test_a_unit_that_runs_llama_server_is_a_llama_unit_and_not_a_vllm_one_whatever_its_name() -> None:
    fallback = unit("vllm-fallback.service", HOST_BUILD)  # named for what it replaced
    vllm = unit("vllm.service", "/home/spark/.venv/bin/vllm serve Qwen/Qwen3-8B --port 8000")
    script = unit("llama-server-qwen.service", "/usr/local/bin/start.sh")
    ollama = unit("ollama.service", "/usr/local/bin/ollama serve")
    assert is_llama_unit(fallback) and is_vllm_unit(fallback)
    assert not is_llama_unit(vllm)
    assert is_llama_unit(script)  # named for llama-server, runs a script
    assert not is_llama_unit(ollama)
    units = (fallback, vllm, script, ollama)
    assert [launch.unit for launch in vllm_launches(units, ())] == ["vllm.service"]
    assert [(launch.unit, launch.engine, launch.host_port) for launch in llama_launches(units, ())] == [
        ("vllm-fallback.service", "llamacpp", 8081),
        ("llama-server-qwen.service", "llamacpp", None),
    ]


def test_a_unit_that_runs_the_official_image_is_one_launch_with_its_container() -> None:
    service = unit("llama.service", OFFICIAL_IMAGE)
    container = official_container("llama", ["-m", "/models/gpt-oss-20b-mxfp4.gguf", "--metrics"], 8082)
    assert is_llama_container(container)
    (launch,) = llama_launches((service,), (container,))
    assert (launch.unit, launch.container, launch.host_port) == ("llama.service", "llama", 8082)
    assert launch.llama is not None and launch.llama.metrics
    assert vllm_launches((service,), (container,)) == []


def test_a_container_is_read_from_docker_inspect_with_its_port_bindings_or_the_host_network() -> None:
    published = official_container("llama-pub", ["-m", "/m/a.gguf"], 8090)
    host = official_container("llama-host", ["-m", "/m/b.gguf", "--port", "8091"], None, network="host")
    found = {launch.container: launch for launch in llama_launches((), (published, host))}
    assert (found["llama-pub"].host_port, found["llama-pub"].port_how) == (
        8090,
        "port mapping `8090->8080` (llama-server's default port 8080 in the container)",
    )
    assert (found["llama-host"].host_port, found["llama-host"].port_how) == (
        8091,
        "`--port 8091` with `--network host`",
    )
    assert found["llama-pub"].args_from == "the command of container llama-pub (docker inspect)"


# --- the config ---------------------------------------------------------------------------------------


def test_the_llama_server_that_answered_gets_its_unit_and_says_how_it_was_found() -> None:
    props = json.loads((LLAMA / "idle-props.json").read_bytes())
    text = rendered(report(llama_answer(8081), units=(unit("llama-qwen.service", HOST_BUILD),)))
    (instance,) = parse_config(text, env={}).nodes[0].vllm
    assert (instance.engine, instance.port, instance.unit, instance.container) == (
        "llamacpp",
        8081,
        "llama-qwen.service",
        None,
    )
    flat = unwrapped(text)
    assert re.search(
        r'^unit = "llama-qwen.service" +# systemd unit \(systemctl list-units\), active \(running\)$', text, re.M
    )
    assert f"llama-server {props['build_info']} answered /props" in text
    assert "The unit runs `llama-server`, on this port by `--port 8081` in the unit's ExecStart." in flat
    assert "model: /models/Qwen3-8B-Q4_K_M.gguf (-m)" in flat
    assert "No systemd unit or docker container found" not in text
    assert "1 llama-server unit and no llama-server containers" in flat


def test_a_container_of_the_official_image_is_written_as_the_container() -> None:
    container = official_container("llama-gpt", ["-m", "/models/gpt-oss-20b-mxfp4.gguf", "--metrics"], 8082)
    text = rendered(report(llama_answer(8082), containers=(container,)))
    (instance,) = parse_config(text, env={}).nodes[0].vllm
    assert (instance.engine, instance.port, instance.container, instance.unit) == (
        "llamacpp",
        8082,
        "llama-gpt",
        None,
    )
    assert "docker container (docker ps), running" in text


def test_a_live_unit_whose_port_does_not_answer_is_written_as_llamacpp_with_a_comment() -> None:
    down = unit("llama-qwen.service", HOST_BUILD.replace(" --metrics", ""), active="activating", sub="auto-restart")
    text = rendered(report(units=(down,)))
    (instance,) = parse_config(text, env={}).nodes[0].vllm
    assert (instance.name, instance.engine, instance.port, instance.unit) == (
        "qwen3-8b",
        "llamacpp",
        8081,
        "llama-qwen.service",
    )
    flat = unwrapped(text)
    assert "did not answer during init; port from `--port 8081` in the unit's ExecStart" in flat
    assert "activating (auto-restart)" in text
    assert "No --metrics in the ExecStart of llama-qwen.service: add it" in flat


def test_a_stopped_unit_is_left_out_and_a_vllm_and_a_llama_server_each_get_their_own_launch() -> None:
    vllm = unit("vllm-qwen.service", "/home/spark/.venv/bin/vllm serve Qwen/Qwen3-8B --port 8000")
    stopped = unit("llama-old.service", "/opt/llama-server -m /m/old.gguf --port 8095", active="inactive", sub="dead")
    text = rendered(
        report(
            VllmAnswer(8000, "0.19.0", ("Qwen/Qwen3-8B",), needs_api_key=False),
            llama_answer(8081),
            units=(vllm, stopped, unit("llama-qwen.service", HOST_BUILD)),
        )
    )
    by_port = {v.port: v for v in parse_config(text, env={}).nodes[0].vllm}
    assert {port: (v.engine, v.unit) for port, v in by_port.items()} == {
        8000: ("vllm", "vllm-qwen.service"),
        8081: ("llamacpp", "llama-qwen.service"),
    }
    assert "unit llama-old.service (inactive (dead)), runs `llama-server`; not running, port 8095" in unwrapped(text)


def test_a_dead_vllm_on_the_llama_servers_port_does_not_take_it() -> None:
    dead = unit("vllm.service", "/venv/bin/vllm serve m --port 8081", active="activating", sub="auto-restart")
    text = rendered(report(llama_answer(8081), units=(dead, unit("llama-qwen.service", HOST_BUILD))))
    (instance,) = parse_config(text, env={}).nodes[0].vllm
    assert (instance.engine, instance.unit) == ("llamacpp", "llama-qwen.service")
    assert "port 8081 is already taken by another entry" in unwrapped(text)


# --- hostile command lines ----------------------------------------------------------------------------

HOSTILE = [
    "llama-server " + "--port 1 " * 50_000,  # huge
    "llama-server -m '/m/evil\"\n[[nodes]]\nname = \"x.gguf' --alias 'a\x1b[31m\x00\x7f' --port 8081",
    "llama-server --alias '\n[thresholds]\n' --host '127.0.0.1\n# x' --models-dir \"/d\r\n\" --port 8081",
    "bash -c " + "'bash -c " * 40 + "llama-server --port 8081",  # unbalanced quotes, nested deep
    "docker run --name '../../x\n' -p 8081:8080 ghcr.io/ggml-org/llama.cpp:server --alias 'name = 1'",
    "llama-server --port 99999999999999999999999 --port=-1 -m",
    "llama-server -a ,,, --port 8081 --alias",
]


@pytest.mark.parametrize("line", HOSTILE)
def test_a_hostile_command_line_ends_in_a_config_that_loads(line: str) -> None:
    words = split_command_line(line)
    hostile_env = {"LLAMA_ARG_ALIAS": '"\n[y]\x00', "LLAMA_ARG_PORT": "8\n081", "LLAMA_ARG_MODEL": "\x1b]0;x\x07"}
    service = UnitInfo(
        "llama-x.service", "active", "running", "", (tuple(words), tuple(line.split())), environment=hostile_env
    )
    for answered in ((llama_answer(8081, alias="a\n[x]"),), ()):  # named from /props, or from the command line
        text = rendered(report(*answered, units=(service,)))
        (node,) = parse_config(text, env={}).nodes
        assert all(v.engine == "llamacpp" for v in node.vllm)
        assert "\n[thresholds]" not in text and '\n[[nodes]]\nname = "x' not in text and "\n[x]" not in text
        assert "\n[y]" not in text and "\x1b" not in text and "\x00" not in text
        assert all(len(line) <= 2100 for line in text.splitlines())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.text(max_size=40), max_size=30), st.sampled_from(["llama-server", "docker run", "bash -c"]))
def test_any_words_read_as_a_llama_server_command_line_raise_nothing_and_render_a_config_that_loads(
    words: list[str], start: str
) -> None:
    argv = (*start.split(), *words)
    analyse_llama_command(argv)
    parse_server_args(words)
    service = UnitInfo("llama-fuzz.service", "active", "running", "", (argv,))
    parse_config(rendered(report(units=(service,))), env={})
