"""Matching the engines that answered over HTTP with the launches SSH found: the config's instances.

vLLM's answers go with vLLM's launches, llama-server's with llama-server's, SGLang's with SGLang's,
each by host port; and TensorRT-LLM's, NIM's and Ollama's the same way.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from sparktui.discovery.launches import Launch
from sparktui.discovery.probes import LlamaAnswer, NimAnswer, OllamaAnswer, SglangAnswer, TrtllmAnswer, VllmAnswer


class _Answer(Protocol):
    @property
    def port(self) -> int: ...


AnswerT = TypeVar("AnswerT", bound=_Answer)


@dataclass(frozen=True, slots=True)
class Planned(Generic[AnswerT]):
    """One instance for the config: what answered on its port, and the launch that runs it."""

    port: int | None
    http: AnswerT | None
    launch: Launch | None
    paired: bool = False  # matched by elimination, not by port


PlannedVllm = Planned[VllmAnswer]
PlannedLlama = Planned[LlamaAnswer]
PlannedSglang = Planned[SglangAnswer]
PlannedTrtllm = Planned[TrtllmAnswer]
PlannedNim = Planned[NimAnswer]
PlannedOllama = Planned[OllamaAnswer]


def _worker(launch: Launch) -> bool:
    return launch.vllm is not None and launch.vllm.headless


def plan_instances(
    answers: Sequence[AnswerT], launches: Sequence[Launch], taken: Collection[int] = ()
) -> tuple[list[Planned[AnswerT]], list[Launch], list[str]]:
    """Entries for the config, launches left out (comment only), and notes; ``taken``: ports other
    entries (another engine's) already have.

    A launch goes with the answer on its host port. A live launch whose port does not answer is still
    an entry (a server in a crash loop is exactly one to watch). When exactly one answer and exactly one
    live launch with an unknown port are left, they are paired, with a comment.
    """
    planned: list[Planned[AnswerT]] = []
    notes: list[str] = []
    left = list(launches)
    for answer in answers:
        # A --headless worker serves no HTTP: its --port is not where anything answers.
        on_port = [launch for launch in left if launch.host_port == answer.port and not _worker(launch)]
        on_port.sort(key=lambda launch: not launch.alive)
        chosen = on_port[0] if on_port else None
        if chosen is not None:
            left.remove(chosen)
            for other in on_port[1:]:
                notes.append(f"{other.label} ({other.state}) also uses port {answer.port}; it is left out")
                left.remove(other)
        planned.append(Planned(port=answer.port, http=answer, launch=chosen))
    unmatched_http = [p for p in planned if p.launch is None]
    unknown_port = [launch for launch in left if launch.host_port is None and launch.alive and not _worker(launch)]
    if len(unmatched_http) == 1 and len(unknown_port) == 1:
        index = planned.index(unmatched_http[0])
        planned[index] = Planned(
            port=unmatched_http[0].port, http=unmatched_http[0].http, launch=unknown_port[0], paired=True
        )
        left.remove(unknown_port[0])
    taken_ports = {*taken, *(p.port for p in planned)}
    left_out: list[Launch] = []
    for launch in left:
        if (
            launch.alive
            and launch.host_port is not None
            and launch.host_port not in taken_ports
            and not _worker(launch)
        ):
            planned.append(Planned(port=launch.host_port, http=None, launch=launch))
            taken_ports.add(launch.host_port)
        else:
            left_out.append(launch)
    return planned, left_out, notes
