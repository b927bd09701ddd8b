"""Agent start prepares vector search in the background: the first recall after a restart finds the
agent's vectors in memory instead of scanning the database."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from carrier.character import Character
from carrier.llm.fake import FunctionModel
from carrier.memory.base import Store
from carrier.memory.fake import HashEmbedder
from carrier.memory.sqlite import SQLiteStore
from carrier.runtime import AgentRuntime
from tests.pipeline.conftest import dm, group, xml


def _runtime(character: Character, store: Store) -> AgentRuntime:
    return AgentRuntime(
        character=character,
        store=store,
        embedder=HashEmbedder(),
        model=FunctionModel(lambda r: xml("Noted.")),
        seed=7,
    )


async def test_runtime_start_loads_the_agents_vectors_after_a_restart(
    tmp_path: Path, character: Character
) -> None:
    path = tmp_path / "carrier.db"
    async with SQLiteStore(path=path) as store:
        first = _runtime(character, store)
        await first.start()
        for i in range(3):
            result = await first.handle(dm(f"message number {i} about ships", msg_id=f"m{i}"))
            await first.outbox.deliver(result.replies)  # a delivered reply gets its vector
        await first.stop()

    async with SQLiteStore(path=path) as store:
        runtime = _runtime(character, store)
        model, dim = runtime.embedder.model_id, runtime.embedder.dim
        assert store.vectors is not None
        assert not store.vectors.loaded(runtime.agent_id, model, dim)
        await runtime.start()
        await runtime.search_ready()
        assert store.vectors.loaded(runtime.agent_id, model, dim)
        stats = {(s["agent_id"], s["set"]): s["rows"] for s in store.vectors.stats()}
        assert stats[runtime.agent_id, "main"] == 6  # three messages, three replies
        assert stats[runtime.agent_id, "knowledge"] == 0
        await runtime.stop()


class _FailingStore(SQLiteStore):
    async def prepare_search(self, *, agent_id: str, embedding_model: str, dim: int) -> None:
        raise RuntimeError("index files unreadable")


async def test_runtime_start_survives_a_failed_search_preparation(
    tmp_path: Path, character: Character, caplog: pytest.LogCaptureFixture
) -> None:
    async with _FailingStore(path=tmp_path / "carrier.db") as store:
        runtime = _runtime(character, store)
        with caplog.at_level(logging.WARNING, logger="carrier.runtime"):
            await runtime.start()
            await runtime.search_ready()
        assert "preparing vector search failed" in caplog.text
        result = await runtime.handle(dm("still answering?", msg_id="m1"))
        assert [m.content.text for m in result.replies] == ["Noted."]
        await runtime.stop()


async def test_runtime_stop_cancels_a_preparation_still_running(
    tmp_path: Path, character: Character
) -> None:
    gate = asyncio.Event()

    class SlowStore(SQLiteStore):
        async def prepare_search(self, *, agent_id: str, embedding_model: str, dim: int) -> None:
            await gate.wait()

    async with SlowStore(path=tmp_path / "carrier.db") as store:
        runtime = _runtime(character, store)
        await runtime.start()
        task = runtime._search_ready
        assert task is not None and not task.done()
        await runtime.stop()
        assert task.cancelled()


async def test_runtime_writes_a_known_room_and_sender_once(
    tmp_path: Path, character: Character
) -> None:
    writes: list[str] = []

    class CountingStore(SQLiteStore):
        async def upsert_room(self, room: Any) -> None:
            writes.append(f"room {room.name}")
            await super().upsert_room(room)

        async def upsert_entity(self, entity: Any) -> None:
            writes.append(f"entity {entity.names}")
            await super().upsert_entity(entity)

        async def add_participant(self, room_id: str, entity_id: str) -> None:
            writes.append("member")
            await super().add_participant(room_id, entity_id)

    async with CountingStore(path=tmp_path / "carrier.db") as store:
        runtime = _runtime(character, store)
        await runtime.start()
        await runtime.handle(group("hello", channel="general"))
        await runtime.handle(group("again", channel="general"))
        assert writes == ["room general", "entity ['Ana']", "member"]  # the second: none
        # A renamed sender is written again, and so is a new room.
        renamed = group("new name", channel="general")
        renamed.author.username = "ana_b"
        await runtime.handle(renamed)
        await runtime.handle(group("elsewhere", channel="random"))
        assert writes[3:] == [
            "entity ['Ana', 'ana_b']",
            "room random",
            "entity ['Ana']",  # differs from the last written: written (the store merges names)
            "member",
        ]
        entity = await store.get_entity(_entity_id(runtime))
        assert entity is not None and entity.names == ["Ana", "ana_b"]
        await runtime.stop()


def _entity_id(runtime: AgentRuntime) -> str:
    from carrier.types import stable_id

    return stable_id(runtime.agent_id, "test", "entity", "ana")


async def test_runtime_forget_then_the_person_speaks_again(
    tmp_path: Path, character: Character
) -> None:
    async with SQLiteStore(path=tmp_path / "carrier.db") as store:
        runtime = _runtime(character, store)
        await runtime.start()
        await runtime.handle(group("I am Ana", channel="general"))
        await runtime.handle(dm("I am Ana, in private"))
        assert runtime._composer._history  # the room's history, kept for its next turn
        report = await runtime.forget(_entity_id(runtime))
        assert report.messages == 2 and report.entity
        assert not runtime._composer._history  # her words are not kept in memory either
        assert await store.get_entity(_entity_id(runtime)) is None
        # Her records were forgotten as written too: her next message writes them anew.
        await runtime.handle(group("hello again", channel="general"))
        entity = await store.get_entity(_entity_id(runtime))
        assert entity is not None and entity.names == ["Ana"]
        room = (await store.get_memories(agent_id=runtime.agent_id, limit=1))[0].room_id
        assert await store.list_participants(room) == [_entity_id(runtime)]
        await runtime.stop()


async def test_runtime_start_gets_the_model_ready_before_the_first_turn(
    tmp_path: Path, character: Character
) -> None:
    class Preparing(FunctionModel):
        prepared = 0

        async def prepare(self) -> None:
            self.prepared += 1

    model = Preparing(lambda r: xml("Noted."))
    async with SQLiteStore(path=tmp_path / "carrier.db") as store:
        runtime = AgentRuntime(
            character=character, store=store, embedder=HashEmbedder(), model=model
        )
        await runtime.start()
        assert model.prepared == 1  # litellm's import is not paid inside the first turn's deadline
        await runtime.stop()


async def test_runtime_a_turn_decodes_only_the_history_it_did_not_have(
    tmp_path: Path, character: Character, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The state composer reads its room's history each turn but decodes only the rows it did
    not already hold as they are: the previous turn's message (its status changed) and reply,
    not the turn's own message (stored by this turn), nor the older ones."""
    from carrier.memory import _sqlite_codec as codec

    async with SQLiteStore(path=tmp_path / "carrier.db") as store:
        runtime = _runtime(character, store)
        await runtime.start()
        for i in range(3):
            await runtime.handle(dm(f"message {i}"))
        decoded: list[str] = []
        decode = codec.memory_from_row
        reusing = store.get_memories_reusing

        async def history(**kwargs: Any) -> Any:
            def counting(row: Any) -> Any:
                decoded.append(row["content"])
                return decode(row)

            monkeypatch.setattr(codec, "memory_from_row", counting)
            try:
                return await reusing(**kwargs)
            finally:
                monkeypatch.setattr(codec, "memory_from_row", decode)

        monkeypatch.setattr(store, "get_memories_reusing", history)
        result = await runtime.handle(dm("message 3"))
        assert result.replies
        assert len(decoded) == 2
        assert not any("message 3" in content for content in decoded)
        assert any("message 2" in content for content in decoded)
        await runtime.stop()
