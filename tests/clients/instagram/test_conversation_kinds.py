"""The other ways people write to the persona, over loopback: an @mention elsewhere (its text
read from the API, answered on the mentions edge), a comment answered privately (a DM about
it), and a reply inside a comment's thread (answered under the thread's first comment, naming
its writer)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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
    memories = await w.memories()
    rooms = {m.room_id for m in memories}
    assert len(rooms) == 1  # the post's comments are one room
