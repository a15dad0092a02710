"""Detectors of the fabric between the ranks of a multi-node job (issue 21): a degraded RDMA link, a
rank spinning while the job is flat, ranks mapping different NCCL libraries."""

from __future__ import annotations

from sparktui.diagnosis.catalogue import Rule
from sparktui.diagnosis.detectors.gpu import gpu_now
from sparktui.diagnosis.state import NO, Check, Ctx
from sparktui.model.fabric import RANK_HEADER, FabricView, JobView, rank_line, short_sums
from sparktui.model.units import NO_DATA, fmt_bits, fmt_rate


def _fabric_now(ctx: Ctx, rule: Rule) -> FabricView | None:
    """The node's fabric reading, when it is fresh (three of its periods at most)."""
    fabric = ctx.node.fabric
    if fabric is None or fabric.age_s is None or fabric.age_s > rule.param("max_age_s"):
        return None
    return fabric


def _job_words(job: JobView) -> str:
    tokens = NO_DATA if job.tokens_per_s is None else f"{job.tokens_per_s:,.0f} tok/s"
    return f"job {job.name} generates {tokens}"


def link_degraded(ctx: Ctx, rule: Rule) -> Check | None:
    fabric = _fabric_now(ctx, rule)
    if fabric is None or not ctx.node.jobs:
        return None
    # The job runs while its head answers; it transfers while the head generates tokens.
    running = sorted(
        (job for job in ctx.node.jobs if job.tokens_per_s is not None), key=lambda j: -(j.tokens_per_s or 0)
    )
    if not running:
        return NO
    job, link = running[0], fabric.link
    transferring = (job.tokens_per_s or 0.0) >= rule.param("min_tokens_per_s")
    if link is None:
        return Check(True, (f"no RDMA NIC is read on this node while {_job_words(job)} (at {ctx.at()})",))
    if not link.up:
        return Check(True, (f"RDMA link {link.nic} is {link.state or 'in an unknown state'} while {_job_words(job)}",))
    evidence = []
    expected = rule.param("expected_mbps") * 1e6
    if link.speed_bps is not None and link.speed_bps < expected:
        evidence.append(
            f"{link.nic} negotiated {fmt_bits(link.speed_bps)}, below the {fmt_bits(expected)} it is capable of"
        )
    rates, share = link.rates, link.share
    if transferring and rates is not None and share is not None and share < rule.param("max_share"):
        errors = sum(rates.errors_per_s.values())
        pauses = rates.pauses_per_s or 0.0
        if errors >= rule.param("min_errors_per_s") or pauses >= rule.param("min_pauses_per_s"):
            named = ", ".join(f"{name} {fmt_rate(value)}" for name, value in sorted(rates.errors_per_s.items()))
            moves = f"{fmt_bits(link.busiest_bps)}, {share * 100:.1f} % of its {fmt_bits(link.speed_bps)}"
            evidence.append(
                f"{link.nic} moves {moves}, while it drops or pauses: {named or 'no drops'}, "
                f"{fmt_rate(pauses)} pause frames"
            )
    if not evidence:
        return NO
    return Check(True, (*evidence, f"{_job_words(job)} (at {ctx.at()})"))


def rank_spinning(ctx: Ctx, rule: Rule) -> Check | None:
    gpu = gpu_now(ctx)
    if gpu is None or gpu.utilization is None or gpu.power_w is None or not ctx.node.jobs:
        return None
    spinning = gpu.utilization >= rule.param("min_utilization") and gpu.power_w < rule.param("max_power_w")
    flat = [
        job
        for job in ctx.node.jobs
        if job.tokens_per_s is not None and job.tokens_per_s <= rule.param("max_tokens_per_s")
    ]
    if not spinning or not flat:
        return NO
    job = flat[0]
    return Check(
        True,
        (
            f"this rank's GPU reads {gpu.utilization * 100:.0f} % busy at {gpu.power_w:.1f} W while "
            f"{_job_words(job)} (at {ctx.at()})",
            RANK_HEADER,
            *(rank_line(rank) for rank in job.ranks),
        ),
    )


def nccl_mismatch(ctx: Ctx, rule: Rule) -> Check | None:
    fabric = ctx.node.fabric
    if fabric is None or not ctx.node.jobs:
        return None
    mine = fabric.nccl_checksums
    if not mine:
        return None
    for job in ctx.node.jobs:
        others = [r for r in job.ranks if r.node != ctx.node.name and r.nccl]
        differ = [r for r in others if r.nccl != mine]
        if differ:
            paths = ", ".join(sorted({lib.path for lib in fabric.nccl}))
            theirs = "; ".join(f"{r.node} maps {short_sums(r.nccl)}" for r in differ)
            return Check(
                True,
                (
                    f"this node's vLLM maps NCCL {short_sums(mine)} ({paths})",
                    f"{theirs}: the ranks of job {job.name} run different NCCL libraries",
                ),
            )
    return NO
