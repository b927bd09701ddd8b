"""Fixtures for the fault suite: model servers on loopback that fail on purpose, and runtimes
built from settings the way ``carrier run`` builds them."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from carrier.assemble import build_runtime
from carrier.character import Character
from carrier.memory.fake import HashEmbedder
from carrier.memory.sqlite import SQLiteStore
from carrier.runtime import AgentRuntime
from carrier.settings import load_settings
from carrier.types import Author, Channel, Message, RoomKind
from tests.faults.fault_server import FaultServer
from tests.llm.openai_server import FakeOpenAIServer

EXCEPTION_TEXT = re.compile(
    r"Traceback|\b[A-Z]\w*(?:Error|Exception|Exhausted)\b|\bline \d+, in\b|litellm\.",
)
"""What a person must never read: a traceback, an exception's name, litellm's own wording."""


def exception_text(text: str) -> list[str]:
    """The pieces of ``text`` that look like Python exception text (empty when clean)."""
    return [m.group(0) for m in EXCEPTION_TEXT.finditer(text)]


def persona(**settings: Any) -> Character:
    return Character.model_validate(
        {
            "name": "Harbor",
            "bio": ["Harbor hosts a game-dev community."],
            "settings": settings,
            "messageExamples": [
                [
                    {"user": "{{user1}}", "content": {"text": "hello"}},
                    {"user": "Harbor", "content": {"text": "Ahoy!"}},
                ]
            ],
        }
    )


def dm(text: str, *, user: str = "ana") -> Message:
    return Message(
        platform="test",
        author=Author(platform_id=user, name=user.capitalize()),
        channel=Channel(platform_id=f"dm-{user}", kind=RoomKind.DM),
        text=text,
    )


@pytest.fixture(scope="session", autouse=True)
def _litellm_loaded() -> None:
    """litellm imported before the first turn: its one-time import (seconds) is not a fault,
    and the deadlines here are short."""
    from carrier.llm._litellm import _import

    _import()


@pytest.fixture
def openai_server() -> Iterator[FakeOpenAIServer]:
    server = FakeOpenAIServer()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def fault_server() -> Iterator[FaultServer]:
    server = FaultServer(hang=2.0, retry_after=0.1)
    server.start()
    yield server
    server.stop()


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    async with SQLiteStore(path=tmp_path / "carrier.db") as s:
        yield s


@pytest.fixture
def make_runtime(tmp_path: Path, store: SQLiteStore) -> Callable[..., AgentRuntime]:
    """A runtime whose model is chosen from settings (``CARRIER_MODEL`` at a loopback
    ``CARRIER_API_BASE``) and the character's ``settings``, as ``carrier run`` chooses it."""

    def make(base_url: str, *, model: str = "openai/primary", **settings: Any) -> AgentRuntime:
        env = {
            "CARRIER_DATA_DIR": str(tmp_path / "data"),
            "CARRIER_MODEL": model,
            "CARRIER_API_BASE": base_url,
        }
        runtime, choice = build_runtime(
            persona(**settings),
            settings=load_settings(env),
            store=store,
            embedder=HashEmbedder(),
            environ={},
        )
        assert not choice.offline
        return runtime

    return make
