"""The failure catalogue as data: rules, their thresholds and log signatures, parsed and validated.

The catalogue ships as ``sparktui/data/failures.toml`` (the rules that judge every engine), and each
engine may ship its own beside its code (``sparktui.engines.failures``: ``engines/vllm/failures.toml``,
``engines/llamacpp/failures.toml``, ``engines/sglang/failures.toml``, ``engines/trtllm/failures.toml``);
the caller reads them (``sparktui.config.load_catalogue``), ``parse_catalogue`` validates each,
compiling every regular expression, and ``merge_catalogues`` makes one catalogue of them. A rule's
``engine`` is the engine whose instances it judges (None: every engine's): an engine file's rules are
that engine's, set here from where the file came, never read from the file.
``Catalogue.with_overrides()`` applies thresholds from the config (``"<rule id>.<param>"``).
``catalogue_markdown`` renders the table in docs/diagnosis.md.
"""

from __future__ import annotations

import math
import re
import string
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Literal

from sparktui.engines import registry
from sparktui.model.status import State

CATALOGUE_FORMAT = 1
ACTIONS = ("drop-caches", "restart", "kill-workers", "warmup")
WHERE = ("log", "metrics", "http", "host")
EXTRA_EVIDENCE = ("memory", "service")
LIFETIMES = ("attempt", "process", "quiet")
LOG_STREAMS = ("vllm", "kernel")  # the log a rule reads: each instance's own, or the node's kernel log
DEFAULT_ENGINE = "vllm"  # an instance's engine when nothing says otherwise (``ServerSpec.engine``'s default)
# Engines whose rules were the main file's before engines shipped catalogues of their own: their ids have
# no "<kind>-" prefix (configs' [diagnosis] thresholds and alert rules, and recordings, name them) and a
# rule cites the write-up it came from where there is one, not always a line of the engine's source.
PRESEAM_ENGINES = frozenset({"vllm"})

_ID_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_RULE_KEYS = (
    "id",
    "section",
    "severity",
    "title",
    "where",
    "looks_at",
    "explanation",
    "fix",
    "action",
    "fix_steps",
    "evidence",
    "suppressed_by",
    "not_observed",
    "source",
    "engine",
    "log",
    "detector",
    "params",
)
_LOG_PARAMS = ("quiet_s", "healthy_s")
_LIFETIME: Mapping[str, Lifetime] = {"attempt": "attempt", "process": "process", "quiet": "quiet"}
_DETECTOR_PARAMS = ("open_after", "clear_after_s")

Lifetime = Literal["attempt", "process", "quiet"]
LogStreamName = Literal["vllm", "kernel"]


class CatalogueError(ValueError):
    """The failure catalogue, or an override of its thresholds, is invalid; the message says where."""


class Severity(StrEnum):
    INFO = "info"
    WARN = "warn"
    CRIT = "crit"

    @property
    def rank(self) -> int:
        return _SEVERITY_RANK[self]


_SEVERITY_RANK = {Severity.INFO: 0, Severity.WARN: 1, Severity.CRIT: 2}


@dataclass(frozen=True, slots=True)
class DetectorSignature:
    """A named detector as the catalogue may use it: the thresholds it reads (``[rule.params]``) and
    its string settings. The engine holds the code (``engine.DETECTORS``)."""

    params: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    optional_args: tuple[str, ...] = ()
    regex_args: tuple[str, ...] = ()


DETECTOR_SIGNATURES: Mapping[str, DetectorSignature] = {
    "launch-not-ready": DetectorSignature(),
    "held-models-block-start": DetectorSignature(),
    "shm-leftovers": DetectorSignature(params=("min_entries",)),
    "stale-workers": DetectorSignature(params=("min_workers",)),
    "exec-not-found": DetectorSignature(params=("exit_status",)),
    "restarts-rising": DetectorSignature(params=("min_rise", "window_s", "min_restarts")),
    "requests-without-tokens": DetectorSignature(),
    "decode-slow": DetectorSignature(params=("factor", "min_samples", "history", "span_s")),
    "position-collapse": DetectorSignature(
        params=("min_acceptance", "baseline_factor", "min_drafts", "min_baseline_samples", "baseline_samples")
    ),
    "kv-preemptions": DetectorSignature(params=("kv_usage_min", "preemptions_min")),
    "never-served": DetectorSignature(params=("min_up_s",)),
    "status": DetectorSignature(args=("state", "reason"), optional_args=("reason",), regex_args=("reason",)),
    "unreachable": DetectorSignature(
        params=("ssh_silent_s", "together_s"), args=("unanswered",), regex_args=("unanswered",)
    ),
    "gpu-thermal": DetectorSignature(),
    "gpu-clock-low": DetectorSignature(params=("min_utilization", "low_clock_mhz", "low_fraction")),
    "gpu-power-low": DetectorSignature(params=("min_utilization", "max_power_w")),
    "link-degraded": DetectorSignature(
        params=("min_tokens_per_s", "expected_mbps", "max_share", "min_errors_per_s", "min_pauses_per_s", "max_age_s")
    ),
    "rank-spinning": DetectorSignature(params=("min_utilization", "max_power_w", "max_tokens_per_s")),
    "nccl-mismatch": DetectorSignature(),
}


# --- the catalogue ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LogMatch:
    """What a log rule matches: a line matching any of ``any``, or, within one start of the instance,
    a line for each of ``all``. ``stream`` is the log it reads: ``vllm`` (each instance's, the finding is
    the instance's) or ``kernel`` (the node's kernel log, the finding is the node's)."""

    any: tuple[re.Pattern[str], ...] = ()
    all: tuple[re.Pattern[str], ...] = ()
    lifetime: Lifetime = "attempt"
    stream: LogStreamName = "vllm"

    @property
    def patterns(self) -> tuple[re.Pattern[str], ...]:
        return self.any + self.all


@dataclass(frozen=True, slots=True)
class Rule:
    """One failure signature. ``params`` holds every threshold, defaults included."""

    id: str
    section: str
    severity: Severity
    title: str
    where: tuple[str, ...]
    looks_at: str
    explanation: str
    fix: str
    action: str | None
    params: Mapping[str, float]
    fix_steps: tuple[str, ...] = ()  # a fix of several actions, in order (the first is ``action``)
    log: LogMatch | None = None
    detector: str | None = None
    detector_args: Mapping[str, str] = field(default_factory=dict)
    detector_patterns: Mapping[str, re.Pattern[str]] = field(default_factory=dict)
    evidence: tuple[str, ...] = ()
    suppressed_by: tuple[str, ...] = ()
    not_observed: str | None = None
    source: str | None = None
    engine: str | None = None  # the engine kind whose instances it judges; None: every engine's (neutral)

    def applies_to(self, engine: str) -> bool:
        """Whether the rule judges an instance of this engine kind."""
        return self.engine is None or self.engine == engine

    def param(self, name: str) -> float:
        return self.params[name]

    def title_for(self, match: re.Match[str] | None) -> str:
        """The title, its ``{name}`` fields filled from the named groups of the line that matched
        (``Xid {xid}``); validated at load, so every field has its group."""
        if match is None or "{" not in self.title:
            return self.title
        return self.title.format_map({k: v or "?" for k, v in match.groupdict().items()})

    @property
    def fix_actions(self) -> tuple[str, ...]:
        """The actions that apply the fix, in order: ``fix_steps``, else the one ``action``, else none."""
        return self.fix_steps or ((self.action,) if self.action else ())


@dataclass(frozen=True, slots=True)
class LogMarks:
    """The two lines an engine's log is read for besides the rules' (its file's ``[log]``)."""

    attempt_start: re.Pattern[str]  # a line that marks a new start of the engine
    error: re.Pattern[str]  # a line that counts as an error (crash-loop's "first error")


@dataclass(frozen=True, slots=True)
class Catalogue:
    rules: tuple[Rule, ...]
    # The main file's [log]: for the instances of an engine that ships no catalogue of its own.
    attempt_start: re.Pattern[str]  # a line that marks a new start of the instance
    error: re.Pattern[str]  # a line that counts as an error (crash-loop's "first error")
    # The [log] of each engine that ships a catalogue of its own (vLLM's, llama.cpp's).
    engine_marks: Mapping[str, LogMarks] = field(default_factory=dict)

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(rule.id for rule in self.rules)

    def marks(self, engine: str) -> LogMarks:
        """The start and error lines of an engine's log: its own file's, else the main file's."""
        return self.engine_marks.get(engine) or LogMarks(self.attempt_start, self.error)

    def log_rules(self, engine: str) -> tuple[Rule, ...]:
        """The rules that read the log of an instance of this engine kind (the instance's own log)."""
        return tuple(r for r in self.rules if r.log is not None and r.log.stream == "vllm" and r.applies_to(engine))

    def rule(self, rule_id: str) -> Rule:
        for rule in self.rules:
            if rule.id == rule_id:
                return rule
        raise KeyError(rule_id)

    def with_overrides(self, overrides: Mapping[str, float]) -> Catalogue:
        """The catalogue with thresholds replaced, keyed ``"<rule id>.<param>"`` (the config's
        ``[diagnosis]`` table). Raises CatalogueError naming the key for an unknown rule or
        parameter, or a value that is not a number ≥ 0."""
        by_id = {rule.id: rule for rule in self.rules}
        changes: dict[str, dict[str, float]] = {}
        for key, value in overrides.items():
            rule_id, dot, param = str(key).rpartition(".")
            where = f"diagnosis threshold {key!r}"
            if not dot or not rule_id or not param:
                raise CatalogueError(
                    f"{where}: write it as '<rule id>.<parameter>', for example 'engine-wedged.open_after'"
                )
            rule = by_id.get(rule_id)
            if rule is None:
                raise CatalogueError(f"{where}: there is no rule {rule_id!r} in the catalogue")
            if param not in rule.params:
                known = ", ".join(sorted(rule.params))
                raise CatalogueError(f"{where}: rule {rule_id!r} has no parameter {param!r} (it has {known})")
            if not _is_number(value) or value < 0:
                raise CatalogueError(f"{where}: must be a number ≥ 0 (got {value!r})")
            changes.setdefault(rule_id, {})[param] = float(value)
        rules = tuple(
            replace(rule, params={**rule.params, **changes[rule.id]}) if rule.id in changes else rule
            for rule in self.rules
        )
        return replace(self, rules=rules)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def parse_catalogue(text: str, source: str = "failures.toml", engine: str | None = None) -> Catalogue:
    """Parse and validate catalogue TOML; every regular expression is compiled here. ``engine``: the
    file is that engine's own (``sparktui.engines.failures``): each rule is that engine's, it sets no
    ``engine`` itself, and (but for ``PRESEAM_ENGINES``) its id starts with the engine kind and it says
    where in the engine's source its line is printed (``source``)."""
    if engine is not None and engine not in registry():
        raise CatalogueError(f"{source}: {engine!r} is not an engine sparktui reads ({', '.join(registry())})")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CatalogueError(f"{source}: not valid TOML: {exc}") from None
    return _Parser(source, engine).catalogue(data)


def merge_catalogues(main: Catalogue, engines: Mapping[str, Catalogue]) -> Catalogue:
    """The main catalogue with each engine's own (``parse_catalogue(..., engine=kind)``, keyed by kind)
    after it: their rules, and their ``[log]`` marks for that engine's instances. An id used twice is a
    CatalogueError naming it."""
    rules = list(main.rules)
    marks = dict(main.engine_marks)
    for kind, catalogue in engines.items():
        wrong = [rule.id for rule in catalogue.rules if rule.engine != kind]
        if wrong:
            raise CatalogueError(
                f"{kind}'s catalogue: rule {wrong[0]!r} is not one of {kind}'s (parse it with engine={kind!r})"
            )
        known = {rule.id for rule in rules}
        clash = [rule.id for rule in catalogue.rules if rule.id in known]
        if clash:
            raise CatalogueError(f"{kind}'s catalogue: rule id {clash[0]!r} is already in the catalogue")
        rules.extend(catalogue.rules)
        marks[kind] = LogMarks(catalogue.attempt_start, catalogue.error)
    return replace(main, rules=tuple(rules), engine_marks=marks)


class _Parser:
    """Validation of the catalogue data; every error names the file, the rule and the key."""

    def __init__(self, source: str, engine: str | None = None) -> None:
        self.source = source
        self.engine = engine  # the engine whose own file this is (None: the main catalogue)
        # An engine's own file names its rules "<kind>-…" and cites the engine's source for each.
        self.prefixed_and_cited = engine is not None and engine not in PRESEAM_ENGINES

    def fail(self, where: str, what: str) -> CatalogueError:
        return CatalogueError(f"{self.source}: {where}: {what}")

    def table(self, value: object, where: str) -> dict[str, object]:
        if not isinstance(value, dict):
            raise self.fail(where, "must be a table")
        return value

    def keys(self, table: Mapping[str, object], allowed: Sequence[str], where: str) -> None:
        unknown = sorted(set(table) - set(allowed))
        if unknown:
            raise self.fail(where, f"unknown key {unknown[0]!r} (allowed: {', '.join(allowed)})")

    def text(self, table: Mapping[str, object], key: str, where: str, required: bool = True) -> str | None:
        value = table.get(key)
        if value is None and not required:
            return None
        if not isinstance(value, str) or not value.strip():
            raise self.fail(where, f"{key!r} must be a non-empty string")
        return value

    def texts(self, table: Mapping[str, object], key: str, where: str) -> tuple[str, ...]:
        value = table.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise self.fail(where, f"{key!r} must be a list of strings")
        return tuple(value)

    def regex(self, pattern: str, where: str) -> re.Pattern[str]:
        try:
            compiled = re.compile(pattern)
            re.compile(f"(?:{pattern})")  # it must also work inside the engine's combined prefilter
        except re.error as exc:
            raise self.fail(where, f"bad regular expression {pattern!r}: {exc}") from None
        return compiled

    def numbers(self, value: object, where: str) -> dict[str, float]:
        table = self.table(value, where)
        out: dict[str, float] = {}
        for key, number in table.items():
            if isinstance(number, bool) or not isinstance(number, int | float) or not math.isfinite(number):
                raise self.fail(where, f"{key!r} must be a number ≥ 0 (got {number!r})")
            if number < 0:
                raise self.fail(where, f"{key!r} must be a number ≥ 0 (got {number!r})")
            out[key] = float(number)
        return out

    def catalogue(self, data: Mapping[str, object]) -> Catalogue:
        self.keys(data, ("format", "log", "defaults", "rule"), "top level")
        if data.get("format") != CATALOGUE_FORMAT:
            raise self.fail("format", f"must be {CATALOGUE_FORMAT} (got {data.get('format')!r})")
        log = self.table(data.get("log", {}), "[log]")
        self.keys(log, ("attempt_start", "error"), "[log]")
        attempt_start = self.regex(str(self.text(log, "attempt_start", "[log]")), "[log] attempt_start")
        error = self.regex(str(self.text(log, "error", "[log]")), "[log] error")
        defaults = self.table(data.get("defaults", {}), "[defaults]")
        self.keys(defaults, ("log", "detector"), "[defaults]")
        log_defaults = self.numbers(defaults.get("log", {}), "[defaults.log]")
        detector_defaults = self.numbers(defaults.get("detector", {}), "[defaults.detector]")
        for name, table, needed in (
            ("[defaults.log]", log_defaults, _LOG_PARAMS),
            ("[defaults.detector]", detector_defaults, _DETECTOR_PARAMS),
        ):
            self.keys(table, needed, name)
            missing = [p for p in needed if p not in table]
            if missing:
                raise self.fail(name, f"missing {missing[0]!r}")
        rules_data = data.get("rule")
        if not isinstance(rules_data, list) or not rules_data:
            raise self.fail("rule", "the catalogue has no [[rule]]")
        rules = [self.rule(item, index, log_defaults, detector_defaults) for index, item in enumerate(rules_data)]
        ids = [rule.id for rule in rules]
        for rule in rules:
            if ids.count(rule.id) > 1:
                raise self.fail(f"rule {rule.id!r}", "the id is used twice")
            for other in rule.suppressed_by:
                if other not in ids or other == rule.id:
                    raise self.fail(f"rule {rule.id!r}", f"suppressed_by names no other rule: {other!r}")
        return Catalogue(tuple(rules), attempt_start, error)

    def rule(
        self,
        item: object,
        index: int,
        log_defaults: Mapping[str, float],
        detector_defaults: Mapping[str, float],
    ) -> Rule:
        table = self.table(item, f"rule #{index + 1}")
        rule_id = table.get("id")
        if not isinstance(rule_id, str) or not _ID_RE.match(rule_id):
            raise self.fail(f"rule #{index + 1}", f"'id' must be lower-case words joined by '-' (got {rule_id!r})")
        where = f"rule {rule_id!r}"
        self.keys(table, _RULE_KEYS, where)
        engine = self.rule_engine(table, rule_id, where)
        severity = table.get("severity")
        if severity not in {s.value for s in Severity}:
            raise self.fail(where, f"'severity' must be info, warn or crit (got {severity!r})")
        places = self.texts(table, "where", where)
        if not places or any(p not in WHERE for p in places):
            raise self.fail(where, f"'where' must list some of {', '.join(WHERE)} (got {list(places)})")
        action = self.text(table, "action", where, required=False)
        if action is not None and action not in ACTIONS:
            raise self.fail(where, f"'action' must be one of {', '.join(ACTIONS)} (got {action!r})")
        fix_steps = self.fix_steps(table, action, where)
        extras = self.texts(table, "evidence", where)
        if any(e not in EXTRA_EVIDENCE for e in extras):
            raise self.fail(where, f"'evidence' may list {', '.join(EXTRA_EVIDENCE)} (got {list(extras)})")
        has_log, has_detector = "log" in table, "detector" in table
        if has_log == has_detector:
            raise self.fail(where, "give either [rule.log] or [rule.detector]")
        params = self.numbers(table.get("params", {}), f"{where} params")
        log: LogMatch | None = None
        detector: str | None = None
        args: dict[str, str] = {}
        patterns: dict[str, re.Pattern[str]] = {}
        if has_log:
            log = self.log_match(table["log"], where)
            self.title_fields(str(self.text(table, "title", where)), log, where)
            self.keys(params, _LOG_PARAMS, f"{where} params")
            params = {**log_defaults, **params}
        else:
            detector, args, patterns = self.detector(table["detector"], where)
            known = _DETECTOR_PARAMS + DETECTOR_SIGNATURES[detector].params
            self.keys(params, known, f"{where} params")
            params = {**detector_defaults, **params}
            missing = [p for p in known if p not in params]
            if missing:
                raise self.fail(f"{where} params", f"detector {detector!r} needs {missing[0]!r}")
        return Rule(
            id=rule_id,
            section=str(self.text(table, "section", where)),
            severity=Severity(str(severity)),
            title=str(self.text(table, "title", where)),
            where=places,
            looks_at=str(self.text(table, "looks_at", where)),
            explanation=str(self.text(table, "explanation", where)),
            fix=str(self.text(table, "fix", where)),
            action=action,
            fix_steps=fix_steps,
            params=params,
            log=log,
            detector=detector,
            detector_args=args,
            detector_patterns=patterns,
            evidence=extras,
            suppressed_by=self.texts(table, "suppressed_by", where),
            not_observed=self.text(table, "not_observed", where, required=False),
            source=self.text(table, "source", where, required=self.prefixed_and_cited),
            engine=engine,
        )

    def rule_engine(self, table: Mapping[str, object], rule_id: str, where: str) -> str | None:
        """The engine a rule judges: in an engine's own file, that engine (where the file came from says
        it, the file may not); in the main file, ``engine`` if given, else every engine."""
        if self.engine is not None:
            if "engine" in table:
                raise self.fail(where, f"an engine's own catalogue sets no 'engine': its rules are {self.engine!r}'s")
            if self.prefixed_and_cited and not rule_id.startswith(f"{self.engine}-"):
                raise self.fail(where, f"the id of one of {self.engine!r}'s rules starts with '{self.engine}-'")
            return self.engine
        if "engine" not in table:
            return None
        engine = table["engine"]
        if engine not in registry():
            raise self.fail(where, f"'engine' must be one of {', '.join(registry())} (got {engine!r})")
        return str(engine)

    def fix_steps(self, table: Mapping[str, object], action: str | None, where: str) -> tuple[str, ...]:
        """A fix of several actions: two or more known actions, none twice, the first one ``action``
        (the key that applies the first part alone)."""
        if "fix_steps" not in table:
            return ()
        steps = self.texts(table, "fix_steps", where)
        unknown = [s for s in steps if s not in ACTIONS]
        if unknown:
            raise self.fail(where, f"'fix_steps' may list {', '.join(ACTIONS)} (got {unknown[0]!r})")
        if len(steps) < 2 or len(set(steps)) != len(steps):
            raise self.fail(where, f"'fix_steps' must list two or more different actions (got {list(steps)})")
        if action != steps[0]:
            raise self.fail(where, f"'fix_steps' must start with the rule's 'action' ({action!r}), got {steps[0]!r}")
        return steps

    def log_match(self, value: object, where: str) -> LogMatch:
        table = self.table(value, f"{where} log")
        self.keys(table, ("any", "all", "lifetime", "stream"), f"{where} log")
        any_ = tuple(self.regex(p, f"{where} log.any[{i}]") for i, p in enumerate(self.texts(table, "any", where)))
        all_ = tuple(self.regex(p, f"{where} log.all[{i}]") for i, p in enumerate(self.texts(table, "all", where)))
        if not any_ and len(all_) < 2:
            raise self.fail(f"{where} log", "give 'any' (one or more patterns) or 'all' (two or more)")
        stream = table.get("stream", "vllm")
        if stream not in LOG_STREAMS:
            raise self.fail(f"{where} log", f"'stream' must be {' or '.join(LOG_STREAMS)} (got {stream!r})")
        lifetime = table.get("lifetime", "attempt")
        if lifetime not in LIFETIMES:
            raise self.fail(f"{where} log", f"'lifetime' must be {', '.join(LIFETIMES)} (got {lifetime!r})")
        if stream == "kernel" and self.engine is not None:
            # The kernel log is the node's, whatever engine its instances run.
            raise self.fail(f"{where} log", "an engine's own catalogue reads its instances' logs, not the kernel's")
        if stream == "kernel" and lifetime == "process":
            # The kernel log belongs to no one process of an instance that a restart would replace.
            raise self.fail(f"{where} log", "a kernel-log rule's 'lifetime' must be attempt or quiet (got 'process')")
        return LogMatch(any_, all_, _LIFETIME[lifetime], "kernel" if stream == "kernel" else "vllm")

    def title_fields(self, title: str, log: LogMatch, where: str) -> None:
        """A title's ``{name}`` fields come from named groups that every ``any`` pattern has."""
        try:
            fields = {name for _, name, _, _ in string.Formatter().parse(title) if name is not None}
        except ValueError as exc:
            raise self.fail(where, f"'title' has a bad {{field}}: {exc}") from None
        for name in sorted(fields):
            if not name.isidentifier() or log.all or any(name not in p.groupindex for p in log.any):
                what = f"'title' field {{{name}}} must be a named group (?P<{name}>…) of every 'any' pattern"
                raise self.fail(where, what)

    def detector(self, value: object, where: str) -> tuple[str, dict[str, str], dict[str, re.Pattern[str]]]:
        table = dict(self.table(value, f"{where} detector"))
        name = table.pop("name", None)
        if not isinstance(name, str) or name not in DETECTOR_SIGNATURES:
            raise self.fail(f"{where} detector", f"'name' must be one of {', '.join(sorted(DETECTOR_SIGNATURES))}")
        spec = DETECTOR_SIGNATURES[name]
        self.keys(table, spec.args, f"{where} detector {name!r}")
        args: dict[str, str] = {}
        for key in spec.args:
            text = self.text(table, key, f"{where} detector", required=key not in spec.optional_args)
            if text is not None:
                args[key] = text
        if "state" in args and args["state"] not in {s.value for s in State}:
            raise self.fail(f"{where} detector", f"'state' must be a status state (got {args['state']!r})")
        patterns = {key: self.regex(args[key], f"{where} detector {key}") for key in spec.regex_args if key in args}
        return name, args, patterns


# --- the catalogue as a table (docs/diagnosis.md is generated from this) ------------------------------


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def catalogue_markdown(catalogue: Catalogue) -> str:
    """The rules as Markdown tables: the one in docs/diagnosis.md (a test keeps them equal). Rows are
    grouped by section, the sections in the order they first appear (an engine's own rules come after
    the main file's, and may share its sections)."""
    lines = [
        "| id | engine | severity | where | what it looks at | action |",
        "|---|---|---|---|---|---|",
    ]
    sections = {name: i for i, name in enumerate(dict.fromkeys(rule.section for rule in catalogue.rules))}
    rules = sorted(catalogue.rules, key=lambda rule: sections[rule.section])
    section = None
    for rule in rules:
        if rule.section != section:
            section = rule.section
            lines.append(f"| **{_cell(section)}** | | | | | |")
        known = registry().get(rule.engine) if rule.engine is not None else None
        engine = known.label if known is not None else rule.engine or "any"
        lines.append(
            f"| `{rule.id}` | {engine} | {rule.severity.value} | {', '.join(rule.where)} | {_cell(rule.looks_at)} "
            f"| {' → '.join(f'`{a}`' for a in rule.fix_actions) or '–'} |"
        )
    lines += ["", "Partly observable rows (what sparktui cannot see):", "", "| id | not observed |", "|---|---|"]
    lines += [f"| `{r.id}` | {_cell(r.not_observed)} |" for r in rules if r.not_observed]
    return "\n".join(lines) + "\n"
