"""The config ``sparktui init`` writes: TOML where every value says how it was found.

What was probed and not found is listed in comments. Remote text is kept to one line in a comment and
escaped in a string, so a host cannot break the file.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

from sparktui.discovery.launches import (
    Launch,
    is_llama_container,
    is_llama_unit,
    is_nim_container,
    is_nim_unit,
    is_ollama_container,
    is_ollama_unit,
    is_sglang_container,
    is_sglang_unit,
    is_trtllm_container,
    is_trtllm_unit,
    llama_launches,
    nim_launches,
    ollama_launches,
    sglang_launches,
    trtllm_launches,
    vllm_launches,
)
from sparktui.discovery.listeners import Listener
from sparktui.discovery.names import (
    NIM_NAME,
    OLLAMA_NAME,
    SGLANG_NAME,
    TRTLLM_NAME,
    planned_llama_name,
    served_model_name,
    sglang_name,
    unique,
    vllm_name,
)
from sparktui.discovery.plan import (
    Planned,
    PlannedLlama,
    PlannedNim,
    PlannedOllama,
    PlannedSglang,
    PlannedTrtllm,
    PlannedVllm,
    plan_instances,
)
from sparktui.discovery.probes import (
    ROLE_LABELS,
    ExporterAnswer,
    LlamaAnswer,
    NimAnswer,
    NoAnswer,
    OllamaAnswer,
    PortFinding,
    ServiceAnswer,
    SglangAnswer,
    TrtllmAnswer,
    VllmAnswer,
)
from sparktui.discovery.units import ContainerInfo, UnitInfo
from sparktui.engines.llamacpp.command import ServerArgs
from sparktui.engines.ollama.command import DEFAULT_PORT as OLLAMA_DEFAULT_PORT
from sparktui.engines.ollama.command import HOST_VARIABLE as OLLAMA_HOST_VARIABLE
from sparktui.engines.sglang.command import SglangArgs
from sparktui.engines.trtllm.command import TrtllmArgs
from sparktui.engines.vllm.command import VllmArgs
from sparktui.model.exporters import ExporterKind
from sparktui.model.units import fmt_count

_GPU_KINDS = (ExporterKind.NVIDIA_GPU_EXPORTER, ExporterKind.DGX_SPARK, ExporterKind.DCGM)

COMMENT_COLUMN = 36
WRAP_WIDTH = 104
_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")


def one_line(text: str, limit: int = 300) -> str:
    """Remote text made safe for a comment: control characters become spaces; long text is cut."""
    flat = _CONTROL.sub(" ", text).strip()
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def toml_string(text: str) -> str:
    """A TOML basic string."""
    out = ['"']
    for char in text:
        if char in ('"', "\\"):
            out.append("\\" + char)
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def _value(value: str | int | float | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    return toml_string(value)


def kv(key: str, value: str | int | float | bool, comment: str = "", *, disabled: bool = False) -> str:
    """``key = value   # comment``, with the comment at ``COMMENT_COLUMN`` when the line is short."""
    line = f"{'# ' if disabled else ''}{key} = {_value(value)}"
    if not comment:
        return line
    if len(line) < COMMENT_COLUMN - 1:
        return f"{line.ljust(COMMENT_COLUMN - 1)} # {one_line(comment)}"
    return f"{line}  # {one_line(comment)}"


def comment_block(text: str, indent: str = "") -> list[str]:
    """A paragraph as ``#`` lines wrapped at ``WRAP_WIDTH``."""
    # Spaces inside `code` do not break lines (textwrap only breaks at ASCII whitespace).
    kept = re.sub(r"`[^`\n]*`", lambda m: m.group(0).replace(" ", "\xa0"), one_line(text, 2000))
    wrapped = textwrap.wrap(
        kept,
        width=WRAP_WIDTH - 2 - len(indent),
        break_long_words=False,
        break_on_hyphens=False,
    )
    return [f"# {indent}{line}".replace("\xa0", " ") for line in wrapped] or ["#"]


@dataclass(frozen=True, slots=True)
class SshSettings:
    """The SSH settings given on the command line (None: not given, the default applies)."""

    user: str | None = None
    port: int | None = None
    key_file: str | None = None
    known_hosts: str | None = None


@dataclass(frozen=True, slots=True)
class SshFindings:
    hostname: str | None
    units: tuple[UnitInfo, ...] = ()
    containers: tuple[ContainerInfo, ...] = ()
    notes: tuple[str, ...] = ()  # what could not be looked at ("docker: permission denied...")
    listeners: tuple[Listener, ...] = ()  # the TCP ports the host listens on (``ss -Hltnp``)


@dataclass(frozen=True, slots=True)
class HostReport:
    """Everything init learned about one host."""

    host: str
    name: str
    name_how: str
    findings: tuple[PortFinding, ...]
    ssh: SshFindings | None  # None: SSH discovery was skipped (``ssh_skipped`` says why)
    ssh_skipped: str | None = None
    ssh_port: int | None = None  # the PORT of a HOST:PORT argument (overrides --port for this host)


def _vllm_section(plan: PlannedVllm, name: str, *, ssh_looked: bool) -> list[str]:
    lines = ["[[nodes.vllm]]", kv("name", name, _name_how(plan))]
    if plan.port is not None:
        lines.append(kv("port", plan.port, _port_how(plan)))
    launch, http = plan.launch, plan.http
    if launch is not None:
        lines += _launch_lines(plan, launch, _gpu_memory_lines(launch))
    else:
        lines += _no_launch_lines(ssh_looked=ssh_looked)
    args = launch.vllm if launch is not None else None
    if args is not None:
        lines += _command_line_notes(args)
    if http is not None and http.needs_api_key:
        lines.append(
            _api_key_line(
                "VLLM_API_KEY", "/v1/models answered 401: vLLM runs with --api-key; name the variable holding it"
            )
        )
    return lines


def _llama_section(plan: PlannedLlama, name: str, *, ssh_looked: bool) -> list[str]:
    """A llama.cpp llama-server: an instance with ``engine = "llamacpp"``, from what answered on its
    port (``/props``) and the unit or container that runs it."""
    answer, launch = plan.http, plan.launch
    args = launch.llama if launch is not None else None
    engine = ("llamacpp", "llama.cpp's llama-server", "/props")
    lines = _engine_head(plan, engine, (name, _llama_name_how(plan)), _llama_port_how(plan))
    if answer is not None and answer.router:
        lines += comment_block(
            "A router starts one llama-server per model it loads, each on a port of its own: sparktui reads "
            "them through the router's /v1/models and never asks for a model it would load"
        )
    elif answer is not None:
        facts = [
            f"{answer.total_slots} slots" if answer.total_slots is not None else "",
            f"a context of {answer.n_ctx} tokens (n_ctx)" if answer.n_ctx is not None else "",
        ]
        if any(facts):
            lines += comment_block(f"It runs {', '.join(f for f in facts if f)} (/props).")
    if answer is not None and not answer.metrics:
        lines += comment_block(
            "/metrics did not answer: start llama-server with --metrics, or sparktui reads only its /health, "
            "/props and /v1/models"
        )
    if args is not None and launch is not None:
        lines += _llama_command_notes(args, launch, answered=answer is not None)
    if launch is None:
        lines += _no_launch_lines(ssh_looked=ssh_looked, more="")
    return lines


def _sglang_section(plan: PlannedSglang, name: str, name_how: str, *, ssh_looked: bool) -> list[str]:
    """An SGLang: an instance with ``engine = "sglang"``, from what answered on its port (``/server_info``,
    ``/metrics`` or ``/v1/models``) and the unit or container that runs it."""
    answer, launch = plan.http, plan.launch
    args = launch.sglang if launch is not None else None
    engine = ("sglang", "SGLang", answer.recognised_by if answer is not None else "")
    lines = _engine_head(plan, engine, (name, name_how), _sglang_port_how(plan))
    info = answer.info if answer is not None else None
    tp = (info.tp_size if info else None) or (args.tp_size if args is not None else None)
    dp = (info.dp_size if info else None) or (args.dp_size if args is not None else None)
    parallel = [f"tensor parallel {tp}" if tp and tp > 1 else "", f"data parallel {dp}" if dp and dp > 1 else ""]
    if any(parallel):
        where = "/server_info" if info is not None else "its command line"
        lines += comment_block(f"It runs {', '.join(p for p in parallel if p)} ({where}).")
    if answer is not None and not answer.metrics:
        lines += comment_block(
            "/metrics did not answer with sglang: names: start SGLang with --enable-metrics for numbers, or "
            "sparktui reads only its /ready, /server_info and /v1/models"
        )
    if args is not None and launch is not None:
        lines += _sglang_command_notes(args, launch, answered=answer is not None)
    if answer is not None and answer.needs_api_key and (args is None or not args.api_key):
        lines.append(_api_key_line("SGLANG_API_KEY", "/server_info answered 401: SGLang runs with --api-key"))
    if launch is None:
        lines += _no_launch_lines(ssh_looked=ssh_looked, more="")
    return lines


_TRTLLM_NO_METRICS = (
    "/prometheus/metrics has no trtllm_ names: start trtllm-serve with return_perf_metrics: true in its "
    "--extra_llm_api_options YAML for numbers, or sparktui reads only its /health, /version and /v1/models "
    "(never its /metrics, whose stats reading would drain)"
)
_NIM_LOADING = (
    "/v1/health/ready did not answer 200 during init: its model was still loading (sparktui shows it loading "
    "until it is ready)"
)


def _trtllm_nim_section(plan: PlannedTrtllm | PlannedNim, name: tuple[str, str], *, ssh_looked: bool) -> list[str]:
    """A TensorRT-LLM ``trtllm-serve`` (``engine = "trtllm"``) or a NIM (``engine = "nim"``), from what
    answered on its port and the unit or container that runs it."""
    answer, launch = plan.http, plan.launch
    args = launch.trtllm if launch is not None else None
    if isinstance(answer, NimAnswer) or (launch is not None and launch.engine == "nim"):
        kind, label = "nim", "NIM"
        version = answer.release if isinstance(answer, NimAnswer) else ""
        note = None if not isinstance(answer, NimAnswer) or answer.ready else _NIM_LOADING
    else:
        kind, label = "trtllm", "TensorRT-LLM"
        version = answer.version if answer is not None else ""
        note = None if answer is None or answer.metrics else _TRTLLM_NO_METRICS
    if answer is not None:
        served = f"; serves {', '.join(answer.models)}" if answer.models else ""
        port_how = f"{label} {version} answered {answer.recognised_by}{served}"
    else:
        port_how = f"did not answer during init; port from {launch.port_how}" if launch is not None else ""
    engine = (kind, label, answer.recognised_by if answer is not None else "")
    lines = _engine_head(plan, engine, name, port_how)
    if note is not None:
        lines += comment_block(note)
    if args is not None and launch is not None:
        lines += _trtllm_command_notes(args, launch)
    if launch is not None and launch.nim is not None and launch.nim.model:
        lines += comment_block(f"model: {launch.nim.model} (its image)")
    if launch is None:
        lines += _no_launch_lines(ssh_looked=ssh_looked, more="")
    return lines


def _ollama_section(plan: PlannedOllama, name: str, *, ssh_looked: bool) -> list[str]:
    """An Ollama: an instance with ``engine = "ollama"``, from what answered on its port (``/api/version``,
    ``/api/tags``) and the unit or container that runs it (where it listens: ``OLLAMA_HOST``)."""
    answer, launch = plan.http, plan.launch
    if answer is not None:
        port_how = f"Ollama {answer.version} answered {answer.recognised_by}"
    else:
        port_how = f"did not answer during init; port from {launch.port_how}" if launch is not None else ""
    engine = ("ollama", "Ollama", answer.recognised_by if answer is not None else "")
    lines = _engine_head(plan, engine, (name, "rename it at will"), port_how)
    if answer is not None and answer.models:
        more = f" ({answer.model_count} in all)" if answer.model_count > len(answer.models) else ""
        lines += comment_block(f"Models on its disk (/api/tags): {', '.join(answer.models)}{more}.")
    elif answer is not None:
        lines += comment_block("No models on its disk yet (/api/tags lists none).")
    host = launch.ollama if launch is not None else None
    if host is not None and host.local_only is not None:
        lines += comment_block(
            f"It listens on {host.local_only} only, by {host.port_how()}: sparktui must run on this node to reach "
            f'it, or set Environment="{OLLAMA_HOST_VARIABLE}=0.0.0.0:{host.port or OLLAMA_DEFAULT_PORT}" in its unit '
            "(systemctl edit) or -e in its docker run"
        )
    if launch is None:
        lines += _no_launch_lines(ssh_looked=ssh_looked, more="")
    return lines


def _trtllm_command_notes(args: TrtllmArgs, launch: Launch) -> list[str]:
    """What the trtllm-serve command line says that the config cannot hold."""
    lines: list[str] = []
    facts = [
        f"model: {args.model}" if args.model else "",
        f"tensor parallel {args.tp_size}" if args.tp_size and args.tp_size > 1 else "",
        f"the {args.backend} backend" if args.backend else "",
    ]
    if any(facts):
        lines += comment_block(f"{'; '.join(f for f in facts if f)} ({launch.args_from}).")
    lines += _local_only_lines(args.local_only, given=args.host is not None, program="trtllm-serve")
    if args.extra_options:
        lines += comment_block(
            f"It reads more settings from --extra_llm_api_options {args.extra_options} (not read by init; "
            "return_perf_metrics: true there serves /prometheus/metrics)"
        )
    return lines


def _sglang_port_how(plan: PlannedSglang) -> str:
    answer, launch = plan.http, plan.launch
    if answer is None:
        return f"did not answer during init; port from {launch.port_how}" if launch is not None else ""
    what = f"SGLang {answer.version} answered {answer.recognised_by}"
    if answer.needs_api_key:
        return what + "; /server_info wants an API key"
    served = answer.models or tuple(m for m in (answer.info.model_path if answer.info else None,) if m)
    return what + (f"; serves {', '.join(served)}" if served else "")


def _sglang_command_notes(args: SglangArgs, launch: Launch, *, answered: bool) -> list[str]:
    """What the SGLang command line says that the config cannot hold, or that changes it."""
    lines: list[str] = []
    if args.model_path:
        lines += comment_block(f"model: {args.model_path} (--model-path)")
    if not answered and not args.enable_metrics:
        lines += comment_block(
            f"No --enable-metrics in {launch.args_from}: add it for numbers, or sparktui reads only its "
            "/ready, /server_info and /v1/models"
        )
    lines += _local_only_lines(args.local_only, given=args.host is not None, program="SGLang")
    if args.config_file:
        lines += comment_block(f"It reads more settings from --config {args.config_file} (not read by init)")
    if args.api_key:
        lines.append(_api_key_line("SGLANG_API_KEY", "SGLang runs with --api-key; name the variable holding it"))
    return lines


def _local_only_lines(local_only: str | None, *, given: bool, program: str) -> list[str]:
    """Where a server listens on loopback only (``--host`` as given, else its default): it is reached
    from its own node only."""
    if local_only is None:
        return []
    how = "--host" if given else f"{program}'s default --host"
    return comment_block(
        f"It listens on {local_only} only ({how}): sparktui must run on this node to reach it, or start it "
        "with --host 0.0.0.0"
    )


def _api_key_line(variable: str, why: str) -> str:
    return kv("api_key_env", variable, why, disabled=True)


def _engine_head(
    plan: PlannedLlama | PlannedSglang | PlannedTrtllm | PlannedNim | PlannedOllama,
    engine: tuple[str, str, str],
    name: tuple[str, str],
    port_how: str,
) -> list[str]:
    """The first lines of an instance of another engine than vLLM: its name (and how it was chosen), its
    ``engine`` (its config name, its label, what answered as it), its port and the launch that runs it."""
    kind, label, answered = engine
    launch = plan.launch
    if plan.http is not None:
        engine_how = f"{label} ({answered})"
    else:
        engine_how = f"{label}, from {launch.args_from if launch else 'its command line'}"
    lines = ["[[nodes.vllm]]", kv("name", name[0], name[1]), kv("engine", kind, engine_how)]
    if plan.port is not None:
        lines.append(kv("port", plan.port, port_how))
    if launch is not None:
        lines += _launch_lines(plan, launch, [])
    return lines


def _llama_name_how(plan: PlannedLlama) -> str:
    answer, launch = plan.http, plan.launch
    args = launch.llama if launch is not None else None
    if answer is not None:
        if answer.router:
            return "a router (--models-dir); rename it at will"
        return "--alias" if answer.alias else "from the model file it loaded" if answer.model_path else ""
    if args is not None and args.router:
        return "a router (--models-dir); rename it at will"
    if args is not None and args.alias:
        return "--alias"
    if args is not None and (args.model or args.hf_repo):
        return f"from the model of {'-m' if args.model else '-hf'}"
    if launch is not None:
        return f"from the {'unit' if launch.unit else 'container'} name"
    return "rename it at will"


def _llama_port_how(plan: PlannedLlama) -> str:
    answer, launch = plan.http, plan.launch
    if answer is None:
        return f"did not answer during init; port from {launch.port_how}" if launch is not None else ""
    if answer.router:
        serves = f"a router serving {len(answer.models)} models of its folder" if answer.models else "a router"
    else:
        serves = f"serves {answer.alias or answer.model_path}" if answer.alias or answer.model_path else ""
    return f"llama-server {answer.build} answered /props" + (f"; {serves}" if serves else "")


def _llama_command_notes(args: ServerArgs, launch: Launch, *, answered: bool) -> list[str]:
    """What the ``llama-server`` command line says that the config cannot hold, or that changes it."""
    lines: list[str] = []
    model = args.model or args.hf_repo
    if model:
        lines += comment_block(f"model: {model} ({'-m' if args.model else '-hf'})")
    elif args.models_dir:
        lines += comment_block(f"models: every GGUF of {args.models_dir} (--models-dir)")
    if not answered and not args.metrics:
        lines += comment_block(
            f"No --metrics in {launch.args_from}: add it, or sparktui reads only its /health, /props and /v1/models"
        )
    if args.slots is False:
        lines += comment_block("--no-slots: sparktui cannot count the tokens of a request while it runs")
    if args.host in ("127.0.0.1", "localhost", "::1"):
        lines += comment_block(f"It listens on {args.host} only (--host): sparktui must run on this node to reach it")
    if args.api_key:
        lines.append(_api_key_line("LLAMA_API_KEY", "llama-server runs with --api-key; name the variable holding it"))
    return lines


def _name_how(plan: PlannedVllm) -> str:
    """Where the entry's name came from."""
    launch, http = plan.launch, plan.http
    args = launch.vllm if launch is not None else None
    if args is not None and args.served_model_name:
        return "--served-model-name"
    if launch is not None:
        return f"from the {'unit' if launch.unit else 'container'} name"
    if http is not None and http.models:
        return "from the model /v1/models serves"
    return "rename it at will"


def _port_how(plan: PlannedVllm) -> str:
    """What answered on the entry's port, or where the port was read."""
    launch, http = plan.launch, plan.http
    if http is not None:
        what = f"vLLM {http.version} answered /version"
        if http.needs_api_key:
            what += "; /v1/models wants an API key"
        elif http.models:
            what += f"; serves {', '.join(http.models)}"
        return what
    if launch is not None:
        return f"did not answer during init; port from {launch.port_how}"
    return ""


def _launch_lines(
    plan: Planned[VllmAnswer]
    | Planned[LlamaAnswer]
    | Planned[SglangAnswer]
    | PlannedTrtllm
    | PlannedNim
    | PlannedOllama,
    launch: Launch,
    more: list[str],
) -> list[str]:
    """The unit or container that runs the server, ``more`` lines (vLLM's memory fraction), and how it
    was paired."""
    key = "unit" if launch.unit else "container"
    value = launch.unit or launch.container or ""
    if launch.unit:
        how = f"systemd unit (systemctl list-units), {launch.state}"
    else:
        how = f"docker container (docker ps), {launch.state}"
    lines = [kv(key, value, how), *more]
    runs = f"The {key} runs {launch.runs}"
    if plan.http is not None and not plan.paired:
        runs += f", on this port by {launch.port_how}"
    if launch.unit and launch.container:
        runs += (
            f"; container {launch.container} is written as the unit, which owns its life (logs from "
            "journalctl, restarts through systemd)"
        )
    lines += comment_block(runs + ".")
    if plan.paired:
        engine = ROLE_LABELS.get(launch.engine, launch.engine)
        lines += comment_block(
            f"Paired by elimination: {launch.label} is the only {engine} launch whose port could not be read "
            f"and this is the only {engine} that answered without one. Check that they are the same."
        )
    return lines


def _gpu_memory_lines(launch: Launch) -> list[str]:
    """``gpu_memory_utilization`` from the launch's command line, or why it must be set by hand."""
    args = launch.vllm
    if args is not None and args.gpu_memory_utilization is not None:
        return [
            kv(
                "gpu_memory_utilization",
                args.gpu_memory_utilization,
                f"--gpu-memory-utilization in {launch.args_from}",
            )
        ]
    if args is not None and args.gpu_memory_utilization_raw is not None:
        return comment_block(
            f"--gpu-memory-utilization {args.gpu_memory_utilization_raw} in {launch.args_from} is not a "
            "fraction between 0 and 1; set gpu_memory_utilization by hand"
        )
    if args is not None:
        return comment_block(
            f"gpu_memory_utilization: {launch.args_from} has no --gpu-memory-utilization (vLLM's "
            "default is 0.9); set it for the launch-readiness check"
        )
    return comment_block(
        f"gpu_memory_utilization: no vllm serve command line found in {launch.label} "
        f"({launch.runs}); set it to the server's --gpu-memory-utilization"
    )


def _no_launch_lines(
    *, ssh_looked: bool, more: str = ", and gpu_memory_utilization for the launch-readiness check"
) -> list[str]:
    found = (
        "No systemd unit or docker container found for it" if ssh_looked else "SSH discovery was skipped for this host"
    )
    return comment_block(f'{found}: add unit = "..." or container = "..." for its logs and actions{more}')


def _command_line_notes(args: VllmArgs) -> list[str]:
    """What the ``vllm serve`` command line says that the config cannot hold, or that changes it."""
    lines: list[str] = []
    if args.model:
        lines += comment_block(f"model: {args.model}")
    if args.speculative:
        lines += comment_block(f"speculative decoding: {args.speculative} (--speculative-config)")
    if args.host in ("127.0.0.1", "localhost", "::1"):
        lines += comment_block(f"It listens on {args.host} only (--host): sparktui must run on this node to reach it")
    if args.nnodes is not None and args.nnodes > 1:
        lines += comment_block(
            f'It runs across {args.nnodes} nodes (--nnodes): set role = "head" and a job name here, '
            'and role = "worker" with the same job on the other nodes'
        )
    if args.config_file:
        lines += comment_block(f"It reads more settings from --config {args.config_file} (not read by init)")
    return lines


def _launch_note(launch: Launch) -> str:
    args = launch.vllm
    bits = [f"{launch.label} ({launch.state}), runs {launch.runs}"]
    if args is not None and args.headless:
        bits.append(
            'a multi-node worker (--headless, no HTTP endpoint): add it with role = "worker" and the job '
            "name of its head"
        )
    elif launch.host_port is None:
        bits.append(f"its port is unknown ({launch.port_how}); add port = ... if it serves here")
    elif not launch.alive:
        bits.append(f"not running, port {launch.host_port} did not answer; add it if it should run")
    else:
        bits.append(f"port {launch.host_port} is already taken by another entry")
    if args is not None and args.gpu_memory_utilization is not None:
        bits.append(f"--gpu-memory-utilization {args.gpu_memory_utilization:g}")
    return "; ".join(bits)


def _rule(title: str) -> str:
    return f"# --- {title} ".ljust(WRAP_WIDTH, "-")


def render_node(report: HostReport, ssh: SshSettings) -> list[str]:
    """The ``[[nodes]]`` section of one host, with its sub-tables and comments."""
    lines = [
        _rule(report.name if report.name == report.host else f"{report.name} ({report.host})"),
        "",
        "[[nodes]]",
        kv("name", report.name, f"from {report.name_how}"),
        kv("host", report.host, "as given to sparktui init"),
        "",
        *_ssh_table(report, ssh),
        "",
    ]
    answers = [f for f in report.findings if isinstance(f, VllmAnswer)]
    llamas = [f for f in report.findings if isinstance(f, LlamaAnswer)]
    sglangs = [f for f in report.findings if isinstance(f, SglangAnswer)]
    trtllm_answers = [f for f in report.findings if isinstance(f, TrtllmAnswer)]
    nim_answers = [f for f in report.findings if isinstance(f, NimAnswer)]
    ollama_answers = [f for f in report.findings if isinstance(f, OllamaAnswer)]
    found = report.ssh
    units, containers = (found.units, found.containers) if found is not None else ((), ())
    answered_elsewhere = [*(a.port for a in answers), *(a.port for a in llamas), *(a.port for a in sglangs)]
    ollamas, ollamas_left_out, ollama_notes = plan_instances(
        ollama_answers,
        ollama_launches(units, containers),
        taken=[*answered_elsewhere, *(a.port for a in trtllm_answers), *(a.port for a in nim_answers)],
    )
    # Ollama's ports: no launch of another engine takes them.
    answered_elsewhere += [o.port for o in ollamas if o.port is not None]
    nims, nims_left_out, nim_notes = plan_instances(
        nim_answers, nim_launches(units, containers), taken=[*answered_elsewhere, *(a.port for a in trtllm_answers)]
    )
    planned_trtllms, trtllms_left_out, trtllm_notes = plan_instances(
        trtllm_answers,
        trtllm_launches(units, containers),
        taken=[*answered_elsewhere, *(n.port for n in nims if n.port is not None)],
    )
    # TensorRT-LLM's, NIM's and Ollama's ports: no launch of another engine takes them.
    http_only = [
        *(p.port for p in planned_trtllms if p.port),
        *(n.port for n in nims if n.port),
        *(o.port for o in ollamas if o.port),
    ]
    # Each engine's answers and launches are matched by port; an answer's port is its engine's, and a
    # launch that answered nowhere takes a port no other entry has.
    planned_sglangs, sglangs_left_out, sglang_notes = plan_instances(
        sglangs,
        sglang_launches(units, containers),
        taken=[*(a.port for a in answers), *(a.port for a in llamas), *http_only],
    )
    planned, left_out, notes = plan_instances(
        answers,
        vllm_launches(units, containers),
        taken=[*(a.port for a in llamas), *(s.port for s in planned_sglangs if s.port is not None), *http_only],
    )
    planned_llamas, llamas_left_out, llama_notes = plan_instances(
        llamas,
        llama_launches(units, containers),
        taken=[
            *(p.port for p in planned if p.port is not None),
            *(s.port for s in planned_sglangs if s.port is not None),
            *http_only,
        ],
    )
    taken: set[str] = set()
    for plan in planned:
        base = vllm_name(plan) or "vllm"
        name = unique(base, taken, str(plan.port) if plan.port is not None else None)
        lines += [*_vllm_section(plan, name, ssh_looked=found is not None), ""]
    for llama in planned_llamas:
        name = unique(planned_llama_name(llama) or "llama", taken, str(llama.port) if llama.port else None)
        lines += [*_llama_section(llama, name, ssh_looked=found is not None), ""]
    for sglang in planned_sglangs:
        found_name, how = sglang_name(sglang)
        if found_name is None:
            found_name, how = SGLANG_NAME, "rename it at will"
        name = unique(found_name, taken, str(sglang.port) if sglang.port else None)
        lines += [*_sglang_section(sglang, name, how, ssh_looked=found is not None), ""]
    more_found: list[tuple[PlannedTrtllm | PlannedNim, str]] = [
        *((trtllm, TRTLLM_NAME) for trtllm in planned_trtllms),
        *((nim, NIM_NAME) for nim in nims),
    ]
    for plan_found, fallback in more_found:
        found_name, how = served_model_name(plan_found, fallback)
        name = unique(found_name, taken, str(plan_found.port) if plan_found.port else None)
        lines += [*_trtllm_nim_section(plan_found, (name, how), ssh_looked=found is not None), ""]
    for ollama in ollamas:
        name = unique(OLLAMA_NAME, taken, str(ollama.port) if ollama.port else None)
        lines += [*_ollama_section(ollama, name, ssh_looked=found is not None), ""]
    lines += _exporter_tables(report)
    lines += _service_tables(report)
    lines += _not_found_notes(report)
    lines += _ssh_notes(
        report,
        [*notes, *llama_notes, *sglang_notes, *trtllm_notes, *nim_notes, *ollama_notes],
        [*left_out, *llamas_left_out, *sglangs_left_out, *trtllms_left_out, *nims_left_out, *ollamas_left_out],
    )
    lines.append("")
    return lines


def _ssh_table(report: HostReport, ssh: SshSettings) -> list[str]:
    """``[nodes.ssh]`` with what init was given, or a commented-out one naming the defaults."""
    given = [
        (key, value, option)
        for key, value, option in (
            ("user", ssh.user, "--user"),
            ("port", report.ssh_port, f"{report.host}:{report.ssh_port}")
            if report.ssh_port is not None
            else ("port", ssh.port, "--port"),
            ("key_file", ssh.key_file, "--key"),
            ("known_hosts", ssh.known_hosts, "--known-hosts"),
        )
        if value is not None
    ]
    if given:
        return ["[nodes.ssh]", *(kv(key, value, option) for key, value, option in given)]
    return [
        "# [nodes.ssh]".ljust(COMMENT_COLUMN - 1) + " # not given to init: the defaults are your user name,",
        kv("user", "...", "port 22, the SSH agent's keys, ~/.ssh/known_hosts", disabled=True),
    ]


def _exporter_tables(report: HostReport) -> list[str]:
    """``[nodes.gpu_exporter]`` and ``[nodes.node_exporter]`` for the exporters that answered."""
    exporters = [f for f in report.findings if isinstance(f, ExporterAnswer)]
    gpu = [e for e in exporters if e.kind in _GPU_KINDS]
    node = [e for e in exporters if e.kind is ExporterKind.NODE_EXPORTER]
    lines: list[str] = []
    if gpu:
        lines += [
            "[nodes.gpu_exporter]",
            kv("port", gpu[0].port, f"/metrics answered: {gpu[0].kind.value}"),
            *[
                line
                for other in gpu[1:]
                for line in comment_block(
                    f"Also a GPU exporter on port {other.port} ({other.kind.value}); a node has one "
                    "gpu_exporter, change the port to use that one instead"
                )
            ],
            "",
        ]
    if node:
        lines += [
            "[nodes.node_exporter]",
            kv("port", node[0].port, "/metrics answered: node_exporter"),
            "",
        ]
    return lines


def _service_tables(report: HostReport) -> list[str]:
    """A ``[[nodes.services]]`` for each other HTTP service that answered."""
    lines: list[str] = []
    service_names: set[str] = set()
    for service in (f for f in report.findings if isinstance(f, ServiceAnswer)):
        base = service.kind if service.kind != "http" else f"http-{service.port}"
        name = unique(base, service_names, str(service.port))
        answered = f"{service.path} answered HTTP {service.status} in {service.elapsed_s * 1000:.0f} ms"
        if service.status != 200:
            answered += "; set expect_status if that is its healthy answer"
        lines += [
            "[[nodes.services]]",
            kv("name", name),
            kv("kind", service.kind),
            kv("port", service.port, answered),
        ]
        if service.kind == "http" and service.path != "/health":
            lines.append(kv("path", service.path))
        lines.append("")
    return lines


def _not_found_notes(report: HostReport) -> list[str]:
    """What was probed on the host and did not answer, and why."""
    missing = [f for f in report.findings if isinstance(f, NoAnswer)]
    if not missing:
        return []
    lines = [f"# Probed on {report.host} and not found:"]
    for item in missing:
        label = ROLE_LABELS.get(item.role, item.role)
        lines += comment_block(f"{label} on port {item.port}: {item.reason}", indent="  ")
    return lines


def _ssh_notes(report: HostReport, notes: Sequence[str], left_out: Sequence[Launch]) -> list[str]:
    """What SSH discovery found (or why it was skipped), its notes, and the launches left out."""
    if report.ssh is None:
        # Not wrapped: the reason ends in a command to copy.
        return ["# SSH discovery skipped:", f"#   {one_line(report.ssh_skipped or 'not asked', 1000)}"]
    llama_units = [u for u in report.ssh.units if is_llama_unit(u)]
    llama_containers = [c for c in report.ssh.containers if is_llama_container(c)]
    sglang_units = [u for u in report.ssh.units if is_sglang_unit(u)]
    sglang_containers = [c for c in report.ssh.containers if is_sglang_container(c)]
    trtllm_units = [u for u in report.ssh.units if is_trtllm_unit(u)]
    trtllm_containers = [c for c in report.ssh.containers if is_trtllm_container(c)]
    nim_units = [u for u in report.ssh.units if is_nim_unit(u)]
    nim_containers = [c for c in report.ssh.containers if is_nim_container(c)]
    ollama_units = [u for u in report.ssh.units if is_ollama_unit(u)]
    ollama_containers = [c for c in report.ssh.containers if is_ollama_container(c)]
    others = (llama_units, sglang_units, trtllm_units, nim_units, ollama_units)
    vllm_units = len(report.ssh.units) - sum(len(u) for u in others)
    vllm_containers = len(report.ssh.containers) - sum(
        len(c) for c in (llama_containers, sglang_containers, trtllm_containers, nim_containers, ollama_containers)
    )
    found = (
        f"{fmt_count(vllm_units, 'vLLM unit', zero='no')} and {fmt_count(vllm_containers, 'vLLM container', zero='no')}"
    )
    for label, engine_units, engine_containers in (
        ("llama-server", llama_units, llama_containers),
        ("SGLang", sglang_units, sglang_containers),
        ("TensorRT-LLM", trtllm_units, trtllm_containers),
        ("NIM", nim_units, nim_containers),
        ("Ollama", ollama_units, ollama_containers),
    ):
        if engine_units or engine_containers:
            found += (
                f", {fmt_count(len(engine_units), f'{label} unit', zero='no')} and "
                f"{fmt_count(len(engine_containers), f'{label} container', zero='no')}"
            )
    listening = fmt_count(len({item.port for item in report.ssh.listeners}), "listening port", zero="no")
    lines = comment_block(
        f"Over SSH: {found} (systemctl list-units and show, docker ps and inspect), {listening} (ss -ltnp)."
    )
    for note in [*notes, *report.ssh.notes]:
        lines += comment_block(note, indent="  ")
    if left_out:
        lines.append("# Found over SSH and left out:")
        for launch in left_out:
            lines += comment_block(_launch_note(launch), indent="  ")
    return lines


def render_config(reports: Sequence[HostReport], ssh: SshSettings, *, written_at: str, hosts: Sequence[str]) -> str:
    """The whole config file."""
    lines = [
        f"# sparktui fleet config, written by `sparktui init {' '.join(hosts)}` on {written_at}.",
        "#",
        "# Each value says how it was found: by probing the host's usual ports over HTTP (vLLM /version and",
        "# /v1/models, llama-server /props, SGLang /server_info, TensorRT-LLM /prometheus/metrics, NIM",
        "# /v1/version, Ollama /api/version, exporters' /metrics, services' /health) and, over SSH, reading the",
        "# systemd units and docker containers that run vLLM, llama-server, SGLang, TensorRT-LLM, NIM or Ollama",
        "# and their command lines (and Ollama's OLLAMA_HOST), and",
        "# the ports the host listens on (probed too). What was probed and not found is listed under each node.",
        "# Check it, edit it, then run `sparktui config check`.",
        "# Every key is described in docs/config.md. Top-level settings (poll_interval_s, timeout_s,",
        "# [thresholds]) keep their defaults unless added here, above the first [[nodes]].",
        "",
    ]
    for report in reports:
        lines += render_node(report, ssh)
    while lines and lines[-1] == "":
        lines.pop()
    return "\n".join(lines) + "\n"
