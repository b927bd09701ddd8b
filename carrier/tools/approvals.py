"""Tool calls that wait for a human: parked as jobs, run once approved, their result posted back.

A tool with ``approval: required`` does not run when the model calls it. :func:`park` stores the
call as a ``tool.call`` job already in ``awaiting_approval`` (expiring after the tool's
``approval_hours``), so every approval channel the jobs have works for it: ``POST
/tools/approvals/{id}/approve`` (and ``/jobs/{id}/approve``), ``carrier jobs approve``, and the
Discord buttons, which a ``tool.approval_notice`` job posts in the agent's approval channel.

Approved, the job is due; the worker of the process that runs the agent (``carrier run``) runs
:meth:`ToolJobs.call`: the same checks as in a turn (the tool still exists and applies to the
agent, the person may still set it off, the operator's rules for headers and addresses), then
the call, at most once (a worker lost during the call leaves a mark, and the call is not made
again). The result is stored in the room as the agent's message and posted to the platform where
the person asked (Discord, through the client's approval desk); ``tool.approval`` and
``tool.call`` are recorded.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from carrier.errors import CarrierError
from carrier.jobs.base import JobStore
from carrier.jobs.errors import Defer, PermanentFailure
from carrier.jobs.handler import JobContext
from carrier.jobs.model import Job, JobEvent, JobState
from carrier.safety.redact import current_redactor
from carrier.tools.call import ToolCallError, call_tool
from carrier.tools.records import record_approval, record_call
from carrier.tools.rules import Sender, refusal_for
from carrier.tools.spec import ToolSpec
from carrier.types import Content, Memory, MemoryKind, MemoryStatus, stable_id

if TYPE_CHECKING:
    from carrier.agents import AgentManager
    from carrier.jobs.service import JobService
    from carrier.runtime import AgentRuntime

__all__ = [
    "NOTICE_JOB_KIND",
    "TOOL_JOB_KIND",
    "ToolJobs",
    "approved_by",
    "park",
    "register_tool_jobs",
    "sender_of",
]

log = logging.getLogger(__name__)

TOOL_JOB_KIND = "tool.call"
NOTICE_JOB_KIND = "tool.approval_notice"
NOT_RUNNING_WAIT_S = 60.0
RESULT_CHARS = 1500
"""How much of an approved call's output is posted back to the room."""


async def park(
    jobs: JobStore,
    *,
    spec: ToolSpec,
    arguments: Mapping[str, Any],
    sender: Sender,
    agent_id: str,
    room: Mapping[str, Any],
    inbound_id: str | None,
    call_id: str,
) -> Job:
    """Store the call as a job awaiting approval (once per inbound message and call id, so a
    turn run again parks nothing new), and ask the agent's clients to show it to a human."""
    now = jobs.clock()
    job = Job(
        kind=TOOL_JOB_KIND,
        agent_id=agent_id,
        payload={
            "tool": spec.name,
            "method": spec.method,
            "host": spec.host,
            "arguments": dict(arguments),
            "sender": sender.to_json(),
            "room": dict(room),
            "inbound_id": inbound_id,
            "call_id": call_id,
        },
        state=JobState.AWAITING_APPROVAL,
        max_attempts=1,
        idempotency_key=f"tool:{agent_id}:{inbound_id}:{call_id}" if inbound_id else None,
        approval_expires_at=now + timedelta(hours=spec.approval_hours),
        created_at=now,
        updated_at=now,
        history=[
            JobEvent(at=now, state=JobState.PENDING, note="enqueued"),
            JobEvent(
                at=now,
                state=JobState.AWAITING_APPROVAL,
                note=f"tool {spec.name} for {sender.actor} waits for approval",
            ),
        ],
    )
    # Born parked: the job store's insert primitive keeps the state it is given (enqueue would
    # make it pending, and a worker would have to pick it up only to park it).
    parked = await jobs._insert(job)
    if parked.id == job.id:
        await jobs.enqueue(
            NOTICE_JOB_KIND,
            agent_id=agent_id,
            payload={"job_id": parked.id, "event": "requested"},
            idempotency_key=f"tool-notice:{parked.id}",
        )
    return parked


def sender_of(job: Job) -> Sender:
    data = job.payload.get("sender")
    return Sender.from_json(data if isinstance(data, Mapping) else {})


def approved_by(job: Job) -> str | None:
    """Who approved the job last, from its history (``approved by <who>``), if it says."""
    for event in reversed(job.history):
        note = event.note or ""
        if event.state is JobState.PENDING and note.startswith("approved by "):
            return note.removeprefix("approved by ").removesuffix(" with an edited payload")
    return None


def _result_text(tool: str, sender: Sender, *, output: str | None, error: str | None) -> str:
    """What the room is told, in neutral words (not the persona's: no model writes it)."""
    if error is not None:
        return f"The request to use {tool} for {sender.name} was approved, but it failed: {error}"
    body = (output or "").strip() or "(no output)"
    if len(body) > RESULT_CHARS:
        body = body[: RESULT_CHARS - 1] + "\u2026"
    return f"The request to use {tool} for {sender.name} was approved and it ran:\n{body}"


class ToolJobs:
    """The handlers of ``tool.call`` and ``tool.approval_notice``, bound to the agent manager
    (its running agents, their clients, the registered tools and the host's audit log)."""

    def __init__(self, manager: AgentManager) -> None:
        self.manager = manager

    # -- tool.call -------------------------------------------------------------------------
    async def call(self, job: Job, ctx: JobContext) -> Mapping[str, Any] | None:
        if not job.approved:  # parked calls are born awaiting approval; this one was not
            raise PermanentFailure("a tool call job runs only once approved")
        tool = str(job.payload.get("tool") or "")
        sender = sender_of(job)
        runtime = await self._runtime(job)
        services = runtime.services
        if (job.progress or {}).get("started"):
            # The worker that ran it was lost mid-call: the endpoint may have acted already.
            lost = "it was interrupted while running, and is not repeated"
            await record_call(
                services, tool=tool, agent_id=runtime.agent_id, sender=sender,
                status="failed", error=lost, job_id=job.id, approved_by=approved_by(job),
            )  # fmt: skip
            return await self._finish(runtime, job, sender, output=None, error=lost)
        approver = approved_by(job)
        await record_approval(
            services, job_id=job.id, agent_id=job.agent_id, tool=tool, decision="approved",
            by=approver, sender=sender,
        )  # fmt: skip
        spec = (await self.manager.tools.all()).get(tool)
        arguments = job.payload.get("arguments")
        arguments = dict(arguments) if isinstance(arguments, Mapping) else {}
        problem = self._problem(spec, runtime.agent_id, sender)
        if problem is not None or spec is None:
            refused = problem or f"tool {tool} is no longer registered"
            await record_call(
                services, tool=tool, agent_id=runtime.agent_id, sender=sender,
                status="not_allowed", arguments=arguments, error=refused, job_id=job.id,
                approved_by=approver,
            )  # fmt: skip
            return await self._finish(runtime, job, sender, output=None, error=refused)
        await ctx.ensure_held()
        await ctx.checkpoint({"started": True})
        output: str | None = None
        error: str | None = None
        reason: str | None = None
        try:
            output = await call_tool(
                spec,
                arguments,
                environ=self.manager.tools.environ,
                policy=self.manager.tools.policy,
            )
        except ToolCallError as exc:
            error = current_redactor().clean(str(exc), where="tool")
            reason = exc.reason  # without the endpoint's body: for the log and the audit
            log.info("approved tool call %s failed: %s", job.id, reason)
        await record_call(
            services, tool=tool, agent_id=runtime.agent_id, sender=sender,
            status="failed" if error else "ran", arguments=arguments, error=reason,
            job_id=job.id, approved_by=approver,
        )  # fmt: skip
        return await self._finish(runtime, job, sender, output=output, error=error)

    @staticmethod
    def _problem(spec: ToolSpec | None, agent_id: str, sender: Sender) -> str | None:
        if spec is None:
            return None
        if spec.agent_ids is not None and agent_id not in spec.agent_ids:
            return f"tool {spec.name} no longer applies to this agent"
        return refusal_for(spec, sender)

    async def _runtime(self, job: Job) -> AgentRuntime:
        from carrier.agents import AgentNotFound, AgentNotRunning

        agent_id = job.agent_id
        if agent_id is None:
            raise PermanentFailure("the tool call job names no agent")
        try:
            return self.manager.runtime(agent_id)
        except AgentNotRunning:
            pass
        try:
            await self.manager.get(agent_id)
        except AgentNotFound:
            raise PermanentFailure(f"agent {agent_id} no longer exists") from None
        raise Defer(
            delay_s=NOT_RUNNING_WAIT_S,
            reason=f"agent {agent_id} is not running in this process; waiting for it",
        )

    async def _finish(
        self,
        runtime: AgentRuntime,
        job: Job,
        sender: Sender,
        *,
        output: str | None,
        error: str | None,
    ) -> dict[str, Any]:
        tool = str(job.payload.get("tool") or "")
        text = _result_text(tool, sender, output=output, error=error)
        delivered = await self._deliver(runtime, job, text)
        result: dict[str, Any] = {"ok": error is None, "delivered": delivered}
        if error is not None:
            result["error"] = error
        else:
            result["output"] = (output or "")[:RESULT_CHARS]
        return result

    async def _deliver(self, runtime: AgentRuntime, job: Job, text: str) -> str | None:
        """Store ``text`` in the room as the agent's message (once per job), then post it where
        the person asked; returns the platform's message id, when one was posted."""
        room = job.payload.get("room")
        room = room if isinstance(room, Mapping) else {}
        room_id = room.get("id")
        if isinstance(room_id, str) and room_id:
            vector = (await runtime.embedder.embed([text]))[0]
            await runtime.store.add_memory(
                Memory(
                    id=stable_id(job.id, "tool-result"),
                    agent_id=runtime.agent_id,
                    room_id=room_id,
                    entity_id=stable_id(runtime.agent_id, "agent"),
                    kind=MemoryKind.MESSAGE,
                    content=Content(
                        text=text,
                        source="tool",
                        in_reply_to=job.payload.get("inbound_id"),
                        metadata={"tool_job": job.id, "speaker": runtime.character.name},
                    ),
                    embedding=vector.tolist(),
                    embedding_model=runtime.embedder.model_id,
                    status=MemoryStatus.STORED,
                )
            )
        return await self._post(runtime.agent_id, room, text)

    async def _post(self, agent_id: str, room: Mapping[str, Any], text: str) -> str | None:
        """Post to the platform's room through the client's approval desk, when it has one
        (Discord's ``post_tool_result``); the API and the terminal keep it in the history."""
        platform = str(room.get("platform") or "")
        channel = str(room.get("channel_id") or "")
        client = self.manager.client(agent_id, platform) if platform else None
        post = getattr(getattr(client, "approvals", None), "post_tool_result", None)
        if post is None or not channel:
            return None
        try:
            return await post(channel, current_redactor().clean(text, where=platform))
        except CarrierError as exc:
            log.warning("the result of a tool call could not be posted to %s: %s", platform, exc)
            return None

    # -- tool.approval_notice --------------------------------------------------------------
    async def notice(self, job: Job, ctx: JobContext) -> Mapping[str, Any] | None:
        """Show a parked call to the humans who decide (``event: requested``: each running
        client with ``request_approval(job)``), or tell the room it was rejected."""
        target = await ctx.store.get(str(job.payload.get("job_id")))
        if target is None or target.agent_id is None:
            return {"skipped": "the tool call's job is gone"}
        event = job.payload.get("event", "requested")
        if event == "rejected":
            try:
                runtime = self.manager.runtime(target.agent_id)
            except CarrierError:
                return {"skipped": "the agent is not running here"}
            sender = sender_of(target)
            text = f"The request to use {target.payload.get('tool')} for {sender.name} was not approved."
            return {"posted": await self._deliver(runtime, target, text)}
        if target.state is not JobState.AWAITING_APPROVAL:
            return {"skipped": f"the tool call's job is {target.state.value}"}
        try:
            status = await self.manager.status(target.agent_id)
        except CarrierError:
            return {"skipped": f"agent {target.agent_id} no longer exists"}
        sent: dict[str, str] = {}
        for name in status.clients:
            request = getattr(self.manager.client(target.agent_id, name), "request_approval", None)
            if request is None:
                continue
            reference = await request(target)
            if reference:
                sent[name] = str(reference)
        return {"sent": sent}


def register_tool_jobs(service: JobService, manager: AgentManager) -> ToolJobs:
    """Register the handlers of parked tool calls on ``service``'s worker (``carrier run``)."""
    handlers = ToolJobs(manager)
    service.worker.register(TOOL_JOB_KIND, handlers.call, max_concurrent=4)
    service.worker.register(NOTICE_JOB_KIND, handlers.notice)
    return handlers
