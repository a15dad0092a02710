"""The exact commands sparktui sends to a node for recovery, built from validated names.

One place for them: the actions run them over SSH, the demo fleet's SSH server recognises them, and
the confirmation dialog shows them verbatim. Every name is checked against a safe pattern here as
well as in the config (defence in depth), and quoted with ``shlex.quote``; nothing is interpolated
into a shell string unchecked.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from sparktui.model.numbers import is_digits
from sparktui.model.specs import ServerSpec

UNIT_RE = re.compile(r"[A-Za-z0-9@._:-]+\Z")
CONTAINER_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*\Z")
SHM_NAME_RE = re.compile(
    r"(psm_[A-Za-z0-9_]+|sem\.mp-[A-Za-z0-9_-]+|sem\.loky-[A-Za-z0-9_-]+|"
    r"nccl-[A-Za-z0-9_.-]+|vllm_offload_[A-Za-z0-9_.-]+)\Z"
)

DROP_CACHES = "sudo -n sh -c 'sync; echo 3 > /proc/sys/vm/drop_caches'"


class UnsafeName(ValueError):
    """A name that could change the meaning of a command; it is refused, never escaped."""


def _checked(pattern: re.Pattern[str], value: str, what: str) -> str:
    if value.startswith("-") or not pattern.match(value):
        raise UnsafeName(f"refusing {what} {value!r}: not a plain {what} name")
    return value


def restart_command(vllm: ServerSpec) -> str:
    """Restart one vLLM instance through its service manager."""
    if vllm.unit is not None:
        return f"sudo -n systemctl restart {shlex.quote(_checked(UNIT_RE, vllm.unit, 'unit'))}"
    if vllm.container is not None:
        return f"docker restart {shlex.quote(_checked(CONTAINER_RE, vllm.container, 'container'))}"
    raise UnsafeName(f"{vllm.name} has neither a systemd unit nor a container to restart")


def remove_shm_command(names: Sequence[str]) -> str | None:
    """Remove /dev/shm leftovers by name (only the known leftover kinds); None when there are none."""
    if not names:
        return None
    paths = " ".join(shlex.quote(f"/dev/shm/{_checked(SHM_NAME_RE, n, 'shm entry')}") for n in names)
    return f"sudo -n rm -f -- {paths}"


def drop_caches_commands(shm_leftovers: Sequence[str] = ()) -> tuple[str, ...]:
    """sync + drop the page cache, then remove /dev/shm leftovers no process holds."""
    remove = remove_shm_command(shm_leftovers)
    return (DROP_CACHES, remove) if remove else (DROP_CACHES,)


# --- kill-workers: each process checked on the node, in the command that kills it ----------------------

KILL_TAG = "sparktui-kill"  # $0 of the kill script: names it in `ps` and for the demo's SSH server
# The command line is compared on its first CMDLINE_BYTES bytes, NULs as spaces, spaces at both ends
# stripped: what the host sampler keeps of it (``args <pid> %.300s``, sparktui.sources.sampler) and
# ``model.host.short_args`` strips.
CMDLINE_BYTES = 300
NOT_KILLED = "PID {pid} exited or was replaced since the dialog opened; not killed"
KILLED = "PID {pid} killed"
NOT_KILLED_RE = re.compile(r"^PID (\d+) exited or was replaced since the dialog opened; not killed$", re.M)
KILLED_RE = re.compile(r"^PID (\d+) killed$", re.M)

# For each "PID START_TICKS CKSUM LENGTH" of its arguments: /proc/PID/stat's field 22 (the start time in
# clock ticks since boot: a PID reused by another process has another) and the POSIX cksum of the
# command line as above (a process that exec'd something else has another) must both still match; only
# then is the PID passed to `sudo -n kill -9 --`, which the sudoers rule of docs/actions.md allows. The
# check reads /proc as the SSH user; between it and the kill pass milliseconds, not the minutes a
# confirmation can stay open. Constant text: only the integers after it change.
KILL_SCRIPT = (
    "t22() { t=${20-}; }; k=; "
    "while [ $# -ge 4 ]; do p=$1 w=$2 c=$3 n=$4; shift 4; s=; a=; "
    '{ read -r s < "/proc/$p/stat"; '
    f'a=$(tr "\\000" " " < "/proc/$p/cmdline" | head -c {CMDLINE_BYTES}); }} 2>/dev/null; '
    't=; set -f; t22 ${s##*")"}; set +f; a=${a#"${a%%[! ]*}"}; a=${a%"${a##*[! ]}"}; '
    'if [ -n "$s" ] && [ "$t" = "$w" ] && [ "$(printf %s "$a" | cksum)" = "$c $n" ]; then k="$k $p"; '
    'else echo "' + NOT_KILLED.format(pid="$p") + '"; fi; done; '
    '[ -n "$k" ] || exit 0; sudo -n kill -9 -- $k || exit; '
    'for p in $k; do echo "' + KILLED.format(pid="$p") + '"; done'
)


@dataclass(frozen=True, slots=True)
class ProcessIdentity:
    """A process as the plan saw it: its PID, /proc/PID/stat's field 22 (start time in clock ticks since
    boot) and its command line (as the host sampler read it)."""

    pid: int
    start_ticks: int
    args: str

    @property
    def cmdline_bytes(self) -> bytes:
        """What the kill script compares: the first CMDLINE_BYTES bytes, spaces at both ends stripped."""
        return self.args.encode("utf-8", errors="surrogateescape")[:CMDLINE_BYTES].strip(b" ")

    def fingerprint(self) -> tuple[int, int]:
        """(POSIX ``cksum`` CRC, length) of ``cmdline_bytes``, as ``printf %s "$a" | cksum`` prints them."""
        data = self.cmdline_bytes
        return posix_cksum(data), len(data)

    def record(self) -> dict[str, object]:
        """For the audit log."""
        return {"pid": self.pid, "start_ticks": self.start_ticks, "args": self.args}


def _crc_table() -> tuple[int, ...]:
    table = []
    for byte in range(256):
        crc = byte << 24
        for _ in range(8):
            crc = ((crc << 1) ^ 0x04C11DB7) if crc & 0x80000000 else (crc << 1)
        table.append(crc & 0xFFFFFFFF)
    return tuple(table)


_CRC_TABLE = _crc_table()


def posix_cksum(data: bytes) -> int:
    """The CRC that POSIX ``cksum`` prints: CRC-32 (polynomial 0x04C11DB7, not reflected) of the data
    then of its length (least significant byte first, no trailing zeros), inverted."""
    crc = 0
    for byte in data:
        crc = ((crc << 8) & 0xFFFFFFFF) ^ _CRC_TABLE[(crc >> 24) ^ byte]
    length = len(data)
    while length:
        crc = ((crc << 8) & 0xFFFFFFFF) ^ _CRC_TABLE[(crc >> 24) ^ (length & 0xFF)]
        length >>= 8
    return ~crc & 0xFFFFFFFF


def kill_workers_command(processes: Sequence[ProcessIdentity]) -> str:
    """SIGKILL stale worker processes, each only if it is still the process the plan saw (same PID, start
    time and command line), checked on the node in this same command. The command is the constant
    ``KILL_SCRIPT`` followed by integers only: PID, start ticks, cksum CRC and length of each."""
    numbers: list[int] = []
    for process in processes:
        pid, ticks = process.pid, process.start_ticks
        if not _plain_int(pid) or pid <= 1 or not _plain_int(ticks) or ticks < 0:
            raise UnsafeName(f"refusing to kill PID {pid!r} (start time {ticks!r}): not a plain process")
        numbers += [pid, ticks, *process.fingerprint()]
    if not numbers:
        raise UnsafeName("refusing to kill: no process given")
    return f"sh -c {shlex.quote(KILL_SCRIPT)} {KILL_TAG} " + " ".join(str(n) for n in numbers)


def _plain_int(value: object) -> bool:
    return type(value) is int  # not bool, not a str of digits


def parse_kill_workers_command(text: str) -> tuple[tuple[int, int, int, int], ...] | None:
    """(PID, start ticks, CRC, length) of each process a ``kill_workers_command`` names; None when the text
    is not one (the demo's SSH server answers it from the simulation)."""
    try:
        words = shlex.split(text)
    except ValueError:
        return None
    if words[:4] != ["sh", "-c", KILL_SCRIPT, KILL_TAG]:
        return None
    rest = words[4:]
    if not rest or len(rest) % 4 or not all(is_digits(w) for w in rest):
        return None
    numbers = [int(w) for w in rest]
    return tuple((numbers[i], numbers[i + 1], numbers[i + 2], numbers[i + 3]) for i in range(0, len(numbers), 4))
