from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from carrier.character import Character
from carrier.llm.base import ModelProvider, ModelRequest
from carrier.memory.fake import HashEmbedder
from carrier.memory.sqlite import SQLiteStore
from carrier.runtime import AgentRuntime
from carrier.types import Author, Channel, Message, RoomKind
from carrier.untrusted import unescape

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


def system_text(request: ModelRequest) -> str:
    """The system message of a request (the persona and the rules)."""
    [system] = [m for m in request.messages if m.role == "system"]
    assert isinstance(system.content, str)
    return system.content


def data_text(request: ModelRequest) -> str:
    """The data message of a request: its first user message (the text part, with images)."""
    user = next(m for m in request.messages if m.role == "user")
    if isinstance(user.content, str):
        return user.content
    return "".join(str(p.get("text", "")) for p in user.content if p.get("type") == "text")


def section(text: str, tag: str) -> str:
    """What lies inside the first ``<tag ...>`` element of a prompt ("" when there is none)."""
    m = re.search(rf"<{tag}(?: [^>]*)?>(.*?)</{tag}>", text, re.DOTALL)
    return m.group(1) if m else ""


_MESSAGE = re.compile(r'<message from="([^"]*)"[^>]*>(.*?)</message>', re.DOTALL)


def said(text: str) -> list[tuple[str, str]]:
    """(speaker label, text) of the ``<message>`` elements in ``text``, unescaped."""
    return [(who, unescape(re.sub(r"\n  ", "\n", body))) for who, body in _MESSAGE.findall(text)]


def tool_output(content: object) -> str:
    """The output inside a tool message's ``<data>`` element, as the tool returned it."""
    body = section(str(content), "data").strip("\n")
    return unescape("\n".join(line.removeprefix("  ") for line in body.split("\n")))


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
async def make_runtime(
    character: Character, store: SQLiteStore
) -> AsyncIterator[Callable[..., AgentRuntime]]:
    made: list[AgentRuntime] = []

    def make(model: ModelProvider, **kw: Any) -> AgentRuntime:
        kw.setdefault("seed", 7)
        runtime = AgentRuntime(
            character=kw.pop("character", character),
            store=store,
            embedder=HashEmbedder(),
            model=model,
            **kw,
        )
        made.append(runtime)
        return runtime

    yield make
    # Background work (facts, summaries) ends before the store closes.
    for runtime in made:
        await runtime.background.close(grace=0)
