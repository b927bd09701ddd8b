"""The job handlers of scheduled Instagram posting, and how the host registers them.

Three job kinds:

``instagram.post``
    Made by a plan's schedule (payload ``{"source": "plan"}``) or by an upload
    (``{"source": "upload", "upload_id": ...}``). Takes the media (the next unused library file,
    or the upload), writes the caption (or takes the uploader's), then either parks the draft for
    approval (``AwaitApproval`` with the draft in ``payload["draft"]``, expiring after the plan's
    ``approvalExpiry``) or hands it on. Once approved it runs again and hands on the draft as
    approved (with the operator's edits). Handing on = enqueueing one ``instagram.publish`` job,
    keyed by this job's id.
``instagram.publish``
    Publishes the draft with :func:`~clients.instagram.publish_post`, keyed by the post job's id,
    so a post goes out once whatever is retried. ``RetryLater`` becomes a wait without an attempt;
    ``PublishUncertain`` and transient errors are retried with backoff (``publish_post`` checks
    before publishing again); rejected media or captions and account problems fail the job with
    the platform's message. On success (or a dry run) the post is stored as a ``post`` memory and
    the upload's memory is marked ``processed``. The publishing call is fenced by the job's lease
    (a worker whose job was taken over stops before it), and a post that is live is recorded as
    the job's committed progress: from then on the job never fails (a later failure ends it
    succeeded, with a warning). A live post whose media id or permalink is not known yet (its
    publish answer was lost and no media list shows it) succeeds with a warning and hands on
    to ``instagram.permalink``.
``instagram.permalink``
    Looks up the media id and permalink of a live post until a media list shows it, and records
    them in the post's state and memory (:mod:`clients.instagram.permalinks`).
``instagram.approval_notice``
    Tells the agent's other clients that a draft awaits approval: each running client with a
    ``request_approval(job)`` coroutine (the Discord client, when it has an approval channel) is
    called once the draft is recorded.

The host wires them up before it starts its agents (``carrier run``)::

    service = JobService.from_settings(settings)
    register_instagram_jobs(service, manager)     # also puts the job store in manager.services
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from carrier.agents import AgentManager, AgentNotFound
from carrier.jobs.errors import AwaitApproval, Defer, JobSignal, LeaseLost, PermanentFailure
from carrier.jobs.handler import JobContext
from carrier.jobs.model import Job, JobState
from carrier.jobs.service import JobService
from carrier.logtail import job_logs
from carrier.types import MemoryStatus
from clients.instagram.auditing import record_approval, record_publish
from clients.instagram.caption import prepare_caption
from clients.instagram.client import InstagramClient
from clients.instagram.drafts import Draft, record_post
from clients.instagram.errors import (
    CaptionRejected,
    ContainerFailed,
    MediaRejected,
    OperatorActionRequired,
    RetryLater,
)
from clients.instagram.inbound.handler import register_inbound_jobs
from clients.instagram.library import post_kind_of
from clients.instagram.permalinks import (
    PERMALINK_JOB_KIND,
    follow_up,
    look_up,
    record_permalink,
)
from clients.instagram.plan import PLAN_JOB_KIND, plan_schedule_prefix
from clients.instagram.post import Phase, PostKind, PublishResult, PublishState
from clients.instagram.writer import CaptionRequest, write_caption

__all__ = [
    "NOTICE_JOB_KIND",
    "PERMALINK_JOB_KIND",
    "POST_JOB_KIND",
    "PUBLISH_JOB_KIND",
    "InstagramJobs",
    "register_instagram_jobs",
]

log = logging.getLogger(__name__)

POST_JOB_KIND = PLAN_JOB_KIND
PUBLISH_JOB_KIND = "instagram.publish"
NOTICE_JOB_KIND = "instagram.approval_notice"

MIN_WAIT_S = 30.0
"""The shortest wait after ``RetryLater`` (quota, cooldown, container still processing)."""
NOT_RUNNING_WAIT_S = 600.0
"""How long a job waits for an agent that is not running in this process before it looks again."""


class InstagramJobs:
    """The handlers, bound to the agent manager that runs the agents and their clients."""

    def __init__(self, manager: AgentManager) -> None:
        self.manager = manager

    # -- instagram.post --------------------------------------------------------------------
    async def post(self, job: Job, ctx: JobContext) -> Mapping[str, Any] | None:
        client = await self._client(job, ctx)
        draft = Draft.from_payload(job.payload)
        if job.approved and draft is not None:
            await record_approval(self.manager.services, job, draft)
            return await self._hand_on(job, ctx, draft)
        if job.payload.get("source") == "plan" and await self._superseded(job, ctx):
            return {"skipped": "a later slot of the plan is due too (the agent was not running)"}
        draft = await self._draft(job, ctx, client)
        if draft is None:
            folder = client.library.root if client.library is not None else "(none)"
            log.warning("instagram: %s has no unused media in %s", client.agent_id, folder)
            return {"skipped": f"every file in the library {folder} has been posted"}
        if client.approval_required and not job.approved:
            rounds = sum(1 for e in job.history if e.state is JobState.AWAITING_APPROVAL)
            await ctx.store.enqueue(
                NOTICE_JOB_KIND,
                agent_id=job.agent_id,
                payload={"job_id": job.id},
                idempotency_key=f"instagram:notice:{job.id}:{rounds}",
                max_attempts=5,
            )
            raise AwaitApproval(
                reason="the Instagram draft waits for approval",
                payload={"draft": draft.model_dump(mode="json")},
                expires_in_s=client.plan.approval_expiry,
            )
        return await self._hand_on(job, ctx, draft)

    async def _superseded(self, job: Job, ctx: JobContext) -> bool:
        """Whether a later plan slot of the same agent is due as well: slots missed while the
        agent was stopped collapse into the latest one instead of posting in a burst."""
        if job.approved or "draft" in job.payload:
            return False
        now = ctx.now()
        pending = await ctx.store.list_jobs(
            states=[JobState.PENDING], kind=job.kind, agent_id=job.agent_id, limit=None
        )
        return any(
            other.id != job.id
            and other.payload.get("source") == "plan"
            and other.created_at > job.created_at  # a later slot (made after this one)
            and other.run_at <= now
            for other in pending
        )

    async def _draft(self, job: Job, ctx: JobContext, client: InstagramClient) -> Draft | None:
        runtime = client.runtime
        dry_run = client.dry_run
        if job.payload.get("source") == "upload":
            upload_id = str(job.payload.get("upload_id") or "")
            memory = await runtime.store.get_memory(upload_id)
            if memory is None:
                raise PermanentFailure(f"the upload {upload_id} was deleted; nothing to post")
            files = [a for a in memory.content.attachments if a.path]
            if not files:
                raise PermanentFailure(f"the upload {upload_id} has no file")
            media = [str(a.path) for a in files]
            video = (files[0].content_type or "").startswith("video/")
            kind = PostKind.REEL if video else post_kind_of(Path(media[0]))
            if len(media) > 1 and kind is PostKind.PHOTO:
                kind = PostKind.CAROUSEL
            given = memory.content.text.strip()
            draft = Draft(
                post_key=job.id,
                kind=kind,
                media=media,
                source="upload",
                upload_id=upload_id,
                dry_run=dry_run,
            )
            if given:
                try:
                    caption = prepare_caption(
                        given,
                        max_hashtags=client.max_hashtags,
                        max_length=client.plan.caption.max_length,
                    )
                except CaptionRejected as exc:
                    await runtime.store.set_memory_status(
                        upload_id, MemoryStatus.FAILED, error=str(exc)
                    )
                    raise PermanentFailure(str(exc)) from exc
                return draft.model_copy(update={"caption": caption, "caption_by": "uploader"})
            name = files[0].title or Path(media[0]).name
            return await self._write(client, draft, media_name=name, notes="")
        library = client.library
        if library is None:
            raise PermanentFailure(
                "the posting plan has no media.library folder to take media from"
            )
        pick = await library.take(job.id, now=ctx.now(), dry_run=dry_run)
        if pick is None:
            return None
        draft = Draft(
            post_key=job.id,
            kind=post_kind_of(pick.path),
            media=[str(pick.path)],
            source="library",
            library_file=pick.name,
            dry_run=dry_run,
        )
        return await self._write(client, draft, media_name=pick.name, notes=pick.notes)

    async def _write(
        self, client: InstagramClient, draft: Draft, *, media_name: str, notes: str
    ) -> Draft:
        runtime = client.runtime
        rules = client.plan.caption
        try:
            written = await write_caption(
                character=runtime.character,
                model=runtime.model,
                embedder=runtime.embedder,
                store=runtime.store,
                agent_id=client.agent_id,
                request=CaptionRequest(
                    key=draft.post_key,
                    kind=draft.kind.value,
                    media_name=media_name,
                    notes=notes,
                    max_hashtags=client.max_hashtags,
                    max_length=rules.max_length,
                    similarity=rules.similarity,
                    recent_posts=rules.recent_posts,
                    instructions=rules.instructions,
                    dry_run=draft.dry_run,
                ),
            )
        except CaptionRejected as exc:
            if draft.upload_id:
                await runtime.store.set_memory_status(
                    draft.upload_id, MemoryStatus.FAILED, error=str(exc)
                )
            raise PermanentFailure(str(exc)) from exc
        return draft.model_copy(
            update={
                "caption": written.text,
                "caption_by": "model",
                "similarity": written.similarity,
            }
        )

    async def _hand_on(self, job: Job, ctx: JobContext, draft: Draft) -> Mapping[str, Any]:
        publish = await ctx.store.enqueue(
            PUBLISH_JOB_KIND,
            agent_id=job.agent_id,
            payload={"draft": draft.model_dump(mode="json"), "post_job_id": job.id},
            idempotency_key=f"instagram:publish:{job.id}",
            max_attempts=5,
        )
        return {
            "draft": draft.model_dump(mode="json"),
            "approved": job.approved,
            "publish_job_id": publish.id,
        }

    # -- instagram.publish -----------------------------------------------------------------
    async def publish(self, job: Job, ctx: JobContext) -> Mapping[str, Any] | None:
        """Publish, and record in the audit log a post that went out or failed for good."""
        services = self.manager.services
        draft = Draft.from_payload(job.payload)
        try:
            result = await self._publish(job, ctx)
        except PermanentFailure as exc:
            await record_publish(services, job, draft, error=str(exc))
            raise
        except (JobSignal, LeaseLost):
            raise
        except Exception as exc:
            live = await self._live(job, ctx)  # committed: the job can no longer fail
            if job.attempts >= job.max_attempts:  # the worker ends it for good now
                if live is not None:  # succeeded, with this error as its warning
                    await record_publish(services, job, draft, result=_progress(live))
                else:
                    error = f"{type(exc).__name__}: {exc}"
                    await record_publish(services, job, draft, error=error)
            raise
        await record_publish(services, job, draft, result=result)
        return result

    async def _publish(self, job: Job, ctx: JobContext) -> Mapping[str, Any]:
        draft = Draft.from_payload(job.payload)
        if draft is None:
            raise PermanentFailure("the publish job has no draft in its payload")
        client = await self._client(job, ctx)
        store = client.runtime.store
        state = await client.states.load(draft.post_key)
        if state is None or state.phase is not Phase.PUBLISHED:  # live posts need no media
            missing = await asyncio.to_thread(_missing, draft.media)
            if missing:
                message = f"media file(s) gone before publishing: {', '.join(missing)}"
                await self._upload_failed(client, draft, message)
                raise PermanentFailure(message)
        try:
            result = await client.publish(
                draft.post(), dry_run=draft.dry_run, fence=ctx.ensure_held
            )
        except RetryLater as wait:
            # Never sooner than MIN_WAIT_S: a publisher clock behind the worker's must not spin.
            until = max(wait.retry_at, ctx.now() + timedelta(seconds=MIN_WAIT_S))
            raise Defer(until=until, reason=wait.reason) from wait
        except ContainerFailed as exc:
            if exc.status_code == "EXPIRED":
                raise  # the next attempt prepares the post again
            await self._upload_failed(client, draft, str(exc))
            raise PermanentFailure(str(exc)) from exc
        except (MediaRejected, CaptionRejected, OperatorActionRequired) as exc:
            await self._upload_failed(client, draft, str(exc))
            raise PermanentFailure(str(exc)) from exc
        # PublishUncertain and transient errors propagate: retried with backoff, and
        # publish_post checks what happened before it publishes anything again.
        if not result.dry_run:  # it is live: whatever fails from here, the job does not
            await ctx.checkpoint(_progress(result), committed=True)
            if result.media_id is None or result.permalink is None:  # a takeover found it live
                found = await look_up(client, draft.post_key)
                if found is not None:
                    result = result.model_copy(
                        update={"media_id": found.media_id, "permalink": found.permalink}
                    )
        memory = await record_post(
            store=store,
            embedder=client.runtime.embedder,
            agent_id=client.agent_id,
            draft=draft,
            result=result,
            job_id=job.id,
        )
        if draft.upload_id and not draft.dry_run:
            await store.set_memory_status(draft.upload_id, MemoryStatus.PROCESSED)
        if draft.dry_run:
            log.info("instagram: dry run, would have posted %s: %r", draft.media, result.caption)
        done: dict[str, Any] = {
            **result.model_dump(mode="json"),
            "media": [Path(p).name for p in draft.media],
            "memory_id": memory.id,
        }
        if not result.dry_run and (result.media_id is None or result.permalink is None):
            done.update(await follow_up(job, ctx, draft.post_key))
        return done

    async def _live(self, job: Job, ctx: JobContext) -> PublishState | None:
        """The post's state if it is live, recorded as the job's committed progress (the post
        is out: a failure now must not fail the job); ``None`` if it is not live (or unknown)."""
        draft = Draft.from_payload(job.payload)
        client = self.manager.client(job.agent_id or "", "instagram")
        if draft is None or not isinstance(client, InstagramClient):
            return None
        try:
            state = await client.states.load(draft.post_key)
            if state is None or state.phase is not Phase.PUBLISHED:
                return None
            await ctx.checkpoint(_progress(state), committed=True)
        except Exception:
            log.exception("instagram: job %s: reading the post's state failed", job.id)
            return None
        return state

    async def _upload_failed(self, client: InstagramClient, draft: Draft, error: str) -> None:
        if draft.upload_id:
            await client.runtime.store.set_memory_status(
                draft.upload_id, MemoryStatus.FAILED, error=error
            )

    # -- instagram.approval_notice ---------------------------------------------------------
    async def notice(self, job: Job, ctx: JobContext) -> Mapping[str, Any] | None:
        target = await ctx.store.get(str(job.payload.get("job_id")))
        if target is None:
            return {"skipped": "the draft's job is gone"}
        if target.state in (JobState.CLAIMED, JobState.RUNNING):
            raise Defer(delay_s=5.0, reason="the draft is still being recorded")
        if target.state is not JobState.AWAITING_APPROVAL:
            return {"skipped": f"the draft's job is {target.state.value}"}
        agent_id = target.agent_id
        if agent_id is None:
            return {"skipped": "the draft's job has no agent"}
        try:
            status = await self.manager.status(agent_id)
        except AgentNotFound:
            return {"skipped": f"agent {agent_id} no longer exists"}
        sent: dict[str, str] = {}
        for name in status.clients:
            request = getattr(self.manager.client(agent_id, name), "request_approval", None)
            if request is None:
                continue
            reference = await request(target)
            if reference:
                sent[name] = str(reference)
        return {"sent": sent}

    # -- instagram.permalink ---------------------------------------------------------------
    async def permalink(self, job: Job, ctx: JobContext) -> Mapping[str, Any] | None:
        return await record_permalink(await self._client(job, ctx), job)

    # -- helpers ---------------------------------------------------------------------------
    async def _client(self, job: Job, ctx: JobContext) -> InstagramClient:
        agent_id = job.agent_id
        if agent_id is None:
            raise PermanentFailure(f"the {job.kind} job names no agent")
        client = self.manager.client(agent_id, "instagram")
        if isinstance(client, InstagramClient):
            return client
        try:
            status = await self.manager.status(agent_id)
        except AgentNotFound:
            await self._drop_plan(agent_id, ctx)
            raise PermanentFailure(f"agent {agent_id} no longer exists") from None
        if status.running:
            # The plan comes back when the Instagram client starts again (it stores it).
            await self._drop_plan(agent_id, ctx)
            why = status.skipped.get("instagram", "instagram is not among its clients")
            raise PermanentFailure(
                f"agent {status.record.name} runs without its Instagram client ({why}); fix that, "
                "restart the agent and retry this job"
            )
        raise Defer(
            delay_s=NOT_RUNNING_WAIT_S,
            reason=f"agent {status.record.name} is not running in this process; waiting for it",
        )

    async def _drop_plan(self, agent_id: str, ctx: JobContext) -> None:
        prefix = plan_schedule_prefix(agent_id)
        for schedule in await ctx.store.list_schedules():
            if schedule.name == prefix or schedule.name.startswith(prefix + ":"):
                await ctx.store.delete_schedule(schedule.name)
                log.info("instagram: schedule %s removed (no Instagram client)", schedule.name)


def _progress(post: PublishResult | PublishState) -> dict[str, Any]:
    """A live post, as a publish job's committed progress (and its audit record)."""
    return {
        "published": True,
        "media_id": post.media_id,
        "permalink": post.permalink,
        "container_id": post.container_id,
    }


def _missing(paths: Sequence[str]) -> list[str]:
    return [p for p in paths if not Path(p).is_file()]


def register_instagram_jobs(service: JobService, manager: AgentManager) -> InstagramJobs:
    """Register the Instagram job handlers on ``service``'s worker and give the agents the job
    store (``manager.services["jobs"]``). Call it before agents start, so their Instagram
    clients find the store and store their plans' schedules."""
    manager.services.setdefault("jobs", service.store)
    handlers = InstagramJobs(manager)
    # One post job at a time (all workers): library files are taken without a race. What a
    # handler logs goes to its agent's log tail (job_logs), whether or not the line names it.
    service.worker.register(POST_JOB_KIND, job_logs(handlers.post), max_concurrent=1)
    service.worker.register(PUBLISH_JOB_KIND, job_logs(handlers.publish), max_concurrent=2)
    service.worker.register(NOTICE_JOB_KIND, job_logs(handlers.notice))
    service.worker.register(PERMALINK_JOB_KIND, job_logs(handlers.permalink))
    register_inbound_jobs(service, manager)  # comments, mentions and DMs (webhooks)
    return handlers
