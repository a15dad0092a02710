"""Detectors of an instance's numbers: requests with no token (wedged), a decode stall against its own
baseline, the last draft position's acceptance collapsing, KV pressure with preemptions, a start that
never served, and the status model's own verdicts."""

from __future__ import annotations

import statistics

from sparktui.diagnosis.catalogue import Rule
from sparktui.diagnosis.state import NO, SERVING, Check, Ctx, InstanceMemory
from sparktui.model.engines import busiest_engine_words
from sparktui.model.fleet import InstanceView


def requests_without_tokens(ctx: Ctx, rule: Rule, inst: InstanceView, im: InstanceMemory) -> Check | None:
    if inst.url is None:
        return None
    if inst.status.state not in SERVING or inst.asleep:  # asleep: quiet on purpose
        return NO
    canary = inst.canary
    if canary is not None and canary.wedged and canary.last is not None:
        # Idle, or its requests hidden: only a request tells, and the canary got no answer.
        return Check(
            True,
            (
                f"a canary (1-token completion) sent at {ctx.at(canary.last.sent_t)}: {canary.last.problem}",
                "no token generated since",
                f"{inst.health_check} answers 200 ({inst.status.state.value})",
            ),
        )
    if inst.running is None and inst.waiting is None:
        return None
    running, waiting = inst.running or 0.0, inst.waiting or 0.0
    if running + waiting <= 0:
        return NO
    rates = ctx.rates(inst)
    generated = rates.generation_tokens_per_s if rates is not None else None
    if rates is None or generated is None:
        return None
    if generated > 0:
        return NO
    return Check(
        True,
        (
            f"{running:.0f} running, {waiting:.0f} waiting at {ctx.at()}",
            f"0 tokens generated over the last {rates.seconds:.1f} s",
            f"{inst.health_check} answers 200 ({inst.status.state.value})",
        ),
    )


def decode_slow(ctx: Ctx, rule: Rule, inst: InstanceView, im: InstanceMemory) -> Check | None:
    if inst.url is None:
        return None
    if inst.status.state not in SERVING or inst.asleep:  # nor does it learn a baseline
        return NO
    rates = ctx.rates(inst)
    generated = rates.generation_tokens_per_s if rates is not None else None
    running = inst.running
    if rates is None or generated is None or running is None:
        return None
    # The verdict reads the rate over the last ``span_s``, not one interval: a long prompt's chunked
    # prefill holds a running slot for seconds without a token and slows every step, which at low
    # traffic is a dip of several seconds; a throttled or starved GPU stays slow for minutes.
    span = rule.param("span_s")
    recent = im.gen_recent
    # A poll is learned once, however many times the rules are evaluated on it (a screen's redraw).
    new_poll = not im.gen_history or im.gen_history[-1][0] != ctx.now
    if not recent or recent[-1][0] != ctx.now:
        recent.append((ctx.now, generated * rates.seconds, rates.seconds))
    while len(recent) > 1 and recent[1][0] <= ctx.now - span:
        recent.popleft()  # keep one interval reaching back to the span's start
    covered = sum(seconds for _, _, seconds in recent)
    if running <= 0 or generated <= 0:
        return NO  # idle, or no token at all (that is engine-wedged)
    comparable = [rate for _t, busy, rate in im.gen_history if busy <= running]
    median = statistics.median(comparable) if len(comparable) >= rule.param("min_samples") else None
    factor = rule.param("factor")
    over_span = sum(tokens for _, tokens, _ in recent) / covered if covered > 0 else generated
    if median is not None and generated < factor * median:
        if covered < span or over_span >= factor * median:
            return None  # slow this interval; not (yet) for the whole span
        return Check(
            True,
            (
                f"generation {over_span:.1f} tok/s over the last {covered:.0f} s "
                f"({generated:.1f} tok/s in the last {rates.seconds:.1f} s) with {running:.0f} running (at {ctx.at()})",
                f"recent median {median:.1f} tok/s at {running:.0f} or fewer running "
                f"({len(comparable)} polls); under {factor:g} × median = {factor * median:.1f} tok/s",
            ),
        )
    if median is None and len(im.gen_history) >= rule.param("min_samples"):
        overall = statistics.median(rate for _t, _busy, rate in im.gen_history)
        if generated < factor * overall:
            return None  # no baseline at this load, and too slow to teach it one
    if new_poll:
        im.gen_history.append((ctx.now, running, generated))  # the baseline learns only from normal polls
    while len(im.gen_history) > rule.param("history"):
        im.gen_history.popleft()
    return None if median is None else NO


def position_collapse(ctx: Ctx, rule: Rule, inst: InstanceView, im: InstanceMemory) -> Check | None:
    if inst.status.state not in SERVING:
        return NO  # not answering: its numbers are not shown, and a draft that is not run costs nothing
    rates = inst.rates  # the view's window: acceptance is a trend, not one poll
    if rates is None:
        return None
    spec = rates.spec_decode
    if spec is None or spec.num_speculative_tokens < 2:
        return NO
    k = spec.num_speculative_tokens
    last = spec.per_position[-1] if spec.per_position else None
    if spec.drafts < rule.param("min_drafts") or last is None:
        return None
    if im.spec_k != k:
        im.spec_k = k
        im.spec_history.clear()  # relaunched with another num_speculative_tokens: a new baseline
    history = im.spec_history
    enough = len(history) >= rule.param("min_baseline_samples")
    baseline = statistics.median(history) if enough else None
    floor, factor = rule.param("min_acceptance"), rule.param("baseline_factor")
    under_floor = last < floor
    under_baseline = baseline is not None and last < factor * baseline
    if not under_floor and not under_baseline:
        if im.spec_learned_at != ctx.now:  # each poll once, however many times the rules run on it
            im.spec_learned_at = ctx.now
            history.append(last)
        while len(history) > rule.param("baseline_samples"):
            history.popleft()
        return NO
    evidence = [
        f"draft position {k - 1} (the last of {k}) accepted in {last:.3f} of drafts over the last "
        f"{rates.seconds:.0f} s ({spec.drafts:.0f} drafts, at {ctx.at()})"
    ]
    conditional = spec.conditional[-1] if spec.conditional else None
    if conditional is not None:
        evidence.append(f"accepted in {conditional:.2f} of the drafts whose position {k - 2} was accepted")
    if under_floor:
        evidence.append(f"under the catalogue's {floor:g}")
    if baseline is not None:
        relation = f": under {factor:g} × baseline" if under_baseline else ""
        evidence.append(f"its own baseline {baseline:.3f} (median of {len(history)} polls){relation}")
    if spec.acceptance_rate is not None and spec.mean_acceptance_length is not None:
        evidence.append(
            f"acceptance rate {spec.acceptance_rate:.1%}, mean acceptance length "
            f"{spec.mean_acceptance_length:.2f} with num_speculative_tokens = {k}"
        )
    generated = rates.generation_tokens_per_s
    # The polls before this one, whichever rule (the slow-decoding one learns from this poll) ran first.
    before = [rate for t, _busy, rate in im.gen_history if t < ctx.now]
    if generated is not None and len(before) >= 3:
        evidence.append(f"generation {generated:.0f} tok/s (recent median {statistics.median(before):.0f} tok/s)")
    return Check(True, tuple(evidence))


def kv_preemptions(ctx: Ctx, rule: Rule, inst: InstanceView, im: InstanceMemory) -> Check | None:
    if inst.url is None:
        return None
    if inst.status.state not in SERVING:
        return NO  # not answering: nothing is preempted, and its last gauges are not shown
    kv = inst.kv_usage
    rates = ctx.rates(inst)
    preempted = rates.preemptions if rates is not None else None
    if kv is None or rates is None or preempted is None:
        return None
    threshold = rule.param("kv_usage_min")
    if kv < threshold or preempted < rule.param("preemptions_min"):
        return NO
    evidence = [
        f"KV cache {kv:.0%} full{busiest_engine_words(inst.kv)} at {ctx.at()} (threshold {threshold:.0%})",
        f"{preempted:.0f} preemptions over the last {rates.seconds:.1f} s ({(rates.preemptions_per_s or 0.0):.2f}/s)",
    ]
    if inst.waiting:
        evidence.append(f"{inst.waiting:.0f} requests waiting")
    return Check(True, tuple(evidence))


def never_served(ctx: Ctx, rule: Rule, inst: InstanceView, im: InstanceMemory) -> Check | None:
    if inst.url is None:
        return None
    if inst.status.state not in SERVING or im.last_start is None or im.served or inst.asleep:
        return NO  # asleep: it cannot serve until woken, and waking it is the operator's call
    if im.serving_since is None or ctx.now - im.serving_since < rule.param("min_up_s"):
        return NO
    return Check(
        True,
        (
            f"answering since {ctx.at(im.serving_since)}, after a start seen at {ctx.at(im.last_start)}",
            "no request finished and no token generated since the start",
        ),
    )


def status(ctx: Ctx, rule: Rule, inst: InstanceView, im: InstanceMemory) -> Check | None:
    if inst.url is None:
        return None  # a worker's status is its head's
    status = inst.status
    if status.state.value != rule.detector_args["state"]:
        return NO
    pattern = rule.detector_patterns.get("reason")
    matched = [r for r in status.reasons if pattern is None or pattern.search(r)]
    if not matched:
        return NO
    return Check(True, tuple(f"{reason} (at {ctx.at()})" for reason in matched))
