"""add_knowledge / list_knowledge / remove_knowledge: documents managed by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from carrier.knowledge import (
    KnowledgeError,
    add_knowledge,
    list_knowledge,
    remove_knowledge,
    sync_knowledge,
)
from carrier.types import MemoryKind
from tests.knowledge.conftest import CountingEmbedder, make_pdf

AGENT = "5b0c2c6e-8f0a-4f52-9a57-3f4f1f0c9a11"


async def count(store) -> int:
    return await store.count_memories(agent_id=AGENT, kinds=[MemoryKind.KNOWLEDGE])


async def test_add_folder_then_add_again_follows_the_folder(store, tmp_path: Path) -> None:
    folder = tmp_path / "library"
    folder.mkdir()
    (folder / "a.txt").write_text("The ferry leaves at nine.", encoding="utf-8")
    (folder / "b.pdf").write_bytes(make_pdf([["Orla Finch keeps the lighthouse."]]))
    embedder = CountingEmbedder()

    calls: list[tuple[str, int, int]] = []
    report = await add_knowledge(
        store,
        embedder,
        agent_id=AGENT,
        paths=[folder],
        progress=lambda phase, done, total: calls.append((phase, done, total)),
    )
    base = folder.as_posix()
    assert sorted(report.added) == [f"{base}/a.txt", f"{base}/b.pdf"]
    assert calls[0] == ("read", 0, 2) and calls[-1] == ("embed", 2, 2)
    docs = await list_knowledge(store, AGENT)
    assert [(d.source, d.origin, d.chunks) for d in docs] == [
        (f"{base}/a.txt", "cli", 1),
        (f"{base}/b.pdf", "cli", 1),
    ]

    (folder / "a.txt").unlink()
    (folder / "c.md").write_text("# Tides\n\nHigh tide is at six.", encoding="utf-8")
    report = await add_knowledge(store, embedder, agent_id=AGENT, paths=[folder])
    assert report.removed == [f"{base}/a.txt"] and report.added == [f"{base}/c.md"]
    assert report.unchanged == [f"{base}/b.pdf"]
    assert await count(store) == 2


async def test_add_missing_or_unsupported_paths_change_nothing(store, tmp_path: Path) -> None:
    good = tmp_path / "good.txt"
    good.write_text("The ferry leaves at nine.", encoding="utf-8")
    (tmp_path / "slides.pptx").write_bytes(b"PK")
    with pytest.raises(KnowledgeError) as caught:
        await add_knowledge(
            store,
            CountingEmbedder(),
            agent_id=AGENT,
            paths=[good, tmp_path / "nope.md", tmp_path / "slides.pptx"],
        )
    message = str(caught.value)
    assert "nope.md: not found" in message and "slides.pptx" in message and ".pptx files" in message
    assert await count(store) == 0


async def test_remove_by_source_or_folder(store, tmp_path: Path) -> None:
    folder = tmp_path / "library"
    (folder / "deep").mkdir(parents=True)
    (folder / "a.txt").write_text("The ferry leaves at nine.", encoding="utf-8")
    (folder / "deep" / "b.txt").write_text("Gulls are fed at noon.", encoding="utf-8")
    (tmp_path / "other.txt").write_text("High tide is at six.", encoding="utf-8")
    await add_knowledge(
        store, CountingEmbedder(), agent_id=AGENT, paths=[folder, tmp_path / "other.txt"]
    )
    base = folder.as_posix()

    gone = await remove_knowledge(store, AGENT, f"{base}/a.txt")
    assert [d.source for d in gone] == [f"{base}/a.txt"]
    gone = await remove_knowledge(store, AGENT, base + "/")
    assert [d.source for d in gone] == [f"{base}/deep/b.txt"]
    assert await remove_knowledge(store, AGENT, base) == []
    assert [d.source for d in await list_knowledge(store, AGENT)] == [
        (tmp_path / "other.txt").as_posix()
    ]
    assert await count(store) == 1


async def test_character_sync_leaves_documents_added_by_hand(
    store, tmp_path: Path, write_character
) -> None:
    character = write_character(["The ferry leaves at nine."])
    extra = tmp_path / "extra.txt"
    extra.write_text("Gulls are fed at noon.", encoding="utf-8")
    embedder = CountingEmbedder()
    agent = character.agent_id
    await add_knowledge(store, embedder, agent_id=agent, paths=[extra])
    await sync_knowledge(store, embedder, agent_id=agent, character=character)
    emptied = write_character([])
    report = await sync_knowledge(store, embedder, agent_id=agent, character=emptied)
    assert len(report.removed) == 1 and report.removed[0].startswith("inline:")
    assert [d.origin for d in await list_knowledge(store, agent)] == ["cli"]
