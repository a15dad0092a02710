"""``sparktui init``'s pure half on TensorRT-LLM's ``trtllm-serve`` and NIM for LLMs: what a port's
answers say (NIM's ``/v1/version`` or ``/v1/health/ready``; ``trtllm_`` names on ``/prometheus/metrics``
or ``owned_by: "tensorrt_llm"``; both before ``/version`` is read as a vLLM's), that ``/metrics`` is not
asked of a trtllm-serve, the ports probed, and the config written. Hostile answers end in a config that
loads, never in a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparktui.cli import build_parser
from sparktui.config import parse_config
from sparktui.discovery.commands import analyse_trtllm_command, split_command_line
from sparktui.discovery.launches import (
    is_llama_unit,
    is_nim_container,
    is_nim_unit,
    is_sglang_unit,
    is_trtllm_container,
    is_trtllm_unit,
    is_vllm_unit,
    nim_launches,
    trtllm_launches,
    vllm_launches,
)
from sparktui.discovery.names import NIM_NAME, TRTLLM_NAME
from sparktui.discovery.probes import (
    DEFAULT_NIM_PORTS,
    DEFAULT_TRTLLM_PORTS,
    DEFAULT_VLLM_PORTS,
    FIRST_PATHS,
    METRICS_PATH,
    PROBE_PATHS,
    ExporterAnswer,
    NimAnswer,
    NoAnswer,
    TrtllmAnswer,
    VllmAnswer,
    classify_port,
    port_roles,
    wants_health,
    wants_metrics,
)
from sparktui.discovery.units import ContainerInfo, UnitInfo, container_from_inspect
from sparktui.engines.nim.command import NimContainer, is_nim_image, read_container
from sparktui.engines.trtllm import command as trtllm_command
from sparktui.engines.trtllm.command import TrtllmArgs
from sparktui.headless.init import UsageError, request_from_args
from sparktui.model.observations import FetchKind, HttpResult
from tests.unit.test_discovery_llamacpp_launch import rendered, report, unit, unwrapped

TRTLLM_METRICS = (Path(__file__).resolve().parents[1] / "data" / "trtllm" / "plain-t0.txt").read_bytes()
TRTLLM_MODEL = "nvidia/Llama-3.3-70B-Instruct-FP4"
NIM_MODEL = "meta/llama-3.1-8b-instruct"
NODE_METRICS = (
    b"# TYPE node_load1 gauge\nnode_load1 0.5\n# TYPE node_cpu_seconds_total counter\nnode_cpu_seconds_total 1\n"
)


def answer(path: str, status: int, body: bytes = b"") -> HttpResult:
    return HttpResult(url=f"http://h:1{path}", kind=FetchKind.OK, status=status, body=body)


def models(model: str, owned_by: str) -> bytes:
    card = {"id": model, "object": "model", "owned_by": owned_by}
    return json.dumps({"object": "list", "data": [card]}).encode()


def first_round() -> dict[str, HttpResult]:
    return {path: answer(path, 404, b'{"detail":"Not Found"}') for path in FIRST_PATHS}


def trtllm_results(*, metrics: bool = True, owned_by: str = "tensorrt_llm") -> dict[str, HttpResult]:
    """What trtllm-serve answers init's first round (``tensorrt_llm/serve/openai_server.py``)."""
    results = first_round()
    results["/version"] = answer("/version", 200, b'{"version": "1.2.0rc2"}')
    results["/v1/models"] = answer("/v1/models", 200, models(TRTLLM_MODEL, owned_by))
    if metrics:
        results["/prometheus/metrics"] = answer("/prometheus/metrics", 200, TRTLLM_METRICS)
    return results


def nim_results(*, ready: int = 200, release: bool = True) -> dict[str, HttpResult]:
    """What NIM answers (its 2.x API reference); ``ready``: ``/v1/health/ready``'s status."""
    results = first_round()
    if release:
        results["/v1/version"] = answer("/v1/version", 200, b'{"release": "2.0.1", "api": "1.0.0"}')
    body = b'{"object": "health.response", "message": "NIM is ready"}' if ready == 200 else b""
    results["/v1/health/ready"] = answer("/v1/health/ready", ready, body)
    results["/v1/models"] = answer("/v1/models", 200, models(NIM_MODEL, "system"))
    return results


def vllm_results() -> dict[str, HttpResult]:
    results = first_round()
    results["/version"] = answer("/version", 200, b'{"version": "0.33.0"}')
    results["/v1/models"] = answer("/v1/models", 200, models("Qwen/Qwen3-8B", "vllm"))
    return results


# --- recognition and order ----------------------------------------------------------------------------


def test_a_trtllm_serve_is_recognised_by_its_prometheus_metrics_before_its_version_reads_as_a_vllms() -> None:
    found = classify_port(8355, "trtllm", trtllm_results())
    assert found == TrtllmAnswer(
        port=8355, recognised_by="/prometheus/metrics", version="1.2.0rc2", models=(TRTLLM_MODEL,), metrics=True
    )
    # trtllm_ names say so whatever /v1/models says
    assert isinstance(classify_port(8355, "any", trtllm_results(owned_by="whoever")), TrtllmAnswer)


def test_owned_by_tensorrt_llm_is_enough_without_perf_metrics() -> None:
    found = classify_port(9000, "any", trtllm_results(metrics=False))
    assert isinstance(found, TrtllmAnswer)
    assert (found.recognised_by, found.metrics) == ("/v1/models", False)


def test_a_vllm_is_still_a_vllm_and_trtllm_names_on_its_metrics_do_not_make_it_one() -> None:
    results = vllm_results()
    assert isinstance(classify_port(8000, "vllm", results), VllmAnswer)
    results[METRICS_PATH] = answer(METRICS_PATH, 200, TRTLLM_METRICS)  # not trtllm-serve's path
    assert isinstance(classify_port(8000, "vllm", results), VllmAnswer)


def test_metrics_is_never_asked_of_a_trtllm_serve_nor_where_nothing_answered() -> None:
    assert METRICS_PATH not in FIRST_PATHS and "/prometheus/metrics" in FIRST_PATHS
    assert PROBE_PATHS[-2:] == (METRICS_PATH, "/health")
    assert not wants_metrics(trtllm_results())
    assert not wants_metrics(trtllm_results(metrics=False))
    refused = {path: HttpResult(url=path, kind=FetchKind.REFUSED) for path in FIRST_PATHS}
    assert not wants_metrics(refused)
    assert wants_metrics(vllm_results()) and wants_metrics(nim_results())
    assert wants_health(trtllm_results())  # trtllm-serve's /health is a plain 200


def test_a_nim_is_recognised_by_its_v1_version_before_the_vllm_inside_it() -> None:
    results = nim_results()
    results["/version"] = answer("/version", 200, b'{"version": "0.33.0"}')  # a vLLM's route passed through
    found = classify_port(8000, "vllm", results)
    assert found == NimAnswer(port=8000, recognised_by="/v1/version", release="2.0.1", models=(NIM_MODEL,), ready=True)


def test_a_loading_nim_is_a_nim_not_ready_and_its_ready_route_alone_says_nim() -> None:
    loading = classify_port(8000, "nim", nim_results(ready=503))
    assert isinstance(loading, NimAnswer) and not loading.ready and loading.release == "2.0.1"
    bare = classify_port(8000, "nim", nim_results(release=False))
    assert isinstance(bare, NimAnswer) and (bare.recognised_by, bare.release) == ("/v1/health/ready", "unknown")


def test_a_server_answering_every_path_with_200_is_not_a_nim() -> None:
    """node_exporter's landing page answers any path: a 200 that is no NIM health response is not one."""
    results = {path: answer(path, 200, b"<html>Node Exporter</html>") for path in FIRST_PATHS}
    results[METRICS_PATH] = answer(METRICS_PATH, 200, NODE_METRICS)
    assert isinstance(classify_port(9100, "exporter", results), ExporterAnswer)
    vllm = vllm_results()
    vllm["/v1/health/ready"] = answer("/v1/health/ready", 503)
    assert isinstance(classify_port(8000, "vllm", vllm), VllmAnswer)


HOSTILE: list[bytes] = [
    b'{"version": "1\\n[x]", "release": "2\\n[[nodes]]\\nname = \\"x"}',
    b'{"version": ["1"], "release": {"a": 1}}',
    b"[" * 5000 + b"]" * 5000,
    b"not json",
    json.dumps({"version": "v" * 100_000, "release": "r" * 100_000}).encode(),
]


@pytest.mark.parametrize("body", HOSTILE)
def test_hostile_answers_end_in_a_config_that_loads(body: bytes) -> None:
    trtllm = trtllm_results()
    trtllm["/version"] = answer("/version", 200, body)
    trtllm["/v1/models"] = answer("/v1/models", 200, models('m\n[x]\x1b[31m"', "tensorrt_llm"))
    nim = nim_results(ready=503)
    nim["/v1/version"] = answer("/v1/version", 200, body)
    findings = [classify_port(8355, "trtllm", trtllm), classify_port(8000, "nim", nim)]
    text = rendered(report(*findings))
    engines = [(v.engine, v.port) for v in parse_config(text, env={}).nodes[0].vllm]
    assert ("trtllm", 8355) in engines
    assert "\n[x]" not in text and '\n[[nodes]]\nname = "x' not in text and "\x1b" not in text
    assert all(len(line) <= 2100 for line in text.splitlines())


# --- ports ---------------------------------------------------------------------------------------------


def test_the_playbooks_trtllm_ports_and_nims_are_probed_and_8000_stays_a_vllm_port() -> None:
    assert DEFAULT_TRTLLM_PORTS == (8355, 8356) and DEFAULT_NIM_PORTS == (8000,)
    roles = dict(port_roles(DEFAULT_VLLM_PORTS, (), (), trtllm=DEFAULT_TRTLLM_PORTS, nim=DEFAULT_NIM_PORTS))
    assert (roles[8355], roles[8356], roles[8000]) == ("trtllm", "trtllm", "vllm")
    assert dict(port_roles((), (), (), nim=(8000,)))[8000] == "nim"


def test_the_options_replace_the_default_ports_and_a_bad_one_is_a_usage_error() -> None:
    parse = build_parser().parse_args
    request = request_from_args(parse(["init", "h", "--trtllm-ports", "9355", "--nim-ports", "9000,9001"]))
    roles = dict(request.ports)
    assert (roles[9355], roles[9000], roles[9001]) == ("trtllm", "nim", "nim")
    assert 8355 not in roles
    assert dict(request_from_args(parse(["init", "h"])).ports)[8356] == "trtllm"
    with pytest.raises(UsageError, match="ports"):
        request_from_args(parse(["init", "h", "--trtllm-ports", "83x5"]))


def test_a_port_probed_for_trtllm_where_something_else_answers_says_what() -> None:
    results = first_round()
    results["/health"] = answer("/health", 200)
    found = classify_port(8355, "trtllm", results)
    assert isinstance(found, NoAnswer) and "TensorRT-LLM" in found.reason


# --- the config ----------------------------------------------------------------------------------------


def test_each_is_written_with_its_engine_port_and_a_name_from_its_model() -> None:
    findings = [
        classify_port(8355, "trtllm", trtllm_results()),
        classify_port(8356, "trtllm", trtllm_results(metrics=False)),
        classify_port(8000, "nim", nim_results(ready=503)),
    ]
    text = rendered(report(*findings))
    instances = parse_config(text, env={}).nodes[0].vllm
    tail = TRTLLM_MODEL.rsplit("/", 1)[1]
    assert [(v.name, v.engine, v.port) for v in instances] == [
        (tail, "trtllm", 8355),
        (f"{tail}-8356", "trtllm", 8356),
        ("llama-3.1-8b-instruct", "nim", 8000),
    ]
    flat = unwrapped(text)
    assert 'engine = "trtllm"                   # TensorRT-LLM (/prometheus/metrics)' in text
    assert flat.count("return_perf_metrics: true") == 1  # only the one without trtllm_ names
    assert "its model was still loading" in flat
    assert "No systemd unit or docker container found for it" in flat


def test_one_that_lists_no_model_is_named_for_its_engine() -> None:
    trtllm, nim = trtllm_results(metrics=True), nim_results()
    trtllm["/v1/models"] = answer("/v1/models", 200, b'{"object": "list", "data": []}')
    nim["/v1/models"] = answer("/v1/models", 404)
    text = rendered(report(classify_port(8355, "trtllm", trtllm), classify_port(8000, "nim", nim)))
    assert [v.name for v in parse_config(text, env={}).nodes[0].vllm] == [TRTLLM_NAME, NIM_NAME]


# --- trtllm-serve's command line (engines/trtllm/command.py) ------------------------------------------

# The DGX Spark playbook's start, in the TensorRT-LLM release image.
PLAYBOOK = (
    "trtllm-serve nvidia/Llama-3.1-8B-Instruct-FP4 --backend pytorch --tp_size 1 --host 0.0.0.0 --port 8355 "
    "--extra_llm_api_options /tmp/extra-llm-api-config.yml"
)


def started_at(line: str) -> int | None:
    words = split_command_line(line)
    return next((f for i in range(len(words)) if (f := trtllm_command.server_start(words, i)) is not None), None)


@pytest.mark.parametrize(
    ("line", "first"),
    [
        ("trtllm-serve M --port 1", 1),
        ("/usr/local/bin/trtllm-serve serve M", 2),
        ("env A=1 /opt/venv/bin/trtllm-serve M", 3),
        ("trtllm-serve", 1),
        ("trtllm-serve grpc M --port 50051", None),
        ("trtllm-serve disaggregated -c cfg.yaml", None),
        ("trtllm-serve-wrapper M", None),
        ("vllm serve M", None),
    ],
)
def test_trtllm_serve_is_found_under_any_path_with_or_without_serve_and_not_its_other_commands(
    line: str, first: int | None
) -> None:
    assert started_at(line) == first


def test_the_options_sparktui_uses_are_read_under_every_spelling_serves_click_options_take() -> None:
    words = split_command_line(PLAYBOOK)
    assert trtllm_command.parse_server_args(words[1:]) == TrtllmArgs(
        port=8355,
        port_given=True,
        port_raw="8355",
        host="0.0.0.0",
        model="nvidia/Llama-3.1-8B-Instruct-FP4",
        backend="pytorch",
        tp_size=1,
        extra_options="/tmp/extra-llm-api-config.yml",
    )
    other = trtllm_command.parse_server_args(
        ["--tensor_parallel_size=2", "--backend", "trt", "--config=x.yml", "--trust_remote_code", "/engines/m"]
    )
    assert (other.tp_size, other.backend, other.extra_options, other.model) == (2, "tensorrt", "x.yml", "/engines/m")


def test_a_value_is_the_next_word_whatever_it_is_the_last_one_wins_and_the_defaults_apply() -> None:
    parse = trtllm_command.parse_server_args
    assert parse(["M", "--port", "1", "--port=2"]).port == 2
    # click gives an option the next word even when it starts with a dash: it is no model
    assert parse(["--tokenizer", "-weird", "M"]).model == "M"
    assert parse(["--max_batch_size", "8", "M", "--enable_chunked_prefill", "--port", "9"]).port == 9
    default = parse(["M"])
    assert (default.port, default.port_given, default.local_only) == (8000, False, "localhost")
    assert default.port_how() == "trtllm-serve's default port 8000"
    unread = parse(["M", "--port", "$PORT"])
    assert (unread.port, unread.port_how()) == (None, "`--port $PORT`, which init cannot read")
    assert parse(["M", "--host", "0.0.0.0"]).local_only is None


@pytest.mark.parametrize(
    "words",
    [[], ["--port"], ["--port", "99999999999999999999"], ["--port", "²"], ["--tp_size", "-3"], ["--", "--x"], ["="]],
)
def test_hostile_trtllm_words_raise_nothing(words: list[str]) -> None:
    found = trtllm_command.parse_server_args(words)
    assert found.port is None or 1 <= found.port <= 65535
    assert found.tp_size is None or found.tp_size >= 1


@pytest.mark.parametrize(
    ("image", "official"),
    [
        ("nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc2", True),
        ("nvcr.io/nvidia/tensorrt-llm/release:spark-single-gpu-dev", True),
        ("nvcr.io/nvidia/tensorrt-llm/release@sha256:" + "a" * 64, True),
        ("nvcr.io/nvidia/vllm:26.04-py3", False),
        ("example/tensorrt-llm-release:1", False),
    ],
)
def test_the_tensorrt_llm_release_image_is_recognised_by_name(image: str, official: bool) -> None:
    assert trtllm_command.is_server_image(image) is official


# --- a NIM container (engines/nim/command.py) ---------------------------------------------------------


def test_a_nim_container_is_read_from_its_image_and_environment() -> None:
    image = "nvcr.io/nim/meta/llama-3.1-8b-instruct:1.8.4"
    assert is_nim_image(image)
    assert read_container(image, {}) == NimContainer(port=8000, model="meta/llama-3.1-8b-instruct")
    custom = read_container(image, {"NIM_SERVER_PORT": "9000", "NIM_SERVED_MODEL_NAME": "llama8b"})
    assert custom is not None and (custom.port, custom.served_model_name) == (9000, "llama8b")
    assert custom.port_how() == "`NIM_SERVER_PORT=9000`"
    assert read_container("nvcr.io/nim/nvidia/nemotron@sha256:" + "0" * 64, {}) is not None


@pytest.mark.parametrize("port", ["$PORT", "0", "99999", "²", "80000000000000000000", ""])
def test_a_nim_port_that_is_not_one_is_unknown_and_says_why(port: str) -> None:
    found = read_container("nvcr.io/nim/meta/llama-3.1-8b-instruct:1", {"NIM_SERVER_PORT": port})
    assert found is not None and found.port is None and "cannot read" in found.port_how()


@pytest.mark.parametrize(
    "image", ["nvcr.io/nvidia/vllm:26.04-py3", "nvcr.io/nim", "nim/meta/llama:1", "vllm/vllm-openai:latest", ""]
)
def test_other_images_are_not_nims(image: str) -> None:
    assert not is_nim_image(image) and read_container(image, {}) is None


# --- trtllm-serve's units and containers (discovery/launches.py) and the config -----------------------

PLAYBOOK_RUN = (
    "/usr/bin/docker run --rm --name trtllm --gpus all --ipc host -p 8355:8355 "
    "nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc2 bash -c "
)


def release_container(name: str, command: str, host_port: int | None) -> ContainerInfo:
    """``docker inspect`` of a container of NVIDIA's TensorRT-LLM release image running ``bash -c``."""
    bindings = {"8355/tcp": [{"HostIp": "", "HostPort": str(host_port)}]} if host_port else {}
    found = container_from_inspect(
        {
            "Name": f"/{name}",
            "Path": "bash",
            "Args": ["-c", command],
            "State": {"Status": "running"},
            "Config": {
                "Image": "nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc2",
                "Entrypoint": None,
                "Cmd": ["bash", "-c", command],
                "Env": [],
            },
            "HostConfig": {"NetworkMode": "bridge", "PortBindings": bindings},
            "NetworkSettings": {"Ports": bindings},
        }
    )
    assert found is not None
    return found


def test_a_trtllm_serve_is_read_from_an_exec_start_a_bash_c_and_a_docker_run() -> None:
    plain = analyse_trtllm_command(split_command_line(f"/opt/trt/bin/{PLAYBOOK}"))
    assert plain.trtllm is not None and (plain.host_port, plain.port_how) == (8355, "`--port 8355`")
    words = [*split_command_line(PLAYBOOK_RUN), f"hf download M && {PLAYBOOK}"]
    run = analyse_trtllm_command(words)
    assert run.trtllm is not None and run.container == "trtllm"
    assert (run.host_port, run.port_how) == (8355, "`-p 8355:8355` (`--port 8355` in the container)")
    assert analyse_trtllm_command(["vllm", "serve", "M"]).trtllm is None


def test_units_and_containers_of_trtllm_serve_are_its_and_no_other_engines() -> None:
    trt = unit("llm.service", f"/usr/local/bin/{PLAYBOOK}")
    assert is_trtllm_unit(trt)
    assert not (is_vllm_unit(trt) and vllm_launches([trt], [])) and not is_llama_unit(trt) and not is_sglang_unit(trt)
    assert not is_trtllm_unit(unit("vllm.service", "/usr/bin/vllm serve nvidia/Llama-3.1-8B --port 8000"))
    container = release_container("trtllm-llama", PLAYBOOK, 8355)
    assert is_trtllm_container(container)
    (launch,) = trtllm_launches([], [container])
    assert (launch.engine, launch.host_port, launch.container) == ("trtllm", 8355, "trtllm-llama")
    assert launch.trtllm is not None and launch.trtllm.model == "nvidia/Llama-3.1-8B-Instruct-FP4"


def test_the_trtllm_serve_that_answered_gets_its_unit_and_one_that_did_not_is_written_from_its_command() -> None:
    trt = unit("trtllm-llama8b.service", f"/usr/local/bin/{PLAYBOOK}")
    stopped = unit("trtllm-other.service", "/usr/local/bin/trtllm-serve X --port 8356", "inactive", "dead")
    answered = classify_port(8355, "trtllm", trtllm_results())
    text = rendered(report(answered, units=(trt, stopped)))
    (instance,) = parse_config(text, env={}).nodes[0].vllm
    assert (instance.engine, instance.port, instance.unit) == ("trtllm", 8355, "trtllm-llama8b.service")
    flat = unwrapped(text)
    assert "on this port by `--port 8355` in the unit's ExecStart" in flat
    assert "It reads more settings from --extra_llm_api_options /tmp/extra-llm-api-config.yml" in flat
    assert "2 TensorRT-LLM units" in flat and "unit trtllm-other.service (inactive" in flat

    alone = rendered(report(units=(trt,)))
    (written,) = parse_config(alone, env={}).nodes[0].vllm
    assert (written.name, written.engine, written.port) == ("Llama-3.1-8B-Instruct-FP4", "trtllm", 8355)
    assert "did not answer during init; port from `--port 8355`" in unwrapped(alone)


def test_a_trtllm_serve_on_its_default_host_says_it_is_reachable_from_its_node_only() -> None:
    local = unit("trtllm.service", "/usr/local/bin/trtllm-serve serve /engines/llama --port 8356")
    text = unwrapped(rendered(report(units=(local,))))
    assert "It listens on localhost only (trtllm-serve's default --host)" in text
    assert 'name = "llama"' in text


# --- NIM's units and containers ------------------------------------------------------------------------

NIM_IMAGE = "nvcr.io/nim/meta/llama-3.1-8b-instruct:1.8.4"


def nim_container(name: str, env: list[str], container_port: int, host_port: int | None) -> ContainerInfo:
    """``docker inspect`` of a NIM container: its image's entrypoint starts the server (no command line)."""
    bindings = {f"{container_port}/tcp": [{"HostIp": "", "HostPort": str(host_port)}]} if host_port else {}
    found = container_from_inspect(
        {
            "Name": f"/{name}",
            "Path": "/opt/nvidia/nvidia_entrypoint.sh",
            "Args": ["/opt/nim/start_server.sh"],
            "State": {"Status": "running"},
            "Config": {"Image": NIM_IMAGE, "Entrypoint": ["/opt/nvidia/nvidia_entrypoint.sh"], "Env": env},
            "HostConfig": {"NetworkMode": "bridge", "PortBindings": bindings},
            "NetworkSettings": {"Ports": bindings},
        }
    )
    assert found is not None
    return found


def test_a_nim_container_is_nims_and_answers_on_the_port_its_nim_server_port_is_published_on() -> None:
    container = nim_container("llama8b", ["NIM_SERVER_PORT=9000", "NGC_API_KEY=x"], 9000, 8010)
    assert is_nim_container(container) and not vllm_launches([], [container]) and not trtllm_launches([], [container])
    (launch,) = nim_launches([], [container])
    assert (launch.engine, launch.host_port, launch.container) == ("nim", 8010, "llama8b")
    assert launch.port_how == "port mapping `8010->9000` (`NIM_SERVER_PORT=9000` in the container)"
    unpublished = nim_container("other", [], 8000, None)
    (other,) = nim_launches([], [unpublished])
    assert other.host_port is None


def test_a_unit_that_runs_a_nim_with_docker_run_is_one_launch_with_its_container() -> None:
    line = f"/usr/bin/docker run --rm --name llama8b --gpus all -e NGC_API_KEY -p 8000:8000 {NIM_IMAGE}"
    nim_unit = unit("nim-llama.service", line)
    assert is_nim_unit(nim_unit) and not is_vllm_unit(nim_unit)
    (launch,) = nim_launches([nim_unit], [nim_container("llama8b", [], 8000, 8000)])
    assert (launch.unit, launch.container, launch.host_port) == ("nim-llama.service", "llama8b", 8000)
    answered = classify_port(8000, "nim", nim_results())
    text = rendered(report(answered, units=(nim_unit,)))
    (instance,) = parse_config(text, env={}).nodes[0].vllm
    assert (instance.engine, instance.port, instance.unit) == ("nim", 8000, "nim-llama.service")
    assert "1 NIM unit and no NIM containers" in unwrapped(text)


def test_a_nim_container_that_did_not_answer_is_written_from_its_image() -> None:
    text = rendered(report(containers=(nim_container("llama8b", ["NIM_SERVED_MODEL_NAME=llama8b"], 8000, 8011),)))
    (instance,) = parse_config(text, env={}).nodes[0].vllm
    assert (instance.name, instance.engine, instance.port, instance.container) == ("llama8b", "nim", 8011, "llama8b")
    flat = unwrapped(text)
    assert "did not answer during init; port from port mapping `8011->8000`" in flat
    assert "model: meta/llama-3.1-8b-instruct (its image)" in flat


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.text(max_size=40), max_size=30),
    st.sampled_from(
        ["trtllm-serve", "trtllm-serve serve", "docker run nvcr.io/nvidia/tensorrt-llm/release:1 bash -c", "bash -c"]
    ),
)
def test_any_words_read_as_a_trtllm_serve_command_line_raise_nothing_and_render_a_config_that_loads(
    words: list[str], start: str
) -> None:
    argv = (*start.split(), *words)
    analyse_trtllm_command(argv)
    trtllm_command.parse_server_args(words)
    service = UnitInfo("trtllm-fuzz.service", "active", "running", "", (argv,))
    parse_config(rendered(report(units=(service,))), env={})


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=60), st.dictionaries(st.sampled_from(["NIM_SERVER_PORT", "NIM_SERVED_MODEL_NAME"]), st.text()))
def test_any_nim_image_and_environment_raise_nothing_and_render_a_config_that_loads(
    image: str, env: dict[str, str]
) -> None:
    read_container(f"nvcr.io/nim/{image}", env)
    words = [f"-e{name}={value}" for name, value in env.items()]
    argv = ("docker", "run", "-p", "8000:8000", *words, f"nvcr.io/nim/{image}")
    service = UnitInfo("nim-fuzz.service", "active", "running", "", (argv,))
    parse_config(rendered(report(units=(service,))), env={})
