"""The ``instagram.inbound`` job: one comment, mention or DM answered by its agent; and the
``instagram.poll`` job that finds them without webhooks (:mod:`.poller`).

The webhook receiver stores each event as a job (:mod:`.webhook`); a worker that runs the
agent's Instagram client claims it and answers it (:func:`.conversation.answer_event`). A worker
where the agent does not run leaves it for a while (the worker that runs it claims it first,
as it handles the same kind); an agent that runs without its Instagram client, or no longer
exists, fails it with the reason. A job stored before its account was matched to an agent (a
delivery for an agent created since) is matched here.

Several workers may share the job store: the job's lease keeps one worker on it at a time,
the lease is checked right before a reply is sent, and a job taken over from a worker that died
settles what that worker left (see :mod:`.conversation`), so a comment or DM is answered once.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping
from datetime import timedelta
from typing import Any

from carrier.agents import AgentNotFound
from carrier.jobs.errors import AwaitApproval, Defer, PermanentFailure
from carrier.jobs.handler import JobContext
from carrier.jobs.model import Job, JobState
from carrier.jobs.service import JobService
from carrier.logtail import agent_logs, job_logs
from clients.instagram.errors import OperatorActionRequired, RetryLater
from clients.instagram.inbound.events import InboundEvent
from clients.instagram.inbound.poller import POLL_JOB_KIND
from clients.instagram.inbound.webhook import INBOUND_JOB_KIND, AccountIndex, event_of

__all__ = ["InboundJobs", "register_inbound_jobs"]

log = logging.getLogger(__name__)

MIN_WAIT_S = 30.0
"""The shortest wait after a cooldown (never a spin on a clock behind the platform's)."""
NOT_RUNNING_WAIT_S = 60.0
"""How long an event waits for its agent to run in the worker that claimed it."""


class InboundJobs:
    def __init__(self, manager: Any) -> None:
        self.manager = manager
        self.accounts = AccountIndex(manager)

    async def inbound(self, job: Job, ctx: JobContext) -> Mapping[str, Any] | None:
        event = event_of(job.payload)
        agent_id = job.agent_id or await self.accounts.agent_for(event.account_id)
        if agent_id is None:
            raise PermanentFailure(
                f"no agent has the Instagram account {event.account_id}: set "
                "clientConfig.instagram.igUserId (or INSTAGRAM_BUSINESS_ACCOUNT_ID) on its "
                "character, then retry this job"
            )
        with agent_logs(agent_id):  # a job stored before its account was matched has none
            return await self._answer(job, ctx, event, agent_id)

    async def _answer(
        self, job: Job, ctx: JobContext, event: InboundEvent, agent_id: str
    ) -> Mapping[str, Any] | None:
        client = await self._client(agent_id)
        approved = str(job.payload.get("reply") or "") if job.approved else None
        try:
            with _platform_says(ctx):
                return await client.answer(
                    event,
                    again=job.attempts > 1 or job.crashes > 0 or job.approved,
                    fence=ctx.ensure_held,
                    approved=approved,
                )
        except AwaitApproval:
            # As for a posting draft: the agent's clients that take approvals (Discord's
            # approval channel, with buttons) are told, by a job of its own.
            from clients.instagram.jobs import NOTICE_JOB_KIND

            rounds = sum(1 for e in job.history if e.state is JobState.AWAITING_APPROVAL)
            await ctx.store.enqueue(
                NOTICE_JOB_KIND,
                agent_id=agent_id,
                payload={"job_id": job.id},
                idempotency_key=f"instagram:notice:{job.id}:{rounds}",
                max_attempts=5,
            )
            raise

    async def poll(self, job: Job, ctx: JobContext) -> Mapping[str, Any] | None:
        """``instagram.poll``: new comments and DMs stored as ``instagram.inbound`` jobs."""
        if job.agent_id is None:
            raise PermanentFailure("the instagram.poll job names no agent")
        client = await self._client(job.agent_id)
        with _platform_says(ctx):
            return await client.poll(jobs=ctx.store, now=ctx.now())

    async def _client(self, agent_id: str) -> Any:
        from clients.instagram.client import InstagramClient

        client = self.manager.client(agent_id, "instagram")
        if isinstance(client, InstagramClient):
            return client
        try:
            status = await self.manager.status(agent_id)
        except AgentNotFound:
            raise PermanentFailure(f"agent {agent_id} no longer exists") from None
        if status.running:
            why = status.skipped.get("instagram", "instagram is not among its clients")
            raise PermanentFailure(
                f"agent {status.record.name} runs without its Instagram client ({why}); fix "
                "that, restart the agent and retry this job"
            )
        raise Defer(
            delay_s=NOT_RUNNING_WAIT_S,
            reason=f"agent {status.record.name} is not running in this process; waiting for it",
        )


@contextlib.contextmanager
def _platform_says(ctx: JobContext) -> Iterator[None]:
    """Instagram's answers as the job's: an account that needs a human (a challenge, a password)
    fails the job with what to do; a cooldown or quota waits without using an attempt."""
    try:
        yield
    except OperatorActionRequired as exc:
        raise PermanentFailure(str(exc)) from exc
    except RetryLater as wait:
        until = max(wait.retry_at, ctx.now() + timedelta(seconds=MIN_WAIT_S))
        raise Defer(until=until, reason=wait.reason) from wait


def register_inbound_jobs(service: JobService, manager: Any) -> InboundJobs:
    """Register ``instagram.inbound`` on ``service``'s worker (called by
    :func:`clients.instagram.jobs.register_instagram_jobs`)."""
    handlers = InboundJobs(manager)
    service.worker.register(INBOUND_JOB_KIND, handlers.inbound, max_concurrent=4)
    service.worker.register(POLL_JOB_KIND, job_logs(handlers.poll), max_concurrent=1)
    return handlers
