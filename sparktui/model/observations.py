"""Plain data that the sources hand to the model: what one poll of one node saw."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from sparktui.model.host import HostSample


class FetchKind(StrEnum):
    OK = "ok"  # an HTTP answer arrived in full (any status code)
    REFUSED = "refused"
    TIMEOUT = "timeout"
    TOO_LARGE = "too_large"
    TRUNCATED = "truncated"
    ERROR = "error"  # DNS, reset, protocol, TLS...


@dataclass(frozen=True, slots=True)
class HttpResult:
    """One HTTP GET: the answer, or why there was none. ``error`` is one line for the operator."""

    url: str
    kind: FetchKind
    status: int | None = None
    body: bytes = b""
    elapsed_s: float = 0.0
    error: str | None = None
    content_type: str | None = None
    location: str | None = None  # where a redirect (3xx) points: not followed, but said

    @property
    def answered(self) -> bool:
        return self.kind is FetchKind.OK

    @property
    def ok(self) -> bool:
        return self.kind is FetchKind.OK and self.status is not None and 200 <= self.status < 300

    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")

    def problem(self) -> str:
        """What went wrong, in a few words ("connection refused", "HTTP 503", "HTTP 302 to
        https://sso.example/login, not followed")."""
        if self.kind is FetchKind.OK:
            if self.ok:
                return "ok"
            if self.location is not None:
                return f"HTTP {self.status} to {self.location}, not followed"
            return f"HTTP {self.status}"
        return self.error or self.kind.value


@dataclass(frozen=True, slots=True)
class ServerObservation:
    """What one poll saw of one engine instance. ``None`` means "not asked this poll".

    ``version`` is the engine's own description of itself: vLLM's ``/version``, llama-server's
    ``/props``; ``detail`` is what its engine asks besides, when this poll's ``/metrics`` says it is
    worth asking (llama-server's ``/slots`` while a request runs: ``sparktui.engines``' poll plans)."""

    name: str
    health: HttpResult | None
    metrics: HttpResult | None
    version: HttpResult | None = None
    models: HttpResult | None = None
    canary: HttpResult | None = None  # a canary completion that finished since the last poll
    detail: HttpResult | None = None
    # The monotonic time /metrics answered: its counters are of that moment, so rates are timed by it,
    # not by the end of the whole node poll (a slow neighbour on the node would stretch the interval).
    # None: the observation's ``t`` (a recording from before it was kept, the Prometheus source).
    metrics_t: float | None = None
    # A server whose models each have their own /metrics (a llama.cpp router): each model's answer, by
    # its id, as its engine's plan asked it (``PollPlan.model_metrics``); () when none was to be read,
    # None when not asked this poll. ``metrics_t`` is then when the last of them answered.
    model_metrics: tuple[tuple[str, HttpResult], ...] | None = None


@dataclass(frozen=True, slots=True)
class NodeObservation:
    """One poll of one node. ``t`` is the monotonic clock, ``wall`` the unix time, both at the end."""

    node: str
    t: float
    wall: float
    vllm: tuple[ServerObservation, ...] = ()
    gpu_exporter: HttpResult | None = None
    node_exporter: HttpResult | None = None
    services: tuple[tuple[str, HttpResult], ...] = field(default_factory=tuple)


@dataclass(frozen=True, slots=True)
class HostUpdate:
    """Host state of one node: a new sample, or a problem reading it (one line, for the operator).

    ``t`` is the monotonic clock of the receiving side when it arrived.
    """

    node: str
    t: float
    sample: HostSample | None = None
    problem: str | None = None
    connection_lost: bool = False  # the problem is a lost SSH connection: what it said is no longer known
    # ``nvidia-smi -q`` as the node printed it (``exporters.NVIDIA_SMI_Q_COMMAND``), read over SSH where
    # the node has no GPU exporter, or the collector's one line when it gave no answer in time; the
    # fleet state parses it (a text that is no reading is the GPU's problem line).
    nvidia_smi: str | None = None
    # The fabric command's answer (``model.fabric.fabric_command``) with the NCCL libraries' ``sha256``
    # lines the source adds; the fleet state parses it.
    fabric: str | None = None
