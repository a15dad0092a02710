"""Recovery commands are built from validated names only; hostile names are refused, not escaped."""

from __future__ import annotations

import shlex
import shutil
import subprocess

import pytest

from sparktui.model.commands import (
    CMDLINE_BYTES,
    DROP_CACHES,
    KILL_SCRIPT,
    KILL_TAG,
    ProcessIdentity,
    UnsafeName,
    drop_caches_commands,
    kill_workers_command,
    parse_kill_workers_command,
    posix_cksum,
    restart_command,
)
from sparktui.model.specs import ServerSpec

HOSTILE = ["x; rm -rf /", "a b", "it's", 'q"uote', "new\nline", "-rf", "$(id)", "`id`", "a|b"]


def test_restart_through_the_service_manager() -> None:
    assert restart_command(ServerSpec(port=8001, unit="vllm-qwen36.service")) == (
        "sudo -n systemctl restart vllm-qwen36.service"
    )
    assert restart_command(ServerSpec(port=8001, container="vllm-gemma4")) == "docker restart vllm-gemma4"


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_unit_and_container_names_are_refused(name: str) -> None:
    # The config refuses them too; build a spec around its validation to test this layer alone.
    unit = ServerSpec.model_construct(name="v", unit=name, container=None)
    container = ServerSpec.model_construct(name="v", unit=None, container=name)
    with pytest.raises(UnsafeName):
        restart_command(unit)
    with pytest.raises(UnsafeName):
        restart_command(container)


def test_drop_caches_then_removes_only_known_leftovers() -> None:
    assert drop_caches_commands() == (DROP_CACHES,)
    assert drop_caches_commands(["psm_8f2a1c", "sem.mp-x1y2"]) == (
        DROP_CACHES,
        "sudo -n rm -f -- /dev/shm/psm_8f2a1c /dev/shm/sem.mp-x1y2",
    )
    for name in ["../etc/passwd", "psm_a b", "random-file", "psm_*"]:
        with pytest.raises(UnsafeName):
            drop_caches_commands([name])


def test_kill_workers_is_a_constant_script_followed_by_integers_only() -> None:
    """PID, start ticks, and the cksum CRC and length of the command line, of each process: no text of the
    node's (a command line can hold anything) is ever put in the command."""
    hostile = ProcessIdentity(4243, 99, "VLLM::Worker_TP1 '; rm -rf / #$(id)`id`\nx")
    command = kill_workers_command([ProcessIdentity(4242, 123_456, "VLLM::Worker_TP0"), hostile])
    crc, length = hostile.fingerprint()
    assert command == (
        f"sh -c {shlex.quote(KILL_SCRIPT)} {KILL_TAG} 4242 123456 {posix_cksum(b'VLLM::Worker_TP0')} 16 "
        f"4243 99 {crc} {length}"
    )
    assert shlex.split(command)[4:] == [
        "4242",
        "123456",
        str(posix_cksum(b"VLLM::Worker_TP0")),
        "16",
        "4243",
        "99",
        str(crc),
        str(length),
    ]
    assert "'" not in KILL_SCRIPT and "rm -rf" not in command
    assert parse_kill_workers_command(command) == (
        (4242, 123_456, posix_cksum(b"VLLM::Worker_TP0"), 16),
        (4243, 99, crc, length),
    )
    for bad in (
        [],
        [ProcessIdentity(1, 5, "x")],
        [ProcessIdentity(0, 5, "x")],
        [ProcessIdentity(-5, 5, "x")],
        [ProcessIdentity(4242, -1, "x")],
        [ProcessIdentity(True, 5, "x")],
        [ProcessIdentity("4242", 5, "x")],  # type: ignore[arg-type]
        [ProcessIdentity(4242, "5; reboot", "x")],  # type: ignore[arg-type]
    ):
        with pytest.raises(UnsafeName):
            kill_workers_command(bad)


@pytest.mark.parametrize(
    "data", [b"", b"a", b"VLLM::Worker_TP1_EP1 120", bytes(range(256)) * 2, "VLLM::Worker é".encode()]
)
def test_the_command_line_fingerprint_is_what_posix_cksum_prints(data: bytes) -> None:
    cksum = shutil.which("cksum")
    if cksum is None:
        pytest.skip("no cksum here")
    crc, length = subprocess.run([cksum], input=data, capture_output=True, check=True).stdout.split()
    assert (posix_cksum(data), len(data)) == (int(crc), int(length))


def test_the_fingerprint_compares_what_the_sampler_keeps_of_a_command_line() -> None:
    """Its first CMDLINE_BYTES bytes (the sampler's ``%.300s``), spaces at both ends stripped."""
    from sparktui.sources.sampler import _SCRIPT

    assert f"args %s %.{CMDLINE_BYTES}s" in _SCRIPT and f"head -c {CMDLINE_BYTES}" in KILL_SCRIPT
    long = "vllm serve " + "x" * 400
    assert ProcessIdentity(7, 1, long).cmdline_bytes == long.encode()[:CMDLINE_BYTES]
    assert ProcessIdentity(7, 1, " VLLM::Worker_TP0 ").cmdline_bytes == b"VLLM::Worker_TP0"
