"""The fleet as the operator describes it, validated: nodes, their vLLM instances, exporters and side
services, SSH settings and alert thresholds.

Pure: no file, network or environment access beyond ``Path.expanduser``. ``sparktui.config`` reads
the TOML file, fills in secrets and turns validation errors into one-line messages.

Port shorthands (``port = 8001`` instead of a URL) are resolved by ``NodeSpec``, which knows the host:
after validation every ``VllmSpec`` except a url-less worker, every ``ExporterSpec`` and every
``ServiceSpec`` has its full ``url``. A shorthand ``port`` stays on the object; when a file gives both
``url`` and ``port`` they must agree, so a dumped spec validates again.

Names that end up in commands run over SSH (systemd units, docker containers, the SSH user) are
checked against strict patterns here, once, so the action code never has to quote untrusted text.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping, Sequence
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


def _check_http_url(value: str) -> str:
    """Common checks of every URL in the config; returns it unchanged."""
    authority = value.split("://", 1)[-1].split("/", 1)[0]
    if "@" in authority:
        # Checked first, and the value is not echoed: it may hold a password.
        raise ValueError("must not contain a user name or password; give the API key with api_key_env or api_key_file")
    if any(c.isspace() for c in value):
        raise ValueError(f"must not contain spaces (got {_shown(value)})")
    parts = urlsplit(value)
    if parts.scheme.lower() not in ("http", "https") or not value.lower().startswith(parts.scheme.lower() + "://"):
        raise ValueError(f"must start with http:// or https:// (got {_shown(value)})")
    if not parts.hostname:
        raise ValueError(f"has no host name (got {_shown(value)})")
    try:
        port = parts.port
    except ValueError:
        port = -1
    if port is not None and not 1 <= port <= 65535:
        raise ValueError(f"has an invalid port (got {_shown(value)})")
    if parts.fragment:
        raise ValueError(f"must not have a #fragment (got {_shown(value)})")
    return value


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
UserPath = Annotated[Path, AfterValidator(_expand)]


class _Spec(BaseModel):
    # hide_input_in_errors: pydantic's own str(ValidationError) would otherwise print whole input
    # tables, which may hold an api_key set in code.
    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)


# --- specs -------------------------------------------------------------------------------------------


class Thresholds(_Spec):
    """When a number turns from normal to warning (or critical) on the screen and in alerts."""

    kv_usage_warn: Num = Field(0.90, gt=0, le=1)
    waiting_warn: Count = Field(8, ge=0)
    ttft_p90_warn_s: Num = Field(10.0, gt=0)
    preemptions_per_s_warn: Num = Field(0.05, ge=0)
    mem_available_warn_gib: Num = Field(8.0, ge=0)
    mem_available_crit_gib: Num = Field(4.0, ge=0)
    service_latency_warn_s: Num = Field(1.0, gt=0)
    gpu_temp_warn_c: Num = Field(85.0, gt=0)

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
    connect_timeout_s: Num = Field(5.0, gt=0)
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


class VllmSpec(_Spec):
    """One vLLM server on a node. A tensor-parallel worker (``role = "worker"``) may have no URL."""

    name: Name = "vllm"
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
        # The value is not echoed: a key pasted here by mistake must not end up on the screen.
        if value is not None and not ENV_NAME_RE.fullmatch(value):
            raise ValueError(
                "must be the name of an environment variable (letters, digits and '_'), not the key itself"
            )
        return value

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
    def _check_together(self) -> VllmSpec:
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
            fail("VllmSpec", problems)
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
    timeout_s: Num | None = Field(None, gt=0)  # None: the fleet's timeout_s

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
    if isinstance(raw, VllmSpec):
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


class NodeSpec(_Spec):
    """One DGX Spark (or any host) and what runs on it."""

    name: Name
    host: str
    local: Flag = False  # the machine sparktui runs on: host state from psutil, actions without SSH
    ssh: SshSpec = SshSpec()
    vllm: tuple[VllmSpec, ...] = ()
    gpu_exporter: ExporterSpec | None = None
    node_exporter: ExporterSpec | None = None
    services: tuple[ServiceSpec, ...] = ()

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


class KioskSpec(_Spec):
    """The read-only kiosk for a wall screen (``sparktui --kiosk``)."""

    rotate_s: Num = Field(15.0, ge=3)  # seconds on each page: the fleet, then each node
    unlock_key: KeyName | None = None  # leaves the kiosk for the read-only dashboard; none: no key does
    shift_every_s: Num = Field(180.0, ge=10)  # move the picture by a cell this often (burn-in)


class FleetSpec(_Spec):
    """The whole config file."""

    poll_interval_s: Num = Field(1.0, ge=0.1, le=3600)
    timeout_s: Num = Field(2.0, gt=0)
    stale_after: Count = Field(3, ge=1)  # poll intervals without fresh data before a value is stale
    max_body_bytes: Count = Field(8 * 1024 * 1024, ge=64 * 1024)
    thresholds: Thresholds = Thresholds()
    kiosk: KioskSpec = KioskSpec()
    keymap: dict[str, KeyName] = Field(default_factory=dict)  # binding id -> key (docs/keys.md lists ids)
    nodes: tuple[NodeSpec, ...] = Field(min_length=1, max_length=256)
    source: str | None = None  # set by the loader: where the spec came from, for messages

    def node(self, name: str) -> NodeSpec | None:
        return next((n for n in self.nodes if n.name == name), None)

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
        if problems:
            fail("FleetSpec", problems)
        return self


def key_path(loc: Loc) -> str:
    """``("nodes", 1, "vllm", 0)`` → ``nodes[1].vllm[0]``: how messages name a key."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out
