"""An Ollama server's start: ``ollama serve``, and where it listens, from ``OLLAMA_HOST``.

``sparktui init`` reads the systemd units and docker containers of a host (``sparktui.discovery``); what is
Ollama's is here. Ollama takes no option on its command line for where it listens: it is configured by its
environment (docs.ollama.com/faq, "How do I configure Ollama server?": on Linux, ``Environment=
"OLLAMA_HOST=0.0.0.0"`` under ``[Service]`` through ``systemctl edit ollama.service``). The Linux install
runs it as the unit ``ollama.service`` with ``ExecStart=/usr/bin/ollama serve`` (``/usr/local/bin`` from
the install script; docs.ollama.com/linux); the docker image ``ollama/ollama`` runs ``/bin/ollama serve``
with ``ENV OLLAMA_HOST=0.0.0.0:11434`` in its Dockerfile, published with ``-p 11434:11434``
(docs.ollama.com/docker).

``OLLAMA_HOST`` is read as Ollama's ``envconfig.Host()`` reads it (``envconfig/config.go``): a scheme before
``://`` is cut off (``http://`` alone makes the default port 80, ``https://`` 443); anything after a ``/`` is
a path; ``HOST:PORT`` (``[IPv6]:PORT``) is split, and text that does not split is the host with the default
port; a port that is not a number from 0 to 65535 is replaced by the default with a warning; unset or
empty, it is ``127.0.0.1:11434``: by default Ollama listens on loopback only. Pure: the words are untrusted
text from a host.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sparktui.engines.command_line import LOOPBACK
from sparktui.model.numbers import is_digits
from sparktui.model.safe_text import LABEL_LIMIT, safe_text

DEFAULT_PORT = 11434
DEFAULT_HOST = "127.0.0.1"
HOST_VARIABLE = "OLLAMA_HOST"
PROGRAM = "ollama"
IMAGE_HOST = "0.0.0.0:11434"  # the ollama/ollama image's ENV OLLAMA_HOST (its Dockerfile)
# ollama/ollama, ollama/ollama:0.12.3, docker.io/ollama/ollama:rocm, a mirror's registry/ollama/ollama@sha256:...
_IMAGE = re.compile(r"^(?:[A-Za-z0-9.-]+(?::[0-9]+)?/)?ollama/ollama(?::[A-Za-z0-9_.-]+)?(?:@sha256:[0-9a-f]+)?$")
_SCHEME_PORTS = {"http": 80, "https": 443}


def is_server_image(image: str) -> bool:
    """Ollama's own image (``ollama/ollama[:TAG]``), whose entrypoint runs ``ollama serve``."""
    return _IMAGE.match(image) is not None


def server_start(argv: Sequence[str], index: int) -> int | None:
    """When ``argv[index]`` starts ``ollama serve`` (under any path), the index after ``serve``; else None
    (``ollama run``, ``ollama pull``... start no server)."""
    if argv[index].replace("\\", "/").rsplit("/", 1)[-1] != PROGRAM:
        return None
    return index + 2 if index + 1 < len(argv) and argv[index + 1] == "serve" else None


@dataclass(frozen=True, slots=True)
class OllamaHost:
    """Where an Ollama listens, as its ``OLLAMA_HOST`` says (or its default)."""

    port: int | None  # None: port 0, a port the kernel picks
    bind: str  # the address it binds ("": every address)
    raw: str | None = None  # OLLAMA_HOST as set (made safe for a comment); None: not set
    problem: str | None = None  # why the port is unknown, or why Ollama falls back to its default
    default_how: str = f"Ollama's default address {DEFAULT_HOST}:{DEFAULT_PORT} (no `{HOST_VARIABLE}`)"

    def port_how(self) -> str:
        """How the port was given, for the config's comment."""
        if self.raw is None:
            return self.default_how
        given = f"`{HOST_VARIABLE}={self.raw}`"
        return f"{given} ({self.problem})" if self.problem else given

    @property
    def local_only(self) -> str | None:
        """The loopback address it listens on when that is all, else None."""
        return self.bind if self.bind in LOOPBACK or self.bind.startswith("127.") else None


def _split_host_port(hostport: str) -> tuple[str, str] | None:
    """Go's ``net.SplitHostPort``: ``HOST:PORT`` or ``[HOST]:PORT``; None where it fails (no port, too many
    colons)."""
    if hostport.startswith("["):
        host, bracket, rest = hostport[1:].partition("]")
        if not bracket or not rest.startswith(":") or "[" in host:
            return None
        return host, rest[1:]
    if hostport.count(":") != 1:
        return None
    host, _, port = hostport.partition(":")
    return host, port


def read_host(raw: str | None) -> OllamaHost:
    """``OLLAMA_HOST`` (None or empty: not set) read as Ollama reads it for ``ollama serve``."""
    value = (raw or "").strip()
    if not value:
        return OllamaHost(port=DEFAULT_PORT, bind=DEFAULT_HOST)
    shown = safe_text(value, LABEL_LIMIT)
    scheme, found, hostport = value.partition("://")
    default = _SCHEME_PORTS.get(scheme, DEFAULT_PORT) if found else DEFAULT_PORT
    hostport = (hostport if found else value).split("/", 1)[0]
    split = _split_host_port(hostport)
    if split is None:
        host = hostport.strip("[]") or DEFAULT_HOST
        how = f"no port: Ollama's default {default}" if found and default != DEFAULT_PORT else None
        return OllamaHost(port=default, bind=host, raw=shown, problem=how)
    host, port = split
    if not is_digits(port) or len(port) > 5 or int(port) > 65535:
        why = f"{safe_text(port, 20)!r} is not a port: Ollama falls back to {default}"
        return OllamaHost(port=default, bind=host, raw=shown, problem=why)
    if int(port) == 0:
        return OllamaHost(port=None, bind=host, raw=shown, problem="port 0: a port the kernel picks, unknown to init")
    return OllamaHost(port=int(port), bind=host, raw=shown)


def read_environment(env: Mapping[str, str]) -> OllamaHost:
    """Where an ``ollama serve`` run with this environment (a unit's, a container's) listens."""
    return read_host(env.get(HOST_VARIABLE))


def read_container(image: str, env: Mapping[str, str]) -> OllamaHost | None:
    """Where a container of the ``ollama/ollama`` image listens inside it, from its environment (the image
    sets ``OLLAMA_HOST=0.0.0.0:11434``: ``docker inspect`` shows it, a ``docker run`` line does not); None
    when the image is not Ollama's."""
    if not is_server_image(image):
        return None
    if env.get(HOST_VARIABLE) is None:
        image_default = read_host(IMAGE_HOST)
        return OllamaHost(
            port=image_default.port,
            bind=image_default.bind,
            default_how=f"the ollama/ollama image's `{HOST_VARIABLE}={IMAGE_HOST}`",
        )
    return read_environment(env)
