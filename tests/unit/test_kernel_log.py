"""The node's kernel log (issue 21): its two shapes parsed, the kernel-log rules matched against it and
only against it, the node's findings they open and how they clear. (The catalogue's load-time checks of
them are with the others, in ``test_diagnosis.test_catalogue_errors_name_the_rule_and_the_key``.)

The lines are tests/data/kernel/ (``journalctl -k -o short-iso`` and ``dmesg --time-format iso``).
"""

from __future__ import annotations

import pytest

from sparktui.model.logbuffer import KERNEL_LOG, parse_kernel_line
from tests.conftest import DATA
from tests.unit.test_diagnosis import CATALOGUE, IDLE, MTP2, Rig, healthy, ok, refused, serving_sample

KERNEL = DATA / "kernel"
JOURNAL = (KERNEL / "journalctl-k.txt").read_text().splitlines()
DMESG = (KERNEL / "dmesg-iso.txt").read_text().splitlines()
KERNEL_RULES = {"nvrm-out-of-memory", "gpu-xid", "pcie-aer-fatal", "mlx5-slot-reset", "thermal-event"}


# --- the two shapes of the kernel log -------------------------------------------------------------


def test_journal_kernel_lines_lose_the_host_and_identifier_and_keep_their_time() -> None:
    parsed = [parse_kernel_line(line) for line in JOURNAL]
    assert parsed[0] == (None, "-- Logs begin at Sat 2026-05-30 06:02:11 UTC. --")
    stamp, text = parsed[7]
    assert stamp is not None and stamp.isoformat() == "2026-05-30T08:33:09+00:00"
    assert text.startswith("NVRM: nvCheckOkFailedNoLog: Check failed: Out of memory [NV_ERR_NO_MEMORY]")
    assert all(stamp is not None and not text.startswith(("spark1", "kernel:")) for stamp, text in parsed[1:])


def test_dmesg_iso_lines_keep_their_microseconds_and_the_whole_message() -> None:
    parsed = [parse_kernel_line(line) for line in DMESG]
    assert all(stamp is not None for stamp, _ in parsed)
    stamp, text = parsed[4]
    assert stamp is not None and stamp.isoformat() == "2026-05-30T09:12:40.003318+00:00"
    assert text == "NVRM: Xid (PCI:000f:01:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
    # The first word of a dmesg message is not a journal host: "mlx5_core 0000:01:00.0 …" stays whole.
    assert parsed[2][1] == "mlx5_core 0000:01:00.0 enp1s0f0np0: Link up"


# --- the rules against the kernel log -------------------------------------------------------------


@pytest.mark.parametrize(("lines", "xid"), [(JOURNAL, "43"), (DMESG, "79")], ids=["journalctl-k", "dmesg"])
def test_every_kernel_signature_opens_a_node_finding_from_the_fixture(lines: list[str], xid: str) -> None:
    rig = Rig()
    healthy(rig)
    rig.log(KERNEL_LOG, "kernel", lines)
    rig.evaluate(3.0)
    assert rig.ids(None) & KERNEL_RULES == KERNEL_RULES
    assert rig.ids("gptoss") & KERNEL_RULES == set()
    xid_finding = rig.get("gpu-xid", None)
    assert xid_finding.title == f"The GPU driver reported Xid {xid}"
    assert any(f"Xid (PCI:000f:01:00): {xid}," in line for line in xid_finding.evidence)
    oom = rig.get("nvrm-out-of-memory", None)
    assert any("MemAvailable" in line for line in oom.evidence)  # the memory beside the driver's line


def test_kernel_lines_in_an_instance_log_and_vllm_lines_in_the_kernel_log_open_nothing_of_the_other() -> None:
    rig = Rig()
    healthy(rig)
    rig.log("gptoss", "kernel", JOURNAL)  # the same lines, but read as the instance's own log
    rig.log(KERNEL_LOG, "journal", ["2026-05-30T08:33:10+0000 spark1 vllm[4127]: torch.OutOfMemoryError: boom"])
    rig.evaluate(3.0)
    assert rig.ids() & KERNEL_RULES == set()
    assert "oom-during-load" in rig.ids("gptoss")  # NV_ERR_NO_MEMORY in vLLM's own log is the vLLM rule's
    assert "oom-during-load" not in rig.ids(None)


def test_the_kernel_log_has_its_own_cursor_and_each_line_is_scanned_once() -> None:
    rig = Rig()
    healthy(rig)
    rig.log(KERNEL_LOG, "kernel", JOURNAL[9:10])  # one Xid
    rig.evaluate(3.0)
    assert rig.engine.cursor("spark1", KERNEL_LOG) == 1
    assert rig.engine.cursor("spark1", "gptoss") == 0
    rig.evaluate(4.0)  # the same buffer again: nothing new
    assert not any("matches since" in line for line in rig.get("gpu-xid", None).evidence)
    rig.log(KERNEL_LOG, "kernel", JOURNAL[9:10])  # the line again, a new one
    rig.evaluate(5.0)
    assert "2 matches since" in "\n".join(rig.get("gpu-xid", None).evidence)


def test_a_quiet_kernel_finding_outlasts_serving_and_clears_after_quiet_s() -> None:
    rig = Rig(overrides={"thermal-event.quiet_s": 30})
    healthy(rig)
    rig.log(KERNEL_LOG, "kernel", JOURNAL[-1:])
    for t in range(3, 40):
        rig.step(float(t), ok(), MTP2[t % 30], serving_sample(41 + t))  # serving all along
        assert ("thermal-event" in rig.ids(None)) == (t < 33), t
    (cleared,) = [f for f in rig.engine.history() if f.id == "thermal-event"]
    assert (cleared.instance, cleared.opened_at, cleared.cleared_at) == (None, 3.0, 33.0)


def test_the_driver_running_out_of_memory_during_a_start_clears_once_the_instance_serves_again() -> None:
    rig = Rig()
    rig.step(0.0, refused(), sample=serving_sample())  # loading
    rig.log(KERNEL_LOG, "kernel", JOURNAL[7:9])
    rig.step(1.0, refused())
    assert "nvrm-out-of-memory" in rig.ids(None)
    rig.step(2.0, ok(), MTP2[0])  # serving again: no interval yet, nothing served to tell
    assert "nvrm-out-of-memory" in rig.ids(None)
    rig.step(3.0, ok(), MTP2[1])  # tokens generated since the last poll
    assert "nvrm-out-of-memory" not in rig.ids(None)
    (cleared,) = [f for f in rig.engine.history() if f.id == "nvrm-out-of-memory"]
    assert (cleared.cleared_at, len(cleared.lines)) == (3.0, 2)


def test_a_kernel_attempt_finding_stays_while_no_instance_serves_and_clears_after_healthy_s_of_serving() -> None:
    rig = Rig()
    rig.step(0.0, refused(), sample=serving_sample())
    rig.log(KERNEL_LOG, "kernel", JOURNAL[7:8])
    for t in range(1, 200):  # past healthy_s, still loading: the start has not got through
        rig.step(float(t), refused())
    assert "nvrm-out-of-memory" in rig.ids(None)
    for t in range(200, 200 + 121):  # up but idle (no request to tell) for healthy_s
        rig.step(float(t), ok(), IDLE)
    assert "nvrm-out-of-memory" not in rig.ids(None)


# --- the catalogue ---------------------------------------------------------------------------------


def test_every_kernel_rule_reads_the_kernel_stream_and_no_other_rule_does() -> None:
    kernel = {rule.id for rule in CATALOGUE.rules if rule.log is not None and rule.log.stream == "kernel"}
    assert kernel == KERNEL_RULES
