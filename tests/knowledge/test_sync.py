"""sync_knowledge: a character's knowledge list follows its files (ingest once, update, forget)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from carrier.errors import CharacterError
from carrier.knowledge import Chunking, knowledge_room_id, list_knowledge
from carrier.knowledge import sync_knowledge as _sync_knowledge
from carrier.knowledge.index import chunk_id, load_index
from carrier.memory.base import Store
from carrier.types import Content, Memory, MemoryKind
from tests.knowledge.conftest import CountingEmbedder, make_pdf, words_text
from tests.memory.conftest import StoreFactory


async def sync_knowledge(*args: Any, **kwargs: Any) -> Any:
    """One vector per chunk here (no parts), so that counting encoded texts counts chunks; how
    parts are embedded is tested on its own below."""
    kwargs.setdefault("chunking", Chunking(embed_words=0))
    return await _sync_knowledge(*args, **kwargs)


async def knowledge_chunks(store: Store, agent_id: str) -> dict[str, Memory]:
    memories = await store.get_memories(
        agent_id=agent_id, kinds=[MemoryKind.KNOWLEDGE], limit=10_000
    )
    return {m.id: m for m in memories}


def make_docs(folder: Path) -> None:
    (folder / "sub").mkdir(parents=True)
    (folder / "guide.txt").write_text(words_text(20), encoding="utf-8")  # 1920 words: 3 chunks
    (folder / "faq.md").write_text(
        "# Harbor FAQ\n\nThe ferry to Grayhaven leaves at nine.\n", encoding="utf-8"
    )
    (folder / "sub" / "manual.pdf").write_bytes(
        make_pdf(
            [["The lighthouse keeper is Orla Finch."], ["She has kept the light since 1987."]],
            title="Lighthouse manual",
        )
    )
    (folder / "sub" / "photo.png").write_bytes(b"\x89PNG not a document")
    (folder / ".hidden.md").write_text("never read", encoding="utf-8")


async def test_sync_folder_follows_changes_and_deletions(
    store_factory: StoreFactory, write_character
) -> None:
    character = write_character([{"directory": "docs"}, "The harbor opens at dawn."])
    docs = Path(character.source).parent / "docs"
    make_docs(docs)
    agent = character.agent_id
    embedder = CountingEmbedder()
    async with store_factory.new_store() as store:
        # 1. First sync: every document is read, chunked, embedded once (in batches) and stored.
        first = await sync_knowledge(
            store, embedder, agent_id=agent, character=character, batch_size=2
        )
        inline = next(s for s in first.added if s.startswith("inline:"))
        assert sorted(first.added) == sorted(
            ["docs/faq.md", "docs/guide.txt", "docs/sub/manual.pdf", inline]
        )
        assert first.skipped == ["docs/sub/photo.png"]
        chunks = await knowledge_chunks(store, agent)
        assert len(chunks) == 3 + 1 + 1 + 1 == first.chunks_embedded == len(embedder.encoded)
        assert embedder.calls == 3  # six chunks in batches of two
        index = await load_index(store, agent)
        pdf = chunks[chunk_id(agent, "docs/sub/manual.pdf", index["docs/sub/manual.pdf"].hash, 0)]
        assert "Orla Finch" in pdf.content.text and "since 1987" in pdf.content.text
        assert pdf.room_id == knowledge_room_id(agent)
        assert pdf.embedding_model == embedder.model_id and pdf.embedding is not None
        assert pdf.content.metadata["title"] == "Lighthouse manual"
        assert pdf.content.metadata["source"] == "docs/sub/manual.pdf"
        assert pdf.content.metadata["chunk_index"] == 0
        titles = {d.source: d.title for d in await list_knowledge(store, agent)}
        assert titles["docs/faq.md"] == "Harbor FAQ" and titles["docs/guide.txt"] == "guide.txt"

        # 2. Nothing changed: nothing is embedded, nothing is written.
        embedder.encoded.clear()
        again = await sync_knowledge(store, embedder, agent_id=agent, character=character)
        assert len(again.unchanged) == 4 and not again.changed
        assert embedder.encoded == []
        assert set(await knowledge_chunks(store, agent)) == set(chunks)

        # 3. One paragraph of the guide changes and the FAQ is deleted.
        guide = docs / "guide.txt"
        paragraphs = guide.read_text(encoding="utf-8").split("\n\n")
        paragraphs[-1] = "The harbor master changed this last paragraph."
        guide.write_text("\n\n".join(paragraphs), encoding="utf-8")
        (docs / "faq.md").unlink()
        embedder.encoded.clear()
        third = await sync_knowledge(store, embedder, agent_id=agent, character=character)
        assert third.updated == ["docs/guide.txt"] and third.removed == ["docs/faq.md"]
        assert sorted(third.unchanged) == sorted(["docs/sub/manual.pdf", inline])
        # Only the chunk holding the edit is embedded again; the others keep their vectors.
        assert len(embedder.encoded) == 1
        assert "changed this last paragraph" in embedder.encoded[0]
        assert third.chunks_reused == 2
        after = await knowledge_chunks(store, agent)
        texts = [m.content.text for m in after.values()]
        assert not any("Harbor FAQ" in t or "ferry" in t for t in texts)
        assert any("changed this last paragraph" in t for t in texts)
        index = await load_index(store, agent)
        assert set(index) == {"docs/guide.txt", "docs/sub/manual.pdf", inline}
        expected = {cid for doc in index.values() for cid in doc.chunk_ids(agent)}
        assert set(after) == expected  # no stale chunk of the old guide or the FAQ is left


async def test_sync_character_string_edits_replace_the_old_fact(store, write_character) -> None:
    embedder = CountingEmbedder()
    character = write_character(["The ferry leaves at nine.", "Gulls are fed at noon."])
    await sync_knowledge(store, embedder, agent_id=character.agent_id, character=character)
    edited = write_character(["The ferry leaves at ten.", "Gulls are fed at noon."])
    report = await sync_knowledge(store, embedder, agent_id=edited.agent_id, character=edited)
    assert len(report.added) == 1 and len(report.removed) == 1 and len(report.unchanged) == 1
    texts = sorted(
        m.content.text for m in (await knowledge_chunks(store, edited.agent_id)).values()
    )
    assert texts == ["Gulls are fed at noon.", "The ferry leaves at ten."]


async def test_sync_missing_path_names_the_character_file_and_keeps_knowledge(
    store, write_character, fake_embedder
) -> None:
    character = write_character([{"path": "notes.md"}])
    notes = Path(character.source).parent / "notes.md"
    notes.write_text("The harbor opens at dawn.", encoding="utf-8")
    await sync_knowledge(store, fake_embedder, agent_id=character.agent_id, character=character)
    before = await knowledge_chunks(store, character.agent_id)

    broken = write_character([{"path": "notes.md"}, {"path": "docs/missing.md"}])
    with pytest.raises(CharacterError) as caught:
        await sync_knowledge(store, fake_embedder, agent_id=broken.agent_id, character=broken)
    message = str(caught.value)
    assert str(broken.source) in message
    assert "knowledge.1.path" in message and "docs/missing.md" in message
    assert await knowledge_chunks(store, character.agent_id) == before
    assert [d.source for d in await list_knowledge(store, character.agent_id)] == ["notes.md"]


async def test_sync_refuses_unsupported_files_by_name(
    store, write_character, fake_embedder
) -> None:
    character = write_character([{"path": "contract.docx"}])
    (Path(character.source).parent / "contract.docx").write_bytes(b"PK")
    with pytest.raises(CharacterError, match=r"contract\.docx.*\.docx files are not supported"):
        await sync_knowledge(store, fake_embedder, agent_id=character.agent_id, character=character)


async def test_sync_unreadable_pdf_is_reported_and_the_rest_ingested(
    store, write_character, fake_embedder
) -> None:
    character = write_character([{"directory": "docs"}])
    docs = Path(character.source).parent / "docs"
    docs.mkdir()
    (docs / "good.txt").write_text("The ferry leaves at nine.", encoding="utf-8")
    (docs / "broken.pdf").write_bytes(make_pdf([["Old manual text."]]))
    await sync_knowledge(store, fake_embedder, agent_id=character.agent_id, character=character)

    (docs / "broken.pdf").write_bytes(b"%PDF-1.4 this is not really a PDF")
    report = await sync_knowledge(
        store, fake_embedder, agent_id=character.agent_id, character=character
    )
    assert list(report.failed) == ["docs/broken.pdf"]
    assert report.unchanged == ["docs/good.txt"] and not report.removed
    texts = [m.content.text for m in (await knowledge_chunks(store, character.agent_id)).values()]
    assert "Old manual text." in texts  # what was known of the unreadable file is kept


async def test_sync_repairs_missing_and_stray_chunks(store, write_character) -> None:
    character = write_character([{"path": "guide.txt"}])
    (Path(character.source).parent / "guide.txt").write_text(words_text(20), encoding="utf-8")
    agent = character.agent_id
    embedder = CountingEmbedder()
    await sync_knowledge(store, embedder, agent_id=agent, character=character)
    chunks = await knowledge_chunks(store, agent)

    # A chunk went missing (deleted behind the index's back): the document is ingested again,
    # embedding only the missing chunk.
    lost = sorted(chunks)[0]
    await store.delete_memory(lost)
    embedder.encoded.clear()
    report = await sync_knowledge(store, embedder, agent_id=agent, character=character)
    assert report.updated == ["guide.txt"]
    assert embedder.encoded == [chunks[lost].content.text]
    assert set(await knowledge_chunks(store, agent)) == set(chunks)

    # A chunk no document claims (left by a run killed between storing and indexing) goes.
    await store.add_memory(
        Memory(
            id="stray",
            agent_id=agent,
            room_id=knowledge_room_id(agent),
            entity_id=agent,
            kind=MemoryKind.KNOWLEDGE,
            content=Content(text="stale"),
        )
    )
    report = await sync_knowledge(store, embedder, agent_id=agent, character=character)
    assert report.unchanged == ["guide.txt"]
    assert set(await knowledge_chunks(store, agent)) == set(chunks)


async def test_sync_reembeds_everything_for_another_embedding_model(store, write_character) -> None:
    character = write_character(["The ferry leaves at nine.", "Gulls are fed at noon."])
    agent = character.agent_id
    await sync_knowledge(store, CountingEmbedder(dim=256), agent_id=agent, character=character)
    other = CountingEmbedder(dim=64)
    report = await sync_knowledge(store, other, agent_id=agent, character=character)
    assert len(report.updated) == 2 and len(other.encoded) == 2
    chunks = (await knowledge_chunks(store, agent)).values()
    assert {m.embedding_model for m in chunks} == {"hash:64"} and len(chunks) == 2


async def test_sync_no_knowledge_writes_nothing(store, write_character, fake_embedder) -> None:
    character = write_character([])
    report = await sync_knowledge(
        store, fake_embedder, agent_id=character.agent_id, character=character
    )
    assert not report.changed
    assert await store.get_setting(f"knowledge:{character.agent_id}") is None


class FailingEmbedder(CountingEmbedder):
    """Fails on its ``fail_on``-th call, as a run killed half-way would stop."""

    def __init__(self, fail_on: int) -> None:
        super().__init__()
        self.fail_on = fail_on

    async def _encode(self, texts: list[str]) -> np.ndarray:
        if self.calls + 1 == self.fail_on:
            raise RuntimeError("embedder died")
        return await super()._encode(texts)


async def test_sync_after_a_failed_run_embeds_only_what_is_missing(store, write_character) -> None:
    character = write_character([{"path": "a.txt"}, {"path": "b.txt"}])
    folder = Path(character.source).parent
    (folder / "a.txt").write_text(words_text(20, tag="a"), encoding="utf-8")  # 3 chunks
    (folder / "b.txt").write_text(words_text(20, tag="b"), encoding="utf-8")  # 3 chunks
    agent = character.agent_id
    with pytest.raises(RuntimeError, match="embedder died"):
        await sync_knowledge(
            store, FailingEmbedder(fail_on=5), agent_id=agent, character=character, batch_size=1
        )
    # a.txt was finished and indexed; one chunk of b.txt was stored but is not indexed yet.
    assert [d.source for d in await list_knowledge(store, agent)] == ["a.txt"]
    assert len(await knowledge_chunks(store, agent)) == 4

    embedder = CountingEmbedder()
    report = await sync_knowledge(store, embedder, agent_id=agent, character=character)
    assert report.added == ["b.txt"] and report.unchanged == ["a.txt"]
    assert len(embedder.encoded) == 2 and report.chunks_reused == 1
    index = await load_index(store, agent)
    expected = {cid for doc in index.values() for cid in doc.chunk_ids(agent)}
    assert set(await knowledge_chunks(store, agent)) == expected and len(expected) == 6


async def test_sync_records_shared_and_a_flip_embeds_nothing(store, write_character) -> None:
    character = write_character([{"path": "rules.md", "shared": True}])
    (Path(character.source).parent / "rules.md").write_text("# Rules\n\nBe kind.", "utf-8")
    embedder = CountingEmbedder()
    agent = character.agent_id
    await sync_knowledge(store, embedder, agent_id=agent, character=character)
    assert [(d.source, d.shared) for d in await list_knowledge(store, agent)] == [
        ("rules.md", True)
    ]
    embedder.encoded.clear()
    flipped = write_character([{"path": "rules.md"}])
    report = await sync_knowledge(store, embedder, agent_id=agent, character=flipped)
    assert report.unchanged == ["rules.md"] and embedder.encoded == []
    assert [d.shared for d in await list_knowledge(store, agent)] == [False]


async def test_sync_a_long_chunk_gets_the_mean_vector_of_its_parts(
    store_factory: StoreFactory, write_character
) -> None:
    # An embedding model reads ~190 words; an 800-word chunk is embedded in parts and averaged,
    # so its second half counts as much as its first.
    character = write_character([{"path": "guide.txt"}])
    text = words_text(8)  # 768 words: one chunk
    (Path(character.source).parent / "guide.txt").write_text(text, encoding="utf-8")
    embedder = CountingEmbedder()
    async with store_factory.new_store() as store:
        await _sync_knowledge(store, embedder, agent_id=character.agent_id, character=character)
        [chunk] = (await knowledge_chunks(store, character.agent_id)).values()
    parts = Chunking().embedding_parts(chunk.content.text)
    assert len(parts) == 5 and embedder.encoded == parts  # the parts were embedded, not the chunk
    expected = (await CountingEmbedder().embed(parts)).mean(axis=0)
    expected /= np.linalg.norm(expected)
    assert chunk.embedding is not None
    assert np.allclose(chunk.embedding, expected, atol=1e-6)
