"""``sparktui init``'s pure half on Ollama: what a port's answers say (``/api/version`` with ``/api/tags``:
an Ollama, told apart first; ``/api/tags`` alone only after every engine's paths), ``OLLAMA_HOST`` read as
Ollama's ``envconfig.Host()`` reads it, the ``ollama serve`` unit and the ``ollama/ollama`` container, and
the config written: an engine (``engine = "ollama"``), never a side service any more. Hostile answers and
environments end in a config that loads."""

from __future__ import annotations

import json
import tomllib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparktui.cli import build_parser
from sparktui.config import parse_config
from sparktui.discovery.commands import analyse_ollama_command, split_command_line
from sparktui.discovery.launches import (
    is_llama_unit,
    is_ollama_container,
    is_ollama_unit,
    is_sglang_unit,
    is_vllm_unit,
    llama_launches,
    ollama_launches,
    vllm_launches,
)
from sparktui.discovery.names import OLLAMA_NAME
from sparktui.discovery.probes import (
    DEFAULT_OLLAMA_PORTS,
    DEFAULT_SERVICE_PORTS,
    FIRST_PATHS,
    SERVICE_KINDS,
    NoAnswer,
    OllamaAnswer,
    ServiceAnswer,
    VllmAnswer,
    classify_port,
    port_roles,
)
from sparktui.discovery.units import ContainerInfo, UnitInfo, container_from_inspect, parse_systemctl_show
from sparktui.engines.ollama import command as ollama_command
from sparktui.engines.ollama.command import OllamaHost, read_container, read_host
from sparktui.headless.init import UsageError, request_from_args
from sparktui.model.observations import FetchKind, HttpResult
from sparktui.model.scrape import MAX_MODELS
from tests.support.ollama_server import VERSION, Model
from tests.unit.test_discovery_llamacpp_launch import exec_start, rendered, report, unit, unwrapped

MODELS = [Model("gemma3", 3_338_801_804), Model("qwen3:8b", 5_225_376_047)]


def answer(path: str, status: int, body: bytes = b"") -> HttpResult:
    return HttpResult(url=f"http://h:1{path}", kind=FetchKind.OK, status=status, body=body)


def ollama_results(models: list[Model] = MODELS, *, version: bool = True) -> dict[str, HttpResult]:
    """What Ollama answers init's first round (``tests/support/ollama_server.py``'s bodies: its API
    reference); every path it does not serve is its plain 404."""
    results = {path: answer(path, 404, b"404 page not found") for path in FIRST_PATHS}
    if version:
        results["/api/version"] = answer("/api/version", 200, json.dumps({"version": VERSION}).encode())
    results["/api/tags"] = answer("/api/tags", 200, json.dumps({"models": [m.tag() for m in models]}).encode())
    cards = [{"id": m.name, "object": "model", "owned_by": "library"} for m in models]
    results["/v1/models"] = answer("/v1/models", 200, json.dumps({"object": "list", "data": cards}).encode())
    return results


def ollama_unit(name: str = "ollama.service", line: str = "/usr/local/bin/ollama serve", env: str = "") -> UnitInfo:
    """``systemctl show`` of a unit, with its ``Environment=`` (as the install's unit, edited by
    ``systemctl edit``, shows it)."""
    shown = f"Id={name}\nActiveState=active\nSubState=running\nDescription=Ollama Service\n"
    shown += f"ExecStart={exec_start(line)}\n" + (f"Environment={env}\n" if env else "")
    (found,) = parse_systemctl_show(shown)
    return found


def ollama_container(name: str, env: list[str], host_port: int | None, *, container_port: int = 11434) -> ContainerInfo:
    """``docker inspect`` of a container of ollama/ollama (its Dockerfile: ``ENTRYPOINT ["/bin/ollama"]``,
    ``CMD ["serve"]``, ``ENV OLLAMA_HOST=0.0.0.0:11434``: inspect shows the image's environment)."""
    bindings = {f"{container_port}/tcp": [{"HostIp": "", "HostPort": str(host_port)}]} if host_port else {}
    found = container_from_inspect(
        {
            "Name": f"/{name}",
            "Path": "/bin/ollama",
            "Args": ["serve"],
            "State": {"Status": "running"},
            "Config": {"Image": "ollama/ollama:0.12.6", "Entrypoint": ["/bin/ollama"], "Env": env},
            "HostConfig": {"NetworkMode": "bridge", "PortBindings": bindings},
            "NetworkSettings": {"Ports": bindings},
        }
    )
    assert found is not None
    return found


# --- what answers ---------------------------------------------------------------------------------------


def test_an_ollama_is_recognised_by_its_version_and_tags_with_the_models_on_its_disk() -> None:
    found = classify_port(11434, "ollama", ollama_results())
    assert found == OllamaAnswer(
        port=11434, recognised_by="/api/version", version=VERSION, models=("gemma3", "qwen3:8b"), model_count=2
    )


def test_an_ollama_on_any_port_is_one_whatever_it_was_probed_for() -> None:
    for role in ("vllm", "any", "listening", "sglang"):
        assert isinstance(classify_port(8000, role, ollama_results()), OllamaAnswer)


def test_api_tags_alone_is_still_ollama_but_api_version_alone_is_not() -> None:
    tags_only = classify_port(11434, "ollama", ollama_results(version=False))
    assert isinstance(tags_only, OllamaAnswer)
    assert (tags_only.recognised_by, tags_only.version) == ("/api/tags", "unknown")
    results = ollama_results()
    results["/api/tags"] = answer("/api/tags", 404, b"404 page not found")
    assert not isinstance(classify_port(11434, "ollama", results), OllamaAnswer)


def test_a_vllm_answering_an_ollama_compatible_api_tags_stays_a_vllm() -> None:
    results = ollama_results(version=False)
    results["/version"] = answer("/version", 200, b'{"version": "0.33.0"}')
    assert isinstance(classify_port(8000, "vllm", results), VllmAnswer)


def test_node_exporters_landing_page_on_every_path_is_not_an_ollama() -> None:
    page = b"<html><head><title>Node Exporter</title></head></html>"
    results = {path: answer(path, 200, page) for path in FIRST_PATHS}
    assert not isinstance(classify_port(11434, "ollama", results), OllamaAnswer)


def test_the_models_listed_are_made_safe_and_bounded() -> None:
    many = [Model(f"m{i}\n[x]\x1b[31m", 1) for i in range(MAX_MODELS + 5)]
    found = classify_port(11434, "ollama", ollama_results(many))
    assert isinstance(found, OllamaAnswer)
    assert (len(found.models), found.model_count) == (MAX_MODELS, MAX_MODELS + 5)
    assert not any("\n" in name or "\x1b" in name for name in found.models)


def test_nothing_on_the_ollama_port_says_so() -> None:
    closed = {path: HttpResult(url=f"http://h:1{path}", kind=FetchKind.REFUSED) for path in FIRST_PATHS}
    found = classify_port(11434, "ollama", closed)
    assert isinstance(found, NoAnswer) and found.role == "ollama"


# --- ports probed -----------------------------------------------------------------------------------------


def test_11434_is_probed_as_an_engines_port_and_no_longer_as_a_services() -> None:
    assert DEFAULT_OLLAMA_PORTS == (11434,)
    assert "ollama" not in dict(DEFAULT_SERVICE_PORTS)
    request = request_from_args(build_parser().parse_args(["init", "h"]))
    assert dict(request.ports)[11434] == "ollama"


def test_ollama_ports_replace_the_default_and_service_ports_still_accepts_ollama() -> None:
    parse = build_parser().parse_args
    roles = dict(request_from_args(parse(["init", "h", "--ollama-ports", "11435,11436"])).ports)
    assert (roles[11435], roles[11436]) == ("ollama", "ollama") and 11434 not in roles
    assert "ollama" in SERVICE_KINDS
    roles = dict(request_from_args(parse(["init", "h", "--ollama-ports", "1", "--service-ports", "ollama=9999"])).ports)
    assert roles[9999] == "ollama"
    with pytest.raises(UsageError, match="ports"):
        request_from_args(parse(["init", "h", "--ollama-ports", "11434x"]))
    assert dict(port_roles((), (), (), ollama=(8000,)))[8000] == "ollama"


# --- OLLAMA_HOST ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "port", "bind"),
    [
        (None, 11434, "127.0.0.1"),
        ("", 11434, "127.0.0.1"),
        ("0.0.0.0", 11434, "0.0.0.0"),
        ("0.0.0.0:11434", 11434, "0.0.0.0"),
        ("0.0.0.0:8090", 8090, "0.0.0.0"),
        ("spark1:11435", 11435, "spark1"),
        ("http://10.0.0.7:11436", 11436, "10.0.0.7"),
        ("https://10.0.0.7:11437/", 11437, "10.0.0.7"),
        (":11438", 11438, ""),
        ("[::]:11439", 11439, "::"),
        ("::1", 11434, "::1"),
        ("  127.0.0.1:11440  ", 11440, "127.0.0.1"),
    ],
)
def test_ollama_host_is_read_in_each_of_its_forms(raw: str | None, port: int, bind: str) -> None:
    found = read_host(raw)
    assert (found.port, found.bind, found.problem) == (port, bind, None)


def test_a_scheme_without_a_port_is_its_schemes_port_as_ollama_reads_it() -> None:
    found = read_host("http://0.0.0.0")
    assert (found.port, found.bind) == (80, "0.0.0.0")
    assert found.problem is not None and "80" in found.problem


@pytest.mark.parametrize("raw", ["0.0.0.0:abc", "0.0.0.0:", "0.0.0.0:99999", "h:-1", "h:11434\n[x]"])
def test_a_port_ollama_cannot_read_falls_back_to_its_default_and_says_why(raw: str) -> None:
    found = read_host(raw)
    assert found.port == 11434
    assert found.problem is not None and "falls back to 11434" in found.problem
    assert "\n" not in found.port_how()


def test_port_0_is_a_port_the_kernel_picks_unknown_to_init() -> None:
    found = read_host("0.0.0.0:0")
    assert found.port is None and found.problem is not None and "kernel" in found.problem


def test_ollama_listens_on_loopback_only_by_default() -> None:
    assert read_host(None).local_only == "127.0.0.1"
    assert read_host("localhost:11434").local_only == "localhost"
    assert read_host("0.0.0.0").local_only is None
    assert read_host(":11434").local_only is None


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=60))
def test_any_ollama_host_raises_nothing_and_gives_a_port_or_a_reason(raw: str) -> None:
    found = read_host(raw)
    assert found.port is not None or found.problem is not None
    assert found.port is None or 1 <= found.port <= 65535


# --- units and containers ---------------------------------------------------------------------------------


def test_the_installs_unit_is_ollamas_with_its_port_from_its_environment() -> None:
    service = ollama_unit(env='"OLLAMA_HOST=0.0.0.0:11435" "OLLAMA_MODELS=/data/ollama"')
    assert is_ollama_unit(service)
    assert not (is_vllm_unit(service) or is_llama_unit(service) or is_sglang_unit(service))
    assert not vllm_launches([service], []) and not llama_launches([service], [])
    (launch,) = ollama_launches([service], [])
    assert (launch.engine, launch.unit, launch.host_port) == ("ollama", "ollama.service", 11435)
    assert launch.port_how == "`OLLAMA_HOST=0.0.0.0:11435` in the unit's Environment"
    assert launch.ollama == OllamaHost(port=11435, bind="0.0.0.0", raw="0.0.0.0:11435")


def test_a_unit_without_ollama_host_listens_on_ollamas_default() -> None:
    (launch,) = ollama_launches([ollama_unit(line="/usr/bin/ollama serve")], [])
    assert launch.host_port == 11434 and launch.ollama is not None and launch.ollama.local_only == "127.0.0.1"
    assert launch.port_how == "Ollama's default address 127.0.0.1:11434 (no `OLLAMA_HOST`)"


def test_ollama_serve_is_found_under_any_path_and_in_a_bash_c_but_not_its_other_commands() -> None:
    assert analyse_ollama_command(["/usr/local/bin/ollama", "serve"]).ollama is not None
    inner = split_command_line("/bin/bash -c 'OLLAMA_HOST=0.0.0.0 exec ollama serve'")
    assert analyse_ollama_command(inner).ollama is not None
    for other in ("ollama run gemma3", "ollama pull qwen3:8b", "ollama", "llama-server -m x.gguf"):
        assert analyse_ollama_command(split_command_line(other)).ollama is None
    assert not is_ollama_unit(unit("pull.service", "/usr/local/bin/ollama pull gemma3"))


@pytest.mark.parametrize(
    ("image", "official"),
    [
        ("ollama/ollama", True),
        ("ollama/ollama:0.12.6", True),
        ("docker.io/ollama/ollama:rocm", True),
        ("registry.local:5000/ollama/ollama@sha256:" + "a" * 64, True),
        ("ghcr.io/open-webui/open-webui:ollama", False),
        ("ollama/ollama-proxy", False),
        ("myollama/ollama", False),
    ],
)
def test_the_ollama_image_is_recognised_by_name(image: str, official: bool) -> None:
    assert ollama_command.is_server_image(image) is official


def test_an_ollama_container_answers_on_the_host_port_its_ollama_host_is_published_on() -> None:
    container = ollama_container("ollama", ["OLLAMA_HOST=0.0.0.0:11434", "PATH=/usr/bin"], 11500)
    assert is_ollama_container(container) and not vllm_launches([], [container])
    (launch,) = ollama_launches([], [container])
    assert (launch.engine, launch.container, launch.host_port) == ("ollama", "ollama", 11500)
    assert launch.port_how == "port mapping `11500->11434` (`OLLAMA_HOST=0.0.0.0:11434` in the container)"
    moved = ollama_container("moved", ["OLLAMA_HOST=0.0.0.0:9000"], 9001, container_port=9000)
    (other,) = ollama_launches([], [moved])
    assert other.host_port == 9001


def test_a_docker_run_of_the_image_without_ollama_host_uses_the_images_own() -> None:
    line = "/usr/bin/docker run --rm --name ollama --gpus=all -v ollama:/root/.ollama -p 11434:11434 ollama/ollama"
    command = analyse_ollama_command(split_command_line(line))
    assert (command.host_port, command.container) == (11434, "ollama")
    assert command.port_how == (
        "`-p 11434:11434` (the ollama/ollama image's `OLLAMA_HOST=0.0.0.0:11434` in the container)"
    )
    image_default, given = read_container("ollama/ollama", {}), read_container("ollama/ollama", {"OLLAMA_HOST": ""})
    assert image_default is not None and (image_default.port, image_default.bind) == (11434, "0.0.0.0")
    assert given is not None and (given.port, given.bind) == (11434, "127.0.0.1")  # set empty: Ollama's default
    service = unit("ollama-docker.service", line)
    assert is_ollama_unit(service) and not is_vllm_unit(service)
    (launch,) = ollama_launches([service], [ollama_container("ollama", ["OLLAMA_HOST=0.0.0.0:11434"], 11434)])
    assert (launch.unit, launch.container, launch.host_port) == ("ollama-docker.service", "ollama", 11434)


# --- the config written -----------------------------------------------------------------------------------


def test_an_ollama_is_written_as_an_engine_with_its_port_version_and_models_and_not_as_a_service() -> None:
    found = classify_port(11434, "ollama", ollama_results())
    text = rendered(report(found, units=(ollama_unit(env='"OLLAMA_HOST=0.0.0.0:11434"'),)))
    raw = tomllib.loads(text)
    assert "services" not in raw["nodes"][0]
    (entry,) = raw["nodes"][0]["vllm"]
    assert (entry["engine"], entry["port"], entry["unit"]) == ("ollama", 11434, "ollama.service")
    node = parse_config(text, env={}).nodes[0]
    (instance,) = node.vllm
    assert (instance.name, instance.engine, instance.port) == (OLLAMA_NAME, "ollama", 11434)
    assert node.services == ()
    flat = unwrapped(text)
    assert f"Ollama {VERSION} answered /api/version" in flat
    assert "Models on its disk (/api/tags): gemma3, qwen3:8b." in flat
    assert "on this port by `OLLAMA_HOST=0.0.0.0:11434` in the unit's Environment" in flat
    assert "only, by" not in flat  # OLLAMA_HOST binds every address: reachable from elsewhere
    assert "1 Ollama unit and no Ollama containers" in flat


def test_an_ollama_found_over_ssh_only_on_loopback_says_sparktui_must_run_on_its_node() -> None:
    text = rendered(report(units=(ollama_unit(),)))
    (instance,) = parse_config(text, env={}).nodes[0].vllm
    assert (instance.engine, instance.port, instance.unit) == ("ollama", 11434, "ollama.service")
    flat = unwrapped(text)
    assert "did not answer during init; port from Ollama's default address 127.0.0.1:11434" in flat
    assert "It listens on 127.0.0.1 only" in flat and "sparktui must run on this node" in flat
    assert 'Environment="OLLAMA_HOST=0.0.0.0:11434"' in flat


def test_an_ollamas_port_is_its_own_and_no_other_engines_launch_takes_it() -> None:
    found = classify_port(11434, "ollama", ollama_results())
    stray = unit("vllm-stray.service", "/opt/vllm/bin/vllm serve Qwen/Qwen3-8B --port 11434")
    text = rendered(report(found, units=(stray,)))
    instances = parse_config(text, env={}).nodes[0].vllm
    assert [(v.engine, v.port) for v in instances] == [("ollama", 11434)]
    assert "vllm-stray.service" in unwrapped(text.split("Found over SSH and left out:")[1])


def test_an_ollama_answering_with_no_model_and_no_launch_is_still_written() -> None:
    found = classify_port(11434, "ollama", ollama_results([]))
    text = rendered(report(found))
    (instance,) = parse_config(text, env={}).nodes[0].vllm
    assert (instance.engine, instance.port, instance.unit, instance.container) == ("ollama", 11434, None, None)
    assert "No models on its disk yet" in unwrapped(text)


def test_a_service_probed_as_ollama_where_only_health_answers_is_an_http_service() -> None:
    results = {path: answer(path, 404, b"not here") for path in FIRST_PATHS}
    results["/health"] = answer("/health", 200, b"ok")
    found = classify_port(9999, "ollama", results)
    assert isinstance(found, ServiceAnswer) and found.kind == "http"


HOSTILE = [
    b"not json",
    json.dumps({"version": 'v\n[[nodes]]\nname = "x' * 1000}).encode(),
    json.dumps({"models": [{"name": 'a"\n[x]\x1b[31m'}, {"name": 3}, "b", None]}).encode(),
    json.dumps({"models": {"name": "x"}}).encode(),
    b"[" * 100_000,
]


@pytest.mark.parametrize("body", HOSTILE)
def test_hostile_answers_end_in_a_config_that_loads(body: bytes) -> None:
    results = ollama_results()
    results["/api/version"] = answer("/api/version", 200, body)
    results["/api/tags"] = answer("/api/tags", 200, body if b"models" in body else results["/api/tags"].body)
    text = rendered(report(classify_port(11434, "ollama", results)))
    parse_config(text, env={})
    assert "\n[x]" not in text and '\n[[nodes]]\nname = "x' not in text and "\x1b" not in text


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=80), st.lists(st.text(max_size=20), max_size=6))
def test_any_ollama_host_and_command_raise_nothing_and_render_a_config_that_loads(host: str, words: list[str]) -> None:
    env = {"OLLAMA_HOST": host}
    container = ContainerInfo(
        name="ollama",
        image="ollama/ollama",
        status="running",
        argv=(),
        host_network=False,
        ports={11434: 11434},
        env=env,
    )
    service = ollama_unit(line=" ".join(["ollama", "serve", *words]).replace("\x00", ""))
    parse_config(rendered(report(units=(service,), containers=(container,))), env={})
