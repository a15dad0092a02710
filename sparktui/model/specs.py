"""The fleet as the operator describes it, validated: nodes, their vLLM instances, exporters and side
services, SSH settings and alert thresholds.

Pure: no file, network or environment access beyond ``Path.expanduser``. ``sparktui.config`` reads
the TOML file, fills in secrets and turns validation errors into one-line messages.

Port shorthands (``port = 8001`` instead of a URL) are resolved by ``NodeSpec``, which knows the host:
after validation every ``ServerSpec`` except a url-less worker, every ``ExporterSpec`` and every
``ServiceSpec`` has its full ``url``. A shorthand ``port`` stays on the object; when a file gives both
``url`` and ``port`` they must agree, so a dumped spec validates again.

Names that end up in commands run over SSH (systemd units, docker containers, the SSH user) are
checked against strict patterns here, once, so the action code never has to quote untrusted text.
"""

from __future__ import annotations

import ipaddress
import re
import string
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, NoReturn
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    Strict,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from sparktui.model.roofline import GB10_MEMORY_BANDWIDTH_GB_S

Loc = tuple[str | int, ...]

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
UNIT_RE = re.compile(r"^[A-Za-z0-9@._:-]+$")
CONTAINER_RE = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.-]*$")
SSH_USER_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,31}$")
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_HOST_LABEL = r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?"
HOSTNAME_RE = re.compile(rf"^{_HOST_LABEL}(?:\.{_HOST_LABEL})*\.?$")

MAX_UNIT_LEN = 256  # systemd's own limit on unit names
MAX_CONTAINER_LEN = 128
DEFAULT_SERVICE_PATH = "/health"
DEFAULT_SERVICE_PATHS: Mapping[str, str] = {"ollama": "/api/tags"}
# Stands in for a host that failed its own check while a port shorthand is resolved, so the user sees
# the host error alone rather than a second error about a URL they never wrote (RFC 2606 name).
_INVALID_HOST = "host.invalid"


def fail(title: str, problems: Sequence[tuple[Loc, str]]) -> NoReturn:
    """Raise every problem at once, each at its own key path below the model being validated.

    A ``ValidationError`` raised inside a validator keeps its line errors, prefixed with the outer
    location (pydantic-core #510), which a plain ``ValueError`` cannot do.
    """
    raise ValidationError.from_exception_data(
        title,
        [
            InitErrorDetails(type=PydanticCustomError("spec", "{detail}", {"detail": msg}), loc=loc, input=None)
            for loc, msg in problems
        ],
    )


def _shown(value: object, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --- field checks (each returns the normalised value or raises ValueError with a sentence) -------


def _check_name(value: str) -> str:
    if not NAME_RE.fullmatch(value):
        raise ValueError(
            f"must be 1 to 63 letters, digits, '.', '_' or '-', starting with a letter or digit (got {_shown(value)})"
        )
    return value


def _expand(path: Path) -> Path:
    return path.expanduser()


def check_host(value: str) -> str:
    """A host name or an IP literal (IPv6 with or without brackets); returns it without brackets."""
    if "://" in value:
        raise ValueError(f"must be a host name or IP address without a scheme (got {_shown(value)})")
    if not value or any(c.isspace() for c in value):
        raise ValueError(f"must be a host name or IP address with no spaces (got {_shown(value)})")
    bare = value[1:-1] if value.startswith("[") and value.endswith("]") else value
    try:
        ipaddress.ip_address(bare)
    except ValueError:
        pass
    else:
        return bare
    if ":" in bare or "/" in bare:
        raise ValueError(
            f"must be a host name or IP address only, no port or path (got {_shown(value)}); "
            "ports go in the vllm, exporter and service tables"
        )
    if len(bare) > 253 or not HOSTNAME_RE.fullmatch(bare):
        raise ValueError(f"is not a valid host name or IP address (got {_shown(value)})")
    return bare


def url_host(host: str) -> str:
    """``host`` as it goes between ``http://`` and ``:port`` (IPv6 in brackets, zone id escaped)."""
    return f"[{host.replace('%', '%25')}]" if ":" in host else host


def _check_http_url(
    value: str,
    *,
    echo: bool = True,
    credentials: str = "give the API key with api_key_env or api_key_file",
) -> str:
    """Common checks of every URL in the config; returns it unchanged. ``echo=False`` keeps the value
    out of the messages (a notifier URL may hold a token in its path)."""
    authority = value.split("://", 1)[-1].split("/", 1)[0]
    if "@" in authority:
        # Checked first, and the value is not echoed: it may hold a password.
        raise ValueError(f"must not contain a user name or password; {credentials}")
    got = f" (got {_shown(value)})" if echo else ""
    if any(c.isspace() for c in value):
        raise ValueError(f"must not contain spaces{got}")
    parts = urlsplit(value)
    if parts.scheme.lower() not in ("http", "https") or not value.lower().startswith(parts.scheme.lower() + "://"):
        raise ValueError(f"must start with http:// or https://{got}")
    if not parts.hostname:
        raise ValueError(f"has no host name{got}")
    try:
        port = parts.port
    except ValueError:
        port = -1
    if port is not None and not 1 <= port <= 65535:
        raise ValueError(f"has an invalid port{got}")
    if parts.fragment:
        raise ValueError(f"must not have a #fragment{got}")
    return value


# What a recording keeps of a notifier's URL: it validates (and, on the reserved .invalid domain, can
# never be reached), so a recording reads back without the secret.
REDACTED_URL = "https://redacted.invalid/"


def check_notifier_url(value: str) -> str:
    """A notifier's URL, checked without echoing it: Slack and webhook URLs carry their token."""
    return _check_http_url(value, echo=False, credentials="give a token with token_env or token_file")


def _url_port(url: str) -> int:
    parts = urlsplit(url)
    return parts.port or (443 if parts.scheme.lower() == "https" else 80)


def _check_base_url(value: str) -> str:
    _check_http_url(value)
    parts = urlsplit(value)
    if parts.path.rstrip("/") == "/v1":
        raise ValueError(
            f"must be the server's base URL without /v1 (got {_shown(value)}); "
            "sparktui adds /metrics, /health and /v1/models itself"
        )
    if parts.path not in ("", "/") or parts.query:
        raise ValueError(f"must be the server's base URL with no path (got {_shown(value)})")
    return value.rstrip("/")


def _check_env_var(value: str | None) -> str | None:
    # The value is not echoed: a key pasted here by mistake must not end up on the screen.
    if value is not None and not ENV_NAME_RE.fullmatch(value):
        raise ValueError("must be the name of an environment variable (letters, digits and '_'), not the key itself")
    return value


def _check_path(value: str) -> str:
    if not value.startswith("/") or any(c.isspace() for c in value) or "#" in value:
        raise ValueError(f"must start with '/' and contain no spaces (got {_shown(value)})")
    return value


def _valid_port(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 65535


def _valid_path(value: object) -> bool:
    if not isinstance(value, str):
        return False
    try:
        _check_path(value)
    except ValueError:
        return False
    return True


# --- annotated types --------------------------------------------------------------------------------

Name = Annotated[str, AfterValidator(_check_name)]
Port = Annotated[int, Strict(), Field(ge=1, le=65535)]
Count = Annotated[int, Strict()]
Num = Annotated[float, Strict(), Field(allow_inf_nan=False)]
Flag = Annotated[bool, Strict()]

# Upper bounds of options whose huge values would only hide a typo (docs/config.md lists every bound).
MAX_BODY_BYTES = 256 * 1024 * 1024  # one answer held in memory while it is parsed
MAX_HOLD_S = 7 * 86400  # an alert's for_s / clear_after_s
UserPath = Annotated[Path, AfterValidator(_expand)]


class _Spec(BaseModel):
    # hide_input_in_errors: pydantic's own str(ValidationError) would otherwise print whole input
    # tables, which may hold an api_key set in code.
    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)


# --- specs -------------------------------------------------------------------------------------------


class Thresholds(_Spec):
    """When a number turns from normal to warning (or critical) on the screen and in alerts."""

    kv_usage_warn: Num = Field(0.90, gt=0, le=1)
    waiting_warn: Count = Field(8, ge=0, le=1_000_000)
    ttft_p90_warn_s: Num = Field(10.0, gt=0, le=3600)
    preemptions_per_s_warn: Num = Field(0.05, ge=0, le=1_000_000)
    mem_available_warn_gib: Num = Field(8.0, ge=0, le=1_000_000)
    mem_available_crit_gib: Num = Field(4.0, ge=0, le=1_000_000)
    service_latency_warn_s: Num = Field(1.0, gt=0, le=300)
    gpu_temp_warn_c: Num = Field(85.0, gt=0, le=200)
    # A data-parallel engine whose generation tok/s over an even share of the instance's is off 1 by
    # more than this is marked imbalanced (0.2: 20 % more or less than its share).
    engine_imbalance_warn: Num = Field(0.20, gt=0, le=1)

    @model_validator(mode="after")
    def _crit_below_warn(self) -> Thresholds:
        if not self.mem_available_crit_gib < self.mem_available_warn_gib:
            fail(
                "Thresholds",
                [
                    (
                        ("mem_available_crit_gib",),
                        f"must be less than mem_available_warn_gib ({self.mem_available_warn_gib:g}) "
                        f"(got {self.mem_available_crit_gib:g})",
                    )
                ],
            )
        return self


class SshSpec(_Spec):
    """How to reach a node over SSH (host state, logs, actions)."""

    user: str | None = None  # None: the local user name
    port: Port = 22
    key_file: UserPath | None = None  # None: the SSH agent and the default keys
    known_hosts: UserPath | None = None  # None: ~/.ssh/known_hosts
    connect_timeout_s: Num = Field(5.0, gt=0, le=300)
    enabled: Flag = True  # false: no host state, logs or actions over SSH for this node

    @field_validator("user")
    @classmethod
    def _check_user(cls, value: str | None) -> str | None:
        if value is not None and not SSH_USER_RE.fullmatch(value):
            raise ValueError(
                "must be a unix user name: letters, digits, '_', '.', '-', up to 32, "
                f"not starting with a digit or '-' (got {_shown(value)})"
            )
        return value


Role = Literal["single", "head", "worker"]
_ENGINE_KIND = re.compile(r"[a-z][a-z0-9_]{0,31}")


def _check_engine_kind(value: str) -> str:
    if not _ENGINE_KIND.fullmatch(value):
        raise ValueError(f"an engine is a name such as 'vllm' or 'llamacpp' (got {_shown(value)})")
    return value


# The engine an instance runs (``sparktui.engines``): what is polled and how it is read. Its form is
# checked here; that sparktui knows it, by the config loader (engines may come from installed packages).
EngineKind = Annotated[str, AfterValidator(_check_engine_kind)]


class ServerSpec(_Spec):
    """One engine's server on a node (``engine``: vLLM unless it says otherwise). A tensor-parallel
    worker (``role = "worker"``) may have no URL."""

    name: Name = "vllm"
    engine: EngineKind = "vllm"
    url: str | None = None
    port: Port | None = None
    api_key_env: str | None = None
    api_key_file: UserPath | None = None
    api_key: SecretStr | None = None  # filled by the loader from api_key_env / api_key_file
    unit: str | None = None
    container: str | None = None
    gpu_memory_utilization: Num | None = Field(None, gt=0, le=1)
    role: Role = "single"
    job: Name | None = None
    metrics_filter: Flag = True
    canary: Flag = True  # send a 1-token completion when idle to prove the engine alive ([canary])

    @property
    def base_url(self) -> str | None:
        """``http://host:port`` with no trailing slash, or None for a worker that serves no HTTP."""
        return self.url

    @field_validator("url")
    @classmethod
    def _check_url(cls, value: str | None) -> str | None:
        return None if value is None else _check_base_url(value)

    @field_validator("api_key_env")
    @classmethod
    def _check_env_name(cls, value: str | None) -> str | None:
        return _check_env_var(value)

    @field_validator("unit")
    @classmethod
    def _check_unit(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not UNIT_RE.fullmatch(value) or len(value) > MAX_UNIT_LEN:
            raise ValueError(
                f"must be a systemd unit name: letters, digits and '@', '.', '_', ':', '-' only (got {_shown(value)})"
            )
        if value.startswith("-"):
            raise ValueError(f"must not start with '-' (got {_shown(value)})")
        return value

    @field_validator("container")
    @classmethod
    def _check_container(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not CONTAINER_RE.fullmatch(value) or len(value) > MAX_CONTAINER_LEN:
            raise ValueError(
                "must be a docker container name: letters, digits, '_', '.', '-', "
                f"starting with a letter or digit (got {_shown(value)})"
            )
        return value

    @model_validator(mode="after")
    def _check_together(self) -> ServerSpec:
        problems: list[tuple[Loc, str]] = []
        if self.api_key_env is not None and self.api_key_file is not None:
            problems.append((("api_key_file",), "give api_key_env or api_key_file, not both"))
        if self.unit is not None and self.container is not None:
            problems.append((("container",), "give unit (systemd) or container (docker), not both"))
        if self.role in ("head", "worker") and self.job is None:
            problems.append(
                (
                    ("job",),
                    f"required when role is '{self.role}': the same job name on the head and its workers",
                )
            )
        if self.role == "single" and self.job is not None:
            problems.append((("job",), 'only used with role = "head" or role = "worker"; set role, or remove job'))
        if self.role != "worker" and self.url is None and self.port is None:
            problems.append((("url",), 'missing: give url = "http://HOST:PORT" or port = PORT'))
        if self.url is not None and self.port is not None and _url_port(self.url) != self.port:
            problems.append(
                (
                    ("port",),
                    f"does not match the port in url ({_url_port(self.url)}); give url or port, not both",
                )
            )
        if problems:
            fail("ServerSpec", problems)
        return self


class ExporterSpec(_Spec):
    """A Prometheus metrics page: the GPU exporter or node_exporter."""

    url: str
    port: Port | None = None  # shorthand: url becomes http://{node.host}:{port}/metrics

    @field_validator("url")
    @classmethod
    def _check_url(cls, value: str) -> str:
        return _check_http_url(value)

    @model_validator(mode="after")
    def _check_port(self) -> ExporterSpec:
        if self.port is not None and _url_port(self.url) != self.port:
            fail(
                "ExporterSpec",
                [
                    (
                        ("port",),
                        f"does not match the port in url ({_url_port(self.url)}); give url or port, not both",
                    )
                ],
            )
        return self


ServiceKind = Literal["asr", "tts", "ollama", "http"]


class ServiceSpec(_Spec):
    """A side service checked over HTTP (speech-to-text, text-to-speech, Ollama, anything else)."""

    name: Name
    kind: ServiceKind = "http"
    url: str
    port: Port | None = None  # shorthand: url becomes http://{node.host}:{port}{path}
    path: str | None = None  # with port; default /health (/api/tags for kind "ollama")
    expect_status: Count = Field(200, ge=100, le=599)
    timeout_s: Num | None = Field(None, gt=0, le=300)  # None: the fleet's timeout_s

    @field_validator("url")
    @classmethod
    def _check_url(cls, value: str) -> str:
        return _check_http_url(value)

    @field_validator("path")
    @classmethod
    def _check_path(cls, value: str | None) -> str | None:
        return None if value is None else _check_path(value)

    @model_validator(mode="after")
    def _check_shorthand(self) -> ServiceSpec:
        problems: list[tuple[Loc, str]] = []
        if self.port is not None and _url_port(self.url) != self.port:
            problems.append(
                (
                    ("port",),
                    f"does not match the port in url ({_url_port(self.url)}); give url or port, not both",
                )
            )
        if self.path is not None:
            parts = urlsplit(self.url)
            in_url = parts.path + (f"?{parts.query}" if parts.query else "")
            if self.port is None:
                problems.append((("path",), "only used with port; with url, put the path in the url"))
            elif in_url != self.path:
                problems.append((("path",), f"does not match the path in url ({in_url or '/'})"))
        if problems:
            fail("ServiceSpec", problems)
        return self


def _resolve_exporter(raw: object, host: str) -> object:
    if not isinstance(raw, Mapping) or "url" in raw or "port" not in raw:
        return raw
    port = raw["port"]
    # An invalid port gets a placeholder URL so that only the port error is reported.
    url = f"http://{url_host(host)}:{port}/metrics" if _valid_port(port) else f"http://{url_host(host)}/"
    return {**raw, "url": url}


def _resolve_service(raw: object, host: str) -> object:
    if not isinstance(raw, Mapping) or "url" in raw or "port" not in raw:
        return raw
    port = raw["port"]
    kind = raw.get("kind", "http")
    default = DEFAULT_SERVICE_PATHS.get(kind, DEFAULT_SERVICE_PATH) if isinstance(kind, str) else DEFAULT_SERVICE_PATH
    path = raw.get("path", default)
    if _valid_port(port) and _valid_path(path):
        return {**raw, "url": f"http://{url_host(host)}:{port}{path}", "path": path}
    return {**raw, "url": f"http://{url_host(host)}/"}  # placeholder: only the port/path error shows


def _resolve_vllm(raw: object, host: str) -> object:
    if isinstance(raw, ServerSpec):
        if raw.url is None and raw.port is not None:
            return raw.model_copy(update={"url": f"http://{url_host(host)}:{raw.port}"})
        return raw
    if isinstance(raw, Mapping) and "url" not in raw and _valid_port(raw.get("port")):
        return {**raw, "url": f"http://{url_host(host)}:{raw['port']}"}
    return raw  # url-less, or an invalid port: its own check reports it


def _duplicates(names: Iterable[str | None], table: str) -> list[tuple[Loc, str]]:
    first: dict[str, int] = {}
    problems: list[tuple[Loc, str]] = []
    for index, name in enumerate(names):
        if name is None:
            continue
        if name in first:
            problems.append(((index,), f"same as {table}[{first[name]}] ({_shown(name)})"))
        else:
            first[name] = index
    return problems


def meant_instances(instances: Sequence[ServerSpec]) -> list[ServerSpec]:
    """The instances an action or a bench that names none may mean: every one of them when the node
    runs vLLMs alone; of vLLMs beside another engine's server (a llama.cpp fallback), the vLLMs."""
    vllms = [v for v in instances if v.engine == "vllm"]
    return vllms if vllms else list(instances)


class NodeSpec(_Spec):
    """One DGX Spark (or any host) and what runs on it."""

    name: Name
    host: str
    local: Flag = False  # the machine sparktui runs on: host state from psutil, actions without SSH
    ssh: SshSpec = SshSpec()
    vllm: tuple[ServerSpec, ...] = ()
    gpu_exporter: ExporterSpec | None = None
    node_exporter: ExporterSpec | None = None
    services: tuple[ServiceSpec, ...] = ()
    # The roofline: the peaks of one of the node's GPUs (model/roofline.py). GB10's bandwidth by
    # default; no compute peak unless given (no one figure fits every precision vLLM counts).
    peak_memory_bandwidth_gb_s: Num = Field(GB10_MEMORY_BANDWIDTH_GB_S, gt=0, le=100_000)
    peak_tflops: Num | None = Field(None, gt=0, le=100_000)
    # The RDMA interfaces whose link and ethtool counters are read (model/fabric.py); none: every
    # interface whose driver is mlx5_core.
    rdma_interfaces: tuple[str, ...] = ()

    @field_validator("rdma_interfaces")
    @classmethod
    def _check_interfaces(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            if not re.fullmatch(r"[A-Za-z0-9_.:@-]{1,15}", name):
                raise ValueError(f"{name!r} is not a network interface's name (1-15 letters, digits, _ . : @ -)")
        return value

    @field_validator("host")
    @classmethod
    def _check_host(cls, value: str) -> str:
        return check_host(value)

    @model_validator(mode="before")
    @classmethod
    def _resolve_port_shorthands(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        raw_host = data.get("host")
        try:
            host = check_host(raw_host) if isinstance(raw_host, str) else _INVALID_HOST
        except ValueError:
            host = _INVALID_HOST
        resolved = dict(data)
        for key in ("gpu_exporter", "node_exporter"):
            if key in resolved:
                resolved[key] = _resolve_exporter(resolved[key], host)
        if isinstance(resolved.get("vllm"), list | tuple):
            resolved["vllm"] = [_resolve_vllm(item, host) for item in resolved["vllm"]]
        if isinstance(resolved.get("services"), list | tuple):
            resolved["services"] = [_resolve_service(item, host) for item in resolved["services"]]
        return resolved

    @model_validator(mode="after")
    def _check_unique(self) -> NodeSpec:
        problems: list[tuple[Loc, str]] = []
        for (index,), msg in _duplicates((v.name for v in self.vllm), "vllm"):
            problems.append((("vllm", index, "name"), f"{msg}; give each vLLM on a node its own name"))
        for (index,), msg in _duplicates((v.base_url for v in self.vllm), "vllm"):
            problems.append((("vllm", index, "url"), msg))
        for (index,), msg in _duplicates((s.name for s in self.services), "services"):
            problems.append((("services", index, "name"), f"{msg}; give each service on a node its own name"))
        if problems:
            fail("NodeSpec", problems)
        return self


KEY_RE = re.compile(r"(?:(?:ctrl|shift|alt|super|meta)\+)*[a-z0-9_]+\Z")


def _check_key(value: str) -> str:
    if not KEY_RE.match(value):
        raise ValueError(f"must be a key name like 'r', 'f5', 'ctrl+u' or 'question_mark' (got {_shown(value)})")
    return value


KeyName = Annotated[str, AfterValidator(_check_key)]


class CanarySpec(_Spec):
    """The canary (docs/diagnosis.md): one completion of ``max_tokens`` 1 sent to an instance that says
    it is up while no token has moved for ``idle_s``; no answer within ``timeout_s`` is a wedge."""

    enabled: Flag = True  # off: no instance gets one (an instance's own ``canary = false`` turns off one)
    idle_s: Num = Field(30.0, ge=5, le=86400)  # no token moved for this long: a canary is due
    interval_s: Num = Field(30.0, ge=5, le=86400)  # never more than one per instance in this time
    timeout_s: Num = Field(10.0, gt=0, le=600)  # no answer by then while /health says 200: wedged
    prompt: str = Field("Hi", min_length=1, max_length=200)


class KioskSpec(_Spec):
    """The read-only kiosk for a wall screen (``sparktui --kiosk``)."""

    rotate_s: Num = Field(15.0, ge=3, le=3600)  # seconds on each page: the fleet, then each node
    unlock_key: KeyName | None = None  # leaves the kiosk for the read-only dashboard; none: no key does
    shift_every_s: Num = Field(60.0, ge=10, le=86400)  # move the picture by a cell this often (burn-in)


# --- alerts and notifiers -----------------------------------------------------------------------------

SeverityName = Literal["info", "warn", "crit"]
# What an alert rule can watch (docs/alerts.md). The conditions are true or false and take no threshold;
# the others are numbers compared with ``above`` or ``below``.
AlertMetric = Literal[
    "node_down",
    "node_stale",
    "vllm_down",
    "service_down",
    "launch_not_ready",
    "metrics_unreadable",
    "kv_usage",
    "waiting",
    "ttft_p90_s",
    "acceptance_length",
    "position_acceptance",
    "mem_available_gib",
    "psi_some_avg10",
    "gpu_temp_c",
]
CONDITION_METRICS = frozenset(
    {"node_down", "node_stale", "vllm_down", "service_down", "launch_not_ready", "metrics_unreadable"}
)
FINDING_ID_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
MAX_FIX_CHARS = 300


class AlertRuleSpec(_Spec):
    """One alert rule: a derived number against a threshold, a condition, or diagnosis findings.

    It fires when its condition has held for ``for_s`` seconds and resolves when it has been clear for
    ``clear_after_s`` seconds; with ``resolve_at`` a number must come back past that value to be clear
    (hysteresis), not only back past the threshold.
    """

    name: Name
    metric: AlertMetric | None = None
    finding: str | None = None  # a rule id of the failure catalogue (docs/diagnosis.md)
    finding_severity: SeverityName | None = None  # every finding at or above this severity
    above: Num | None = None  # fires when the number is at or above this
    below: Num | None = None  # fires when the number is at or below this
    resolve_at: Num | None = None
    for_s: Num = Field(0.0, ge=0, le=MAX_HOLD_S)
    clear_after_s: Num = Field(0.0, ge=0, le=MAX_HOLD_S)
    severity: SeverityName | None = None  # None: warn, or a finding's own severity
    position: Count | None = Field(None, ge=0, le=64)  # position_acceptance: the draft position, from 0
    nodes: tuple[Name, ...] = ()  # empty: every node
    fix: str | None = None  # one line; None: the metric's or the finding's own

    @field_validator("finding")
    @classmethod
    def _check_finding(cls, value: str | None) -> str | None:
        if value is not None and not FINDING_ID_RE.fullmatch(value):
            raise ValueError(
                f"must be a rule id of the failure catalogue, like 'engine-dead' (got {_shown(value)}); "
                "docs/diagnosis.md lists them"
            )
        return value

    @field_validator("fix")
    @classmethod
    def _check_fix(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value.strip() or "\n" in value or "\r" in value:
            raise ValueError("must be one line of text")
        if len(value) > MAX_FIX_CHARS:
            raise ValueError(f"must be at most {MAX_FIX_CHARS} characters (got {len(value)})")
        return value.strip()

    @model_validator(mode="after")
    def _check_rule(self) -> AlertRuleSpec:
        problems: list[tuple[Loc, str]] = []
        watched = [key for key in ("metric", "finding", "finding_severity") if getattr(self, key) is not None]
        if not watched:
            problems.append((("metric",), "missing: give metric, finding or finding_severity"))
        elif len(watched) > 1:
            problems.append(
                ((watched[1],), f"give one of metric, finding or finding_severity, not {' and '.join(watched)}")
            )
        numeric = self.metric is not None and self.metric not in CONDITION_METRICS
        if self.above is not None and self.below is not None:
            problems.append((("below",), "give above or below, not both"))
        elif numeric and self.above is None and self.below is None:
            problems.append((("above",), f"missing: metric {self.metric!r} is a number; give above = N or below = N"))
        for key in ("above", "below", "resolve_at"):
            if getattr(self, key) is not None and not numeric:
                what = f"metric {self.metric!r} is a condition" if self.metric is not None else "a finding rule"
                problems.append(((key,), f"not used: {what}, with no threshold; remove it"))
        if numeric and self.resolve_at is not None:
            if self.above is not None and not self.resolve_at < self.above:
                problems.append((("resolve_at",), f"must be below above ({self.above:g}) (got {self.resolve_at:g})"))
            if self.below is not None and not self.resolve_at > self.below:
                problems.append((("resolve_at",), f"must be above below ({self.below:g}) (got {self.resolve_at:g})"))
        if self.metric == "position_acceptance" and self.position is None:
            problems.append((("position",), "missing: the draft position to watch, from 0"))
        if self.position is not None and self.metric != "position_acceptance":
            problems.append((("position",), 'only used with metric = "position_acceptance"'))
        for (index,), msg in _duplicates(self.nodes, "nodes"):
            problems.append((("nodes", index), msg))
        if problems:
            fail("AlertRuleSpec", problems)
        return self


NotifierKind = Literal["webhook", "ntfy", "slack", "telegram"]
NotifyOn = Literal["firing", "resolved", "both"]
NTFY_TOPIC_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
CHAT_ID_RE = re.compile(r"^(?:-?[0-9]{1,20}|@[A-Za-z][A-Za-z0-9_]{3,63})$")
ChatId = Annotated[int, Strict()] | str


class NotifierSpec(_Spec):
    """Where alerts are sent: a generic JSON webhook, ntfy, a Slack-compatible webhook or Telegram.

    Every URL is kept as a secret (Slack and many webhooks carry their token in the path). The loader
    fills ``url`` from ``url_env`` / ``url_file`` and ``token`` from ``token_env`` / ``token_file``.
    """

    name: Name  # default: the kind
    kind: NotifierKind
    url: SecretStr | None = None
    url_env: str | None = None
    url_file: UserPath | None = None
    token_env: str | None = None
    token_file: UserPath | None = None
    token: SecretStr | None = None  # filled by the loader from token_env / token_file
    chat_id: ChatId | None = None  # telegram
    topic: str | None = None  # ntfy
    on: NotifyOn = "both"
    min_severity: SeverityName = "warn"
    timeout_s: Num = Field(10.0, gt=0, le=120)
    retries: Count = Field(3, ge=0, le=10)
    backoff_s: Num = Field(2.0, gt=0, le=300)

    @model_validator(mode="before")
    @classmethod
    def _default_name(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "name" not in data and isinstance(data.get("kind"), str):
            return {**data, "name": data["kind"]}
        return data

    @field_validator("url")
    @classmethod
    def _check_url(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            check_notifier_url(value.get_secret_value())
        return value

    @field_validator("url_env", "token_env")
    @classmethod
    def _check_env(cls, value: str | None) -> str | None:
        return _check_env_var(value)

    @field_validator("topic")
    @classmethod
    def _check_topic(cls, value: str | None) -> str | None:
        # Not echoed: on a public ntfy server the topic name is what keeps others from reading it.
        if value is not None and not NTFY_TOPIC_RE.fullmatch(value):
            raise ValueError("must be 1 to 64 letters, digits, '_' or '-'")
        return value

    @field_validator("chat_id")
    @classmethod
    def _check_chat_id(cls, value: int | str | None) -> int | str | None:
        if isinstance(value, str) and not CHAT_ID_RE.fullmatch(value):
            raise ValueError(
                f"must be a Telegram chat id (a number, negative for groups) or '@channelname' (got {_shown(value)})"
            )
        return value

    @model_validator(mode="after")
    def _check_kind(self) -> NotifierSpec:
        problems: list[tuple[Loc, str]] = []
        urls = [key for key in ("url", "url_env", "url_file") if getattr(self, key) is not None]
        if len(urls) > 1:
            problems.append(((urls[1],), f"give one of url, url_env or url_file, not {' and '.join(urls)}"))
        if self.token_env is not None and self.token_file is not None:
            problems.append((("token_file",), "give token_env or token_file, not both"))
        has_token = self.token_env is not None or self.token_file is not None or self.token is not None
        kind = self.kind
        if kind in ("webhook", "slack") and not urls:
            problems.append((("url",), f"missing: a {kind} notifier needs url, url_env or url_file"))
        if kind == "telegram":
            if not has_token:
                problems.append((("token_env",), "missing: the bot token, from token_env or token_file"))
            if self.chat_id is None:
                problems.append((("chat_id",), "missing: the chat to send to (its id, or '@channelname')"))
        elif self.chat_id is not None:
            problems.append((("chat_id",), 'only used with kind = "telegram"'))
        if kind == "ntfy" and self.topic is None:
            problems.append((("topic",), "missing: the ntfy topic to publish to"))
        elif kind != "ntfy" and self.topic is not None:
            problems.append((("topic",), 'only used with kind = "ntfy"'))
        if kind == "slack" and has_token:
            key = "token_env" if self.token_env is not None else "token_file"
            problems.append(((key,), "not used: a Slack webhook's URL is its secret; give it with url_env or url_file"))
        if problems:
            fail("NotifierSpec", problems)
        return self


# --- Prometheus as the metrics source -------------------------------------------------------------------

LABEL_NAME_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
# One label matcher of a PromQL selector: name, operator, double-quoted value.
MATCHER_RE = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\\n]|\\.)*)"\s*(?:,|\Z)')
# What a label template may use (docs/prometheus.md): the endpoint's URL authority, its parts, the
# node, the endpoint's name in the config and its kind.
LABEL_PLACEHOLDERS = ("address", "host", "port", "node", "endpoint", "kind")
PrometheusKind = Literal["vllm", "gpu_exporter", "node_exporter"]
DEFAULT_PROMETHEUS_LABELS: Mapping[str, str] = {"instance": "{address}"}


def _check_template(template: str) -> str:
    try:
        fields = [name for _text, name, _spec, _conv in string.Formatter().parse(template) if name is not None]
    except ValueError as exc:
        raise ValueError(f"is not a valid template ({exc}); write placeholders as {{address}}") from None
    unknown = [name for name in fields if name not in LABEL_PLACEHOLDERS]
    if unknown:
        known = ", ".join("{" + name + "}" for name in LABEL_PLACEHOLDERS)
        raise ValueError(f"uses {{{unknown[0]}}}, which is not a placeholder; use {known}")
    if not template:
        raise ValueError("must not be empty")
    return template


def parse_selector(text: str) -> list[tuple[str, str, str]]:
    """``cluster="lab", env!="dev"`` → ``[("cluster", "=", "lab"), ("env", "!=", "dev")]``; ValueError when
    the text is not a list of PromQL label matchers (braces around it are allowed)."""
    body = text.strip()
    if body.startswith("{") and body.endswith("}"):
        body = body[1:-1]
    matchers: list[tuple[str, str, str]] = []
    pos = 0
    while body[pos:].strip():
        found = MATCHER_RE.match(body, pos)
        if found is None:
            raise ValueError(f'must be PromQL label matchers like cluster="lab", env!="dev" (got {_shown(text)})')
        matchers.append((found.group(1), found.group(2), found.group(3)))
        pos = found.end()
    if not matchers:
        raise ValueError('must hold at least one label matcher, like cluster="lab"')
    return matchers


class PrometheusSpec(_Spec):
    """Read the fleet's metrics from a Prometheus server instead of scraping every endpoint.

    Each configured endpoint (vLLM, GPU exporter, node_exporter) is found in Prometheus by the labels
    of ``labels``, templates filled from the endpoint (``instance = "{address}"``: ``host:port`` of its
    URL, Prometheus's own default). The loader fills ``bearer_token`` and ``password``.
    """

    url: str
    refresh_s: Num | None = Field(None, ge=0.1, le=3600)  # None: the fleet's poll_interval_s
    timeout_s: Num | None = Field(None, gt=0, le=120)  # None: the fleet's timeout_s
    bearer_token_env: str | None = None
    bearer_token_file: UserPath | None = None
    bearer_token: SecretStr | None = None  # filled by the loader
    username: str | None = None
    password_env: str | None = None
    password_file: UserPath | None = None
    password: SecretStr | None = None  # filled by the loader
    labels: dict[str, str] = Field(default_factory=lambda: dict(DEFAULT_PROMETHEUS_LABELS))
    selector: str | None = None  # extra label matchers for every query, like cluster="lab"
    poll_services: Flag = True  # side services are not in Prometheus: check them over HTTP

    @field_validator("url")
    @classmethod
    def _check_url(cls, value: str) -> str:
        _check_http_url(value, credentials="give them with username and password_env, or bearer_token_env")
        parts = urlsplit(value)
        if parts.query:
            raise ValueError(f"must be the server's base URL with no query (got {_shown(value)})")
        if parts.path.rstrip("/").endswith("/api/v1"):
            raise ValueError(f"must be the server's base URL without /api/v1 (got {_shown(value)})")
        return value.rstrip("/")

    @field_validator("bearer_token_env", "password_env")
    @classmethod
    def _check_env(cls, value: str | None) -> str | None:
        return _check_env_var(value)

    @field_validator("username")
    @classmethod
    def _check_username(cls, value: str | None) -> str | None:
        if value is not None and (not value or ":" in value or any(not c.isprintable() for c in value)):
            raise ValueError(f"must be a user name without ':' (got {_shown(value)})")
        return value

    @field_validator("labels")
    @classmethod
    def _check_labels(cls, value: dict[str, str]) -> dict[str, str]:
        if not value:
            raise ValueError('must name at least one label, like instance = "{address}"')
        problems: list[tuple[Loc, str]] = []
        for name, template in value.items():
            if not LABEL_NAME_RE.fullmatch(name) or name.startswith("__"):
                problems.append(((name,), "is not a Prometheus label name (letters, digits, '_', not starting '__')"))
                continue
            try:
                _check_template(template)
            except ValueError as exc:
                problems.append(((name,), str(exc)))
        if problems:
            fail("PrometheusSpec", problems)
        return value

    @field_validator("selector")
    @classmethod
    def _check_selector(cls, value: str | None) -> str | None:
        if value is not None:
            parse_selector(value)
        return value

    @model_validator(mode="after")
    def _check_auth(self) -> PrometheusSpec:
        problems: list[tuple[Loc, str]] = []
        if self.bearer_token_env is not None and self.bearer_token_file is not None:
            problems.append((("bearer_token_file",), "give bearer_token_env or bearer_token_file, not both"))
        if self.password_env is not None and self.password_file is not None:
            problems.append((("password_file",), "give password_env or password_file, not both"))
        has_password = self.password_env is not None or self.password_file is not None or self.password is not None
        has_token = (
            self.bearer_token_env is not None or self.bearer_token_file is not None or self.bearer_token is not None
        )
        if self.username is not None and not has_password:
            problems.append((("password_env",), "missing: give password_env or password_file with username"))
        if self.username is None and has_password:
            key = "password_env" if self.password_env is not None else "password_file"
            problems.append(((key,), "not used without username; add username, or remove it"))
        if has_token and self.username is not None:
            problems.append((("username",), "give a bearer token or a user name and password, not both"))
        if self.selector is not None:
            for name, _op, _value in parse_selector(self.selector):
                if name in self.labels:
                    problems.append(
                        (("selector",), f"matches on {name!r}, which labels already maps; remove it from one of them")
                    )
        if problems:
            fail("PrometheusSpec", problems)
        return self

    def target_labels(self, node: NodeSpec, kind: PrometheusKind, endpoint: str, url: str) -> dict[str, str]:
        """The Prometheus labels that pick out one endpoint's series (``labels`` filled in)."""
        parts = urlsplit(url)
        host = parts.hostname or node.host
        port = str(_url_port(url))
        values = {
            "address": f"{url_host(host)}:{port}",
            "host": host,
            "port": port,
            "node": node.name,
            "endpoint": endpoint,
            "kind": kind,
        }
        return {name: template.format_map(values) for name, template in sorted(self.labels.items())}

    def targets(self, nodes: Iterable[NodeSpec]) -> list[PrometheusTarget]:
        """Every endpoint of ``nodes`` Prometheus is asked about, in config order."""
        out: list[PrometheusTarget] = []
        for node in nodes:
            for vllm in node.vllm:
                if vllm.base_url is not None:
                    labels = self.target_labels(node, "vllm", vllm.name, vllm.base_url)
                    out.append(PrometheusTarget(node.name, "vllm", vllm.name, tuple(labels.items()), vllm.engine))
            exporters: tuple[tuple[PrometheusKind, ExporterSpec | None], ...] = (
                ("gpu_exporter", node.gpu_exporter),
                ("node_exporter", node.node_exporter),
            )
            for kind, exporter in exporters:
                if exporter is not None:
                    labels = self.target_labels(node, kind, kind, exporter.url)
                    out.append(PrometheusTarget(node.name, kind, kind, tuple(labels.items())))
        return out


@dataclass(frozen=True, slots=True)
class PrometheusTarget:
    """One endpoint as Prometheus knows it: its node, what it is, and the labels that pick out its series."""

    node: str
    kind: PrometheusKind
    endpoint: str  # the vLLM instance's name, or the exporter's kind
    labels: tuple[tuple[str, str], ...]  # sorted by label name
    engine: str = "vllm"  # for an engine instance (kind "vllm"): its engine, whose series are asked for

    def shown(self) -> str:
        return "{" + ", ".join(f'{name}="{value}"' for name, value in self.labels) + "}"


_DISCOVERED = object()  # a marker: no node given, they are left to Prometheus discovery


class FleetSpec(_Spec):
    """The whole config file."""

    poll_interval_s: Num = Field(1.0, ge=0.1, le=3600)
    timeout_s: Num = Field(2.0, gt=0, le=300)
    stale_after: Count = Field(3, ge=1, le=1000)  # poll intervals without fresh data before a value is stale
    max_body_bytes: Count = Field(8 * 1024 * 1024, ge=64 * 1024, le=MAX_BODY_BYTES)
    ca_file: UserPath | None = None  # PEM CA certificates trusted for https, beside the system's
    thresholds: Thresholds = Thresholds()
    kiosk: KioskSpec = KioskSpec()
    canary: CanarySpec = CanarySpec()
    keymap: dict[str, KeyName] = Field(default_factory=dict)  # binding id -> key (docs/keys.md lists ids)
    prometheus: PrometheusSpec | None = None  # metrics from a Prometheus server (docs/prometheus.md)
    # Required, unless [prometheus] is given: then the nodes may be discovered from it.
    nodes: tuple[NodeSpec, ...] = Field((), max_length=256, validate_default=True)
    alerts: tuple[AlertRuleSpec, ...] | None = None  # None: the default rules (docs/alerts.md); () none
    notifiers: tuple[NotifierSpec, ...] = ()
    # Diagnosis thresholds, "<rule id>.<param>" -> number (docs/diagnosis.md); checked against the catalogue.
    diagnosis: dict[str, Num] = Field(default_factory=dict)
    source: str | None = None  # set by the loader: where the spec came from, for messages

    def node(self, name: str) -> NodeSpec | None:
        """The node named ``name``: a dict lookup, as the screens ask for every row of every frame.

        The index is kept in the instance's ``__dict__`` beside the fields (not a field: equality,
        dumps and hashes ignore it) with the tuple it was built from, so a copy made with other nodes
        (``model_copy(update={"nodes": ...})``, which copies the ``__dict__``) builds its own.
        """
        cached = self.__dict__.get("_nodes_by_name")
        if cached is None or cached[0] is not self.nodes:
            cached = self.__dict__["_nodes_by_name"] = (self.nodes, {n.name: n for n in self.nodes})
        return cached[1].get(name)

    @model_validator(mode="before")
    @classmethod
    def _nodes_from_prometheus(cls, data: Any) -> Any:
        # With a [prometheus] table (valid or not) no node is needed: they may be discovered from it.
        if isinstance(data, Mapping) and data.get("prometheus") is not None and not data.get("nodes"):
            return {**data, "nodes": _DISCOVERED}
        return data

    @field_validator("nodes", mode="before")
    @classmethod
    def _nodes_needed(cls, value: Any) -> Any:
        if value is _DISCOVERED:
            return ()
        if isinstance(value, tuple | list) and not value:
            # The default () stands for "not given" (a file's array is a list).
            if isinstance(value, tuple):
                raise PydanticCustomError("missing", "Field required")
            raise PydanticCustomError("too_short", "needs at least one node", {"min_length": 1})
        return value

    @model_validator(mode="after")
    def _check_fleet(self) -> FleetSpec:
        problems: list[tuple[Loc, str]] = [
            (("nodes", index, "name"), f"{msg}; node names must be unique")
            for (index,), msg in _duplicates((n.name for n in self.nodes), "nodes")
        ]
        heads: dict[str, list[Loc]] = {}
        workers: dict[str, list[Loc]] = {}
        for i, node in enumerate(self.nodes):
            for j, vllm in enumerate(node.vllm):
                if vllm.job is not None and vllm.role != "single":
                    found = heads if vllm.role == "head" else workers
                    found.setdefault(vllm.job, []).append(("nodes", i, "vllm", j, "job"))
        for job, locs in heads.items():
            first = key_path(locs[0][:-1])
            problems.extend((loc, f"job {_shown(job)} already has a head at {first}") for loc in locs[1:])
        for job, locs in workers.items():
            if job not in heads:
                problems.extend(
                    (loc, f'no vLLM in the fleet has role = "head" and job = {_shown(job)}') for loc in locs
                )
        problems.extend(self._alert_problems())
        problems.extend(self._prometheus_problems())
        if problems:
            fail("FleetSpec", problems)
        return self

    def _prometheus_problems(self) -> list[tuple[Loc, str]]:
        """Two endpoints whose labels are the same could not be told apart in Prometheus's answers."""
        if self.prometheus is None:
            return []
        seen: dict[tuple[tuple[str, str], ...], PrometheusTarget] = {}
        problems: list[tuple[Loc, str]] = []
        for target in self.prometheus.targets(self.nodes):
            first = seen.setdefault(target.labels, target)
            if first is not target:
                problems.append(
                    (
                        ("prometheus", "labels"),
                        f"{target.node} {target.endpoint} and {first.node} {first.endpoint} both map to "
                        f"{target.shown()}; add {{port}} or {{kind}} to a template so each endpoint has its own labels",
                    )
                )
        return problems

    def _alert_problems(self) -> list[tuple[Loc, str]]:
        problems: list[tuple[Loc, str]] = []
        rules = self.alerts or ()
        for (index,), msg in _duplicates((r.name for r in rules), "alerts"):
            problems.append((("alerts", index, "name"), f"{msg}; alert names must be unique"))
        names = {n.name for n in self.nodes}
        for i, rule in enumerate(rules):
            for j, node in enumerate(rule.nodes):
                # Nodes discovered from [prometheus] are not known yet: only listed nodes are checked.
                if node not in names and self.prometheus is None:
                    problems.append((("alerts", i, "nodes", j), f"no node named {_shown(node)} in the fleet"))
        for (index,), msg in _duplicates((n.name for n in self.notifiers), "notifiers"):
            problems.append((("notifiers", index, "name"), f"{msg}; give each notifier its own name"))
        return problems


def key_path(loc: Loc) -> str:
    """``("nodes", 1, "vllm", 0)`` → ``nodes[1].vllm[0]``: how messages name a key."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out
