"""``sparktui init``'s pure half on SGLang: what a port's answers say (``/server_info``, ``sglang:`` names
on ``/metrics``, ``owned_by: "sglang"`` on ``/v1/models``, before vLLM, llama-server and Ollama), its
command line read as SGLang 0.5.23's parser reads it (``engines/sglang/command.py``), found in an
ExecStart, a ``bash -c``, a ``docker run`` or a ``docker inspect`` of an ``lmsysorg/sglang`` image,
matched by host port, and the config written. Hostile answers and command lines end in a config that
loads, never in a traceback."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparktui.config import parse_config
from sparktui.discovery.commands import (
    analyse_command,
    analyse_llama_command,
    analyse_sglang_command,
    exec_start_argvs,
    find_sglang_server,
    split_command_line,
)
from sparktui.discovery.launches import (
    is_llama_unit,
    is_sglang_container,
    is_sglang_unit,
    is_vllm_unit,
    llama_launches,
    sglang_launches,
    vllm_launches,
)
from sparktui.discovery.names import SGLANG_NAME
from sparktui.discovery.probes import (
    DEFAULT_EXPORTER_PORTS,
    DEFAULT_LLAMACPP_PORTS,
    DEFAULT_SERVICE_PORTS,
    DEFAULT_SGLANG_PORTS,
    DEFAULT_VLLM_PORTS,
    PROBE_PATHS,
    NoAnswer,
    OllamaAnswer,
    SglangAnswer,
    VllmAnswer,
    classify_port,
    port_roles,
    wants_health,
)
from sparktui.discovery.render import HostReport
from sparktui.discovery.units import ContainerInfo, UnitInfo, container_from_inspect
from sparktui.engines.sglang.command import DEFAULT_PORT, SglangArgs, is_server_image, parse_server_args
from sparktui.engines.sglang.info import read_server_info
from sparktui.model.observations import FetchKind, HttpResult
from tests.support.sglang_server import DATA, VERSION, server_info
from tests.unit.test_discovery_llamacpp_launch import exec_start, rendered, report, unit, unwrapped

METRICS = (DATA / "single-t0.txt").read_bytes()
# How SGLang's docs start it: the module under a venv's python, the newer CLI, the official image.
LAUNCH = (
    "/opt/sglang/.venv/bin/python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B --host 0.0.0.0 "
    "--port 30001 --tp 2 --enable-metrics --mem-fraction-static 0.8"
)
SERVE = "/usr/local/bin/sglang serve Qwen/Qwen3-32B --served-model-name qwen32 --port 30002 --dp-size 2"
OFFICIAL_IMAGE = (
    "/usr/bin/docker run --rm --name sglang --gpus all --shm-size 32g -p 30003:30000 "
    "-v /srv/hf:/root/.cache/huggingface --ipc=host lmsysorg/sglang:latest "
    "python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B --host 0.0.0.0 --port 30000 --enable-metrics"
)


def answer(path: str, status: int, body: bytes = b"") -> HttpResult:
    return HttpResult(url=f"http://h:1{path}", kind=FetchKind.OK, status=status, body=body)


def sglang_results(
    port: int = 30000, *, info: dict[str, object] | None = None, metrics: bool = True
) -> dict[str, HttpResult]:
    """What a real SGLang 0.5.23 answers init's paths (``tests/support/sglang_server.py``'s bodies)."""
    found = info if info is not None else server_info("Qwen/Qwen3-8B", port=port, enable_metrics=metrics)
    model = str(found.get("served_model_name", "Qwen/Qwen3-8B"))
    results = {path: answer(path, 404, b'{"detail":"Not Found"}') for path in PROBE_PATHS if path != "/health"}
    results["/server_info"] = answer("/server_info", 200, json.dumps(found).encode())
    card = {"id": model, "object": "model", "owned_by": "sglang", "max_model_len": 32768}
    results["/v1/models"] = answer("/v1/models", 200, json.dumps({"object": "list", "data": [card]}).encode())
    results["/api/tags"] = answer("/api/tags", 200, json.dumps({"models": [{"name": model, "model": model}]}).encode())
    if metrics:
        results["/metrics"] = answer("/metrics", 200, METRICS)
    return results


def sglang(port: int = 30000, **kwargs: object) -> SglangAnswer:
    found = classify_port(port, "sglang", sglang_results(port, **kwargs))  # type: ignore[arg-type]
    assert isinstance(found, SglangAnswer)
    return found


def official_container(name: str, args: list[str], host_port: int | None, *, network: str = "bridge") -> ContainerInfo:
    """``docker inspect`` of a container of lmsysorg/sglang (no entrypoint: its command is the launch)."""
    bindings = {"30000/tcp": [{"HostIp": "", "HostPort": str(host_port)}]} if host_port else {}
    found = container_from_inspect(
        {
            "Name": f"/{name}",
            "Path": "python3",
            "Args": ["-m", "sglang.launch_server", *args],
            "State": {"Status": "running"},
            "Config": {
                "Image": "lmsysorg/sglang:v0.5.4-cu129",
                "Cmd": ["python3", "-m", "sglang.launch_server", *args],
            },
            "HostConfig": {"NetworkMode": network, "PortBindings": bindings},
            "NetworkSettings": {"Ports": bindings},
        }
    )
    assert found is not None
    return found


# --- what a port's answers say ------------------------------------------------------------------------


def test_an_sglang_is_recognised_by_its_server_info_and_read_from_it() -> None:
    found = sglang(30000, info=server_info("Qwen/Qwen3-32B", port=30000, tp_size=2, dp_size=2))
    assert (found.port, found.recognised_by, found.version, found.metrics, found.needs_api_key) == (
        30000,
        "/server_info",
        VERSION,
        True,
        False,
    )
    assert found.info is not None
    assert (found.info.model_path, found.info.served_model_name, found.info.tp_size, found.info.dp_size) == (
        "Qwen/Qwen3-32B",
        None,  # the model path: none was given
        2,
        2,
    )
    assert found.models == ("Qwen/Qwen3-32B",)


def test_an_sglang_answers_ollamas_api_tags_too_and_is_still_an_sglang() -> None:
    results = sglang_results()
    assert isinstance(classify_port(11434, "ollama", results), SglangAnswer)
    del results["/server_info"], results["/metrics"], results["/v1/models"]
    assert isinstance(classify_port(11434, "ollama", results), OllamaAnswer)  # without them: Ollama's list


def test_sglang_names_on_metrics_say_sglang_when_server_info_wants_a_key() -> None:
    results = sglang_results()
    results["/server_info"] = answer("/server_info", 401, b'{"error":"Unauthorized"}')
    results["/v1/models"] = answer("/v1/models", 401, b'{"error":"Unauthorized"}')
    found = classify_port(30000, "sglang", results)
    assert isinstance(found, SglangAnswer)
    assert (found.recognised_by, found.version, found.needs_api_key, found.models) == ("/metrics", "unknown", True, ())


def test_owned_by_sglang_on_v1_models_is_enough() -> None:
    results = sglang_results(metrics=False)
    results["/server_info"] = answer("/server_info", 500, b"Internal Server Error")
    found = classify_port(8123, "any", results)
    assert isinstance(found, SglangAnswer) and (found.recognised_by, found.metrics) == ("/v1/models", False)


def test_a_vllm_serving_a_llama_model_is_a_vllm_and_a_vllm_never_reads_as_sglang() -> None:
    results = {path: answer(path, 404) for path in PROBE_PATHS}
    results["/version"] = answer("/version", 200, b'{"version":"0.19.0"}')
    card = {"id": "meta-llama/Llama-3.1-8B-Instruct", "object": "model", "owned_by": "vllm"}
    results["/v1/models"] = answer("/v1/models", 200, json.dumps({"data": [card]}).encode())
    results["/metrics"] = answer(
        "/metrics", 200, b"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 0\n"
    )
    results["/server_info"] = answer("/server_info", 200, b'{"vllm_config": "model=meta-llama/Llama-3.1-8B"}')
    found = classify_port(8000, "vllm", results)
    assert isinstance(found, VllmAnswer) and found.models == ("meta-llama/Llama-3.1-8B-Instruct",)


def test_health_is_never_asked_of_an_sglang_nor_of_a_port_where_nothing_answered() -> None:
    assert "/server_info" in PROBE_PATHS
    assert not wants_health(sglang_results())
    refused = {path: HttpResult(url=path, kind=FetchKind.REFUSED) for path in PROBE_PATHS if path != "/health"}
    assert not wants_health(refused)
    other = {path: answer(path, 404) for path in PROBE_PATHS if path != "/health"}
    assert wants_health(other)
    found = classify_port(30000, "sglang", refused)
    assert isinstance(found, NoAnswer) and "refused" in found.reason


def test_30000_is_probed_for_an_sglang_by_default() -> None:
    roles = port_roles(
        DEFAULT_VLLM_PORTS,
        DEFAULT_SERVICE_PORTS,
        DEFAULT_EXPORTER_PORTS,
        llamacpp=DEFAULT_LLAMACPP_PORTS,
        sglang=DEFAULT_SGLANG_PORTS,
    )
    assert dict(roles)[30000] == "sglang" and dict(roles)[8080] == "llamacpp"


HOSTILE_INFO: list[object] = [
    {"version": "0.5\n[x]", "model_path": "/m/\x1b[31mevil\n[[nodes]]", "tp_size": 1, "served_model_name": '"\n[y]'},
    {"version": "1", "model_path": "m", "tp_size": True},  # a bool is no count: not SGLang's
    {"version": "1", "model_path": "m", "tp_size": 10**30, "dp_size": -3, "port": 99999},
    {"version": ["x"], "model_path": {"a": 1}, "tp_size": "2"},
    [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]],
    "not json",
    {"version": "x" * 100_000, "model_path": "y" * 100_000, "tp_size": 1},
]


@pytest.mark.parametrize("info", HOSTILE_INFO)
def test_a_hostile_server_info_ends_in_a_config_that_loads(info: object) -> None:
    results = sglang_results()
    body = info.encode() if isinstance(info, str) else json.dumps(info).encode()
    results["/server_info"] = answer("/server_info", 200, body)
    read_server_info(body)
    found = classify_port(30000, "sglang", results)
    assert isinstance(found, SglangAnswer)  # its /metrics still says so
    text = rendered(report(found))
    (instance,) = parse_config(text, env={}).nodes[0].vllm
    assert instance.engine == "sglang" and instance.port == 30000
    assert "\n[x]" not in text and "\n[y]" not in text and '\n[[nodes]]\nname = "x' not in text and "\x1b" not in text
    assert all(len(line) <= 2100 for line in text.splitlines())


# --- SGLang's options ---------------------------------------------------------------------------------


def test_the_options_sparktui_uses_are_read_under_every_spelling_sglangs_parser_takes() -> None:
    (args,) = (parse_server_args(find_sglang_server(split_command_line(LAUNCH)) or []),)
    assert args == SglangArgs(
        port=30001,
        port_given=True,
        port_raw="30001",
        host="0.0.0.0",
        model_path="Qwen/Qwen3-8B",
        enable_metrics=True,
        tp_size=2,
    )
    long = parse_server_args(
        [
            "--model=/m/a",
            "--tensor-parallel-size",
            "4",
            "--data-parallel-size=2",
            "--served-model-name",
            "a",
            "--api-key",
            "s3cr3t",
            "--config",
            "/etc/sglang.yaml",
        ]
    )
    assert (long.model_path, long.tp_size, long.dp_size, long.served_model_name, long.api_key, long.config_file) == (
        "/m/a",
        4,
        2,
        "a",
        True,
        "/etc/sglang.yaml",
    )
    assert "s3cr3t" not in repr(long)  # the key itself is never kept
    served = parse_server_args(find_sglang_server(split_command_line(SERVE)) or [])
    assert (served.model_path, served.served_model_name, served.port, served.dp_size) == (
        "Qwen/Qwen3-32B",
        "qwen32",
        30002,
        2,
    )


def test_the_last_one_given_wins_and_a_word_starting_with_a_dash_is_no_value() -> None:
    args = parse_server_args(["--port", "30005", "--port=30006", "--served-model-name", "--enable-metrics"])
    assert (args.port, args.served_model_name, args.enable_metrics) == (30006, None, True)
    assert parse_server_args(["--model_path", "/m", "--tp-size", "0"]) == SglangArgs()  # argparse takes no `_`


@pytest.mark.parametrize(
    ("words", "port", "how"),
    [
        ([], DEFAULT_PORT, "SGLang's default port 30000"),
        (["--port", "30010"], 30010, "`--port 30010`"),
        (["--port", "$PORT"], None, "`--port $PORT`, which init cannot read"),
        (["--port", "70000"], None, "`--port 70000`, which init cannot read"),
    ],
)
def test_the_port_and_how_it_was_given(words: list[str], port: int | None, how: str) -> None:
    args = parse_server_args(words)
    assert (args.port, args.port_how()) == (port, how)


def test_it_listens_on_loopback_only_unless_given_another_host() -> None:
    assert parse_server_args([]).local_only == "127.0.0.1"  # SGLang's default --host
    assert parse_server_args(["--host", "0.0.0.0"]).local_only is None


@pytest.mark.parametrize(
    ("line", "found"),
    [
        ("python -m sglang.launch_server --port 1", ["--port", "1"]),
        ("/usr/bin/python3 -msglang.launch_server --port 1", ["--port", "1"]),
        ("/venv/bin/sglang serve m --port 1", ["m", "--port", "1"]),
        ("python3 /src/sglang/python/sglang/launch_server.py --port 1", ["--port", "1"]),
        ("bash -c 'cd /x && exec python3 -m sglang.launch_server --port 1 > /var/log/s.log 2>&1'", ["--port", "1"]),
        ("python3 -m sglang.bench_serving --port 1", None),
        ("sglang version", None),
        ("vllm serve m --port 1", None),
    ],
)
def test_an_sglang_command_line_is_found_in_its_usual_forms(line: str, found: list[str] | None) -> None:
    assert find_sglang_server(split_command_line(line)) == found


@pytest.mark.parametrize(
    ("image", "official"),
    [
        ("lmsysorg/sglang:latest", True),
        ("lmsysorg/sglang:v0.5.4-cu129", True),
        ("docker.io/lmsysorg/sglang@sha256:" + "ab" * 32, True),
        ("lmsysorg/sglang", True),
        ("lmsysorg/sglang-router:latest", False),
        ("vllm/vllm-openai:latest", False),
    ],
)
def test_official_images_are_recognised_by_name(image: str, official: bool) -> None:
    assert is_server_image(image) is official


# --- command lines ------------------------------------------------------------------------------------


def test_a_venv_launch_under_systemd_is_read_from_its_exec_start() -> None:
    (argv,) = exec_start_argvs(exec_start(LAUNCH))
    command = analyse_sglang_command(argv)
    assert command.sglang is not None and command.sglang.tp_size == 2
    assert (command.host_port, command.port_how, command.runs) == (30001, "`--port 30001`", "an SGLang server")
    assert analyse_command(argv).vllm is None and analyse_llama_command(argv).llama is None


@pytest.mark.parametrize(
    ("line", "port", "how"),
    [
        (OFFICIAL_IMAGE, 30003, "`-p 30003:30000` (`--port 30000` in the container)"),
        (
            "docker run --network host lmsysorg/sglang:latest python3 -m sglang.launch_server --model m --port 30004",
            30004,
            "`--port 30004` with `--network host`",
        ),
        (
            "docker run -p 30005:30000 lmsysorg/sglang python3 -m sglang.launch_server --model-path m",
            30005,
            "`-p 30005:30000` (SGLang's default port 30000 in the container)",
        ),
        (
            "docker run lmsysorg/sglang:latest python3 -m sglang.launch_server --model-path m",
            None,
            "container port 30000 (SGLang's default port 30000) is not published with `-p`",
        ),
    ],
)
def test_where_an_sglang_answers_on_the_host(line: str, port: int | None, how: str) -> None:
    command = analyse_sglang_command(split_command_line(line))
    assert command.sglang is not None
    assert (command.host_port, command.port_how) == (port, how)


def test_units_are_told_apart_by_what_they_run_whatever_their_names() -> None:
    launch = unit("vllm-old.service", LAUNCH)  # named for what it replaced
    llama_on_sglang_name = unit("sglang-fallback.service", "/opt/llama-server -m /m/a.gguf --port 8081")
    vllm = unit("vllm.service", "/venv/bin/vllm serve meta-llama/Llama-3.1-8B --port 8000")
    script = unit("sglang-qwen.service", "/usr/local/bin/start.sh")
    sglang_llama = unit("sg.service", "python3 -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B")
    assert is_sglang_unit(launch) and is_vllm_unit(launch) and not is_llama_unit(launch)
    assert not is_sglang_unit(llama_on_sglang_name) and is_llama_unit(llama_on_sglang_name)
    assert not is_sglang_unit(vllm) and is_sglang_unit(script) and is_sglang_unit(sglang_llama)
    assert not is_llama_unit(sglang_llama)
    units = (launch, llama_on_sglang_name, vllm, script, sglang_llama)
    assert [launch.unit for launch in vllm_launches(units, ())] == ["vllm.service"]
    assert [launch.unit for launch in llama_launches(units, ())] == ["sglang-fallback.service"]
    assert [(found.unit, found.engine, found.host_port) for found in sglang_launches(units, ())] == [
        ("vllm-old.service", "sglang", 30001),
        ("sglang-qwen.service", "sglang", None),
        ("sg.service", "sglang", 30000),
    ]


def test_a_unit_that_runs_the_official_image_is_one_launch_with_its_container() -> None:
    service = unit("sglang.service", OFFICIAL_IMAGE)
    container = official_container("sglang", ["--model-path", "Qwen/Qwen3-8B", "--enable-metrics"], 30003)
    assert is_sglang_container(container)
    (launch,) = sglang_launches((service,), (container,))
    assert (launch.unit, launch.container, launch.host_port) == ("sglang.service", "sglang", 30003)
    assert launch.sglang is not None and launch.sglang.enable_metrics
    assert vllm_launches((service,), (container,)) == [] and llama_launches((service,), (container,)) == []


def test_a_container_is_read_from_docker_inspect_with_its_port_bindings_or_the_host_network() -> None:
    published = official_container("sglang-pub", ["--model-path", "m"], 30010)
    host = official_container("sglang-host", ["--model-path", "m", "--port", "30011"], None, network="host")
    found = {launch.container: launch for launch in sglang_launches((), (published, host))}
    assert (found["sglang-pub"].host_port, found["sglang-pub"].port_how) == (
        30010,
        "port mapping `30010->30000` (SGLang's default port 30000 in the container)",
    )
    assert (found["sglang-host"].host_port, found["sglang-host"].port_how) == (
        30011,
        "`--port 30011` with `--network host`",
    )


# --- the config ---------------------------------------------------------------------------------------


def test_the_sglang_that_answered_gets_its_unit_and_says_how_it_was_found() -> None:
    info = server_info("Qwen/Qwen3-8B", port=30001, tp_size=2)
    text = rendered(report(sglang(30001, info=info), units=(unit("sglang-qwen.service", LAUNCH),)))
    (instance,) = parse_config(text, env={}).nodes[0].vllm
    assert (instance.name, instance.engine, instance.port, instance.unit, instance.container) == (
        "Qwen3-8B",
        "sglang",
        30001,
        "sglang-qwen.service",
        None,
    )
    flat = unwrapped(text)
    assert re.search(r'^engine = "sglang" +# SGLang \(/server_info\)$', text, re.M)
    assert f"SGLang {VERSION} answered /server_info; serves Qwen/Qwen3-8B" in text
    assert "The unit runs an SGLang server, on this port by `--port 30001` in the unit's ExecStart." in flat
    assert "It runs tensor parallel 2 (/server_info)." in flat
    assert "model: Qwen/Qwen3-8B (--model-path)" in flat
    assert "--enable-metrics" not in text  # it has it
    assert "1 SGLang unit and no SGLang containers" in flat


def test_an_sglang_without_metrics_is_written_with_a_comment_saying_to_enable_them() -> None:
    no_ssh = HostReport("10.0.0.7", "spark7", "the host argument", (sglang(30000, metrics=False),), None, "--no-ssh")
    text = rendered(no_ssh)
    (instance,) = parse_config(text, env={}).nodes[0].vllm
    assert (instance.name, instance.engine, instance.port) == ("Qwen3-8B", "sglang", 30000)
    assert "start SGLang with --enable-metrics for numbers" in unwrapped(text)
    assert "SSH discovery was skipped for this host" in unwrapped(text)


def test_a_served_model_name_names_it_and_nothing_known_names_it_sglang() -> None:
    named = sglang(30000, info=server_info("Qwen/Qwen3-8B", port=30000, served_model_name="qwen-chat"))
    (instance,) = parse_config(rendered(report(named)), env={}).nodes[0].vllm
    assert instance.name == "qwen-chat"
    results = sglang_results()
    results["/server_info"] = answer("/server_info", 401, b"")
    results["/v1/models"] = answer("/v1/models", 401, b"")
    bare = classify_port(30000, "sglang", results)
    assert isinstance(bare, SglangAnswer)
    text = rendered(report(bare))
    (instance,) = parse_config(text, env={}).nodes[0].vllm
    assert instance.name == SGLANG_NAME
    assert '# api_key_env = "SGLANG_API_KEY"' in text


def test_a_live_unit_whose_port_does_not_answer_is_written_as_sglang_with_comments() -> None:
    line = LAUNCH.replace(" --enable-metrics", "").replace("--host 0.0.0.0 ", "")
    down = unit("sglang-qwen.service", line, active="activating", sub="auto-restart")
    text = rendered(report(units=(down,)))
    (instance,) = parse_config(text, env={}).nodes[0].vllm
    assert (instance.name, instance.engine, instance.port, instance.unit) == (
        "Qwen3-8B",
        "sglang",
        30001,
        "sglang-qwen.service",
    )
    flat = unwrapped(text)
    assert "did not answer during init; port from `--port 30001` in the unit's ExecStart" in flat
    assert "No --enable-metrics in the ExecStart of sglang-qwen.service: add it for numbers" in flat
    assert "It listens on 127.0.0.1 only (SGLang's default --host)" in flat


def test_a_vllm_and_an_sglang_each_get_their_own_launch_and_a_stopped_one_is_left_out() -> None:
    vllm = unit("vllm-qwen.service", "/home/spark/.venv/bin/vllm serve Qwen/Qwen3-8B --port 8000")
    stopped = unit("sglang-old.service", "python3 -m sglang.launch_server --port 30009", active="inactive", sub="dead")
    text = rendered(
        report(
            VllmAnswer(8000, "0.19.0", ("Qwen/Qwen3-8B",), needs_api_key=False),
            sglang(30001),
            units=(vllm, stopped, unit("sglang-qwen.service", LAUNCH)),
        )
    )
    by_port = {v.port: v for v in parse_config(text, env={}).nodes[0].vllm}
    assert {port: (v.engine, v.unit) for port, v in by_port.items()} == {
        8000: ("vllm", "vllm-qwen.service"),
        30001: ("sglang", "sglang-qwen.service"),
    }
    assert len({v.name for v in by_port.values()}) == 2  # both serve Qwen3-8B: the names are made unique
    assert "unit sglang-old.service (inactive (dead)), runs an SGLang server; not running, port 30009" in unwrapped(
        text
    )


# --- hostile command lines ----------------------------------------------------------------------------

HOSTILE = [
    "python3 -m sglang.launch_server " + "--port 1 " * 50_000,  # huge
    "python3 -m sglang.launch_server --model-path '/m/evil\"\n[[nodes]]\nname = \"x' --port 30001",
    "sglang serve '\n[thresholds]\n' --served-model-name 'a\x1b[31m\x00\x7f' --host '127.0.0.1\n# x' --port 30001",
    "bash -c " + "'bash -c " * 40 + "python3 -m sglang.launch_server --port 30001",  # nested deep, unbalanced
    "docker run --name '../../x\n' -p 30001:30000 lmsysorg/sglang python3 -m sglang.launch_server --model 'name = 1'",
    "python3 -m sglang.launch_server --port 99999999999999999999999 --port=-1 --tp-size 99999999999 --model-path",
    "sglang serve --served-model-name --config '\n[y]' --port 30001",
]


@pytest.mark.parametrize("line", HOSTILE)
def test_a_hostile_command_line_ends_in_a_config_that_loads(line: str) -> None:
    words = split_command_line(line)
    service = UnitInfo("sglang-x.service", "active", "running", "", (tuple(words), tuple(line.split())))
    hostile_info = server_info("/m/a\n[x]", port=30001, served_model_name='"\n[y]\x00')
    for answered in ((sglang(30001, info=hostile_info),), ()):  # named from /server_info, or the command line
        text = rendered(report(*answered, units=(service,)))
        (node,) = parse_config(text, env={}).nodes
        assert all(v.engine == "sglang" for v in node.vllm)
        assert "\n[thresholds]" not in text and '\n[[nodes]]\nname = "x' not in text and "\n[x]" not in text
        assert "\n[y]" not in text and "\x1b" not in text and "\x00" not in text
        assert all(len(line) <= 2100 for line in text.splitlines())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.text(max_size=40), max_size=30),
    st.sampled_from(["python3 -m sglang.launch_server", "sglang serve", "docker run lmsysorg/sglang", "bash -c"]),
)
def test_any_words_read_as_an_sglang_command_line_raise_nothing_and_render_a_config_that_loads(
    words: list[str], start: str
) -> None:
    argv = (*start.split(), *words)
    analyse_sglang_command(argv)
    parse_server_args(words)
    service = UnitInfo("sglang-fuzz.service", "active", "running", "", (argv,))
    parse_config(rendered(report(units=(service,))), env={})


@settings(max_examples=100, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=20),
        lambda c: st.lists(c) | st.dictionaries(st.text(max_size=12), c),
        max_leaves=20,
    )
)
def test_any_json_on_server_info_raises_nothing(found: object) -> None:
    body = json.dumps(found).encode()
    read_server_info(body)
    info = dict(found) if isinstance(found, dict) else {}
    read_server_info(json.dumps({"version": "1", "model_path": "m", "tp_size": 1, **info}).encode())


def test_an_sglang_port_that_wants_a_key_and_has_no_metrics_says_so() -> None:
    results = {path: answer(path, 401, b'{"error":"Unauthorized"}') for path in PROBE_PATHS if path != "/health"}
    results["/metrics"] = answer("/metrics", 404, b'{"detail":"Not Found"}')
    found = classify_port(30000, "sglang", results)
    assert isinstance(found, NoAnswer) and "wants an API key" in found.reason


def test_a_launch_with_no_model_is_named_from_its_container_less_sglang() -> None:
    container = official_container("sglang-coder", ["--port", "30000"], 30020)
    text = rendered(report(containers=(container,)))
    (instance,) = parse_config(text, env={}).nodes[0].vllm
    assert (instance.name, instance.engine, instance.port, instance.container) == (
        "coder",
        "sglang",
        30020,
        "sglang-coder",
    )
    assert re.search(r'^name = "coder" +# from the container name$', text, re.M)
