"""The fleet config file: where it is, reading it, and errors a person can act on.

``load_config`` finds and reads the TOML file, ``parse_config`` validates its text into a
``FleetSpec`` and fills in the vLLM API keys from the environment or key files. Every problem is
reported at once, one line each, naming the file, the key and what to do:

    fleet.toml: nodes[1].vllm[0].url: must start with http:// or https:// (got 'ftp://x')

The keys themselves never appear in any message.

A file others may read (any group or other permission) that holds a secret itself (``secrets_in_file``:
a notifier URL with its token, a URL with a credential in it) gets one warning line, naming the file,
the keys and ``chmod 600``; the commands print it on stderr (``load_config``'s ``warn``).
"""

from __future__ import annotations

import difflib
import functools
import os
import re
import ssl
import stat
import tomllib
import typing
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlsplit

from platformdirs import user_config_path
from pydantic import BaseModel, SecretStr, ValidationError
from pydantic_core import ErrorDetails

from sparktui.engines import EngineError, registry
from sparktui.model.specs import (
    AlertRuleSpec,
    ExporterSpec,
    FleetSpec,
    NodeSpec,
    NotifierSpec,
    PrometheusSpec,
    ServerSpec,
    ServiceSpec,
    check_notifier_url,
    key_path,
)

if TYPE_CHECKING:
    from sparktui.diagnosis.catalogue import Catalogue

CONFIG_ENV = "SPARKTUI_CONFIG"
APP_NAME = "sparktui"
CONFIG_NAME = "config.toml"

# Fields the loader fills: a file may not set them.
_LOADER_ONLY: Mapping[type[BaseModel], frozenset[str]] = {
    FleetSpec: frozenset({"source"}),
    ServerSpec: frozenset({"api_key"}),
    NotifierSpec: frozenset({"token"}),
    PrometheusSpec: frozenset({"bearer_token", "password"}),
}
# Fields whose values are never echoed in a message (a key may have been pasted into them).
_SECRET_FIELDS = frozenset(
    {"api_key", "api_key_env", "api_key_file", "token", "token_env", "token_file", "url_env", "url_file", "topic"}
    | {"bearer_token", "bearer_token_env", "bearer_token_file", "password", "password_env", "password_file"}
)
_TOML_POSITION = re.compile(r"^(?P<msg>.*?) \(at line (?P<line>\d+), column (?P<col>\d+)\)$", re.DOTALL)
_TOML_AT_END = re.compile(r"^(?P<msg>.*?) \(at end of document\)$", re.DOTALL)
# Keys whose value is a secret written in the file itself (the loader refuses most; ``*_env`` and
# ``*_file`` only say where a secret is).
_SECRET_VALUE_KEYS = frozenset({"token", "api_key", "password", "bearer_token", "secret"})
# A query parameter that carries a credential: ?token=, ?access_token=, ?api_key=, ?sig= (Azure, Teams), ?pass=
_CREDENTIAL_PARAM = re.compile(r"token|key|secret|sig|pass|pwd|auth|cred", re.IGNORECASE)
# A path segment that looks generated, as the token in a Slack, Discord or Teams webhook URL does.
_TOKEN_SEGMENT = re.compile(r"[A-Za-z0-9_-]{16,}")
_GROUP_OR_OTHERS = stat.S_IRWXG | stat.S_IRWXO
_BARE_VALUE = re.compile(r"^\s*(?P<key>[A-Za-z0-9_.-]+)\s*=\s*(?P<value>[^\s\"'\[{#][^#]*?)\s*(?:#.*)?$")


class ConfigError(Exception):
    """The config cannot be used. ``errors`` holds one single-line message per problem."""

    def __init__(self, errors: Sequence[str]) -> None:
        self.errors = list(errors)
        super().__init__("\n".join(self.errors))

    def __str__(self) -> str:
        return "\n".join(self.errors)


def default_config_path(env: Mapping[str, str] = os.environ) -> Path:
    """``$SPARKTUI_CONFIG`` if set, else ``config.toml`` in the user's config folder (XDG on Linux,
    ``$XDG_CONFIG_HOME/sparktui``; platformdirs reads that from the process environment)."""
    configured = env.get(CONFIG_ENV, "").strip()
    if configured:
        return Path(configured).expanduser()
    return user_config_path(APP_NAME, appauthor=False) / CONFIG_NAME


def load_config(
    path: Path | None = None, env: Mapping[str, str] = os.environ, *, warn: Callable[[str], None] | None = None
) -> FleetSpec:
    """Read and validate the config file (``default_config_path`` when ``path`` is None). ``warn`` gets
    the line of ``exposed_secrets_warning`` when others may read a file that holds a secret."""
    path = default_config_path(env) if path is None else path
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(
            [f"{path}: no config file; run 'sparktui init' to write one, or 'sparktui demo' to try the demo fleet"]
        ) from None
    except IsADirectoryError:
        raise ConfigError([f"{path}: is a folder, not a config file"]) from None
    except PermissionError:
        raise ConfigError([f"{path}: cannot read the config file: permission denied"]) from None
    except OSError as exc:
        raise ConfigError([f"{path}: cannot read the config file: {exc.strerror or exc}"]) from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ConfigError([f"{path}: line {line}: not UTF-8 text; save the file as UTF-8"]) from None
    fleet = parse_config(text, source=str(path), env=env, base_dir=path.parent)
    if warn is not None:
        try:
            mode = path.stat().st_mode
        except OSError:
            mode = 0  # it was just read: gone or moved since, there is nothing left to warn about
        # Parsed again only for a file others may read: the spec no longer says which values were inline.
        keys = secrets_in_file(tomllib.loads(text)) if mode & _GROUP_OR_OTHERS else []
        warning = exposed_secrets_warning(path, mode, keys)
        if warning is not None:
            warn(warning)
    return fleet


def exposed_secrets_warning(path: Path, mode: int, keys: Sequence[str]) -> str | None:
    """One line when a config file with permission bits ``mode`` is open to its group or others and
    holds the secrets at ``keys``; None when it is not, or holds none."""
    if not mode & _GROUP_OR_OTHERS or not keys:
        return None
    return (
        f"sparktui: warning: {path} is readable by others (mode {stat.S_IMODE(mode):04o}) and holds a secret "
        f"in {', '.join(keys)}; chmod 600 {path}"
    )


def secrets_in_file(data: Mapping[str, Any]) -> list[str]:
    """Where a config's TOML data holds a secret itself, as ``notifiers[0].url``: a token, key or password
    written in the file, a URL with a user or password or a credential in its query (``?token=``,
    ``?sig=``...), a notifier URL with a generated-looking path segment (a Slack or Discord webhook's
    token). ``*_env`` and ``*_file`` name where a secret is kept, and hold none."""
    found: list[str] = []

    def walk(value: object, where: str) -> None:
        if isinstance(value, Mapping):
            for key, item in value.items():
                path = f"{where}.{key}" if where else str(key)
                if isinstance(item, str) and item.strip() and _holds_secret(str(key), item, path):
                    found.append(path)
                else:
                    walk(item, path)
        elif isinstance(value, list):
            for i, item in enumerate(value):
                walk(item, f"{where}[{i}]")

    walk(data, "")
    return found


def _holds_secret(key: str, value: str, path: str) -> bool:
    if key in _SECRET_VALUE_KEYS:
        return True
    if key != "url":
        return False
    try:
        parts = urlsplit(value)
        credential = any(_CREDENTIAL_PARAM.search(name) and item for name, item in parse_qsl(parts.query))
    except ValueError:
        return False  # not a URL: the validation says so
    if "@" in parts.netloc or credential:
        return True
    return path.startswith("notifiers[") and any(_token_like(segment) for segment in parts.path.split("/"))


def _token_like(segment: str) -> bool:
    """Long, and of mixed kinds of characters: ``T0B1c2...``, a UUID; not ``sparktui-alerts-hook``."""
    kinds = sum(
        (any(c.islower() for c in segment), any(c.isupper() for c in segment), any(c.isdigit() for c in segment))
    )
    return _TOKEN_SEGMENT.fullmatch(segment) is not None and kinds >= 2


def parse_config(
    text: str,
    source: str = "<config>",
    env: Mapping[str, str] = os.environ,
    base_dir: Path | None = None,
) -> FleetSpec:
    """Validate config text. Relative paths (key files, known_hosts) are taken from ``base_dir``."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError([_syntax_error(source, exc, text)]) from None
    except RecursionError:
        raise ConfigError([_too_deep(source)]) from None
    errors = [f"{source}: {message}" for message in _drop_loader_only(data)]
    data["source"] = source
    try:
        fleet = FleetSpec.model_validate(data)
    except ValidationError as exc:
        errors.extend(f"{source}: {_describe(error)}" for error in _reportable(exc.errors()))
    except RecursionError:
        raise ConfigError([_too_deep(source)]) from None
    else:
        errors.extend(f"{source}: {message}" for message in _unknown_engines(fleet))
    if errors:
        raise ConfigError(errors)
    return _resolve_files_and_secrets(fleet, source, env, base_dir)


def _unknown_engines(fleet: FleetSpec) -> list[str]:
    """An instance whose engine sparktui does not know (nor any installed engine package adds)."""
    try:
        known = registry()
    except EngineError as exc:
        return [str(exc)]
    return [
        f"nodes[{n}].vllm[{i}].engine: {spec.engine!r} is no engine sparktui knows "
        f"(it knows {', '.join(sorted(known))}; docs/engines.md says how to add one)"
        for n, node in enumerate(fleet.nodes)
        for i, spec in enumerate(node.vllm)
        if spec.engine not in known
    ]


def _too_deep(source: str) -> str:
    return (
        f"{source}: arrays or tables are nested too deeply to read; "
        "a sparktui config nests at most a few levels (docs/config.md)"
    )


# --- TOML syntax --------------------------------------------------------------------------------------


def _syntax_error(source: str, exc: tomllib.TOMLDecodeError, text: str) -> str:
    message = str(exc)
    if found := _TOML_POSITION.match(message):
        line = int(found["line"])
        lines = text.splitlines()
        hint = _quote_hint(lines[line - 1]) if line <= len(lines) else ""
        return f"{source}: line {line}, column {found['col']}: TOML syntax error: {_lower_first(found['msg'])}{hint}"
    if found := _TOML_AT_END.match(message):
        return f"{source}: at the end of the file: TOML syntax error: {_lower_first(found['msg'])}"
    return f"{source}: TOML syntax error: {_lower_first(message)}"


def _quote_hint(line: str) -> str:
    """A hint for the most common slip, an unquoted text value (``host = 192.168.1.11``).

    The value is not repeated: the line might be a key pasted in by mistake.
    """
    found = _BARE_VALUE.match(line)
    if found is None:
        return ""
    try:
        tomllib.loads(f"v = {found['value']}")
    except tomllib.TOMLDecodeError:
        return f'; text values need quotes, like {found["key"]} = "..."'
    return ""


# --- keys a file may not set --------------------------------------------------------------------------


def _drop_loader_only(data: dict[str, Any]) -> list[str]:
    """Remove keys only the loader sets (so the rest still validates) and say why each is refused."""
    messages: list[str] = []
    if "source" in data:
        del data["source"]
        messages.append("source: not a config key (sparktui sets it to the file's path); remove it")
    notifiers = data.get("notifiers")
    for i, notifier in enumerate(notifiers if isinstance(notifiers, list) else ()):
        if isinstance(notifier, dict) and "token" in notifier:
            del notifier["token"]
            messages.append(
                f"notifiers[{i}].token: tokens do not go in the config file; "
                'set token_env = "VARIABLE" or token_file = "path/to/file" instead'
            )
    messages.extend(_drop_prometheus_secrets(data.get("prometheus")))
    nodes = data.get("nodes")
    if not isinstance(nodes, list):
        return messages
    for i, node in enumerate(nodes):
        vllms = node.get("vllm") if isinstance(node, dict) else None
        if not isinstance(vllms, list):
            continue
        for j, vllm in enumerate(vllms):
            if isinstance(vllm, dict) and "api_key" in vllm:
                del vllm["api_key"]
                messages.append(
                    f"nodes[{i}].vllm[{j}].api_key: keys do not go in the config file; "
                    'set api_key_env = "VARIABLE" or api_key_file = "path/to/file" instead'
                )
    return messages


def _drop_prometheus_secrets(prometheus: object) -> list[str]:
    messages: list[str] = []
    if not isinstance(prometheus, dict):
        return messages
    for key in ("bearer_token", "password"):
        if key in prometheus:
            del prometheus[key]
            messages.append(
                f"prometheus.{key}: secrets do not go in the config file; "
                f'set {key}_env = "VARIABLE" or {key}_file = "path/to/file" instead'
            )
    return messages


# --- validation errors → one line each ----------------------------------------------------------------


def _reportable(errors: list[ErrorDetails]) -> list[ErrorDetails]:
    """Leave out "too short" for an array whose items failed: pydantic counts only the valid items."""
    failed_items = {tuple(e["loc"][:i]) for e in errors for i, part in enumerate(e["loc"]) if isinstance(part, int)}
    return [e for e in errors if not (e["type"] == "too_short" and tuple(e["loc"]) in failed_items)]


def _describe(error: ErrorDetails) -> str:
    """``nodes[1].vllm[0].url: must start with ...`` for one pydantic error."""
    loc = tuple(error["loc"])
    where = key_path(loc) or "(top level)"
    return f"{where}: {_problem(error, loc)}"


def _problem(error: ErrorDetails, loc: tuple[str | int, ...]) -> str:
    kind = error["type"]
    ctx: dict[str, Any] = dict(error.get("ctx") or {})
    field = next((part for part in reversed(loc) if isinstance(part, str)), "")
    got = "" if field in _SECRET_FIELDS else _got(error.get("input"))
    if kind == "spec":
        return str(ctx["detail"])
    if kind in ("value_error", "assertion_error"):
        return str(ctx.get("error", error["msg"]))
    if kind == "extra_forbidden":
        return _unknown_key(loc)
    if kind == "missing":
        return _missing(loc)
    if kind in ("int_type", "int_parsing", "int_from_float"):
        quoted = " written without quotes" if isinstance(error.get("input"), str) else ""
        return f"must be a whole number{quoted}{got}"
    if kind in ("float_type", "float_parsing"):
        quoted = " written without quotes" if isinstance(error.get("input"), str) else ""
        return f"must be a number{quoted}{got}"
    if kind == "finite_number":
        return f"must be a finite number{got}"
    if kind in ("bool_type", "bool_parsing"):
        return f"must be true or false (no quotes){got}"
    if kind in ("string_type", "path_type"):
        return f'must be a string in quotes, like "..."{got}'
    if kind in _COMPARISONS:
        op, key = _COMPARISONS[kind]
        return f"must be {op} {_number(ctx[key])}{got}"
    if kind == "literal_error":
        return f"must be one of {ctx.get('expected')}{got}"
    if kind in ("tuple_type", "list_type"):
        header = _toml_path(loc)
        if isinstance(error.get("input"), dict):
            return f"must be an array of tables: write [[{header}]], not [{header}]"
        return f"must be an array{got}"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        header = _toml_path(loc)
        if isinstance(error.get("input"), list):
            return f"must be a table: write [{header}], not [[{header}]]"
        return f"must be a table ([{header}]){got}"
    if kind == "too_short":
        if loc == ("nodes",):
            return "needs at least one node: add a [[nodes]] table with name and host"
        return f"needs at least {ctx.get('min_length')} item(s)"
    if kind == "too_long":
        return f"at most {ctx.get('max_length')} items (got {ctx.get('actual_length')})"
    return _lower_first(error["msg"]) + got


_COMPARISONS: Mapping[str, tuple[str, str]] = {
    "greater_than": (">", "gt"),
    "greater_than_equal": (">=", "ge"),
    "less_than": ("<", "lt"),
    "less_than_equal": ("<=", "le"),
}


def _got(value: object) -> str:
    """`` (got 'ftp://x')`` for a scalar input; nothing for tables and arrays."""
    if isinstance(value, bool):
        return f" (got {str(value).lower()})"
    if isinstance(value, int | float):
        return f" (got {_number(value)})"
    if isinstance(value, str):
        shown = repr(value)
        return f" (got {shown if len(shown) <= 60 else shown[:59] + '…'})"
    if isinstance(value, dict):
        return " (got a table)"
    if isinstance(value, list):
        return " (got an array)"
    return ""


def _number(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]


def _toml_path(loc: tuple[str | int, ...]) -> str:
    return ".".join(part for part in loc if isinstance(part, str))


def _table_header(loc: tuple[str | int, ...]) -> str:
    if not loc:
        return "the top level"
    dotted = _toml_path(loc)
    return f"[[{dotted}]]" if isinstance(loc[-1], int) else f"[{dotted}]"


def _missing(loc: tuple[str | int, ...]) -> str:
    if loc == ("nodes",):
        return "missing: add at least one [[nodes]] table with name and host"
    model = _model_at(loc[:-1])
    if loc[-1] == "url" and model is ExporterSpec:
        return 'missing: give url = "http://HOST:PORT/metrics" or port = PORT'
    if loc[-1] == "url" and model is ServiceSpec:
        return 'missing: give url = "http://HOST:PORT/health" or port = PORT (and path)'
    return "missing (required)"


def _unknown_key(loc: tuple[str | int, ...]) -> str:
    key = loc[-1]
    table = loc[:-1]
    if not isinstance(key, str):
        return "unknown key"
    model = _model_at(table)
    choices = sorted(_keys(model)) if model is not None else []
    close = difflib.get_close_matches(key, choices, n=1, cutoff=0.6)
    # A key meant for an enclosing table but written below a sub-table header ([nodes.ssh], ...):
    # TOML puts every key after a header into that table.
    outer = next(
        (table[:cut] for cut in range(len(table) - 1, -1, -1) if key in _keys(_model_at(table[:cut]))),
        None,
    )
    if outer is not None:
        move = f"move it above the {_table_header(table)} header"
        if close:
            return f"unknown key (did you mean {close[0]!r}? if {key!r} is meant for {_table_header(outer)}, {move})"
        return f"unknown key here; {key!r} belongs to {_table_header(outer)}: {move}"
    if close:
        return f"unknown key (did you mean {close[0]!r}?)"
    if choices:
        return f"unknown key (valid keys: {', '.join(choices)})"
    return "unknown key"


def _keys(model: type[BaseModel] | None) -> set[str]:
    if model is None:
        return set()
    return set(model.model_fields) - _LOADER_ONLY.get(model, frozenset())


def _model_at(loc: tuple[str | int, ...]) -> type[BaseModel] | None:
    """The spec class of the table at ``loc`` (``("nodes", 0, "ssh")`` → ``SshSpec``)."""
    current: Any = FleetSpec
    for part in loc:
        current = _element(current, part)
        if current is None:
            return None
    model = _element(current, None)
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _element(annotation: Any, part: str | int | None) -> Any:
    """Step from a type into a field (str) or an array item (int), or just drop its ``| None``."""
    members = typing.get_args(annotation)
    if type(None) in members and len(members) == 2:
        annotation = next(m for m in members if m is not type(None))
    if part is None:
        return annotation
    if isinstance(part, int):
        items = typing.get_args(annotation)
        return items[0] if typing.get_origin(annotation) is tuple and items else None
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        field = annotation.model_fields.get(part)
        return None if field is None else field.annotation
    return None


# --- after validation: paths relative to the file, and the API keys -------------------------------------


def _resolve_files_and_secrets(
    fleet: FleetSpec, source: str, env: Mapping[str, str], base_dir: Path | None
) -> FleetSpec:
    errors: list[str] = []
    nodes: list[NodeSpec] = []
    for i, node in enumerate(fleet.nodes):
        ssh = node.ssh.model_copy(
            update={
                "key_file": _relative_to(node.ssh.key_file, base_dir),
                "known_hosts": _relative_to(node.ssh.known_hosts, base_dir),
            }
        )
        vllms: list[ServerSpec] = []
        for j, vllm in enumerate(node.vllm):
            where = f"{source}: nodes[{i}].vllm[{j}]"
            key_file = _relative_to(vllm.api_key_file, base_dir)
            key, problem = _read_secret(vllm.api_key_env, key_file, env)
            if problem is not None:
                errors.append(f"{where}.{problem}")
            vllms.append(vllm.model_copy(update={"api_key_file": key_file, "api_key": key}))
        nodes.append(node.model_copy(update={"ssh": ssh, "vllm": tuple(vllms)}))
    notifiers = [
        _resolve_notifier(notifier, f"{source}: notifiers[{i}]", env, base_dir, errors)
        for i, notifier in enumerate(fleet.notifiers)
    ]
    errors.extend(_unknown_findings(fleet.alerts or (), source))
    errors.extend(_bad_diagnosis_thresholds(fleet.diagnosis, source))
    prometheus = _resolve_prometheus(fleet.prometheus, f"{source}: prometheus", env, base_dir, errors)
    ca_file = _relative_to(fleet.ca_file, base_dir)
    if ca_file is not None:
        problem = _ca_file_problem(ca_file)
        if problem is not None:
            errors.append(f"{source}: ca_file: {problem}")
    if errors:
        raise ConfigError(errors)
    return fleet.model_copy(
        update={"nodes": tuple(nodes), "notifiers": tuple(notifiers), "prometheus": prometheus, "ca_file": ca_file}
    )


def _ca_file_problem(path: Path) -> str | None:
    """Why ``path`` cannot be the CA file for https, or None when it loads."""
    if not path.exists():
        return f"no such file: {path}"
    if path.is_dir():
        return f"{path} is a folder; give a PEM file of CA certificates"
    try:
        ssl.create_default_context().load_verify_locations(cafile=path)
    except PermissionError:
        return f"cannot read {path}: permission denied"
    except (ssl.SSLError, ValueError, OSError):
        return f"{path} holds no PEM CA certificate (-----BEGIN CERTIFICATE-----)"
    return None


def _resolve_prometheus(
    spec: PrometheusSpec | None, where: str, env: Mapping[str, str], base_dir: Path | None, errors: list[str]
) -> PrometheusSpec | None:
    """The [prometheus] table with its bearer token or password read from the environment or their files."""
    if spec is None:
        return None
    token_file = _relative_to(spec.bearer_token_file, base_dir)
    token, problem = _read_secret(spec.bearer_token_env, token_file, env, key="bearer_token", what="bearer token")
    if problem is not None:
        errors.append(f"{where}.{problem}")
    password_file = _relative_to(spec.password_file, base_dir)
    password, problem = _read_secret(spec.password_env, password_file, env, key="password", what="password")
    if problem is not None:
        errors.append(f"{where}.{problem}")
    return spec.model_copy(
        update={
            "bearer_token_file": token_file,
            "bearer_token": token,
            "password_file": password_file,
            "password": password,
        }
    )


def _resolve_notifier(
    notifier: NotifierSpec, where: str, env: Mapping[str, str], base_dir: Path | None, errors: list[str]
) -> NotifierSpec:
    """The notifier with its token and URL read from the environment or their files."""
    token_file = _relative_to(notifier.token_file, base_dir)
    what = "bot token" if notifier.kind == "telegram" else "token"
    token, problem = _read_secret(notifier.token_env, token_file, env, key="token", what=what)
    if problem is not None:
        errors.append(f"{where}.{problem}")
    update: dict[str, object] = {"token_file": token_file, "token": token}
    url_file = _relative_to(notifier.url_file, base_dir)
    url, problem = _read_secret(notifier.url_env, url_file, env, key="url", what="URL")
    if problem is not None:
        errors.append(f"{where}.{problem}")
    elif url is not None:
        source_key = "url_env" if notifier.url_env is not None else "url_file"
        try:
            check_notifier_url(url.get_secret_value())
        except ValueError as exc:
            errors.append(f"{where}.{source_key}: the URL it holds {exc}")
        else:
            # The URL now is the secret read; where it came from is not needed once read.
            update.update(url=url, url_env=None, url_file=None)
    return notifier.model_copy(update=update)


@functools.cache
def load_catalogue() -> Catalogue:
    """The failure catalogue shipped with sparktui (``sparktui/data/failures.toml``) and each engine's own
    (``sparktui.engines.failures``, its rules that engine's), parsed, validated and merged once (it is
    immutable; the screens ask it for a finding's fix on every frame)."""
    from importlib import resources

    from sparktui.diagnosis.catalogue import merge_catalogues, parse_catalogue
    from sparktui.engines.failures import engine_catalogue, engine_catalogues

    text = (resources.files("sparktui") / "data" / "failures.toml").read_text(encoding="utf-8")
    main = parse_catalogue(text, source="sparktui/data/failures.toml")
    engines = {}
    for kind in engine_catalogues():
        where, engine_text = engine_catalogue(kind)
        engines[kind] = parse_catalogue(engine_text, source=where, engine=kind)
    return merge_catalogues(main, engines)


def catalogue_for(overrides: Mapping[str, float]) -> Catalogue:
    """The shipped catalogue with the config's ``[diagnosis]`` thresholds (validated by ``load_config``)."""
    catalogue = load_catalogue()
    return catalogue.with_overrides(overrides) if overrides else catalogue


def _bad_diagnosis_thresholds(overrides: Mapping[str, float], source: str) -> list[str]:
    """``[diagnosis]`` keys that name no rule or parameter of the catalogue, or values below 0."""
    if not overrides:
        return []
    from sparktui.diagnosis.catalogue import CatalogueError

    catalogue = load_catalogue()
    errors: list[str] = []
    for key, value in overrides.items():
        try:
            catalogue.with_overrides({key: value})
        except CatalogueError as exc:
            errors.append(f"{source}: diagnosis: {exc}")
    return errors


def _unknown_findings(rules: Sequence[AlertRuleSpec], source: str) -> list[str]:
    """Alert rules on a finding id the failure catalogue does not have."""
    wanted = [(i, rule.finding) for i, rule in enumerate(rules) if rule.finding is not None]
    if not wanted:
        return []
    known = load_catalogue().ids
    errors: list[str] = []
    for i, finding in wanted:
        if finding in known:
            continue
        close = difflib.get_close_matches(finding, known, n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}?" if close else "docs/diagnosis.md lists the rule ids"
        errors.append(f"{source}: alerts[{i}].finding: the failure catalogue has no rule {finding!r} ({hint})")
    return errors


def _relative_to(path: Path | None, base_dir: Path | None) -> Path | None:
    if path is None or base_dir is None or path.is_absolute():
        return path
    return base_dir / path


def _read_secret(
    env_name: str | None,
    key_file: Path | None,
    env: Mapping[str, str],
    *,
    key: str = "api_key",
    what: str = "API key",
) -> tuple[SecretStr | None, str | None]:
    """A secret from ``<key>_env`` or ``<key>_file`` (an API key, a bot token, a webhook URL), or the
    problem as ``"<key>_env: <what is wrong>"``. Never puts the secret in a message."""
    if env_name is not None:
        value = env.get(env_name)
        if value is None:
            return None, (
                f"{key}_env: environment variable {env_name} is not set; "
                f"export it before starting sparktui, or use {key}_file"
            )
        if not value.strip():
            return None, f"{key}_env: environment variable {env_name} is empty; set it to the {what}"
        return SecretStr(value.strip()), None
    if key_file is not None:
        where = f"{key}_file"
        try:
            text = key_file.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None, f"{where}: no such file: {key_file}"
        except IsADirectoryError:
            return None, f"{where}: {key_file} is a folder; give the file holding the {what}"
        except PermissionError:
            return None, f"{where}: cannot read {key_file}: permission denied"
        except UnicodeDecodeError:
            return None, f"{where}: {key_file} is not UTF-8 text"
        except OSError as exc:
            return None, f"{where}: cannot read {key_file}: {exc.strerror or type(exc).__name__}"
        if not text.strip():
            return None, f"{where}: {key_file} is empty; put the {what} in it"
        return SecretStr(text.strip()), None
    return None, None
