"""The fabric in tests: the fabric command's answer as the script prints it (with the source's sha256
lines), tests/data/fabric's two mlx5 ``ethtool -S`` readings, a constructed /sys/class/net, and a real
process that maps a file named libnccl (so /proc/PID/maps has the kernel's line for it)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.conftest import DATA

NIC = "enp1s0f0np0"
ETHTOOL = [(DATA / "fabric" / f"ethtool-S-mlx5-{n}.txt").read_text() for n in ("0", "10s")]  # 10 s apart
LIBNCCL = "/opt/venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2"
SIZE, MTIME = 312745832, 1767225600
_HOLD = (
    "import mmap,sys; f=open(sys.argv[1],'rb'); m=mmap.mmap(f.fileno(),0,prot=mmap.PROT_READ); "
    "print(1,flush=True); sys.stdin.read()"
)


def nccl_lines(pids: tuple[int, ...] = (4127,), path: str = LIBNCCL, size: int = SIZE, mtime: int = MTIME) -> str:
    """What the script prints of the libnccl ``pids`` map: their maps lines, then the file's stat."""
    return "".join(f"/proc/{pid}/maps:{path}\n" for pid in pids) + f"stat {size} {mtime} {path}\n"


def fabric_answer(
    ethtool: str | None = None,
    *,
    state: str = "up",
    speed: str = "200000",
    nccl: str = "",
    sha: str | None = None,
    path: str = LIBNCCL,
) -> str:
    """The fabric command's answer: one NIC (none when ``ethtool`` is None), the NCCL lines, and the
    source's sha256 line of ``path`` when ``sha`` is given."""
    link = "" if ethtool is None else f"=== nic {NIC}\noperstate {state}\nspeed {speed}\n=== ethtool {NIC}\n{ethtool}"
    sums = f"sha256 {sha} {SIZE} {MTIME} {path}\n" if sha else ""
    return f"{link}=== nccl\n{nccl}=== end\n{sums}"


def fake_net(root: Path, drivers: dict[str, str]) -> Path:
    """A /sys/class/net under ``root``: each interface's device/driver links to a directory named after
    its driver, operstate up, speed 200000."""
    net = root / "net"
    for name, driver in drivers.items():
        (net / name / "device").mkdir(parents=True)
        (root / "drivers" / driver).mkdir(parents=True, exist_ok=True)
        (net / name / "device" / "driver").symlink_to(root / "drivers" / driver)
        (net / name / "operstate").write_text("up\n")
        (net / name / "speed").write_text("200000\n")
    return net


@contextmanager
def mapping(library: Path, *args: str) -> Iterator[int]:
    """A process that maps ``library`` (its command line ends with ``args``); yields its PID."""
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(library), *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "1"
        yield holder.pid
    finally:
        holder.kill()
        holder.wait()
