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

from sparktui.model.specs import VllmSpec

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


def restart_command(vllm: VllmSpec) -> str:
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


def kill_workers_command(pids: Sequence[int]) -> str:
    """SIGKILL stale worker processes by PID (PIDs come from the host sampler, as integers)."""
    if not pids or any(not isinstance(p, int) or p <= 1 for p in pids):
        raise UnsafeName(f"refusing to kill PIDs {list(pids)!r}")
    return "sudo -n kill -9 -- " + " ".join(str(p) for p in pids)
