"""An engine's own failure catalogue: merged with the main one, its rules the engine's because of where
the file is, and judged only on that engine's instances (a llama.cpp line in a vLLM instance's log opens
nothing; in a llama.cpp instance's it opens the rule with its evidence). vLLM's rules are in its own file
too: the main file holds only the rules that judge every engine.

The lines a CPU build of llama-server cannot print (CUDA) are matched here as the source's format
string renders them (``SOURCE_FORMATS``); the others are the real server's
(tests/integration/test_real_llamacpp_failures.py). SGLang's lines are all the source's, each rendered
with its logger's prefix (``SGLANG_FORMATS``): SGLang does not run without CUDA. TensorRT-LLM's likewise
(``TRTLLM_FORMATS``).
"""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

import pytest

from sparktui.config import load_catalogue, parse_config
from sparktui.diagnosis.catalogue import (
    Catalogue,
    CatalogueError,
    merge_catalogues,
    parse_catalogue,
)
from sparktui.diagnosis.engine import DiagnosisEngine, unread
from sparktui.engines import readings
from sparktui.engines.failures import CATALOGUE_FILE, engine_catalogue, engine_catalogues
from sparktui.model.fleet import FleetState
from sparktui.model.logbuffer import LogBuffer, parse_log_line
from sparktui.model.observations import FetchKind, HttpResult, NodeObservation, ServerObservation

ROOT = Path(__file__).resolve().parents[2]
CATALOGUE = load_catalogue()
MAIN_FILE = ROOT / "sparktui" / "data" / "failures.toml"
VLLM_FILE = ROOT / "sparktui" / "engines" / "vllm" / "failures.toml"
WALL0 = 1780137000.0

# A vLLM instance, a llama.cpp instance, an SGLang instance and a trtllm-serve on one node.
MIXED = """
poll_interval_s = 1.0
[[nodes]]
name = "spark1"
host = "10.0.0.1"
[[nodes.vllm]]
name = "gptoss"
port = 8000
unit = "vllm-gptoss.service"
[[nodes.vllm]]
name = "gemma"
engine = "llamacpp"
port = 8080
unit = "llama-gemma.service"
[[nodes.vllm]]
name = "qwen"
engine = "sglang"
port = 30000
unit = "sglang-qwen.service"
[[nodes.vllm]]
name = "nemotron"
engine = "trtllm"
port = 8355
unit = "trtllm-nemotron.service"
"""

LLAMA_LOAD_FAILED = (
    "2026-05-30T08:34:02+0000 spark1 llama-server[4127]: 0.00.030.472 E srv    load_model: "
    "failed to load model, '/models/gemma.gguf'"
)
LLAMA_START = "2026-05-30T08:34:01+0000 spark1 llama-server[4127]: 0.00.006.088 I srv  llama_server: initializing ..."
VLLM_PAGE_CACHE = (
    "2026-05-30T08:34:02+0000 spark1 vllm[61877]: ValueError: Free memory on device cuda:0 (29.87/119.67 GiB) "
    "on startup is less than desired GPU memory utilization (0.9, 107.7 GiB)."
)
DROP_CACHES_DENIED = (
    "2026-05-30T08:34:00+0000 spark1 bash[4100]: bash: line 1: /proc/sys/vm/drop_caches: Permission denied"
)

# The lines of llama.cpp's catalogue no CPU build prints, as llama.cpp's source formats them (the
# format string verbatim, then made a line with sample arguments, C's printf as Python's %).
SOURCE_FORMATS = (
    (
        "llamacpp-out-of-memory",
        "ggml/src/ggml-cuda/ggml-cuda.cu, ggml_backend_cuda_buffer_type_alloc_buffer",
        "%s: allocating %.2f MiB on device %d: cudaMalloc failed: %s\n",
        ("ggml_backend_cuda_buffer_type_alloc_buffer", 65536.0, 0, "out of memory"),
    ),
    (
        "llamacpp-out-of-memory",
        "ggml/src/ggml-backend.cpp, ggml_backend_buft_alloc_buffer_n_default",
        "%s: failed to allocate %s buffer of size %zu\n",
        ("ggml_backend_buft_alloc_buffer_n_default", "CUDA0", 68719476736),
    ),
    (
        "llamacpp-context-exceeded",
        "tools/server/server-context.cpp, server_context_impl::pre_decode",
        "input (%d tokens) is larger than the max context size (%d tokens). skipping",
        (9000, 8192),
    ),
)


# SGLang's lines, as SGLang 0.5.23's source writes them (python/sglang/srt/): the format string verbatim
# (a %-format with its arguments, or an f-string's text with its names), then the prefix its logger
# gives the line ("[%(asctime)s{prefix}] %(message)s", utils/common.py configure_logger; " TP0" in a
# scheduler of a tensor-parallel server), then journald's. No machine without CUDA runs SGLang.
SGLANG_JOURNAL = "2026-05-30T08:34:02+0000 spark1 python[5120]: "
SGLANG_FORMATS: tuple[tuple[str, str, str, str, tuple[object, ...] | dict[str, object]], ...] = (
    (
        "sglang-kv-pool-below-context",
        "managers/tp_worker.py, TpModelWorker.get_worker_info",
        "[2026-05-30 08:34:02 TP0] ",
        "KV pool holds %d tokens, fewer than --context-length %d. One "
        "full-length request cannot fit, so long requests will be "
        "refused or truncated at serving time. Lower --context-length, "
        "raise --mem-fraction-static, or free memory taken before the "
        "pool is sized.",
        (65536, 131072),
    ),
    (
        # Raised, so it is the last line of the traceback the scheduler logs ("Scheduler hit an exception").
        "sglang-not-enough-memory",
        "model_executor/pool_configurator.py, MemoryPoolConfig.__post_init__",
        "RuntimeError: ",
        "Not enough memory. Please try to increase --mem-fraction-static. Current value: "
        "mem_fraction_static={mem_fraction_static}",
        {"mem_fraction_static": 0.5},
    ),
    (
        "sglang-kv-cache-full-retract",
        "managers/scheduler.py, Scheduler.update_running_batch",
        "[2026-05-30 08:34:02 TP0] ",
        "KV cache pool is full. Retract requests. #retracted_reqs: {n}, #new_tokens_gained: {gained}"
        ", #new_token_ratio: {old_ratio:.4f} -> {new_token_ratio:.4f}",
        {"n": 3, "gained": 24576, "old_ratio": 0.4, "new_token_ratio": 0.5},
    ),
    (
        "sglang-health-check-failed",
        "entrypoints/http_server.py, health_generate",
        "[2026-05-30 08:34:02] ",
        "Health check failed. Server couldn't get a response from detokenizer for last "
        "{HEALTH_CHECK_TIMEOUT} seconds. tic start time: {tic_time}. "
        "last_heartbeat time: {last_receive_time}",
        {"HEALTH_CHECK_TIMEOUT": 20, "tic_time": "08:33:42", "last_receive_time": "08:31:05"},
    ),
)


def _sglang_line(prefix: str, fmt: str, args: tuple[object, ...] | dict[str, object]) -> str:
    """One SGLang line as journald keeps it: the source's format rendered, after its logger's prefix."""
    message = fmt.format(**args) if isinstance(args, dict) else fmt % args
    return f"{SGLANG_JOURNAL}{prefix}{message}"


SGLANG_START = "[2026-05-30 08:33:10] server_args={'model_path': 'Qwen/Qwen3-8B', 'port': 30000}"


# TensorRT-LLM's lines, as its source writes them (NVIDIA/TensorRT-LLM): the format string verbatim (an
# f-string's text with its names, or a C++ check's message), then the prefix the line reaches the log
# with: its Python logger's ("[%(asctime)s] " with "%m/%d/%Y-%H:%M:%S", then "[TRT-LLM] [RANK n] [W] ",
# tensorrt_llm/logger.py), or, for an error raised, the exception's type as the traceback's last line
# prints it; then journald's. No machine without CUDA runs TensorRT-LLM.
TRTLLM_JOURNAL = "2026-05-30T08:34:02+0000 spark1 trtllm-serve[6120]: "
TRTLLM_LOGGER = "[05/30/2026-08:34:02] [TRT-LLM] [RANK 0] "
TRTLLM_FORMATS: tuple[tuple[str, str, str, str, dict[str, object]], ...] = (
    (
        "trtllm-kv-cache-below-max-seq-len",
        "tensorrt_llm/_torch/pyexecutor/resource_manager.py, KVCacheManager._validate_and_adjust_attention_windows",
        TRTLLM_LOGGER + "[W] ",
        "Attention window size {window_size} exceeds upper bound {upper_bound} "
        "for available blocks. Reducing to {upper_bound}.",
        {"window_size": 131072, "upper_bound": 40960},
    ),
    (
        # Raised by observe_creation_stage (RuntimeError(explanation)): its first line ends the traceback.
        "trtllm-executor-out-of-memory",
        "tensorrt_llm/_torch/pyexecutor/py_executor_creator.py, _ExecutorMemoryMonitor._maybe_explain_if_oom",
        "RuntimeError: ",
        "Executor creation failed due to insufficient GPU memory.",
        {},
    ),
    (
        # TORCH_CHECK's message, raised in Python as a RuntimeError while the model warms up.
        "trtllm-fp4-moe-needs-sm100",
        "cpp/tensorrt_llm/thop/fp4BlockScaleMoe.cpp, run_fp4_block_scale_moe_runner",
        "RuntimeError: ",
        "Only SM100 is supported by FP4 block scale MOE",
        {},
    ),
    (
        # The same check in later releases (tensorrt_llm::common::isSM100Family()).
        "trtllm-fp4-moe-needs-sm100",
        "cpp/tensorrt_llm/thop/fp4BlockScaleMoe.cpp, run_fp4_block_scale_moe_runner",
        "RuntimeError: ",
        "Only SM100f is supported by FP4 block scale MOE",
        {},
    ),
    (
        "trtllm-forward-error",
        "tensorrt_llm/_torch/pyexecutor/py_executor.py, PyExecutor._forward_step",
        TRTLLM_LOGGER + "[E] ",
        "Encountered an error in forward function: {error_msg}",
        {
            "error_msg": "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
            "119.70 GiB of which 1.05 GiB is free."
        },
    ),
)


def _trtllm_line(prefix: str, fmt: str, args: dict[str, object]) -> str:
    """One TensorRT-LLM line as journald keeps it: the source's format rendered, after its prefix."""
    return f"{TRTLLM_JOURNAL}{prefix}{fmt.format(**args)}"


class Node:
    """One node of ``MIXED`` in a real FleetState, its logs, and the engine judging it."""

    def __init__(self) -> None:
        self.fleet = FleetState(parse_config(MIXED, source="test.toml"), readings())
        self.engine = DiagnosisEngine(CATALOGUE)
        self.logs: dict[str, LogBuffer] = {}

    def log(self, instance: str, *raw: str) -> None:
        self.logs.setdefault(instance, LogBuffer()).append_batch(parse_log_line("journal", line) for line in raw)

    def evaluate(self, t: float) -> dict[str, set[str]]:
        """Poll both instances (/health 200), evaluate; the open findings' ids by instance."""
        health = HttpResult(url="http://10.0.0.1:8000", kind=FetchKind.OK, status=200, body=b"")
        names = ("gptoss", "gemma", "qwen", "nemotron")
        observed = tuple(ServerObservation(name, health, None) for name in names)
        self.fleet.apply(NodeObservation(node="spark1", t=t, wall=WALL0 + t, vllm=observed))
        (view,) = self.fleet.view(t, window_s=60.0)
        lines = {name: unread(buf, self.engine.cursor("spark1", name)) for name, buf in self.logs.items()}
        found: dict[str, set[str]] = {}
        for finding in self.engine.evaluate(view, lines, t):
            found.setdefault(finding.instance or "", set()).add(finding.id)
        return found


# --- the merge ------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["vllm", "llamacpp", "sglang", "trtllm"])
def test_the_shipped_catalogue_holds_each_engines_own_rules_as_that_engines(kind: str) -> None:
    where, text = engine_catalogue(kind)
    assert where == f"sparktui/engines/{kind}/failures.toml"
    own = parse_catalogue(text, source=where, engine=kind)
    assert {rule.id for rule in own.rules} <= set(CATALOGUE.ids)
    assert all(CATALOGUE.rule(rule.id).engine == kind for rule in own.rules)
    # Whose its rules are is said by where the file is, never by the file.
    assert not [rule["id"] for rule in tomllib.loads(text)["rule"] if "engine" in rule]


def test_every_rule_for_one_engine_lives_beside_that_engine() -> None:
    assert set(engine_catalogues()) == {"vllm", "llamacpp", "sglang", "trtllm"}
    own = {
        kind: {rule.id for rule in parse_catalogue(engine_catalogue(kind)[1], engine=kind).rules}
        for kind in engine_catalogues()
    }
    # The main file marks no rule for one engine: the rules that judge one engine are its package's.
    assert not [rule["id"] for rule in tomllib.loads(MAIN_FILE.read_text())["rule"] if "engine" in rule]
    assert all(rule.engine is None for rule in _main().rules)
    owned = {rule_id: kind for kind, ids in own.items() for rule_id in ids}
    assert {rule.id: rule.engine for rule in CATALOGUE.rules if rule.engine is not None} == owned
    # vLLM's: its log lines and its detectors of vLLM's notions, under the ids configs and recordings name.
    for rule_id in ("page-cache-blocks-start", "launch-readiness", "engine-dead", "kv-pressure", "cold-jit"):
        assert CATALOGUE.rule(rule_id).engine == "vllm" and rule_id in own["vllm"]
    for rule_id in ("engine-wedged", "exec-not-found", "crash-loop", "drop-caches-denied", "nvrm-out-of-memory"):
        assert CATALOGUE.rule(rule_id).engine is None
    # llama.cpp's rules say where its source prints each line; vLLM's cite the write-up, where one is.
    assert all(CATALOGUE.rule(rule_id).source for rule_id in (*own["llamacpp"], *own["sglang"], *own["trtllm"]))
    assert CATALOGUE.rule("page-cache-blocks-start").source == "write-up 002"
    # Each engine's [log] is kept for its instances; the main file's is for an engine with none.
    assert CATALOGUE.marks("llamacpp").attempt_start.search("0.00.006.088 I srv  llama_server: initializing ...")
    vllm_start = "INFO 05-30 08:34:01 [api_server.py:1] vLLM API server version 0.20.1"
    assert CATALOGUE.marks("vllm").attempt_start.search(vllm_start)
    assert CATALOGUE.marks("sglang").attempt_start.search(SGLANG_START)
    assert not CATALOGUE.marks("sglang").attempt_start.search(vllm_start)
    assert not CATALOGUE.marks("toy").attempt_start.search(vllm_start)
    assert CATALOGUE.marks("toy").attempt_start.search("systemd[1]: Started toy.service - Toy.")


def test_the_engine_catalogues_ship_in_the_package() -> None:
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["sparktui"]
    for package in engine_catalogues().values():
        path = f"{package.removeprefix('sparktui.').replace('.', '/')}/{CATALOGUE_FILE}"
        assert (ROOT / "sparktui" / path).is_file()
        assert any(fnmatch.fnmatch(path, glob) for glob in globs), f"{path} is not in pyproject's package-data"


LLAMA_FILE = """
format = 1
[log]
attempt_start = 'llama_server: initializing'
error = ' E '
[defaults.log]
quiet_s = 1800.0
healthy_s = 120.0
[defaults.detector]
open_after = 1.0
clear_after_s = 60.0
[[rule]]
id = "llamacpp-port-in-use"
section = "llama.cpp"
severity = "crit"
title = "port"
where = ["log"]
looks_at = "log"
explanation = "why"
fix = "what"
source = "tools/server/server-http.cpp, server_http_context::start"
[rule.log]
any = ["couldn't bind HTTP server socket"]
"""


def _main() -> Catalogue:
    return parse_catalogue(MAIN_FILE.read_text(), source="sparktui/data/failures.toml")


def test_an_engine_file_is_that_engines_whatever_it_says() -> None:
    own = parse_catalogue(LLAMA_FILE, source="llama.toml", engine="llamacpp")
    assert [rule.engine for rule in own.rules] == ["llamacpp"]
    with pytest.raises(
        CatalogueError, match=r"llama\.toml: rule 'llamacpp-port-in-use': an engine's own .* sets no 'engine'"
    ):
        parse_catalogue(
            LLAMA_FILE.replace('section = "llama.cpp"', 'engine = "vllm"\nsection = "x"'), "llama.toml", "llamacpp"
        )
    with pytest.raises(CatalogueError, match="starts with 'llamacpp-'"):
        parse_catalogue(LLAMA_FILE.replace('"llamacpp-port-in-use"', '"port-in-use"'), "llama.toml", "llamacpp")
    with pytest.raises(CatalogueError, match="'source' must be a non-empty string"):
        parse_catalogue(LLAMA_FILE.replace("source = ", "not_observed = "), "llama.toml", "llamacpp")
    with pytest.raises(CatalogueError, match="not the kernel's"):
        parse_catalogue(LLAMA_FILE.replace("[rule.log]\n", '[rule.log]\nstream = "kernel"\n'), "llama.toml", "llamacpp")
    with pytest.raises(CatalogueError, match="'lmstudio' is not an engine"):
        parse_catalogue(LLAMA_FILE, "llama.toml", "lmstudio")


def test_a_catalogue_parsed_alone_may_mark_a_rule_for_a_known_engine() -> None:
    text = MAIN_FILE.read_text()
    marked = text.replace('id = "drop-caches-denied"\n', 'id = "drop-caches-denied"\nengine = "vllm"\n')
    assert marked != text
    assert parse_catalogue(marked).rule("drop-caches-denied").engine == "vllm"
    with pytest.raises(
        CatalogueError,
        match=r"rule 'drop-caches-denied': 'engine' must be one of vllm, llamacpp, sglang, trtllm, nim, ollama",
    ):
        parse_catalogue(marked.replace('engine = "vllm"', 'engine = "lmstudio"'))


def test_vllms_file_keeps_its_ids_and_sources_and_still_refuses_an_engine_key() -> None:
    text = VLLM_FILE.read_text()
    own = parse_catalogue(text, source="vllm.toml", engine="vllm")
    assert "engine-dead" in own.ids and all(rule.engine == "vllm" for rule in own.rules)  # no "vllm-" prefix
    assert own.rule("engine-dead").source is None  # a detector no write-up gave: as it was in the main file
    with pytest.raises(CatalogueError, match=r"rule 'engine-dead': an engine's own .* sets no 'engine'"):
        parse_catalogue(
            text.replace('id = "engine-dead"\n', 'id = "engine-dead"\nengine = "vllm"\n'), "vllm.toml", "vllm"
        )


def test_merging_appends_each_engines_rules_and_refuses_an_id_twice() -> None:
    main = _main()
    own = parse_catalogue(LLAMA_FILE, source="llama.toml", engine="llamacpp")
    merged = merge_catalogues(main, {"llamacpp": own})
    assert merged.ids == (*main.ids, "llamacpp-port-in-use")
    assert merged.marks("llamacpp").attempt_start.pattern == "llama_server: initializing"
    assert (
        merged.with_overrides({"llamacpp-port-in-use.quiet_s": 60.0}).rule("llamacpp-port-in-use").param("quiet_s")
        == 60.0
    )
    with pytest.raises(CatalogueError, match="rule id 'llamacpp-port-in-use' is already in the catalogue"):
        merge_catalogues(merged, {"llamacpp": own})
    with pytest.raises(CatalogueError, match="is not one of llamacpp's"):
        merge_catalogues(main, {"llamacpp": main})


# --- the engine filter ----------------------------------------------------------------------------


def test_a_llama_line_opens_nothing_on_a_vllm_instance_and_its_rule_on_a_llama_instance() -> None:
    node = Node()
    node.evaluate(0.0)
    node.log("gptoss", LLAMA_LOAD_FAILED)
    assert node.evaluate(1.0) == {}
    node.log("gemma", LLAMA_LOAD_FAILED)
    found = node.evaluate(2.0)
    assert found == {"gemma": {"llamacpp-model-load-failed"}}
    (finding,) = node.engine.active("spark1")
    assert finding.instance == "gemma" and finding.title == "llama-server could not load its model"
    assert [line.text for line in finding.lines] == [parse_log_line("journal", LLAMA_LOAD_FAILED)[1]]
    assert any("load_model: failed to load model, '/models/gemma.gguf'" in line for line in finding.evidence)


def test_a_vllm_line_opens_nothing_on_a_llama_instance_and_a_neutral_rule_opens_on_both() -> None:
    node = Node()
    node.evaluate(0.0)
    node.log("gemma", VLLM_PAGE_CACHE)
    assert node.evaluate(1.0) == {}
    node.log("gptoss", VLLM_PAGE_CACHE)
    assert node.evaluate(2.0) == {"gptoss": {"page-cache-blocks-start"}}
    node.log("gemma", DROP_CACHES_DENIED)
    node.log("gptoss", DROP_CACHES_DENIED)
    found = node.evaluate(3.0)
    assert found["gemma"] == {"drop-caches-denied"}
    assert found["gptoss"] == {"page-cache-blocks-start", "drop-caches-denied"}


def test_a_llama_instance_log_is_read_with_llama_servers_start_and_error_lines() -> None:
    node = Node()
    node.evaluate(0.0)
    node.log("gemma", LLAMA_START, LLAMA_LOAD_FAILED)
    node.log("gptoss", LLAMA_START, LLAMA_LOAD_FAILED)
    node.evaluate(1.0)
    memory = node.engine._nodes["spark1"].instances  # the crash-loop finding's first error of an attempt
    gemma, gptoss = memory["gemma"], memory["gptoss"]
    assert gemma.starts == 1 and gemma.first_error is not None
    assert gemma.first_error.text == parse_log_line("journal", LLAMA_LOAD_FAILED)[1]
    assert gptoss.starts == 0 and gptoss.first_error is None  # neither line is vLLM's start or error


def test_an_engines_detector_rule_judges_only_that_engines_instances() -> None:
    text = VLLM_FILE.read_text()
    # engine-dead (vLLM's) made to hold on any refused port: in vLLM's file, marked vLLM's in a catalogue
    # parsed alone (as the main file's vLLM rules were), and the same rule neutral.
    down = text.replace("reason = '/health 503'", "reason = 'connection refused'")
    marked = down.replace('id = "engine-dead"\n', 'id = "engine-dead"\nengine = "vllm"\n')
    assert text != down != marked
    refused = HttpResult(url="http://10.0.0.1:8000", kind=FetchKind.REFUSED, error="connection refused")
    for catalogue, expected in (
        (parse_catalogue(down, engine="vllm"), {"gptoss"}),
        (parse_catalogue(marked), {"gptoss"}),
        (parse_catalogue(down), {"gptoss", "gemma"}),
    ):
        fleet = FleetState(parse_config(MIXED, source="test.toml"), readings())
        engine = DiagnosisEngine(catalogue)
        opened: set[str] = set()
        for t in range(3):
            observed = tuple(ServerObservation(name, refused, None) for name in ("gptoss", "gemma"))
            fleet.apply(NodeObservation(node="spark1", t=float(t), wall=WALL0 + t, vllm=observed))
            (view,) = fleet.view(float(t), window_s=60.0)
            found = engine.evaluate(view, None, float(t))
            opened |= {f.instance or "" for f in found if f.id == "engine-dead"}
        assert opened == expected


# --- lines taken from the source ------------------------------------------------------------------


@pytest.mark.parametrize(("rule_id", "where", "fmt", "args"), SOURCE_FORMATS, ids=lambda v: str(v)[:40])
def test_a_rule_matches_the_line_its_source_prints(
    rule_id: str, where: str, fmt: str, args: tuple[object, ...]
) -> None:
    line = fmt.replace("%zu", "%d") % args
    rule = CATALOGUE.rule(rule_id)
    assert rule.log is not None and rule.source is not None
    assert where.split(",", maxsplit=1)[0] in rule.source, f"{rule_id}'s source should name {where}"
    assert any(p.search(line) for p in rule.log.any), f"{rule_id} does not match {line!r} ({where})"


@pytest.mark.parametrize(("rule_id", "where", "prefix", "fmt", "args"), SGLANG_FORMATS, ids=lambda v: str(v)[:40])
def test_an_sglang_rule_matches_the_line_sglang_logs(
    rule_id: str, where: str, prefix: str, fmt: str, args: tuple[object, ...] | dict[str, object]
) -> None:
    line = parse_log_line("journal", _sglang_line(prefix, fmt, args))[1]
    rule = CATALOGUE.rule(rule_id)
    assert rule.engine == "sglang" and rule.log is not None and rule.source is not None
    assert where.split(",", maxsplit=1)[0] in rule.source, f"{rule_id}'s source should name {where}"
    assert any(p.search(line) for p in rule.log.any), f"{rule_id} does not match {line!r} ({where})"


@pytest.mark.parametrize(("rule_id", "where", "prefix", "fmt", "args"), SGLANG_FORMATS, ids=lambda v: str(v)[:40])
def test_an_sglang_line_opens_its_rule_only_on_an_sglang_instance(
    rule_id: str, where: str, prefix: str, fmt: str, args: tuple[object, ...] | dict[str, object]
) -> None:
    raw = _sglang_line(prefix, fmt, args)
    node = Node()
    node.evaluate(0.0)
    node.log("gptoss", raw)
    node.log("gemma", raw)
    assert node.evaluate(1.0) == {}
    node.log("qwen", raw)
    assert node.evaluate(2.0) == {"qwen": {rule_id}}
    (finding,) = node.engine.active("spark1")
    assert finding.instance == "qwen"
    assert [line.text for line in finding.lines] == [parse_log_line("journal", raw)[1]]


def test_the_sglang_rules_titles_carry_what_the_line_says() -> None:
    node = Node()
    node.evaluate(0.0)
    node.log("qwen", _sglang_line(*SGLANG_FORMATS[0][2:]))
    node.evaluate(1.0)
    (finding,) = node.engine.active("spark1")
    assert finding.title == "SGLang's KV pool (65536 tokens) is smaller than its context length (131072)"


def test_vllm_and_llama_lines_open_nothing_on_an_sglang_instance() -> None:
    node = Node()
    node.evaluate(0.0)
    node.log("qwen", VLLM_PAGE_CACHE, LLAMA_LOAD_FAILED)
    assert node.evaluate(1.0) == {}
    node.log("qwen", DROP_CACHES_DENIED)  # a neutral rule opens on every engine's instance
    assert node.evaluate(2.0) == {"qwen": {"drop-caches-denied"}}


def test_an_sglang_instance_log_is_read_with_sglangs_start_and_error_lines() -> None:
    start = SGLANG_JOURNAL + SGLANG_START
    error = _sglang_line(*SGLANG_FORMATS[1][2:])
    node = Node()
    node.evaluate(0.0)
    node.log("qwen", start, error)
    node.log("gemma", start, error)
    node.evaluate(1.0)
    memory = node.engine._nodes["spark1"].instances
    qwen, gemma = memory["qwen"], memory["gemma"]
    assert qwen.starts == 1 and qwen.first_error is not None
    assert qwen.first_error.text == parse_log_line("journal", error)[1]
    assert gemma.starts == 0 and gemma.first_error is None  # neither line is llama-server's start or error


@pytest.mark.parametrize(("rule_id", "where", "prefix", "fmt", "args"), TRTLLM_FORMATS, ids=lambda v: str(v)[:40])
def test_a_trtllm_rule_matches_the_line_trtllm_logs(
    rule_id: str, where: str, prefix: str, fmt: str, args: dict[str, object]
) -> None:
    line = parse_log_line("journal", _trtllm_line(prefix, fmt, args))[1]
    rule = CATALOGUE.rule(rule_id)
    assert rule.engine == "trtllm" and rule.log is not None and rule.source is not None
    assert where.split(",", maxsplit=1)[0] in rule.source, f"{rule_id}'s source should name {where}"
    assert where.split(", ", maxsplit=1)[1] in rule.source, f"{rule_id}'s source should name {where}"
    assert any(p.search(line) for p in rule.log.any), f"{rule_id} does not match {line!r} ({where})"


def test_every_trtllm_rule_has_its_line_from_the_source() -> None:
    assert {rule.id for rule in CATALOGUE.rules if rule.engine == "trtllm"} == {f[0] for f in TRTLLM_FORMATS}


@pytest.mark.parametrize(("rule_id", "where", "prefix", "fmt", "args"), TRTLLM_FORMATS, ids=lambda v: str(v)[:40])
def test_a_trtllm_line_opens_its_rule_only_on_a_trtllm_instance(
    rule_id: str, where: str, prefix: str, fmt: str, args: dict[str, object]
) -> None:
    raw = _trtllm_line(prefix, fmt, args)
    node = Node()
    node.evaluate(0.0)
    for other in ("gptoss", "gemma", "qwen"):
        node.log(other, raw)
    assert node.evaluate(1.0) == {}
    node.log("nemotron", raw)
    assert node.evaluate(2.0) == {"nemotron": {rule_id}}
    (finding,) = node.engine.active("spark1")
    assert finding.instance == "nemotron"
    assert [line.text for line in finding.lines] == [parse_log_line("journal", raw)[1]]


def test_the_trtllm_rules_titles_carry_what_the_line_says() -> None:
    window, forward = TRTLLM_FORMATS[0], TRTLLM_FORMATS[-1]
    node = Node()
    node.evaluate(0.0)
    node.log("nemotron", _trtllm_line(*window[2:]), _trtllm_line(*forward[2:]))
    node.evaluate(1.0)
    titles = {finding.id: finding.title for finding in node.engine.active("spark1")}
    assert titles == {
        "trtllm-kv-cache-below-max-seq-len": "TensorRT-LLM's KV cache cannot hold one sequence of 131072 tokens: "
        "cut to 40960",
        "trtllm-forward-error": "TensorRT-LLM's forward step failed (CUDA out of memory): "
        "the requests in flight got the error",
    }


def test_other_engines_lines_open_nothing_on_a_trtllm_instance() -> None:
    node = Node()
    node.evaluate(0.0)
    node.log("nemotron", VLLM_PAGE_CACHE, LLAMA_LOAD_FAILED, _sglang_line(*SGLANG_FORMATS[1][2:]))
    assert node.evaluate(1.0) == {}
    node.log("nemotron", DROP_CACHES_DENIED)  # a neutral rule opens on every engine's instance
    assert node.evaluate(2.0) == {"nemotron": {"drop-caches-denied"}}


def test_a_trtllm_instance_log_is_read_with_trtllms_start_and_error_lines() -> None:
    start = TRTLLM_JOURNAL.replace("trtllm-serve[6120]", "systemd[1]") + "Started trtllm-nemotron.service."
    version = TRTLLM_JOURNAL + "[TensorRT-LLM] TensorRT LLM version: 1.2.0rc2"  # each process prints it
    error = _trtllm_line(*TRTLLM_FORMATS[-1][2:])
    node = Node()
    node.evaluate(0.0)
    node.log("nemotron", start, version, version, error)
    node.evaluate(1.0)
    memory = node.engine._nodes["spark1"].instances["nemotron"]
    assert memory.starts == 1 and memory.first_error is not None
    assert memory.first_error.text == parse_log_line("journal", error)[1]
