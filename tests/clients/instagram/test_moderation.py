"""Moderating the comment section over loopback: a spam comment delivered by webhook is hidden
on the fake (``hide=true``), never answered, recorded in the audit log, and shown again by an
operator; a rule in ``flag`` mode only flags; the model rule hides at its threshold."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from carrier.audit.model import AuditFilter
from carrier.types import MemoryStatus
from clients.instagram import InstagramClient
from clients.instagram.inbound.moderation import MODERATION_KIND
from tests.clients.instagram._conversation_world import World


async def _moderation_events(w: World) -> list[Any]:
    page = await w.audit.list_events(AuditFilter(kinds=(MODERATION_KIND,)))
    return list(reversed(page.items))  # oldest first


async def test_a_spam_comment_is_hidden_audited_and_can_be_shown_again(
    make_world: Callable[..., Any],
) -> None:
    w: World = await make_world(moderation={"action": "hide"})
    talk = w.graph.conversations
    media = w.graph.add_media()
    spam = talk.person_comments(
        media, "free followers!! what are you waiting for?", user_id="u9", username="bot9"
    )
    fine = talk.person_comments(media, "what film is this?", user_id="u1", username="ana")
    hooks = w.graph.webhooks
    assert await hooks.deliver(
        hooks.batch([hooks.comment(spam), hooks.comment(fine)]), http=w.http
    ) == [200]

    await w.service.worker.drain()

    assert talk.comments[spam.id].hidden is True and talk.replies_to(spam.id) == []
    assert talk.comments[fine.id].hidden is False and len(talk.replies_to(fine.id)) == 1
    [event] = await _moderation_events(w)
    assert (event.action, event.target, event.actor) == ("hide", spam.id, "system")
    assert event.detail["rule"] == "spam: contains 'free followers'"
    [kept] = [m for m in await w.memories() if m.content.text.startswith("free followers")]
    assert kept.status is MemoryStatus.IGNORED
    assert kept.content.metadata["moderation"] == {"action": "hide", "rule": event.detail["rule"]}

    client = w.manager.client(w.agent_id, "instagram")
    assert isinstance(client, InstagramClient)
    await client.unhide(spam.id, actor="admin")

    assert talk.comments[spam.id].hidden is False
    _hide, unhide = await _moderation_events(w)
    assert (unhide.action, unhide.target, unhide.actor) == ("unhide", spam.id, "admin")


async def test_flag_mode_and_the_model_rule(make_world: Callable[..., Any]) -> None:
    w: World = await make_world(moderation={"keywords": ["giveaway"], "model": {"threshold": 0.9}})
    talk = w.graph.conversations
    media = w.graph.add_media()
    keyword = talk.person_comments(media, "giveaway at my page?", user_id="u2", username="bo")
    scam = talk.person_comments(media, "is this a scam or what?", user_id="u3", username="cy")
    hooks = w.graph.webhooks
    await hooks.deliver(hooks.batch([hooks.comment(keyword), hooks.comment(scam)]), http=w.http)

    await w.service.worker.drain()

    assert not talk.comments[keyword.id].hidden and not talk.comments[scam.id].hidden
    assert talk.replies_to(keyword.id) == [] and talk.replies_to(scam.id) == []
    rules = {e.target: (e.action, e.detail["rule"]) for e in await _moderation_events(w)}
    assert rules == {
        keyword.id: ("flag", "keyword 'giveaway'"),
        scam.id: ("flag", "model score 0.95 >= 0.9"),
    }
    reasons = {m.content.text: m.content.metadata.get("observed") for m in await w.memories()}
    assert reasons["giveaway at my page?"] == "flagged for review: keyword 'giveaway'"


async def test_delete_only_when_the_operator_chose_it_and_audited(
    make_world: Callable[..., Any],
) -> None:
    w: World = await make_world(moderation={"action": "delete", "keywords": ["scam"]})
    talk = w.graph.conversations
    media = w.graph.add_media()
    scam = talk.person_comments(media, "scam link in bio", user_id="u4", username="bot4")
    mention = talk.person_mentions("@fake_account scam here", user_id="u5", username="bot5")
    hooks = w.graph.webhooks
    await hooks.deliver(hooks.batch([hooks.comment(scam), hooks.mention(mention)]), http=w.http)

    await w.service.worker.drain()

    assert scam.id not in talk.comments and [c.id for c in talk.deleted] == [scam.id]
    assert mention.id in talk.comments  # someone else's media: only flagged
    actions = {e.target: e.action for e in await _moderation_events(w)}
    assert actions == {scam.id: "delete", mention.id: "flag"}
    [kept] = [m for m in await w.memories() if m.content.text == "scam link in bio"]
    assert kept.status is MemoryStatus.IGNORED  # the deleted comment's text stays on record
    assert kept.content.metadata["observed"] == "deleted: keyword 'scam'"
