"""How the bot answers: split replies, safe mentions, typing, rate limits, surviving errors."""

from __future__ import annotations

import asyncio
import re

from carrier.llm.base import ModelRequest
from carrier.types import MemoryStatus, stable_id
from tests.clients.discord.conftest import Harness, xml
from tests.clients.discord.test_split import fences_balanced, long_answer


async def test_sending_long_answer_with_code_arrives_as_valid_parts(harness: Harness) -> None:
    h = harness
    text = long_answer()
    assert len(text) > 4500
    h.answer = lambda r: xml(text)
    await h.start()
    sent = await h.fake.post(h.ana, "explain the physics step please")
    await h.settle()

    parts = [s.content for s in h.fake.sent]
    assert len(parts) >= 3
    assert all(len(p) < 2000 for p in parts)
    assert all(fences_balanced(p) for p in parts)
    # The fence is reopened with its language in the part that continues the code.
    assert any(p.startswith("```python\n") for p in parts[1:])
    # Only the first part is a Discord reply; all parts keep the safe mention settings.
    assert h.fake.sent[0].payload["message_reference"]["message_id"] == int(sent["id"])
    assert all("message_reference" not in s.payload for s in h.fake.sent[1:])
    mentions = [s.payload["allowed_mentions"] for s in h.fake.sent]
    assert all(m["parse"] == [] and m["users"] == [int(h.ana["id"])] for m in mentions)
    # One reply memory in the store, whole.
    agent_entity = stable_id(h.runtime.agent_id, "agent")
    replies = await h.store.get_memories(agent_id=h.runtime.agent_id, entity_id=agent_entity)
    assert [m.content.text for m in replies] == [text]
    assert h.client.stats.sent == len(parts)


async def test_sending_everyone_in_model_output_does_not_ping(harness: Harness) -> None:
    h = harness
    h.answer = lambda r: xml(f"Hey @everyone and @here, <@&{h.guild.bot_role}> look at this!")
    await h.start()
    await h.fake.post(h.ana, "announce my stream")
    await h.settle()

    [reply] = h.fake.sent
    mentions = reply.payload["allowed_mentions"]
    assert "everyone" not in mentions["parse"] and "roles" not in mentions["parse"]
    assert mentions.get("roles", []) == [] and mentions["replied_user"] is False
    assert "@everyone" not in reply.content and "@here" not in reply.content
    assert "@\u200beveryone" in reply.content and "@\u200bhere" in reply.content


async def test_sending_user_pings_follow_the_config(harness: Harness) -> None:
    h = harness
    await h.start({"allowedMentions": {"users": False, "repliedUser": True}})
    await h.fake.post(h.ana, "hi")
    await h.settle()
    mentions = h.fake.sent[0].payload["allowed_mentions"]
    assert mentions["parse"] == [] and mentions["replied_user"] is True


async def test_sending_typing_indicator_is_shown_while_the_turn_runs(harness: Harness) -> None:
    h = harness
    typing_seen: list[int] = []

    async def slow(request: ModelRequest) -> str:
        await asyncio.sleep(0.05)
        typing_seen.append(len(h.fake.typing))
        return xml("done thinking")

    h.answer = slow
    await h.start()
    sent = await h.fake.post(h.ana, "think hard")
    await h.settle()
    assert typing_seen == [1]  # already typing while the model was generating
    assert h.fake.typing == [int(sent["channel_id"])]
    assert [s.content for s in h.fake.sent] == ["done thinking"]


async def test_sending_a_handler_error_does_not_stop_the_next_message(harness: Harness) -> None:
    h = harness
    calls = 0

    def flaky(request: ModelRequest) -> str:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("model exploded")
        return xml("back on my feet")

    h.answer = flaky
    await h.start()
    first = await h.fake.post(h.ana, "first")
    await h.settle()
    assert h.fake.sent == [] and h.client.stats.errors == 1
    failed = await h.store.get_memories(agent_id=h.runtime.agent_id, statuses=[MemoryStatus.FAILED])
    assert [m.content.metadata["platform_message_id"] for m in failed] == [first["id"]]

    await h.fake.post(h.ana, "second")
    await h.settle()
    assert [s.content for s in h.fake.sent] == ["back on my feet"]


async def test_sending_survives_the_original_being_deleted(harness: Harness) -> None:
    h = harness
    posted: dict[str, int] = {}

    def delete_then_answer(request: ModelRequest) -> str:
        h.fake.delete_message(posted["id"])  # the author deletes the message while the bot thinks
        return xml("answer anyway")

    h.answer = delete_then_answer
    await h.start()
    message = h.fake.make_message(
        h.ana, f"{h.mention()} quick question", channel=h.channel("general"), mentions=[h.fake.bot]
    )
    posted["id"] = int(message["id"])
    await h.fake.dispatch("MESSAGE_CREATE", message, guild_id=h.guild.id)
    await h.settle()

    [reply] = h.fake.sent
    assert reply.content == "answer anyway"
    assert reply.payload["message_reference"]["fail_if_not_exists"] is False
    assert "message_reference" not in reply.message  # Discord sent it as a plain message


async def test_sending_rate_limit_notice_once_per_window(harness: Harness) -> None:
    h = harness
    await h.start(
        {"rateLimit": {"messages": 2, "perSeconds": 60, "notice": "Slow down a little, please."}}
    )
    for i in range(5):
        await h.fake.post(h.ana, f"message {i}")
        await h.settle()
    assert [s.content for s in h.fake.sent] == [
        "echo: message 0",
        "echo: message 1",
        "Slow down a little, please.",
    ]
    assert h.client.stats.rate_limited == 3
    await h.fake.post(h.bob, "my turn")  # another user is not affected
    await h.settle()
    assert h.fake.sent[-1].content == "echo: my turn"


async def test_sending_rate_limited_chatter_gets_no_notice(harness: Harness) -> None:
    h = harness
    h.decision = "IGNORE"
    await h.start({"rateLimit": {"messages": 1, "perSeconds": 60}})
    for i in range(3):
        await h.fake.post(h.ana, f"chatter {i}", channel=h.channel("general"))
        await h.settle()
    assert h.fake.sent == []  # not talking to the bot: no notice either
    assert h.client.stats.rate_limited == 2


async def test_sending_escapes_in_every_part(harness: Harness) -> None:
    h = harness
    body = "\n\n".join(f"Paragraph {i} says hi to @everyone." for i in range(120))
    h.answer = lambda r: xml(body)
    await h.start()
    await h.fake.post(h.ana, "go")
    await h.settle()
    assert len(h.fake.sent) > 1
    assert not any(re.search(r"@everyone", s.content) for s in h.fake.sent)
