"""The fabric between the nodes of a multi-node job: the RDMA NIC's link and counters, and the NCCL
library each vLLM process has mapped.

One periodic command over the node's SSH connection (``fabric_command``) prints, for each network
interface whose driver is ``mlx5_core`` (the ConnectX-7 of a DGX Spark), its ``operstate`` and
negotiated ``speed`` from ``/sys/class/net`` and the counters of ``ethtool -S`` that matter here, then
the ``libnccl`` file each given vLLM PID has mapped (``/proc/PID/maps``) and each file's size and mtime. The
source adds the file's sha256 (computed once per path, size and mtime) as ``sha256`` lines. This
module parses that text (untrusted: bounded, never raises) and turns two readings into rates with the
reset-safe counter history (``model.counters``): ``/proc/net/dev`` misses RDMA traffic, the port's
``*_bytes_phy`` counters do not.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from sparktui.model.counters import Deltas
from sparktui.model.numbers import is_digits
from sparktui.model.safe_text import LABEL_LIMIT, safe_text
from sparktui.model.units import NO_DATA, fmt_bits, fmt_pct, fmt_rate

FABRIC_EVERY_S = 10.0  # like nvidia-smi: the counters move slowly enough, and ethtool costs a process
MAX_NICS = 8
MAX_NCCL = 32
MAX_LINE = 512  # characters of one line of the answer considered

# ethtool -S counters kept (mlx5 names, Documentation/networking/device_drivers/ethernet/mellanox/mlx5/
# counters.rst): the port's bytes (RDMA included), the RDMA share, and what a sick link shows.
RX_BYTES = "rx_bytes_phy"
TX_BYTES = "tx_bytes_phy"
RDMA_RX_BYTES = "rx_vport_rdma_unicast_bytes"
RDMA_TX_BYTES = "tx_vport_rdma_unicast_bytes"
ERROR_COUNTERS = (
    "rx_crc_errors_phy",
    "rx_symbol_err_phy",
    "rx_discards_phy",
    "tx_discards_phy",
    "rx_out_of_buffer",
)
PAUSE_COUNTERS = ("rx_pause_ctrl_phy", "tx_pause_ctrl_phy")
LINK_DOWN = "link_down_events_phy"
# The vport's byte counters, for a NIC (a VF) without the port's.
VPORT_RX_BYTES = "rx_bytes"
VPORT_TX_BYTES = "tx_bytes"
COUNTERS = (
    RX_BYTES,
    TX_BYTES,
    RDMA_RX_BYTES,
    RDMA_TX_BYTES,
    *ERROR_COUNTERS,
    *PAUSE_COUNTERS,
    LINK_DOWN,
    VPORT_RX_BYTES,
    VPORT_TX_BYTES,
)
_COUNTER_SET = frozenset(COUNTERS)

_SCRIPT = r"""et=%(ethtool)d; net=%(net)s; ifs=%(ifs)s
if [ -z "$ifs" ]; then
  for d in "$net"/*; do
    [ -e "$d/device/driver" ] || continue
    case $(readlink "$d/device/driver") in */mlx5_core) ifs="$ifs ${d##*/}" ;; esac
  done
fi
for i in $ifs; do
  s=; v=
  { read -r s < "$net/$i/operstate"; } 2>/dev/null
  { read -r v < "$net/$i/speed"; } 2>/dev/null
  printf '=== nic %%s\noperstate %%s\nspeed %%s\n' "$i" "$s" "$v"
  [ "$et" = 1 ] || continue
  if command -v ethtool >/dev/null 2>&1; then
    printf '=== ethtool %%s\n' "$i"
    ethtool -S "$i" 2>&1 | grep -m 64 -E -e '^ *(%(counters)s):' -e '^[^ ]'
  else
    echo '=== no-ethtool'
  fi
done
echo '=== nccl'
m=
for p; do m="$m /proc/$p/maps"; done
if [ -n "$m" ]; then
  out=$(grep -H -m 1 -o -E '/.*/libnccl[^/]*$' $m 2>/dev/null)
  printf '%%s\n' "$out"
  set --
  while IFS= read -r l; do [ -n "$l" ] && set -- "$@" "${l#*:}"; done <<MAPPED
$out
MAPPED
  [ $# -gt 0 ] && stat -L -c 'stat %%s %%Y %%n' -- "$@" 2>/dev/null
fi
echo '=== end'"""
FABRIC_TAG = "sparktui-fabric"  # the script's $0: names it in ps, and the demo recognises it by it


NET_DIR = "/sys/class/net"


def fabric_command(
    pids: Sequence[int] = (), *, ethtool: bool = True, net_dir: str = NET_DIR, interfaces: Sequence[str] = ()
) -> str:
    """The command that reads the fabric of one node; ``pids`` are its vLLM processes (for NCCL),
    ``ethtool`` False once the node has said it has none (only ``/sys`` is read then); ``interfaces``
    the mlx5 ones an earlier answer named (none: it looks for them, a ``readlink`` per physical NIC);
    ``net_dir`` is where the interfaces are (another directory in tests).

    Its processes per run: the shell, ``ethtool`` and ``grep`` per interface, and with PIDs one ``grep``
    over their maps (in a subshell) and one ``stat``: the cost is in docs/performance.md."""
    names = " ".join(name for name in interfaces[:MAX_NICS] if _IFNAME.fullmatch(name))
    script = _SCRIPT % {
        "ethtool": int(ethtool),
        "net": shlex.quote(net_dir),
        "ifs": shlex.quote(names),
        "counters": "|".join(COUNTERS),
    }
    args = " ".join(str(int(pid)) for pid in pids[:MAX_NCCL])
    return f"exec sh -c {shlex.quote(script)} {FABRIC_TAG}" + (f" {args}" if args else "")


def checksum_command(path: str) -> str:
    return f"sha256sum -- {shlex.quote(path)}"


@dataclass(frozen=True, slots=True)
class NicSample:
    """One mlx5 interface as read: ``speed_mbps`` None when unknown (``-1`` or unreadable while down)."""

    name: str
    operstate: str | None
    speed_mbps: float | None
    counters: Mapping[str, float] = field(default_factory=dict)
    problem: str | None = None  # why ethtool -S gave no counters (its own words)


@dataclass(frozen=True, slots=True)
class NcclLibrary:
    """The libnccl file one vLLM process has mapped."""

    pid: int
    path: str
    size: int | None
    mtime: int | None
    sha256: str | None = None  # None until computed

    @property
    def key(self) -> tuple[str, int | None, int | None]:
        return (self.path, self.size, self.mtime)


@dataclass(frozen=True, slots=True)
class FabricSample:
    nics: tuple[NicSample, ...] = ()
    nccl: tuple[NcclLibrary, ...] = ()
    no_ethtool: bool = False
    complete: bool = False  # the answer reached its end marker
    problem: str | None = None  # one line for the operator when the answer could not be read


_HEADER = re.compile(r"^=== (nic|ethtool) (\S{1,64})$")
_COUNTER = re.compile(r"^\s+([A-Za-z0-9_]{1,64}):\s*(\d{1,20})\s*$")  # counters are unsigned 64-bit
_IFNAME = re.compile(r"[A-Za-z0-9_.:@-]{1,15}")  # what the kernel allows in an interface's name, and no more
_MAPPED = re.compile(r"^/proc/(\d{1,10})/maps:(/.+)$")
_STAT = re.compile(r"^stat (\d{1,20}) (\d{1,20}) (/.+)$")
_SHA = re.compile(r"^sha256 ([0-9a-f]{64}) (\d{1,20}|-) (\d{1,20}|-) (/.+)$")


def _int(text: str) -> int | None:
    return int(text) if is_digits(text) else None


def parse_fabric(text: str) -> FabricSample:
    """The fabric command's answer (with the source's ``sha256`` lines). Never raises: what it cannot
    read is left out, and an answer with nothing readable says so in ``problem``."""
    answer = _FabricAnswer()
    for raw in text.splitlines():
        answer.read(raw[:MAX_LINE].rstrip("\r"))
    return answer.sample()


@dataclass(slots=True)
class _FabricAnswer:
    """What ``parse_fabric`` has read of one answer so far, a line at a time."""

    nics: dict[str, NicSample] = field(default_factory=dict)  # in the order the answer named them
    current: str | None = None  # the interface the lines under the last header are of
    in_ethtool: bool = False  # under an ``=== ethtool`` header: ``ethtool -S`` output
    counters: dict[str, dict[str, float]] = field(default_factory=dict)
    others: dict[str, str] = field(default_factory=dict)  # what ethtool said of an interface instead of counters
    asked: set[str] = field(default_factory=set)  # the interfaces ethtool was asked for
    mappings: list[tuple[int, str]] = field(default_factory=list)
    stats: dict[str, tuple[int, int]] = field(default_factory=dict)
    sums: dict[tuple[str, int | None, int | None], str] = field(default_factory=dict)
    no_ethtool: bool = False
    complete: bool = False
    first_unread: str | None = None

    def read(self, line: str) -> None:
        if self._section_marker(line) or self._ethtool_line(line) or self._link_line(line):
            return
        if self._nccl_line(line):
            return
        if line.strip() and self.first_unread is None:
            self.first_unread = safe_text(line.strip(), LABEL_LIMIT)

    def _section_marker(self, line: str) -> bool:
        """An ``=== nic``/``=== ethtool`` header starts an interface's lines; any other ``===`` line ends them."""
        header = _HEADER.match(line)
        if header is not None:
            kind, raw_name = header.groups()
            self._start_interface(kind, safe_text(raw_name, 32))  # shown on screen: a node's word
            return True
        if line == "=== no-ethtool":
            self.no_ethtool, self.in_ethtool = True, False
            return True
        if line.startswith("=== "):
            self.current, self.in_ethtool = None, False
            self.complete = self.complete or line == "=== end"
            return True
        return False

    def _start_interface(self, kind: str, name: str) -> None:
        if not name:  # nothing but control characters
            self.current, self.in_ethtool = None, False
            return
        self.in_ethtool = kind == "ethtool"
        if self.in_ethtool:
            self.asked.add(name)
        if name not in self.nics:
            if len(self.nics) >= MAX_NICS:
                self.current = None
                return
            self.nics[name] = NicSample(name, None, None)
        self.current = name

    def _ethtool_line(self, line: str) -> bool:
        """A line of ``ethtool -S``: a known counter, or what it said instead of counters."""
        current = self.current
        if current is None or not self.in_ethtool:
            return False
        found = _COUNTER.match(line)
        if found is not None:
            name, value = found.groups()
            if name in _COUNTER_SET:
                self.counters.setdefault(current, {})[name] = float(value)
        elif line.strip() and not line.startswith("NIC statistics"):
            self.others.setdefault(current, safe_text(line.strip(), LABEL_LIMIT))
        return True

    def _link_line(self, line: str) -> bool:
        """The interface's ``operstate`` or ``speed`` from /sys."""
        current = self.current
        if current is None or not line.startswith(("operstate ", "speed ")):
            return False
        word, _, value = line.partition(" ")
        nic = self.nics[current]
        if word == "operstate":
            state = safe_text(value.strip(), 32) or None
            self.nics[current] = NicSample(nic.name, state, nic.speed_mbps)
        else:
            speed = _int(value.strip())
            self.nics[current] = NicSample(nic.name, nic.operstate, float(speed) if speed else None)
        return True

    def _nccl_line(self, line: str) -> bool:
        """A libnccl mapping of a vLLM process, its file's size and mtime, or its checksum."""
        mapped = _MAPPED.match(line)
        if mapped is not None and len(self.mappings) < MAX_NCCL:
            self.mappings.append((int(mapped.group(1)), safe_text(mapped.group(2), LABEL_LIMIT)))
            return True
        stat = _STAT.match(line)
        if stat is not None:
            size, mtime, path = stat.groups()
            self.stats[safe_text(path, LABEL_LIMIT)] = (int(size), int(mtime))
            return True
        sha = _SHA.match(line)
        if sha is not None:
            digest, size, mtime, path = sha.groups()
            self.sums[(safe_text(path, LABEL_LIMIT), _int(size), _int(mtime))] = digest
            return True
        return False

    def sample(self) -> FabricSample:
        out: list[NicSample] = []
        for name, nic in self.nics.items():
            kept = self.counters.get(name, {})
            asked = name in self.asked
            problem = None if kept or not asked else self.others.get(name, "ethtool -S: none of its counters known")
            out.append(NicSample(nic.name, nic.operstate, nic.speed_mbps, kept, problem))
        libs = []
        for pid, path in self.mappings:
            size, mtime = self.stats.get(path, (None, None))
            libs.append(NcclLibrary(pid, path, size, mtime, self.sums.get((path, size, mtime))))
        problem = None
        if not out and not libs and not self.complete:
            first = self.first_unread
            problem = f"fabric: unreadable answer ({first})" if first else "fabric: empty answer"
        return FabricSample(tuple(out), tuple(libs), self.no_ethtool, self.complete, problem)


@dataclass(frozen=True, slots=True)
class LinkRates:
    """One NIC's traffic and errors over an interval, per second. ``rx_bps``/``tx_bps`` are bits per
    second on the port (RDMA included); None when its counters were not read at both ends."""

    seconds: float
    rx_bps: float | None
    tx_bps: float | None
    rdma_rx_bps: float | None
    rdma_tx_bps: float | None
    errors_per_s: Mapping[str, float]  # ERROR_COUNTERS that rose, per second
    pauses_per_s: float | None
    link_down_events: float | None  # how many in the interval
    reset: bool


def _bits(deltas: Deltas, key: str) -> float | None:
    value = deltas.get(key)
    return None if value is None or deltas.seconds <= 0 else value * 8 / deltas.seconds


def link_rates(deltas: Deltas) -> LinkRates:
    """Rates of one NIC from the increases of its counters (``CounterHistory`` of its readings)."""
    seconds = deltas.seconds
    rx = _bits(deltas, RX_BYTES)
    tx = _bits(deltas, TX_BYTES)
    if rx is None and tx is None:
        rx, tx = _bits(deltas, VPORT_RX_BYTES), _bits(deltas, VPORT_TX_BYTES)
    errors = {
        name: value / seconds
        for name in ERROR_COUNTERS
        if (value := deltas.get(name)) is not None and value > 0 and seconds > 0
    }
    pauses = [v for name in PAUSE_COUNTERS if (v := deltas.get(name)) is not None]
    return LinkRates(
        seconds,
        rx,
        tx,
        _bits(deltas, RDMA_RX_BYTES),
        _bits(deltas, RDMA_TX_BYTES),
        errors,
        sum(pauses) / seconds if pauses and seconds > 0 else None,
        deltas.get(LINK_DOWN),
        deltas.reset,
    )


@dataclass(frozen=True, slots=True)
class LinkView:
    """One RDMA NIC as shown: its link and its last interval's rates (None: not known yet)."""

    nic: str
    state: str | None
    speed_bps: float | None
    rates: LinkRates | None
    problem: str | None = None

    @property
    def up(self) -> bool:
        return self.state == "up"

    @property
    def busiest_bps(self) -> float | None:
        """The larger of the two directions (a link carries each at up to its speed)."""
        rates = self.rates
        if rates is None:
            return None
        known = [v for v in (rates.rx_bps, rates.tx_bps) if v is not None]
        return max(known) if known else None

    @property
    def share(self) -> float | None:
        """``busiest_bps`` as a share of the negotiated speed."""
        busiest = self.busiest_bps
        if busiest is None or not self.speed_bps:
            return None
        return busiest / self.speed_bps

    @property
    def errors_per_s(self) -> float | None:
        return None if self.rates is None else sum(self.rates.errors_per_s.values())


@dataclass(frozen=True, slots=True)
class FabricView:
    links: tuple[LinkView, ...]
    nccl: tuple[NcclLibrary, ...]
    age_s: float | None
    no_ethtool: bool = False
    problem: str | None = None

    @property
    def link(self) -> LinkView | None:
        """The link that carries the job: the busiest one that is up, else the first."""
        up = [link for link in self.links if link.up]
        if not up:
            return self.links[0] if self.links else None
        return max(up, key=lambda link: link.busiest_bps or 0.0)

    @property
    def nccl_checksums(self) -> tuple[str, ...]:
        """The distinct checksums of the NCCL libraries mapped, sorted (() when none is known)."""
        return tuple(sorted({lib.sha256 for lib in self.nccl if lib.sha256}))


@dataclass(frozen=True, slots=True)
class RankView:
    """One rank of a multi-node job, side by side with the others: its GPU and its link."""

    node: str
    instance: str
    role: str
    gpu_utilization: float | None
    gpu_power_w: float | None
    link_bps: float | None  # the busier direction of its busiest RDMA link
    link_share: float | None  # of the link's negotiated speed
    nccl: tuple[str, ...] = ()  # sha256 of the NCCL libraries its vLLM processes mapped


@dataclass(frozen=True, slots=True)
class JobView:
    """A multi-node job: its head's tokens over the last scrape interval and each rank."""

    name: str
    tokens_per_s: float | None  # None: the head's last interval is not known
    running: float | None
    ranks: tuple[RankView, ...]


def link_lines(link: LinkView) -> list[str]:
    """One link as shown: its state and speed, then its rates (``rx 13.0 Gb/s  tx 12.8 Gb/s  6.5 %``),
    then what it drops and pauses when it does."""
    lines = [f"link {link.nic}  {link.state or NO_DATA}  {fmt_bits(link.speed_bps)}"]
    rates = link.rates
    if rates is not None:
        share = link.share
        shown = NO_DATA if share is None else f"{share * 100:.1f} % of the link"
        lines.append(f"rx {fmt_bits(rates.rx_bps)}  tx {fmt_bits(rates.tx_bps)}  {shown}")
        trouble = []
        if link.errors_per_s:
            trouble.append(f"drops {fmt_rate(link.errors_per_s)}")
        if rates.pauses_per_s:
            trouble.append(f"pauses {fmt_rate(rates.pauses_per_s)}")
        if rates.link_down_events:
            trouble.append(f"link down {rates.link_down_events:.0f}x")
        if trouble:
            lines.append("  ".join(trouble))
    elif link.problem:
        lines.append(link.problem)
    return lines


RANK_HEADER = f"{'rank':<14}{'util':>5}{'power':>7}  link"


def rank_line(rank: RankView) -> str:
    """``spark4 worker   97%   20 W  593 Mb/s 0.3 %``: one rank beside the others (``RANK_HEADER``)."""
    power = NO_DATA if rank.gpu_power_w is None else f"{rank.gpu_power_w:.0f} W"
    share = "" if rank.link_share is None else f" {rank.link_share * 100:.1f} %"
    who = f"{rank.node} {rank.role}"
    return f"{who:<14}{fmt_pct(rank.gpu_utilization, 0):>5}{power:>7}  {fmt_bits(rank.link_bps)}{share}"


NCCL_SHOWN = 12  # hex digits of a checksum shown: enough to tell two builds apart


def short_sums(sums: Sequence[str]) -> str:
    """Checksums as shown: their first ``NCCL_SHOWN`` hex digits, comma-separated."""
    return ", ".join(digest[:NCCL_SHOWN] for digest in sums)


def fabric_lines(fabric: FabricView | None, jobs: Sequence[JobView]) -> list[str]:
    """The node's links, its NCCL and each of its jobs' ranks side by side, as the screens show them."""
    lines = []
    if fabric is not None:
        for link in fabric.links:
            lines += link_lines(link)
        if fabric.no_ethtool:
            lines.append("no ethtool on the node: link state and speed only")
        sums = fabric.nccl_checksums
        if sums:
            lines.append(f"NCCL sha256 {short_sums(sums)}")
        if fabric.problem:
            lines.append(fabric.problem)
    for job in jobs:
        lines += job_lines(job)
    return lines


def job_lines(job: JobView) -> list[str]:
    """A multi-node job's head's tokens, then its ranks side by side under ``RANK_HEADER``."""
    tokens = NO_DATA if job.tokens_per_s is None else f"{job.tokens_per_s:,.0f} tok/s"
    return [f"job {job.name}  {tokens}", RANK_HEADER, *(rank_line(rank) for rank in job.ranks)]
