"""The fabric model: the fabric command's answer parsed (mlx5 ``ethtool -S`` in tests/data/fabric, see
its README), its counters turned into link rates across a reset, hostile answers, and the jobs' ranks
side by side in the fleet view."""

from __future__ import annotations

import pytest

from sparktui.engines import readings
from sparktui.model.counters import CounterHistory
from sparktui.model.fabric import (
    COUNTERS,
    MAX_NICS,
    RANK_HEADER,
    FabricView,
    JobView,
    LinkView,
    RankView,
    fabric_command,
    fabric_lines,
    link_rates,
    parse_fabric,
)
from sparktui.model.fleet import FleetState
from sparktui.model.observations import HostUpdate
from sparktui.model.specs import FleetSpec, NodeSpec, ServerSpec
from sparktui.model.units import fmt_bits
from sparktui.record.codec import host_update_from_json, host_update_to_json
from tests.support.fabric import ETHTOOL, NIC, fabric_answer, nccl_lines

BEFORE, AFTER = ETHTOOL
SHA = "3f" * 32
answer = fabric_answer


def counter(text: str, name: str) -> int:
    return next(int(line.split(":")[1]) for line in text.splitlines() if line.strip().startswith(f"{name}:"))


def test_the_answer_gives_the_link_and_the_counters_kept() -> None:
    sample = parse_fabric(answer(BEFORE, nccl=nccl_lines((4127, 4188)), sha=SHA))
    (nic,) = sample.nics
    assert (nic.name, nic.operstate, nic.speed_mbps, nic.problem) == (NIC, "up", 200000.0, None)
    assert set(nic.counters) <= set(COUNTERS)
    assert nic.counters["rx_bytes_phy"] == counter(BEFORE, "rx_bytes_phy")
    assert nic.counters["link_down_events_phy"] == counter(BEFORE, "link_down_events_phy")
    assert "rx_prio0_bytes" not in nic.counters and "ch0_events" not in nic.counters
    assert [(lib.pid, lib.size, lib.mtime, lib.sha256) for lib in sample.nccl] == [
        (4127, 312745832, 1767225600, SHA),
        (4188, 312745832, 1767225600, SHA),
    ]
    assert sample.complete and sample.problem is None


def test_rates_from_two_readings_in_bits_per_second_of_the_port_and_of_rdma() -> None:
    history = CounterHistory()
    history.add(100.0, parse_fabric(answer(BEFORE)).nics[0].counters)
    history.add(110.0, parse_fabric(answer(AFTER)).nics[0].counters)
    deltas = history.last_interval()
    assert deltas is not None
    rates = link_rates(deltas)
    for key, name in (
        ("rx_bps", "rx_bytes_phy"),
        ("tx_bps", "tx_bytes_phy"),
        ("rdma_rx_bps", "rx_vport_rdma_unicast_bytes"),
    ):
        expected = (counter(AFTER, name) - counter(BEFORE, name)) * 8 / 10.0
        assert getattr(rates, key) == pytest.approx(expected)
    assert fmt_bits(rates.rx_bps) == "13.0 Gb/s"
    assert rates.errors_per_s == pytest.approx(
        {
            name: (counter(AFTER, name) - counter(BEFORE, name)) / 10.0
            for name in ("rx_symbol_err_phy", "rx_discards_phy", "rx_out_of_buffer")
        }
    )
    assert rates.pauses_per_s == pytest.approx(1840.0) and rates.link_down_events == 0


def test_a_counter_reset_is_not_a_negative_rate() -> None:
    """A driver reload (or the NIC's reset) starts its counters again from 0."""
    history = CounterHistory()
    history.add(100.0, parse_fabric(answer(AFTER)).nics[0].counters)
    history.add(110.0, dict.fromkeys(COUNTERS, 1000.0))
    deltas = history.last_interval()
    assert deltas is not None
    rates = link_rates(deltas)
    assert deltas.reset and rates.rx_bps == pytest.approx(1000 * 8 / 10.0)


def test_an_interface_without_the_known_counters_says_so() -> None:
    (nic,) = parse_fabric(answer("NIC statistics:\n     vendor_counter: 5\n")).nics
    assert nic.counters == {} and nic.problem == "ethtool -S: none of its counters known"
    (quiet,) = parse_fabric(f"=== nic {NIC}\noperstate up\nspeed 200000\n=== no-ethtool\n=== end\n").nics
    assert quiet.problem is None  # no ethtool: the link's state and speed alone, not a problem of the NIC


def test_a_link_down_has_no_speed_and_ethtools_complaint_is_the_reason() -> None:
    sample = parse_fabric(answer("no stats available\n", state="down", speed=""))
    (nic,) = sample.nics
    assert (nic.operstate, nic.speed_mbps, nic.counters) == ("down", None, {})
    assert nic.problem == "no stats available"


@pytest.mark.parametrize(
    "text",
    [
        "\x1b]0;pwned\x07" * 5000,
        "=== nic " + "x" * 10_000 + "\n",
        "".join(f"=== nic eth{i}\noperstate up\nspeed 1\n" for i in range(1000)),
        answer("     rx_bytes_phy: 99999999999999999999999999999\n     rx_bytes_phy: -5\n"),
        "=== ethtool\n" + "     rx_bytes_phy: 1\n" * 100_000,
        "/proc/1/maps:relative/libnccl.so\n/proc/x/maps:/a\nstat - 1 /x\nsha256 zz 1 2 /x\n",
        "\0\0\0",
        "=== nic \x1b]0;pwned\x07\noperstate \x1b[2Jup\n",
    ],
)
def test_a_hostile_answer_is_bounded_and_never_raises(text: str) -> None:
    sample = parse_fabric(text)
    assert len(sample.nics) <= MAX_NICS
    assert all(value >= 0 for nic in sample.nics for value in nic.counters.values())
    assert not any("\x1b" in f"{nic.name}{nic.operstate}{nic.problem}" for nic in sample.nics)
    if not sample.nics and not sample.complete:
        assert sample.problem is not None and "\x1b" not in sample.problem and len(sample.problem) < 300


def test_the_fleet_shows_a_jobs_ranks_side_by_side_with_their_links() -> None:
    fleet = FleetSpec(
        nodes=[
            NodeSpec(
                name="a",
                host="127.0.0.1",
                vllm=[ServerSpec(name="m", url="http://127.0.0.1:1", role="head", job="tp2")],
            ),
            NodeSpec(name="b", host="127.0.0.1", vllm=[ServerSpec(name="m", role="worker", job="tp2")]),
        ]
    )
    state = FleetState(fleet, readings())
    for t, text in ((100.0, BEFORE), (110.0, AFTER)):
        state.apply_host(HostUpdate("b", t, fabric=answer(text)))
    views = {v.name: v for v in state.view(111.0)}
    (job,) = views["a"].jobs
    assert views["b"].jobs == (job,)
    assert [(r.node, r.role) for r in job.ranks] == [("a", "head"), ("b", "worker")]
    assert job.ranks[0].link_bps is None
    rate = (counter(AFTER, "rx_bytes_phy") - counter(BEFORE, "rx_bytes_phy")) * 8 / 10.0
    assert job.ranks[1].link_bps == pytest.approx(rate)
    assert job.ranks[1].link_share == pytest.approx(rate / 200e9)
    assert job.tokens_per_s is None  # the head never answered
    fabric = views["b"].fabric
    assert fabric is not None and fabric.link is not None and fabric.link.share == pytest.approx(rate / 200e9)


def test_a_recording_keeps_the_fabric_text_of_an_update() -> None:
    update = HostUpdate("spark3", 12.5, fabric=answer(BEFORE))
    assert host_update_from_json("spark3", 12.5, host_update_to_json(update)) == update
    assert "fabric" not in host_update_to_json(HostUpdate("spark3", 1.0, problem="ssh: refused"))


def test_the_lines_the_screens_show_for_a_degraded_link_and_the_ranks() -> None:
    history = CounterHistory()
    for t, text in ((100.0, BEFORE), (110.0, AFTER)):
        history.add(t, parse_fabric(answer(text)).nics[0].counters)
    deltas = history.last_interval()
    assert deltas is not None
    link = LinkView(NIC, "up", 200e9, link_rates(deltas))
    fabric = FabricView(
        (link,),
        parse_fabric(
            answer(BEFORE, nccl="/proc/7/maps:/x/libnccl.so.2\nstat 1 2 /x/libnccl.so.2\n")
            + f"sha256 {SHA} 1 2 /x/libnccl.so.2\n"
        ).nccl,
        1.0,
    )
    ranks = (
        RankView("spark3", "qwen235", "head", 0.49, 46.0, None, None),
        RankView("spark4", "qwen235", "worker", 0.97, 20.4, link.busiest_bps, link.share),
    )
    lines = fabric_lines(fabric, [JobView("qwen235-tp2", 0.0, 3.0, ranks)])
    # 16,250,006,120 bytes in 10 s: 13.0 Gb/s of 200; drops 143 + 221 + 0.3 per second; pauses 1,840/s
    assert lines[:3] == [
        f"link {NIC}  up  200 Gb/s",
        "rx 13.0 Gb/s  tx 12.8 Gb/s  6.5 % of the link",
        "drops 364/s  pauses 1,840/s",
    ]
    assert lines[3] == f"NCCL sha256 {SHA[:12]}"
    assert lines[4:] == [
        "job qwen235-tp2  0 tok/s",
        RANK_HEADER,
        "spark3 head     49%   46 W  –",
        "spark4 worker   97%   20 W  13.0 Gb/s 6.5 %",
    ]
    assert fabric_lines(None, []) == []


def test_an_interface_name_from_the_node_reaches_the_next_command_only_when_it_is_one() -> None:
    """The names the first answer gives are named in the next commands: a hostile one is left out."""
    sample = parse_fabric("=== nic $(reboot)\noperstate up\n=== nic enp1s0f0np0\noperstate up\n=== end\n")
    command = fabric_command(interfaces=[nic.name for nic in sample.nics])
    assert "reboot" not in command and "ifs=enp1s0f0np0\n" in command
