"""Fleet drift: what each instance runs, and mismatches between ranks of a job or hosts of a model."""

from __future__ import annotations

from sparktui.config import parse_config
from sparktui.engines import readings
from sparktui.model.drift import (
    FIELDS,
    DriftReport,
    DriftRow,
    command_words,
    drift_groups,
    drift_report,
    normalized_command,
    shown_value,
)
from sparktui.model.fleet import FleetState
from sparktui.model.host import short_args
from sparktui.model.observations import FetchKind, HostUpdate, HttpResult, NodeObservation, ServerObservation
from sparktui.model.units import NO_DATA
from tests.support.fabric import fabric_answer, nccl_lines
from tests.support.fixture_fleet import scenario_scrapes

CONFIG = """
[[nodes]]
name = "a"
host = "10.0.0.1"
[[nodes.vllm]]
name = "qwen"
port = 8001
[[nodes]]
name = "b"
host = "10.0.0.2"
[[nodes.vllm]]
name = "qwen"
port = 8001
"""


def _ok(body: str) -> HttpResult:
    return HttpResult(url="u", kind=FetchKind.OK, status=200, body=body.encode())


def _feed(state: FleetState, node: str, scrape: str, version: str) -> None:
    state.apply(
        NodeObservation(
            node=node,
            t=0.0,
            wall=0.0,
            vllm=(ServerObservation("qwen", _ok(""), _ok(scrape), _ok(f'{{"version": "{version}"}}')),),
        )
    )


def test_two_hosts_of_one_model_on_different_versions_and_draft_lengths_are_flagged() -> None:
    state = FleetState(parse_config(CONFIG, source="t.toml"), readings())
    _feed(state, "a", scenario_scrapes("mtp2-steady")[0], "0.33.0")
    _feed(state, "b", scenario_scrapes("mtp3-poor-pos2")[0], "0.30.1")
    report = drift_report(state)
    by_node = {row.node: row for row in report.rows}
    assert by_node["a"].values["version"] == "0.33.0" and by_node["b"].values["version"] == "0.30.1"
    assert by_node["a"].values["spec_tokens"] == "2" and by_node["b"].values["spec_tokens"] == "3"
    assert by_node["a"].values["block_size"] == "16"
    assert report.differs("a", "qwen", "version") and report.differs("b", "qwen", "version")
    assert not report.differs("a", "qwen", "block_size")  # the same on both


def test_same_everything_is_no_drift() -> None:
    state = FleetState(parse_config(CONFIG, source="t.toml"), readings())
    for node in ("a", "b"):
        _feed(state, node, scenario_scrapes("mtp2-steady")[0], "0.33.0")
    assert drift_report(state).mismatches == {}


def test_rank_specific_flags_do_not_count_as_drift() -> None:
    head = "vllm serve Qwen/Qwen3-235B --tensor-parallel-size 2 --port 8000 --host 0.0.0.0 --node-rank 0"
    worker = "vllm serve Qwen/Qwen3-235B --tensor-parallel-size 2 --headless --node-rank=1"
    assert (
        normalized_command(head) == normalized_command(worker) == "vllm serve Qwen/Qwen3-235B --tensor-parallel-size 2"
    )
    assert normalized_command(worker + " --kv-cache-dtype fp8") != normalized_command(head)


# --- what the drift screen shows ------------------------------------------------------------------------

BASE = "vllm serve Qwen/Qwen3-235B --tensor-parallel-size 2 --max-model-len 32768"


def _row(node: str, instance: str, job: str | None = None, **values: str) -> DriftRow:
    full: dict[str, str | None] = dict.fromkeys(FIELDS)
    full.update(values)
    return DriftRow(node, instance, job, "head", full)


ROWS = (
    _row("a", "gpt", version="0.33.0", model="gpt-oss", cache_dtype="auto", enable_prefix_caching="True",
         num_gpu_blocks="40123", spec_tokens="0", command="vllm serve gpt-oss"),
    _row("b", "gpt", version="0.30.1", model="gpt-oss", cache_dtype="fp8", enable_prefix_caching="False",
         num_gpu_blocks="39811", spec_tokens="2", command="vllm serve gpt-oss --kv-cache-dtype fp8"),
    _row("c", "qwen", "tp2", version="0.33.0", model="Qwen/Qwen3-235B", command=BASE),
    _row("d", "qwen", "tp2", version="0.33.0", command=f"{BASE} --max-num-seqs 64"),
    _row("e", "gemma", version="0.33.0", model="gemma-4", command="vllm serve gemma-4"),
)  # fmt: skip


def test_groups_put_the_differences_first_with_the_nodes_as_columns() -> None:
    groups = drift_groups(DriftReport(ROWS, {}))
    assert [(g.title, g.members) for g in groups] == [
        ("model gpt-oss", ("a", "b")),  # two differences
        ("job tp2", ("c", "d")),  # its commands differ
        ("gemma-4", ("e",)),  # alone
    ]
    model, job, alone = groups
    assert [(line.label, line.values) for line in model.differing] == [
        ("vLLM version", ("0.33.0", "0.30.1")),
        ("KV-cache dtype", ("auto", "fp8")),
    ]
    lines = {line.field: line for line in model.lines}
    assert lines["enable_prefix_caching"].values == ("yes", "no")  # not True/False
    assert lines["num_gpu_blocks"].values == ("40,123", "39,811")
    # A model's hosts may differ in draft length: shown as varying, not as drift.
    assert lines["spec_tokens"].varies and not lines["spec_tokens"].differs
    assert not model.command_differs and job.command_differs and job.differing == ()
    assert alone.alone and not alone.differing and not alone.command_differs


def test_the_detail_marks_only_the_flags_the_other_members_lack() -> None:
    job = drift_groups(DriftReport(ROWS, {}))[1]
    head, worker = job.commands
    assert head is not None and worker is not None
    assert [w.text for w in worker if w.differs] == ["--max-num-seqs 64"]
    assert not any(w.differs for w in head)
    assert command_words(BASE) == (
        "vllm",
        "serve",
        "Qwen/Qwen3-235B",
        "--tensor-parallel-size 2",
        "--max-model-len 32768",
    )
    assert command_words("vllm serve m --enforce-eager --port=8000 -O3") == (
        "vllm", "serve", "m", "--enforce-eager", "--port=8000", "-O3",
    )  # fmt: skip


def test_values_read_as_an_operator_reads_them() -> None:
    assert [shown_value(v) for v in (None, "True", "false", "12345", "16", "0.55", "auto")] == [
        NO_DATA, "yes", "no", "12,345", "16", "0.55", "auto",
    ]  # fmt: skip


def test_a_long_launch_command_reaches_the_drift_whole() -> None:
    """The host sampler cut command lines at 200 characters: two ranks differing past that (a flag
    after a speculative config) looked the same, and the rank flags at the end were not removed."""
    spec = '--speculative-config {"method":"mtp","num_speculative_tokens":2} '
    long = f"vllm serve Qwen/Qwen3-235B {spec * 5}--max-num-seqs 64 --node-rank 1"
    kept = short_args(long.replace(" ", "\0"))
    assert len(long) > 300 and kept == long
    assert normalized_command(kept).endswith("--max-num-seqs 64")
    assert short_args("x" * 10_000).endswith("…") and len(short_args("x" * 10_000)) < 10_000  # still bounded


JOB = """
[[nodes]]
name = "a"
host = "10.0.0.1"
[[nodes.vllm]]
name = "qwen"
port = 8001
role = "head"
job = "tp2"
[[nodes]]
name = "b"
host = "10.0.0.2"
[[nodes.vllm]]
name = "qwen"
role = "worker"
job = "tp2"
"""


def _nccl(state: FleetState, node: str, path: str, digest: str) -> None:
    """A fabric reading of ``node`` whose vLLM maps ``path`` (the source's sha256 line after it)."""
    state.apply_host(HostUpdate(node, 1.0, fabric=fabric_answer(nccl=nccl_lines(path=path), sha=digest, path=path)))


def test_the_ranks_of_a_job_mapping_different_nccl_libraries_are_flagged() -> None:
    state = FleetState(parse_config(JOB, source="t.toml"), readings())
    _nccl(state, "a", "/venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2", "a1" * 32)
    _nccl(state, "b", "/usr/lib/aarch64-linux-gnu/libnccl.so.2.27.7", "b2" * 32)
    report = drift_report(state)
    by_node = {row.node: row for row in report.rows}
    assert (by_node["a"].values["nccl"], by_node["b"].values["nccl"]) == ("a1" * 6, "b2" * 6)
    assert report.differs("a", "qwen", "nccl") and report.differs("b", "qwen", "nccl")
    (job,) = [g for g in drift_groups(report) if g.title == "job tp2"]
    assert [line.values for line in job.differing if line.field == "nccl"] == [("a1" * 6, "b2" * 6)]
    _nccl(state, "b", "/venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2", "a1" * 32)
    assert not drift_report(state).differs("b", "qwen", "nccl")
