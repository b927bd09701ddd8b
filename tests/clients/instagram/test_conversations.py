"""Instagram conversations end to end, over loopback: the fake Graph API delivers signed webhooks
to the real API server (uvicorn), the receiver stores each event as a job, the worker answers it
through the pipeline (a FunctionModel), and the reply goes back to the fake over HTTP."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from carrier.jobs import JobState
from carrier.types import MemoryStatus
from clients.instagram import InstagramClient
from tests.clients.instagram._conversation_world import (
    COMMENT_REPLY,
    DM_REPLY,
    World,
)


async def test_a_signed_comment_webhook_gets_one_reply_in_the_comment_voice(
    make_world: Callable[..., Any],
) -> None:
    w: World = await make_world()
    talk = w.graph.conversations
    media = w.graph.add_media("fog came in at six")
    comment = talk.person_comments(media, "what film is this?", user_id="u-ana", username="ana")

    assert await w.graph.webhooks.deliver(w.graph.webhooks.comment(comment), http=w.http) == [200]
    [job] = await w.inbound_jobs()  # stored before the answer: the worker has not run yet
    assert job.state is JobState.PENDING and talk.replies_to(comment.id) == []

    await w.service.worker.drain()

    [reply] = talk.replies_to(comment.id)
    assert reply.text == COMMENT_REPLY  # style.comment reached the prompt
    job = await w.jobs.get(job.id) or job
    assert job.state is JobState.SUCCEEDED and job.result is not None
    assert job.result["replied"] == [reply.id]
    by_status = {m.status: m for m in await w.memories()}
    inbound, sent = by_status[MemoryStatus.PROCESSED], by_status[MemoryStatus.SENT]
    assert inbound.content.text == "what film is this?" and inbound.content.source == "instagram"
    assert sent.content.text == COMMENT_REPLY and sent.content.in_reply_to == inbound.id
    room = await w.store.get_room(inbound.room_id)
    assert room is not None and room.platform_id == f"comment:{comment.id}"
    assert room.kind == "thread" and room.parent_id is not None


async def test_the_same_delivery_three_times_is_answered_once(
    make_world: Callable[..., Any],
) -> None:
    w: World = await make_world()
    talk = w.graph.conversations
    media = w.graph.add_media()
    comment = talk.person_comments(media, "where was this taken?", user_id="u-bo", username="bo")
    payload = w.graph.webhooks.comment(comment)

    assert await w.graph.webhooks.deliver(payload, times=3, http=w.http) == [200, 200, 200]
    await w.service.worker.drain()
    await w.graph.webhooks.deliver(payload, http=w.http)  # Meta retries after the answer too
    await w.service.worker.drain()

    assert len(talk.replies_to(comment.id)) == 1
    assert len(await w.inbound_jobs()) == 1
    assert talk.reply_calls == 1


async def test_a_bad_or_missing_signature_is_refused_and_nothing_is_stored(
    make_world: Callable[..., Any],
) -> None:
    w: World = await make_world()
    media = w.graph.add_media()
    comment = w.graph.conversations.person_comments(
        media, "is this film?", user_id="u-eve", username="eve"
    )
    payload = w.graph.webhooks.comment(comment)

    forged = await w.graph.webhooks.deliver(payload, signature="sha256=" + "0" * 64, http=w.http)
    unsigned = await w.graph.webhooks.deliver(payload, signed=False, http=w.http)

    assert set(forged) == {403} and set(unsigned) == {403}
    response = await w.http.post(
        f"{w.url}/webhooks/instagram", content=b"{}", headers={"X-Hub-Signature-256": "sha256=x"}
    )
    assert response.status_code == 403 and response.json()["error"] == "bad_signature"
    await w.service.worker.drain()
    assert await w.inbound_jobs() == []
    assert await w.memories() == []
    assert w.graph.conversations.reply_calls == 0


async def test_the_subscription_handshake_echoes_the_challenge_for_the_right_token(
    make_world: Callable[..., Any],
) -> None:
    w: World = await make_world()
    right = await w.graph.webhooks.verify(challenge="4242", http=w.http)
    wrong = await w.graph.webhooks.verify(token="guess", http=w.http)
    unknown = await w.http.get(f"{w.url}/webhooks/nowhere")

    assert right.status_code == 200 and right.text == "4242"
    assert right.headers["content-type"].startswith("text/plain")
    assert wrong.status_code == 403
    assert unknown.status_code == 404


async def test_a_dm_inside_the_window_is_answered_one_outside_is_refused_and_recorded(
    make_world: Callable[..., Any],
) -> None:
    w: World = await make_world()
    talk = w.graph.conversations
    fresh = talk.person_messages("do you sell prints?", user_id="u-cy", username="cy")
    stale = talk.person_messages(
        "hello? anyone?", user_id="u-di", username="di", at=datetime.now(UTC) - timedelta(hours=25)
    )
    hooks = w.graph.webhooks
    assert await hooks.deliver(
        hooks.batch([hooks.message(fresh), hooks.message(stale)]), http=w.http
    ) == [200]

    await w.service.worker.drain()

    assert [m.text for m in talk.thread_with("u-cy")] == ["do you sell prints?", DM_REPLY]
    assert [m.text for m in talk.thread_with("u-di")] == ["hello? anyone?"]  # nothing sent
    assert talk.reply_calls == 1  # the refused one never reached Instagram
    jobs = {j.payload["user_id"]: j for j in await w.inbound_jobs()}
    assert jobs["u-di"].state is JobState.SUCCEEDED
    assert "24 h messaging window" in jobs["u-di"].result["refused"]  # type: ignore[index]
    refused = [m for m in await w.memories() if m.status is MemoryStatus.FAILED]
    assert {m.content.text for m in refused} == {"hello? anyone?", DM_REPLY}
    assert all("24 h messaging window" in (m.error or "") for m in refused)
    room = await w.store.get_room(refused[0].room_id)
    assert room is not None and room.platform_id == "dm:u-di" and room.kind == "dm"
    [asked] = [m for m in await w.memories() if m.content.text == "do you sell prints?"]
    assert asked.content.metadata["speaker"] == "cy"  # the webhook's id, named by its profile


async def test_the_policy_skips_spam_own_comments_other_brands_and_statements_with_a_reason(
    make_world: Callable[..., Any],
) -> None:
    w: World = await make_world({"ignoreAccounts": ["@rivalcafe"]}, moderation={"enabled": False})
    talk = w.graph.conversations
    media = w.graph.add_media()
    comments = [
        talk.person_comments(media, "free followers at my page!!", user_id="u1", username="spam1"),
        talk.person_comments(
            media, "what lens? see www.cheap.shop", user_id="u2", username="spam2"
        ),
        talk.person_comments(media, "nice shot", user_id="u3", username="fan"),
        talk.person_comments(media, "what beans do you use?", user_id="u4", username="rivalcafe"),
        talk.person_comments(media, "a note from me", user_id=w.graph.ig_user_id, username="me"),
    ]
    hooks = w.graph.webhooks
    delivery = hooks.batch([hooks.comment(c) for c in comments])
    assert await hooks.deliver(delivery, http=w.http) == [200]

    await w.service.worker.drain()

    assert all(talk.replies_to(c.id) == [] for c in comments)
    assert len(await w.inbound_jobs()) == 4  # the persona's own comment is not even a job
    reasons = {m.content.text: m.content.metadata.get("observed") for m in await w.memories()}
    assert reasons["free followers at my page!!"] == "spam: contains 'free followers'"
    assert reasons["what lens? see www.cheap.shop"].startswith("spam: 1 link(s)")
    assert reasons["nice shot"] == "not a question (conversations.comments: questions)"
    assert reasons["what beans do you use?"] == "the account is in conversations.ignoreAccounts"
    assert all(m.status is MemoryStatus.IGNORED for m in await w.memories())


async def test_the_caps_per_person_and_per_post_hold(make_world: Callable[..., Any]) -> None:
    w: World = await make_world({"maxRepliesPerPost": 2, "personCooldown": "10m"})
    talk = w.graph.conversations
    media = w.graph.add_media()
    first = talk.person_comments(media, "what film?", user_id="u1", username="ana")
    again = talk.person_comments(media, "and what camera?", user_id="u1", username="ana")
    other = talk.person_comments(media, "where is this?", user_id="u2", username="bo")
    third = talk.person_comments(media, "when was this?", user_id="u3", username="cy")
    hooks = w.graph.webhooks
    for comment in (first, again, other, third):
        await hooks.deliver(hooks.comment(comment), http=w.http)
        await w.service.worker.drain()

    assert [len(talk.replies_to(c.id)) for c in (first, again, other, third)] == [1, 0, 1, 0]
    reasons = {m.content.text: m.content.metadata.get("observed") for m in await w.memories()}
    assert "personCooldown" in reasons["and what camera?"]
    assert "maxRepliesPerPost" in reasons["when was this?"]


async def test_a_reply_sent_by_a_worker_that_died_before_recording_it_is_not_sent_again(
    make_world: Callable[..., Any],
) -> None:
    """The intent (the reply claimed, ``sending``) was saved and the reply went out, but the
    worker died before it recorded ``sent``: the run that takes the job over reads the
    comment's replies first and finds it."""
    w: World = await make_world()
    talk = w.graph.conversations
    media = w.graph.add_media()
    comment = talk.person_comments(media, "what film is this?", user_id="u1", username="ana")
    await w.graph.webhooks.deliver(w.graph.webhooks.comment(comment), http=w.http)
    client = w.manager.client(w.agent_id, "instagram")
    assert isinstance(client, InstagramClient)
    runtime = client.runtime
    [job] = await w.inbound_jobs()

    # What the dead worker did: the turn, the claim, the send; not the record of it.
    from clients.instagram.inbound.conversation import to_message
    from clients.instagram.inbound.webhook import event_of

    result = await runtime.handle(to_message(event_of(job.payload)))
    [reply] = result.replies
    assert await w.store.set_memory_status(
        reply.id, MemoryStatus.SENDING, expect=[MemoryStatus.PENDING]
    )
    async with httpx.AsyncClient() as http:
        sent = await http.post(
            f"{w.graph.url}/v21.0/{comment.id}/replies",
            data={"message": reply.content.text},
            headers={"Authorization": "Bearer EAAG-very-secret-token"},
        )
    assert sent.status_code == 200

    await w.service.worker.drain()  # the job runs: it finds the earlier run's claim

    assert len(talk.replies_to(comment.id)) == 1
    job = await w.jobs.get(job.id) or job
    assert job.result is not None and job.result["found_on_platform"] == 1
    assert (await w.store.get_memory(reply.id)).status is MemoryStatus.SENT  # type: ignore[union-attr]
    inbound = await w.store.get_memory(result.inbound_id)
    assert inbound is not None and inbound.status is MemoryStatus.PROCESSED


async def test_two_workers_on_one_job_store_answer_each_comment_once(
    make_world: Callable[..., Any], tmp_path: Any
) -> None:
    """A second worker (its own job store connection and id) drains beside the first: the
    claims keep each job on one worker, and the outbox each reply on one sender."""
    from carrier.jobs import SQLiteJobStore, Worker
    from clients.instagram.inbound.handler import InboundJobs
    from clients.instagram.inbound.webhook import INBOUND_JOB_KIND

    w: World = await make_world({"personCooldown": 0, "maxRepliesPerPost": 100})
    talk = w.graph.conversations
    media = w.graph.add_media()
    comments = [
        talk.person_comments(media, f"question {i}?", user_id=f"u{i}", username=f"p{i}")
        for i in range(24)
    ]
    hooks = w.graph.webhooks
    await hooks.deliver(hooks.batch([hooks.comment(c) for c in comments]), times=2, http=w.http)
    second = SQLiteJobStore(path=w.jobs.path)
    async with second:
        other = Worker(store=second, worker_id="second-worker")
        other.register(INBOUND_JOB_KIND, InboundJobs(w.manager).inbound, max_concurrent=4)

        await asyncio.gather(w.service.worker.drain(), other.drain())

        done = await second.list_jobs(kind=INBOUND_JOB_KIND, limit=None)
    assert len(done) == 24 and all(j.state is JobState.SUCCEEDED for j in done)
    unanswered = [j.result for j in done if not (j.result or {}).get("replied")]
    assert [len(talk.replies_to(c.id)) for c in comments] == [1] * 24, unanswered
    assert talk.reply_calls == 24
    owners = {e.worker for j in done for e in j.history if e.worker}
    assert owners <= {w.service.worker.worker_id, "second-worker"}
