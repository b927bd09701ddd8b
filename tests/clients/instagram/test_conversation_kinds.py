"""The other ways people write to the persona, over loopback: an @mention elsewhere (its text
read from the API, answered on the mentions edge), a comment answered privately (a DM about
it), and a reply inside a comment's thread (answered under the thread's first comment, naming
its writer); and a DM Instagram itself refuses for its messaging window."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from carrier.jobs import JobState
from carrier.types import MemoryStatus
from clients.instagram import InstagramClient
from clients.instagram.inbound.webhook import event_of
from tests.clients.instagram._conversation_world import COMMENT_REPLY, World


async def test_a_mention_is_read_and_answered_on_the_mentions_edge(
    make_world: Callable[..., Any],
) -> None:
    w: World = await make_world()
    talk = w.graph.conversations
    mention = talk.person_mentions(
        "@fake_account which film do you shoot?", user_id="u7", username="gil"
    )
    hooks = w.graph.webhooks
    assert await hooks.deliver(hooks.mention(mention), http=w.http) == [200]

    await w.service.worker.drain()

    assert [r.text for r in talk.replies_to(mention.id)] == [COMMENT_REPLY]
    [inbound] = [m for m in await w.memories() if m.content.text.startswith("@fake_account")]
    assert inbound.content.metadata["speaker"] == "gil"


async def test_a_comment_answered_with_a_private_reply(make_world: Callable[..., Any]) -> None:
    w: World = await make_world({"replyAs": "private"})
    talk = w.graph.conversations
    media = w.graph.add_media()
    comment = talk.person_comments(media, "how much is a print?", user_id="u8", username="hal")
    await w.graph.webhooks.deliver(w.graph.webhooks.comment(comment), http=w.http)

    await w.service.worker.drain()

    assert talk.replies_to(comment.id) == []  # nothing public
    assert [m.text for m in talk.thread_with("u8")] == [COMMENT_REPLY]
    assert comment.id in talk.private_replies


async def test_a_reply_in_a_thread_goes_under_its_first_comment_naming_the_writer(
    make_world: Callable[..., Any],
) -> None:
    w: World = await make_world()
    talk = w.graph.conversations
    media = w.graph.add_media()
    top = talk.person_comments(media, "lovely light", user_id="u1", username="ana")
    reply = talk.person_comments(
        media, "what film is it though?", user_id="u2", username="bo", parent_id=top.id
    )
    await w.graph.webhooks.deliver(w.graph.webhooks.comment(reply), http=w.http)

    await w.service.worker.drain()

    mine = talk.replies_to(top.id)
    assert [r.text for r in mine] == [f"@bo {COMMENT_REPLY}"]
    [asked] = [m for m in await w.memories() if m.content.text == "what film is it though?"]
    room = await w.store.get_room(asked.room_id)
    assert room is not None and room.platform_id == f"comment:{top.id}"  # the thread's room


async def test_a_dm_instagram_refuses_for_its_window_is_recorded_with_meta_s_reason(
    make_world: Callable[..., Any],
) -> None:
    """The webhook's time says the window is open, Instagram's record says it closed: Meta
    answers code 10 / 2534022, and the reply is failed with that reason, not retried."""
    w: World = await make_world()
    talk = w.graph.conversations
    stale = talk.person_messages(
        "still there?", user_id="u5", username="eve", at=datetime.now(UTC) - timedelta(hours=30)
    )
    payload = w.graph.webhooks.message(stale)
    payload["entry"][0]["messaging"][0]["timestamp"] = int(datetime.now(UTC).timestamp() * 1000)
    await w.graph.webhooks.deliver(payload, http=w.http)

    await w.service.worker.drain()

    assert [m.text for m in talk.thread_with("u5")] == ["still there?"]
    assert len(talk.refusals) == 1 and talk.reply_calls == 1  # asked once, refused, not retried
    [reply] = [m for m in await w.memories() if m.content.in_reply_to]
    assert reply.status is MemoryStatus.FAILED
    assert "2534022" in (reply.error or "") and "messaging window" in (reply.error or "")


async def test_a_reply_with_no_clear_answer_is_looked_for_then_sent_at_most_once(
    make_world: Callable[..., Any],
) -> None:
    """A 500 after the reply went out, then a 500 before anything happened: the retry reads
    the comment's replies, finds the first and sends the second once."""
    w: World = await make_world()
    talk = w.graph.conversations
    media = w.graph.add_media()
    went = talk.person_comments(media, "what film is this?", user_id="u1", username="ana")
    lost = talk.person_comments(media, "where is this?", user_id="u2", username="bo")
    talk.send_faults = ["500_after_send", "500_before_send"]
    hooks = w.graph.webhooks
    for comment in (went, lost):
        await hooks.deliver(hooks.comment(comment), http=w.http)
        await w.service.worker.drain()
    assert len(talk.replies_to(went.id)) == 1 and talk.replies_to(lost.id) == []
    jobs = await w.inbound_jobs()
    assert all(j.state is JobState.PENDING and j.attempts == 1 for j in jobs)  # to be retried
    client = w.manager.client(w.agent_id, "instagram")
    assert isinstance(client, InstagramClient)

    results = {
        j.payload["id"]: await client.answer(event_of(j.payload), again=True) for j in jobs
    }  # what the retries do

    assert results[went.id]["found_on_platform"] == 1 and results[went.id]["replied"] == []
    assert len(results[lost.id]["replied"]) == 1
    assert [len(talk.replies_to(c.id)) for c in (went, lost)] == [1, 1]
    statuses = {m.content.text: m.status for m in await w.memories()}
    assert statuses["what film is this?"] is MemoryStatus.PROCESSED
    assert statuses["where is this?"] is MemoryStatus.PROCESSED


def test_replies_are_cut_to_what_instagram_takes() -> None:
    from carrier.types import Content, Memory
    from clients.instagram.inbound.events import EventKind, InboundEvent
    from clients.instagram.inbound.replies import ReplySender

    long = Memory(agent_id="a", room_id="r", entity_id="e", content=Content(text="frame " * 500))
    dm = InboundEvent(kind=EventKind.MESSAGE, account_id="me", id="m1", user_id="u1")
    comment = InboundEvent(
        kind=EventKind.COMMENT, account_id="me", id="c2", parent_id="c1", username="bo"
    )

    as_dm = ReplySender(None, dm).text_of(long)  # type: ignore[arg-type]
    as_comment = ReplySender(None, comment).text_of(long)  # type: ignore[arg-type]

    assert len(as_dm) <= 1000 and as_dm.endswith("frame…")
    assert len(as_comment) <= 2200 and as_comment.startswith("@bo frame")
