"""The fleet config: spec objects, the loader's one-line errors, default paths and secrets."""

from __future__ import annotations

import sys
import tomllib
from collections.abc import Mapping
from pathlib import Path

import pytest
from pydantic import ValidationError

from sparktui.config import (
    ConfigError,
    default_config_path,
    exposed_secrets_warning,
    load_config,
    parse_config,
    secrets_in_file,
)
from sparktui.model.specs import (
    AlertRuleSpec,
    CanarySpec,
    ExporterSpec,
    FleetSpec,
    KioskSpec,
    NodeSpec,
    NotifierSpec,
    PrometheusSpec,
    ServerSpec,
    ServiceSpec,
    SshSpec,
    Thresholds,
)

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "docs" / "config.example.toml"
DOCS = REPO / "docs" / "config.md"
SRC = "fleet.toml"
NODE = '[[nodes]]\nname = "spark1"\nhost = "192.168.1.11"\n'
NODE2 = '[[nodes]]\nname = "spark2"\nhost = "192.168.1.12"\n'
SECRET = "sk-live-7d1f0c9e2b"


def errors_of(text: str, env: Mapping[str, str] | None = None) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_config(text, source=SRC, env=env or {})
    return caught.value.errors


def vllm(body: str) -> str:
    return NODE + "[[nodes.vllm]]\n" + body


# --- the example and the shorthands ---------------------------------------------------------------


def test_example_config_loads_with_resolved_urls() -> None:
    fleet = load_config(EXAMPLE, env={})

    assert fleet.source == str(EXAMPLE)
    assert [n.name for n in fleet.nodes] == ["spark1", "spark2", "spark3", "spark4"]
    spark1, spark2, head, worker = fleet.nodes
    assert spark1.vllm[0].base_url == "http://192.168.1.11:8001"
    assert spark1.vllm[0].unit == "vllm-qwen36.service"
    assert spark1.vllm[0].gpu_memory_utilization == 0.55
    assert spark1.gpu_exporter is not None
    assert spark1.gpu_exporter.url == "http://192.168.1.11:9835/metrics"
    assert {s.name: (s.kind, s.url) for s in spark1.services} == {
        "parakeet": ("asr", "http://192.168.1.11:8765/health"),
        "ollama": ("ollama", "http://192.168.1.11:11434/api/tags"),
    }
    assert spark2.vllm[0].base_url == "http://192.168.1.12:8001"
    assert [(s.name, s.url, s.timeout_s) for s in spark2.services] == [
        ("chatterbox", "http://192.168.1.12:8882/health", 3.0)
    ]
    assert (head.vllm[0].role, head.vllm[0].job, head.vllm[0].base_url) == (
        "head",
        "qwen3-235b",
        "http://192.168.1.13:8000",
    )
    assert (worker.vllm[0].role, worker.vllm[0].job, worker.vllm[0].base_url) == (
        "worker",
        "qwen3-235b",
        None,
    )
    assert worker.vllm[0].container == "vllm-qwen235"
    assert all(n.gpu_exporter is not None and n.gpu_exporter.url.endswith(":9835/metrics") for n in fleet.nodes)
    assert fleet.thresholds == Thresholds()


def test_docs_show_the_example_file_and_document_every_key() -> None:
    docs = DOCS.read_text(encoding="utf-8")
    last_block = docs.rsplit("```toml\n", 1)[1].split("```", 1)[0]
    assert last_block == EXAMPLE.read_text(encoding="utf-8")
    loader_only = {"api_key", "source", "token", "bearer_token", "password"}
    models = (FleetSpec, Thresholds, KioskSpec, CanarySpec, NodeSpec, SshSpec, ServerSpec, ExporterSpec, ServiceSpec)
    for model in (*models, AlertRuleSpec, NotifierSpec, PrometheusSpec):
        for key in set(model.model_fields) - loader_only:
            assert f"| `{key}` |" in docs, f"{model.__name__}.{key} is not documented in docs/config.md"


def test_port_shorthands_resolve_to_full_urls() -> None:
    fleet = parse_config(
        '[[nodes]]\nname = "gx10"\nhost = "spark-a.lan"\n'
        "[[nodes.vllm]]\nport = 8001\n"
        "[nodes.gpu_exporter]\nport = 9835\n"
        "[nodes.node_exporter]\nport = 9100\n"
        '[[nodes.services]]\nname = "asr"\nkind = "asr"\nport = 8765\n'
        '[[nodes.services]]\nname = "ollama"\nkind = "ollama"\nport = 11434\n'
        '[[nodes.services]]\nname = "tts"\nkind = "tts"\nport = 8882\npath = "/ready"\n'
        '[[nodes]]\nname = "v6"\nhost = "fd00::12"\n[[nodes.vllm]]\nport = 8000\n',
        source=SRC,
        env={},
    )
    node, v6 = fleet.nodes
    assert node.vllm[0].base_url == "http://spark-a.lan:8001"
    assert node.vllm[0].port == 8001
    assert node.gpu_exporter == ExporterSpec(url="http://spark-a.lan:9835/metrics", port=9835)
    assert node.node_exporter is not None
    assert node.node_exporter.url == "http://spark-a.lan:9100/metrics"
    assert [s.url for s in node.services] == [
        "http://spark-a.lan:8765/health",
        "http://spark-a.lan:11434/api/tags",
        "http://spark-a.lan:8882/ready",
    ]
    assert v6.vllm[0].base_url == "http://[fd00::12]:8000"


def test_explicit_vllm_url_loses_its_trailing_slash() -> None:
    fleet = parse_config(vllm('url = "https://spark1.example:8443/"\n'), source=SRC, env={})
    assert fleet.nodes[0].vllm[0].base_url == "https://spark1.example:8443"


def test_specs_built_in_code_resolve_port_shorthands_and_round_trip() -> None:
    node = NodeSpec(
        name="spark1",
        host="192.168.1.11",
        vllm=(ServerSpec(name="qwen36", port=8001),),
        services=(ServiceSpec(name="asr", kind="asr", url="http://192.168.1.11:8765/health"),),
    )
    assert node.vllm[0].base_url == "http://192.168.1.11:8001"
    fleet = FleetSpec(nodes=(node,))
    assert FleetSpec.model_validate(fleet.model_dump()) == fleet


def test_specs_are_frozen() -> None:
    spec = ServerSpec(url="http://192.168.1.11:8001")
    with pytest.raises(ValidationError):
        spec.url = "http://192.168.1.99:8001"  # type: ignore[misc]


def test_a_fleet_finds_its_nodes_by_name_and_a_copy_with_other_nodes_finds_its_own() -> None:
    a, b = NodeSpec(name="a", host="10.0.0.1"), NodeSpec(name="b", host="10.0.0.2")
    fleet = FleetSpec(nodes=(a, b))
    assert fleet.node("b") is b and fleet.node("c") is None
    copy = fleet.model_copy(update={"nodes": (b,)})  # copies the instance's dict, index and all
    assert copy.node("a") is None and copy.node("b") is b
    assert fleet.node("a") is a
    # The index is no field: a fleet that has looked nodes up equals one that has not, and dumps alike.
    assert fleet == FleetSpec(nodes=(a, b)) and fleet.model_dump() == FleetSpec(nodes=(a, b)).model_dump()


# --- every rule: one line naming the file, the key and the problem --------------------------------

RULES: list[tuple[str, str, str]] = [
    # vLLM
    (
        "vllm-url-scheme",
        vllm('url = "ftp://x"\n'),
        "nodes[0].vllm[0].url: must start with http:// or https:// (got 'ftp://x')",
    ),
    (
        "vllm-url-v1",
        vllm('url = "http://192.168.1.11:8001/v1"\n'),
        "nodes[0].vllm[0].url: must be the server's base URL without /v1 "
        "(got 'http://192.168.1.11:8001/v1'); sparktui adds /metrics, /health and /v1/models itself",
    ),
    (
        "vllm-url-path",
        vllm('url = "http://192.168.1.11:8001/metrics"\n'),
        "nodes[0].vllm[0].url: must be the server's base URL with no path (got 'http://192.168.1.11:8001/metrics')",
    ),
    (
        "vllm-url-bad-port",
        vllm('url = "http://192.168.1.11:0"\n'),
        "nodes[0].vllm[0].url: has an invalid port (got 'http://192.168.1.11:0')",
    ),
    (
        "vllm-url-and-port-disagree",
        vllm('url = "http://192.168.1.11:8001"\nport = 8002\n'),
        "nodes[0].vllm[0].port: does not match the port in url (8001); give url or port, not both",
    ),
    (
        "vllm-no-url-no-port",
        vllm('name = "qwen"\n'),
        'nodes[0].vllm[0].url: missing: give url = "http://HOST:PORT" or port = PORT',
    ),
    ("vllm-port-range", vllm("port = 70000\n"), "nodes[0].vllm[0].port: must be <= 65535 (got 70000)"),
    (
        "vllm-port-quoted",
        vllm('port = "8001"\n'),
        "nodes[0].vllm[0].port: must be a whole number written without quotes (got '8001')",
    ),
    ("vllm-port-bool", vllm("port = true\n"), "nodes[0].vllm[0].port: must be a whole number (got true)"),
    (
        "vllm-head-without-job",
        vllm('port = 8000\nrole = "head"\n'),
        "nodes[0].vllm[0].job: required when role is 'head': the same job name on the head and its workers",
    ),
    (
        "vllm-job-on-single",
        vllm('port = 8000\njob = "qwen3-235b"\n'),
        'nodes[0].vllm[0].job: only used with role = "head" or role = "worker"; set role, or remove job',
    ),
    (
        "vllm-role",
        vllm('port = 8000\nrole = "master"\n'),
        "nodes[0].vllm[0].role: must be one of 'single', 'head' or 'worker' (got 'master')",
    ),
    (
        "vllm-unit-shell",
        vllm('port = 8001\nunit = "vllm; rm -rf /"\n'),
        "nodes[0].vllm[0].unit: must be a systemd unit name: letters, digits and '@', '.', '_', ':', '-' "
        "only (got 'vllm; rm -rf /')",
    ),
    (
        "vllm-unit-option",
        vllm('port = 8001\nunit = "--user"\n'),
        "nodes[0].vllm[0].unit: must not start with '-' (got '--user')",
    ),
    (
        "vllm-container",
        vllm('port = 8001\ncontainer = "-v /:/host"\n'),
        "nodes[0].vllm[0].container: must be a docker container name: letters, digits, '_', '.', '-', "
        "starting with a letter or digit (got '-v /:/host')",
    ),
    (
        "vllm-unit-and-container",
        vllm('port = 8001\nunit = "vllm-qwen36.service"\ncontainer = "vllm-qwen36"\n'),
        "nodes[0].vllm[0].container: give unit (systemd) or container (docker), not both",
    ),
    (
        "vllm-two-key-sources",
        vllm('port = 8001\napi_key_env = "QWEN_KEY"\napi_key_file = "qwen.key"\n'),
        "nodes[0].vllm[0].api_key_file: give api_key_env or api_key_file, not both",
    ),
    (
        "vllm-gpu-memory-utilization-high",
        vllm("port = 8001\ngpu_memory_utilization = 1.5\n"),
        "nodes[0].vllm[0].gpu_memory_utilization: must be <= 1 (got 1.5)",
    ),
    (
        "vllm-gpu-memory-utilization-zero",
        vllm("port = 8001\ngpu_memory_utilization = 0\n"),
        "nodes[0].vllm[0].gpu_memory_utilization: must be > 0 (got 0)",
    ),
    (
        "vllm-metrics-filter",
        vllm('port = 8001\nmetrics_filter = "no"\n'),
        "nodes[0].vllm[0].metrics_filter: must be true or false (no quotes) (got 'no')",
    ),
    (
        "vllm-duplicate-name",
        vllm("port = 8001\n") + "[[nodes.vllm]]\nport = 8002\n",
        "nodes[0].vllm[1].name: same as vllm[0] ('vllm'); give each vLLM on a node its own name",
    ),
    (
        "vllm-duplicate-url",
        vllm('name = "a"\nport = 8001\n') + '[[nodes.vllm]]\nname = "b"\nurl = "http://192.168.1.11:8001"\n',
        "nodes[0].vllm[1].url: same as vllm[0] ('http://192.168.1.11:8001')",
    ),
    (
        "vllm-api-key-in-file",
        vllm(f'port = 8001\napi_key = "{SECRET}"\n'),
        'nodes[0].vllm[0].api_key: keys do not go in the config file; set api_key_env = "VARIABLE" or '
        'api_key_file = "path/to/file" instead',
    ),
    # tensor-parallel jobs across nodes
    (
        "worker-without-head",
        NODE + '[[nodes.vllm]]\nrole = "worker"\njob = "qwen3-235b"\n',
        "nodes[0].vllm[0].job: no vLLM in the fleet has role = \"head\" and job = 'qwen3-235b'",
    ),
    (
        "two-heads",
        NODE
        + '[[nodes.vllm]]\nport = 8000\nrole = "head"\njob = "j"\n'
        + NODE2
        + '[[nodes.vllm]]\nport = 8000\nrole = "head"\njob = "j"\n',
        "nodes[1].vllm[0].job: job 'j' already has a head at nodes[0].vllm[0]",
    ),
    # nodes
    (
        "node-name",
        '[[nodes]]\nname = "spark 1"\nhost = "192.168.1.11"\n',
        "nodes[0].name: must be 1 to 63 letters, digits, '.', '_' or '-', starting with a letter or digit "
        "(got 'spark 1')",
    ),
    (
        "node-host-scheme",
        '[[nodes]]\nname = "spark1"\nhost = "http://192.168.1.11"\n',
        "nodes[0].host: must be a host name or IP address without a scheme (got 'http://192.168.1.11')",
    ),
    (
        "node-host-port",
        '[[nodes]]\nname = "spark1"\nhost = "192.168.1.11:22"\n',
        "nodes[0].host: must be a host name or IP address only, no port or path (got '192.168.1.11:22'); "
        "ports go in the vllm, exporter and service tables",
    ),
    (
        "node-host-spaces",
        '[[nodes]]\nname = "spark1"\nhost = "spark 1"\n',
        "nodes[0].host: must be a host name or IP address with no spaces (got 'spark 1')",
    ),
    ("node-host-missing", '[[nodes]]\nname = "spark1"\n', "nodes[0].host: missing (required)"),
    ("node-local", NODE + 'local = "yes"\n', "nodes[0].local: must be true or false (no quotes) (got 'yes')"),
    (
        "node-duplicate-name",
        NODE + NODE,
        "nodes[1].name: same as nodes[0] ('spark1'); node names must be unique",
    ),
    (
        "nodes-empty",
        "nodes = []\n",
        "nodes: needs at least one node: add a [[nodes]] table with name and host",
    ),
    (
        "nodes-missing",
        "poll_interval_s = 1.0\n",
        "nodes: missing: add at least one [[nodes]] table with name and host",
    ),
    (
        "nodes-as-table",
        '[nodes]\nname = "spark1"\nhost = "192.168.1.11"\n',
        "nodes: must be an array of tables: write [[nodes]], not [nodes]",
    ),
    (
        "vllm-as-table",
        NODE + "[nodes.vllm]\nport = 8001\n",
        "nodes[0].vllm: must be an array of tables: write [[nodes.vllm]], not [nodes.vllm]",
    ),
    (
        "ssh-as-array",
        NODE + '[[nodes.ssh]]\nuser = "milo"\n',
        "nodes[0].ssh: must be a table: write [nodes.ssh], not [[nodes.ssh]]",
    ),
    # ssh
    (
        "ssh-user",
        NODE + '[nodes.ssh]\nuser = "-oProxyCommand=x"\n',
        "nodes[0].ssh.user: must be a unix user name: letters, digits, '_', '.', '-', up to 32, "
        "not starting with a digit or '-' (got '-oProxyCommand=x')",
    ),
    ("ssh-port", NODE + "[nodes.ssh]\nport = 0\n", "nodes[0].ssh.port: must be >= 1 (got 0)"),
    (
        "ssh-timeout",
        NODE + "[nodes.ssh]\nconnect_timeout_s = 0\n",
        "nodes[0].ssh.connect_timeout_s: must be > 0 (got 0)",
    ),
    # exporters
    (
        "exporter-no-url",
        NODE + "[nodes.gpu_exporter]\n",
        'nodes[0].gpu_exporter.url: missing: give url = "http://HOST:PORT/metrics" or port = PORT',
    ),
    (
        "exporter-url-scheme",
        NODE + '[nodes.node_exporter]\nurl = "192.168.1.11:9100/metrics"\n',
        "nodes[0].node_exporter.url: must start with http:// or https:// (got '192.168.1.11:9100/metrics')",
    ),
    (
        "exporter-port",
        NODE + "[nodes.gpu_exporter]\nport = 98350\n",
        "nodes[0].gpu_exporter.port: must be <= 65535 (got 98350)",
    ),
    (
        "exporter-url-and-port-disagree",
        NODE + '[nodes.gpu_exporter]\nurl = "http://192.168.1.11:9835/metrics"\nport = 9100\n',
        "nodes[0].gpu_exporter.port: does not match the port in url (9835); give url or port, not both",
    ),
    # services
    (
        "service-kind",
        NODE + '[[nodes.services]]\nname = "asr"\nkind = "stt"\nport = 8765\n',
        "nodes[0].services[0].kind: must be one of 'asr', 'tts', 'ollama' or 'http' (got 'stt')",
    ),
    (
        "service-path",
        NODE + '[[nodes.services]]\nname = "asr"\nport = 8765\npath = "health"\n',
        "nodes[0].services[0].path: must start with '/' and contain no spaces (got 'health')",
    ),
    (
        "service-path-with-url",
        NODE + '[[nodes.services]]\nname = "asr"\nurl = "http://192.168.1.11:8765/health"\npath = "/health"\n',
        "nodes[0].services[0].path: only used with port; with url, put the path in the url",
    ),
    (
        "service-name-missing",
        NODE + "[[nodes.services]]\nport = 8765\n",
        "nodes[0].services[0].name: missing (required)",
    ),
    (
        "engine-unknown",
        NODE + '[[nodes.vllm]]\nengine = "lmstudio"\nport = 1234\n',
        "nodes[0].vllm[0].engine: 'lmstudio' is no engine sparktui knows "
        "(it knows llamacpp, nim, ollama, sglang, trtllm, vllm; docs/engines.md says how to add one)",
    ),
    (
        "engine-not-a-name",
        NODE + '[[nodes.vllm]]\nengine = "vLLM 0.33"\nport = 8000\n',
        "nodes[0].vllm[0].engine: an engine is a name such as 'vllm' or 'llamacpp' (got 'vLLM 0.33')",
    ),
    (
        "service-no-url",
        NODE + '[[nodes.services]]\nname = "asr"\n',
        'nodes[0].services[0].url: missing: give url = "http://HOST:PORT/health" or port = PORT (and path)',
    ),
    (
        "service-expect-status",
        NODE + '[[nodes.services]]\nname = "asr"\nport = 8765\nexpect_status = 42\n',
        "nodes[0].services[0].expect_status: must be >= 100 (got 42)",
    ),
    (
        "service-timeout",
        NODE + '[[nodes.services]]\nname = "asr"\nport = 8765\ntimeout_s = -1.0\n',
        "nodes[0].services[0].timeout_s: must be > 0 (got -1)",
    ),
    (
        "service-duplicate-name",
        NODE + '[[nodes.services]]\nname = "asr"\nport = 8765\n[[nodes.services]]\nname = "asr"\nport = 8766\n',
        "nodes[0].services[1].name: same as services[0] ('asr'); give each service on a node its own name",
    ),
    # thresholds
    (
        "kv-usage-zero",
        "[thresholds]\nkv_usage_warn = 0\n" + NODE,
        "thresholds.kv_usage_warn: must be > 0 (got 0)",
    ),
    (
        "kv-usage-percent",
        "[thresholds]\nkv_usage_warn = 90\n" + NODE,
        "thresholds.kv_usage_warn: must be <= 1 (got 90)",
    ),
    (
        "engine-imbalance-percent",
        "[thresholds]\nengine_imbalance_warn = 20\n" + NODE,
        "thresholds.engine_imbalance_warn: must be <= 1 (got 20)",
    ),
    (
        "engine-imbalance-zero",
        "[thresholds]\nengine_imbalance_warn = 0\n" + NODE,
        "thresholds.engine_imbalance_warn: must be > 0 (got 0)",
    ),
    (
        "waiting-negative",
        "[thresholds]\nwaiting_warn = -1\n" + NODE,
        "thresholds.waiting_warn: must be >= 0 (got -1)",
    ),
    (
        "ttft-nan",
        "[thresholds]\nttft_p90_warn_s = nan\n" + NODE,
        "thresholds.ttft_p90_warn_s: must be a finite number (got nan)",
    ),
    (
        "mem-crit-not-below-warn",
        "[thresholds]\nmem_available_warn_gib = 20.0\nmem_available_crit_gib = 20.0\n" + NODE,
        "thresholds.mem_available_crit_gib: must be less than mem_available_warn_gib (20) (got 20)",
    ),
    # fleet
    ("poll-too-fast", "poll_interval_s = 0.05\n" + NODE, "poll_interval_s: must be >= 0.1 (got 0.05)"),
    ("poll-too-slow", "poll_interval_s = 7200\n" + NODE, "poll_interval_s: must be <= 3600 (got 7200)"),
    ("timeout-zero", "timeout_s = 0\n" + NODE, "timeout_s: must be > 0 (got 0)"),
    ("stale-after-zero", "stale_after = 0\n" + NODE, "stale_after: must be >= 1 (got 0)"),
    ("max-body-small", "max_body_bytes = 1024\n" + NODE, "max_body_bytes: must be >= 65536 (got 1024)"),
    (
        "max-body-huge",
        f"max_body_bytes = {2**63 - 1}\n" + NODE,
        f"max_body_bytes: must be <= 268435456 (got {2**63 - 1})",
    ),
    ("stale-after-huge", f"stale_after = {2**63 - 1}\n" + NODE, f"stale_after: must be <= 1000 (got {2**63 - 1})"),
    ("timeout-huge", "timeout_s = 1e300\n" + NODE, "timeout_s: must be <= 300 (got 1e+300)"),
    (
        "waiting-warn-huge",
        f"[thresholds]\nwaiting_warn = {2**63 - 1}\n" + NODE,
        f"thresholds.waiting_warn: must be <= 1000000 (got {2**63 - 1})",
    ),
    (
        "alert-for-huge",
        NODE + '[[alerts]]\nname = "a"\nmetric = "node_down"\nfor_s = 1e12\n',
        "alerts[0].for_s: must be <= 604800 (got 1e+12)",
    ),
    (
        "source-in-file",
        'source = "x"\n' + NODE,
        "source: not a config key (sparktui sets it to the file's path); remove it",
    ),
]


@pytest.mark.parametrize(("text", "expected"), [(t, e) for _, t, e in RULES], ids=[i for i, _, _ in RULES])
def test_each_rule_fails_with_one_line_naming_file_and_key(text: str, expected: str) -> None:
    assert errors_of(text) == [f"{SRC}: {expected}"]


def test_several_errors_are_reported_at_once() -> None:
    text = (
        "poll_interval_s = 0\n"
        "[thresholds]\nkv_usage_warn = 2.0\n"
        + NODE
        + '[[nodes.vllm]]\nurl = "ftp://x"\n'
        + '[[nodes.services]]\nname = "asr"\nport = 0\n'
        + '[[nodes]]\nname = "spark 2"\nhost = "192.168.1.12"\n'
        + '[[nodes.vllm]]\nport = 8001\nunit = "a b"\n'
    )
    errors = errors_of(text)
    assert errors == [
        f"{SRC}: poll_interval_s: must be >= 0.1 (got 0)",
        f"{SRC}: thresholds.kv_usage_warn: must be <= 1 (got 2)",
        f"{SRC}: nodes[0].vllm[0].url: must start with http:// or https:// (got 'ftp://x')",
        f"{SRC}: nodes[0].services[0].port: must be >= 1 (got 0)",
        f"{SRC}: nodes[1].name: must be 1 to 63 letters, digits, '.', '_' or '-', starting with a letter "
        "or digit (got 'spark 2')",
        f"{SRC}: nodes[1].vllm[0].unit: must be a systemd unit name: letters, digits and '@', '.', '_', ':', "
        "'-' only (got 'a b')",
    ]
    assert all("\n" not in line for line in errors)


def test_several_errors_from_one_check_are_reported_together() -> None:
    text = (
        NODE
        + "[[nodes.vllm]]\nport = 8001\n[[nodes.vllm]]\nport = 8002\n"
        + '[[nodes.services]]\nname = "x"\nport = 1\n[[nodes.services]]\nname = "x"\nport = 2\n'
    )
    assert errors_of(text) == [
        f"{SRC}: nodes[0].vllm[1].name: same as vllm[0] ('vllm'); give each vLLM on a node its own name",
        f"{SRC}: nodes[0].services[1].name: same as services[0] ('x'); give each service on a node its own name",
    ]


def test_config_error_str_is_the_lines_joined() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config("timeout_s = 0\nstale_after = 0\n" + NODE, source=SRC, env={})
    assert str(caught.value) == "\n".join(caught.value.errors)
    assert len(caught.value.errors) == 2


# --- unknown keys ---------------------------------------------------------------------------------


def test_unknown_key_suggests_the_closest_key() -> None:
    assert errors_of(NODE + "vlm = []\n") == [f"{SRC}: nodes[0].vlm: unknown key (did you mean 'vllm'?)"]


def test_unknown_key_without_a_close_match_lists_the_valid_keys() -> None:
    assert errors_of(NODE + "[nodes.gpu_exporter]\nport = 9835\nzzz = 1\n") == [
        f"{SRC}: nodes[0].gpu_exporter.zzz: unknown key (valid keys: port, url)"
    ]


def test_unknown_key_below_a_sub_table_says_where_it_belongs() -> None:
    text = '[[nodes]]\nname = "spark1"\n[nodes.ssh]\nuser = "milo"\nhost = "192.168.1.11"\n'
    assert errors_of(text) == [
        f"{SRC}: nodes[0].host: missing (required)",
        f"{SRC}: nodes[0].ssh.host: unknown key here; 'host' belongs to [[nodes]]: move it above the "
        "[nodes.ssh] header",
    ]


def test_api_key_is_not_suggested_for_a_misspelt_key() -> None:
    assert errors_of(vllm("port = 8001\napi_kee = 1\n")) == [
        f"{SRC}: nodes[0].vllm[0].api_kee: unknown key (did you mean 'api_key_env'?)"
    ]


# --- TOML syntax and files ------------------------------------------------------------------------


def test_toml_syntax_error_names_line_and_column() -> None:
    text = 'poll_interval_s = 1.0\n[[nodes]]\nname = "spark1"\nhost = 192.168.1.11\n'
    assert errors_of(text) == [
        f"{SRC}: line 4, column 15: TOML syntax error: expected newline or end of document after a "
        'statement; text values need quotes, like host = "..."'
    ]


def test_toml_syntax_error_at_the_end_of_the_file() -> None:
    assert errors_of("nodes = [\n") == [f"{SRC}: at the end of the file: TOML syntax error: invalid value"]


def test_missing_file_says_how_to_make_one(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    with pytest.raises(ConfigError) as caught:
        load_config(path, env={})
    assert caught.value.errors == [
        f"{path}: no config file; run 'sparktui init' to write one, or 'sparktui demo' to try the demo fleet"
    ]


def test_file_errors_name_the_file_path(tmp_path: Path) -> None:
    path = tmp_path / "fleet.toml"
    path.write_text("stale_after = 0\n" + NODE, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(path, env={})
    assert caught.value.errors == [f"{path}: stale_after: must be >= 1 (got 0)"]


@pytest.mark.parametrize(
    "nested",
    ["x = " + "[" * 3000 + "]" * 3000, "x = " + "{a = " * 3000 + "1" + "}" * 3000],
    ids=["arrays", "inline-tables"],
)
def test_a_config_nested_thousands_deep_is_one_line_naming_the_file(tmp_path: Path, nested: str) -> None:
    path = tmp_path / "fleet.toml"
    path.write_text(NODE + nested + "\n", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(path, env={})
    assert caught.value.errors == [
        f"{path}: arrays or tables are nested too deeply to read; a sparktui config nests at most a few levels "
        "(docs/config.md)"
    ]


# --- secrets at rest -------------------------------------------------------------------------------------

SLACK_URL = "https://hooks.slack.com/services/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"


def test_the_secrets_a_file_holds_itself_are_found_and_references_are_not() -> None:
    data = tomllib.loads(
        NODE
        + '[nodes.gpu_exporter]\nurl = "http://ops:hunter22@192.168.1.11:9835/metrics"\n'
        + '[[nodes.vllm]]\nurl = "http://192.168.1.11:8001"\napi_key = "sk-1"\n'
        + '[[nodes.vllm]]\nname = "b"\nport = 8002\napi_key_env = "VLLM_KEY"\napi_key_file = "key.txt"\n'
        + '[[nodes.services]]\nname = "asr"\nurl = "http://192.168.1.11:8765/health?verbose=1"\n'
        + f'[[notifiers]]\nkind = "slack"\nurl = "{SLACK_URL}"\n'
        + '[[notifiers]]\nkind = "webhook"\nname = "ops"\nurl = "https://alerts.example/hook?token=s3cr3t"\n'
        + '[[notifiers]]\nkind = "webhook"\nname = "lan"\nurl = "http://192.168.1.10:9000/hooks/sparktui"\n'
        + '[[notifiers]]\nkind = "telegram"\ntoken_env = "TG_TOKEN"\nchat_id = 42\ntoken = "7012:AAF"\n'
        + '[[notifiers]]\nkind = "slack"\nname = "s2"\nurl_file = "slack.url"\ntoken_file = "t.txt"\n'
        + '[[notifiers]]\nkind = "webhook"\nname = "teams"\nurl = "https://x.example/wf?api-version=1&sig=Ab9"\n'
        + '[prometheus]\nurl = "https://mon.lab/prometheus?access_token=abc123"\npassword_env = "PROM_PW"\n'
    )
    assert secrets_in_file(data) == [
        "nodes[0].gpu_exporter.url",
        "nodes[0].vllm[0].api_key",
        "notifiers[0].url",
        "notifiers[1].url",
        "notifiers[3].token",
        "notifiers[5].url",
        "prometheus.url",
    ]


def test_the_warning_is_for_a_file_others_may_read_that_holds_a_secret(tmp_path: Path) -> None:
    path = tmp_path / "fleet.toml"
    keys = ["notifiers[0].url", "prometheus.url"]
    assert exposed_secrets_warning(path, 0o100644, keys) == (
        f"sparktui: warning: {path} is readable by others (mode 0644) and holds a secret in "
        f"notifiers[0].url, prometheus.url; chmod 600 {path}"
    )
    assert exposed_secrets_warning(path, 0o100640, keys) is not None  # the group is others too
    assert exposed_secrets_warning(path, 0o100600, keys) is None
    assert exposed_secrets_warning(path, 0o100400, keys) is None
    assert exposed_secrets_warning(path, 0o100644, []) is None


def test_loading_a_file_others_may_read_warns_once_when_it_holds_a_secret(tmp_path: Path) -> None:
    path = tmp_path / "fleet.toml"
    path.write_text(NODE + f'[[notifiers]]\nkind = "slack"\nurl = "{SLACK_URL}"\n', encoding="utf-8")
    path.chmod(0o644)
    warnings: list[str] = []
    load_config(path, env={}, warn=warnings.append)
    assert warnings == [
        f"sparktui: warning: {path} is readable by others (mode 0644) and holds a secret in notifiers[0].url; "
        f"chmod 600 {path}"
    ]
    path.chmod(0o600)
    load_config(path, env={}, warn=warnings.append)
    path.write_text(NODE + '[[notifiers]]\nkind = "slack"\nurl_env = "SLACK_URL"\n', encoding="utf-8")
    path.chmod(0o644)
    load_config(path, env={"SLACK_URL": SLACK_URL}, warn=warnings.append)
    assert len(warnings) == 1  # not for 0600, nor for a secret kept elsewhere


def test_ca_file_is_read_relative_to_the_config_and_must_hold_a_certificate(tmp_path: Path) -> None:
    path = tmp_path / "fleet.toml"
    path.write_text('ca_file = "ca.pem"\n' + NODE, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(path, env={})
    assert caught.value.errors == [f"{path}: ca_file: no such file: {tmp_path / 'ca.pem'}"]
    (tmp_path / "ca.pem").write_text("not a certificate\n", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(path, env={})
    assert caught.value.errors == [
        f"{path}: ca_file: {tmp_path / 'ca.pem'} holds no PEM CA certificate (-----BEGIN CERTIFICATE-----)"
    ]


def test_a_folder_is_not_a_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path, env={})
    assert caught.value.errors == [f"{tmp_path}: is a folder, not a config file"]


# --- where the file is ------------------------------------------------------------------------------


def test_sparktui_config_env_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "fleet.toml"
    assert default_config_path({"SPARKTUI_CONFIG": str(path)}) == path
    path.write_text(NODE, encoding="utf-8")
    assert load_config(env={"SPARKTUI_CONFIG": str(path)}).source == str(path)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="XDG paths are the Linux convention")
def test_default_path_is_in_the_xdg_config_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert default_config_path({}) == tmp_path / "sparktui" / "config.toml"
    assert default_config_path({"SPARKTUI_CONFIG": ""}) == tmp_path / "sparktui" / "config.toml"


# --- paths and secrets ------------------------------------------------------------------------------


def test_api_key_comes_from_the_environment() -> None:
    fleet = parse_config(vllm('port = 8001\napi_key_env = "QWEN_KEY"\n'), source=SRC, env={"QWEN_KEY": SECRET + "\n"})
    key = fleet.nodes[0].vllm[0].api_key
    assert key is not None
    assert key.get_secret_value() == SECRET


def test_api_key_file_is_read_relative_to_the_config_folder(tmp_path: Path) -> None:
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "qwen.key").write_text(f"  {SECRET}\n", encoding="utf-8")
    path = tmp_path / "fleet.toml"
    path.write_text(vllm('port = 8001\napi_key_file = "keys/qwen.key"\n'), encoding="utf-8")
    spec = load_config(path, env={}).nodes[0].vllm[0]
    assert spec.api_key_file == tmp_path / "keys" / "qwen.key"
    assert spec.api_key is not None
    assert spec.api_key.get_secret_value() == SECRET


def test_ssh_paths_expand_home_and_resolve_against_the_config_folder(tmp_path: Path) -> None:
    path = tmp_path / "fleet.toml"
    path.write_text(NODE + '[nodes.ssh]\nkey_file = "~/.ssh/id_spark"\nknown_hosts = "hosts/known"\n', encoding="utf-8")
    ssh = load_config(path, env={}).nodes[0].ssh
    assert ssh.key_file == Path.home() / ".ssh" / "id_spark"
    assert ssh.known_hosts == tmp_path / "hosts" / "known"


def test_missing_environment_variable_is_reported() -> None:
    assert errors_of(vllm('port = 8001\napi_key_env = "QWEN_KEY"\n')) == [
        f"{SRC}: nodes[0].vllm[0].api_key_env: environment variable QWEN_KEY is not set; "
        "export it before starting sparktui, or use api_key_file"
    ]


def test_empty_environment_variable_is_reported() -> None:
    assert errors_of(vllm('port = 8001\napi_key_env = "QWEN_KEY"\n'), env={"QWEN_KEY": "  "}) == [
        f"{SRC}: nodes[0].vllm[0].api_key_env: environment variable QWEN_KEY is empty; set it to the API key"
    ]


def test_missing_and_empty_key_files_are_reported_together(tmp_path: Path) -> None:
    (tmp_path / "empty.key").write_text("\n", encoding="utf-8")
    text = (
        NODE
        + '[[nodes.vllm]]\nname = "a"\nport = 8001\napi_key_file = "absent.key"\n'
        + '[[nodes.vllm]]\nname = "b"\nport = 8002\napi_key_file = "empty.key"\n'
        + '[[nodes.vllm]]\nname = "c"\nport = 8003\napi_key_env = "UNSET_KEY"\n'
    )
    with pytest.raises(ConfigError) as caught:
        parse_config(text, source=SRC, env={}, base_dir=tmp_path)
    assert caught.value.errors == [
        f"{SRC}: nodes[0].vllm[0].api_key_file: no such file: {tmp_path / 'absent.key'}",
        f"{SRC}: nodes[0].vllm[1].api_key_file: {tmp_path / 'empty.key'} is empty; put the API key in it",
        f"{SRC}: nodes[0].vllm[2].api_key_env: environment variable UNSET_KEY is not set; "
        "export it before starting sparktui, or use api_key_file",
    ]


def test_secret_never_appears_in_specs_or_messages(tmp_path: Path) -> None:
    fleet = parse_config(vllm('port = 8001\napi_key_env = "QWEN_KEY"\n'), source=SRC, env={"QWEN_KEY": SECRET})
    spec = fleet.nodes[0].vllm[0]
    assert spec.api_key is not None
    for shown in (repr(fleet), str(fleet), repr(spec), str(spec), fleet.model_dump_json(), str(spec.api_key)):
        assert SECRET not in shown

    # A key written into the file, pasted into api_key_env, or put in a URL is refused without echoing it.
    text = (
        NODE
        + f'[[nodes.vllm]]\nname = "a"\nport = 8001\napi_key = "{SECRET}"\n'
        + f'[[nodes.vllm]]\nname = "b"\nport = 8002\napi_key_env = "{SECRET}"\n'
        + f'[[nodes.vllm]]\nname = "c"\nurl = "http://milo:{SECRET}@192.168.1.11:8003"\n'
        + f'[[nodes.vllm]]\nname = "d"\nurl = "ftp://milo:{SECRET}@192.168.1.11:8004"\n'
    )
    errors = errors_of(text, env={"X": SECRET})
    assert errors == [
        f"{SRC}: nodes[0].vllm[0].api_key: keys do not go in the config file; "
        'set api_key_env = "VARIABLE" or api_key_file = "path/to/file" instead',
        f"{SRC}: nodes[0].vllm[1].api_key_env: must be the name of an environment variable "
        "(letters, digits and '_'), not the key itself",
        f"{SRC}: nodes[0].vllm[2].url: must not contain a user name or password; give the API key with "
        "api_key_env or api_key_file",
        f"{SRC}: nodes[0].vllm[3].url: must not contain a user name or password; give the API key with "
        "api_key_env or api_key_file",
    ]
    assert all(SECRET not in line for line in errors)

    # pydantic's own message for a spec built in code does not print the key either.
    with pytest.raises(ValidationError) as caught:
        ServerSpec.model_validate({"api_key": SECRET, "unit": "bad unit"})
    assert SECRET not in str(caught.value)


def test_kiosk_and_keymap_are_validated() -> None:
    fleet = parse_config(
        '[kiosk]\nrotate_s = 20.0\nunlock_key = "ctrl+u"\n[keymap]\nopen-node = "o"\n' + NODE, source=SRC, env={}
    )
    assert fleet.kiosk.rotate_s == 20.0 and fleet.kiosk.unlock_key == "ctrl+u"
    assert fleet.keymap == {"open-node": "o"}
    with pytest.raises(ConfigError) as caught:
        parse_config('[kiosk]\nrotate_s = 1.0\nunlock_key = "ctrl u"\n' + NODE, source=SRC, env={})
    assert len(caught.value.errors) == 2
    assert any("kiosk.unlock_key: must be a key name" in e for e in caught.value.errors)


def test_diagnosis_thresholds_change_the_catalogue_and_bad_keys_are_one_line_each() -> None:
    from sparktui.config import catalogue_for

    fleet = parse_config(
        NODE + '[diagnosis]\n"engine-wedged.open_after" = 8\n"kv-pressure.kv_usage_min" = 0.95\n', env={}
    )
    catalogue = catalogue_for(fleet.diagnosis)
    assert catalogue.rule("engine-wedged").param("open_after") == 8.0
    assert catalogue.rule("kv-pressure").param("kv_usage_min") == 0.95
    assert catalogue_for({}).rule("engine-wedged").param("open_after") == 5.0  # the shipped default
    with pytest.raises(ConfigError) as caught:
        parse_config(
            NODE + '[diagnosis]\n"engine-wedgd.open_after" = 8\n"kv-pressure.nope" = 1\n"crash-loop" = 2\n',
            source="f.toml",
            env={},
        )
    lines = str(caught.value).splitlines()
    assert len(lines) == 3, lines
    assert "f.toml: diagnosis: diagnosis threshold 'engine-wedgd.open_after': there is no rule" in lines[0]
    assert "rule 'kv-pressure' has no parameter 'nope'" in lines[1]
    assert "write it as '<rule id>.<parameter>'" in lines[2]
