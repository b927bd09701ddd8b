from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from carrier.character import Character
from carrier.llm.base import ModelProvider
from carrier.memory.fake import HashEmbedder
from carrier.memory.sqlite import SQLiteStore
from carrier.runtime import AgentRuntime
from carrier.types import Author, Channel, Message, RoomKind

CHARACTER = {
    "name": "Harbor",
    "bio": ["Harbor hosts a game-dev community.", "Harbor loves pixel art."],
    "lore": ["Harbor once shipped a jam game in 48 hours."],
    "adjectives": ["warm", "witty"],
    "topics": ["game jams", "pixel art"],
    "style": {"all": ["short sentences"], "chat": ["friendly"]},
    "messageExamples": [
        [
            {"user": "{{user1}}", "content": {"text": "hello"}},
            {"user": "Harbor", "content": {"text": "Ahoy! Welcome aboard."}},
        ],
        [
            {"user": "{{user1}}", "content": {"text": "who are you?"}},
            {"user": "Harbor", "content": {"text": "I'm Harbor, the host of this server."}},
        ],
    ],
}


def xml(text: str, actions: str = "REPLY", thought: str = "thinking") -> str:
    return f"<response><thought>{thought}</thought><actions>{actions}</actions><text>{text}</text></response>"


def dm(text: str, *, user: str = "ana", msg_id: str | None = None) -> Message:
    return Message(
        platform="test",
        author=Author(platform_id=user, name=user.capitalize()),
        channel=Channel(platform_id=f"dm-{user}", kind=RoomKind.DM),
        text=text,
        platform_message_id=msg_id,
    )


def group(text: str, *, user: str = "ana", channel: str = "general", **kw: Any) -> Message:
    return Message(
        platform="test",
        author=Author(platform_id=user, name=user.capitalize()),
        channel=Channel(platform_id=channel, name=channel, kind=RoomKind.GROUP),
        text=text,
        **kw,
    )


@pytest.fixture
def character() -> Character:
    return Character.model_validate(CHARACTER)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    async with SQLiteStore(path=tmp_path / "carrier.db") as s:
        yield s


@pytest.fixture
def make_runtime(character: Character, store: SQLiteStore) -> Callable[..., AgentRuntime]:
    def make(model: ModelProvider, **kw: Any) -> AgentRuntime:
        kw.setdefault("seed", 7)
        return AgentRuntime(
            character=kw.pop("character", character),
            store=store,
            embedder=HashEmbedder(),
            model=model,
            **kw,
        )

    return make
