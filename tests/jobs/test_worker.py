"""Worker: what each way of ending an attempt records (success, retry, failure, wait, approval)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import pytest

from carrier.jobs import (
    AwaitApproval,
    Backoff,
    Defer,
    Job,
    JobContext,
    JobState,
    JobStore,
    ManualClock,
    PermanentFailure,
    Worker,
)
from tests.jobs.conftest import at


def make_worker(jobs: JobStore, clock: ManualClock, backoff: Backoff, **kw: Any) -> Worker:
    return Worker(store=jobs, clock=clock, backoff=backoff, worker_id="w1", **kw)


async def stored(jobs: JobStore, job: Job) -> Job:
    got = await jobs.get(job.id)
    assert got is not None
    return got


async def test_handler_result_is_recorded(
    jobs: JobStore, clock: ManualClock, no_jitter: Backoff
) -> None:
    seen: list[tuple[Job, JobContext]] = []

    async def handler(job: Job, ctx: JobContext) -> Mapping[str, Any]:
        seen.append((job, ctx))
        return {"echo": job.payload["n"], "at": ctx.now()}

    worker = make_worker(jobs, clock, no_jitter, services={"publisher": "fake"})
    worker.register("echo", handler)
    job = await jobs.enqueue("echo", payload={"n": 7})
    assert await worker.tick() == 1
    await worker.join()
    done = await stored(jobs, job)
    assert done.state is JobState.SUCCEEDED
    assert done.result == {"echo": 7, "at": at(0).isoformat().replace("+00:00", "Z")}
    [(running, ctx)] = seen
    assert running.state is JobState.RUNNING and running.attempts == 1
    assert (ctx.worker_id, ctx.services["publisher"], ctx.store) == ("w1", "fake", jobs)
    assert worker.stats.claimed == worker.stats.succeeded == 1


async def test_failures_retry_with_capped_backoff_then_fail(
    jobs: JobStore, clock: ManualClock, no_jitter: Backoff
) -> None:
    async def broken(job: Job, ctx: JobContext) -> None:
        raise RuntimeError(f"attempt {job.attempts}")

    worker = make_worker(jobs, clock, no_jitter)
    worker.register("k", broken)
    job = await jobs.enqueue("k", max_attempts=5)
    delays = []
    for _ in range(4):
        await worker.drain()
        retried = await stored(jobs, job)
        assert retried.state is JobState.PENDING
        delays.append((retried.run_at - clock()).total_seconds())
        clock.set(retried.run_at)
    assert delays == [10, 20, 40, 60]  # 10 s doubling, capped at 60 s
    await worker.drain()
    failed = await stored(jobs, job)
    assert (failed.state, failed.attempts) == (JobState.FAILED, 5)
    assert failed.last_error == "RuntimeError: attempt 5"
    assert (worker.stats.retried, worker.stats.failed) == (4, 1)


async def test_permanent_failure_is_not_retried(
    jobs: JobStore, clock: ManualClock, no_jitter: Backoff
) -> None:
    async def refuse(job: Job, ctx: JobContext) -> None:
        raise PermanentFailure("media file is missing")

    worker = make_worker(jobs, clock, no_jitter)
    worker.register("k", refuse)
    job = await jobs.enqueue("k", max_attempts=5)
    await worker.drain()
    failed = await stored(jobs, job)
    assert (failed.state, failed.attempts) == (JobState.FAILED, 1)
    assert failed.last_error == "PermanentFailure: media file is missing"


async def test_a_result_that_is_not_a_dict_fails_without_retry(
    jobs: JobStore, clock: ManualClock, no_jitter: Backoff
) -> None:
    async def odd(job: Job, ctx: JobContext) -> Any:
        return ["not", "a", "dict"]

    worker = make_worker(jobs, clock, no_jitter)
    worker.register("k", odd)
    job = await jobs.enqueue("k")
    await worker.drain()
    failed = await stored(jobs, job)
    assert failed.state is JobState.FAILED
    assert "unusable result" in (failed.last_error or "")


async def test_timeout_fails_the_attempt(
    jobs: JobStore, clock: ManualClock, no_jitter: Backoff
) -> None:
    async def hang(job: Job, ctx: JobContext) -> None:
        await asyncio.Event().wait()  # never set: only the timeout ends it

    worker = make_worker(jobs, clock, no_jitter)
    worker.register("k", hang)
    job = await jobs.enqueue("k", timeout_s=0.01, max_attempts=2)
    await worker.drain()
    retried = await stored(jobs, job)
    assert retried.state is JobState.PENDING
    assert retried.last_error == "timed out after 0.01 s"
    assert retried.run_at == at(10)


async def test_a_handlers_own_timeout_error_is_an_ordinary_failure(
    jobs: JobStore, clock: ManualClock, no_jitter: Backoff
) -> None:
    async def slow_api(job: Job, ctx: JobContext) -> None:
        raise TimeoutError("the API did not answer")

    worker = make_worker(jobs, clock, no_jitter)
    worker.register("k", slow_api)
    job = await jobs.enqueue("k")
    await worker.drain()
    assert (await stored(jobs, job)).last_error == "TimeoutError: the API did not answer"


async def test_defer_waits_without_using_an_attempt(
    jobs: JobStore, clock: ManualClock, no_jitter: Backoff
) -> None:
    calls = 0

    async def quota(job: Job, ctx: JobContext) -> Mapping[str, Any]:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise Defer(until=ctx.now() + timedelta(hours=1), reason="25 posts a day")
        if calls == 2:
            raise Defer(delay_s=60, reason="rate limited")
        return {"posted": True}

    worker = make_worker(jobs, clock, no_jitter)
    worker.register("k", quota)
    job = await jobs.enqueue("k", max_attempts=1)
    await worker.drain()
    waiting = await stored(jobs, job)
    assert (waiting.state, waiting.attempts, waiting.run_at) == (JobState.PENDING, 0, at(3600))
    clock.advance(3600)
    await worker.drain()
    assert (await stored(jobs, job)).run_at == at(3660)
    clock.advance(60)
    await worker.drain()
    done = await stored(jobs, job)
    assert (done.state, done.attempts) == (JobState.SUCCEEDED, 1)
    assert worker.stats.deferred == 2


def test_defer_needs_exactly_one_time() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        Defer(reason="x")


async def drafting_handler(job: Job, ctx: JobContext) -> Mapping[str, Any]:
    """Drafts a caption for approval, then publishes what was approved."""
    if not job.approved:
        raise AwaitApproval(reason="caption drafted", payload={"caption": "draft"})
    return {"published": job.payload["caption"]}


async def test_approval_then_the_approved_payload_runs(
    jobs: JobStore, clock: ManualClock, no_jitter: Backoff
) -> None:
    worker = make_worker(jobs, clock, no_jitter, approval_ttl_s=3600)
    worker.register("post", drafting_handler)
    job = await jobs.enqueue("post", payload={"media": "m1"}, max_attempts=1)
    await worker.drain()
    waiting = await stored(jobs, job)
    assert waiting.state is JobState.AWAITING_APPROVAL
    assert waiting.payload == {"media": "m1", "caption": "draft"}
    assert (waiting.attempts, waiting.approval_expires_at) == (0, at(3600))
    await worker.drain()  # nothing to do while it waits
    await jobs.approve(job.id, payload={**waiting.payload, "caption": "edited"})
    await worker.drain()
    done = await stored(jobs, job)
    assert done.state is JobState.SUCCEEDED
    assert done.result == {"published": "edited"}
    assert worker.stats.awaiting_approval == 1


async def test_rejected_drafts_never_run_again(
    jobs: JobStore, clock: ManualClock, no_jitter: Backoff
) -> None:
    worker = make_worker(jobs, clock, no_jitter)
    worker.register("post", drafting_handler)
    job = await jobs.enqueue("post")
    await worker.drain()
    await jobs.reject(job.id, reason="off brand")
    await worker.drain()
    assert (await stored(jobs, job)).state is JobState.CANCELLED
    assert worker.stats.claimed == 1


@pytest.mark.parametrize("to", [JobState.CANCELLED, JobState.FAILED])
async def test_worker_expires_approvals_past_their_time(
    jobs: JobStore, clock: ManualClock, no_jitter: Backoff, to: JobState
) -> None:
    worker = make_worker(
        jobs,
        clock,
        no_jitter,
        approval_ttl_s=600,
        expired_approval_state=to,
        approval_check_s=0,
    )
    worker.register("post", drafting_handler)
    job = await jobs.enqueue("post")
    await worker.drain()
    clock.advance(599)
    await worker.tick()
    assert (await stored(jobs, job)).state is JobState.AWAITING_APPROVAL
    clock.advance(1)
    await worker.tick()
    expired = await stored(jobs, job)
    assert expired.state is to
    assert "approval expired" in (expired.last_error or "")


async def test_approval_signal_may_set_its_own_expiry(
    jobs: JobStore, clock: ManualClock, no_jitter: Backoff
) -> None:
    async def urgent(job: Job, ctx: JobContext) -> None:
        raise AwaitApproval(expires_in_s=60)

    worker = make_worker(jobs, clock, no_jitter, approval_ttl_s=None)
    worker.register("k", urgent)
    job = await jobs.enqueue("k")
    await worker.drain()
    assert (await stored(jobs, job)).approval_expires_at == at(60)
