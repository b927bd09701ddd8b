"""Replies that wait for a human (``conversations.approval: required``), over loopback: nothing
reaches the fake Graph API until the job is approved through the API (the reply is held: no
restart sends it); an approval with an edited reply sends the edit."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from carrier.jobs import JobState
from carrier.types import MemoryStatus, utcnow
from clients.instagram.inbound.conversation import HELD
from clients.instagram.jobs import NOTICE_JOB_KIND
from tests.clients.instagram._conversation_world import ADMIN, COMMENT_REPLY, World

AUTH = {"Authorization": f"Bearer {ADMIN}"}


async def test_nothing_is_sent_until_the_reply_is_approved(make_world: Callable[..., Any]) -> None:
    w: World = await make_world({"approval": "required", "approvalExpiry": "2h"})
    talk = w.graph.conversations
    media = w.graph.add_media()
    comment = talk.person_comments(media, "what film is this?", user_id="u1", username="ana")
    await w.graph.webhooks.deliver(w.graph.webhooks.comment(comment), http=w.http)

    await w.service.worker.drain()

    [job] = await w.inbound_jobs()
    assert job.state is JobState.AWAITING_APPROVAL and job.approval_expires_at is not None
    assert job.payload["reply"] == COMMENT_REPLY
    assert job.payload["answers"]["text"] == "what film is this?"
    assert talk.replies_to(comment.id) == [] and talk.reply_calls == 0
    # The clients that take approvals (Discord's buttons) are told, by a job of its own.
    [notice] = await w.jobs.list_jobs(kind=NOTICE_JOB_KIND)
    assert notice.payload == {"job_id": job.id}
    held = {m.content.text: m for m in await w.memories()}
    assert held[COMMENT_REPLY].status is MemoryStatus.FAILED  # nothing may send it meanwhile
    assert held[COMMENT_REPLY].error == "held for approval: sent only once a human approves it"

    approved = await w.http.post(f"{w.url}/jobs/{job.id}/approve", headers=AUTH)
    assert approved.status_code == 200, approved.text
    await w.service.worker.drain()

    assert [r.text for r in talk.replies_to(comment.id)] == [COMMENT_REPLY]
    assert (await w.jobs.get(job.id)).state is JobState.SUCCEEDED  # type: ignore[union-attr]
    sent = {m.content.text: m.status for m in await w.memories()}
    assert sent == {"what film is this?": MemoryStatus.PROCESSED, COMMENT_REPLY: MemoryStatus.SENT}


async def test_an_edited_approval_is_sent_and_a_restart_meanwhile_sends_nothing(
    make_world: Callable[..., Any],
) -> None:
    w: World = await make_world({"approval": "required"})
    talk = w.graph.conversations
    media = w.graph.add_media()
    comment = talk.person_comments(media, "where was this?", user_id="u2", username="bo")
    await w.graph.webhooks.deliver(w.graph.webhooks.comment(comment), http=w.http)
    await w.service.worker.drain()
    [job] = await w.inbound_jobs()
    [reply] = [m for m in await w.memories() if m.content.in_reply_to]
    client = w.manager.client(w.agent_id, "instagram")
    assert client is not None
    # A restart's recovery, long after: the held reply is not one it sends or expires.
    await client.runtime.recover(since=utcnow() + timedelta(hours=1))  # type: ignore[attr-defined]
    held = await w.store.get_memory(reply.id)
    assert held is not None and held.status is MemoryStatus.FAILED and held.error == HELD

    edited = {**job.payload, "reply": "lisbon, from the ferry. thank you!"}
    approved = await w.http.post(
        f"{w.url}/jobs/{job.id}/approve", json={"payload": edited}, headers=AUTH
    )
    assert approved.status_code == 200, approved.text
    await w.service.worker.drain()

    assert [r.text for r in talk.replies_to(comment.id)] == ["lisbon, from the ferry. thank you!"]
    sent = await w.store.get_memory(reply.id)
    assert sent is not None and sent.status is MemoryStatus.SENT
    assert sent.content.metadata["edited_in_approval"] is True
    inbound = await w.store.get_memory(reply.content.in_reply_to or "")
    assert inbound is not None and inbound.status is MemoryStatus.PROCESSED
