"""The TCP ports a host listens on, from ``ss -Hltnp``: where init looks beyond the usual ports.

A vLLM, an exporter or a side service on a port of its own choosing is found by asking what the host
listens on, then probing those ports over HTTP like the usual ones. Pure: the text is untrusted output
of a host. Ports of processes that are known not to speak HTTP (sshd, vLLM's own engine and worker
sockets, Ray, databases...) are not probed, nor ports bound to the host's loopback when init reaches the
host over the network, nor more than ``MAX_PROBED`` of them.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass

from sparktui.model.numbers import is_digits

SS_LISTENERS = "ss -Hltnp"  # listening TCP sockets, numeric, with their processes, no header
MAX_LINES = 4096  # lines of ss output read (a host with more listeners is read in part)
MAX_PROBED = 64  # listening ports probed per host, at most

# Processes whose ports are not HTTP (or not anything init could use): never probed. ``VLLM::`` names
# the engine core's and the workers' ZMQ and NCCL sockets; the API server is a python process.
NOT_HTTP = (
    "VLLM::",
    "sshd",
    "systemd",
    "containerd",
    "rpcbind",
    "rpc.",
    "cupsd",
    "chronyd",
    "dnsmasq",
    "avahi",
    "exim",
    "master",
    "smbd",
    "nfsd",
    "gcs_server",
    "raylet",
    "postgres",
    "mysqld",
    "redis-server",
    "xrdp",
    "nxserver",
)

_PROCESS_RE = re.compile(r'\(\("((?:[^"\\]|\\.){0,64})",pid=(\d{1,10})')


@dataclass(frozen=True, slots=True)
class Listener:
    address: str  # as ss prints it, without the port: "0.0.0.0", "127.0.0.1", "[::]", "*"
    port: int
    process: str | None  # None: ss shows no process (a socket of another user, without root)
    pid: int | None

    @property
    def loopback_only(self) -> bool:
        return is_loopback(self.address)


def is_loopback(host: str) -> bool:
    """Whether a host or address (``127.0.0.1``, ``[::1]``, ``127.0.0.53%lo``, ``localhost``) is this
    machine's loopback."""
    address = host.strip("[]").split("%", 1)[0]
    if address.startswith("::ffff:"):
        address = address[len("::ffff:") :]
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return address.lower() == "localhost"


def parse_ss_listeners(text: str) -> tuple[Listener, ...]:
    """Each listening socket of ``ss -Hltnp`` (``State Recv-Q Send-Q Local:Port Peer:Port Process``);
    lines that are not such a row are skipped. One row per port and address."""
    out: dict[tuple[str, int], Listener] = {}
    for line in text.splitlines()[:MAX_LINES]:
        fields = line.split(None, 5)
        if len(fields) < 5 or fields[0] != "LISTEN":
            continue
        address, sep, port = fields[3].rpartition(":")
        if not sep or not is_digits(port) or not 1 <= int(port) <= 65535 or not address:
            continue
        process = pid = None
        if len(fields) == 6:
            match = _PROCESS_RE.search(fields[5])
            if match is not None:
                process, pid = match.group(1), int(match.group(2))
        out.setdefault((address, int(port)), Listener(address[:64], int(port), process, pid))
    return tuple(out.values())


def probed_listeners(
    listeners: Iterable[Listener], *, host_is_loopback: bool, skip: Iterable[int]
) -> tuple[tuple[int, ...], int]:
    """The ports worth probing over HTTP, in order, and how many were left out by ``MAX_PROBED``.

    ``skip``: ports probed already, and the host's SSH port. A port bound to loopback only is reachable
    when init itself runs on the host (``host_is_loopback``), not over the network."""
    skipped = set(skip)
    ports: list[int] = []
    for listener in sorted(listeners, key=lambda item: item.port):
        if listener.port in skipped or listener.port in ports:
            continue
        if listener.process is not None and listener.process.startswith(NOT_HTTP):
            continue
        if listener.loopback_only and not host_is_loopback:
            continue
        ports.append(listener.port)
    return tuple(ports[:MAX_PROBED]), max(0, len(ports) - MAX_PROBED)
