"""The ingest engine: bring an agent's stored chunks in line with a list of documents.

Order matters for crash safety. A new chunk is stored before the index names it, old chunks are
deleted after the new ones are stored, and the index is saved after every batch (and when a run
fails), so a run that stops half-way leaves the old or the new version of each document
findable. The next run notices (chunks stored vs chunks indexed), reuses the stray chunks whose
text it needs instead of embedding them again, deletes the rest, and ingests again the documents
whose chunks went missing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from carrier.knowledge.chunking import Chunking, chunk_text, count_words
from carrier.knowledge.index import (
    KnowledgeDocument,
    chunk_id,
    knowledge_room_id,
    load_index,
    save_index,
)
from carrier.knowledge.report import KnowledgeProgress, KnowledgeReport, Phase
from carrier.knowledge.sources import Document, SourceRef, read_document, read_source
from carrier.memory.base import Store
from carrier.memory.embedder import Embedder, normalize_rows
from carrier.types import Content, Memory, MemoryKind, MemoryStatus, stable_id

__all__ = ["DEFAULT_BATCH_SIZE", "Ingest"]

log = logging.getLogger(__name__)

DEFAULT_BATCH_SIZE = 64


@dataclass
class _Pending:
    """A new or changed document, read and chunked, whose chunks are being stored."""

    doc: Document
    entry: KnowledgeDocument
    chunks: list[str]
    old: KnowledgeDocument | None
    remaining: int


class Ingest:
    """One run over one agent's knowledge. Keyword-only; use :meth:`run` once."""

    def __init__(
        self,
        *,
        store: Store,
        embedder: Embedder,
        agent_id: str,
        chunking: Chunking | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        progress: KnowledgeProgress | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.store = store
        self.embedder = embedder
        self.agent_id = agent_id
        self.chunking = chunking or Chunking()
        self.batch_size = batch_size
        self.progress = progress
        self.room_id = knowledge_room_id(agent_id)
        self.entity_id = stable_id(agent_id, "agent")
        self.report = KnowledgeReport()
        self.index: dict[str, KnowledgeDocument] = {}
        self._strays: dict[str, Memory] = {}
        """Stored chunks no indexed document claims (left by a run that stopped half-way)."""
        self._dirty = False

    async def run(
        self,
        refs: Sequence[SourceRef],
        *,
        removable: Callable[[KnowledgeDocument], bool],
        skipped: Sequence[str] = (),
    ) -> KnowledgeReport:
        """Ingest ``refs`` (unchanged ones are only hashed) and forget indexed documents that are
        not among them and for which ``removable`` is true."""
        self.report.skipped = list(skipped)
        self.index = await load_index(self.store, self.agent_id)
        if not refs and not self.index:
            return self.report  # nothing listed, nothing known: no writes at all
        try:
            incomplete = await self._repair()
            wanted = {ref.source for ref in refs}
            for source, doc in list(self.index.items()):
                if source not in wanted and removable(doc):
                    await self._forget(doc)
                    self.report.removed.append(source)
            pending = await self._read(refs, incomplete)
            await self._store(pending)
            await self._delete(sorted(self._strays))
        except BaseException:
            if self._dirty:  # record what was stored before the failure; keep the original error
                with contextlib.suppress(Exception):
                    await save_index(self.store, self.agent_id, self.index)
            raise
        await self._save()
        return self.report

    # -- steps ---------------------------------------------------------------------------------
    async def _repair(self) -> set[str]:
        """Find stored chunks no document claims (kept in ``_strays`` for reuse, deleted at the
        end) and return the documents with chunks missing.

        A count settles the usual case; only a mismatch lists the stored chunks (so a stray chunk
        and a missing one in the same run balance out, until the next mismatch).
        """
        expected = {cid for doc in self.index.values() for cid in doc.chunk_ids(self.agent_id)}
        kinds = [MemoryKind.KNOWLEDGE]
        count = await self.store.count_memories(
            agent_id=self.agent_id, room_id=self.room_id, kinds=kinds
        )
        if count == len(expected):
            return set()
        memories = await self.store.get_memories(
            agent_id=self.agent_id, room_id=self.room_id, kinds=kinds, limit=count
        )
        stored = {m.id for m in memories}
        self._strays = {m.id: m for m in memories if m.id not in expected}
        incomplete = {
            source
            for source, doc in self.index.items()
            if any(cid not in stored for cid in doc.chunk_ids(self.agent_id))
        }
        if self._strays or incomplete:
            log.warning(
                "knowledge of agent %s: %d stored chunk(s) no document claims (reused or "
                "deleted); %d document(s) had chunks missing and are ingested again",
                self.agent_id,
                len(self._strays),
                len(incomplete),
            )
        return incomplete

    async def _read(self, refs: Sequence[SourceRef], incomplete: set[str]) -> list[_Pending]:
        pending: list[_Pending] = []
        self._notify("read", 0, len(refs))
        for done, ref in enumerate(refs, 1):
            old = self.index.get(ref.source)
            try:
                data, digest = await asyncio.to_thread(read_source, ref)
                if old is not None and ref.source not in incomplete and self._current(old, digest):
                    self.report.unchanged.append(ref.source)
                    if (old.shared, old.origin) != (ref.shared, ref.origin):
                        self._record(
                            old.model_copy(update={"shared": ref.shared, "origin": ref.origin})
                        )
                else:
                    doc = await asyncio.to_thread(read_document, ref, data, digest)
                    chunks = await asyncio.to_thread(chunk_text, doc.text, self.chunking)
                    pending.append(self._plan(ref, doc, chunks, old))
            except Exception as exc:  # one unreadable document does not stop the others
                reason = f"{type(exc).__name__}: {exc}"
                log.warning("knowledge %s could not be read: %s", ref.source, reason)
                self.report.failed[ref.source] = reason
            self._notify("read", done, len(refs))
        return pending

    async def _store(self, pending: list[_Pending]) -> None:
        """Store every chunk, reusing stored vectors where the text is the same, embedding the rest
        in batches."""
        model = self.embedder.model_id
        stray_vectors = _vectors(self._strays.values(), model)
        queue: list[tuple[_Pending, int]] = []
        for item in pending:
            old_chunks = await self._old_chunks(item.old)
            reusable = stray_vectors | _vectors(old_chunks.values(), model)
            for i, text in enumerate(item.chunks):
                cid = chunk_id(self.agent_id, item.doc.source, item.doc.hash, i)
                # Only a chunk of the old version (same bytes) or a stray can have this id.
                existing = old_chunks.get(cid) or self._strays.pop(cid, None)
                if existing is not None:
                    if existing.embedding_model == model and existing.content.text == text:
                        self.report.chunks_reused += 1
                        item.remaining -= 1
                        continue
                    await self.store.delete_memory(cid)  # chunked or embedded differently
                vector = reusable.get(text)
                if vector is None:
                    queue.append((item, i))
                else:
                    await self._add_chunk(item, i, vector)
                    self.report.chunks_reused += 1
            if item.remaining == 0:
                await self._finish(item)
        self._notify("embed", 0, len(queue))
        for start in range(0, len(queue), self.batch_size):
            batch = queue[start : start + self.batch_size]
            vectors = await self._embed([item.chunks[i] for item, i in batch])
            for (item, i), vector in zip(batch, vectors, strict=True):
                await self._add_chunk(item, i, vector.tolist())
                if item.remaining == 0:
                    await self._finish(item)
            self.report.chunks_embedded += len(batch)
            await self._save()
            self._notify("embed", start + len(batch), len(queue))

    async def _embed(self, chunks: list[str]) -> np.ndarray:
        """One vector per chunk: the normalized mean of the vectors of its parts (see
        :meth:`Chunking.embedding_parts`), all parts embedded in one call."""
        parts = [self.chunking.embedding_parts(chunk) for chunk in chunks]
        vectors = await self.embedder.embed([part for each in parts for part in each])
        out = np.empty((len(chunks), vectors.shape[1]), dtype=np.float32)
        at = 0
        for i, each in enumerate(parts):
            out[i] = vectors[at : at + len(each)].mean(axis=0)
            at += len(each)
        return normalize_rows(out)

    # -- pieces --------------------------------------------------------------------------------
    def _current(self, doc: KnowledgeDocument, digest: str) -> bool:
        return (
            doc.hash == digest
            and doc.chunking == self.chunking.signature
            and doc.embedding_model == self.embedder.model_id
        )

    def _plan(
        self, ref: SourceRef, doc: Document, chunks: list[str], old: KnowledgeDocument | None
    ) -> _Pending:
        if not chunks:
            self.report.empty.append(ref.source)
        entry = KnowledgeDocument(
            source=ref.source,
            title=doc.title,
            hash=doc.hash,
            chunks=len(chunks),
            words=count_words(doc.text),
            origin=ref.origin,
            shared=ref.shared,
            chunking=self.chunking.signature,
            embedding_model=self.embedder.model_id,
        )
        return _Pending(doc=doc, entry=entry, chunks=chunks, old=old, remaining=len(chunks))

    async def _old_chunks(self, old: KnowledgeDocument | None) -> dict[str, Memory]:
        """The previous version's stored chunks by id: their vectors are reused for the same text,
        so an edit re-embeds only what it changed."""
        chunks: dict[str, Memory] = {}
        for cid in old.chunk_ids(self.agent_id) if old is not None else ():
            memory = await self.store.get_memory(cid)
            if memory is not None:
                chunks[cid] = memory
        return chunks

    async def _add_chunk(self, item: _Pending, i: int, vector: list[float]) -> None:
        doc = item.doc
        await self.store.add_memory(
            Memory(
                id=chunk_id(self.agent_id, doc.source, doc.hash, i),
                agent_id=self.agent_id,
                room_id=self.room_id,
                entity_id=self.entity_id,
                kind=MemoryKind.KNOWLEDGE,
                content=Content(
                    text=item.chunks[i],
                    source="knowledge",
                    metadata={
                        "source": doc.source,
                        "title": doc.title,
                        "chunk_index": i,
                        "chunk_count": len(item.chunks),
                        "document_hash": doc.hash,
                    },
                ),
                embedding=vector,
                embedding_model=self.embedder.model_id,
                status=MemoryStatus.STORED,
            )
        )
        item.remaining -= 1

    async def _finish(self, item: _Pending) -> None:
        """Every chunk of the new version is stored: index it, then delete the old version's."""
        if item.old is not None:
            keep = set(item.entry.chunk_ids(self.agent_id))
            await self._delete(cid for cid in item.old.chunk_ids(self.agent_id) if cid not in keep)
            self.report.updated.append(item.entry.source)
        else:
            self.report.added.append(item.entry.source)
        self._record(item.entry)

    async def _forget(self, doc: KnowledgeDocument) -> None:
        await self._delete(doc.chunk_ids(self.agent_id))
        del self.index[doc.source]
        self._dirty = True

    async def _delete(self, ids: Iterable[str]) -> None:
        for cid in ids:
            if await self.store.delete_memory(cid):
                self.report.chunks_deleted += 1

    def _record(self, doc: KnowledgeDocument) -> None:
        self.index[doc.source] = doc
        self._dirty = True

    async def _save(self) -> None:
        if self._dirty:
            await save_index(self.store, self.agent_id, self.index)
            self._dirty = False

    def _notify(self, phase: Phase, done: int, total: int) -> None:
        if self.progress is not None:
            self.progress(phase, done, total)


def _vectors(memories: Iterable[Memory], model: str) -> dict[str, list[float]]:
    """Stored vectors of ``model`` by chunk text."""
    return {
        m.content.text: m.embedding
        for m in memories
        if m.embedding is not None and m.embedding_model == model
    }
