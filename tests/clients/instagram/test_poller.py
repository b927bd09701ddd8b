"""Polling without webhooks, over loopback: the ``instagram.poll`` job reads the fake Graph API's
comments and conversations, leaves what was written before polling began, stores what is new
as ``instagram.inbound`` jobs (the webhook's keys), and after a restart of the agent carries on
from its stored cursor without answering anything twice."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from clients.instagram.inbound.poller import POLL_JOB_KIND, poll_schedule_name
from tests.clients.instagram._conversation_world import COMMENT_REPLY, DM_REPLY, World


async def _poll(w: World) -> None:
    """One polling round, as its schedule makes it, then the answers."""
    await w.jobs.enqueue(POLL_JOB_KIND, agent_id=w.agent_id)
    await w.service.worker.drain()


async def test_the_poller_answers_new_comments_and_dms_once_across_a_restart(
    make_world: Callable[..., Any],
) -> None:
    w: World = await make_world({"poll": {"enabled": True, "interval": "2m", "media": 5}})
    schedule = await w.jobs.get_schedule(poll_schedule_name(w.agent_id))
    assert schedule is not None and schedule.kind == POLL_JOB_KIND
    talk = w.graph.conversations
    media = w.graph.add_media()
    hour_ago = datetime.now(UTC) - timedelta(hours=1)
    old = talk.person_comments(media, "old question?", user_id="u0", username="zed", at=hour_ago)
    talk.person_messages("old hello?", user_id="u0", username="zed", at=hour_ago)

    await _poll(w)  # the first round only sets the cursor

    assert talk.replies_to(old.id) == [] and len(talk.thread_with("u0")) == 1
    assert await w.inbound_jobs() == []

    new = talk.person_comments(media, "what film is this?", user_id="u1", username="ana")
    talk.person_messages("do you sell prints?", user_id="u2", username="bo")
    await _poll(w)

    assert [r.text for r in talk.replies_to(new.id)] == [COMMENT_REPLY]
    assert [m.text for m in talk.thread_with("u2")] == ["do you sell prints?", DM_REPLY]
    assert talk.replies_to(old.id) == []

    await w.manager.halt(w.agent_id)  # a restart: a new client, the cursor from the Store
    await w.manager.run(w.agent_id)
    newer = talk.person_comments(media, "where was it taken?", user_id="u3", username="cy")
    await _poll(w)
    await w.graph.webhooks.deliver(w.graph.webhooks.comment(new), http=w.http)  # and a webhook
    await w.service.worker.drain()

    assert len(talk.replies_to(new.id)) == 1 and len(talk.replies_to(newer.id)) == 1
    assert talk.replies_to(old.id) == [] and len(talk.thread_with("u2")) == 2
    assert talk.reply_calls == 3
    keys = sorted(j.idempotency_key or "" for j in await w.inbound_jobs())
    assert len(keys) == len(set(keys)) == 3


async def test_polling_off_removes_the_schedule(make_world: Callable[..., Any]) -> None:
    w: World = await make_world({"poll": {"enabled": True}})
    client = w.manager.client(w.agent_id, "instagram")
    assert await w.jobs.get_schedule(poll_schedule_name(w.agent_id)) is not None

    await client.update_config(
        {"publisher": "graph", "conversations": {"poll": {"enabled": False}}}
    )  # type: ignore[union-attr]

    assert await w.jobs.get_schedule(poll_schedule_name(w.agent_id)) is None


async def test_the_poller_reads_replies_and_answers_those_meant_for_the_persona(
    make_world: Callable[..., Any],
) -> None:
    """Replies under the persona's media are found by the poller (the Graph API's ``replies``
    field expansion): a question asked in a thread and a reply naming the persona are
    answered (under the thread's first comment, naming whom they answer); a reply addressed to
    someone else, and the persona's own replies, are not."""
    w: World = await make_world({"poll": {"enabled": True}}, username="lumen.on.film")
    talk = w.graph.conversations
    media = w.graph.add_media()
    await _poll(w)  # the cursor

    top = talk.person_comments(media, "lovely light", user_id="u1", username="ana")

    def reply(text: str, user: str, name: str) -> str:
        return talk.person_comments(media, text, user_id=user, username=name, parent_id=top.id).id

    question = reply("what film is this?", "u2", "bo")
    to_ana = reply("@ana agreed, and what lens?", "u3", "cy")
    to_persona = reply("@lumen.on.film print this one please", "u4", "dee")
    await _poll(w)
    await _poll(w)  # again: the persona's own replies are in the thread now

    assert sorted(r.text for r in talk.replies_to(top.id)) == [
        f"@bo {COMMENT_REPLY}",
        f"@dee {COMMENT_REPLY}",
    ]
    assert talk.reply_calls == 2
    results = {j.payload["id"]: j.result or {} for j in await w.inbound_jobs()}
    assert set(results) == {top.id, question, to_ana, to_persona}
    assert results[top.id]["skipped"] == "not a question (conversations.comments: questions)"
    assert results[to_ana]["skipped"] == "a reply to @ana, not to the persona"
    assert results[question]["replied"] and results[to_persona]["replied"]
