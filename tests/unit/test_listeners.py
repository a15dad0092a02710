"""What a host listens on (``ss -Hltnp``), and which of those ports init probes over HTTP."""

from __future__ import annotations

import pytest

from sparktui.discovery.listeners import (
    MAX_PROBED,
    Listener,
    is_loopback,
    parse_ss_listeners,
    probed_listeners,
)
from tests.conftest import DATA

CAPTURE = DATA / "host" / "ss-ltnp-vllm-cpu.txt"


def test_a_captured_ss_output_gives_every_socket_with_its_process() -> None:
    text = CAPTURE.read_text()
    listeners = parse_ss_listeners(text)
    assert len(listeners) == len([line for line in text.splitlines() if line.startswith("LISTEN")])
    by_port = {item.port: item for item in listeners}
    assert by_port[46659] == Listener("127.0.0.1", 46659, "VLLM::Worker", 1863)
    assert by_port[45491] == Listener("127.0.0.1", 45491, "python", 25680)
    assert by_port[2024] == Listener("0.0.0.0", 2024, None, None)  # another user's socket: no process


def test_the_engines_own_sockets_are_not_probed_and_the_rest_are_in_port_order() -> None:
    listeners = parse_ss_listeners(CAPTURE.read_text())
    ports, left_out = probed_listeners(listeners, host_is_loopback=True, skip=())
    workers = {item.port for item in listeners if item.process == "VLLM::Worker"}
    assert workers and not workers & set(ports)
    assert list(ports) == sorted(item.port for item in listeners if item.port not in workers)
    assert left_out == 0


def test_loopback_sockets_are_probed_only_when_init_runs_on_the_host() -> None:
    listeners = parse_ss_listeners(CAPTURE.read_text())
    over_network, _ = probed_listeners(listeners, host_is_loopback=False, skip=())
    assert over_network == (2024,)  # the only socket on 0.0.0.0


def test_ports_probed_already_and_the_ssh_port_are_skipped() -> None:
    text = (
        'LISTEN 0 4096 0.0.0.0:22 0.0.0.0:* users:(("sshd",pid=1041,fd=3))\n'
        "LISTEN 0 4096 0.0.0.0:2222 0.0.0.0:*\n"
        "LISTEN 0 4096 0.0.0.0:8000 0.0.0.0:*\n"
        'LISTEN 0 4096 0.0.0.0:9835 0.0.0.0:* users:(("nvidia_gpu_expo",pid=900,fd=3))\n'
    )
    ports, _ = probed_listeners(parse_ss_listeners(text), host_is_loopback=False, skip={8000, 2222})
    assert ports == (9835,)


@pytest.mark.parametrize(
    ("line", "address", "port"),
    [
        ('LISTEN 0 4096 [::]:9100 [::]:* users:(("node_exporter",pid=77,fd=3))', "[::]", 9100),
        ("LISTEN 0 4096 *:9400 *:*", "*", 9400),
        ("LISTEN 0 4096 127.0.0.53%lo:53 0.0.0.0:*", "127.0.0.53%lo", 53),
        ("LISTEN 0 4096 [::ffff:127.0.0.1]:8765 *:*", "[::ffff:127.0.0.1]", 8765),
    ],
)
def test_ipv6_wildcard_and_interface_addresses_are_read(line: str, address: str, port: int) -> None:
    (listener,) = parse_ss_listeners(line)
    assert (listener.address, listener.port) == (address, port)


@pytest.mark.parametrize(
    ("address", "loopback"),
    [
        ("127.0.0.1", True),
        ("[::1]", True),
        ("127.0.0.53%lo", True),
        ("[::ffff:127.0.0.1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("[::]", False),
        ("*", False),
        ("192.168.1.11", False),
        ("spark1", False),
    ],
)
def test_loopback_addresses_are_told_apart(address: str, loopback: bool) -> None:
    assert is_loopback(address) is loopback


def test_hostile_output_is_skipped_line_by_line_and_bounded() -> None:
    text = "\n".join(
        [
            "LISTEN 0 4096 0.0.0.0:99999 0.0.0.0:*",  # not a port
            "LISTEN 0 4096 :8000 0.0.0.0:*",  # no address
            "ESTAB 0 0 10.0.0.1:22 10.0.0.2:51234",  # not a listener
            'LISTEN 0 4096 0.0.0.0:8001 0.0.0.0:* users:(("\x1b[31mred",pid=5,fd=1))',
            "garbage",
            "",
        ]
    )
    listeners = parse_ss_listeners(text)
    assert [item.port for item in listeners] == [8001]
    many = "\n".join(f"LISTEN 0 4096 0.0.0.0:{port} 0.0.0.0:*" for port in range(10000, 10200))
    ports, left_out = probed_listeners(parse_ss_listeners(many), host_is_loopback=False, skip=())
    assert len(ports) == MAX_PROBED and left_out == 200 - MAX_PROBED
