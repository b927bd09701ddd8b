"""What the instagrapi backend offers beyond comments and DMs, with real instagrapi against
FakeInstagram: replies in a comment's thread (from the comment list's previews, or read whole
when there are more), @mentions from the activity feed answered under the mentioning comment,
deletion for moderation set to ``delete``, a private reply sent as a DM; and what it cannot do
(hide) said when the client starts (``carrier doctor`` says it too: test_doctor.py)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest

from carrier.audit.model import AuditFilter
from clients.instagram.fake.private import FakeInstagram
from clients.instagram.inbound.moderation import MODERATION_KIND
from clients.instagram.inbound.poller import POLL_JOB_KIND
from tests.clients.instagram._conversation_world import COMMENT_REPLY, World


async def _poll(w: World) -> None:
    await w.jobs.enqueue(POLL_JOB_KIND, agent_id=w.agent_id)
    await w.service.worker.drain()


async def test_replies_in_threads_are_polled_and_answered_once(
    make_world: Callable[..., Any],
) -> None:
    ig = FakeInstagram()
    w: World = await make_world({"poll": {"enabled": True}}, private=ig)
    talk = ig.talk
    media = ig.add_media("fog at six")
    await _poll(w)  # the cursor
    quiet = talk.person_comments(media, "lovely", user_id="6660001", username="ana")
    busy = talk.person_comments(media, "so good", user_id="6660002", username="bo")
    for n in range(3):  # more replies than the comment list previews: read whole
        talk.person_comments(
            media, f"agreed {n}", user_id=f"66601{n}", username=f"p{n}", replied_to=busy.pk
        )
    asked = talk.person_comments(
        media, "which lab?", user_id="6660003", username="cy", replied_to=busy.pk
    )
    named = talk.person_comments(
        media,
        f"@{ig.username} print it",
        user_id="6660004",
        username="dee",
        replied_to=quiet.pk,
    )
    aside = talk.person_comments(
        media, "@ana where is this?", user_id="6660005", username="eve", replied_to=quiet.pk
    )

    await _poll(w)
    await _poll(w)  # again: nothing new, the persona's own replies skipped

    assert [c.text for c in talk.replies_to(busy.pk)] == [f"@cy {COMMENT_REPLY}"]
    assert [c.text for c in talk.replies_to(quiet.pk)] == [f"@dee {COMMENT_REPLY}"]
    assert talk.sends == 2
    assert any("inline_child_comments" in r for r in ig.requests)
    results = {j.payload["id"]: j.result or {} for j in await w.inbound_jobs()}
    assert results[asked.pk]["replied"] and results[named.pk]["replied"]
    assert results[aside.pk]["skipped"] == "a reply to @ana, not to the persona"


async def test_mentions_from_the_activity_feed_are_answered_under_the_comment(
    make_world: Callable[..., Any],
) -> None:
    ig = FakeInstagram()
    w: World = await make_world({"poll": {"enabled": True}}, private=ig)
    talk = ig.talk
    await _poll(w)
    mention = talk.person_mentions(
        f"@{ig.username} which lab develops your film?", user_id="6660006", username="fox"
    )

    await _poll(w)
    await _poll(w)

    [reply] = talk.replies_to(mention.pk)
    assert reply.media_id == mention.media_id and reply.text == COMMENT_REPLY
    [job] = await w.inbound_jobs()
    assert job.payload["kind"] == "mention"
    assert job.payload["text"] == f"@{ig.username} which lab develops your film?"
    assert talk.sends == 1


async def test_delete_moderation_and_a_private_reply_as_a_dm(
    make_world: Callable[..., Any],
) -> None:
    ig = FakeInstagram()
    w: World = await make_world(
        {"poll": {"enabled": True}, "replyAs": "private"},
        private=ig,
        moderation={"action": "delete"},
    )
    talk = ig.talk
    media = ig.add_media()
    await _poll(w)
    spam = talk.person_comments(media, "free followers here", user_id="6660007", username="bot")
    question = talk.person_comments(media, "prints?", user_id="6660008", username="gus")

    await _poll(w)
    await _poll(w)

    assert [c.pk for c in talk.deleted] == [spam.pk] and talk.replies_to(spam.pk) == []
    [event] = (await w.audit.list_events(AuditFilter(kinds=(MODERATION_KIND,)))).items
    assert (event.action, event.target) == ("delete", spam.pk)
    assert talk.replies_to(question.pk) == []  # answered privately, once
    assert [m.text for m in talk.thread_with("6660008")] == [COMMENT_REPLY]


async def test_a_hide_rule_on_instagrapi_is_said_when_the_client_starts(
    make_world: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="clients.instagram.client"):
        await make_world(private=FakeInstagram(), moderation={"action": "hide"})

    [said] = [r.getMessage() for r in caplog.records if "cannot hide comments" in r.getMessage()]
    assert "flagged for review instead" in said and "moderation.action: delete" in said
