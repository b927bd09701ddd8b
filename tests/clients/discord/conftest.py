"""A real discord.py client, wired to a real runtime (FunctionModel + HashEmbedder + SQLite),
talking to the loopback FakeDiscord over real HTTP and a real gateway websocket."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

with warnings.catch_warnings():
    # discord.py imports the stdlib's audioop (voice support), deprecated since Python 3.11.
    warnings.filterwarnings("ignore", "'audioop' is deprecated", DeprecationWarning)
    import discord  # noqa: F401

from carrier.character import Character
from carrier.llm.base import ModelRequest
from carrier.llm.fake import FunctionModel
from carrier.memory.fake import HashEmbedder
from carrier.memory.sqlite import SQLiteStore
from carrier.runtime import AgentRuntime
from carrier.types import stable_id
from clients.discord import create_client
from clients.discord.client import DiscordClient
from clients.discord.fake import FakeDiscord, Guild
from clients.discord.fake.payloads import Json

CHARACTER = {
    "name": "Harbor",
    "username": "harbor",
    "bio": ["Harbor hosts an indie game-dev Discord server.", "Harbor loves pixel art."],
    "adjectives": ["warm"],
    "topics": ["game jams"],
    "settings": {"secrets": {"DISCORD_API_TOKEN": "$DISCORD_API_TOKEN"}},
}

WATCHED = ("MESSAGE_CREATE", "MESSAGE_REACTION_ADD")


def xml(text: str, actions: str = "REPLY") -> str:
    return (
        f"<response><thought>ok</thought><actions>{actions}</actions><text>{text}</text></response>"
    )


@dataclass
class Harness:
    """The world of one test: fake Discord, store, runtime, the client under test, people."""

    fake: FakeDiscord
    store: SQLiteStore
    runtime: AgentRuntime
    model: FunctionModel
    guild: Guild
    ana: Json
    bob: Json
    otherbot: Json
    decision: str = "IGNORE"
    """What the model answers to the should-respond question."""
    answer: Callable[[ModelRequest], Any] = field(default=lambda r: xml(f"echo: {r.query}"))
    clients: list[DiscordClient] = field(default_factory=list)

    @property
    def client(self) -> DiscordClient:
        return self.clients[-1]

    def channel(self, name: str) -> int:
        return self.guild.channels[name]

    async def start(self, config: dict[str, Any] | None = None, **kw: Any) -> DiscordClient:
        kw.setdefault("discord_options", {"guild_ready_timeout": 0.05})
        kw.setdefault("ready_timeout", 10.0)
        client = create_client(
            self.runtime, config or {}, {"DISCORD_API_TOKEN": self.fake.token}, **kw
        )
        await client.start()
        self.clients.append(client)
        return client

    async def settle(self) -> None:
        """Wait until every message/reaction event the fake sent has been handled."""

        def done() -> bool:
            expected = sum(self.fake.dispatched[e] for e in WATCHED)
            return self.client.stats.events >= expected and not self.client.busy

        await self.fake.wait_until(done)
        await asyncio.sleep(0)

    def mention(self) -> str:
        return f"<@{self.fake.bot_id}>"

    def entity(self, user: Json) -> str:
        return stable_id(self.runtime.agent_id, "discord", "entity", user["id"])

    def room(self, channel_id: int) -> str:
        return stable_id(self.runtime.agent_id, "discord", "room", str(channel_id))

    async def close(self) -> None:
        for client in self.clients:
            await client.stop()


@pytest.fixture
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    async with (
        FakeDiscord(bot_name="Harbor") as fake,
        SQLiteStore(path=tmp_path / "carrier.db") as store,
    ):
        guild = fake.add_guild("Jam Club", ["general", "random", "showcase"])
        fake.add_thread(guild, "general", "jam-thread")
        ana = fake.add_member(guild, "ana")
        bob = fake.add_member(guild, "bob")
        otherbot = fake.add_member(guild, "otherbot", bot=True)
        holder: dict[str, Harness] = {}

        def model_fn(request: ModelRequest) -> Any:
            h = holder["h"]
            if request.purpose == "should_respond":
                return h.decision
            return h.answer(request)

        model = FunctionModel(model_fn)
        runtime = AgentRuntime(
            character=Character.model_validate(CHARACTER),
            store=store,
            embedder=HashEmbedder(),
            model=model,
            seed=7,
            fact_interval=10_000,
        )
        await runtime.start()
        h = Harness(
            fake=fake,
            store=store,
            runtime=runtime,
            model=model,
            guild=guild,
            ana=ana,
            bob=bob,
            otherbot=otherbot,
        )
        holder["h"] = h
        try:
            yield h
        finally:
            await h.close()
            await runtime.background.close(grace=0)  # its jobs end before the store closes
